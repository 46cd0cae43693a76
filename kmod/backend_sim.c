// SPDX-License-Identifier: GPL-2.0
/*
 * The simulated accelerator: device memory is host RAM, allocated up front
 * in device-page-sized physically contiguous chunks.  Importers get it
 * through dma_map_sgtable() (never dma_map_resource(), which is for MMIO
 * and refuses RAM under DMA API debugging).
 */
#include <linux/dma-mapping.h>
#include <linux/highmem.h>
#include <linux/iosys-map.h>
#include <linux/module.h>
#include <linux/scatterlist.h>
#include <linux/sched/signal.h>
#include <linux/sizes.h>
#include <linux/slab.h>
#include <linux/vmalloc.h>
#include "peerdirect.h"

#define PD_SIM_MAX_DEVICES 8

/*
 * None unless asked for: on a node without a bound accelerator a simulated
 * device would pass every check while there is nothing to accelerate.
 */
static unsigned int sim_devices;
module_param(sim_devices, uint, 0444);
MODULE_PARM_DESC(sim_devices, "Simulated accelerators to create (0-8, default 0)");

static unsigned int sim_mem_mb = 64;
module_param(sim_mem_mb, uint, 0444);
MODULE_PARM_DESC(sim_mem_mb, "Device memory per simulated accelerator in MiB (default 64)");

static unsigned int sim_page_kb = 64;
module_param(sim_page_kb, uint, 0444);
MODULE_PARM_DESC(sim_page_kb, "Device page size in KiB: a power of two from PAGE_SIZE to 2048 (default 64)");

struct pd_sim {
	struct page **pages;	/* one per PAGE_SIZE, device memory order */
	unsigned long nr_pages;
	unsigned int order;	/* of each device page */
};

static struct pd_device *pd_sim_devs[PD_SIM_MAX_DEVICES];

static struct page **pd_sim_pages(struct pd_device *pd, u64 offset)
{
	struct pd_sim *sim = pd->backend;

	return &sim->pages[offset >> PAGE_SHIFT];
}

static struct sg_table *pd_sim_map(struct pd_device *pd,
				   struct dma_buf_attachment *attach,
				   u64 offset, u64 length,
				   enum dma_data_direction dir)
{
	unsigned int max_seg = ALIGN_DOWN(dma_get_max_seg_size(attach->dev), PAGE_SIZE);
	struct sg_table *sgt;
	int ret;

	if (!max_seg)
		return ERR_PTR(-EINVAL);
	sgt = kzalloc(sizeof(*sgt), GFP_KERNEL_ACCOUNT);
	if (!sgt)
		return ERR_PTR(-ENOMEM);
	ret = sg_alloc_table_from_pages_segment(sgt, pd_sim_pages(pd, offset),
						length >> PAGE_SHIFT, 0, length,
						max_seg, GFP_KERNEL_ACCOUNT);
	if (ret)
		goto err_free;
	ret = dma_map_sgtable(attach->dev, sgt, dir, 0);
	if (ret)
		goto err_table;
	return sgt;

err_table:
	sg_free_table(sgt);
err_free:
	kfree(sgt);
	return ERR_PTR(ret);
}

static void pd_sim_unmap(struct pd_device *pd,
			 struct dma_buf_attachment *attach,
			 struct sg_table *sgt, enum dma_data_direction dir)
{
	dma_unmap_sgtable(attach->dev, sgt, dir, 0);
	sg_free_table(sgt);
	kfree(sgt);
}

static unsigned long pd_sim_pfn(struct pd_device *pd, u64 offset)
{
	return page_to_pfn(*pd_sim_pages(pd, offset));
}

static pgprot_t pd_sim_pgprot(struct pd_device *pd, pgprot_t prot)
{
	return prot;
}

static int pd_sim_vmap(struct pd_device *pd, u64 offset, u64 length,
		       struct iosys_map *map)
{
	void *vaddr = vmap(pd_sim_pages(pd, offset), length >> PAGE_SHIFT,
			   VM_MAP, PAGE_KERNEL);

	if (!vaddr)
		return -ENOMEM;
	iosys_map_set_vaddr(map, vaddr);
	return 0;
}

static void pd_sim_vunmap(struct pd_device *pd, struct iosys_map *map)
{
	vunmap(map->vaddr);
}

/* A fatal signal ends it, as on a BAR: the caller gives the memory back. */
static int pd_sim_zero(struct pd_device *pd, u64 offset, u64 length)
{
	struct page **pages = pd_sim_pages(pd, offset);
	unsigned long i;

	for (i = 0; i < length >> PAGE_SHIFT; i++) {
		if (!(i % (SZ_1M >> PAGE_SHIFT)) && fatal_signal_pending(current))
			return -EINTR;
		clear_highpage(pages[i]);
		cond_resched();
	}
	return 0;
}

/*
 * Per DMA entry, by DMA address: under DMABUF_DEBUG the core has mangled
 * the table's page links, so nothing here may look at pages.
 */
static void pd_sim_sync(struct pd_device *pd, struct dma_buf_attachment *attach,
			struct sg_table *sgt, enum dma_data_direction dir,
			bool for_cpu)
{
	struct scatterlist *sg;
	int i;

	for_each_sgtable_dma_sg(sgt, sg, i) {
		if (for_cpu)
			dma_sync_single_for_cpu(attach->dev, sg_dma_address(sg),
						sg_dma_len(sg), dir);
		else
			dma_sync_single_for_device(attach->dev, sg_dma_address(sg),
						   sg_dma_len(sg), dir);
	}
}

static void pd_sim_free(struct pd_sim *sim)
{
	unsigned long step = 1UL << sim->order, i;

	for (i = 0; i < sim->nr_pages; i += step)
		if (sim->pages[i])
			__free_pages(sim->pages[i], sim->order);
	kvfree(sim->pages);
	kfree(sim);
}

static void pd_sim_release(struct pd_device *pd)
{
	pd_sim_free(pd->backend);
}

static const struct pd_backend_ops pd_sim_ops = {
	.name = "sim",
	.kind = PEERDIRECT_BACKEND_SIM,
	.map = pd_sim_map,
	.unmap = pd_sim_unmap,
	.pfn = pd_sim_pfn,
	.pgprot = pd_sim_pgprot,
	.vmap = pd_sim_vmap,
	.vunmap = pd_sim_vunmap,
	.zero = pd_sim_zero,
	.sync = pd_sim_sync,
	.release = pd_sim_release,
};

static struct pd_sim *pd_sim_alloc(u64 mem_size, u64 page_size)
{
	struct pd_sim *sim;
	unsigned long i, j, step;

	sim = kzalloc(sizeof(*sim), GFP_KERNEL);
	if (!sim)
		return NULL;
	sim->order = get_order(page_size);
	sim->nr_pages = mem_size >> PAGE_SHIFT;
	sim->pages = kvcalloc(sim->nr_pages, sizeof(*sim->pages), GFP_KERNEL);
	if (!sim->pages)
		goto err;

	step = 1UL << sim->order;
	for (i = 0; i < sim->nr_pages; i += step) {
		struct page *page = alloc_pages(GFP_KERNEL | __GFP_NOWARN, sim->order);

		if (!page)
			goto err;
		for (j = 0; j < step; j++)
			sim->pages[i + j] = page + j;
	}
	return sim;

err:
	if (sim->pages)
		pd_sim_free(sim);
	else
		kfree(sim);
	return NULL;
}

int pd_sim_init(void)
{
	u64 page_size = (u64)sim_page_kb << 10;
	u64 mem_size = (u64)sim_mem_mb << 20;
	unsigned int i;
	int ret;

	if (sim_devices > PD_SIM_MAX_DEVICES) {
		pr_err("peerdirect: sim_devices=%u exceeds %d\n", sim_devices,
		       PD_SIM_MAX_DEVICES);
		return -EINVAL;
	}
	if (!is_power_of_2(page_size) || page_size < PAGE_SIZE || page_size > SZ_2M ||
	    (sim_devices && (!mem_size || !IS_ALIGNED(mem_size, page_size)))) {
		pr_err("peerdirect: sim_page_kb=%u/sim_mem_mb=%u invalid (page: power of two, %lu KiB..2048 KiB; memory: non-zero multiple of the page)\n",
		       sim_page_kb, sim_mem_mb, PAGE_SIZE >> 10);
		return -EINVAL;
	}

	for (i = 0; i < sim_devices; i++) {
		struct pd_device *pd;
		struct pd_sim *sim = pd_sim_alloc(mem_size, page_size);

		if (!sim) {
			ret = -ENOMEM;
			goto err;
		}
		pd = pd_device_create(&pd_sim_ops, sim, NULL, mem_size, page_size);
		if (IS_ERR(pd)) {
			pd_sim_free(sim);
			ret = PTR_ERR(pd);
			goto err;
		}
		ret = pd_device_register(pd);
		if (ret) {
			pd_device_put(pd);
			goto err;
		}
		pd_sim_devs[i] = pd;
	}
	return 0;

err:
	pd_sim_exit();
	return ret;
}

void pd_sim_exit(void)
{
	unsigned int i;

	for (i = 0; i < PD_SIM_MAX_DEVICES; i++) {
		if (!pd_sim_devs[i])
			continue;
		pd_device_unplug(pd_sim_devs[i]);
		pd_device_put(pd_sim_devs[i]);
		pd_sim_devs[i] = NULL;
	}
}
