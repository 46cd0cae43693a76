// SPDX-License-Identifier: GPL-2.0
/*
 * debugfs: /sys/kernel/debug/peerdirect/peerdirectN/{summary,allocations,exports}
 * for the administrator who needs to know who holds device memory.
 */
#include <linux/debugfs.h>
#include <linux/dma-resv.h>
#include <linux/seq_file.h>
#include <uapi/linux/dma-buf.h>
#include "peerdirect.h"

static struct dentry *pd_debugfs_root;

static const char * const pd_reason_names[PD_REVOKE_NR_REASONS] = {
	"free", "revoke", "reset", "admin", "unplug",
};

static int pd_summary_show(struct seq_file *m, void *unused)
{
	struct pd_device *pdev = m->private;
	struct pd_alloc *alloc;
	u64 allocated = 0, nr_allocs = 0, live_exports = 0;
	int i;

	mutex_lock(&pdev->lock);
	list_for_each_entry(alloc, &pdev->allocs, node) {
		nr_allocs++;
		allocated += alloc->size;
		live_exports += alloc->nr_exports;
	}
	seq_printf(m, "backend: %s\n", pdev->ops->name);
	seq_printf(m, "state: %s\n", pdev->dead ? "unplugged" : "live");
	seq_printf(m, "mem_size: %llu\npage_size: %llu\n", pdev->mem_size,
		   pdev->page_size);
	seq_printf(m, "mem_free: %llu\nallocated: %llu\nquarantined: %llu\n",
		   pd_device_mem_free(pdev), allocated, pdev->quarantined);
	seq_printf(m, "allocations: %llu\nexports_live: %llu\nexports_total: %llu\n",
		   nr_allocs, live_exports, pdev->nr_exports_total);
	seq_printf(m, "quota: %llu\nmax_exports: %u\nmax_events: %u\n",
		   pdev->quota, pdev->max_exports, pdev->max_events);
	for (i = 0; i < PD_REVOKE_NR_REASONS; i++)
		seq_printf(m, "revoked_%s: %llu\n", pd_reason_names[i],
			   pdev->nr_revoked[i]);
	seq_printf(m, "revoke_timeouts: %llu\n", pdev->nr_revoke_timeouts);
	mutex_unlock(&pdev->lock);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(pd_summary);

static int pd_allocations_show(struct seq_file *m, void *unused)
{
	struct pd_device *pdev = m->private;
	struct pd_alloc *alloc;

	seq_puts(m, "pid\thandle\toffset\tsize\texports\tstate\n");
	mutex_lock(&pdev->lock);
	list_for_each_entry(alloc, &pdev->allocs, node)
		seq_printf(m, "%d\t%llu\t0x%llx\t%llu\t%u\t%s\n", alloc->tgid,
			   alloc->handle, alloc->offset, alloc->size,
			   alloc->nr_exports, alloc->freed ? "quarantined" : "live");
	mutex_unlock(&pdev->lock);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(pd_allocations);

/*
 * The per-export counters live under each dma-buf's reservation lock, which
 * nests inside pd_device.lock; dma_resv_trylock keeps a wedged importer
 * from stalling the reader (the line then says "busy").
 */
static int pd_exports_show(struct seq_file *m, void *unused)
{
	struct pd_device *pdev = m->private;
	struct pd_alloc *alloc;
	struct pd_export *exp;
	struct pd_attach *pa;

	seq_puts(m, "id\tpid\tinode\tsize\tname\tattachments\tpins\tmaps\tstate\n");
	mutex_lock(&pdev->lock);
	list_for_each_entry(alloc, &pdev->allocs, node) {
		list_for_each_entry(exp, &alloc->exports, node) {
			struct dma_buf *dmabuf = exp->dmabuf;
			unsigned int nr_attach = 0;
			char name[DMA_BUF_NAME_LEN] = "-";

			spin_lock(&dmabuf->name_lock);
			if (dmabuf->name)
				strscpy(name, dmabuf->name, sizeof(name));
			spin_unlock(&dmabuf->name_lock);

			seq_printf(m, "%llu\t%d\t%llu\t%llu\t%s\t", exp->id,
				   exp->tgid, exp->inode, exp->length, name);
			if (!dma_resv_trylock(dmabuf->resv)) {
				seq_puts(m, "-\t-\t-\tbusy\n");
				continue;
			}
			list_for_each_entry(pa, &exp->attachments, node)
				nr_attach++;
			seq_printf(m, "%u\t%u\t%d\t%s\n", nr_attach, exp->nr_pins,
				   atomic_read(&exp->nr_maps),
				   exp->revoked ? pd_reason_names[exp->reason - 1] : "live");
			dma_resv_unlock(dmabuf->resv);
		}
	}
	mutex_unlock(&pdev->lock);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(pd_exports);

void pd_debugfs_add(struct pd_device *pdev)
{
	pdev->debugfs = debugfs_create_dir(pdev->name, pd_debugfs_root);
	debugfs_create_file("summary", 0400, pdev->debugfs, pdev, &pd_summary_fops);
	debugfs_create_file("allocations", 0400, pdev->debugfs, pdev,
			    &pd_allocations_fops);
	debugfs_create_file("exports", 0400, pdev->debugfs, pdev, &pd_exports_fops);
}

void pd_debugfs_remove(struct pd_device *pdev)
{
	debugfs_remove_recursive(pdev->debugfs);
	pdev->debugfs = NULL;
}

void pd_debugfs_init(void)
{
	pd_debugfs_root = debugfs_create_dir("peerdirect", NULL);
}

void pd_debugfs_exit(void)
{
	debugfs_remove_recursive(pd_debugfs_root);
}
