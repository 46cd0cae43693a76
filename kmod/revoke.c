// SPDX-License-Identifier: GPL-2.0
/*
 * Revocation: take device memory away from importers and CPU mappings.
 *
 * Phase 1 runs under pd_device.lock and never waits for an importer: it
 * marks each export revoked (pin, map, faults, CPU access and vmap refuse
 * it from then on), takes a dentry reference that keeps it alive, links it
 * through pd_export.revoke_node (no allocation) and queues the owner's
 * event.  Holding pd_device.lock over the walk means no export can be
 * created or released in the middle of it; it is held for that walk only.
 *
 * Phase 2 runs with no device lock held, with one deadline for the whole
 * call (revoke_timeout_ms), killable: zap CPU PTEs, then take each
 * reservation lock (polled: an importer may hold it as long as it likes,
 * and a ww_mutex has no timed lock) to invalidate the importers the
 * kernel's contract lets us invalidate and zap again, then wait for fences
 * to signal and for importers to unmap (not for a free, see below).  An
 * export whose reservation an importer still holds at the deadline (or
 * when the caller is killed) is finished by revoke_work once the importer
 * lets go, and counts as pending.  "pending" counts the exports this call
 * revoked that are still mapped.  A reset also waits, within its deadline,
 * for the revocations other calls marked and have not completed (their
 * phase 2 under way, or their revoke_work waiting for an importer): its
 * walk skips those exports, yet it must not reset the device under a
 * revocable importer that is still mapped; what is left at the deadline
 * counts as pending.  remove() waits for them without bound
 * (pd_device_wait_unreachable()).  An importer that does not let go (a
 * pinned one such as an RDMA MR, or a static one such as a PRIME import)
 * keeps its mapping; the memory under it stays quarantined until its
 * dma-buf is released, so it is never handed to anyone else.
 */
#include <linux/dcache.h>
#include <linux/dma-resv.h>
#include <linux/mm.h>
#include <linux/sched/signal.h>
#include <linux/timekeeping.h>
#include <linux/workqueue.h>
#include "compat.h"
#include "peerdirect.h"
#include "trace.h"

struct pd_revoke_ctx {
	u32 reason;
	u32 revoked;
	struct list_head list;	/* exports this call revoked, dentries held */
	bool wait_others;	/* a reset: wait for other calls' revocations */
	u32 others;		/* met marked, their revocation not complete */
};

/* Revocations an importer's reservation held past their call's deadline. */
static struct workqueue_struct *pd_revoke_wq;
#define PD_REVOKE_RETRY_MS	10

static void pd_revoke_ctx_init(struct pd_revoke_ctx *ctx, u32 reason)
{
	ctx->reason = reason;
	ctx->revoked = 0;
	INIT_LIST_HEAD(&ctx->list);
	ctx->wait_others = false;
	ctx->others = 0;
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
/*
 * The importer's own pins, beyond those the core takes per map.  Where the
 * build cannot tell whether the core pins per map (PD_MOVE_NOTIFY < 0,
 * compat_notify.h), every pin may be the importer's.
 */
bool pd_attach_pinned(const struct pd_attach *pa)
{
	return pa->pins > (PD_MOVE_NOTIFY == 0 ? pa->maps : 0);
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
 * Phase 1, under pd_device.lock, which keeps @exp and its dma-buf from
 * being released (release waits for it to unlink the export).  A dma-buf
 * whose dentry is already dying has no fd, mapping or importer left and is
 * skipped.  The dentry reference taken for a newly revoked export keeps it
 * alive until its revocation is complete.  Takes no reservation lock and
 * calls no importer.
 */
static void pd_revoke_mark(struct pd_revoke_ctx *ctx, struct pd_export *exp)
{
	bool earlier = exp->revoked;

	lockdep_assert_held(&exp->alloc->pd->lock);
	if (!earlier && lockref_get_not_dead(&exp->dentry->d_lockref)) {
		/* vmap_lock orders it against a vmap (scratch page after). */
		mutex_lock(&exp->vmap_lock);
		WRITE_ONCE(exp->reason, ctx->reason);
		WRITE_ONCE(exp->revoked, true);
		mutex_unlock(&exp->vmap_lock);
		/* Until pd_revoke_complete(), by phase 2 or revoke_work. */
		WRITE_ONCE(exp->revoke_open, true);
		atomic_inc(&exp->alloc->pd->nr_revoking);
		trace_peerdirect_revoke(exp->alloc->pd->index, exp->id, exp->tgid,
					ctx->reason, atomic_read(&exp->nr_attachments),
					atomic_read(&exp->nr_maps));
		list_add_tail(&exp->revoke_node, &ctx->list);
		ctx->revoked++;
		pd_file_queue_event(exp->pfile, exp, ctx->reason);
		pd_subs_notify(exp, ctx->reason);
		return;
	}
	/* Another call's, under way: a reset waits for it (phase 2). */
	if (earlier && READ_ONCE(exp->revoke_open))
		ctx->others++;
	if (ctx->reason == PD_REVOKE_UNPLUG && earlier) {
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

/*
 * What a mapping made before the mark still holds, undone under the
 * reservation lock, which pin, map and the fault handler hold while they
 * check the flag: importers invalidated, CPU PTEs zapped (a fault that saw
 * "not revoked" has let go of the lock by now, so its PTE goes too).
 */
static void pd_revoke_complete(struct pd_export *exp)
{
	struct pd_device *pd = exp->alloc->pd;

	dma_resv_assert_held(exp->dmabuf->resv);
	/* Counted under this lock, as attach and detach do. */
	exp->revoked_attached = atomic_read(&exp->nr_attachments) != 0;
	pd_invalidate(exp);
	unmap_mapping_range(d_inode(exp->dentry)->i_mapping, 0, 0, 1);
	/* Complete: a removal or reset waiting for it may go on. */
	WRITE_ONCE(exp->revoke_open, false);
	if (atomic_dec_and_test(&pd->nr_revoking))
		wake_up_all(&pd->reach_wq);
}

/* The end of a revocation whose call's deadline passed; owns its dentry. */
void pd_revoke_work(struct work_struct *work)
{
	struct pd_export *exp = container_of(to_delayed_work(work),
					     struct pd_export, revoke_work);
	struct dma_resv *resv = exp->dmabuf->resv;

	/* Polled, not waited for: a kworker must not sleep for an importer. */
	if (!dma_resv_trylock(resv)) {
		queue_delayed_work(pd_revoke_wq, &exp->revoke_work,
				   msecs_to_jiffies(PD_REVOKE_RETRY_MS));
		return;
	}
	pd_revoke_complete(exp);
	dma_resv_unlock(resv);
	dput(exp->dentry);
}

/*
 * The reservation lock by @deadline, polled once a jiffy, killably (a
 * ww_mutex has no timed lock); tried once when !@wait.
 */
static bool pd_revoke_lock(struct dma_resv *resv, unsigned long deadline,
			   bool wait)
{
	while (!dma_resv_trylock(resv)) {
		if (!wait || time_after_eq(jiffies, deadline) ||
		    fatal_signal_pending(current))
			return false;
		schedule_timeout_killable(1);
	}
	return true;
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
 * A reset's wait for the revocations other calls marked before its walk
 * and have not completed (@ctx->others of them), until @deadline,
 * killably: pd_device.nr_revoking back to the @deferred of its own that
 * this call left to revoke_work.  It has some only when the deadline has
 * passed (or a fatal signal came), so it waits only when it has none.
 * Returns how many of the others are still incomplete: counted from
 * nr_revoking, which revocations marked after the walk also raise, hence
 * at most @ctx->others.
 */
static u32 pd_revoke_wait_others(struct pd_device *pd, struct pd_revoke_ctx *ctx,
				 unsigned long deadline, u32 deferred)
{
	long left = max_t(long, (long)(deadline - jiffies), 0);
	int open;

	if (!deferred && left)
		wait_event_killable_timeout(pd->reach_wq,
					    !atomic_read(&pd->nr_revoking), left);
	open = atomic_read(&pd->nr_revoking) - (int)deferred;
	return clamp_t(int, open, 0, ctx->others);
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
	LIST_HEAD(held);
	u32 pending = 0, deferred = 0;
	bool busy;

	/*
	 * CPU mappings first, everywhere: no lock needed to zap.  The mark
	 * (a store of revoked) before the zap's reads of the page tables,
	 * paired with the fault handler's smp_mb() between its PTE inserts
	 * and its second read of the flag: a fault that read "not revoked"
	 * before the mark and inserted after this zap sees the flag then and
	 * zaps what it inserted itself.
	 */
	smp_mb();
	list_for_each_entry(exp, &ctx->list, revoke_node)
		unmap_mapping_range(d_inode(exp->dentry)->i_mapping, 0, 0, 1);
	/* Every reservation free now, then the held ones until the deadline. */
	list_for_each_entry_safe(exp, tmp, &ctx->list, revoke_node) {
		if (!dma_resv_trylock(exp->dmabuf->resv)) {
			list_move_tail(&exp->revoke_node, &held);
			continue;
		}
		pd_revoke_complete(exp);
		dma_resv_unlock(exp->dmabuf->resv);
	}
	list_for_each_entry_safe(exp, tmp, &held, revoke_node) {
		if (pd_revoke_lock(exp->dmabuf->resv, deadline, wait)) {
			pd_revoke_complete(exp);
			dma_resv_unlock(exp->dmabuf->resv);
			list_move_tail(&exp->revoke_node, &ctx->list);
			continue;
		}
		/* revoke_work finishes it, with the dentry reference. */
		list_del_init(&exp->revoke_node);
		trace_peerdirect_revoke_done(pd->index, exp->id, ctx->reason, wait,
					     div_u64(ktime_get_ns() - start,
						     NSEC_PER_USEC), true);
		pending++;
		deferred++;
		if (wait)
			pr_warn_ratelimited("%s: export %llu (pid %d): an importer holds its reservation past revoke_timeout_ms; its revocation completes when it lets go\n",
					    pd->name, exp->id, exp->tgid);
		queue_delayed_work(pd_revoke_wq, &exp->revoke_work, 0);
	}

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
	if (ctx->wait_others && ctx->others)
		pending += pd_revoke_wait_others(pd, ctx, deadline, deferred);

	if (wait && pending)
		atomic64_add(pending, &pd->nr_revoke_timeouts);
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
		pd_revoke_mark(&ctx, exp);
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
				pd_revoke_mark(&ctx, exp);
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
			pd_revoke_mark(ctx, exp);
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
 * walk revokes every export that exists (reason RESET).  One another call
 * revoked before and has not finished revoking is waited for within the
 * reset's deadline (pending after it).  Allocations stay.
 */
void pd_reset_prepare(struct pd_device *pd, struct pd_revoke_result *res)
{
	struct pd_revoke_ctx ctx;

	pd_revoke_ctx_init(&ctx, PD_REVOKE_RESET);
	ctx.wait_others = true;
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

int pd_revoke_init(void)
{
	pd_revoke_wq = alloc_workqueue("peerdirect_revoke", WQ_UNBOUND, 0);
	return pd_revoke_wq ? 0 : -ENOMEM;
}

/* After every dma-buf is gone: nothing is queued any more. */
void pd_revoke_exit(void)
{
	destroy_workqueue(pd_revoke_wq);
}
