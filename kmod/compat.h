/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Differences between the kernels peerdirect builds against.  Each PD_HAVE_*
 * comes from a probe of the target's headers in kmod/Kbuild, never from
 * LINUX_VERSION_CODE: distributions backport these interfaces.
 */
#ifndef _PEERDIRECT_COMPAT_H
#define _PEERDIRECT_COMPAT_H

#include <linux/dma-buf.h>
#include <linux/fs.h>
#include <linux/mm.h>
#include <linux/pci.h>

/*
 * A probe that found the name but not the whole prototype (PD_SEEN_* without
 * PD_HAVE_*, kmod/probes.mk): the interface changed, and the fallbacks below
 * are for kernels that lack it.  Stop here, naming the probe to update.
 */
#if defined(PD_SEEN_DMA_BUF_INVALIDATE_MAPPINGS) && !defined(PD_HAVE_DMA_BUF_INVALIDATE_MAPPINGS)
#error "probes.mk pd_proto_invalidate: dma_buf_invalidate_mappings() in linux/dma-buf.h changed"
#endif
#if defined(PD_SEEN_VM_FLAGS_SET) && !defined(PD_HAVE_VM_FLAGS_SET)
#error "probes.mk pd_proto_vm_flags: vm_flags_set() in linux/mm.h changed"
#endif
#if defined(PD_SEEN_RELEASE_FAULT_LOCK) && !defined(PD_HAVE_RELEASE_FAULT_LOCK)
#error "probes.mk pd_proto_release_fault: release_fault_lock() in linux/mm.h changed"
#endif
#if defined(PD_SEEN_ZAP_SPECIAL_VMA_RANGE) && !defined(PD_HAVE_ZAP_SPECIAL_VMA_RANGE)
#error "probes.mk pd_proto_zap_special: zap_special_vma_range() in linux/mm.h changed"
#endif
#if defined(PD_SEEN_DEVICE_HAS_DRIVER_OVERRIDE) && !defined(PD_HAVE_DEVICE_HAS_DRIVER_OVERRIDE)
#error "probes.mk pd_proto_has_override: device_has_driver_override() in linux/device.h changed"
#endif

/* 7.1 renamed move_notify to invalidate_mappings. */
#ifdef PD_HAVE_DMA_BUF_INVALIDATE_MAPPINGS
#define pd_dma_buf_invalidate(dmabuf)	dma_buf_invalidate_mappings(dmabuf)
#define PD_IMPORTER_INVALIDATE		invalidate_mappings
#else
#define pd_dma_buf_invalidate(dmabuf)	dma_buf_move_notify(dmabuf)
#define PD_IMPORTER_INVALIDATE		move_notify
#endif

/*
 * The 7.1 revoke contract: dma_buf_attach_revocable() tells importers that
 * unmap within bounded time after invalidate_mappings() from those that
 * may not (pinned without the op).  The same series dropped
 * CONFIG_DMABUF_MOVE_NOTIFY: dynamic importers always get notified.
 * PD_MOVE_NOTIFY (1, 0, or -1 for a combination that does not tell) is
 * decided in compat_notify.h, which a script can check without a kernel.
 */
#include "compat_notify.h"

/* vm_flags became read-only behind accessors in 6.3. */
#ifdef PD_HAVE_VM_FLAGS_SET
#define pd_vm_flags_set(vma, flags)	vm_flags_set(vma, flags)
#define pd_vm_flags_clear(vma, flags)	vm_flags_clear(vma, flags)
#else
#define pd_vm_flags_set(vma, flags)	((vma)->vm_flags |= (flags))
#define pd_vm_flags_clear(vma, flags)	((vma)->vm_flags &= ~(flags))
#endif

/*
 * Dropping the lock a fault handler was called under.  From 6.7 a fault
 * may run under its VMA's lock alone, but never one of a VMA without
 * ->map_pages, as ours: the core retries it under the mmap lock
 * (vmf_can_call_fault()).  So before release_fault_lock() existed (no
 * per-VMA lock reached a driver's ->fault then) it is mmap_read_unlock().
 */
static inline void pd_release_fault_lock(struct vm_fault *vmf)
{
#ifdef PD_HAVE_RELEASE_FAULT_LOCK
	release_fault_lock(vmf);
#else
	mmap_read_unlock(vmf->vma->vm_mm);
#endif
}

/*
 * Zapping PTEs of part of a VM_PFNMAP mapping: zap_vma_ptes() up to 7.1,
 * zap_special_vma_range() in 7.2 (same arguments).
 */
static inline void pd_zap_vma_range(struct vm_area_struct *vma,
				    unsigned long address, unsigned long size)
{
#ifdef PD_HAVE_ZAP_SPECIAL_VMA_RANGE
	zap_special_vma_range(vma, address, size);
#else
	zap_vma_ptes(vma, address, size);
#endif
}

/*
 * The DMA_BUF symbol namespace: MODULE_IMPORT_NS took a bare token until
 * 6.13 and a string literal after; the modinfo tag it expands to is the same.
 */
#define PD_MODULE_IMPORT_DMA_BUF()	MODULE_INFO(import_ns, "DMA_BUF")

/*
 * What the probes found, as modinfo "probes": the selftests check each
 * exported function's answer against the running kernel's /proc/kallsyms.
 */
#ifdef PD_HAVE_DMA_BUF_INVALIDATE_MAPPINGS
#define PD_PROBE_INVALIDATE	"dma_buf_invalidate_mappings=y"
#else
#define PD_PROBE_INVALIDATE	"dma_buf_invalidate_mappings=n"
#endif
#ifdef PD_HAVE_DMA_BUF_ATTACH_REVOCABLE
#define PD_PROBE_REVOCABLE	"dma_buf_attach_revocable=y"
#else
#define PD_PROBE_REVOCABLE	"dma_buf_attach_revocable=n"
#endif
#ifdef PD_HAVE_DMA_BUF_PHYS_VEC_TO_SGT
#define PD_PROBE_PHYS_VEC	"dma_buf_phys_vec_to_sgt=y"
#else
#define PD_PROBE_PHYS_VEC	"dma_buf_phys_vec_to_sgt=n"
#endif
#ifdef PD_HAVE_ZAP_SPECIAL_VMA_RANGE
#define PD_PROBE_ZAP		"zap_special_vma_range=y"
#else
#define PD_PROBE_ZAP		"zap_special_vma_range=n"
#endif
#define PD_PROBES	PD_PROBE_INVALIDATE " " PD_PROBE_REVOCABLE " " PD_PROBE_PHYS_VEC " " \
			PD_PROBE_ZAP

/*
 * driver_override moved from struct pci_dev to struct device, behind
 * accessors (7.x, and Debian's 6.12 backports): whether one is set.
 */
static inline bool pd_pci_has_driver_override(struct pci_dev *pdev)
{
#ifdef PD_HAVE_DEVICE_HAS_DRIVER_OVERRIDE
	return device_has_driver_override(&pdev->dev);
#else
	return pdev->driver_override;
#endif
}

#endif /* _PEERDIRECT_COMPAT_H */
