// SPDX-License-Identifier: GPL-2.0
/*
 * The dma-buf exporter.  Every export is dynamic (it has pin/unpin), so in
 * every kernel we support map, unmap, pin and unpin arrive with the
 * reservation lock held.  The revoked flag is set under pd_device.lock
 * (revoke.c: never waiting for an importer's reservation) and checked under
 * the reservation lock by pin, map, CPU faults and CPU access, racily by
 * attach; what was mapped before it was set is undone under that lock.
 */
#include <linux/dma-resv.h>
#include <linux/file.h>
#include <linux/mm.h>
#include <linux/slab.h>
#include <linux/sched.h>
#include <linux/sched/signal.h>
#include <linux/vmalloc.h>
#include <linux/cred.h>
#include <linux/timekeeping.h>
#include "compat.h"
#include "peerdirect.h"
#include "trace.h"

static const struct dma_buf_ops pd_dmabuf_ops, pd_dmabuf_novmap_ops;

u64 pd_export_dev_offset(const struct pd_export *exp)
{
	return exp->alloc->offset + exp->offset;
}

static struct pd_device *exp_pd(const struct pd_export *exp)
{
	return exp->alloc->pd;
}

/* An importer still reaches the memory: a DMA mapping or a vmap of it. */
bool pd_export_busy(struct pd_export *exp)
{
	return atomic_read(&exp->nr_maps) || READ_ONCE(exp->vmapped);
}

static int pd_dmabuf_attach(struct dma_buf *dmabuf,
			    struct dma_buf_attachment *attach)
{
	struct pd_export *exp = dmabuf->priv;
	struct pd_device *pd = exp_pd(exp);
	struct pd_attach *pa;
	int ret;

	/* Racy by design: map and pin recheck under the reservation lock. */
	if (READ_ONCE(exp->revoked)) {
		ret = -ENODEV;
		goto out;
	}
	if (pd->ops->attach) {
		ret = pd->ops->attach(pd, attach);
		if (ret)
			goto out;
	}

	/* Charged to the importer's memory cgroup. */
	pa = kzalloc(sizeof(*pa), GFP_KERNEL_ACCOUNT);
	if (!pa) {
		ret = -ENOMEM;
		goto out;
	}
	pa->attach = attach;
	pa->since_ns = ktime_get_boottime_ns();
	INIT_LIST_HEAD(&pa->map_list);
	attach->priv = pa;

	dma_resv_lock(dmabuf->resv, NULL);
	list_add_tail(&pa->node, &exp->attachments);
	atomic_inc(&exp->nr_attachments);
	dma_resv_unlock(dmabuf->resv);
	ret = 0;
out:
	trace_peerdirect_attach(pd->index, exp->id, pd_dev_name(attach->dev),
				attach->peer2peer, !!attach->importer_ops, ret);
	return ret;
}

static void pd_dmabuf_detach(struct dma_buf *dmabuf,
			     struct dma_buf_attachment *attach)
{
	struct pd_export *exp = dmabuf->priv;
	struct pd_attach *pa = attach->priv;

	trace_peerdirect_detach(exp_pd(exp)->index, exp->id, pd_dev_name(attach->dev),
				attach->peer2peer, !!attach->importer_ops, 0);
	dma_resv_lock(dmabuf->resv, NULL);
	list_del(&pa->node);
	atomic_dec(&exp->nr_attachments);
	dma_resv_unlock(dmabuf->resv);
	kfree(pa);
}

static int pd_dmabuf_pin(struct dma_buf_attachment *attach)
{
	struct pd_export *exp = attach->dmabuf->priv;
	struct pd_attach *pa = attach->priv;

	dma_resv_assert_held(attach->dmabuf->resv);
	if (READ_ONCE(exp->revoked)) {
		trace_peerdirect_pin(exp_pd(exp)->index, exp->id,
				     pd_dev_name(attach->dev), pa->pins, -ENODEV);
		return -ENODEV;
	}
	pa->pins++;
	exp->nr_pins++;
	trace_peerdirect_pin(exp_pd(exp)->index, exp->id, pd_dev_name(attach->dev),
			     pa->pins, 0);
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
	trace_peerdirect_unpin(exp_pd(exp)->index, exp->id, pd_dev_name(attach->dev),
			       pa->pins, 0);
}

/*
 * A read-only export is mapped for the device to read only (DMA_TO_DEVICE),
 * whatever the importer asked: behind an IOMMU the device cannot write it,
 * and no CPU cache maintenance ever assumes it did.  RDMA importers map
 * bidirectionally and keep working for sends and remote reads.
 */
static struct sg_table *pd_dmabuf_map(struct dma_buf_attachment *attach,
				      enum dma_data_direction dir)
{
	struct pd_export *exp = attach->dmabuf->priv;
	struct pd_device *pd = exp_pd(exp);
	struct pd_attach *pa = attach->priv;
	struct sg_table *sgt;
	struct pd_map *m;

	dma_resv_assert_held(attach->dmabuf->resv);
	if (READ_ONCE(exp->revoked)) {
		sgt = ERR_PTR(-ENODEV);
		goto out;
	}

	m = kzalloc(sizeof(*m), GFP_KERNEL_ACCOUNT);
	if (!m) {
		sgt = ERR_PTR(-ENOMEM);
		goto out;
	}
	m->dir = exp->rdonly ? DMA_TO_DEVICE : dir;
	dir = m->dir;
	sgt = pd->ops->map(pd, attach, pd_export_dev_offset(exp),
			     exp->length, m->dir);
	if (IS_ERR(sgt)) {
		kfree(m);
		goto out;
	}
	m->sgt = sgt;
	list_add_tail(&m->node, &pa->map_list);
	pa->maps++;
	atomic_inc(&exp->nr_maps);
	pd_device_reach(pd, 1);
out:
	trace_peerdirect_map(pd->index, exp->id, pd_dev_name(attach->dev), dir,
			     exp->length, IS_ERR(sgt) ? 0 : sgt->nents,
			     PTR_ERR_OR_ZERO(sgt));
	return sgt;
}

static void pd_dmabuf_unmap(struct dma_buf_attachment *attach,
			    struct sg_table *sgt, enum dma_data_direction dir)
{
	struct pd_export *exp = attach->dmabuf->priv;
	struct pd_device *pd = exp_pd(exp);
	struct pd_attach *pa = attach->priv;
	struct pd_map *m;

	dma_resv_assert_held(attach->dmabuf->resv);
	list_for_each_entry(m, &pa->map_list, node)
		if (m->sgt == sgt)
			break;
	/* An importer unmapping what it never mapped: the core's bug or its. */
	if (WARN_ON_ONCE(list_entry_is_head(m, &pa->map_list, node)))
		return;
	list_del(&m->node);
	pa->maps--;
	trace_peerdirect_unmap(pd->index, exp->id, pd_dev_name(attach->dev), m->dir,
			       exp->length, sgt->nents, 0);
	pd->ops->unmap(pd, attach, sgt, m->dir);
	kfree(m);
	if (atomic_dec_and_test(&exp->nr_maps))
		wake_up_all(&exp->unmap_wq);
	pd_device_reach(pd, -1);
}

/* The last reference to the dma-buf: give back what the export held. */
static void pd_dmabuf_release(struct dma_buf *dmabuf)
{
	struct pd_export *exp = dmabuf->priv;
	struct pd_alloc *alloc = exp->alloc;
	struct pd_device *pd = alloc->pd;

	trace_peerdirect_export_release(pd->index, exp->id);
	pd_subs_drop_export(exp);
	mutex_lock(&pd->lock);
	list_del(&exp->node);
	alloc->nr_exports--;
	WRITE_ONCE(pd->nr_live_exports, pd->nr_live_exports - 1);
	mutex_unlock(&pd->lock);

	pd_file_put(exp->pfile);
	pd_alloc_put(alloc);
	put_pid(exp->pid);
	mutex_destroy(&exp->vmap_lock);
	kfree(exp);
}

/* Pages mapped per fault: a streaming CPU copy takes 1/16 of the faults. */
#define PD_FAULT_AROUND	16

/*
 * Wait for the reservation: 0 with it held, -EINTR without it.  A user
 * access gives up on any signal: it is delivered on the way out and the
 * access faults again.  A kernel access (copy_to_user() into the mapping,
 * fixup_user_fault()) gives up on a fatal signal; with a non-fatal one
 * pending it cannot sleep in the lock's queue (it would fault again at
 * once and spin), so it polls once a jiffy, killably, when @poll, and
 * gives up otherwise.  A core-dumping signal (SIGQUIT, SIGABRT) is taken
 * only on the way out, so until the kill it sends it does not end a
 * kernel access's wait.
 */
static int pd_vm_fault_wait(struct vm_fault *vmf, struct dma_resv *resv, bool poll)
{
	while (dma_resv_lock_interruptible(resv, NULL)) {
		if (!poll || (vmf->flags & FAULT_FLAG_USER) || fatal_signal_pending(current))
			return -EINTR;
		schedule_timeout_killable(1);
	}
	return 0;
}

/*
 * An importer may hold the reservation across a mapping or a fence wait.
 * A first try that slept on it with the mmap lock held would stall every
 * mmap(), munmap() and fault of the process behind it, and a kill.  So,
 * as TTM does: when someone else holds the reservation, the first try
 * drops the fault lock, waits and has the fault retried.  A retry waits
 * in the queue under the fault lock, so the fault makes progress, and a
 * user access's signal ends it with nothing mapped; a kernel access that
 * a signal stops there waits again without the fault lock.  A fault that
 * may not be retried (futex's fault_in_user_writeable()) cannot drop the
 * lock: it polls under it, and a kernel access ends with SIGBUS (-EFAULT
 * to its caller, no signal) only when the task is dying.  0 with the
 * reservation held, or what the fault returns.
 */
static vm_fault_t pd_vm_fault_lock(struct vm_fault *vmf, struct pd_export *exp)
{
	struct dma_resv *resv = exp->dmabuf->resv;

	if (dma_resv_trylock(resv))
		return 0;
	if (!(vmf->flags & FAULT_FLAG_ALLOW_RETRY)) {
		if (!pd_vm_fault_wait(vmf, resv, true))
			return 0;
		return vmf->flags & FAULT_FLAG_USER ? VM_FAULT_NOPAGE : VM_FAULT_SIGBUS;
	}
	if (vmf->flags & FAULT_FLAG_TRIED) {
		if (!pd_vm_fault_wait(vmf, resv, false))
			return 0;
		if (vmf->flags & FAULT_FLAG_USER)
			return VM_FAULT_NOPAGE;
	}
	if (vmf->flags & FAULT_FLAG_RETRY_NOWAIT)
		return VM_FAULT_RETRY;
	/*
	 * The VMA's vm_file pinned the dma-buf (and so the export and its
	 * reservation); once the fault lock is dropped the VMA may go.
	 */
	get_dma_buf(exp->dmabuf);
	pd_release_fault_lock(vmf);
	if (!pd_vm_fault_wait(vmf, resv, true))
		dma_resv_unlock(resv);
	dma_buf_put(exp->dmabuf);
	return VM_FAULT_RETRY;
}

static vm_fault_t pd_vm_fault(struct vm_fault *vmf)
{
	struct vm_area_struct *vma = vmf->vma;
	struct pd_export *exp = vma->vm_private_data;
	struct pd_device *pd = exp_pd(exp);
	struct dma_resv *resv = exp->dmabuf->resv;
	u64 off = (u64)vmf->pgoff << PAGE_SHIFT;
	unsigned long start = vmf->address & PAGE_MASK, addr = start;
	vm_fault_t ret;
	int i;

	if (off >= exp->length)
		return VM_FAULT_SIGBUS;

	/*
	 * Revoke zaps the PTEs once more under the reservation lock after it
	 * set the flag, so a fault that sees "not revoked" here cannot leave
	 * a PTE behind that zap; and the flag is read again after the inserts
	 * for a revocation whose end an importer holding the lock delays.
	 */
	ret = pd_vm_fault_lock(vmf, exp);
	if (ret)
		return ret;
	if (READ_ONCE(exp->revoked)) {
		ret = VM_FAULT_SIGBUS;
		goto out;
	}
	ret = vmf_insert_pfn(vma, addr,
			     pd->ops->pfn(pd, pd_export_dev_offset(exp) + off));
	if (ret != VM_FAULT_NOPAGE)
		goto out;
	for (i = 1; i < PD_FAULT_AROUND; i++) {
		off += PAGE_SIZE;
		if (addr + PAGE_SIZE >= vma->vm_end || off >= exp->length)
			break;
		/* Best effort: a failure here only means another fault later. */
		if (vmf_insert_pfn(vma, addr + PAGE_SIZE,
				   pd->ops->pfn(pd, pd_export_dev_offset(exp) + off)) !=
		    VM_FAULT_NOPAGE)
			break;
		addr += PAGE_SIZE;
	}
	/*
	 * Phase 1 of a revocation marks without the reservation lock, and
	 * its phase 2 zaps the CPU mappings at once, before it waits for the
	 * lock: a mark between the check above and the inserts, and that
	 * zap before them, would leave these PTEs until the revocation ends
	 * under the lock, which an importer may delay indefinitely (its
	 * revoke_work).  The inserts before the second read of the flag,
	 * paired with the smp_mb() between the mark and that zap: either
	 * the zap sees these PTEs or this read sees the mark.
	 */
	smp_mb();
	if (READ_ONCE(exp->revoked)) {
		pd_zap_vma_range(vma, start, addr + PAGE_SIZE - start);
		ret = VM_FAULT_SIGBUS;
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
	struct pd_device *pd = exp_pd(exp);

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
	vma->vm_page_prot = pd->ops->pgprot(pd, vm_get_page_prot(vma->vm_flags));
	vma->vm_ops = &pd_vm_ops;
	vma->vm_private_data = exp;
	return 0;
}

/*
 * A vmap made after the revoke is of one scratch page, repeated (a failure
 * is no option, 6.1's dma_buf_vmap() WARNs on any).  A vmap of device
 * memory taken before the revoke counts as an importer still holding it
 * (pd_export_busy()): a revoke reports it pending, a PCI removal waits for
 * it, and the memory stays quarantined until its vunmap.  The core keeps
 * one vmap per dma-buf and hands it to later callers, so while that one is
 * held a later vmap shares it, device memory included; there is at most
 * one of either kind.  The page array is freed before returning: charging
 * it would only add a way to fail.
 */
static int pd_vmap_scratch(struct pd_export *exp, struct iosys_map *map)
{
	unsigned long i, n = exp->length >> PAGE_SHIFT;
	struct page **pages, *page;
	void *vaddr;

	page = alloc_page(GFP_KERNEL_ACCOUNT | __GFP_ZERO);
	if (!page)
		return -ENOMEM;
	pages = kvmalloc_array(n, sizeof(*pages), GFP_KERNEL);
	if (!pages) {
		__free_page(page);
		return -ENOMEM;
	}
	for (i = 0; i < n; i++)
		pages[i] = page;
	vaddr = vmap(pages, n, VM_MAP, PAGE_KERNEL);
	kvfree(pages);
	if (!vaddr) {
		__free_page(page);
		return -ENOMEM;
	}
	exp->vmap_scratch = page;
	iosys_map_set_vaddr(map, vaddr);
	return 0;
}

static int pd_dmabuf_vmap(struct dma_buf *dmabuf, struct iosys_map *map)
{
	struct pd_export *exp = dmabuf->priv;
	struct pd_device *pd = exp_pd(exp);
	int ret;

	/* revoked is set under vmap_lock too: a vmap and a revoke are ordered. */
	mutex_lock(&exp->vmap_lock);
	if (exp->revoked) {
		ret = pd_vmap_scratch(exp, map);
	} else {
		ret = pd->ops->vmap(pd, pd_export_dev_offset(exp), exp->length, map);
		if (!ret) {
			WRITE_ONCE(exp->vmapped, true);
			pd_device_reach(pd, 1);
		}
	}
	mutex_unlock(&exp->vmap_lock);
	return ret;
}

static void pd_dmabuf_vunmap(struct dma_buf *dmabuf, struct iosys_map *map)
{
	struct pd_export *exp = dmabuf->priv;
	struct pd_device *pd = exp_pd(exp);

	mutex_lock(&exp->vmap_lock);
	if (exp->vmap_scratch) {
		vunmap(map->vaddr);
		__free_page(exp->vmap_scratch);
		exp->vmap_scratch = NULL;
	} else {
		pd->ops->vunmap(pd, map);
		WRITE_ONCE(exp->vmapped, false);
		wake_up_all(&exp->unmap_wq);
		pd_device_reach(pd, -1);
	}
	mutex_unlock(&exp->vmap_lock);
}

/*
 * CPU cache maintenance for every live importer mapping, each in the
 * direction it was made (the DMA API wants the mapping's direction), and
 * only where it matters: before CPU access if the device may have written
 * (not a DMA_TO_DEVICE mapping), after it if the CPU may have written (not
 * a read-only access).  A read-only export brackets reads only: a CPU
 * write (DMA_TO_DEVICE, DMA_BIDIRECTIONAL) is EPERM, as a writable mmap is
 * EACCES; exp->rdonly never changes, so no lock is needed to check it.
 */
static int pd_dmabuf_cpu_access(struct dma_buf *dmabuf,
				enum dma_data_direction cpu_dir, bool begin)
{
	struct pd_export *exp = dmabuf->priv;
	struct pd_device *pd = exp_pd(exp);
	struct pd_attach *pa;
	struct pd_map *m;
	int ret = 0;

	if (exp->rdonly && cpu_dir != DMA_FROM_DEVICE)
		return -EPERM;
	dma_resv_lock(dmabuf->resv, NULL);
	if (READ_ONCE(exp->revoked)) {
		ret = -ENODEV;
	} else if (pd->ops->sync && (begin || cpu_dir != DMA_FROM_DEVICE)) {
		list_for_each_entry(pa, &exp->attachments, node)
			list_for_each_entry(m, &pa->map_list, node)
				if (!begin || m->dir != DMA_TO_DEVICE)
					pd->ops->sync(pd, pa->attach, m->sgt,
							m->dir, begin);
	}
	dma_resv_unlock(dmabuf->resv);
	return ret;
}

static int pd_dmabuf_begin_cpu_access(struct dma_buf *dmabuf,
				      enum dma_data_direction dir)
{
	return pd_dmabuf_cpu_access(dmabuf, dir, true);
}

static int pd_dmabuf_end_cpu_access(struct dma_buf *dmabuf,
				    enum dma_data_direction dir)
{
	return pd_dmabuf_cpu_access(dmabuf, dir, false);
}

bool pd_dmabuf_is_ours(const struct dma_buf *dmabuf)
{
	return dmabuf->ops == &pd_dmabuf_ops || dmabuf->ops == &pd_dmabuf_novmap_ops;
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
 * A backend without a kernel CPU mapping (a BAR: a vmap would be CPU MMIO
 * that neither a revoke nor a reset or AER stop, as vfio-pci's and
 * habanalabs' exporters offer none).  No .vmap at all: dma_buf_vmap() is
 * then EINVAL, where an error from the op would WARN on every kernel.
 */
static const struct dma_buf_ops pd_dmabuf_novmap_ops = {
	.attach = pd_dmabuf_attach,
	.detach = pd_dmabuf_detach,
	.pin = pd_dmabuf_pin,
	.unpin = pd_dmabuf_unpin,
	.map_dma_buf = pd_dmabuf_map,
	.unmap_dma_buf = pd_dmabuf_unmap,
	.release = pd_dmabuf_release,
	.mmap = pd_dmabuf_mmap,
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
struct dma_buf *pd_export_create(struct pd_file *pfile, struct pd_alloc *alloc,
				 struct peerdirect_export *args,
				 unsigned int open_flags, int *fdp)
{
	struct pd_device *pd = pfile->pd;
	DEFINE_DMA_BUF_EXPORT_INFO(exp_info);
	struct pd_export *exp;
	struct dma_buf *dmabuf;
	int fd, ret;

	/* The dma-buf's size is a size_t: 4 GiB and more on a 32-bit kernel. */
	if (args->length > SIZE_MAX)
		return ERR_PTR(-EINVAL);
	/* Revocations are queued on the file: its event ring exists first. */
	ret = pd_file_events_init(pfile);
	if (ret)
		return ERR_PTR(ret);
	exp = kzalloc(sizeof(*exp), GFP_KERNEL_ACCOUNT);
	if (!exp)
		return ERR_PTR(-ENOMEM);
	INIT_LIST_HEAD(&exp->attachments);
	atomic_set(&exp->nr_attachments, 0);
	INIT_LIST_HEAD(&exp->subs);
	INIT_LIST_HEAD(&exp->revoke_node);
	INIT_DELAYED_WORK(&exp->revoke_work, pd_revoke_work);
	mutex_init(&exp->vmap_lock);
	init_waitqueue_head(&exp->unmap_wq);
	atomic_set(&exp->nr_maps, 0);
	exp->offset = args->offset;
	exp->length = args->length;
	exp->rdonly = (open_flags & O_ACCMODE) == O_RDONLY;
	exp->tgid = task_tgid_nr(current);
	exp->pid = get_task_pid(current, PIDTYPE_TGID);
	exp->uid = current_uid();
	exp->created_ns = ktime_get_boottime_ns();

	fd = get_unused_fd_flags(open_flags & O_CLOEXEC);
	if (fd < 0) {
		ret = fd;
		goto err_free;
	}

	mutex_lock(&pd->lock);
	/* An export made during a reset must not survive it: wait for its end. */
	while (pd->resetting && !pd->dead) {
		mutex_unlock(&pd->lock);
		ret = wait_event_killable(pd->reset_wq, !READ_ONCE(pd->resetting) ||
					  READ_ONCE(pd->dead));
		if (ret)
			goto err_fd;
		mutex_lock(&pd->lock);
	}
	if (pd->dead) {
		ret = -ENODEV;
		goto err_unlock;
	}
	if (alloc->freed) {
		ret = -ENOENT;
		goto err_unlock;
	}
	if (alloc->nr_exports >= pd->max_exports) {
		ret = -ENOSPC;
		goto err_unlock;
	}

	exp_info.ops = pd->ops->vmap ? &pd_dmabuf_ops : &pd_dmabuf_novmap_ops;
	exp_info.owner = THIS_MODULE;
	exp_info.size = exp->length;
	exp_info.flags = open_flags;
	exp_info.priv = exp;
	exp_info.resv = &alloc->resv;
	dmabuf = dma_buf_export(&exp_info);
	if (IS_ERR(dmabuf)) {
		ret = PTR_ERR(dmabuf);
		goto err_unlock;
	}

	/* From here the dma-buf's release undoes everything below. */
	exp->dmabuf = dmabuf;
	exp->dentry = dmabuf->file->f_path.dentry;
	exp->inode = file_inode(dmabuf->file)->i_ino;
	exp->id = ++pd->next_export_id;
	pd_alloc_get(alloc);
	exp->alloc = alloc;
	kref_get(&pfile->ref);
	exp->pfile = pfile;
	list_add_tail(&exp->node, &alloc->exports);
	alloc->nr_exports++;
	WRITE_ONCE(pd->nr_live_exports, pd->nr_live_exports + 1);
	atomic64_inc(&pd->nr_exports_total);
	trace_peerdirect_export(pd->index, exp->id, alloc->handle, exp->offset,
				exp->length, exp->inode, exp->rdonly);
	mutex_unlock(&pd->lock);

	args->fd = fd;
	args->export_id = exp->id;
	args->inode = exp->inode;
	*fdp = fd;
	return dmabuf;

err_unlock:
	mutex_unlock(&pd->lock);
err_fd:
	put_unused_fd(fd);
err_free:
	put_pid(exp->pid);
	mutex_destroy(&exp->vmap_lock);
	kfree(exp);
	return ERR_PTR(ret);
}
