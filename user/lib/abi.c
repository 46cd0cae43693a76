// SPDX-License-Identifier: MIT
/*
 * Growable structs.  Binaries built before ABI 1.1 call the plain symbols,
 * which cannot know the caller's struct size: they handle the 1.0 layouts
 * only, so a library with longer structs never writes past an old
 * caller's.  Source calls reach the _sz forms through the header's macros.
 */
#include <errno.h>
#include <string.h>

#include "abi.h"
#include "errors.h"

int pd_copy_out(const char *what, void *dst, size_t size, const void *src,
		size_t have, size_t min, size_t *filled)
{
	size_t n = size < have ? size : have;

	if (!dst)
		return pd_error(-EINVAL, "%s: output is NULL", what);
	if (size < min)
		return pd_error(-EINVAL, "%s: struct size %zu is below the smallest published (%zu)",
				what, size, min);
	memcpy(dst, src, n);
	if (size > n)
		memset((char *)dst + n, 0, size - n);
	if (filled)
		*filled = n;
	return 0;
}

void pd_fabric_attr_init(struct pd_fabric_attr *attr)
{
	pd_fabric_attr_init_sz(attr, PD_FABRIC_ATTR_SIZE_1_0);
}

int pd_device_query(struct pd_device *dev, struct pd_device_info *info)
{
	return pd_device_query_sz(dev, info, PD_DEVICE_INFO_SIZE_1_0, NULL);
}

int pd_device_export(struct pd_device *dev, uint64_t handle, uint64_t offset,
		     uint64_t length, unsigned int flags, struct pd_export_info *out)
{
	return pd_device_export_sz(dev, handle, offset, length, flags, out,
				   PD_EXPORT_INFO_SIZE_1_0, NULL);
}

int pd_device_read_events(struct pd_device *dev, struct pd_event *events,
			  size_t max, int timeout_ms)
{
	return pd_device_read_events_sz(dev, events, PD_EVENT_SIZE_1_0, max, timeout_ms);
}

int pd_fabric_cache_stats(struct pd_fabric *fab, struct pd_cache_stats *out)
{
	return pd_fabric_cache_stats_sz(fab, out, PD_CACHE_STATS_SIZE_1_0, NULL);
}

int pd_mr_rkey(const struct pd_mr *mr, struct pd_rkey *out)
{
	return pd_mr_rkey_sz(mr, out, PD_RKEY_SIZE_1_0, NULL);
}
