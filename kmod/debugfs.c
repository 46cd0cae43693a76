// SPDX-License-Identifier: GPL-2.0
/*
 * debugfs: /sys/kernel/debug/peerdirect/peerdirectN/{summary,allocations,
 * exports,attachments} for the administrator who needs to know who holds
 * device memory.
 *
 * Each file copies what it shows into a snapshot under pd_device.lock and
 * formats it after dropping the lock, so a slow reader never holds up a
 * dma-buf release, a revoke or an allocation.  The per-export counters
 * live under each dma-buf's reservation lock, which nests inside
 * pd_device.lock; dma_resv_trylock keeps a wedged importer from stalling
 * the snapshot (the line then says "busy").  Names set by userspace
 * (DMA_BUF_SET_NAME) are escaped: they cannot forge lines or fields.
 */
#include <linux/ctype.h>
#include <linux/debugfs.h>
#include <linux/dma-resv.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <uapi/linux/dma-buf.h>
#include "peerdirect.h"

static struct dentry *pd_debugfs_root;

static const char * const pd_reason_names[PD_REVOKE_NR_REASONS] = {
	"free", "revoke", "reset", "admin", "unplug",
};

static const char *pd_state_name(bool revoked, u32 reason)
{
	return revoked ? pd_reason_names[reason - 1] : "live";
}

/* Whitespace, backslashes and anything unprintable as \ooo. */
static void pd_seq_escape(struct seq_file *m, const char *s)
{
	for (; *s; s++) {
		unsigned char c = *s;

		if (isgraph(c) && c != '\\')
			seq_putc(m, c);
		else
			seq_printf(m, "\\%03o", c);
	}
}

struct pd_summary {
	char state[16];
	u64 mem_free, allocated, quarantined, nr_allocs, live_exports;
	u64 exports_total, revoked[PD_REVOKE_NR_REASONS], revoke_timeouts;
	unsigned int resetting;
	int reach;
};

static int pd_summary_show(struct seq_file *m, void *unused)
{
	struct pd_device *pd = m->private;
	struct pd_summary s = {};
	struct pd_alloc *alloc;
	int i;

	mutex_lock(&pd->lock);
	list_for_each_entry(alloc, &pd->allocs, node) {
		s.nr_allocs++;
		s.allocated += alloc->size;
		s.live_exports += alloc->nr_exports;
	}
	strscpy(s.state, pd->dead ? "unplugged" : pd->resetting ? "resetting" : "live",
		sizeof(s.state));
	s.mem_free = pd_device_mem_free(pd);
	s.quarantined = atomic64_read(&pd->quarantined);
	s.exports_total = atomic64_read(&pd->nr_exports_total);
	for (i = 0; i < PD_REVOKE_NR_REASONS; i++)
		s.revoked[i] = atomic64_read(&pd->nr_revoked[i]);
	s.revoke_timeouts = atomic64_read(&pd->nr_revoke_timeouts);
	mutex_unlock(&pd->lock);
	s.reach = atomic_read(&pd->nr_reach);

	seq_printf(m, "backend: %s\n", pd->ops->name);
	seq_printf(m, "state: %s\n", s.state);
	seq_printf(m, "mem_size: %llu\npage_size: %llu\n", pd->mem_size,
		   pd->page_size);
	seq_printf(m, "mem_free: %llu\nallocated: %llu\nquarantined: %llu\n",
		   s.mem_free, s.allocated, s.quarantined);
	seq_printf(m, "allocations: %llu\nexports_live: %llu\nexports_total: %llu\n",
		   s.nr_allocs, s.live_exports, s.exports_total);
	seq_printf(m, "importer_mappings: %d\n", s.reach);
	seq_printf(m, "quota: %llu\nmax_exports: %u\nmax_events: %u\n",
		   pd->quota, pd->max_exports, pd->max_events);
	for (i = 0; i < PD_REVOKE_NR_REASONS; i++)
		seq_printf(m, "revoked_%s: %llu\n", pd_reason_names[i], s.revoked[i]);
	seq_printf(m, "revoke_timeouts: %llu\n", s.revoke_timeouts);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(pd_summary);

/*
 * A snapshot array sized under the lock: @count says how many entries are
 * needed now; the caller allocates outside the lock and retries if the
 * count grew meanwhile.
 */
static void *pd_snapshot_alloc(size_t nr, size_t size)
{
	return kvmalloc_array(max_t(size_t, nr, 1), size, GFP_KERNEL_ACCOUNT);
}

struct pd_alloc_line {
	pid_t tgid;
	u32 nr_exports;
	u64 handle, offset, size;
	bool freed;
};

static int pd_allocations_show(struct seq_file *m, void *unused)
{
	struct pd_device *pd = m->private;
	struct pd_alloc_line *lines = NULL;
	struct pd_alloc *alloc;
	size_t nr, cap = 0, i;

	for (;;) {
		mutex_lock(&pd->lock);
		nr = 0;
		list_for_each_entry(alloc, &pd->allocs, node)
			nr++;
		if (lines && nr <= cap)
			break;
		mutex_unlock(&pd->lock);
		kvfree(lines);
		cap = nr + 16;
		lines = pd_snapshot_alloc(cap, sizeof(*lines));
		if (!lines)
			return -ENOMEM;
	}
	i = 0;
	list_for_each_entry(alloc, &pd->allocs, node) {
		lines[i++] = (struct pd_alloc_line) {
			.tgid = pd_pid_nr(alloc->pid), .nr_exports = alloc->nr_exports,
			.handle = READ_ONCE(alloc->handle), .offset = alloc->offset,
			.size = alloc->size, .freed = alloc->freed,
		};
	}
	mutex_unlock(&pd->lock);

	seq_puts(m, "pid\thandle\toffset\tsize\texports\tstate\n");
	for (i = 0; i < nr; i++)
		seq_printf(m, "%d\t%llu\t0x%llx\t%llu\t%u\t%s\n", lines[i].tgid,
			   lines[i].handle, lines[i].offset, lines[i].size,
			   lines[i].nr_exports, lines[i].freed ? "quarantined" : "live");
	kvfree(lines);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(pd_allocations);

static size_t pd_count_exports(struct pd_device *pd)
{
	struct pd_alloc *alloc;
	size_t n = 0;

	list_for_each_entry(alloc, &pd->allocs, node)
		n += alloc->nr_exports;
	return n;
}

struct pd_export_line {
	u64 id, inode, length;
	pid_t tgid;
	bool busy, revoked, rdonly;
	u32 reason, nr_attach, pins;
	int maps;
	char name[DMA_BUF_NAME_LEN];
};

static void pd_export_snap(struct pd_export_line *l, struct pd_export *exp)
{
	struct dma_buf *dmabuf = exp->dmabuf;
	struct pd_attach *pa;

	l->id = exp->id;
	l->inode = exp->inode;
	l->length = exp->length;
	l->tgid = pd_pid_nr(exp->pid);
	l->rdonly = exp->rdonly;
	spin_lock(&dmabuf->name_lock);
	strscpy(l->name, dmabuf->name ?: "-", sizeof(l->name));
	spin_unlock(&dmabuf->name_lock);
	if (!dma_resv_trylock(dmabuf->resv)) {
		l->busy = true;
		return;
	}
	list_for_each_entry(pa, &exp->attachments, node)
		l->nr_attach++;
	l->pins = exp->nr_pins;
	l->maps = atomic_read(&exp->nr_maps);
	l->revoked = exp->revoked;
	l->reason = exp->reason;
	dma_resv_unlock(dmabuf->resv);
}

static int pd_exports_show(struct seq_file *m, void *unused)
{
	struct pd_device *pd = m->private;
	struct pd_export_line *lines = NULL, *l;
	struct pd_alloc *alloc;
	struct pd_export *exp;
	size_t nr, cap = 0, i;

	for (;;) {
		mutex_lock(&pd->lock);
		nr = pd_count_exports(pd);
		if (lines && nr <= cap)
			break;
		mutex_unlock(&pd->lock);
		kvfree(lines);
		cap = nr + 16;
		lines = pd_snapshot_alloc(cap, sizeof(*lines));
		if (!lines)
			return -ENOMEM;
	}
	memset(lines, 0, nr * sizeof(*lines));
	i = 0;
	list_for_each_entry(alloc, &pd->allocs, node)
		list_for_each_entry(exp, &alloc->exports, node)
			pd_export_snap(&lines[i++], exp);
	mutex_unlock(&pd->lock);

	seq_puts(m, "id\tpid\tinode\tsize\tname\tattachments\tpins\tmaps\tstate\tmode\n");
	for (i = 0; i < nr; i++) {
		l = &lines[i];
		seq_printf(m, "%llu\t%d\t%llu\t%llu\t", l->id, l->tgid, l->inode, l->length);
		pd_seq_escape(m, l->name);
		if (l->busy)
			seq_puts(m, "\t-\t-\t-\tbusy");
		else
			seq_printf(m, "\t%u\t%u\t%d\t%s", l->nr_attach, l->pins, l->maps,
				   pd_state_name(l->revoked, l->reason));
		seq_printf(m, "\t%s\n", l->rdonly ? "ro" : "rw");
	}
	kvfree(lines);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(pd_exports);

/* One line per importer mapping (or per attachment without one). */
struct pd_attach_line {
	u64 export_id;
	u32 pins;
	int dir;	/* -1: attached, not mapped */
	char dev[32];
};

static const char *pd_dir_name(int dir)
{
	switch (dir) {
	case DMA_BIDIRECTIONAL:
		return "bidirectional";
	case DMA_TO_DEVICE:
		return "to_device";
	case DMA_FROM_DEVICE:
		return "from_device";
	default:
		return "-";
	}
}

/* Under pd_device.lock; returns the lines needed (filled while <= cap). */
static size_t pd_attach_snap(struct pd_device *pd, struct pd_attach_line *lines,
			     size_t cap)
{
	struct pd_alloc *alloc;
	struct pd_export *exp;
	struct pd_attach *pa;
	struct pd_map *mp;
	size_t n = 0;

	list_for_each_entry(alloc, &pd->allocs, node) {
		list_for_each_entry(exp, &alloc->exports, node) {
			if (!dma_resv_trylock(exp->dmabuf->resv))
				continue;
			list_for_each_entry(pa, &exp->attachments, node) {
				struct pd_attach_line l = {
					.export_id = exp->id, .pins = pa->pins, .dir = -1,
				};

				strscpy(l.dev, pd_dev_name(pa->attach->dev), sizeof(l.dev));
				if (list_empty(&pa->map_list) && n++ < cap)
					lines[n - 1] = l;
				list_for_each_entry(mp, &pa->map_list, node) {
					l.dir = mp->dir;
					if (n++ < cap)
						lines[n - 1] = l;
				}
			}
			dma_resv_unlock(exp->dmabuf->resv);
		}
	}
	return n;
}

static int pd_attachments_show(struct seq_file *m, void *unused)
{
	struct pd_device *pd = m->private;
	struct pd_attach_line *lines = NULL;
	size_t nr, cap = 0, i;

	for (;;) {
		mutex_lock(&pd->lock);
		nr = pd_attach_snap(pd, lines, lines ? cap : 0);
		mutex_unlock(&pd->lock);
		if (lines && nr <= cap)
			break;
		kvfree(lines);
		cap = nr + 16;
		lines = pd_snapshot_alloc(cap, sizeof(*lines));
		if (!lines)
			return -ENOMEM;
	}

	seq_puts(m, "export\tdevice\tpins\tmapping\n");
	for (i = 0; i < nr; i++) {
		seq_printf(m, "%llu\t", lines[i].export_id);
		pd_seq_escape(m, lines[i].dev);
		seq_printf(m, "\t%u\t%s\n", lines[i].pins, pd_dir_name(lines[i].dir));
	}
	kvfree(lines);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(pd_attachments);

void pd_debugfs_add(struct pd_device *pd)
{
	pd->debugfs = debugfs_create_dir(pd->name, pd_debugfs_root);
	debugfs_create_file("summary", 0400, pd->debugfs, pd, &pd_summary_fops);
	debugfs_create_file("allocations", 0400, pd->debugfs, pd,
			    &pd_allocations_fops);
	debugfs_create_file("exports", 0400, pd->debugfs, pd, &pd_exports_fops);
	debugfs_create_file("attachments", 0400, pd->debugfs, pd,
			    &pd_attachments_fops);
}

void pd_debugfs_remove(struct pd_device *pd)
{
	debugfs_remove_recursive(pd->debugfs);
	pd->debugfs = NULL;
}

void pd_debugfs_init(void)
{
	pd_debugfs_root = debugfs_create_dir("peerdirect", NULL);
}

void pd_debugfs_exit(void)
{
	debugfs_remove_recursive(pd_debugfs_root);
}
