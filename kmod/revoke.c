// SPDX-License-Identifier: GPL-2.0
/*
 * Revocation: take device memory away from importers and CPU mappings.
 *
 * Phase 1 runs under pd_device.lock, export by export under its reservation
 * lock: mark it revoked (attach, pin, map, fault, CPU access and vmap refuse
 * it from now on), invalidate the importers the kernel's contract lets us
 * invalidate, zap CPU PTEs, and queue the owner's event.  Holding
 * pd_device.lock over the walk means it allocates nothing (it links the
 * exports it revoked through pd_export.revoke_node) and no export can be
 * created or released in the middle of it.
 *
 * Phase 2 runs with no lock held: wait, bounded by revoke_timeout_ms for
 * the whole call and killable, for fences to signal and for importers to
 * unmap (not for a free, see below).  It waits only for the exports this
 * call revoked; "pending" counts those still mapped.  An importer that does
 * not let go (a pinned one such as an RDMA MR, or a static one such as a
 * PRIME import) keeps its mapping; the memory under it stays quarantined
 * until its dma-buf is released, so it is never handed to anyone else.
 */
#include <linux/dcache.h>
#include <linux/dma-resv.h>
#include <linux/mm.h>
#include <linux/sched/signal.h>
#include <linux/timekeeping.h>
#include "compat.h"
#include "peerdirect.h"
#include "trace.h"

struct pd_revoke_ctx {
	u32 reason;
	u32 revoked;
	struct list_head list;	/* exports this call revoked, dentries held */
};

static void pd_revoke_ctx_init(struct pd_revoke_ctx *ctx, u32 reason)
{
	ctx->reason = reason;
	ctx->revoked = 0;
	INIT_LIST_HEAD(&ctx->list);
}

/*
 * Before 7.1 the kernel cannot tell a pinned importer that may be
 * invalidated from one that may not (RDMA's pinned importers only log "Invalidate callback
 * should not be called when memory is pinned"), and the contract of
 * dma_buf_pin() is that pinned memory does not move: such attachments are
 * not invalidated but quarantined.  Without CONFIG_DMABUF_MOVE_NOTIFY the
 * core pins once per map on the importer's behalf; only pins beyond those
 * are the importer's.  From 7.1 dma_buf_invalidate_mappings() reaches only
 * importers with the op, and for a pinned one the op is a revocation it
 * agreed to (dma_buf_attach_revocable()).
 */
/* The importer's own pins, beyond those the core takes per map. */
bool pd_attach_pinned(const struct pd_attach *pa)
{
	return pa->pins > (PD_MOVE_NOTIFY ? 0 : pa->maps);
}

/*
 * Whether a revoke makes the importer let go: the one rule that
 * pd_invalidate() follows and PEERDIRECT_IOCTL_LIST reports.
 */
bool pd_attach_revocable(const struct pd_attach *pa)
{
#ifdef PD_HAVE_DMA_BUF_ATTACH_REVOCABLE
	return dma_buf_attach_revocable(pa->attach);
#else
	const struct dma_buf_attach_ops *ops = pa->attach->importer_ops;

	return ops && ops->PD_IMPORTER_INVALIDATE && !pd_attach_pinned(pa);
#endif
}

#ifdef PD_HAVE_DMA_BUF_ATTACH_REVOCABLE
static void pd_invalidate(struct pd_export *exp)
{
	pd_dma_buf_invalidate(exp->dmabuf);
}
#else
static void pd_invalidate(struct pd_export *exp)
{
	struct pd_attach *pa;

	dma_resv_assert_held(exp->dmabuf->resv);
	list_for_each_entry(pa, &exp->attachments, node)
		if (pd_attach_revocable(pa))
			pa->attach->importer_ops->PD_IMPORTER_INVALIDATE(pa->attach);
}
#endif

/*
 * Under pd_device.lock, which keeps @exp and its dma-buf from being
 * released (release waits for it to unlink the export).  A dma-buf whose
 * dentry is already dying has no fd, mapping or importer left and is
 * skipped.  The dentry reference taken for a newly revoked export keeps it
 * alive through phase 2.
 */
static void pd_revoke_locked(struct pd_revoke_ctx *ctx, struct pd_export *exp)
{
	struct dma_resv *resv = exp->dmabuf->resv;
	bool first = false, earlier;
	u32 nr_attach = 0;

	dma_resv_lock(resv, NULL);
	earlier = exp->revoked;
	if (!earlier && lockref_get_not_dead(&exp->dentry->d_lockref)) {
		mutex_lock(&exp->vmap_lock);
		exp->revoked = true;
		exp->reason = ctx->reason;
		mutex_unlock(&exp->vmap_lock);
		/* Counted under this lock, as attach and detach do. */
		nr_attach = atomic_read(&exp->nr_attachments);
		exp->revoked_attached = nr_attach != 0;
		pd_invalidate(exp);
		/* Under the lock, so a racing fault cannot reinstall a PTE. */
		unmap_mapping_range(d_inode(exp->dentry)->i_mapping, 0, 0, 1);
		first = true;
	}
	dma_resv_unlock(resv);

	if (first) {
		trace_peerdirect_revoke(exp->alloc->pd->index, exp->id, exp->tgid,
					ctx->reason, nr_attach,
					atomic_read(&exp->nr_maps));
		list_add_tail(&exp->revoke_node, &ctx->list);
		ctx->revoked++;
		pd_file_queue_event(exp->pfile, exp, ctx->reason);
		pd_subs_notify(exp, ctx->reason);
	} else if (ctx->reason == PD_REVOKE_UNPLUG && earlier) {
		/*
		 * Revoked earlier, but its owner still learns the device is
		 * gone (uncounted in revoked/unplug).  One whose last fd was
		 * just closed gets a record too: telling a dying dentry apart
		 * here would race its release anyway, and a device never
		 * reuses an export id, so the owner can only ignore it.
		 */
		pd_file_queue_event(exp->pfile, exp, PD_REVOKE_UNPLUG);
	}
}

/* Fences of every usage, in slices so that a fatal signal ends the wait. */
static void pd_wait_fences(struct dma_resv *resv, unsigned long deadline)
{
	while (!dma_resv_test_signaled(resv, DMA_RESV_USAGE_BOOKKEEP)) {
		long left = (long)(deadline - jiffies);

		if (left <= 0 || fatal_signal_pending(current))
			return;
		dma_resv_wait_timeout(resv, DMA_RESV_USAGE_BOOKKEEP, false,
				      min_t(long, left, HZ / 10));
	}
}

static void pd_wait_idle(struct pd_export *exp, unsigned long deadline)
{
	long left;

	/* A sibling's fence is no reason to hold up an export nobody imported. */
	if (exp->revoked_attached)
		pd_wait_fences(exp->dmabuf->resv, deadline);
	left = max_t(long, (long)(deadline - jiffies), 0);
	wait_event_killable_timeout(exp->unmap_wq, !pd_export_busy(exp), left);
}

/*
 * Phase 2: one deadline for the whole call.  A free (or the owner's close)
 * gains nothing from waiting: the memory stays quarantined until the
 * importers let go anyway, and a close with many allocations must not sleep
 * revoke_timeout_ms for each.
 */
static void pd_revoke_finish(struct pd_device *pd, struct pd_revoke_ctx *ctx,
			     struct pd_revoke_result *res)
{
	bool wait = ctx->reason != PD_REVOKE_FREE;
	unsigned long deadline = jiffies +
		msecs_to_jiffies(READ_ONCE(pd_revoke_timeout_ms));
	struct pd_export *exp, *tmp;
	u64 start = ktime_get_ns();
	u32 pending = 0;
	bool busy;

	list_for_each_entry_safe(exp, tmp, &ctx->list, revoke_node) {
		if (wait)
			pd_wait_idle(exp, deadline);
		busy = pd_export_busy(exp);
		trace_peerdirect_revoke_done(pd->index, exp->id, ctx->reason, wait,
					     div_u64(ktime_get_ns() - start,
						     NSEC_PER_USEC), busy);
		if (busy) {
			pending++;
			if (wait)
				pr_warn_ratelimited("%s: export %llu (pid %d) still mapped by %d importer mapping(s)%s after revoke; memory quarantined until released\n",
						    pd->name, exp->id, exp->tgid,
						    atomic_read(&exp->nr_maps),
						    READ_ONCE(exp->vmapped) ? " and a vmap" : "");
		}
		list_del_init(&exp->revoke_node);
		dput(exp->dentry);
	}

	if (wait && pending) {
		mutex_lock(&pd->lock);
		atomic64_add(pending, &pd->nr_revoke_timeouts);
		mutex_unlock(&pd->lock);
	}
	res->revoked += ctx->revoked;
	res->pending += pending;
}

/* Under pd_device.lock. */
static void pd_revoke_count(struct pd_device *pd, struct pd_revoke_ctx *ctx)
{
	atomic64_add(ctx->revoked, &pd->nr_revoked[ctx->reason - 1]);
}

int pd_revoke_alloc(struct pd_alloc *alloc, u32 reason,
		    struct pd_revoke_result *res)
{
	struct pd_device *pd = alloc->pd;
	struct pd_revoke_ctx ctx;
	struct pd_export *exp;

	pd_revoke_ctx_init(&ctx, reason);
	mutex_lock(&pd->lock);
	list_for_each_entry(exp, &alloc->exports, node)
		pd_revoke_locked(&ctx, exp);
	pd_revoke_count(pd, &ctx);
	mutex_unlock(&pd->lock);

	pd_revoke_finish(pd, &ctx, res);
	return 0;
}

/* @owner NULL: any process's export (administrator). */
int pd_revoke_export_id(struct pd_device *pd, struct pd_file *owner,
			u64 export_id, u32 reason, struct pd_revoke_result *res)
{
	struct pd_revoke_ctx ctx;
	struct pd_export *exp;
	struct pd_alloc *alloc;
	int ret = -ENOENT;

	pd_revoke_ctx_init(&ctx, reason);
	mutex_lock(&pd->lock);
	list_for_each_entry(alloc, &pd->allocs, node) {
		list_for_each_entry(exp, &alloc->exports, node) {
			if (exp->id != export_id)
				continue;
			if (!owner || exp->pfile == owner) {
				pd_revoke_locked(&ctx, exp);
				ret = 0;
			}
			goto found;
		}
	}
found:
	pd_revoke_count(pd, &ctx);
	mutex_unlock(&pd->lock);

	pd_revoke_finish(pd, &ctx, res);
	return ret;
}

static void pd_revoke_all(struct pd_device *pd, struct pd_revoke_ctx *ctx,
			  bool begin_reset)
{
	struct pd_export *exp;
	struct pd_alloc *alloc;

	mutex_lock(&pd->lock);
	if (begin_reset) {
		WRITE_ONCE(pd->resetting, pd->resetting + 1);
		atomic64_inc(&pd->nr_resets);
	}
	list_for_each_entry(alloc, &pd->allocs, node)
		list_for_each_entry(exp, &alloc->exports, node)
			pd_revoke_locked(ctx, exp);
	pd_revoke_count(pd, ctx);
	mutex_unlock(&pd->lock);
}

void pd_revoke_device(struct pd_device *pd, u32 reason,
		      struct pd_revoke_result *res)
{
	struct pd_revoke_ctx ctx;

	pd_revoke_ctx_init(&ctx, reason);
	pd_revoke_all(pd, &ctx, false);
	pd_revoke_finish(pd, &ctx, res);
}

/*
 * A device reset: from the walk on, exports wait (killably) until
 * pd_reset_done(), so none made during the reset survives it, and the
 * walk revokes every export that exists (reason RESET).  Allocations stay.
 */
void pd_reset_prepare(struct pd_device *pd, struct pd_revoke_result *res)
{
	struct pd_revoke_ctx ctx;

	pd_revoke_ctx_init(&ctx, PD_REVOKE_RESET);
	pd_revoke_all(pd, &ctx, true);
	pd_revoke_finish(pd, &ctx, res);
}

void pd_reset_done(struct pd_device *pd)
{
	mutex_lock(&pd->lock);
	if (!WARN_ON_ONCE(!pd->resetting))
		WRITE_ONCE(pd->resetting, pd->resetting - 1);
	mutex_unlock(&pd->lock);
	wake_up_all(&pd->reset_wq);
}
