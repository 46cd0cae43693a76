# SPDX-License-Identifier: GPL-2.0
# Feature probes against the headers of the kernel we build for, by the
# whole prototype we call, not the name alone: a name that stays while its
# arguments change (dma_buf_phys_vec_to_sgt() took struct dma_buf_phys_vec
# before 7.0) must not select code that no longer compiles.  grep -z reads a
# header as one line, so a prototype may span lines (\s matches newlines).
# The results are recorded in the module (modinfo "probes"), and the VM
# selftests check them against the running kernel's /proc/kallsyms.
pd_probe = $(shell grep -qszE '$(2)' $(srctree)/include/$(1) && echo -D$(3))
pd_id := [A-Za-z_]+
pd_proto_invalidate := void dma_buf_invalidate_mappings\(struct dma_buf \*$(pd_id)\);
pd_proto_vm_flags := void vm_flags_set\(struct vm_area_struct \*$(pd_id),\s*vm_flags_t $(pd_id)\)
pd_proto_phys_vec := struct sg_table \*dma_buf_phys_vec_to_sgt\(struct dma_buf_attachment \*$(pd_id),\s*struct p2pdma_provider \*$(pd_id),\s*struct phys_vec \*$(pd_id),\s*size_t $(pd_id),\s*size_t $(pd_id),\s*enum dma_data_direction $(pd_id)\);
pd_proto_revocable := bool dma_buf_attach_revocable\(struct dma_buf_attachment \*$(pd_id)\);
pd_proto_release_fault := void release_fault_lock\(struct vm_fault \*$(pd_id)\)
pd_probe_flags += $(call pd_probe,linux/dma-buf.h,$(pd_proto_invalidate),PD_HAVE_DMA_BUF_INVALIDATE_MAPPINGS)
pd_probe_flags += $(call pd_probe,linux/mm.h,$(pd_proto_vm_flags),PD_HAVE_VM_FLAGS_SET)
pd_probe_flags += $(call pd_probe,linux/dma-buf-mapping.h,$(pd_proto_phys_vec),PD_HAVE_DMA_BUF_PHYS_VEC_TO_SGT)
pd_probe_flags += $(call pd_probe,linux/dma-buf.h,$(pd_proto_revocable),PD_HAVE_DMA_BUF_ATTACH_REVOCABLE)
pd_probe_flags += $(call pd_probe,linux/mm.h,$(pd_proto_release_fault),PD_HAVE_RELEASE_FAULT_LOCK)
pd_proto_zap_special := void zap_special_vma_range\(struct vm_area_struct \*$(pd_id),\s*unsigned long $(pd_id),\s*unsigned long $(pd_id)\);
pd_probe_flags += $(call pd_probe,linux/mm.h,$(pd_proto_zap_special),PD_HAVE_ZAP_SPECIAL_VMA_RANGE)
pd_proto_has_override := bool device_has_driver_override\(struct device \*$(pd_id)\)
pd_probe_flags += $(call pd_probe,linux/device.h,$(pd_proto_has_override),PD_HAVE_DEVICE_HAS_DRIVER_OVERRIDE)
# The name alone, where compat.h's fallback is for kernels without it: the
# name without the prototype above means the interface changed, and
# compat.h stops with an #error naming the probe instead of compiling the
# fallback (which would fail late and cryptically, or worse, build).
pd_lparen := (
pd_seen = $(call pd_probe,$(1),[^A-Za-z0-9_]$(2)[$(pd_lparen)],PD_SEEN_$(3))
pd_probe_flags += $(call pd_seen,linux/dma-buf.h,dma_buf_invalidate_mappings,DMA_BUF_INVALIDATE_MAPPINGS)
pd_probe_flags += $(call pd_seen,linux/mm.h,vm_flags_set,VM_FLAGS_SET)
pd_probe_flags += $(call pd_seen,linux/mm.h,release_fault_lock,RELEASE_FAULT_LOCK)
pd_probe_flags += $(call pd_seen,linux/mm.h,zap_special_vma_range,ZAP_SPECIAL_VMA_RANGE)
pd_probe_flags += $(call pd_seen,linux/device.h,device_has_driver_override,DEVICE_HAS_DRIVER_OVERRIDE)
