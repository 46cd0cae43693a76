/* SPDX-License-Identifier: GPL-2.0 */
/*
 * peerdirect internals: the device registry, the allocator, exports and
 * revocation, shared by every backend.
 *
 * Lifetimes (each arrow holds a reference):
 *   open file (pd_file) -> pd_device
 *   allocation (pd_alloc) -> pd_device, pd_owner
 *   export (pd_export, the dma-buf's priv) -> pd_alloc, pd_file (events)
 * so device memory returns to the pool only when the last dma-buf that
 * covers it is released, whatever the owner did: revoked memory stays
 * quarantined while any importer still holds it.
 *
 * Lock order (dma_resv: the allocation's, shared by its exports):
 * mmap_lock -> dma_resv (the fault handler);
 * pd_device.lock -> pd_export.vmap_lock (revocation's mark);
 * dma_resv -> pd_bar.hw_lock (a BAR map); pd_device.lock ->
 * pd_file.ev_lock; misc_mtx -> pd_device.files_lock -> pd_file.ev_lock
 * (open).  ev_lock is a leaf and never held across a user copy (a reader
 * that stalls in copy_to_user must not stall revocation).  Revocation
 * marks exports under pd_device.lock, then takes each reservation (polled,
 * against the call's deadline) with no device lock held; pd_device.lock
 * is never taken under dma_resv.  An export whose reservation an importer
 * held past the deadline is finished by its revoke_work, which owns a
 * reference to the dma-buf's dentry until then.  pd_device.nr_revoking
 * counts the revocations marked and not completed: a reset waits for those
 * another call marked within its own deadline, with no lock held, and
 * counts the rest pending; remove() (pd_device_wait_unreachable()) waits
 * for all of them, without bound, as for importer mappings.
 *
 * Names: pd is a struct pd_device, pdev a struct pci_dev (as everywhere in
 * the kernel), pfile a struct pd_file, filp a struct file.
 */
#ifndef _PEERDIRECT_H
#define _PEERDIRECT_H

#include <linux/dma-buf.h>
#include <linux/dma-resv.h>
#include <linux/kref.h>
#include <linux/list.h>
#include <linux/miscdevice.h>
#include <linux/mutex.h>
#include <linux/pid.h>
#include <linux/pid_namespace.h>
#include <linux/sched.h>
#include <linux/types.h>
#include <linux/uidgid.h>
#include <linux/wait.h>
#include <linux/xarray.h>
#include "../uapi/linux/peerdirect.h"

struct pd_device;
struct pd_export;

/*
 * A backend is the part that differs with the hardware: where device memory
 * lives, how importers and the CPU reach it.  Offsets are device memory
 * offsets in [0, mem_size).
 */
struct pd_backend_ops {
	const char *name;
	u32 kind;		/* PEERDIRECT_BACKEND_* */
	u64 features;		/* extra PEERDIRECT_FEAT_* bits */
	/* Bits that follow run-time settings; may be NULL. */
	u64 (*dyn_features)(struct pd_device *pd);
	/* Refuse importers the backend cannot serve (peer-to-peer policy). */
	int (*attach)(struct pd_device *pd, struct dma_buf_attachment *attach);
	struct sg_table *(*map)(struct pd_device *pd,
				struct dma_buf_attachment *attach,
				u64 offset, u64 length,
				enum dma_data_direction dir);
	void (*unmap)(struct pd_device *pd, struct dma_buf_attachment *attach,
		      struct sg_table *sgt, enum dma_data_direction dir);
	unsigned long (*pfn)(struct pd_device *pd, u64 offset);
	pgprot_t (*pgprot)(struct pd_device *pd, pgprot_t prot);
	/* NULL: no kernel CPU mapping, and the dma-buf offers no .vmap */
	int (*vmap)(struct pd_device *pd, u64 offset, u64 length,
		    struct iosys_map *map);
	void (*vunmap)(struct pd_device *pd, struct iosys_map *map);
	/*
	 * 0, or -ENODEV (the device is gone) or -EINTR (a fatal signal while
	 * waiting for a reset to end): the memory was not zeroed.
	 */
	int (*zero)(struct pd_device *pd, u64 offset, u64 length);
	/* CPU cache maintenance around DMA_BUF_IOCTL_SYNC; may be NULL. */
	void (*sync)(struct pd_device *pd, struct dma_buf_attachment *attach,
		     struct sg_table *sgt, enum dma_data_direction dir,
		     bool for_cpu);
	/* The device is gone (after every export was revoked); may be NULL. */
	void (*unplug)(struct pd_device *pd);
	/* The last reference to the device is gone. */
	void (*release)(struct pd_device *pd);
};

/*
 * Per-user memory accounting on one device (the quota's key: a real uid).
 * An allocation is charged to the caller's uid and to the owner of each
 * user namespace up to the initial one (memory.c).
 */
struct pd_owner {
	struct kref ref;	/* one per allocation charged */
	struct list_head node;	/* pd_device.owners */
	kuid_t uid;
	u64 used;		/* under pd_device.lock */
};

enum pd_revoke_reason {
	PD_REVOKE_FREE = PEERDIRECT_REASON_FREE,
	PD_REVOKE_USER = PEERDIRECT_REASON_REVOKE,
	PD_REVOKE_RESET = PEERDIRECT_REASON_RESET,
	PD_REVOKE_ADMIN = PEERDIRECT_REASON_ADMIN,
	PD_REVOKE_UNPLUG = PEERDIRECT_REASON_UNPLUG,
	PD_REVOKE_NR_REASONS = PEERDIRECT_REASON_UNPLUG,
};

struct pd_device {
	struct kref ref;
	int index;
	char name[24];
	struct miscdevice misc;
	bool registered;
	const struct pd_backend_ops *ops;
	void *backend;
	struct device *parent;		/* the PCI device, or NULL */

	u64 mem_size;
	u64 page_size;
	u64 quota;
	u32 max_exports;
	u32 max_events;
	u32 max_subscriptions;
	struct gen_pool *pool;

	/*
	 * Everything below.  The counters sysfs shows are written under it
	 * and read without it (a world-readable attribute must neither walk
	 * lists nor wait for the lock): the 32-bit ones with WRITE_ONCE, the
	 * 64-bit ones as atomic64_t, which a 32-bit kernel reads untorn.
	 */
	struct mutex lock;
	bool dead;			/* unplugged: no new work */
	unsigned int resetting;		/* resets in progress: exports wait */
	atomic64_t nr_resets;		/* resets begun (ioctl, FLR, AER) */
	/*
	 * files has a lock of its own: misc_open() calls pd_open() under the
	 * global misc_mtx, which must never wait for pd_device.lock.
	 */
	struct mutex files_lock;
	struct list_head files;
	struct list_head owners;
	struct list_head allocs;
	atomic64_t quarantined;		/* bytes freed but still held by exports */
	u32 nr_allocs;			/* on allocs, quarantined ones too */
	u32 nr_live_exports;		/* dma-bufs not yet released */
	u64 next_export_id;
	atomic64_t nr_exports_total;
	atomic64_t nr_revoked[PD_REVOKE_NR_REASONS];
	atomic64_t nr_revoke_timeouts;

	wait_queue_head_t reset_wq;	/* exports waiting for a reset to end */
	/* Importer DMA mappings and vmaps of device memory, all exports. */
	atomic_t nr_reach;
	/*
	 * Exports marked revoked whose revocation has not completed (the
	 * importers' invalidation and the zap under the reservation lock,
	 * done by the marking call's phase 2 or its revoke_work): a removal
	 * or reset whose walk meets them marked already waits for them here.
	 * Raised under pd_device.lock, lowered under the reservation lock.
	 */
	atomic_t nr_revoking;
	/* nr_reach or nr_revoking fell to 0. */
	wait_queue_head_t reach_wq;
	struct dentry *debugfs;
};

struct pd_file {
	struct kref ref;
	struct pd_device *pd;
	struct list_head node;		/* pd_device.files */
	struct xarray allocs;		/* handle -> pd_alloc */
	u32 next_handle;

	struct mutex ev_read_lock;	/* one reader at a time; outer */
	struct mutex ev_lock;		/* the event queue; never held over user copies */
	wait_queue_head_t ev_wq;
	struct peerdirect_event *ev_ring;	/* from the first export on */
	u32 ev_head, ev_count;
	u64 ev_seq;
	bool ev_overflow;
	u64 ev_overflow_seq;
	bool closed;
	bool gone;			/* device unplugged, UNPLUG records queued */

	/* Under pd_subs_lock (subscribe.c). */
	struct list_head subs;		/* pd_sub.file_node */
	u32 nr_subs;
};

struct pd_alloc {
	struct kref ref;
	struct pd_device *pd;
	struct pd_owner *owner;		/* the allocating uid: owners[0] */
	/* Every user charged: the uid, then each user namespace's owner. */
	struct pd_owner **owners;
	unsigned int nr_owners;
	struct list_head node;		/* pd_device.allocs */
	struct list_head exports;	/* under pd_device.lock */
	u32 nr_exports;
	u64 handle;
	u64 offset;			/* in device memory */
	u64 size;
	pid_t tgid;			/* initial pid namespace, for tracepoints */
	struct pid *pid;		/* the allocating process, for reports */
	u64 created_ns;			/* CLOCK_BOOTTIME */
	bool freed;			/* handle gone; memory quarantined */
	/*
	 * Every export of the allocation shares it: a fence one importer adds
	 * is seen by the others, by SYNC and by a revoke of any export of the
	 * same memory (as PRIME objects share their exporter's).
	 */
	struct dma_resv resv;
};

/* One importer mapping: what SYNC maintains, in the direction it was made. */
struct pd_map {
	struct list_head node;		/* pd_attach.maps */
	struct sg_table *sgt;
	enum dma_data_direction dir;	/* DMA_TO_DEVICE for read-only exports */
};

struct pd_attach {
	struct list_head node;		/* pd_export.attachments, under resv */
	struct dma_buf_attachment *attach;
	u32 pins;
	u32 maps;
	struct list_head map_list;	/* pd_map, under resv */
	u64 since_ns;			/* attached at, CLOCK_BOOTTIME */
};

struct pd_export {
	struct pd_alloc *alloc;
	struct pd_file *pfile;
	struct dma_buf *dmabuf;
	/*
	 * The dma-buf's dentry: it lives until .release has run (6.1 releases
	 * the dma-buf from d_release), unlike the struct file, which may be
	 * freed earlier while something else holds the dentry.
	 */
	struct dentry *dentry;
	struct list_head node;		/* pd_alloc.exports */
	/* On the list of the call that revoked it, which alone touches it. */
	struct list_head revoke_node;
	/*
	 * The revocation's end (invalidating importers, zapping PTEs), done
	 * under the reservation lock once an importer that held it past the
	 * call's deadline lets go (revoke.c).  Owns the revoking call's
	 * dentry reference from then on.
	 */
	struct delayed_work revoke_work;
	/*
	 * The revoking call's too: it had importers when revoked, and only
	 * then are the reservation's fences (shared with every export of the
	 * allocation) its business to wait for.
	 */
	bool revoked_attached;
	u64 id;
	u64 offset;			/* within the allocation */
	u64 length;
	u64 inode;
	pid_t tgid;			/* initial pid namespace, for tracepoints */
	/*
	 * The exporting process: reports give its number in the reader's
	 * pid namespace (pd_pid_nr()), never a number taken at export.
	 */
	struct pid *pid;
	kuid_t uid;			/* the exporting process's real uid */
	u64 created_ns;			/* CLOCK_BOOTTIME */
	bool rdonly;

	/*
	 * Set under pd_device.lock and vmap_lock, never cleared; read under
	 * dmabuf->resv (READ_ONCE), vmap_lock or pd_device.lock.  The fault
	 * handler reads it again after inserting PTEs, behind smp_mb(), which
	 * pairs with the one between the mark and revocation's first zap.
	 */
	bool revoked;
	/*
	 * Marked and not yet completed (counted in pd_device.nr_revoking):
	 * set with revoked, cleared under dmabuf->resv once its revocation
	 * has completed; read under pd_device.lock (READ_ONCE).
	 */
	bool revoke_open;
	u32 reason;
	/* Under dmabuf->resv. */
	struct list_head attachments;
	/* Its length, for LIST without the reservation lock (BUSY). */
	atomic_t nr_attachments;
	u32 nr_pins;

	atomic_t nr_maps;		/* live importer mappings */
	wait_queue_head_t unmap_wq;

	/*
	 * Kernel CPU mappings.  The core keeps one vmap per dma-buf; after
	 * revocation it is of a scratch page, not of device memory.
	 */
	struct mutex vmap_lock;
	bool vmapped;			/* of device memory */
	struct page *vmap_scratch;

	struct list_head subs;		/* pd_sub.exp_node, under pd_subs_lock */
};

/* core.c: device registry */
extern unsigned int pd_revoke_timeout_ms;
struct pd_device *pd_device_create(const struct pd_backend_ops *ops,
				   void *backend, struct device *parent,
				   u64 mem_size, u64 page_size);
int pd_device_register(struct pd_device *pd);
void pd_device_unplug(struct pd_device *pd);
bool pd_device_unreachable(struct pd_device *pd);
void pd_device_wait_unreachable(struct pd_device *pd);
void pd_device_reach(struct pd_device *pd, int delta);
void pd_device_put(struct pd_device *pd);
u64 pd_device_mem_free(struct pd_device *pd);
u64 pd_device_features(struct pd_device *pd);

/* file.c: the character device */
extern const struct file_operations pd_fops;
void pd_file_put(struct pd_file *pfile);
int pd_file_events_init(struct pd_file *pfile);
void pd_file_gone(struct pd_file *pfile);
void pd_file_queue_event(struct pd_file *pfile, const struct pd_export *exp,
			 u32 reason);
void pd_file_queue_sub_event(struct pd_file *pfile, const struct pd_export *exp,
			     u32 reason, u64 cookie);

/* memory.c: allocations and quota */
int pd_alloc_create(struct pd_file *pfile, u64 size, u64 *handle, u64 *alloc_size);
struct pd_alloc *pd_alloc_lookup(struct pd_file *pfile, u64 handle);
int pd_alloc_free(struct pd_file *pfile, u64 handle);
void pd_alloc_get(struct pd_alloc *alloc);
void pd_alloc_put(struct pd_alloc *alloc);
u64 pd_owner_used(struct pd_device *pd);

/* export.c: dma-buf exporter */
struct dma_buf *pd_export_create(struct pd_file *pfile, struct pd_alloc *alloc,
				 struct peerdirect_export *args,
				 unsigned int open_flags, int *fdp);
u64 pd_export_dev_offset(const struct pd_export *exp);
bool pd_export_busy(struct pd_export *exp);
bool pd_dmabuf_is_ours(const struct dma_buf *dmabuf);

/* revoke.c */
struct pd_revoke_result {
	u32 revoked;
	u32 pending;
};

int pd_revoke_alloc(struct pd_alloc *alloc, u32 reason,
		    struct pd_revoke_result *res);
int pd_revoke_export_id(struct pd_device *pd, struct pd_file *owner,
			u64 export_id, u32 reason, struct pd_revoke_result *res);
void pd_revoke_device(struct pd_device *pd, u32 reason,
		      struct pd_revoke_result *res);
void pd_reset_prepare(struct pd_device *pd, struct pd_revoke_result *res);
void pd_reset_done(struct pd_device *pd);
void pd_revoke_work(struct work_struct *work);
int pd_revoke_init(void);
void pd_revoke_exit(void);
bool pd_attach_pinned(const struct pd_attach *pa);
bool pd_attach_revocable(const struct pd_attach *pa);

/* ioctl.c */
long pd_ioctl(struct file *filp, unsigned int cmd, unsigned long arg);

/*
 * A process's pid as the calling process sees it: in its pid namespace,
 * 0 when the process has no number there (outside it, or gone).
 */
static inline pid_t pd_pid_nr(struct pid *pid)
{
	/*
	 * A struct pid outlives its process and keeps its number, which the
	 * kernel hands out again: an exited exporter must read as 0.
	 */
	if (!pid || !pid_has_task(pid, PIDTYPE_TGID))
		return 0;
	return pid_nr_ns(pid, task_active_pid_ns(current));
}

/*
 * An importer's device name for a trace record, LIST or debugfs, which copy
 * it with strscpy(): dev_name() is NULL for a device whose kobject has no
 * name yet (a driver may attach before device_add(), or never register the
 * device at all).  printk's %s copes with NULL by itself; strscpy() does not.
 */
static inline const char *pd_dev_name(const struct device *dev)
{
	const char *name = dev ? dev_name(dev) : NULL;

	return name ?: "(unnamed)";
}

/* list.c: PEERDIRECT_IOCTL_LIST, arguments validated by ioctl.c */
int pd_list(struct pd_device *pd, struct peerdirect_list *l);

/* sysfs.c: attributes of the misc device */
extern const struct attribute_group *pd_attr_groups[];

/* debugfs.c */
void pd_debugfs_init(void);
void pd_debugfs_exit(void);
void pd_debugfs_add(struct pd_device *pd);
void pd_debugfs_remove(struct pd_device *pd);

/* backend_sim.c */
int pd_sim_init(void);
void pd_sim_exit(void);

/* backend_pci.c */
int pd_pci_init(void);
void pd_pci_exit(void);

/* subscribe.c: revocation events for dma-bufs the subscriber holds */
int pd_subscribe(struct pd_file *pfile, struct peerdirect_subscribe *s);
void pd_subs_notify(struct pd_export *exp, u32 reason);
void pd_subs_drop_export(struct pd_export *exp);
void pd_subs_drop_file(struct pd_file *pfile);

#endif /* _PEERDIRECT_H */
