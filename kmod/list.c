// SPDX-License-Identifier: GPL-2.0
/*
 * PEERDIRECT_IOCTL_LIST: the exports of a device and their importers, and
 * its allocations with their owners, for administrators' tools (pdctl
 * exports, pdctl ps).  A stable interface, unlike debugfs.
 *
 * The records are snapshotted into kernel buffers under pd_device.lock,
 * sized beforehand from the caller's capacity (at most PEERDIRECT_LIST_MAX
 * records of each kind), and copied to userspace after the lock is
 * dropped: a reader that faults or stalls in copy_to_user holds up no
 * release, revoke or allocation.  Per-export counters live under each
 * dma-buf's reservation lock, taken with trylock as debugfs does: an
 * importer holding it marks the record BUSY instead of stalling the walk.
 */
#include <linux/capability.h>
#include <linux/cred.h>
#include <linux/dma-resv.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include "compat.h"
#include "peerdirect.h"

struct pd_list_snap {
	bool all;			/* CAP_SYS_ADMIN: every user's exports */
	bool attachments;		/* PEERDIRECT_LIST_ATTACHMENTS */
	kuid_t uid;
	struct peerdirect_export_info *exps;
	u32 cap_exps, nr_exps, total_exps;
	struct peerdirect_attach_info *atts;
	u32 cap_atts, nr_atts, total_atts;
	struct peerdirect_alloc_info *allocs;
	u32 cap_allocs, nr_allocs, total_allocs;
};

/* Under pd_device.lock and the export's reservation lock. */
static void pd_list_attachments(struct pd_list_snap *s, struct pd_export *exp,
				bool record)
{
	struct peerdirect_attach_info *a;
	struct pd_attach *pa;

	list_for_each_entry(pa, &exp->attachments, node) {
		s->total_atts++;
		if (!record || s->nr_atts >= s->cap_atts)
			continue;
		a = &s->atts[s->nr_atts++];
		a->export_id = exp->id;
		a->mapped_bytes = (u64)pa->maps * exp->length;
		a->since_ns = pa->since_ns;
		a->pins = pa->pins;
		a->maps = pa->maps;
		if (pd_attach_pinned(pa))
			a->flags |= PEERDIRECT_ATTACH_INFO_PINNED;
		if (pa->attach->importer_ops)
			a->flags |= PEERDIRECT_ATTACH_INFO_DYNAMIC;
		if (pa->attach->peer2peer)
			a->flags |= PEERDIRECT_ATTACH_INFO_PEER2PEER;
		if (pd_attach_revocable(pa))
			a->flags |= PEERDIRECT_ATTACH_INFO_REVOCABLE;
		strscpy(a->device, pd_dev_name(pa->attach->dev), sizeof(a->device));
	}
}

/* Under pd_device.lock. */
static void pd_list_export(struct pd_list_snap *s, struct pd_export *exp)
{
	struct peerdirect_export_info *e = NULL;
	struct dma_resv *resv = exp->dmabuf->resv;

	if (!s->all && !uid_eq(exp->uid, s->uid))
		return;
	s->total_exps++;
	if (s->nr_exps < s->cap_exps) {
		e = &s->exps[s->nr_exps++];
		e->export_id = exp->id;
		e->inode = exp->inode;
		e->handle = exp->alloc->handle;
		e->offset = exp->offset;
		e->length = exp->length;
		e->created_ns = exp->created_ns;
		e->tgid = pd_pid_nr(exp->pid);
		e->uid = from_kuid_munged(current_user_ns(), exp->uid);
		if (exp->rdonly)
			e->flags |= PEERDIRECT_EXPORT_INFO_RDONLY;
		if (exp->alloc->freed)
			e->flags |= PEERDIRECT_EXPORT_INFO_OWNER_GONE;
	}
	if (!dma_resv_trylock(resv)) {
		/* No attachment records, but counted: total sizes a retry. */
		if (e) {
			e->flags |= PEERDIRECT_EXPORT_INFO_BUSY;
			e->nr_attachments = atomic_read(&exp->nr_attachments);
		}
		if (s->attachments)
			s->total_atts += atomic_read(&exp->nr_attachments);
		return;
	}
	if (e) {
		if (exp->revoked) {
			e->flags |= PEERDIRECT_EXPORT_INFO_REVOKED;
			e->reason = exp->reason;
		}
		/* under the lock: the same list the records come from */
		e->nr_attachments = atomic_read(&exp->nr_attachments);
		e->nr_pins = exp->nr_pins;
		e->nr_maps = atomic_read(&exp->nr_maps);
		e->mapped_bytes = (u64)e->nr_maps * exp->length;
	}
	if (s->attachments)
		pd_list_attachments(s, exp, !!e);
	dma_resv_unlock(resv);
}

/* Under pd_device.lock. */
static void pd_list_alloc(struct pd_list_snap *s, struct pd_alloc *alloc)
{
	struct peerdirect_alloc_info *a;

	if (!s->all && !uid_eq(alloc->owner->uid, s->uid))
		return;
	s->total_allocs++;
	if (s->nr_allocs >= s->cap_allocs)
		return;
	a = &s->allocs[s->nr_allocs++];
	/* Set once the allocation is zeroed, outside the lock. */
	a->handle = READ_ONCE(alloc->handle);
	a->size = alloc->size;
	a->created_ns = alloc->created_ns;
	a->tgid = pd_pid_nr(alloc->pid);
	a->uid = from_kuid_munged(current_user_ns(), alloc->owner->uid);
	if (alloc->freed)
		a->flags |= PEERDIRECT_ALLOC_INFO_FREED;
	a->nr_exports = alloc->nr_exports;
}

/* Each record at @stride bytes: cut to it, or zero-padded up to it. */
static int pd_list_copy(void __user *ubase, u32 stride, const void *kbase,
			size_t ksize, u32 nr)
{
	size_t n = min_t(size_t, ksize, stride);
	u32 i;

	for (i = 0; i < nr; i++) {
		void __user *u = ubase + (size_t)i * stride;

		if (copy_to_user(u, kbase + i * ksize, n))
			return -EFAULT;
		if (stride > n && clear_user(u + n, stride - n))
			return -EFAULT;
	}
	return 0;
}

int pd_list(struct pd_device *pd, struct peerdirect_list *l)
{
	struct pd_list_snap s = {
		/* A view, not a refused operation: no audit record for others. */
		.all = ns_capable_noaudit(&init_user_ns, CAP_SYS_ADMIN),
		.attachments = l->flags & PEERDIRECT_LIST_ATTACHMENTS,
		.uid = current_uid(),
		.cap_exps = min_t(u32, l->nr_exports, PEERDIRECT_LIST_MAX),
		.cap_atts = min_t(u32, l->nr_attachments, PEERDIRECT_LIST_MAX),
		.cap_allocs = min_t(u32, l->nr_allocations, PEERDIRECT_LIST_MAX),
	};
	bool allocations = l->flags & PEERDIRECT_LIST_ALLOCATIONS;
	struct pd_alloc *alloc;
	struct pd_export *exp;
	int ret = -ENOMEM;

	if (s.cap_exps) {
		s.exps = kvcalloc(s.cap_exps, sizeof(*s.exps), GFP_KERNEL_ACCOUNT);
		if (!s.exps)
			goto out;
	}
	if (s.cap_atts) {
		s.atts = kvcalloc(s.cap_atts, sizeof(*s.atts), GFP_KERNEL_ACCOUNT);
		if (!s.atts)
			goto out;
	}
	if (s.cap_allocs) {
		s.allocs = kvcalloc(s.cap_allocs, sizeof(*s.allocs), GFP_KERNEL_ACCOUNT);
		if (!s.allocs)
			goto out;
	}

	mutex_lock(&pd->lock);
	list_for_each_entry(alloc, &pd->allocs, node) {
		if (allocations)
			pd_list_alloc(&s, alloc);
		list_for_each_entry(exp, &alloc->exports, node)
			pd_list_export(&s, exp);
	}
	mutex_unlock(&pd->lock);

	ret = pd_list_copy(u64_to_user_ptr(l->exports), l->export_size, s.exps,
			   sizeof(*s.exps), s.nr_exps);
	if (!ret)
		ret = pd_list_copy(u64_to_user_ptr(l->attachments), l->attach_size,
				   s.atts, sizeof(*s.atts), s.nr_atts);
	if (!ret)
		ret = pd_list_copy(u64_to_user_ptr(l->allocations), l->allocation_size,
				   s.allocs, sizeof(*s.allocs), s.nr_allocs);
	l->nr_exports = s.nr_exps;
	l->total_exports = s.total_exps;
	l->nr_attachments = s.nr_atts;
	l->total_attachments = s.total_atts;
	l->nr_allocations = s.nr_allocs;
	l->total_allocations = s.total_allocs;
out:
	kvfree(s.exps);
	kvfree(s.atts);
	kvfree(s.allocs);
	return ret;
}
