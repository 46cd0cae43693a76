// SPDX-License-Identifier: GPL-2.0
/*
 * The PCI BAR backend: device memory is a BAR with no struct pages, as an
 * accelerator's HBM BAR is.  Importers get peer-to-peer DMA addresses from
 * dma_map_resource(), in page-less sg entries; the CPU gets write-combined
 * PFN mappings.  Bound only on request (bind_ivshmem=1, new_id or
 * driver_override), since QEMU's ivshmem 1af4:1110 stand-in is a generic
 * device.
 */
#include <linux/dma-mapping.h>
#include <linux/io.h>
#include <linux/iosys-map.h>
#include <linux/module.h>
#include <linux/pci.h>
#include <linux/pci-p2pdma.h>
#include <linux/scatterlist.h>
#include <linux/slab.h>
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
		 "0: importers must ask for peer2peer (default); 1: also require pci_p2pdma_distance() >= 0 (needs CONFIG_PCI_P2PDMA)");

#define PD_BAR_INDEX	2

struct pd_bar {
	struct pci_dev *pci;
	phys_addr_t phys;
	u64 len;
	void __iomem *va;
	struct pd_device *pdev;
	/* Hardware access (zero, map) against removal. */
	struct rw_semaphore hw_lock;
	bool gone;
	struct list_head zombie;	/* on pd_bar_zombies after remove */
};

/*
 * BARs of removed devices whose memory may still be reached by an importer
 * that never unmapped (a pinned RDMA MR, a kernel vmap).  Until the last
 * reference goes, a new device over the same range is refused, so that
 * memory is never handed to a new owner.
 */
static LIST_HEAD(pd_bar_zombies);
static DEFINE_MUTEX(pd_bar_zombie_lock);

/*
 * Static importers (plain dma_buf_attach, e.g. a DRM PRIME import) never ask
 * for peer2peer: they expect struct pages, which a BAR does not have.
 */
static int pd_bar_attach(struct pd_device *pdev, struct dma_buf_attachment *attach)
{
	struct pd_bar *bar = pdev->backend;

	if (!attach->peer2peer) {
		dev_warn_ratelimited(&bar->pci->dev,
				     "refusing importer %s: it did not ask for peer-to-peer and BAR memory has no struct pages\n",
				     dev_name(attach->dev));
		return -EOPNOTSUPP;
	}
	if (READ_ONCE(p2p_policy) &&
	    pci_p2pdma_distance(bar->pci, attach->dev, false) < 0) {
		dev_warn_ratelimited(&bar->pci->dev,
				     "refusing importer %s: no peer-to-peer path (p2p_policy=1)\n",
				     dev_name(attach->dev));
		return -EOPNOTSUPP;
	}
	return 0;
}

static void pd_bar_unmap_entries(struct dma_buf_attachment *attach,
				 struct sg_table *sgt, unsigned int n,
				 enum dma_data_direction dir)
{
	struct scatterlist *sg;
	unsigned int i;

	for_each_sg(sgt->sgl, sg, n, i)
		dma_unmap_resource(attach->dev, sg_dma_address(sg), sg_dma_len(sg),
				   dir, DMA_ATTR_SKIP_CPU_SYNC);
}

static struct sg_table *pd_bar_map(struct pd_device *pdev,
				   struct dma_buf_attachment *attach,
				   u64 offset, u64 length,
				   enum dma_data_direction dir)
{
	unsigned int max_seg = ALIGN_DOWN(dma_get_max_seg_size(attach->dev), PAGE_SIZE);
	struct pd_bar *bar = pdev->backend;
	struct scatterlist *sg;
	struct sg_table *sgt;
	unsigned int nents, i;
	u64 done = 0;
	int ret;

	if (!max_seg)
		return ERR_PTR(-EINVAL);
	nents = DIV_ROUND_UP_ULL(length, max_seg);
	sgt = kzalloc(sizeof(*sgt), GFP_KERNEL);
	if (!sgt)
		return ERR_PTR(-ENOMEM);
	ret = sg_alloc_table(sgt, nents, GFP_KERNEL);
	if (ret)
		goto err_free;

	down_read(&bar->hw_lock);
	if (bar->gone) {
		ret = -ENODEV;
		goto err_unlock;
	}

	for_each_sgtable_sg(sgt, sg, i) {
		unsigned int len = min_t(u64, max_seg, length - done);
		dma_addr_t addr;

		addr = dma_map_resource(attach->dev, bar->phys + offset + done, len,
					dir, DMA_ATTR_SKIP_CPU_SYNC);
		if (dma_mapping_error(attach->dev, addr)) {
			pd_bar_unmap_entries(attach, sgt, i, dir);
			ret = -EIO;
			goto err_unlock;
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
	up_read(&bar->hw_lock);
	sgt->nents = nents;
	sgt->orig_nents = 0;
	return sgt;

err_unlock:
	up_read(&bar->hw_lock);
	sg_free_table(sgt);
err_free:
	kfree(sgt);
	return ERR_PTR(ret);
}

static void pd_bar_unmap(struct pd_device *pdev, struct dma_buf_attachment *attach,
			 struct sg_table *sgt, enum dma_data_direction dir)
{
	pd_bar_unmap_entries(attach, sgt, sgt->nents, dir);
	sgt->orig_nents = sgt->nents;
	sg_free_table(sgt);
	kfree(sgt);
}

static unsigned long pd_bar_pfn(struct pd_device *pdev, u64 offset)
{
	struct pd_bar *bar = pdev->backend;

	return PHYS_PFN(bar->phys + offset);
}

static pgprot_t pd_bar_pgprot(struct pd_device *pdev, pgprot_t prot)
{
	return pgprot_writecombine(prot);
}

static int pd_bar_vmap(struct pd_device *pdev, u64 offset, u64 length,
		       struct iosys_map *map)
{
	struct pd_bar *bar = pdev->backend;

	iosys_map_set_vaddr_iomem(map, bar->va + offset);
	return 0;
}

static void pd_bar_vunmap(struct pd_device *pdev, struct iosys_map *map)
{
}

static void pd_bar_zero(struct pd_device *pdev, u64 offset, u64 length)
{
	struct pd_bar *bar = pdev->backend;
	u64 done, n;

	/* Multi-GiB allocations: in chunks, without hogging the CPU. */
	down_read(&bar->hw_lock);
	for (done = 0; done < length && !bar->gone; done += n) {
		n = min_t(u64, length - done, SZ_1M);
		memset_io(bar->va + offset + done, 0, n);
		cond_resched();
	}
	up_read(&bar->hw_lock);
}

/* After every export was revoked: no new hardware access from here on. */
static void pd_bar_unplug(struct pd_device *pdev)
{
	struct pd_bar *bar = pdev->backend;

	down_write(&bar->hw_lock);
	bar->gone = true;
	up_write(&bar->hw_lock);

	mutex_lock(&pd_bar_zombie_lock);
	list_add(&bar->zombie, &pd_bar_zombies);
	mutex_unlock(&pd_bar_zombie_lock);
}

/* The kernel mapping and the PCI device outlive remove() until the last user. */
static void pd_bar_release(struct pd_device *pdev)
{
	struct pd_bar *bar = pdev->backend;

	mutex_lock(&pd_bar_zombie_lock);
	if (!list_empty(&bar->zombie))
		list_del(&bar->zombie);
	mutex_unlock(&pd_bar_zombie_lock);
	iounmap(bar->va);
	pci_dev_put(bar->pci);
	kfree(bar);
}

static bool pd_bar_in_use(phys_addr_t phys, u64 len)
{
	struct pd_bar *bar;
	bool busy = false;

	mutex_lock(&pd_bar_zombie_lock);
	list_for_each_entry(bar, &pd_bar_zombies, zombie)
		if (phys < bar->phys + bar->len && bar->phys < phys + len)
			busy = true;
	mutex_unlock(&pd_bar_zombie_lock);
	return busy;
}

static const struct pd_backend_ops pd_bar_ops = {
	.name = "pci-bar",
	.kind = PEERDIRECT_BACKEND_PCI_BAR,
	.features = PEERDIRECT_FEAT_PAGELESS | PEERDIRECT_FEAT_P2P_REQUIRED,
	.attach = pd_bar_attach,
	.map = pd_bar_map,
	.unmap = pd_bar_unmap,
	.pfn = pd_bar_pfn,
	.pgprot = pd_bar_pgprot,
	.vmap = pd_bar_vmap,
	.vunmap = pd_bar_vunmap,
	.zero = pd_bar_zero,
	.unplug = pd_bar_unplug,
	.release = pd_bar_release,
};

static int pd_bar_probe(struct pci_dev *pci, const struct pci_device_id *id)
{
	u64 page_size = (u64)bar_page_kb << 10;
	struct pd_device *pdev;
	struct pd_bar *bar;
	u64 len;
	int ret;

	if (!(pci_resource_flags(pci, PD_BAR_INDEX) & IORESOURCE_MEM))
		return -ENODEV;
	len = pci_resource_len(pci, PD_BAR_INDEX);
	if (!is_power_of_2(page_size) || page_size < PAGE_SIZE ||
	    len < page_size || !IS_ALIGNED(len, page_size)) {
		dev_err(&pci->dev, "BAR%d of %llu bytes does not fit bar_page_kb=%u\n",
			PD_BAR_INDEX, len, bar_page_kb);
		return -EINVAL;
	}

	if (pd_bar_in_use(pci_resource_start(pci, PD_BAR_INDEX), len)) {
		dev_err(&pci->dev, "BAR%d is still held by importers of a removed device; retry once they release it\n",
			PD_BAR_INDEX);
		return -EBUSY;
	}

	ret = pci_enable_device_mem(pci);
	if (ret)
		return ret;
	ret = pci_request_region(pci, PD_BAR_INDEX, "peerdirect");
	if (ret)
		goto err_disable;

	bar = kzalloc(sizeof(*bar), GFP_KERNEL);
	if (!bar) {
		ret = -ENOMEM;
		goto err_region;
	}
	bar->pci = pci_dev_get(pci);
	bar->phys = pci_resource_start(pci, PD_BAR_INDEX);
	bar->len = len;
	init_rwsem(&bar->hw_lock);
	INIT_LIST_HEAD(&bar->zombie);
	bar->va = ioremap_wc(bar->phys, len);
	if (!bar->va) {
		ret = -ENOMEM;
		goto err_bar;
	}

	pdev = pd_device_create(&pd_bar_ops, bar, &pci->dev, len, page_size);
	if (IS_ERR(pdev)) {
		ret = PTR_ERR(pdev);
		goto err_unmap;
	}
	bar->pdev = pdev;
	ret = pd_device_register(pdev);
	if (ret) {
		pd_device_put(pdev);	/* releases bar through pd_bar_release */
		goto err_region;
	}
	pci_set_drvdata(pci, pdev);
	return 0;

err_unmap:
	iounmap(bar->va);
err_bar:
	pci_dev_put(bar->pci);
	kfree(bar);
err_region:
	pci_release_region(pci, PD_BAR_INDEX);
err_disable:
	pci_disable_device(pci);
	return ret;
}

/*
 * Hot-unplug or unbind: revoke every export (importers notified, CPU
 * mappings zapped, bounded wait), then give the BAR back.  Files and
 * dma-bufs still open keep the structures, and every call on them fails
 * with ENODEV.
 */
static void pd_bar_remove(struct pci_dev *pci)
{
	struct pd_device *pdev = pci_get_drvdata(pci);

	pd_device_unplug(pdev);
	pci_release_region(pci, PD_BAR_INDEX);
	pci_disable_device(pci);
	pd_device_put(pdev);
}

static const struct pci_device_id pd_bar_ids[] = {
	{ }	/* ivshmem is added at load only when asked (bind_ivshmem) */
};
MODULE_DEVICE_TABLE(pci, pd_bar_ids);

static struct pci_driver pd_bar_driver = {
	.name = "peerdirect",
	.id_table = pd_bar_ids,
	.probe = pd_bar_probe,
	.remove = pd_bar_remove,
};

int pd_pci_init(void)
{
	int ret = pci_register_driver(&pd_bar_driver);

	if (ret || !bind_ivshmem)
		return ret;
	ret = pci_add_dynid(&pd_bar_driver, PCI_VENDOR_ID_REDHAT_QUMRANET, 0x1110,
			    PCI_ANY_ID, PCI_ANY_ID, 0, 0, 0);
	if (ret)
		pci_unregister_driver(&pd_bar_driver);
	return ret;
}

void pd_pci_exit(void)
{
	pci_unregister_driver(&pd_bar_driver);
}
