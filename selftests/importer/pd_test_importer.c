// SPDX-License-Identifier: GPL-2.0
/*
 * Test-only dma-buf importer for the peerdirect selftests.  It imports the
 * way RDMA's ib_umem_dmabuf_get_pinned() does (dynamic attach with
 * allow_peer2peer, dma_buf_pin, map under the reservation lock, a
 * move_notify that can only record), or as a dynamic importer that unmaps
 * on move_notify, and checks every DMA entry against the exporter's own
 * kernel mapping.  Not for production kernels.
 */
#include <linux/completion.h>
#include <linux/delay.h>
#include <linux/dma-buf.h>
#include <linux/dma-direct.h>
#include <linux/dma-fence.h>
#include <linux/dma-mapping.h>
#include <linux/dma-resv.h>
#include <linux/io.h>
#include <linux/iosys-map.h>
#include <linux/miscdevice.h>
#include <linux/module.h>
#include <linux/pci.h>
#include <linux/scatterlist.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/timekeeping.h>
#include <linux/tracepoint.h>
#include <linux/uaccess.h>
#include <linux/vmalloc.h>
#include "../../kmod/compat.h"
#include "pd_test_importer.h"

#define PDTI_MAX_READ	SZ_16M

struct pdti {
	struct mutex lock;	/* import/release; never taken in move_notify */
	struct device *dev;	/* attaches with: the misc device or pci's */
	struct pci_dev *pci;
	struct dma_buf *dmabuf;
	struct dma_buf_attachment *attach;
	u32 flags;
	/* Under the dma-buf's reservation lock. */
	struct sg_table *sgt;
	struct pdti_status st;
	struct dma_fence *fence;	/* PDTI_IOCTL_FENCE, until signaled */
	struct dma_buf *vmapped;	/* PDTI_IOCTL_VMAP_HOLD, with its map */
	struct iosys_map vmap;
	struct completion inval_go;	/* PDTI_SLOW_INVALIDATE */
};

static DEFINE_SPINLOCK(pdti_fence_lock);

static const char *pdti_fence_name(struct dma_fence *fence)
{
	return "pd_test_importer";
}

static const struct dma_fence_ops pdti_fence_ops = {
	.get_driver_name = pdti_fence_name,
	.get_timeline_name = pdti_fence_name,
};

static void pdti_signal(struct pdti *t)
{
	if (!t->fence)
		return;
	dma_fence_signal(t->fence);
	dma_fence_put(t->fence);
	t->fence = NULL;
}

/* An unsignaled write fence on the imported dma-buf, like pending DMA. */
static int pdti_fence(struct pdti *t)
{
	struct dma_fence *fence;
	int ret;

	if (!t->dmabuf)
		return -ENOENT;
	if (t->fence)
		return -EBUSY;
	fence = kzalloc(sizeof(*fence), GFP_KERNEL);
	if (!fence)
		return -ENOMEM;
	dma_fence_init(fence, &pdti_fence_ops, &pdti_fence_lock,
		       dma_fence_context_alloc(1), 1);
	dma_resv_lock(t->dmabuf->resv, NULL);
	ret = dma_resv_reserve_fences(t->dmabuf->resv, 1);
	if (!ret)
		dma_resv_add_fence(t->dmabuf->resv, fence, DMA_RESV_USAGE_WRITE);
	dma_resv_unlock(t->dmabuf->resv);
	if (ret) {
		dma_fence_put(fence);
		return ret;
	}
	t->fence = fence;
	return 0;
}

static int pdti_hold_resv(struct pdti *t, u32 __user *uarg)
{
	u32 ms;

	if (get_user(ms, uarg))
		return -EFAULT;
	if (ms > 10000)
		return -EINVAL;
	if (!t->dmabuf)
		return -ENOENT;
	dma_resv_lock(t->dmabuf->resv, NULL);
	msleep_interruptible(ms);
	dma_resv_unlock(t->dmabuf->resv);
	return 0;
}

static struct miscdevice pdti_misc;
static struct device_dma_parameters pdti_dma_parms;

/* PDTI_IOCTL_STALL_*: one stall in the system at a time. */
static DEFINE_MUTEX(pdti_stall_lock);
static struct {
	struct pdti *owner;		/* under pdti_stall_lock */
	struct tracepoint *tp;		/* kmem:mm_page_alloc */
	struct dma_buf *dmabuf;		/* a reference, while armed */
	pid_t tid;
	bool armed, stalled, release;	/* read by the probe */
} pdti_stall;

#define PDTI_STALL_MAX_NS	(5 * NSEC_PER_SEC)

/*
 * In the allocating thread, with preemption off (a tracepoint probe): spin
 * rather than sleep, with interrupts on, bounded.
 */
static void pdti_stall_probe(void *data, struct page *page, unsigned int order,
			     gfp_t gfp_flags, int migratetype)
{
	u64 until;

	if (current->pid != READ_ONCE(pdti_stall.tid) || !READ_ONCE(pdti_stall.armed) ||
	    !dma_resv_is_locked(pdti_stall.dmabuf->resv))
		return;
	WRITE_ONCE(pdti_stall.armed, false);
	WRITE_ONCE(pdti_stall.stalled, true);
	until = ktime_get_mono_fast_ns() + PDTI_STALL_MAX_NS;
	while (!READ_ONCE(pdti_stall.release) && ktime_get_mono_fast_ns() < until)
		cpu_relax();
}

#ifdef CONFIG_TRACEPOINTS
static void pdti_find_tp(struct tracepoint *tp, void *priv)
{
	if (!strcmp(tp->name, "mm_page_alloc"))
		*(struct tracepoint **)priv = tp;
}
#endif

static int pdti_stall_arm(struct pdti *t, const __s32 __user *uarg)
{
	struct tracepoint *tp = NULL;
	s32 tid;
	int ret;

	if (get_user(tid, uarg))
		return -EFAULT;
	if (!t->dmabuf)
		return -ENOENT;
#ifdef CONFIG_TRACEPOINTS
	for_each_kernel_tracepoint(pdti_find_tp, &tp);
#endif
	if (!tp)
		return -EOPNOTSUPP;
	mutex_lock(&pdti_stall_lock);
	if (pdti_stall.owner) {
		mutex_unlock(&pdti_stall_lock);
		return -EBUSY;
	}
	get_dma_buf(t->dmabuf);
	pdti_stall.dmabuf = t->dmabuf;
	pdti_stall.tid = tid;
	pdti_stall.stalled = false;
	pdti_stall.release = false;
	WRITE_ONCE(pdti_stall.armed, true);
	ret = tracepoint_probe_register(tp, pdti_stall_probe, NULL);
	if (ret) {
		WRITE_ONCE(pdti_stall.armed, false);
		dma_buf_put(pdti_stall.dmabuf);
	} else {
		pdti_stall.tp = tp;
		pdti_stall.owner = t;
	}
	mutex_unlock(&pdti_stall_lock);
	return ret;
}

static int pdti_stall_wait(struct pdti *t)
{
	int i;

	if (READ_ONCE(pdti_stall.owner) != t)
		return -ENOENT;
	for (i = 0; i < 250 && !READ_ONCE(pdti_stall.stalled); i++)
		msleep(20);
	return READ_ONCE(pdti_stall.stalled) ? 0 : -ETIMEDOUT;
}

/* Also when the file is closed. */
static int pdti_stall_release(struct pdti *t)
{
	mutex_lock(&pdti_stall_lock);
	if (pdti_stall.owner != t) {
		mutex_unlock(&pdti_stall_lock);
		return -ENOENT;
	}
	WRITE_ONCE(pdti_stall.armed, false);
	WRITE_ONCE(pdti_stall.release, true);
	tracepoint_probe_unregister(pdti_stall.tp, pdti_stall_probe, NULL);
	/* No probe runs after this: the dma-buf may go. */
	tracepoint_synchronize_unregister();
	dma_buf_put(pdti_stall.dmabuf);
	pdti_stall.dmabuf = NULL;
	pdti_stall.owner = NULL;
	mutex_unlock(&pdti_stall_lock);
	return 0;
}

static void pdti_invalidate(struct dma_buf_attachment *attach)
{
	struct pdti *t = attach->importer_priv;

	dma_resv_assert_held(attach->dmabuf->resv);
	if (t->flags & PDTI_SLOW_INVALIDATE)
		wait_for_completion_timeout(&t->inval_go, 5 * HZ);
	t->st.move_notify++;
	if ((t->flags & (PDTI_DYNAMIC | PDTI_REVOCABLE)) && t->sgt) {
		dma_buf_unmap_attachment(attach, t->sgt, DMA_BIDIRECTIONAL);
		t->sgt = NULL;
		t->st.mapped = 0;
	}
	/* A revocable pinned importer stops for good: it never maps again. */
	if ((t->flags & PDTI_REVOCABLE) && t->st.pinned) {
		dma_buf_unpin(attach);
		t->st.pinned = 0;
		t->st.revoked = 1;
	}
}

static const struct dma_buf_attach_ops pdti_ops_p2p = {
	.allow_peer2peer = true,
	.PD_IMPORTER_INVALIDATE = pdti_invalidate,
};

static const struct dma_buf_attach_ops pdti_ops_nop2p = {
	.allow_peer2peer = false,
	.PD_IMPORTER_INVALIDATE = pdti_invalidate,
};

/*
 * Pinned for good.  From 7.1 such an importer has no invalidate_mappings
 * op; before, every dynamic importer needed one (dma_buf_dynamic_attach()
 * refused importer ops without it), and RDMA's only recorded the call.
 */
#ifdef PD_HAVE_DMA_BUF_ATTACH_REVOCABLE
static const struct dma_buf_attach_ops pdti_ops_pinned_p2p = {
	.allow_peer2peer = true,
};

static const struct dma_buf_attach_ops pdti_ops_pinned_nop2p = {
	.allow_peer2peer = false,
};
#else
#define pdti_ops_pinned_p2p	pdti_ops_p2p
#define pdti_ops_pinned_nop2p	pdti_ops_nop2p
#endif

static const struct dma_buf_attach_ops *pdti_attach_ops(u32 flags)
{
	bool p2p = !(flags & PDTI_NO_P2P);

	if ((flags & PDTI_PINNED) && !(flags & PDTI_REVOCABLE))
		return p2p ? &pdti_ops_pinned_p2p : &pdti_ops_pinned_nop2p;
	return p2p ? &pdti_ops_p2p : &pdti_ops_nop2p;
}

static int pdti_vmap(struct dma_buf *dmabuf, struct iosys_map *map)
{
#ifdef PD_HAVE_DMA_BUF_VMAP_UNLOCKED
	return dma_buf_vmap_unlocked(dmabuf, map);
#else
	return dma_buf_vmap(dmabuf, map);
#endif
}

static void pdti_vunmap(struct dma_buf *dmabuf, struct iosys_map *map)
{
#ifdef PD_HAVE_DMA_BUF_VMAP_UNLOCKED
	dma_buf_vunmap_unlocked(dmabuf, map);
#else
	dma_buf_vunmap(dmabuf, map);
#endif
}

/* How the mapping came out: its DMA entries and the largest (kbench). */
static void pdti_count_sgt(struct pdti *t)
{
	struct scatterlist *sg;
	int i;

	t->st.nents = t->sgt->nents;
	for_each_sgtable_dma_sg(t->sgt, sg, i)
		t->st.max_entry = max(t->st.max_entry, sg_dma_len(sg));
}

/* Every DMA page must be the page the exporter's vmap shows at that offset. */
static void pdti_check_sgt(struct pdti *t, const struct iosys_map *map)
{
	struct device *dev = t->dev;
	const void *base = map->is_iomem ? (const void __force *)map->vaddr_iomem : map->vaddr;
	struct scatterlist *sg;
	u64 off = 0;
	int i;

	for_each_sgtable_dma_sg(t->sgt, sg, i) {
		dma_addr_t addr = sg_dma_address(sg);
		unsigned int len = sg_dma_len(sg), k;

		if (!len || !PAGE_ALIGNED(len) || !PAGE_ALIGNED(addr) ||
		    len > dma_get_max_seg_size(dev)) {
			t->st.sg_error = -EIO;
			return;
		}
		for (k = 0; k < len; k += PAGE_SIZE, off += PAGE_SIZE) {
			if (off >= t->dmabuf->size ||
			    PHYS_PFN(dma_to_phys(dev, addr + k)) !=
			    vmalloc_to_pfn(base + off)) {
				t->st.sg_error = -EIO;
				return;
			}
			t->st.sg_checked++;
		}
	}
	if (off != t->dmabuf->size)
		t->st.sg_error = -EIO;
}

static int pdti_map_locked(struct pdti *t)
{
	struct sg_table *sgt;
	int ret;

	dma_resv_assert_held(t->dmabuf->resv);
	if (t->st.revoked)
		return -ENODEV;
	if (t->flags & PDTI_PINNED && !t->st.pinned) {
		ret = dma_buf_pin(t->attach);
		if (ret)
			return ret;
		t->st.pinned = 1;
	}
	sgt = dma_buf_map_attachment(t->attach, DMA_BIDIRECTIONAL);
	if (IS_ERR(sgt))
		return PTR_ERR(sgt);
	t->sgt = sgt;
	t->st.mapped = 1;
	return 0;
}

static void pdti_release_import(struct pdti *t)
{
	pdti_signal(t);
	if (!t->dmabuf)
		return;
	dma_resv_lock(t->dmabuf->resv, NULL);
	if (t->sgt)
		dma_buf_unmap_attachment(t->attach, t->sgt, DMA_BIDIRECTIONAL);
	t->sgt = NULL;
	/*
	 * Cleared under the lock: until dma_buf_detach() the exporter can
	 * still invalidate this attachment, and must not see a pin that is
	 * already given back (the fuzzer found the double unpin).
	 */
	if (t->st.pinned)
		dma_buf_unpin(t->attach);
	t->st.pinned = 0;
	t->st.mapped = 0;
	dma_resv_unlock(t->dmabuf->resv);
	dma_buf_detach(t->dmabuf, t->attach);
	dma_buf_put(t->dmabuf);
	t->dmabuf = NULL;
	t->attach = NULL;
	memset(&t->st, 0, sizeof(t->st));
}

static int pdti_import(struct pdti *t, struct pdti_import __user *uarg)
{
	struct device *dev = t->dev;
	struct pdti_import imp;
	struct iosys_map map;
	bool verify;
	int ret;

	if (copy_from_user(&imp, uarg, sizeof(imp)))
		return -EFAULT;
	if (imp.pad ||
	    imp.flags & ~(PDTI_PINNED | PDTI_DYNAMIC | PDTI_NO_P2P | PDTI_NO_VERIFY |
			  PDTI_REVOCABLE | PDTI_NO_MAP | PDTI_SLOW_INVALIDATE) ||
	    !(imp.flags & (PDTI_PINNED | PDTI_DYNAMIC)) ||
	    ((imp.flags & PDTI_REVOCABLE) && !(imp.flags & PDTI_PINNED)) ||
	    ((imp.flags & (PDTI_NO_MAP | PDTI_SLOW_INVALIDATE)) && (imp.flags & PDTI_PINNED)))
		return -EINVAL;
	if (t->dmabuf)
		return -EBUSY;

	dma_set_max_seg_size(dev, imp.max_seg ? imp.max_seg : SZ_64K);
	t->dmabuf = dma_buf_get(imp.fd);
	if (IS_ERR(t->dmabuf)) {
		ret = PTR_ERR(t->dmabuf);
		t->dmabuf = NULL;
		return ret;
	}
	t->flags = imp.flags;
	t->st.size = t->dmabuf->size;
	t->attach = dma_buf_dynamic_attach(t->dmabuf, dev,
					   pdti_attach_ops(imp.flags), t);
	if (IS_ERR(t->attach)) {
		ret = PTR_ERR(t->attach);
		t->attach = NULL;
		dma_buf_put(t->dmabuf);
		t->dmabuf = NULL;
		return ret;
	}
	if (imp.flags & PDTI_NO_MAP) {
		t->st.unverified = 1;
		return 0;
	}

	/* The page check needs the exporter's vmap (6.1's udmabuf has none). */
	verify = !(imp.flags & PDTI_NO_VERIFY) && t->dmabuf->ops->vmap;
	t->st.unverified = !verify;
	if (verify) {
		ret = pdti_vmap(t->dmabuf, &map);
		if (ret)
			goto err;
	}
	dma_resv_lock(t->dmabuf->resv, NULL);
	ret = pdti_map_locked(t);
	if (!ret)
		pdti_count_sgt(t);
	if (!ret && verify)
		pdti_check_sgt(t, &map);
	dma_resv_unlock(t->dmabuf->resv);
	if (verify)
		pdti_vunmap(t->dmabuf, &map);
	if (ret)
		goto err;
	return 0;

err:
	pdti_release_import(t);
	return ret;
}

/* Reads through the importer's DMA addresses, not through the exporter. */
static int pdti_read(struct pdti *t, struct pdti_read __user *uarg)
{
	struct device *dev = t->dev;
	struct scatterlist *sg;
	struct pdti_read rd;
	u64 pos = 0, done = 0;
	void *kbuf;
	int i, ret = 0;

	if (copy_from_user(&rd, uarg, sizeof(rd)))
		return -EFAULT;
	if (!t->dmabuf)
		return -ENOENT;
	if (!rd.length || rd.length > PDTI_MAX_READ || rd.offset > t->st.size ||
	    rd.length > t->st.size - rd.offset)
		return -EINVAL;
	kbuf = kvmalloc(rd.length, GFP_KERNEL);
	if (!kbuf)
		return -ENOMEM;

	dma_resv_lock(t->dmabuf->resv, NULL);
	if (!t->sgt) {
		ret = -ENODEV;
		goto unlock;
	}
	for_each_sgtable_dma_sg(t->sgt, sg, i) {
		u64 len = sg_dma_len(sg), from, n;
		void *src;

		if (pos + len <= rd.offset + done) {
			pos += len;
			continue;
		}
		from = rd.offset + done - pos;
		n = min(len - from, rd.length - done);
		src = memremap(dma_to_phys(dev, sg_dma_address(sg)) + from, n,
			       MEMREMAP_WB);
		if (!src) {
			ret = -ENOMEM;
			goto unlock;
		}
		memcpy(kbuf + done, src, n);
		memunmap(src);
		done += n;
		pos += len;
		if (done == rd.length)
			break;
	}
unlock:
	dma_resv_unlock(t->dmabuf->resv);
	if (!ret && copy_to_user(u64_to_user_ptr(rd.buf), kbuf, rd.length))
		ret = -EFAULT;
	kvfree(kbuf);
	return ret;
}

/*
 * A kernel CPU mapping, the way a display or a copy engine driver takes
 * one: vmap the whole dma-buf, copy a window out, vunmap.
 */
static int pdti_vmap_read(struct pdti_vmap_read __user *uarg)
{
	struct pdti_vmap_read rd;
	struct dma_buf *dmabuf;
	struct iosys_map map;
	void *kbuf;
	int ret;

	if (copy_from_user(&rd, uarg, sizeof(rd)))
		return -EFAULT;
	if (rd.pad || !rd.length || rd.length > PDTI_MAX_READ)
		return -EINVAL;
	dmabuf = dma_buf_get(rd.fd);
	if (IS_ERR(dmabuf))
		return PTR_ERR(dmabuf);
	ret = -EINVAL;
	if (rd.offset > dmabuf->size || rd.length > dmabuf->size - rd.offset)
		goto out_put;
	ret = -ENOMEM;
	kbuf = kvmalloc(rd.length, GFP_KERNEL);
	if (!kbuf)
		goto out_put;
	ret = pdti_vmap(dmabuf, &map);
	if (!ret) {
		iosys_map_memcpy_from(kbuf, &map, rd.offset, rd.length);
		pdti_vunmap(dmabuf, &map);
		if (copy_to_user(u64_to_user_ptr(rd.buf), kbuf, rd.length))
			ret = -EFAULT;
	}
	kvfree(kbuf);
out_put:
	dma_buf_put(dmabuf);
	return ret;
}

static int pdti_vmap_hold(struct pdti *t, const __s32 __user *uarg)
{
	struct dma_buf *dmabuf;
	__s32 fd;
	int ret;

	if (get_user(fd, uarg))
		return -EFAULT;
	if (t->vmapped)
		return -EBUSY;
	dmabuf = dma_buf_get(fd);
	if (IS_ERR(dmabuf))
		return PTR_ERR(dmabuf);
	ret = pdti_vmap(dmabuf, &t->vmap);
	if (ret) {
		dma_buf_put(dmabuf);
		return ret;
	}
	t->vmapped = dmabuf;
	return 0;
}

static int pdti_vmap_drop(struct pdti *t)
{
	if (!t->vmapped)
		return -ENOENT;
	pdti_vunmap(t->vmapped, &t->vmap);
	dma_buf_put(t->vmapped);
	t->vmapped = NULL;
	return 0;
}

static int pdti_pci_reset(struct pdti_pci_reset __user *uarg)
{
	const struct pci_error_handlers *err = NULL;
	struct pdti_pci_reset r;
	struct pci_dev *pci;
	int ret = 0;

	if (copy_from_user(&r, uarg, sizeof(r)))
		return -EFAULT;
	if (r.dev.pad || r.dev.domain < 0 || r.dev.bus > 0xff || r.dev.devfn > 0xff ||
	    r.kind > PDTI_RESET_FREEZE || r.hold_ms > 10000)
		return -EINVAL;
	pci = pci_get_domain_bus_and_slot(r.dev.domain, r.dev.bus, r.dev.devfn);
	if (!pci)
		return -ENODEV;
	device_lock(&pci->dev);
	if (pci->dev.driver)
		err = to_pci_driver(pci->dev.driver)->err_handler;
	if (r.kind == PDTI_RESET_FREEZE) {
		/* What pcie_do_recovery() sets first, under the device lock. */
		pci->error_state = pci_channel_io_frozen;
		msleep(r.hold_ms);
		pci->error_state = pci_channel_io_normal;
	} else if (r.kind == PDTI_RESET_FUNCTION) {
		if (!err || !err->reset_prepare || !err->reset_done) {
			ret = -EOPNOTSUPP;
			goto out;
		}
		err->reset_prepare(pci);
		msleep(r.hold_ms);
		err->reset_done(pci);
	} else if (r.kind == PDTI_RESET_AER_FAILED) {
		if (!err || !err->error_detected) {
			ret = -EOPNOTSUPP;
			goto out;
		}
		if (err->error_detected(pci, pci_channel_io_frozen) != PCI_ERS_RESULT_NEED_RESET)
			ret = -EIO;
	} else if (r.kind == PDTI_RESET_PERM_FAILURE) {
		if (!err || !err->error_detected) {
			ret = -EOPNOTSUPP;
			goto out;
		}
		if (err->error_detected(pci, pci_channel_io_perm_failure) !=
		    PCI_ERS_RESULT_DISCONNECT)
			ret = -EIO;
	} else {
		bool normal = r.kind == PDTI_RESET_AER_CAN_RECOVER;
		pci_channel_state_t state = normal ? pci_channel_io_normal :
						     pci_channel_io_frozen;

		if (!err || !err->error_detected || !err->slot_reset || !err->resume) {
			ret = -EOPNOTSUPP;
			goto out;
		}
		/* Frozen from error_detected() to resume(), as the core has it. */
		pci->error_state = state;
		if (err->error_detected(pci, state) !=
		    (normal ? PCI_ERS_RESULT_CAN_RECOVER : PCI_ERS_RESULT_NEED_RESET) ||
		    err->slot_reset(pci) != PCI_ERS_RESULT_RECOVERED)
			ret = -EIO;
		msleep(r.hold_ms);
		pci->error_state = pci_channel_io_normal;
		err->resume(pci);
	}
out:
	device_unlock(&pci->dev);
	pci_dev_put(pci);
	return ret;
}

static int pdti_kernel_facts(struct pdti_kernel __user *uarg)
{
	struct pdti_kernel k = { 0 };

	if (IS_ENABLED(CONFIG_PCI_P2PDMA))
		k.facts |= PDTI_K_P2PDMA;
	/* From the probes in Kbuild. */
#ifdef PD_HAVE_DMA_BUF_ATTACH_REVOCABLE
	k.facts |= PDTI_K_REVOCABLE_CONTRACT;
#endif
#ifdef PDTI_GEM_IMPORT_NO_MAP
	k.facts |= PDTI_K_GEM_IMPORT_NO_MAP;
#endif
	return copy_to_user(uarg, &k, sizeof(k)) ? -EFAULT : 0;
}

/*
 * Borrow a PCI function's struct device for DMA.  Test-only: its driver (if
 * any) does not know; the import only maps and reads through it.
 */
static int pdti_set_device(struct pdti *t, struct pdti_device __user *uarg)
{
	struct pci_dev *pci = NULL;
	struct pdti_device d;

	if (copy_from_user(&d, uarg, sizeof(d)))
		return -EFAULT;
	if (d.pad || (d.domain >= 0 && (d.bus > 0xff || d.devfn > 0xff)))
		return -EINVAL;
	if (t->dmabuf)
		return -EBUSY;
	if (d.domain >= 0) {
		pci = pci_get_domain_bus_and_slot(d.domain, d.bus, d.devfn);
		if (!pci)
			return -ENODEV;
	}
	pci_dev_put(t->pci);
	t->pci = pci;
	t->dev = pci ? &pci->dev : pdti_misc.this_device;
	return 0;
}

static long pdti_ioctl(struct file *filp, unsigned int cmd, unsigned long arg)
{
	struct pdti *t = filp->private_data;
	void __user *uarg = (void __user *)arg;
	struct pdti_status st;
	long ret;

	/* Not under t->lock: a STATUS may wait for the invalidation it ends. */
	if (cmd == PDTI_IOCTL_INVALIDATE_GO) {
		complete_all(&t->inval_go);
		return 0;
	}
	mutex_lock(&t->lock);
	switch (cmd) {
	case PDTI_IOCTL_IMPORT:
		ret = pdti_import(t, uarg);
		break;
	case PDTI_IOCTL_STATUS:
		ret = -ENOENT;
		if (!t->dmabuf)
			break;
		dma_resv_lock(t->dmabuf->resv, NULL);
		st = t->st;
		dma_resv_unlock(t->dmabuf->resv);
		ret = copy_to_user(uarg, &st, sizeof(st)) ? -EFAULT : 0;
		break;
	case PDTI_IOCTL_READ:
		ret = pdti_read(t, uarg);
		break;
	case PDTI_IOCTL_REMAP:
		ret = -ENOENT;
		if (!t->dmabuf)
			break;
		dma_resv_lock(t->dmabuf->resv, NULL);
		ret = t->sgt ? 0 : pdti_map_locked(t);
		t->st.remap_error = ret;
		dma_resv_unlock(t->dmabuf->resv);
		break;
	case PDTI_IOCTL_DEVICE:
		ret = pdti_set_device(t, uarg);
		break;
	case PDTI_IOCTL_KERNEL:
		ret = pdti_kernel_facts(uarg);
		break;
	case PDTI_IOCTL_VMAP_READ:
		ret = pdti_vmap_read(uarg);
		break;
	case PDTI_IOCTL_VMAP_HOLD:
		ret = pdti_vmap_hold(t, uarg);
		break;
	case PDTI_IOCTL_VMAP_DROP:
		ret = pdti_vmap_drop(t);
		break;
	case PDTI_IOCTL_PCI_RESET:
		ret = pdti_pci_reset(uarg);
		break;
	case PDTI_IOCTL_FENCE:
		ret = pdti_fence(t);
		break;
	case PDTI_IOCTL_HOLD_RESV:
		ret = pdti_hold_resv(t, uarg);
		break;
	case PDTI_IOCTL_SIGNAL:
		ret = t->fence ? 0 : -ENOENT;
		pdti_signal(t);
		break;
	case PDTI_IOCTL_STALL_ARM:
		ret = pdti_stall_arm(t, uarg);
		break;
	case PDTI_IOCTL_STALL_WAIT:
		ret = pdti_stall_wait(t);
		break;
	case PDTI_IOCTL_STALL_RELEASE:
		ret = pdti_stall_release(t);
		break;
	case PDTI_IOCTL_RELEASE:
		ret = t->dmabuf ? 0 : -ENOENT;
		complete_all(&t->inval_go);
		pdti_stall_release(t);
		pdti_release_import(t);
		break;
	default:
		ret = -ENOTTY;
	}
	mutex_unlock(&t->lock);
	return ret;
}

static int pdti_open(struct inode *inode, struct file *filp)
{
	struct pdti *t = kzalloc(sizeof(*t), GFP_KERNEL);

	if (!t)
		return -ENOMEM;
	mutex_init(&t->lock);
	init_completion(&t->inval_go);
	t->dev = pdti_misc.this_device;
	filp->private_data = t;
	return 0;
}

static int pdti_release(struct inode *inode, struct file *filp)
{
	struct pdti *t = filp->private_data;

	complete_all(&t->inval_go);
	pdti_stall_release(t);
	pdti_release_import(t);
	pdti_vmap_drop(t);
	pci_dev_put(t->pci);
	mutex_destroy(&t->lock);
	kfree(t);
	return 0;
}

static const struct file_operations pdti_fops = {
	.owner = THIS_MODULE,
	.open = pdti_open,
	.release = pdti_release,
	.unlocked_ioctl = pdti_ioctl,
	/* every argument is fixed-width, pointers as __u64: the -m32 tests */
	.compat_ioctl = compat_ptr_ioctl,
	.llseek = noop_llseek,
};

static struct miscdevice pdti_misc = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = "pd_test_importer",
	.fops = &pdti_fops,
	.mode = 0600,
};

static int __init pdti_init(void)
{
	int ret = misc_register(&pdti_misc);

	if (ret)
		return ret;
	pdti_misc.this_device->dma_parms = &pdti_dma_parms;
	dma_coerce_mask_and_coherent(pdti_misc.this_device, DMA_BIT_MASK(64));
	return 0;
}

static void __exit pdti_exit(void)
{
	misc_deregister(&pdti_misc);
}

module_init(pdti_init);
module_exit(pdti_exit);
MODULE_DESCRIPTION("peerdirect selftest dma-buf importer (test only)");
MODULE_LICENSE("GPL");
PD_MODULE_IMPORT_DMA_BUF();
