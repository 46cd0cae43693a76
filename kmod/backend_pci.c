// SPDX-License-Identifier: GPL-2.0
/*
 * The PCI BAR backend: device memory is a BAR with no struct pages, as an
 * accelerator's HBM BAR is.  Importers get peer-to-peer DMA addresses in
 * page-less sg entries; the CPU gets write-combined PFN mappings.  Bound only
 * on request (bind_ivshmem=1, new_id or driver_override), since QEMU's
 * ivshmem 1af4:1110 stand-in is a generic device; its ID table entry is
 * there for module autoloading (modules.alias), not for binding.
 *
 * How an importer's mapping is made depends on what the kernel offers:
 *  - CONFIG_PCI_P2PDMA and the dma-buf phys-vec helper (7.x): the kernel's
 *    P2PDMA map type decides, through dma_buf_phys_vec_to_sgt(): PCI bus
 *    addresses when the importer reaches the BAR below the host bridge, an
 *    IOVA or a direct MMIO mapping through a host bridge the kernel allows,
 *    refusal otherwise.
 *  - CONFIG_PCI_P2PDMA without it (6.x): the only exporter-facing verdict is
 *    pci_p2pdma_distance(); no path means refusal, the BAR's own function
 *    (distance 0) gets bus addresses, any other accepted importer
 *    dma_map_resource(), the host-bridge route (6.x computes the map type
 *    only for P2PDMA pages, which a page-less BAR does not have).
 *  - no P2PDMA (Debian's 6.1 and 6.12 configurations): the kernel cannot
 *    tell a path from none, so dma_map_resource() for every importer that
 *    asked for peer-to-peer, unless p2p_policy=1.
 */
#ifdef PD_HAVE_DMA_BUF_PHYS_VEC_TO_SGT
#include <linux/dma-buf-mapping.h>
#endif
#include <linux/dma-mapping.h>
#include <linux/io.h>
#include <linux/iosys-map.h>
#include <linux/module.h>
#include <linux/pci.h>
#include <linux/pci-p2pdma.h>
#include <linux/scatterlist.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>
#include "compat.h"
#include "peerdirect.h"

static bool bind_ivshmem;
module_param(bind_ivshmem, bool, 0444);
MODULE_PARM_DESC(bind_ivshmem, "Bind QEMU ivshmem-plain (1af4:1110) devices, BAR2 as device memory (default off)");

static unsigned int bar_page_kb = 64;
module_param(bar_page_kb, uint, 0444);
MODULE_PARM_DESC(bar_page_kb, "Device page size of BAR devices in KiB (default 64)");

static unsigned int p2p_policy;
module_param(p2p_policy, uint, 0644);
MODULE_PARM_DESC(p2p_policy,
		 "0: importers must ask for peer2peer, and where the kernel has P2PDMA have a path (default); 1: a P2PDMA path is required even without P2PDMA (then every importer is refused)");

/*
 * The 7.1 revoke contract (dma_buf_attach_revocable()): an importer without
 * invalidate_mappings, i.e. pinned for good (EFA's dma-buf MRs until they
 * adopt the revocable registration), may keep DMA addresses of the BAR for
 * an unbounded time after a revoke, a reset or device removal.  Such
 * importers are accepted by default on every kernel: EFA, the NIC this
 * module exists for, is one of them, and the quarantine keeps the memory
 * safe (a revoke waits boundedly, reports it pending, and the memory stays
 * out of the pool until the importer releases it).  Refusing them is an
 * opt-in policy, possible only where the kernel can tell them apart.
 */
static bool require_revocable;

static int pd_set_require_revocable(const char *val, const struct kernel_param *kp)
{
	bool on;
	int ret = kstrtobool(val, &on);

	if (ret)
		return ret;
#ifndef PD_HAVE_DMA_BUF_ATTACH_REVOCABLE
	if (on) {
		pr_err_ratelimited("peerdirect: require_revocable needs dma_buf_attach_revocable() (Linux 7.1)\n");
		return -EINVAL;
	}
#endif
	WRITE_ONCE(require_revocable, on);
	return 0;
}

static const struct kernel_param_ops pd_require_revocable_ops = {
	.set = pd_set_require_revocable,
	.get = param_get_bool,
};
module_param_cb(require_revocable, &pd_require_revocable_ops, &require_revocable, 0644);
MODULE_PARM_DESC(require_revocable,
		 "Refuse importers of BAR memory that cannot be revoked (pinned without invalidate_mappings, as EFA); default off, possible only on kernels with dma_buf_attach_revocable() (7.1)");

#define PD_BAR_INDEX	2
#define PD_BAR_OPT_IN		1	/* pci_device_id.driver_data */
#define PD_IVSHMEM_PLAIN_ID	0x1110	/* QEMU's ivshmem-plain */

struct pd_bar {
	struct pci_dev *pdev;
	phys_addr_t phys;
	void __iomem *va;
	struct pd_device *pd;
	struct p2pdma_provider *provider;	/* P2PDMA routing (7.x), else NULL */
	/* Hardware access (zero, map) against removal and reset. */
	struct rw_semaphore hw_lock;
	/*
	 * The BAR is prefetchable: mapped write-combining, in the kernel and
	 * for userspace.  Else uncached, as its reads and writes may have side
	 * effects that merging or reordering would break (a function bound by
	 * new_id or driver_override need not be memory).
	 */
	bool wc;
	bool gone;
	bool resetting;
	unsigned int reset_gen;	/* resets begun: zeroing across one restarts */
	wait_queue_head_t hw_wq;	/* zeroing waits out a reset */
	/*
	 * Our pci_enable_device_mem() is in effect: probe enables, AER's
	 * error_detected() disables and slot_reset() enables again, remove()
	 * disables, so the PCI core's enable count is ours exactly once.
	 * Under the device lock (probe, remove and the error handlers).
	 */
	bool enabled;
	/*
	 * The config space as probe found it, kept apart from the PCI core's
	 * single saved copy, which any pci_restore_state() (a function reset,
	 * resume) consumes: restored after every reset we end, as vfio-pci
	 * keeps its own.  NULL if it could not be stored.
	 */
	struct pci_saved_state *saved;
};

/*
 * Only a PCI function has a P2PDMA path (the 7.x map type refuses anything
 * else), and pci_p2pdma_distance() is the verdict every kernel exports: the
 * same walk that gives the map type, negative when there is no path or the
 * host bridge is not one the kernel allows.
 */
static bool pd_bar_has_path(struct pd_bar *bar, struct device *dev)
{
	return dev_is_pci(dev) && pci_p2pdma_distance(bar->pdev, dev, false) >= 0;
}

/*
 * Static importers (plain dma_buf_attach, e.g. a DRM PRIME import) never ask
 * for peer2peer: they expect struct pages, which a BAR does not have.
 */
static int pd_bar_attach(struct pd_device *pd, struct dma_buf_attachment *attach)
{
	struct pd_bar *bar = pd->backend;

	if (!attach->peer2peer) {
		dev_warn_ratelimited(&bar->pdev->dev,
				     "refusing importer %s: it did not ask for peer-to-peer and BAR memory has no struct pages\n",
				     pd_dev_name(attach->dev));
		return -EOPNOTSUPP;
	}
	if ((IS_ENABLED(CONFIG_PCI_P2PDMA) || READ_ONCE(p2p_policy)) &&
	    !pd_bar_has_path(bar, attach->dev)) {
		dev_warn_ratelimited(&bar->pdev->dev,
				     "refusing importer %s: no peer-to-peer path to it%s\n",
				     pd_dev_name(attach->dev),
				     IS_ENABLED(CONFIG_PCI_P2PDMA) ? "" :
				     " (p2p_policy=1, and this kernel has no P2PDMA)");
		return -EOPNOTSUPP;
	}
#ifdef PD_HAVE_DMA_BUF_ATTACH_REVOCABLE
	if (READ_ONCE(require_revocable) && !dma_buf_attach_revocable(attach)) {
		dev_warn_ratelimited(&bar->pdev->dev,
				     "refusing importer %s: it cannot be revoked (pinned without invalidate_mappings); require_revocable=0 accepts it\n",
				     pd_dev_name(attach->dev));
		return -EOPNOTSUPP;
	}
#endif
	return 0;
}

static u64 pd_bar_dyn_features(struct pd_device *pd)
{
	return READ_ONCE(require_revocable) ? PEERDIRECT_FEAT_REVOCABLE_ONLY : 0;
}

/* The importer's segment limit, page aligned so no entry reaches 4 GiB. */
static unsigned int pd_bar_max_seg(struct dma_buf_attachment *attach)
{
	return ALIGN_DOWN(dma_get_max_seg_size(attach->dev), PAGE_SIZE);
}

#if IS_ENABLED(CONFIG_PCI_P2PDMA) && defined(PD_HAVE_DMA_BUF_PHYS_VEC_TO_SGT)
/*
 * One physical range per importer segment: on the bus-address and direct
 * routes each becomes its own entry, so entries respect the importer's
 * limit.  (Through an IOMMU the helper links one IOVA range and splits it
 * only at 4 GiB.)
 */
static struct sg_table *pd_bar_map_ranges(struct pd_bar *bar,
					  struct dma_buf_attachment *attach,
					  u64 offset, u64 length,
					  enum dma_data_direction dir)
{
	unsigned int max_seg = pd_bar_max_seg(attach);
	struct sg_table *sgt;
	struct phys_vec *vec;
	size_t i, nr;
	u64 done = 0;

	if (!max_seg)
		return ERR_PTR(-EINVAL);
	nr = DIV_ROUND_UP_ULL(length, max_seg);
	vec = kvmalloc_array(nr, sizeof(*vec), GFP_KERNEL_ACCOUNT);
	if (!vec)
		return ERR_PTR(-ENOMEM);
	for (i = 0; i < nr; i++) {
		vec[i].paddr = bar->phys + offset + done;
		vec[i].len = min_t(u64, max_seg, length - done);
		done += vec[i].len;
	}
	sgt = dma_buf_phys_vec_to_sgt(attach, bar->provider, vec, nr, length, dir);
	kvfree(vec);
	return sgt;
}

static void pd_bar_unmap_ranges(struct dma_buf_attachment *attach,
				struct sg_table *sgt, enum dma_data_direction dir)
{
	dma_buf_free_sgt(attach, sgt, dir);
}
#else
/* A table of our own, and whether its entries are bus addresses. */
struct pd_bar_sgt {
	struct sg_table sgt;
	bool bus_addr;
};

static void pd_bar_unmap_entries(struct dma_buf_attachment *attach,
				 struct pd_bar_sgt *bt, unsigned int n,
				 enum dma_data_direction dir)
{
	struct scatterlist *sg;
	unsigned int i;

	if (bt->bus_addr)
		return;
	for_each_sg(bt->sgt.sgl, sg, n, i)
		dma_unmap_resource(attach->dev, sg_dma_address(sg), sg_dma_len(sg),
				   dir, DMA_ATTR_SKIP_CPU_SYNC);
}

static struct sg_table *pd_bar_map_ranges(struct pd_bar *bar,
					  struct dma_buf_attachment *attach,
					  u64 offset, u64 length,
					  enum dma_data_direction dir)
{
	unsigned int max_seg = pd_bar_max_seg(attach);
	struct pd_bar_sgt *bt;
	struct scatterlist *sg;
	unsigned int nents, i;
	u64 done = 0;
	int ret;

	if (!max_seg)
		return ERR_PTR(-EINVAL);
	nents = DIV_ROUND_UP_ULL(length, max_seg);
	bt = kzalloc(sizeof(*bt), GFP_KERNEL_ACCOUNT);
	if (!bt)
		return ERR_PTR(-ENOMEM);
	ret = sg_alloc_table(&bt->sgt, nents, GFP_KERNEL_ACCOUNT);
	if (ret)
		goto err_free;
	/* The importer is the BAR's own function: never leaves the device. */
	bt->bus_addr = IS_ENABLED(CONFIG_PCI_P2PDMA) &&
		       pci_p2pdma_distance(bar->pdev, attach->dev, false) == 0;

	for_each_sgtable_sg(&bt->sgt, sg, i) {
		unsigned int len = min_t(u64, max_seg, length - done);
		dma_addr_t addr;

		if (bt->bus_addr) {
			addr = pci_bus_address(bar->pdev, PD_BAR_INDEX) + offset + done;
		} else {
			addr = dma_map_resource(attach->dev, bar->phys + offset + done,
						len, dir, DMA_ATTR_SKIP_CPU_SYNC);
			if (dma_mapping_error(attach->dev, addr)) {
				pd_bar_unmap_entries(attach, bt, i, dir);
				ret = -EIO;
				goto err_table;
			}
		}
		sg_set_page(sg, NULL, len, 0);
		sg_dma_address(sg) = addr;
		sg_dma_len(sg) = len;
		done += len;
		cond_resched();
	}
	/*
	 * No CPU pages behind these entries: hide them from anyone walking the
	 * CPU list (orig_nents), as the in-tree page-less exporters do.
	 */
	bt->sgt.nents = nents;
	bt->sgt.orig_nents = 0;
	return &bt->sgt;

err_table:
	sg_free_table(&bt->sgt);
err_free:
	kfree(bt);
	return ERR_PTR(ret);
}

static void pd_bar_unmap_ranges(struct dma_buf_attachment *attach,
				struct sg_table *sgt, enum dma_data_direction dir)
{
	struct pd_bar_sgt *bt = container_of(sgt, struct pd_bar_sgt, sgt);

	pd_bar_unmap_entries(attach, bt, sgt->nents, dir);
	sgt->orig_nents = sgt->nents;
	sg_free_table(sgt);
	kfree(bt);
}
#endif

static struct sg_table *pd_bar_map(struct pd_device *pd,
				   struct dma_buf_attachment *attach,
				   u64 offset, u64 length,
				   enum dma_data_direction dir)
{
	struct pd_bar *bar = pd->backend;
	struct sg_table *sgt;

	down_read(&bar->hw_lock);
	if (bar->gone || bar->resetting)
		sgt = ERR_PTR(-ENODEV);
	else
		sgt = pd_bar_map_ranges(bar, attach, offset, length, dir);
	up_read(&bar->hw_lock);
	return sgt;
}

static void pd_bar_unmap(struct pd_device *pd, struct dma_buf_attachment *attach,
			 struct sg_table *sgt, enum dma_data_direction dir)
{
	pd_bar_unmap_ranges(attach, sgt, dir);
}

static unsigned long pd_bar_pfn(struct pd_device *pd, u64 offset)
{
	struct pd_bar *bar = pd->backend;

	return PHYS_PFN(bar->phys + offset);
}

static pgprot_t pd_bar_pgprot(struct pd_device *pd, pgprot_t prot)
{
	struct pd_bar *bar = pd->backend;

	return bar->wc ? pgprot_writecombine(prot) : pgprot_noncached(prot);
}

/* No .vmap: a kernel CPU mapping of the BAR survives no reset (export.c). */

/*
 * Under hw_lock (read); returns with it held, the device out of reset, or
 * -EINTR (killed) or -ENODEV (gone).  Killable: a reset whose recovery
 * fails elsewhere in the hierarchy never calls us again (the PCI core only
 * reports "device recovery failed"), so the wait may never end by itself.
 */
static int pd_bar_wait_reset(struct pd_bar *bar)
{
	while (bar->resetting && !bar->gone) {
		up_read(&bar->hw_lock);
		if (wait_event_killable(bar->hw_wq, !READ_ONCE(bar->resetting) ||
					READ_ONCE(bar->gone))) {
			down_read(&bar->hw_lock);
			return -EINTR;
		}
		down_read(&bar->hw_lock);
	}
	return bar->gone ? -ENODEV : 0;
}

/*
 * Whether the zeros of the last chunk reached the device.  A frozen link
 * (the AER core marks the channel offline before it calls error_detected())
 * or a removed device drops posted writes silently.  A read is not posted
 * and does not pass the writes before it (PCIe ordering), so reading the
 * chunk's first and last words back both flushes them and shows a link
 * that dropped them: it reads all-ones.  Under hw_lock (read).
 */
static bool pd_bar_zero_landed(struct pd_bar *bar, u64 offset, u64 n)
{
	if (pci_channel_offline(bar->pdev))
		return false;
	return !readl(bar->va + offset) && !readl(bar->va + offset + n - 4);
}

/*
 * hw_lock is dropped between 1 MiB chunks, so that a reset or a removal
 * waits for one chunk, not for a multi-GiB allocation, and the zeroing
 * then waits out the reset like any other hardware access.  A reset may
 * scrub or re-initialise device memory, so the zeroing starts over after
 * one, at most PD_ZERO_RESTARTS times (then EIO).  A fatal signal ends
 * it: the caller gives the memory back.  A link found frozen before the
 * AER handler blocked the hardware, or zeros that did not land, fail it
 * with EIO: memory whose zeroing may have been dropped is never handed
 * out, and the caller may ask again once the device recovered.
 */
#define PD_ZERO_RESTARTS	3

static int pd_bar_zero(struct pd_device *pd, u64 offset, u64 length)
{
	struct pd_bar *bar = pd->backend;
	unsigned int gen, restarts = 0;
	u64 done = 0, n;
	int ret;

	down_read(&bar->hw_lock);
	ret = pd_bar_wait_reset(bar);
	gen = bar->reset_gen;
	while (!ret && done < length) {
		if (fatal_signal_pending(current)) {
			ret = -EINTR;
			break;
		}
		if (pci_channel_offline(bar->pdev)) {
			ret = -EIO;
			break;
		}
		n = min_t(u64, length - done, SZ_1M);
		memset_io(bar->va + offset + done, 0, n);
		done += n;
		/*
		 * The zeros went through a write-combining mapping: drain the
		 * CPU's WC buffers before a reset may start and before the
		 * memory is handed out, so that neither a peer's DMA nor
		 * another CPU mapping can see what was there before.
		 */
		wmb();
		if (done == length) {
			if (!pd_bar_zero_landed(bar, offset + done - n, n))
				ret = -EIO;
			break;
		}
		up_read(&bar->hw_lock);
		cond_resched();
		down_read(&bar->hw_lock);
		ret = pd_bar_wait_reset(bar);
		if (!ret && bar->reset_gen != gen) {
			/* Resets faster than a zeroing (an AER storm): give up. */
			if (++restarts > PD_ZERO_RESTARTS) {
				ret = -EIO;
				break;
			}
			gen = bar->reset_gen;
			done = 0;
		}
	}
	up_read(&bar->hw_lock);
	if (ret == -EIO)
		dev_warn_ratelimited(&bar->pdev->dev,
				     "zeroing %llu bytes at %#llx failed: link offline or writes lost\n",
				     length, offset);
	return ret;
}

/* Our enable of the function, undone at most once (remove, AER). */
static void pd_bar_disable(struct pd_bar *bar)
{
	if (bar->enabled) {
		pci_disable_device(bar->pdev);
		bar->enabled = false;
	}
}

/* No hardware access from here until pd_bar_hw_resume(). */
static void pd_bar_hw_block(struct pd_bar *bar)
{
	down_write(&bar->hw_lock);
	bar->resetting = true;
	bar->reset_gen++;
	up_write(&bar->hw_lock);
}

static void pd_bar_hw_resume(struct pd_bar *bar)
{
	down_write(&bar->hw_lock);
	bar->resetting = false;
	up_write(&bar->hw_lock);
	wake_up_all(&bar->hw_wq);
}

/* After every export was revoked: no new hardware access from here on. */
static void pd_bar_unplug(struct pd_device *pd)
{
	struct pd_bar *bar = pd->backend;

	down_write(&bar->hw_lock);
	bar->gone = true;
	up_write(&bar->hw_lock);
	wake_up_all(&bar->hw_wq);
}

/*
 * The kernel's write-combining mapping of the BAR goes as soon as nothing
 * can use it, not with the last open file or dma-buf: after unplug (gone:
 * no zeroing, no new mapping; every export revoked, so a vmap is of a
 * scratch page) and once no importer reaches device memory (no vmap of
 * it left).  On x86 its PAT reservation would otherwise outlive remove()
 * and turn the next mapping of the range (a device hot-added there, the
 * function rebound to vfio-pci or its own driver, a sysfs resource mmap)
 * write-combining, registers included.  Under the device lock (remove and
 * the error handlers), or from the final release.
 */
static void pd_bar_iounmap(struct pd_bar *bar)
{
	void __iomem *va = bar->va;

	if (!va)
		return;
	WRITE_ONCE(bar->va, NULL);
	iounmap(va);
}

/* The bookkeeping and the PCI device outlive remove() until the last user. */
static void pd_bar_release(struct pd_device *pd)
{
	struct pd_bar *bar = pd->backend;

	pd_bar_iounmap(bar);
	kfree(bar->saved);
	pci_dev_put(bar->pdev);
	kfree(bar);
}

static const struct pd_backend_ops pd_bar_ops = {
	.name = "pci-bar",
	.kind = PEERDIRECT_BACKEND_PCI_BAR,
	.features = PEERDIRECT_FEAT_PAGELESS | PEERDIRECT_FEAT_P2P_REQUIRED |
		    (IS_ENABLED(CONFIG_PCI_P2PDMA) ? PEERDIRECT_FEAT_P2PDMA : 0),
	.dyn_features = pd_bar_dyn_features,
	.attach = pd_bar_attach,
	.map = pd_bar_map,
	.unmap = pd_bar_unmap,
	.pfn = pd_bar_pfn,
	.pgprot = pd_bar_pgprot,
	.zero = pd_bar_zero,
	.unplug = pd_bar_unplug,
	.release = pd_bar_release,
};

/*
 * The P2PDMA provider of the BAR (7.x).  Device-managed: it lives until
 * remove() returns, and remove() revokes every mapping first; after that no
 * map reaches the provider (the gone flag).
 */
static int pd_bar_p2pdma_init(struct pd_bar *bar)
{
#if IS_ENABLED(CONFIG_PCI_P2PDMA) && defined(PD_HAVE_DMA_BUF_PHYS_VEC_TO_SGT)
	int ret = pcim_p2pdma_init(bar->pdev);

	if (ret)
		return ret;
	bar->provider = pcim_p2pdma_provider(bar->pdev, PD_BAR_INDEX);
	if (IS_ERR_OR_NULL(bar->provider))
		return bar->provider ? PTR_ERR(bar->provider) : -ENODEV;
#endif
	return 0;
}

static int pd_bar_probe(struct pci_dev *pdev, const struct pci_device_id *id)
{
	u64 page_size = (u64)bar_page_kb << 10;
	struct pd_device *pd;
	struct pd_bar *bar;
	u64 len;
	int ret;

	/* driver_override naming us (pdctl bind) is the opt-in too */
	if ((id->driver_data & PD_BAR_OPT_IN) && !bind_ivshmem &&
	    !pd_pci_has_driver_override(pdev))
		return -ENODEV;
	if (!(pci_resource_flags(pdev, PD_BAR_INDEX) & IORESOURCE_MEM))
		return -ENODEV;
	len = pci_resource_len(pdev, PD_BAR_INDEX);
	if (!is_power_of_2(page_size) || page_size < PAGE_SIZE ||
	    len < page_size || !IS_ALIGNED(len, page_size)) {
		dev_err(&pdev->dev, "BAR%d of %llu bytes does not fit bar_page_kb=%u\n",
			PD_BAR_INDEX, len, bar_page_kb);
		return -EINVAL;
	}

	ret = pci_enable_device_mem(pdev);
	if (ret)
		return ret;
	ret = pci_request_region(pdev, PD_BAR_INDEX, "peerdirect");
	if (ret)
		goto err_disable;

	bar = kzalloc(sizeof(*bar), GFP_KERNEL);
	if (!bar) {
		ret = -ENOMEM;
		goto err_region;
	}
	bar->pdev = pci_dev_get(pdev);
	bar->enabled = true;
	bar->phys = pci_resource_start(pdev, PD_BAR_INDEX);
	init_rwsem(&bar->hw_lock);
	init_waitqueue_head(&bar->hw_wq);
	bar->wc = pci_resource_flags(pdev, PD_BAR_INDEX) & IORESOURCE_PREFETCH;
	if (!bar->wc)
		dev_info(&pdev->dev, "BAR%d is not prefetchable: mapped uncached, not write-combining\n",
			 PD_BAR_INDEX);
	bar->va = bar->wc ? ioremap_wc(bar->phys, len) : ioremap(bar->phys, len);
	if (!bar->va) {
		ret = -ENOMEM;
		goto err_bar;
	}
	ret = pd_bar_p2pdma_init(bar);
	if (ret)
		goto err_unmap;

	pd = pd_device_create(&pd_bar_ops, bar, &pdev->dev, len, page_size);
	if (IS_ERR(pd)) {
		ret = PTR_ERR(pd);
		goto err_unmap;
	}
	bar->pd = pd;
	ret = pd_device_register(pd);
	if (ret) {
		pd_device_put(pd);	/* releases bar through pd_bar_release */
		goto err_region;
	}
	pci_set_drvdata(pdev, pd);
	/* What a recovery restores after a reset cleared the function. */
	pci_save_state(pdev);
	bar->saved = pci_store_saved_state(pdev);
	return 0;

err_unmap:
	iounmap(bar->va);
err_bar:
	pci_dev_put(bar->pdev);
	kfree(bar);
err_region:
	pci_release_region(pdev, PD_BAR_INDEX);
err_disable:
	pci_disable_device(pdev);
	return ret;
}

/*
 * Hot-unplug or unbind: revoke every export (importers notified, CPU
 * mappings zapped, bounded wait), then wait, without bound, until no
 * importer can reach the BAR any more (no DMA mapping, no vmap of it), and
 * only then give the BAR back.  Once released, the PCI core may hand the
 * range to another device: an importer still holding DMA addresses into it
 * (a pinned RDMA MR, which remote peers can drive) would then write into
 * that device.  vfio-pci blocks remove() the same way for its users.  On
 * 7.1+ kernels require_revocable=1 keeps importers that cannot let go out
 * in the first place.
 * Files and dma-bufs still open keep the structures, and every call on
 * them fails with ENODEV.
 */
static void pd_bar_remove(struct pci_dev *pdev)
{
	struct pd_device *pd = pci_get_drvdata(pdev);

	pd_device_unplug(pd);
	pd_device_wait_unreachable(pd);
	pd_bar_iounmap(pd->backend);
	pci_release_region(pdev, PD_BAR_INDEX);
	pd_bar_disable(pd->backend);
	pd_device_put(pd);
}

/*
 * A function reset (sysfs reset, FLR) or AER recovery resets the device
 * while importers and CPU mappings may be live: revoke every export around
 * it (reason RESET) and keep the hardware untouched until it is over, the
 * way vfio-pci zaps and blocks BAR mappings.  Exports asked for meanwhile
 * wait for the end of the reset; allocations survive it (their handles
 * and offsets, not necessarily their contents: a zeroing under way starts
 * over).
 */
static void pd_bar_reset_begin(struct pci_dev *pdev, bool frozen)
{
	struct pd_device *pd = pci_get_drvdata(pdev);
	struct pd_revoke_result res = {};

	/*
	 * A frozen link drops every write: block the hardware (zeroing, new
	 * mappings) at once, not after the revoke's wait for importers, which
	 * may last revoke_timeout_ms, so that no ALLOC "zeroes" a dead link
	 * meanwhile and hands out the previous owner's bytes.  Before a
	 * function reset the device still works: importers may finish their
	 * DMA first, and a zeroing under way starts over after the reset.
	 */
	if (frozen)
		pd_bar_hw_block(pd->backend);
	pd_reset_prepare(pd, &res);
	if (!frozen)
		pd_bar_hw_block(pd->backend);
	if (res.revoked)
		dev_info_ratelimited(&pdev->dev, "reset: revoked %u export(s), %u still mapped\n",
				     res.revoked, res.pending);
}

static void pd_bar_reset_end(struct pci_dev *pdev)
{
	struct pd_device *pd = pci_get_drvdata(pdev);

	pd_bar_hw_resume(pd->backend);
	pd_reset_done(pd);
}

/*
 * The device is lost for good: a permanent channel failure, or a recovery
 * that cannot enable it again.  Give it up as an unplug does: every export
 * revoked (UNPLUG), no hardware access, the device node gone, and every
 * call on open files and dma-bufs ENODEV, waiters (EXPORT, ALLOC's zeroing)
 * woken with it.  The BAR stays requested until the removal that follows,
 * whose unplug is then a no-op.
 */
static void pd_bar_give_up(struct pci_dev *pdev, const char *why)
{
	struct pd_device *pd = pci_get_drvdata(pdev);

	dev_err_ratelimited(&pdev->dev, "giving the device up: %s\n", why);
	pd_device_unplug(pd);
	/*
	 * Unmapped now if no importer reaches the BAR (none can start to:
	 * every export is revoked); else by the removal that follows, once
	 * they let go.
	 */
	if (pd_device_unreachable(pd))
		pd_bar_iounmap(pd->backend);
}

/* The config space probe stored, back in the function after a reset. */
static void pd_bar_restore(struct pci_dev *pdev)
{
	struct pd_bar *bar = ((struct pd_device *)pci_get_drvdata(pdev))->backend;

	if (bar->saved)
		pci_load_saved_state(pdev, bar->saved);
	pci_restore_state(pdev);
}

/*
 * Our enable, again, after AER's error_detected() gave it up; false (and
 * the device given up) if the function will not come back.
 */
static bool pd_bar_reenable(struct pci_dev *pdev, struct pd_bar *bar)
{
	if (bar->enabled)
		return true;
	if (pci_enable_device_mem(pdev)) {
		pd_bar_give_up(pdev, "cannot enable it after the reset");
		return false;
	}
	bar->enabled = true;
	return true;
}

/*
 * A function reset (sysfs reset, FLR).  If an AER recovery never reached
 * resume() (it failed after error_detected()), its reset is still open,
 * the function disabled: this reset ends that one instead of nesting a
 * second, which would leave the device resetting for ever.
 */
static void pd_bar_reset_prepare(struct pci_dev *pdev)
{
	struct pd_bar *bar = ((struct pd_device *)pci_get_drvdata(pdev))->backend;

	if (!READ_ONCE(bar->resetting))
		pd_bar_reset_begin(pdev, false);
}

static void pd_bar_reset_done(struct pci_dev *pdev)
{
	struct pd_bar *bar = ((struct pd_device *)pci_get_drvdata(pdev))->backend;

	if (!bar->enabled) {
		if (!pd_bar_reenable(pdev, bar))
			return;
		pd_bar_restore(pdev);
	}
	if (READ_ONCE(bar->resetting))
		pd_bar_reset_end(pdev);
}

static pci_ers_result_t pd_bar_error_detected(struct pci_dev *pdev,
					      pci_channel_state_t state)
{
	struct pd_device *pd = pci_get_drvdata(pdev);
	struct pd_bar *bar = pd->backend;

	if (state == pci_channel_io_normal)
		return PCI_ERS_RESULT_CAN_RECOVER;
	if (state == pci_channel_io_perm_failure) {
		pd_bar_give_up(pdev, "permanent channel failure");
		return PCI_ERS_RESULT_DISCONNECT;
	}
	/* Once per recovery: a second report while reset waits for resume(). */
	if (!READ_ONCE(bar->resetting))
		pd_bar_reset_begin(pdev, true);
	/* slot_reset() enables it again: one enable of ours either way. */
	pd_bar_disable(bar);
	return PCI_ERS_RESULT_NEED_RESET;
}

static pci_ers_result_t pd_bar_slot_reset(struct pci_dev *pdev)
{
	struct pd_device *pd = pci_get_drvdata(pdev);
	struct pd_bar *bar = pd->backend;

	/*
	 * Called for any function below the link, also one whose
	 * error_detected() said CAN_RECOVER (a normal channel) and so is
	 * still enabled: pcie_do_recovery() resets the link only for a
	 * frozen channel, whose error_detected() already began our reset, so
	 * such a function was not reset and keeps its exports.
	 */
	if (!pd_bar_reenable(pdev, bar))
		return PCI_ERS_RESULT_DISCONNECT;
	/* The reset cleared the config space: what probe stored. */
	pd_bar_restore(pdev);
	return PCI_ERS_RESULT_RECOVERED;
}

static void pd_bar_resume(struct pci_dev *pdev)
{
	struct pd_device *pd = pci_get_drvdata(pdev);
	struct pd_bar *bar = pd->backend;

	if (READ_ONCE(bar->resetting))
		pd_bar_reset_end(pdev);
}

static const struct pci_error_handlers pd_bar_err_handlers = {
	.error_detected = pd_bar_error_detected,
	.slot_reset = pd_bar_slot_reset,
	.resume = pd_bar_resume,
	.reset_prepare = pd_bar_reset_prepare,
	.reset_done = pd_bar_reset_done,
};

/*
 * The table is the module's modalias: udev loads the module when such a
 * device appears (Documentation/kernel-module.md).  An entry with
 * PD_BAR_OPT_IN is a generic device that probe binds only with
 * bind_ivshmem=1 or a driver_override (pdctl bind); other devices are
 * bound through new_id or driver_override.
 */
static const struct pci_device_id pd_bar_ids[] = {
	{ PCI_DEVICE(PCI_VENDOR_ID_REDHAT_QUMRANET, PD_IVSHMEM_PLAIN_ID),
	  .driver_data = PD_BAR_OPT_IN },
	{ }
};
MODULE_DEVICE_TABLE(pci, pd_bar_ids);

static struct pci_driver pd_bar_driver = {
	.name = "peerdirect",
	.id_table = pd_bar_ids,
	.probe = pd_bar_probe,
	.remove = pd_bar_remove,
	.err_handler = &pd_bar_err_handlers,
};

int pd_pci_init(void)
{
	return pci_register_driver(&pd_bar_driver);
}

void pd_pci_exit(void)
{
	pci_unregister_driver(&pd_bar_driver);
}
