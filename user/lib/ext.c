// SPDX-License-Identifier: MIT
/*
 * peerdirect_ext.h: thin doors into the library for its benchmarks and
 * test programs.  Each is the internal call it names, checked, so that a
 * tool never reads a private field.  Hidden in the shared library.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

#include "peerdirect_ext.h"
#include "bounce_pool.h"
#include "device.h"
#include "errors.h"
#include "fabric.h"
#include "mr_cache.h"

int pd_fabric_ext_query(struct pd_fabric *fab, struct pd_fabric_ext_info *out)
{
	if (!fab || !out)
		return pd_error(-EINVAL, "pd_fabric_ext_query: %s is NULL", !fab ? "fabric" : "out");
	*out = (struct pd_fabric_ext_info) {
		.info = fab->info, .domain = fab->domain, .ep = fab->ep, .cq = fab->cq,
		.pins_cpu_maps = fab->pins_cpu_maps,
	};
	return 0;
}

void *pd_mr_ext_desc(struct pd_mr *mr)
{
	return mr ? mr->reg->desc : NULL;
}

void *pd_mr_ext_io(struct pd_mr *mr)
{
	return mr ? pd_mr_io(mr) : NULL;
}

unsigned int pd_fabric_ext_invalidate_dmabuf(struct pd_fabric *fab, uint64_t st_dev,
					     uint64_t st_ino)
{
	return fab ? pd_mr_cache_invalidate_dmabuf(fab->cache, st_dev, st_ino, PD_REASON_REVOKE) : 0;
}

int pd_device_ext_wrap_fd(int fd, unsigned int index, struct pd_device **out)
{
	return pd_device_wrap_fd(fd, index, out);
}

int pd_device_ext_track_export(struct pd_device *dev, int fd, uint64_t export_id)
{
	return pd_device_track_export(dev, fd, export_id);
}

int pd_ext_dmabuf_copy_to(int fd, void *map_dst, const void *src, size_t len)
{
	return pd_dmabuf_copy_to(fd, map_dst, src, len);
}

int pd_ext_dmabuf_copy_from(int fd, void *dst, const void *map_src, size_t len)
{
	return pd_dmabuf_copy_from(fd, dst, map_src, len);
}

void pd_ext_set_dmabuf_sync(int (*fn)(int fd, uint64_t flags))
{
	pd_set_dmabuf_sync(fn);
}

int pd_ext_error(int ret, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return pd_error(ret, "%s", msg);
}

int pd_ext_parse_size(const char *s, size_t *out)
{
	return pd_parse_size(s, out);
}
