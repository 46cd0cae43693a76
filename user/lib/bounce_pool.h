/* SPDX-License-Identifier: MIT */
#ifndef PD_BOUNCE_POOL_H
#define PD_BOUNCE_POOL_H

#include <stddef.h>
#include <stdint.h>

struct fid_domain;
struct pd_bounce_pool;

/* nslots host buffers of slot_size bytes, registered once on domain with
 * the requested key. */
int pd_bounce_pool_create(struct fid_domain *domain, size_t slot_size,
			  size_t nslots, uint64_t key, struct pd_bounce_pool **out);
void pd_bounce_pool_destroy(struct pd_bounce_pool *pool);
/* A free slot index, or -1 when all are in flight.  Not thread-safe: the
 * fabric lock serializes callers. */
int pd_bounce_slot_get(struct pd_bounce_pool *pool);
void pd_bounce_slot_put(struct pd_bounce_pool *pool, int slot);
char *pd_bounce_slot_ptr(struct pd_bounce_pool *pool, int slot);
void *pd_bounce_desc(struct pd_bounce_pool *pool);
size_t pd_bounce_nfree(const struct pd_bounce_pool *pool);

/* A staging buffer of its own for a request that found no free slot:
 * len bytes (page-rounded), registered with the requested key. */
struct pd_stage {
	char *mem;
	size_t len;
	struct fid_mr *mr;
	void *desc;
	struct pd_stage *next;	/* on the fabric's list to free after its lock */
};
int pd_stage_alloc(struct fid_domain *domain, size_t len, uint64_t key,
		   struct pd_stage **out);
/* What a staging buffer of len bytes holds: len rounded up to pages. */
size_t pd_stage_bytes(size_t len);
void pd_stage_free(struct pd_stage *stage);

/*
 * CPU copies between a dma-buf mapping and host memory, bracketed by
 * DMA_BUF_IOCTL_SYNC START/END.  A SYNC failing with ENODEV means the export
 * was revoked: the copy is reported failed, whatever it read is discarded.
 */
int pd_dmabuf_copy_from(int fd, void *dst, const void *map_src, size_t len);
int pd_dmabuf_copy_to(int fd, void *map_dst, const void *src, size_t len);

/* The SYNC step, replaceable by tests (a memfd answers SYNC with ENOTTY).
 * Returns 0 or a negative errno.  NULL restores the real ioctl. */
typedef int (*pd_dmabuf_sync_fn)(int fd, uint64_t flags);
void pd_set_dmabuf_sync(pd_dmabuf_sync_fn fn);
/* Own staging buffers mapped and unmapped so far, process-wide (tests:
 * interposing mmap breaks ThreadSanitizer's start-up). */
extern unsigned long pd_stage_maps, pd_stage_unmaps;

#endif
