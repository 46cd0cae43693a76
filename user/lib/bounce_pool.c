// SPDX-License-Identifier: MIT
/*
 * Host staging for memory the provider cannot register (verbs cannot pin a
 * VM_PFNMAP mapping).  The slots are registered once at creation so the data
 * path never registers; transfers pipeline through them chunk by chunk.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <linux/dma-buf.h>
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>

#include "bounce_pool.h"
#include "errors.h"

struct pd_bounce_pool {
	char *mem;
	size_t slot_size, nslots, len;
	struct fid_mr *mr;
	size_t nfree;
	int free_slots[];
};

int pd_bounce_pool_create(struct fid_domain *domain, size_t slot_size,
			  size_t nslots, uint64_t key, struct pd_bounce_pool **out)
{
	struct pd_bounce_pool *p;
	size_t i;
	int ret;

	if (!slot_size || !nslots || nslots > 4096 || slot_size > SIZE_MAX / nslots)
		return pd_error(-EINVAL, "bounce pool: %zu slots of %zu bytes (need 1..4096 slots, non-zero size)",
				nslots, slot_size);
	p = calloc(1, sizeof(*p) + nslots * sizeof(p->free_slots[0]));
	if (!p)
		return pd_error(-ENOMEM, "bounce pool: out of memory");
	p->slot_size = slot_size;
	p->nslots = nslots;
	p->len = slot_size * nslots;
	p->mem = mmap(NULL, p->len, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p->mem == MAP_FAILED) {
		ret = -errno;
		free(p);
		return pd_error(ret, "bounce pool: mmap of %zu bytes: %s", slot_size * nslots,
				strerror(-ret));
	}
	ret = fi_mr_reg(domain, p->mem, p->len, FI_SEND | FI_RECV | FI_WRITE | FI_READ,
			0, key, 0, &p->mr, NULL);
	if (ret) {
		munmap(p->mem, p->len);
		free(p);
		return pd_error(ret, "bounce pool: fi_mr_reg of %zu bytes: %s", slot_size * nslots,
				fi_strerror(-ret));
	}
	for (i = 0; i < nslots; i++)
		p->free_slots[i] = (int)(nslots - 1 - i);
	p->nfree = nslots;
	*out = p;
	return 0;
}

void pd_bounce_pool_destroy(struct pd_bounce_pool *p)
{
	if (!p)
		return;
	fi_close(&p->mr->fid);
	munmap(p->mem, p->len);
	free(p);
}

int pd_bounce_slot_get(struct pd_bounce_pool *p)
{
	return p->nfree ? p->free_slots[--p->nfree] : -1;
}

void pd_bounce_slot_put(struct pd_bounce_pool *p, int slot)
{
	p->free_slots[p->nfree++] = slot;
}

char *pd_bounce_slot_ptr(struct pd_bounce_pool *p, int slot)
{
	return p->mem + (size_t)slot * p->slot_size;
}

void *pd_bounce_desc(struct pd_bounce_pool *p)
{
	return fi_mr_desc(p->mr);
}

size_t pd_bounce_nfree(const struct pd_bounce_pool *p)
{
	return p->nfree;
}

unsigned long pd_stage_maps, pd_stage_unmaps;

size_t pd_stage_bytes(size_t len)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);

	return (len + pg - 1) & ~(pg - 1);
}

int pd_stage_alloc(struct fid_domain *domain, size_t len, uint64_t key,
		   struct pd_stage **out)
{
	struct pd_stage *s = calloc(1, sizeof(*s));
	int ret;

	if (!s)
		return pd_error(-ENOMEM, "staging buffer: out of memory");
	s->len = pd_stage_bytes(len);
	s->mem = mmap(NULL, s->len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (s->mem == MAP_FAILED) {
		ret = -errno;
		free(s);
		return pd_error(ret, "staging buffer: mmap of %zu bytes: %s", len, strerror(-ret));
	}
	ret = fi_mr_reg(domain, s->mem, s->len, FI_SEND | FI_RECV | FI_WRITE | FI_READ, 0, key,
			0, &s->mr, NULL);
	if (ret) {
		munmap(s->mem, s->len);
		free(s);
		return pd_error(ret, "staging buffer: fi_mr_reg of %zu bytes: %s", len, fi_strerror(-ret));
	}
	s->desc = fi_mr_desc(s->mr);
	__atomic_add_fetch(&pd_stage_maps, 1, __ATOMIC_RELAXED);
	*out = s;
	return 0;
}

void pd_stage_free(struct pd_stage *s)
{
	if (!s)
		return;
	fi_close(&s->mr->fid);
	munmap(s->mem, s->len);
	__atomic_add_fetch(&pd_stage_unmaps, 1, __ATOMIC_RELAXED);
	free(s);
}

static int ioctl_sync(int fd, uint64_t flags)
{
	struct dma_buf_sync s = { .flags = flags };

	while (ioctl(fd, DMA_BUF_IOCTL_SYNC, &s) < 0) {
		if (errno != EINTR && errno != EAGAIN)
			return -errno;
	}
	return 0;
}

static pd_dmabuf_sync_fn sync_fn = ioctl_sync;

void pd_set_dmabuf_sync(pd_dmabuf_sync_fn fn)
{
	sync_fn = fn ? fn : ioctl_sync;
}

static int sync_error(int err, const char *step, int fd)
{
	if (err == -ENODEV)
		return pd_error(-ENODEV, "dma-buf fd %d was revoked (DMA_BUF_IOCTL_SYNC %s: ENODEV): transfer failed, no data delivered",
				fd, step);
	return pd_error(err, "DMA_BUF_IOCTL_SYNC %s on fd %d: %s%s", step, fd, strerror(-err),
			err == -ENOTTY ? " (not a dma-buf)" : "");
}

static int bracketed_copy(int fd, uint64_t dir, void *dst, const void *src,
			  size_t len)
{
	int ret = sync_fn(fd, DMA_BUF_SYNC_START | dir);

	if (ret)
		return sync_error(ret, "START", fd);
	memcpy(dst, src, len);
	ret = sync_fn(fd, DMA_BUF_SYNC_END | dir);
	/* Revoked during the copy: what was read may be garbage. */
	return ret ? sync_error(ret, "END", fd) : 0;
}

int pd_dmabuf_copy_from(int fd, void *dst, const void *map_src, size_t len)
{
	return bracketed_copy(fd, DMA_BUF_SYNC_READ, dst, map_src, len);
}

int pd_dmabuf_copy_to(int fd, void *map_dst, const void *src, size_t len)
{
	return bracketed_copy(fd, DMA_BUF_SYNC_WRITE, map_dst, src, len);
}
