// SPDX-License-Identifier: GPL-2.0
/*
 * The dma-buf exporter.  Every export is dynamic (it has pin/unpin), so in
 * every kernel we support map, unmap, pin and unpin arrive with the
 * reservation lock held; the revoked flag lives under that lock and is
 * checked by attach, pin, map, CPU faults and CPU access.
 */
#include <linux/dma-resv.h>
#include <linux/file.h>
#include <linux/mm.h>
#include <linux/slab.h>
#include <linux/sched.h>
#include <linux/vmalloc.h>
#include "compat.h"
#include "peerdirect.h"

static const struct dma_buf_ops pd_dmabuf_ops;

bool pd_is_export(struct dma_buf *dmabuf)
{
	return dmabuf->ops == &pd_dmabuf_ops;
}

u64 pd_export_dev_offset(const struct pd_export *exp)
{
	return exp->alloc->offset + exp->offset;
}

static struct pd_device *exp_pdev(const struct pd_export *exp)
{
	return exp->alloc->pdev;
}

static int pd_dmabuf_attach(struct dma_buf *dmabuf,
			    struct dma_buf_attachment *attach)
{
	struct pd_export *exp = dmabuf->priv;
	struct pd_device *pdev = exp_pdev(exp);
	struct pd_attach *pa;
	int ret;

	/* Racy by design: map and pin recheck under the reservation lock. */
	if (READ_ONCE(exp->revoked))
		return -ENODEV;
	if (pdev->ops->attach) {
		ret = pdev->ops->attach(pdev, attach);
		if (ret)
			return ret;
	}

	pa = kzalloc(sizeof(*pa), GFP_KERNEL);
	if (!pa)
		return -ENOMEM;
	pa->attach = attach;
	attach->priv = pa;

	dma_resv_lock(dmabuf->resv, NULL);
	list_add_tail(&pa->node, &exp->attachments);
	dma_resv_unlock(dmabuf->resv);
	return 0;
}

static void pd_dmabuf_detach(struct dma_buf *dmabuf,
			     struct dma_buf_attachment *attach)
{
	struct pd_attach *pa = attach->priv;

	dma_resv_lock(dmabuf->resv, NULL);
	list_del(&pa->node);
	dma_resv_unlock(dmabuf->resv);
	kfree(pa);
}

static int pd_dmabuf_pin(struct dma_buf_attachment *attach)
{
	struct pd_export *exp = attach->dmabuf->priv;
	struct pd_attach *pa = attach->priv;

	dma_resv_assert_held(attach->dmabuf->resv);
	if (exp->revoked)
		return -ENODEV;
	pa->pins++;
	exp->nr_pins++;
	return 0;
}

/* Never fails: 6.1 without MOVE_NOTIFY pins once per map and unpins per unmap. */
static void pd_dmabuf_unpin(struct dma_buf_attachment *attach)
{
	struct pd_export *exp = attach->dmabuf->priv;
	struct pd_attach *pa = attach->priv;

	dma_resv_assert_held(attach->dmabuf->resv);
	if (WARN_ON_ONCE(!pa->pins))
		return;
	pa->pins--;
	exp->nr_pins--;
}

static struct sg_table *pd_dmabuf_map(struct dma_buf_attachment *attach,
				      enum dma_data_direction dir)
{
	struct pd_export *exp = attach->dmabuf->priv;
	struct pd_device *pdev = exp_pdev(exp);
	struct pd_attach *pa = attach->priv;
	struct sg_table *sgt;

	dma_resv_assert_held(attach->dmabuf->resv);
	if (exp->revoked)
		return ERR_PTR(-ENODEV);

	sgt = pdev->ops->map(pdev, attach, pd_export_dev_offset(exp),
			     exp->length, dir);
	if (IS_ERR(sgt))
		return sgt;
	pa->maps++;
	pa->sgt = sgt;
	pa->dir = dir;
	atomic_inc(&exp->nr_maps);
	return sgt;
}

static void pd_dmabuf_unmap(struct dma_buf_attachment *attach,
			    struct sg_table *sgt, enum dma_data_direction dir)
{
	struct pd_export *exp = attach->dmabuf->priv;
	struct pd_device *pdev = exp_pdev(exp);
	struct pd_attach *pa = attach->priv;

	dma_resv_assert_held(attach->dmabuf->resv);
	if (pa->sgt == sgt)
		pa->sgt = NULL;
	pa->maps--;
	pdev->ops->unmap(pdev, attach, sgt, dir);
	if (atomic_dec_and_test(&exp->nr_maps))
		wake_up_all(&exp->unmap_wq);
}

/* The last reference to the dma-buf: give back what the export held. */
static void pd_dmabuf_release(struct dma_buf *dmabuf)
{
	struct pd_export *exp = dmabuf->priv;
	struct pd_alloc *alloc = exp->alloc;
	struct pd_device *pdev = alloc->pdev;

	mutex_lock(&pdev->lock);
	list_del(&exp->node);
	alloc->nr_exports--;
	mutex_unlock(&pdev->lock);

	pd_file_put(exp->file);
	pd_alloc_put(alloc);
	kfree(exp);
}

/* Pages mapped per fault: a streaming CPU copy takes 1/16 of the faults. */
#define PD_FAULT_AROUND	16

static vm_fault_t pd_vm_fault(struct vm_fault *vmf)
{
	struct vm_area_struct *vma = vmf->vma;
	struct pd_export *exp = vma->vm_private_data;
	struct pd_device *pdev = exp_pdev(exp);
	struct dma_resv *resv = exp->dmabuf->resv;
	u64 off = (u64)vmf->pgoff << PAGE_SHIFT;
	unsigned long addr = vmf->address & PAGE_MASK;
	vm_fault_t ret;
	int i;

	if (off >= exp->length)
		return VM_FAULT_SIGBUS;

	/*
	 * Revoke sets the flag and zaps the PTEs under the reservation lock,
	 * so a fault that sees "not revoked" here cannot leave a PTE behind
	 * the zap.
	 */
	dma_resv_lock(resv, NULL);
	if (exp->revoked) {
		ret = VM_FAULT_SIGBUS;
		goto out;
	}
	ret = vmf_insert_pfn(vma, addr,
			     pdev->ops->pfn(pdev, pd_export_dev_offset(exp) + off));
	for (i = 1; ret == VM_FAULT_NOPAGE && i < PD_FAULT_AROUND; i++) {
		addr += PAGE_SIZE;
		off += PAGE_SIZE;
		if (addr >= vma->vm_end || off >= exp->length)
			break;
		/* Best effort: a failure here only means another fault later. */
		if (vmf_insert_pfn(vma, addr,
				   pdev->ops->pfn(pdev, pd_export_dev_offset(exp) + off)) !=
		    VM_FAULT_NOPAGE)
			break;
	}
out:
	dma_resv_unlock(resv);
	return ret;
}

static const struct vm_operations_struct pd_vm_ops = {
	.fault = pd_vm_fault,
};

/*
 * Device memory is mapped page by page at fault time as VM_PFNMAP, so
 * get_user_pages() cannot pin it behind our back and revocation can take
 * every CPU mapping away.
 */
static int pd_dmabuf_mmap(struct dma_buf *dmabuf, struct vm_area_struct *vma)
{
	struct pd_export *exp = dmabuf->priv;
	struct pd_device *pdev = exp_pdev(exp);

	/* VM_MAYSHARE: mmap() drops VM_SHARED for read-only files. */
	if (!(vma->vm_flags & VM_MAYSHARE))
		return -EINVAL;
	if (exp->rdonly) {
		if (vma->vm_flags & VM_WRITE)
			return -EACCES;
		pd_vm_flags_clear(vma, VM_MAYWRITE);
	}
	if (READ_ONCE(exp->revoked))
		return -ENODEV;

	pd_vm_flags_set(vma, VM_IO | VM_PFNMAP | VM_DONTEXPAND | VM_DONTDUMP);
	vma->vm_page_prot = pdev->ops->pgprot(pdev, vm_get_page_prot(vma->vm_flags));
	vma->vm_ops = &pd_vm_ops;
	vma->vm_private_data = exp;
	return 0;
}

/*
 * Not refused after revocation: 6.1's dma_buf_vmap() WARNs on any exporter
 * error, and a kernel importer's vmap is as safe as its DMA mapping, since
 * the memory stays quarantined while the dma-buf lives.
 */
static int pd_dmabuf_vmap(struct dma_buf *dmabuf, struct iosys_map *map)
{
	struct pd_export *exp = dmabuf->priv;
	struct pd_device *pdev = exp_pdev(exp);

	return pdev->ops->vmap(pdev, pd_export_dev_offset(exp), exp->length, map);
}

static void pd_dmabuf_vunmap(struct dma_buf *dmabuf, struct iosys_map *map)
{
	struct pd_export *exp = dmabuf->priv;
	struct pd_device *pdev = exp_pdev(exp);

	pdev->ops->vunmap(pdev, map);
}

static int pd_dmabuf_cpu_access(struct dma_buf *dmabuf, bool begin)
{
	struct pd_export *exp = dmabuf->priv;
	struct pd_device *pdev = exp_pdev(exp);
	struct pd_attach *pa;
	int ret = 0;

	dma_resv_lock(dmabuf->resv, NULL);
	if (exp->revoked) {
		ret = -ENODEV;
	} else if (pdev->ops->sync) {
		/* In the direction each importer mapped with, not the CPU's. */
		list_for_each_entry(pa, &exp->attachments, node)
			if (pa->sgt)
				pdev->ops->sync(pdev, pa->attach, pa->sgt, pa->dir, begin);
	}
	dma_resv_unlock(dmabuf->resv);
	return ret;
}

static int pd_dmabuf_begin_cpu_access(struct dma_buf *dmabuf,
				      enum dma_data_direction dir)
{
	return pd_dmabuf_cpu_access(dmabuf, true);
}

static int pd_dmabuf_end_cpu_access(struct dma_buf *dmabuf,
				    enum dma_data_direction dir)
{
	return pd_dmabuf_cpu_access(dmabuf, false);
}

static const struct dma_buf_ops pd_dmabuf_ops = {
	.attach = pd_dmabuf_attach,
	.detach = pd_dmabuf_detach,
	.pin = pd_dmabuf_pin,
	.unpin = pd_dmabuf_unpin,
	.map_dma_buf = pd_dmabuf_map,
	.unmap_dma_buf = pd_dmabuf_unmap,
	.release = pd_dmabuf_release,
	.mmap = pd_dmabuf_mmap,
	.vmap = pd_dmabuf_vmap,
	.vunmap = pd_dmabuf_vunmap,
	.begin_cpu_access = pd_dmabuf_begin_cpu_access,
	.end_cpu_access = pd_dmabuf_end_cpu_access,
};

/*
 * Export [offset, offset + length) of an allocation.  The fd is only
 * reserved here; the caller installs it after the result reached userspace,
 * because once installed another thread may close it and nothing may touch
 * the dma-buf after that.  On a later failure the caller drops the dma-buf
 * with dma_buf_put() and the reservation with put_unused_fd().
 *
 * The whole check-and-link runs under pd_device.lock so an export cannot
 * slip past a concurrent free or unplug that is walking the export list.
 */
struct dma_buf *pd_export_create(struct pd_file *file, struct pd_alloc *alloc,
				 struct peerdirect_export *args,
				 unsigned int open_flags, int *fdp)
{
	struct pd_device *pdev = file->pdev;
	DEFINE_DMA_BUF_EXPORT_INFO(exp_info);
	struct pd_export *exp;
	struct dma_buf *dmabuf;
	int fd, ret;

	exp = kzalloc(sizeof(*exp), GFP_KERNEL);
	if (!exp)
		return ERR_PTR(-ENOMEM);
	INIT_LIST_HEAD(&exp->attachments);
	init_waitqueue_head(&exp->unmap_wq);
	atomic_set(&exp->nr_maps, 0);
	exp->offset = args->offset;
	exp->length = args->length;
	exp->rdonly = (open_flags & O_ACCMODE) == O_RDONLY;
	exp->tgid = file->tgid;

	fd = get_unused_fd_flags(open_flags & O_CLOEXEC);
	if (fd < 0) {
		ret = fd;
		goto err_free;
	}

	mutex_lock(&pdev->lock);
	if (pdev->dead) {
		ret = -ENODEV;
		goto err_unlock;
	}
	if (alloc->freed) {
		ret = -ENOENT;
		goto err_unlock;
	}
	if (alloc->nr_exports >= pdev->max_exports) {
		ret = -ENOSPC;
		goto err_unlock;
	}

	exp_info.ops = &pd_dmabuf_ops;
	exp_info.owner = THIS_MODULE;
	exp_info.size = exp->length;
	exp_info.flags = open_flags;
	exp_info.priv = exp;
	dmabuf = dma_buf_export(&exp_info);
	if (IS_ERR(dmabuf)) {
		ret = PTR_ERR(dmabuf);
		goto err_unlock;
	}

	/* From here the dma-buf's release undoes everything below. */
	exp->dmabuf = dmabuf;
	exp->dentry = dmabuf->file->f_path.dentry;
	exp->inode = file_inode(dmabuf->file)->i_ino;
	exp->id = ++pdev->next_export_id;
	pd_alloc_get(alloc);
	exp->alloc = alloc;
	kref_get(&file->ref);
	exp->file = file;
	list_add_tail(&exp->node, &alloc->exports);
	alloc->nr_exports++;
	pdev->nr_exports_total++;
	mutex_unlock(&pdev->lock);

	args->fd = fd;
	args->export_id = exp->id;
	args->inode = exp->inode;
	*fdp = fd;
	return dmabuf;

err_unlock:
	mutex_unlock(&pdev->lock);
	put_unused_fd(fd);
err_free:
	kfree(exp);
	return ERR_PTR(ret);
}
