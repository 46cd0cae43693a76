/* SPDX-License-Identifier: MIT */
/*
 * Where the tools get "device memory": a real export from /dev/peerdirectN
 * (in the VM with the module), a dma-buf of another exporter (udmabuf, where
 * the kernel has it: the library must treat it as foreign, with no device
 * and no revocation events), a memfd standing in for a dma-buf (on a host
 * without it: mmap works, SYNC answers ENOTTY and is accepted), or plain
 * host memory.  The tools touch the bytes only through a SYNC-bracketed
 * mapping of their own, as an accelerator runtime would.
 */
#ifndef PD_TOOLS_DMABUF_SOURCE_H
#define PD_TOOLS_DMABUF_SOURCE_H

/* needs _GNU_SOURCE (memfd_create): the Makefile defines it for every file */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <linux/dma-buf.h>
#include <linux/udmabuf.h>

#include "peerdirect.h"
#include "peerdirect_ext.h"
#include "tool_args.h"
#include "tool_device.h"

/* uapi's PEERDIRECT_BACKEND_SIM, which QUERY (pd_device_info.backend) gives */
#define SRC_BACKEND_SIM 1

enum src_kind { SRC_HOST, SRC_MEMFD, SRC_DEVICE, SRC_FOREIGN };

struct dmabuf_source {
	enum src_kind kind;
	/* device:N, the exporter, attached to the fabric; handed:N, the
	 * fabric's device, which did not export the buffer (owner did). */
	struct pd_device *dev;
	struct pd_device *owner;
	uint64_t handle;
	bool simulated;		/* device memory that is RAM (the sim backend) */
	struct pd_export_info exp;
	int fd;			/* -1 for host memory */
	size_t len;
	char *map;		/* the tool's own view of the bytes */
};

static inline int memfd_sync(int fd, uint64_t flags)
{
	struct dma_buf_sync s = { .flags = flags };

	if (ioctl(fd, DMA_BUF_IOCTL_SYNC, &s) == 0 || errno == ENOTTY)
		return 0;
	return -errno;
}

/* A udmabuf over a sealed memfd of whole pages; returns the dma-buf fd. */
static inline int udmabuf_open(size_t len)
{
	struct udmabuf_create c = { .flags = UDMABUF_FLAGS_CLOEXEC, .size = len };
	int memfd, dev, fd, err;

	memfd = memfd_create("pd-tool-udmabuf", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (memfd < 0)
		return -errno;
	dev = open("/dev/udmabuf", O_RDWR | O_CLOEXEC);
	if (dev < 0 || ftruncate(memfd, (off_t)len) ||
	    fcntl(memfd, F_ADD_SEALS, F_SEAL_SHRINK)) {
		err = -errno;
		fd = -1;
	} else {
		c.memfd = (__u32)memfd;
		fd = ioctl(dev, UDMABUF_CREATE, &c);
		err = -errno;
	}
	if (dev >= 0)
		close(dev);
	close(memfd);
	return fd >= 0 ? fd : err;
}

/* N of "device:N" or "handed:N": the module's device index, N as
 * --device takes it (index, path or pci:ADDR; tool_device.h); else, with
 * the reason printed, -EINVAL (not such a spec, bad syntax) or -ENODEV. */
static inline int source_device_index(const char *spec, int *index)
{
	char why[PATH_MAX + 128];
	int ret;

	if (strncmp(spec, "device:", 7) && strncmp(spec, "handed:", 7))
		return -EINVAL;
	ret = tool_dev_resolve(tool_sysfs_root(), spec + 7, index, why, sizeof(why));
	if (ret)
		fprintf(stderr, "memory '%s': %s\n", spec, why);
	return ret;
}

/* "device:SPEC" of --device SPEC, into buf. */
static inline const char *source_device_spec(const char *dev, char *buf, size_t len)
{
	snprintf(buf, len, "device:%s", dev);
	return buf;
}

/*
 * spec: "host", "memfd", "udmabuf", "device:N", or "handed:N": a module
 * dma-buf exported through another handle of /dev/peerdirectN, as a runtime
 * hands a network plugin the fd alone; the library learns of its revocation
 * only by subscribing to it.
 */
static inline int source_open(struct dmabuf_source *s, const char *spec, size_t len)
{
	struct pd_device_info info;
	int ret;

	memset(s, 0, sizeof(*s));
	s->fd = -1;
	s->len = len;
	if (!strcmp(spec, "host")) {
		s->kind = SRC_HOST;
	} else if (!strcmp(spec, "memfd")) {
		s->kind = SRC_MEMFD;
		s->fd = memfd_create("pd-tool", MFD_CLOEXEC);
		if (s->fd < 0 || ftruncate(s->fd, (off_t)len))
			return -errno;
		pd_ext_set_dmabuf_sync(memfd_sync);
	} else if (!strcmp(spec, "udmabuf")) {
		size_t pg = (size_t)sysconf(_SC_PAGESIZE);

		s->kind = SRC_FOREIGN;
		s->len = (len + pg - 1) / pg * pg;
		s->fd = udmabuf_open(s->len);
		if (s->fd < 0) {
			ret = s->fd;
			s->fd = -1;
			fprintf(stderr, "udmabuf: %s\n", strerror(-ret));
			return ret;
		}
	} else if (!strncmp(spec, "device:", 7) || !strncmp(spec, "handed:", 7)) {
		struct pd_device **exporter = spec[0] == 'h' ? &s->owner : &s->dev;
		int index;

		ret = source_device_index(spec, &index);
		if (ret)
			return ret;
		s->kind = SRC_DEVICE;
		ret = pd_device_open((unsigned int)index, exporter) ?:
		      pd_device_query(*exporter, &info);
		if (!ret && s->owner)
			ret = pd_device_open((unsigned int)index, &s->dev);
		if (ret)
			return ret;
		s->simulated = info.backend == SRC_BACKEND_SIM;
		s->len = (len + info.page_size - 1) / info.page_size * info.page_size;
		ret = pd_device_alloc(*exporter, s->len, &s->handle, NULL) ?:
		      pd_device_export(*exporter, s->handle, 0, s->len,
				       PD_EXPORT_RDWR | PD_EXPORT_CLOEXEC, &s->exp);
		if (ret)
			return ret;
		s->fd = s->exp.fd;
	} else {
		fprintf(stderr, "memory '%s' is not host, memfd, udmabuf, device:N or handed:N\n", spec);
		return -EINVAL;
	}
	s->map = mmap(NULL, s->len, PROT_READ | PROT_WRITE,
		      s->fd < 0 ? MAP_PRIVATE | MAP_ANONYMOUS : MAP_SHARED, s->fd, 0);
	if (s->map == MAP_FAILED) {
		s->map = NULL;
		return -errno;
	}
	return 0;
}

/* Through SYNC for dma-bufs: a revoked buffer reports -ENODEV. */
static inline int source_write(struct dmabuf_source *s, const void *src, size_t len)
{
	if (s->fd < 0) {
		memcpy(s->map, src, len);
		return 0;
	}
	return pd_ext_dmabuf_copy_to(s->fd, s->map, src, len);
}

static inline int source_read(struct dmabuf_source *s, void *dst, size_t len)
{
	if (s->fd < 0) {
		memcpy(dst, s->map, len);
		return 0;
	}
	return pd_ext_dmabuf_copy_from(s->fd, dst, s->map, len);
}

static inline int source_register(struct dmabuf_source *s, struct pd_fabric *fab,
			   struct pd_mr **mr)
{
	if (s->kind == SRC_HOST)
		return pd_mr_reg_host(fab, s->map, s->len, 0, mr);
	if (s->dev)
		pd_fabric_attach_device(fab, s->dev);
	return pd_mr_reg_dmabuf(fab, s->fd, 0, s->len, 0, mr);
}

/*
 * New anonymous pages at the host buffer's address, as free() and a later
 * malloc() give an application: what a registration cache that kept the
 * old pages pinned gets wrong.
 */
static inline int source_remap_host(struct dmabuf_source *s)
{
	void *p;

	if (s->kind != SRC_HOST)
		return -EINVAL;
	p = mmap(s->map, s->len, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	return p == MAP_FAILED ? -errno : 0;
}

static inline void source_close(struct dmabuf_source *s)
{
	if (s->map)
		munmap(s->map, s->len);
	if (s->fd >= 0)
		close(s->fd);
	if (s->owner) {
		if (s->handle)
			pd_device_free(s->owner, s->handle);
		pd_device_close(s->owner);
	} else if (s->dev && s->handle) {
		pd_device_free(s->dev, s->handle);
	}
	if (s->dev)
		pd_device_close(s->dev);
}

#endif
