/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * peerdirect: export accelerator device memory as DMA-BUF.
 *
 * Every ioctl argument starts with __u32 argsz (the size userspace built) and
 * __u32 flags.  The kernel accepts any argsz from the first published size of
 * a struct up to PAGE_SIZE: bytes the kernel does not know must be zero
 * (E2BIG otherwise), bytes userspace did not pass read as zero.  Output is
 * written back up to min(argsz, kernel size).  Unknown flags, non-zero
 * reserved fields, non-zero padding and non-zero output fields on input give
 * EINVAL.  Commands are _IO(type, nr) and match in full, as vfio's and
 * iommufd's do: the size lives in argsz, never in the command.  64-bit fields
 * are __aligned_u64 and padding is explicit, so 32-bit processes use the
 * same layout.
 *
 * See Documentation/peerdirect-uapi.rst.
 */
#ifndef _UAPI_LINUX_PEERDIRECT_H
#define _UAPI_LINUX_PEERDIRECT_H

#include <linux/ioctl.h>
#include <linux/types.h>

#define PEERDIRECT_ABI_MAJOR	2
#define PEERDIRECT_ABI_MINOR	2

/* Feature bits reported by PEERDIRECT_IOCTL_QUERY. */
#define PEERDIRECT_FEAT_EXPORT		0x01ULL	/* dma-buf export */
#define PEERDIRECT_FEAT_PIN		0x02ULL	/* pinned importers */
#define PEERDIRECT_FEAT_MOVE_NOTIFY	0x04ULL	/* kernel delivers move_notify */
#define PEERDIRECT_FEAT_CPU_MMAP	0x08ULL	/* mmap of the dma-buf fd */
#define PEERDIRECT_FEAT_EVENTS		0x10ULL	/* revocation events */
#define PEERDIRECT_FEAT_PAGELESS	0x20ULL	/* sg entries carry no pages */
#define PEERDIRECT_FEAT_P2P_REQUIRED	0x40ULL	/* importers need peer2peer */
/*
 * Minor 1.  P2PDMA: importers are mapped by the kernel's PCI P2PDMA routing
 * (bus address, host bridge, or refused at import); without it a PCI BAR is
 * mapped with dma_map_resource() whatever the topology.
 */
#define PEERDIRECT_FEAT_P2PDMA		0x80ULL
/*
 * Minor 1.  Importers that cannot be revoked within bounded time (pinned
 * without invalidate_mappings: 7.1's dma_buf_attach_revocable() is false)
 * are refused at import, as the kernel's revoke contract allows.
 */
#define PEERDIRECT_FEAT_REVOCABLE_ONLY	0x100ULL
/* PEERDIRECT_IOCTL_SUBSCRIBE: revocation events for a dma-buf one holds. */
#define PEERDIRECT_FEAT_SUBSCRIBE	0x200ULL
/* Minor 2.1.  PEERDIRECT_IOCTL_LIST, and the sysfs attributes of the device. */
#define PEERDIRECT_FEAT_LIST		0x400ULL
/*
 * Minor 2.2.  PEERDIRECT_LIST_ALLOCATIONS (every allocation, exported or
 * not, with its owner) and PEERDIRECT_ATTACH_INFO_REVOCABLE.
 */
#define PEERDIRECT_FEAT_LIST_ALLOCS	0x800ULL

/* Backends (device kinds). */
#define PEERDIRECT_BACKEND_SIM		1	/* RAM pages standing in for HBM */
#define PEERDIRECT_BACKEND_PCI_BAR	2	/* a PCI BAR, no struct pages */

struct peerdirect_query {
	__u32 argsz;
	__u32 flags;		/* must be 0 */
	__u32 abi_major;	/* out */
	__u32 abi_minor;	/* out */
	__aligned_u64 features;		/* out: PEERDIRECT_FEAT_* */
	__u32 backend;		/* out: PEERDIRECT_BACKEND_* */
	__u32 index;		/* out: N of /dev/peerdirectN */
	__aligned_u64 mem_size;		/* out: device memory, bytes */
	__aligned_u64 mem_free;		/* out: bytes not allocated or quarantined */
	__aligned_u64 page_size;	/* out: allocation granule, bytes */
	__aligned_u64 quota;		/* out: per-user limit, bytes */
	__aligned_u64 quota_used;	/* out: charged to the calling user */
	__u32 max_exports;	/* out: live exports allowed per allocation */
	__u32 max_events;	/* out: event queue depth per open file */
	__u32 max_subscriptions;	/* out: per open file */
	__u32 pad;		/* out: zero */
	__aligned_u64 reserved[4];	/* out: zero */
};

struct peerdirect_alloc {
	__u32 argsz;
	__u32 flags;		/* must be 0 */
	__aligned_u64 size;		/* in: bytes, rounded up to page_size */
	__aligned_u64 handle;		/* out: scoped to this open file, never 0 */
	__aligned_u64 alloc_size;	/* out: bytes actually allocated */
};

struct peerdirect_free {
	__u32 argsz;
	__u32 flags;		/* must be 0 */
	__aligned_u64 handle;
};

/*
 * PEERDIRECT_IOCTL_EXPORT flags.  Without RDWR an export is read-only for
 * everyone: its fd is opened O_RDONLY (no writable CPU mapping) and
 * importers are mapped DMA_TO_DEVICE (behind an IOMMU a device cannot write
 * it).  Our own bits: O_CLOEXEC differs between architectures.
 */
#define PEERDIRECT_EXPORT_RDWR		0x1U	/* CPU and importers may write */
#define PEERDIRECT_EXPORT_CLOEXEC	0x2U	/* the fd gets FD_CLOEXEC */

struct peerdirect_export {
	__u32 argsz;
	__u32 flags;		/* in: PEERDIRECT_EXPORT_* */
	__aligned_u64 handle;		/* in */
	__aligned_u64 offset;		/* in: page aligned */
	__aligned_u64 length;		/* in: page aligned, non-zero */
	__s32 fd;		/* out: the dma-buf */
	__u32 pad;		/* must be 0 */
	__aligned_u64 export_id;	/* out: unique on this device, never 0 */
	__aligned_u64 inode;		/* out: st_ino of fd, for caches keyed by fstat */
};

/* PEERDIRECT_IOCTL_REVOKE flags: exactly one scope. */
#define PEERDIRECT_REVOKE_ALLOC		0x1U	/* every export of handle */
#define PEERDIRECT_REVOKE_EXPORT	0x2U	/* export_id only */

struct peerdirect_revoke {
	__u32 argsz;
	__u32 flags;
	__aligned_u64 handle;		/* in: with REVOKE_ALLOC */
	__aligned_u64 export_id;	/* in: with REVOKE_EXPORT */
	__u32 revoked;		/* out: exports revoked by this call */
	__u32 pending;		/* out: of those, still mapped by an importer */
};

/*
 * PEERDIRECT_IOCTL_RESET (CAP_SYS_ADMIN): revoke as a device reset does.
 * Every export of every process on the device is revoked (reason RESET) and
 * exports wait while it runs; allocations stay.  It stays in the uapi, not
 * in debugfs, because administrators use it (pdctl reset) to recover a
 * device from a runtime that left it wedged, and a reset of the hardware
 * itself (sysfs reset, AER) takes the same path.
 * PEERDIRECT_IOCTL_ADMIN_REVOKE (CAP_SYS_ADMIN): revoke one export of any
 * process by export_id (reason ADMIN).
 */
struct peerdirect_reset {
	__u32 argsz;
	__u32 flags;		/* must be 0 */
	__u32 revoked;		/* out */
	__u32 pending;		/* out */
};

/* Reasons carried by events. */
#define PEERDIRECT_REASON_FREE		1	/* allocation freed or owner closed */
#define PEERDIRECT_REASON_REVOKE	2	/* PEERDIRECT_IOCTL_REVOKE */
#define PEERDIRECT_REASON_RESET		3	/* device reset */
#define PEERDIRECT_REASON_ADMIN		4	/* administrator */
#define PEERDIRECT_REASON_UNPLUG	5	/* device removed */
#define PEERDIRECT_REASON_OVERFLOW	6	/* events lost: treat all as revoked */

/*
 * read() on the device fd returns whole records, never a partial one
 * (EINVAL if the buffer holds not even the first).  Every record starts with
 * a header, as drm_event does: readers skip types they do not know, and
 * records of a known type may grow at their end, by hdr.length.
 * O_NONBLOCK gives EAGAIN when the queue is empty; poll() reports EPOLLIN.
 * After device removal read gives ENODEV once the queue is drained.
 */
struct peerdirect_event_header {
	__u32 type;		/* PEERDIRECT_EVENT_* */
	__u32 length;		/* of the whole record, header included */
};

#define PEERDIRECT_EVENT_REVOKE		1	/* struct peerdirect_event */

/* peerdirect_event.flags */
#define PEERDIRECT_EVENT_SUBSCRIBED	0x1U	/* for a subscription: handle 0 */

struct peerdirect_event {
	struct peerdirect_event_header hdr;
	__u32 reason;		/* PEERDIRECT_REASON_* */
	__u32 flags;		/* PEERDIRECT_EVENT_SUBSCRIBED */
	__aligned_u64 seq;	/* per file, from 1 */
	__aligned_u64 export_id;
	__aligned_u64 handle;	/* the owner's allocation; 0 for a subscriber */
	__aligned_u64 inode;	/* st_ino of the revoked dma-buf */
	__aligned_u64 offset;
	__aligned_u64 length;
	__aligned_u64 cookie;	/* the subscriber's, from PEERDIRECT_IOCTL_SUBSCRIBE */
};

/*
 * PEERDIRECT_IOCTL_SUBSCRIBE: the caller holds a peerdirect dma-buf fd (of
 * any device; holding it is the permission) and wants its revocation
 * reported on this file, as the owner's is on the exporter's.  One record,
 * then the subscription ends; it also ends when the dma-buf is released,
 * with PEERDIRECT_SUBSCRIBE_CANCEL, or when this file closes.  ENODEV if the
 * dma-buf is already revoked (even if this file is still subscribed: so
 * EEXIST means not revoked), EEXIST if this file subscribed to it already,
 * ENOENT on a cancel of nothing, ENOSPC beyond max_subscriptions per file,
 * EINVAL for a dma-buf peerdirect did not export, EBADF for a bad fd.
 */
#define PEERDIRECT_SUBSCRIBE_CANCEL	0x1U

struct peerdirect_subscribe {
	__u32 argsz;
	__u32 flags;		/* PEERDIRECT_SUBSCRIBE_CANCEL */
	__s32 fd;		/* in: the dma-buf */
	__u32 pad;		/* must be 0 */
	__aligned_u64 cookie;	/* in: echoed in the event */
	__aligned_u64 export_id;	/* out */
	__aligned_u64 inode;	/* out: st_ino of fd */
};

/*
 * PEERDIRECT_IOCTL_LIST (uapi 2.1): the exports of this device, for
 * administrators' tools.  With CAP_SYS_ADMIN every process's, otherwise the
 * exports made by processes of the caller's real uid.  The kernel writes up
 * to nr_exports records of export_size bytes each to the array at exports
 * and, with PEERDIRECT_LIST_ATTACHMENTS, up to nr_attachments records of
 * attach_size bytes to the array at attachments (one per importer
 * attachment of the exports listed).  With PEERDIRECT_LIST_ALLOCATIONS
 * (uapi 2.2, PEERDIRECT_FEAT_LIST_ALLOCS) it also writes up to
 * nr_allocations records of allocation_size bytes to the array at
 * allocations: one per allocation of the device, exported or not, under
 * the same rule (the allocating process's real uid, or CAP_SYS_ADMIN).
 * Record sizes may be larger than the kernel's (the tail is zeroed) or
 * smaller, down to the first published size (the record is cut), as argsz
 * works for the argument.  On return nr_* say how many records were written
 * and total_* how many there were: retry with a bigger array when
 * total > nr.  At most PEERDIRECT_LIST_MAX records of each kind per call.
 * Without a flag, its fields must be zero.
 */
#define PEERDIRECT_LIST_ATTACHMENTS	0x1U
#define PEERDIRECT_LIST_ALLOCATIONS	0x2U	/* uapi 2.2 */
#define PEERDIRECT_LIST_MAX		16384

/* peerdirect_export_info.flags */
#define PEERDIRECT_EXPORT_INFO_RDONLY	0x1U	/* a read-only export */
#define PEERDIRECT_EXPORT_INFO_REVOKED	0x2U	/* reason says why */
/* An importer held the reservation lock: counters and attachments not read. */
#define PEERDIRECT_EXPORT_INFO_BUSY	0x4U
#define PEERDIRECT_EXPORT_INFO_OWNER_GONE 0x8U	/* allocation freed: quarantined */

struct peerdirect_export_info {
	__aligned_u64 export_id;
	__aligned_u64 inode;		/* st_ino of the dma-buf */
	__aligned_u64 handle;		/* the owner's allocation */
	__aligned_u64 offset;		/* within the allocation */
	__aligned_u64 length;
	__aligned_u64 mapped_bytes;	/* over every importer mapping */
	__aligned_u64 created_ns;	/* CLOCK_BOOTTIME */
	__s32 tgid;			/* the exporter, in the caller's pid ns; 0: not there */
	__u32 uid;			/* its real uid, in the caller's user namespace */
	__u32 flags;			/* PEERDIRECT_EXPORT_INFO_* */
	__u32 reason;			/* PEERDIRECT_REASON_* when REVOKED, else 0 */
	__u32 nr_attachments;
	__u32 nr_pins;			/* pins by importers (and the core's) */
	__u32 nr_maps;			/* live importer mappings */
	__u32 pad;
};

/* peerdirect_attach_info.flags */
#define PEERDIRECT_ATTACH_INFO_PINNED	0x1U	/* pinned by the importer */
#define PEERDIRECT_ATTACH_INFO_DYNAMIC	0x2U	/* has importer ops (move_notify) */
#define PEERDIRECT_ATTACH_INFO_PEER2PEER 0x4U	/* importer allows peer-to-peer */
/*
 * uapi 2.2: a revoke makes this importer let go of the memory (it is
 * invalidated and unmaps).  Clear: it cannot be revoked (pinned without the
 * revocable op, as EFA's dma-buf MRs; or a static importer), so a revoke
 * waits up to revoke_timeout_ms (a free does not wait), reports the export
 * pending and keeps the memory quarantined until the importer releases it.
 * A 2.1 module never
 * sets it: clear there means "not known to be revocable".
 */
#define PEERDIRECT_ATTACH_INFO_REVOCABLE 0x8U

#define PEERDIRECT_DEVNAME_LEN		32

struct peerdirect_attach_info {
	__aligned_u64 export_id;
	__aligned_u64 mapped_bytes;
	__aligned_u64 since_ns;		/* attached at, CLOCK_BOOTTIME */
	__u32 flags;			/* PEERDIRECT_ATTACH_INFO_* */
	__u32 pins;
	__u32 maps;
	__u32 pad;
	char device[PEERDIRECT_DEVNAME_LEN];	/* importer's dev_name(), cut, NUL-terminated */
};

/* peerdirect_alloc_info.flags */
/* Handle freed, memory quarantined until its exports are released. */
#define PEERDIRECT_ALLOC_INFO_FREED	0x1U

/* uapi 2.2 */
struct peerdirect_alloc_info {
	__aligned_u64 handle;		/* the owner's, per open file; 0 while being created */
	__aligned_u64 size;		/* bytes of device memory */
	__aligned_u64 created_ns;	/* CLOCK_BOOTTIME */
	__s32 tgid;			/* the allocator, in the caller's pid ns; 0: not there */
	__u32 uid;			/* its real uid, in the caller's user namespace */
	__u32 flags;			/* PEERDIRECT_ALLOC_INFO_* */
	__u32 nr_exports;		/* live exports (dma-bufs not yet released) */
};

struct peerdirect_list {
	__u32 argsz;
	__u32 flags;			/* PEERDIRECT_LIST_* */
	__u32 export_size;		/* in: sizeof(struct peerdirect_export_info) */
	__u32 attach_size;		/* in: sizeof(struct peerdirect_attach_info) */
	__aligned_u64 exports;		/* in: user pointer to the array */
	__aligned_u64 attachments;	/* in: user pointer, with LIST_ATTACHMENTS */
	__u32 nr_exports;		/* in: array capacity; out: written */
	__u32 nr_attachments;		/* in: array capacity; out: written */
	__u32 total_exports;		/* out */
	__u32 total_attachments;	/* out */
	/* uapi 2.2, with PEERDIRECT_LIST_ALLOCATIONS; otherwise zero. */
	__u32 allocation_size;		/* in: sizeof(struct peerdirect_alloc_info) */
	__u32 nr_allocations;		/* in: array capacity; out: written */
	__aligned_u64 allocations;	/* in: user pointer to the array */
	__u32 total_allocations;	/* out */
	__u32 pad;			/* must be 0 */
};

#define PEERDIRECT_IOCTL_MAGIC	0xD7

#define PEERDIRECT_IOCTL_QUERY		_IO(PEERDIRECT_IOCTL_MAGIC, 0x00)
#define PEERDIRECT_IOCTL_ALLOC		_IO(PEERDIRECT_IOCTL_MAGIC, 0x01)
#define PEERDIRECT_IOCTL_FREE		_IO(PEERDIRECT_IOCTL_MAGIC, 0x02)
#define PEERDIRECT_IOCTL_EXPORT		_IO(PEERDIRECT_IOCTL_MAGIC, 0x03)
#define PEERDIRECT_IOCTL_REVOKE		_IO(PEERDIRECT_IOCTL_MAGIC, 0x04)
#define PEERDIRECT_IOCTL_RESET		_IO(PEERDIRECT_IOCTL_MAGIC, 0x05)
#define PEERDIRECT_IOCTL_ADMIN_REVOKE	_IO(PEERDIRECT_IOCTL_MAGIC, 0x06)
#define PEERDIRECT_IOCTL_SUBSCRIBE	_IO(PEERDIRECT_IOCTL_MAGIC, 0x07)
#define PEERDIRECT_IOCTL_LIST		_IO(PEERDIRECT_IOCTL_MAGIC, 0x08)

#endif /* _UAPI_LINUX_PEERDIRECT_H */
