// SPDX-License-Identifier: GPL-2.0
/*
 * Device memory allocations: carved from the device's genalloc pool, charged
 * to the allocating process, zeroed before they are handed out, and
 * returned to the pool only when the last export covering them is gone.
 */
#include <linux/genalloc.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include "peerdirect.h"

struct pd_owner *pd_owner_get(struct pd_device *pdev, pid_t tgid)
{
	struct pd_owner *owner, *new;

	new = kzalloc(sizeof(*new), GFP_KERNEL);
	if (!new)
		return NULL;

	mutex_lock(&pdev->lock);
	list_for_each_entry(owner, &pdev->owners, node) {
		if (owner->tgid == tgid) {
			kref_get(&owner->ref);
			mutex_unlock(&pdev->lock);
			kfree(new);
			return owner;
		}
	}
	kref_init(&new->ref);
	new->pdev = pdev;
	new->tgid = tgid;
	list_add(&new->node, &pdev->owners);
	mutex_unlock(&pdev->lock);
	return new;
}

static void pd_owner_release(struct kref *ref)
{
	struct pd_owner *owner = container_of(ref, struct pd_owner, ref);

	list_del(&owner->node);
	kfree(owner);
}

/* Owners live on pd_device.owners, so the final put happens under its lock. */
void pd_owner_put(struct pd_owner *owner)
{
	struct pd_device *pdev = owner->pdev;

	mutex_lock(&pdev->lock);
	kref_put(&owner->ref, pd_owner_release);
	mutex_unlock(&pdev->lock);
}

/*
 * The handle is reserved first and the allocation published last: once it
 * is in the xarray another thread may free it, so *handle and *alloc_size
 * are filled before and nothing touches the allocation after.
 */
int pd_alloc_create(struct pd_file *file, u64 size, u64 *handlep, u64 *sizep)
{
	struct pd_device *pdev = file->pdev;
	struct pd_owner *owner = file->owner;
	struct pd_alloc *alloc;
	unsigned long addr;
	u32 handle;
	int ret;

	if (!size || size > pdev->mem_size)
		return size ? -ENOMEM : -EINVAL;
	size = round_up(size, pdev->page_size);

	alloc = kzalloc(sizeof(*alloc), GFP_KERNEL);
	if (!alloc)
		return -ENOMEM;
	kref_init(&alloc->ref);
	INIT_LIST_HEAD(&alloc->exports);
	alloc->pdev = pdev;
	alloc->size = size;
	alloc->tgid = file->tgid;

	mutex_lock(&pdev->lock);
	if (pdev->dead) {
		ret = -ENODEV;
		goto err_unlock;
	}
	if (owner->used + size > pdev->quota) {
		ret = -EDQUOT;
		goto err_unlock;
	}
	addr = gen_pool_alloc(pdev->pool, size);
	if (!addr) {
		ret = -ENOMEM;
		goto err_unlock;
	}
	owner->used += size;
	kref_get(&owner->ref);
	alloc->owner = owner;
	alloc->offset = addr - pdev->page_size;
	list_add_tail(&alloc->node, &pdev->allocs);
	kref_get(&pdev->ref);
	mutex_unlock(&pdev->lock);

	/* Never hand out a previous user's bytes. */
	pdev->ops->zero(pdev, alloc->offset, size);

	/* A NULL entry reserves the index without making it visible. */
	ret = xa_alloc_cyclic(&file->allocs, &handle, NULL, XA_LIMIT(1, U32_MAX),
			      &file->next_handle, GFP_KERNEL);
	if (ret < 0) {
		pd_alloc_put(alloc);
		return ret == -EBUSY ? -ENOSPC : ret;
	}
	alloc->handle = handle;
	*handlep = handle;
	*sizep = size;
	ret = xa_err(xa_store(&file->allocs, handle, alloc, GFP_KERNEL));
	if (ret) {
		xa_release(&file->allocs, handle);
		pd_alloc_put(alloc);
		return ret;
	}
	return 0;

err_unlock:
	mutex_unlock(&pdev->lock);
	kfree(alloc);
	return ret;
}

static void pd_alloc_release(struct kref *ref)
{
	struct pd_alloc *alloc = container_of(ref, struct pd_alloc, ref);
	struct pd_device *pdev = alloc->pdev;
	struct pd_owner *owner = alloc->owner;

	mutex_lock(&pdev->lock);
	list_del(&alloc->node);
	gen_pool_free(pdev->pool, alloc->offset + pdev->page_size, alloc->size);
	owner->used -= alloc->size;
	if (alloc->freed)
		pdev->quarantined -= alloc->size;
	kref_put(&owner->ref, pd_owner_release);
	mutex_unlock(&pdev->lock);

	kfree(alloc);
	pd_device_put(pdev);
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
struct pd_alloc *pd_alloc_lookup(struct pd_file *file, u64 handle)
{
	struct pd_alloc *alloc;

	if (!handle || handle > U32_MAX)
		return NULL;
	xa_lock(&file->allocs);
	alloc = xa_load(&file->allocs, handle);
	if (alloc)
		pd_alloc_get(alloc);
	xa_unlock(&file->allocs);
	return alloc;
}

/*
 * Drop the handle and revoke every export of the allocation.  The memory
 * itself stays charged and out of the pool until the last dma-buf over it
 * is released.
 */
int pd_alloc_free(struct pd_file *file, u64 handle)
{
	struct pd_device *pdev = file->pdev;
	struct pd_alloc *alloc;
	struct pd_revoke_result res = {};

	if (!handle || handle > U32_MAX)
		return -ENOENT;
	alloc = xa_erase(&file->allocs, handle);
	if (!alloc)
		return -ENOENT;

	mutex_lock(&pdev->lock);
	alloc->freed = true;
	pdev->quarantined += alloc->size;
	mutex_unlock(&pdev->lock);

	pd_revoke_alloc(alloc, PD_REVOKE_FREE, &res);
	pd_alloc_put(alloc);
	return 0;
}
