/* SPDX-License-Identifier: MIT */
/*
 * libpeerdirect extensions for benchmarks and test programs, as libfabric's
 * rdma/fi_ext.h is for fabtests: what a tool needs that an application
 * should not (the provider objects under a fabric, stand-ins for a device
 * or for DMA_BUF_IOCTL_SYNC), and the library's own error slot and size
 * syntax, so that a tool's messages read like the library's.
 *
 * Not part of the shared library's ABI: these are in libpeerdirect.a only
 * (hidden in libpeerdirect.so.1), and may change with any release.  The
 * project's tools build against peerdirect.h and this header alone.
 * Include it after <rdma/fabric.h> and <rdma/fi_domain.h>.
 */
#ifndef PEERDIRECT_EXT_H
#define PEERDIRECT_EXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "peerdirect.h"

#ifdef __cplusplus
extern "C" {
#endif

struct fi_info;
struct fid_domain;
struct fid_ep;
struct fid_cq;

/* The provider objects a fabric opened: for a raw libfabric loop beside
 * the library's, on the same endpoint (what it posts there, it reaps from
 * the CQ itself: the library must not be driven meanwhile). */
struct pd_fabric_ext_info {
	const struct fi_info *info;
	struct fid_domain *domain;
	struct fid_ep *ep;
	struct fid_cq *cq;
	bool pins_cpu_maps;	/* the provider pins CPU mappings' pages (shm's CMA) */
};
int pd_fabric_ext_query(struct pd_fabric *fab, struct pd_fabric_ext_info *out);

/* A registration as libfabric takes it: its descriptor (fi_mr_desc of its
 * MR), and the address of its first byte (NULL on the bounce path). */
void *pd_mr_ext_desc(struct pd_mr *mr);
void *pd_mr_ext_io(struct pd_mr *mr);

/* What a revocation event does to the fabric's cache, without the event:
 * every registration of the dma-buf {st_dev, st_ino} (its fstat) is
 * invalidated.  How many. */
unsigned int pd_fabric_ext_invalidate_dmabuf(struct pd_fabric *fab, uint64_t st_dev,
					     uint64_t st_ino);

/* A device stand-in: fd (a socketpair end, say) read as the device file's
 * events, under index; and an export of it named by export_id. */
int pd_device_ext_wrap_fd(int fd, unsigned int index, struct pd_device **out);
int pd_device_ext_track_export(struct pd_device *dev, int fd, uint64_t export_id);

/* CPU copies to and from a dma-buf's mapping, bracketed by
 * DMA_BUF_IOCTL_SYNC as the library's bounce path does them: 0, -ENODEV
 * once the export is revoked (the copy is then void), or -errno. */
int pd_ext_dmabuf_copy_to(int fd, void *map_dst, const void *src, size_t len);
int pd_ext_dmabuf_copy_from(int fd, void *dst, const void *map_src, size_t len);

/* DMA_BUF_IOCTL_SYNC replaced (a memfd answers ENOTTY); NULL restores it.
 * fn returns 0 or a negative errno. */
void pd_ext_set_dmabuf_sync(int (*fn)(int fd, uint64_t flags));

/* Sets pd_last_error() to the formatted message; returns ret. */
int pd_ext_error(int ret, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The size syntax of PEERDIRECT_* variables: a whole number with an
 * optional K, M or G (powers of 1024).  0 or -EINVAL. */
int pd_ext_parse_size(const char *s, size_t *out);

#ifdef __cplusplus
}
#endif

#endif
