// SPDX-License-Identifier: GPL-2.0
/*
 * Revocation: take device memory away from importers and CPU mappings.
 *
 * Phase 1, per export, under its reservation lock: mark it revoked (attach,
 * pin, map, fault and CPU access fail from now on), tell dynamic importers
 * through move_notify, and zap CPU PTEs.  Phase 2, with no lock held: wait,
 * bounded by revoke_timeout_ms for the whole call, for fences to signal and
 * for importers to unmap (not for a free, see below).  An importer that
 * does not let go (a pinned one such as an RDMA MR, or a static one such as
 * a PRIME import) keeps its mapping; the memory under it stays quarantined
 * until its dma-buf is released, so it is never handed to anyone else.
 */
#include <linux/dcache.h>
#include <linux/dma-resv.h>
#include <linux/file.h>
#include <linux/mm.h>
#include <linux/slab.h>
#include "compat.h"
#include "peerdirect.h"

struct pd_revoke_set {
	struct pd_export **exps;
	unsigned int nr;
	unsigned int cap;
};

/*
 * Under pd_device.lock.  The dentry reference keeps the dma-buf (and so the
 * export) alive; a dentry already dying is skipped, its release is waiting
 * for pd_device.lock to unlink the export.
 */
static void pd_set_add(struct pd_revoke_set *set, struct pd_export *exp)
{
	if (set->nr >= set->cap)
		return;
	if (!lockref_get_not_dead(&exp->dentry->d_lockref))
		return;
	set->exps[set->nr++] = exp;
}

static int pd_set_alloc(struct pd_revoke_set *set, unsigned int cap)
{
	set->nr = 0;
	set->cap = cap;
	set->exps = NULL;
	if (!cap)
		return 0;
	set->exps = kvmalloc_array(cap, sizeof(*set->exps), GFP_KERNEL);
	return set->exps ? 0 : -ENOMEM;
}

static bool pd_revoke_one(struct pd_export *exp, u32 reason)
{
	struct dma_buf *dmabuf = exp->dmabuf;
	bool first = false;

	dma_resv_lock(dmabuf->resv, NULL);
	if (!exp->revoked) {
		exp->revoked = true;
		exp->reason = reason;
		first = true;
		pd_dma_buf_invalidate(dmabuf);
	}
	/* Under the lock, so a racing fault cannot reinstall a PTE. */
	unmap_mapping_range(d_inode(exp->dentry)->i_mapping, 0, 0, 1);
	dma_resv_unlock(dmabuf->resv);
	return first;
}

static void pd_revoke_set_run(struct pd_device *pdev, struct pd_revoke_set *set,
			      u32 reason, struct pd_revoke_result *res)
{
	unsigned long deadline = jiffies +
		msecs_to_jiffies(READ_ONCE(pd_revoke_timeout_ms));
	unsigned int i, newly = 0, pending = 0;

	for (i = 0; i < set->nr; i++) {
		if (pd_revoke_one(set->exps[i], reason)) {
			newly++;
			pd_file_queue_event(set->exps[i]->file, set->exps[i]);
		}
	}

	for (i = 0; i < set->nr; i++) {
		struct pd_export *exp = set->exps[i];
		long left;

		/*
		 * A free (or the owner's close) gains nothing from waiting:
		 * the memory stays quarantined until the importers let go
		 * anyway, and a close with many allocations must not sleep
		 * revoke_timeout_ms for each.
		 */
		if (reason == PD_REVOKE_FREE) {
			pending += atomic_read(&exp->nr_maps) != 0;
			continue;
		}
		left = max_t(long, (long)(deadline - jiffies), 0);
		dma_resv_wait_timeout(exp->dmabuf->resv, DMA_RESV_USAGE_BOOKKEEP,
				      false, left ? left : 1);
		left = max_t(long, (long)(deadline - jiffies), 0);
		if (!wait_event_timeout(exp->unmap_wq,
					!atomic_read(&exp->nr_maps), left)) {
			pending++;
			pr_warn_ratelimited("%s: export %llu (pid %d) still mapped by %d importer mapping(s) after revoke; memory quarantined until released\n",
					    pdev->name, exp->id, exp->tgid,
					    atomic_read(&exp->nr_maps));
		}
	}

	mutex_lock(&pdev->lock);
	pdev->nr_revoked[reason - 1] += newly;
	if (reason != PD_REVOKE_FREE)
		pdev->nr_revoke_timeouts += pending;
	mutex_unlock(&pdev->lock);

	for (i = 0; i < set->nr; i++)
		dput(set->exps[i]->dentry);

	res->revoked += newly;
	res->pending += pending;
}

/*
 * Without memory for the whole set (a free, a reset or an unplug must not
 * give up): one export at a time, each picked while it still looks
 * unrevoked.  @alloc NULL: every export of the device.
 */
static void pd_revoke_slowly(struct pd_device *pdev, struct pd_alloc *alloc,
			     u32 reason, struct pd_revoke_result *res)
{
	struct pd_export *one, *exp;
	struct pd_revoke_set set = { .exps = &one, .cap = 1 };
	struct pd_alloc *a;

	do {
		set.nr = 0;
		mutex_lock(&pdev->lock);
		list_for_each_entry(a, &pdev->allocs, node) {
			if (alloc && a != alloc)
				continue;
			list_for_each_entry(exp, &a->exports, node) {
				if (READ_ONCE(exp->revoked))
					continue;
				pd_set_add(&set, exp);
				if (set.nr)
					goto found;
			}
		}
found:
		mutex_unlock(&pdev->lock);
		if (set.nr)
			pd_revoke_set_run(pdev, &set, reason, res);
	} while (set.nr);
}

int pd_revoke_alloc(struct pd_alloc *alloc, u32 reason,
		    struct pd_revoke_result *res)
{
	struct pd_device *pdev = alloc->pdev;
	struct pd_revoke_set set;
	struct pd_export *exp;

	mutex_lock(&pdev->lock);
	if (pd_set_alloc(&set, alloc->nr_exports)) {
		mutex_unlock(&pdev->lock);
		pd_revoke_slowly(pdev, alloc, reason, res);
		return 0;
	}
	list_for_each_entry(exp, &alloc->exports, node)
		pd_set_add(&set, exp);
	mutex_unlock(&pdev->lock);

	pd_revoke_set_run(pdev, &set, reason, res);
	kvfree(set.exps);
	return 0;
}

/* @owner NULL: any process's export (administrator). */
int pd_revoke_export_id(struct pd_device *pdev, struct pd_file *owner,
			u64 export_id, u32 reason, struct pd_revoke_result *res)
{
	struct pd_export *one, *exp;
	struct pd_revoke_set set = { .exps = &one, .cap = 1 };
	struct pd_alloc *alloc;

	mutex_lock(&pdev->lock);
	list_for_each_entry(alloc, &pdev->allocs, node) {
		list_for_each_entry(exp, &alloc->exports, node) {
			if (exp->id != export_id)
				continue;
			if (!owner || exp->file == owner)
				pd_set_add(&set, exp);
			goto found;
		}
	}
found:
	mutex_unlock(&pdev->lock);

	if (set.nr)
		pd_revoke_set_run(pdev, &set, reason, res);
	return set.nr ? 0 : -ENOENT;
}

int pd_revoke_device(struct pd_device *pdev, u32 reason,
		     struct pd_revoke_result *res)
{
	struct pd_revoke_set set;
	struct pd_export *exp;
	struct pd_alloc *alloc;
	unsigned int n = 0;

	mutex_lock(&pdev->lock);
	list_for_each_entry(alloc, &pdev->allocs, node)
		n += alloc->nr_exports;
	if (pd_set_alloc(&set, n)) {
		mutex_unlock(&pdev->lock);
		pd_revoke_slowly(pdev, NULL, reason, res);
		return 0;
	}
	list_for_each_entry(alloc, &pdev->allocs, node)
		list_for_each_entry(exp, &alloc->exports, node)
			pd_set_add(&set, exp);
	mutex_unlock(&pdev->lock);

	pd_revoke_set_run(pdev, &set, reason, res);
	kvfree(set.exps);
	return 0;
}
