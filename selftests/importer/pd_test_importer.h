/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * Test-only dma-buf importer (selftests/importer): lets the selftests attach
 * to a dma-buf the way RDMA does (dynamic + pinned, like
 * ib_umem_dmabuf_get_pinned), or as a plain dynamic importer that drops its
 * mapping on move_notify, then inspect what the exporter handed out.
 * One import per open file of /dev/pd_test_importer.
 */
#ifndef _PD_TEST_IMPORTER_H
#define _PD_TEST_IMPORTER_H

#include <linux/ioctl.h>
#include <linux/types.h>

/*
 * PINNED alone is a pinned importer that cannot let go: from 7.1 it has no
 * invalidate_mappings op (dma_buf_attach_revocable() is false), as
 * ib_umem_dmabuf_get_pinned() imports; before, an op that only records, as
 * RDMA's stub did.  PINNED | REVOCABLE unmaps and unpins inside the op, as
 * RDMA's revocable pinned registration does.
 */
#define PDTI_PINNED	0x1U	/* pin + map, keep through move_notify */
#define PDTI_DYNAMIC	0x2U	/* map; unmap inside move_notify */
#define PDTI_NO_P2P	0x4U	/* do not set allow_peer2peer */
/*
 * Skip the page check, which vmaps the dma-buf: 6.1's dma_buf_vmap() WARNs
 * on any exporter failure, so fault-injection runs must not vmap.
 */
#define PDTI_NO_VERIFY	0x8U
#define PDTI_REVOCABLE	0x10U	/* with PINNED: unmap + unpin inside the op */
/*
 * With DYNAMIC: attach only, map nothing (until REMAP), as an importer
 * that maps at first use: a reservation to hold with no DMA mapping of the
 * memory, whatever the device's DMA mask.
 */
#define PDTI_NO_MAP	0x20U
/*
 * The invalidate op waits (at most 5 s, under the reservation lock the
 * exporter calls it with) for PDTI_IOCTL_INVALIDATE_GO, as an importer
 * that must first stop its device: the exporter's revocation is held
 * there, before whatever it does after invalidating.
 */
#define PDTI_SLOW_INVALIDATE	0x40U

struct pdti_import {
	__s32 fd;
	__u32 flags;
	__u32 max_seg;		/* the device's max segment size; 0 = 64 KiB */
	__u32 pad;
};

struct pdti_status {
	__u32 move_notify;	/* calls seen */
	__u32 mapped;		/* 1 while the importer holds a mapping */
	__u32 pinned;
	__u32 nents;		/* DMA entries of the current/last mapping */
	__u64 size;
	__u32 max_entry;	/* largest DMA entry seen */
	__u32 sg_checked;	/* pages compared with the exporter's vmap */
	__s32 sg_error;		/* 0, or -EIO on a mismatch / bad entry */
	__s32 remap_error;	/* last PDTI_IOCTL_REMAP result */
	__u32 revoked;		/* a REVOCABLE importer let go for good */
	__u32 unverified;	/* no page check: NO_VERIFY, or no exporter vmap */
};

struct pdti_read {
	__u64 offset;
	__u64 length;
	__u64 buf;		/* user pointer */
};

/*
 * PDTI_IOCTL_VMAP_READ: a kernel importer's vmap of any dma-buf fd (no
 * attachment needed), @length bytes from @offset copied to @buf, then
 * vunmapped.  Shows what a kernel CPU mapping reaches.
 */
struct pdti_vmap_read {
	__s32 fd;
	__u32 pad;
	__u64 offset;
	__u64 length;
	__u64 buf;		/* user pointer */
};

/*
 * What the kernel the importer was built for promises (PDTI_IOCTL_KERNEL),
 * from probes of its headers, so the selftests assert each kernel's contract.
 */
#define PDTI_K_GEM_IMPORT_NO_MAP	0x1U	/* DRM shmem PRIME import only attaches */
#define PDTI_K_P2PDMA			0x2U	/* CONFIG_PCI_P2PDMA */
#define PDTI_K_REVOCABLE_CONTRACT	0x4U	/* dma_buf_attach_revocable() (7.1) */

struct pdti_kernel {
	__u32 facts;		/* PDTI_K_* */
	__u32 pad;
};

/*
 * The device the next imports attach with: a PCI function (to give the
 * kernel's P2PDMA routing a real client), or domain -1 for the importer's
 * own misc device, which is no PCI device (the default).
 */
struct pdti_device {
	__s32 domain;
	__u32 bus;
	__u32 devfn;
	__u32 pad;
};

/*
 * PDTI_IOCTL_PCI_RESET: run a PCI function driver's reset handlers the way
 * the PCI core calls them around a reset, with the device locked, without
 * resetting anything: reset_prepare, @hold_ms, reset_done (a function
 * reset: sysfs reset, FLR), or error_detected(frozen), slot_reset, @hold_ms,
 * resume (AER recovery), or error_detected(perm_failure) alone, which must
 * answer DISCONNECT (a permanent failure: the core calls nothing more and
 * removal follows; EIO otherwise).  A stand-in for functions with no reset
 * method, as QEMU's ivshmem on the root bus is.  EOPNOTSUPP without the
 * handlers.
 */
#define PDTI_RESET_FUNCTION	0
#define PDTI_RESET_AER		1
#define PDTI_RESET_PERM_FAILURE	2
/*
 * error_detected(frozen) alone: a recovery that failed after it (the core
 * calls nothing more), leaving the driver's reset open.
 */
#define PDTI_RESET_AER_FAILED	3
/*
 * error_detected(normal), which must answer CAN_RECOVER, then slot_reset,
 * @hold_ms, resume: what the core calls when another function below the
 * link asked for a reset of a channel that is not frozen (nothing is
 * reset then: pcie_do_recovery() resets the link for frozen ones only).
 */
#define PDTI_RESET_AER_CAN_RECOVER	4
/*
 * The link frozen for @hold_ms with no handler called: the window between
 * a physical freeze (writes to the BAR dropped, reads all-ones on real
 * hardware) and the AER interrupt, seen by drivers only through
 * pci_channel_offline().  PDTI_RESET_AER marks the channel frozen from
 * error_detected() to resume() as the core does.
 */
#define PDTI_RESET_FREEZE	5

struct pdti_pci_reset {
	struct pdti_device dev;
	__u32 kind;		/* PDTI_RESET_* */
	__u32 hold_ms;		/* between the two halves, at most 10 s */
};

#define PDTI_IOCTL_IMPORT	_IOW('T', 1, struct pdti_import)
#define PDTI_IOCTL_STATUS	_IOR('T', 2, struct pdti_status)
#define PDTI_IOCTL_READ		_IOW('T', 3, struct pdti_read)
#define PDTI_IOCTL_REMAP	_IO('T', 4)
#define PDTI_IOCTL_RELEASE	_IO('T', 5)
#define PDTI_IOCTL_KERNEL	_IOR('T', 6, struct pdti_kernel)
#define PDTI_IOCTL_DEVICE	_IOW('T', 7, struct pdti_device)
#define PDTI_IOCTL_VMAP_READ	_IOW('T', 8, struct pdti_vmap_read)
#define PDTI_IOCTL_PCI_RESET	_IOW('T', 9, struct pdti_pci_reset)
/*
 * An unsignaled write fence on the imported dma-buf's reservation object,
 * as a device's pending DMA would add; PDTI_IOCTL_SIGNAL signals it (so
 * does closing the importer).
 */
#define PDTI_IOCTL_FENCE	_IO('T', 10)
#define PDTI_IOCTL_SIGNAL	_IO('T', 11)
/*
 * Hold the imported dma-buf's reservation lock for the given milliseconds
 * (at most 10000), as an importer mapping or fencing it would: what the
 * exporter's lock-free readers (LIST's BUSY records) must cope with.
 */
#define PDTI_IOCTL_HOLD_RESV	_IOW('T', 12, __u32)
/*
 * A kernel CPU mapping kept, as a display or copy-engine driver keeps one:
 * VMAP_HOLD vmaps the dma-buf fd it is given and holds the mapping (and a
 * reference to the dma-buf) until VMAP_DROP or close.  One per importer
 * file; EBUSY for a second.
 */
#define PDTI_IOCTL_VMAP_HOLD	_IOW('T', 13, __s32)
#define PDTI_IOCTL_VMAP_DROP	_IO('T', 14)
/*
 * A fault stopped between its check of an export's state and its PTE
 * insert, which no sleep can aim at: STALL_ARM makes the next page
 * allocation by the thread with the given id (a page table that
 * vmf_insert_pfn() allocates) spin, while the imported dma-buf's
 * reservation is locked (the fault handler holds it there, and not at the
 * page-table allocations before it), until STALL_RELEASE or 5 s.
 * STALL_WAIT returns 0 once a thread spins there, ETIMEDOUT after 5 s.
 * One stall in the system at a time (EBUSY); EOPNOTSUPP without
 * tracepoints (it hooks kmem:mm_page_alloc).
 */
#define PDTI_IOCTL_STALL_ARM	_IOW('T', 15, __s32)
#define PDTI_IOCTL_STALL_WAIT	_IO('T', 16)
#define PDTI_IOCTL_STALL_RELEASE	_IO('T', 17)
#define PDTI_IOCTL_INVALIDATE_GO	_IO('T', 18)	/* PDTI_SLOW_INVALIDATE */

#endif
