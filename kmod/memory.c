// SPDX-License-Identifier: GPL-2.0
/*
 * Device memory allocations: carved from the device's genalloc pool, charged
 * to the allocating process, zeroed before they are handed out, and
 * returned to the pool only when the last export covering them is gone.
 */
#include <linux/cred.h>
#include <linux/dma-resv.h>
#include <linux/genalloc.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/timekeeping.h>
#include <linux/user_namespace.h>
#include "peerdirect.h"
#include "trace.h"

/*
 * The quota is per user and device: the real uid of the process that
 * allocates, the identity the kernel charges RLIMIT_MEMLOCK-style
 * resources to.  Processes cannot multiply it (fork children, fds passed
 * with SCM_RIGHTS: same user, same quota) nor inherit another's usage
 * through a recycled pid.
 *
 * Nor can user namespaces: an allocation is also charged to the owner of
 * each user namespace between the caller and the initial one, as the
 * kernel's ucounts rlimits are (inc_rlimit_ucounts()), and must fit every
 * quota it is charged to.  A user who maps 65536 subordinate uids into a
 * namespace gets one quota for all of them, the user's own.
 */
#define PD_OWNER_LEVELS 33	/* the caller, then 32 nested namespaces */

static struct pd_owner *pd_owner_find(struct pd_device *pd, kuid_t uid)
{
	struct pd_owner *owner;

	lockdep_assert_held(&pd->lock);
	list_for_each_entry(owner, &pd->owners, node)
		if (uid_eq(owner->uid, uid))
			return owner;
	return NULL;
}

/* The users a charge by the current task goes to, each once; [0] its uid. */
static unsigned int pd_charge_uids(kuid_t *uids)
{
	const struct user_namespace *ns;
	unsigned int n = 0, i;

	uids[n++] = current_uid();
	for (ns = current_user_ns(); ns != &init_user_ns && n < PD_OWNER_LEVELS;
	     ns = ns->parent) {
		for (i = 0; i < n; i++)
			if (uid_eq(uids[i], ns->owner))
				break;
		if (i == n)
			uids[n++] = ns->owner;
	}
	return n;
}

static struct pd_owner *pd_owner_get(struct pd_device *pd, kuid_t uid)
{
	struct pd_owner *owner, *new;

	new = kzalloc(sizeof(*new), GFP_KERNEL_ACCOUNT);
	if (!new)
		return NULL;

	mutex_lock(&pd->lock);
	owner = pd_owner_find(pd, uid);
	if (owner) {
		kref_get(&owner->ref);
		mutex_unlock(&pd->lock);
		kfree(new);
		return owner;
	}
	kref_init(&new->ref);
	new->uid = uid;
	list_add(&new->node, &pd->owners);
	mutex_unlock(&pd->lock);
	return new;
}

/* Owners live on pd_device.owners: the final put happens under its lock. */
static void pd_owner_release(struct kref *ref)
{
	struct pd_owner *owner = container_of(ref, struct pd_owner, ref);

	list_del(&owner->node);
	kfree(owner);
}

static void pd_owners_put(struct pd_device *pd, struct pd_owner **owners,
			  unsigned int n)
{
	mutex_lock(&pd->lock);
	while (n--)
		kref_put(&owners[n]->ref, pd_owner_release);
	mutex_unlock(&pd->lock);
}

/* The owners a charge by the current task goes to, referenced; or NULL. */
static struct pd_owner **pd_owners_get(struct pd_device *pd, unsigned int *np)
{
	kuid_t uids[PD_OWNER_LEVELS];
	struct pd_owner **owners;
	unsigned int n, i;

	n = pd_charge_uids(uids);
	owners = kcalloc(n, sizeof(*owners), GFP_KERNEL_ACCOUNT);
	if (!owners)
		return NULL;
	for (i = 0; i < n; i++) {
		owners[i] = pd_owner_get(pd, uids[i]);
		if (!owners[i]) {
			pd_owners_put(pd, owners, i);
			kfree(owners);
			return NULL;
		}
	}
	*np = n;
	return owners;
}

/*
 * What the calling process's user has charged on @pd, as the quota sees
 * it: the most any level it is charged to has used (inside a user
 * namespace, usually its owner's), so quota - quota_used is what it may
 * still allocate.
 */
u64 pd_owner_used(struct pd_device *pd)
{
	kuid_t uids[PD_OWNER_LEVELS];
	struct pd_owner *owner;
	unsigned int n, i;
	u64 used = 0;

	n = pd_charge_uids(uids);
	mutex_lock(&pd->lock);
	for (i = 0; i < n; i++) {
		owner = pd_owner_find(pd, uids[i]);
		if (owner)
			used = max(used, owner->used);
	}
	mutex_unlock(&pd->lock);
	return used;
}

/*
 * The handle is reserved first and the allocation published last: once it
 * is in the xarray another thread may free it, so *handle and *alloc_size
 * are filled before and nothing touches the allocation after.
 */
int pd_alloc_create(struct pd_file *pfile, u64 size, u64 *handlep, u64 *sizep)
{
	struct pd_device *pd = pfile->pd;
	struct pd_owner **owners;
	struct pd_alloc *alloc;
	unsigned int i, n;
	unsigned long addr;
	u32 handle;
	int ret;

	/* A size no device state could satisfy is the caller's error. */
	if (!size || size > pd->mem_size)
		return -EINVAL;
	size = round_up(size, pd->page_size);

	alloc = kzalloc(sizeof(*alloc), GFP_KERNEL_ACCOUNT);
	if (!alloc)
		return -ENOMEM;
	owners = pd_owners_get(pd, &n);
	if (!owners) {
		kfree(alloc);
		return -ENOMEM;
	}
	kref_init(&alloc->ref);
	dma_resv_init(&alloc->resv);
	INIT_LIST_HEAD(&alloc->exports);
	alloc->pd = pd;
	alloc->size = size;
	alloc->tgid = task_tgid_nr(current);
	alloc->pid = get_task_pid(current, PIDTYPE_TGID);
	alloc->created_ns = ktime_get_boottime_ns();

	mutex_lock(&pd->lock);
	if (pd->dead) {
		ret = -ENODEV;
		goto err_unlock;
	}
	for (i = 0; i < n; i++) {
		if (owners[i]->used + size > pd->quota) {
			ret = -EDQUOT;
			goto err_unlock;
		}
	}
	addr = gen_pool_alloc(pd->pool, size);
	if (!addr) {
		ret = -ENOMEM;
		goto err_unlock;
	}
	for (i = 0; i < n; i++)
		owners[i]->used += size;
	alloc->owners = owners;
	alloc->nr_owners = n;
	alloc->owner = owners[0];
	alloc->offset = addr - pd->page_size;
	list_add_tail(&alloc->node, &pd->allocs);
	WRITE_ONCE(pd->nr_allocs, pd->nr_allocs + 1);
	kref_get(&pd->ref);
	mutex_unlock(&pd->lock);

	/*
	 * Never hand out a previous user's bytes.  A PCI device waits here
	 * for a reset to end (killably), and may be gone meanwhile.
	 */
	ret = pd->ops->zero(pd, alloc->offset, size);
	if (ret) {
		pd_alloc_put(alloc);
		return ret;
	}

	/* A NULL entry reserves the index without making it visible. */
	ret = xa_alloc_cyclic(&pfile->allocs, &handle, NULL, XA_LIMIT(1, U32_MAX),
			      &pfile->next_handle, GFP_KERNEL_ACCOUNT);
	if (ret < 0) {
		pd_alloc_put(alloc);
		return ret == -EBUSY ? -ENOSPC : ret;
	}
	/* LIST reads it under pd_device.lock, which this does not hold. */
	WRITE_ONCE(alloc->handle, handle);
	*handlep = handle;
	*sizep = size;
	trace_peerdirect_alloc(pd->index, alloc->tgid, handle, alloc->offset, size);
	ret = xa_err(xa_store(&pfile->allocs, handle, alloc, GFP_KERNEL_ACCOUNT));
	if (ret) {
		xa_release(&pfile->allocs, handle);
		pd_alloc_put(alloc);
		return ret;
	}
	return 0;

err_unlock:
	while (n--)
		kref_put(&owners[n]->ref, pd_owner_release);
	mutex_unlock(&pd->lock);
	kfree(owners);
	put_pid(alloc->pid);
	dma_resv_fini(&alloc->resv);
	kfree(alloc);
	return ret;
}

static void pd_alloc_release(struct kref *ref)
{
	struct pd_alloc *alloc = container_of(ref, struct pd_alloc, ref);
	struct pd_device *pd = alloc->pd;
	unsigned int i;

	mutex_lock(&pd->lock);
	list_del(&alloc->node);
	WRITE_ONCE(pd->nr_allocs, pd->nr_allocs - 1);
	gen_pool_free(pd->pool, alloc->offset + pd->page_size, alloc->size);
	for (i = 0; i < alloc->nr_owners; i++) {
		alloc->owners[i]->used -= alloc->size;
		kref_put(&alloc->owners[i]->ref, pd_owner_release);
	}
	if (alloc->freed)
		atomic64_sub(alloc->size, &pd->quarantined);
	mutex_unlock(&pd->lock);

	kfree(alloc->owners);
	put_pid(alloc->pid);
	dma_resv_fini(&alloc->resv);
	kfree(alloc);
	pd_device_put(pd);
}

void pd_alloc_get(struct pd_alloc *alloc)
{
	kref_get(&alloc->ref);
}

void pd_alloc_put(struct pd_alloc *alloc)
{
	kref_put(&alloc->ref, pd_alloc_release);
}

/* Returns the allocation with a reference held, or NULL. */
struct pd_alloc *pd_alloc_lookup(struct pd_file *pfile, u64 handle)
{
	struct pd_alloc *alloc;

	if (!handle || handle > U32_MAX)
		return NULL;
	xa_lock(&pfile->allocs);
	alloc = xa_load(&pfile->allocs, handle);
	if (alloc)
		pd_alloc_get(alloc);
	xa_unlock(&pfile->allocs);
	return alloc;
}

/*
 * Drop the handle and revoke every export of the allocation.  The memory
 * itself stays charged and out of the pool until the last dma-buf over it
 * is released.
 */
int pd_alloc_free(struct pd_file *pfile, u64 handle)
{
	struct pd_device *pd = pfile->pd;
	struct pd_alloc *alloc;
	struct pd_revoke_result res = {};

	if (!handle || handle > U32_MAX)
		return -ENOENT;
	alloc = xa_erase(&pfile->allocs, handle);
	if (!alloc)
		return -ENOENT;

	mutex_lock(&pd->lock);
	alloc->freed = true;
	atomic64_add(alloc->size, &pd->quarantined);
	trace_peerdirect_free(pd->index, task_tgid_nr(current), handle,
			      alloc->size, alloc->nr_exports);
	mutex_unlock(&pd->lock);

	pd_revoke_alloc(alloc, PD_REVOKE_FREE, &res);
	pd_alloc_put(alloc);
	return 0;
}
