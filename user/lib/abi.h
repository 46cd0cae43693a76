/* SPDX-License-Identifier: MIT */
/*
 * Internal: the published layouts.  A struct may only grow at its end, so
 * the size a 1.0 binary passes (or, for pd_fabric_attr_init, was given) is
 * the offset where the first 1.1 field starts.  test_abi pins these.
 */
#ifndef PD_ABI_H
#define PD_ABI_H

#include <stddef.h>

#include "peerdirect.h"

#define PD_FABRIC_ATTR_SIZE_1_0 \
	(offsetof(struct pd_fabric_attr, universe_size) + sizeof(size_t))
#define PD_DEVICE_INFO_SIZE_1_0		sizeof(struct pd_device_info)
#define PD_EXPORT_INFO_SIZE_1_0		sizeof(struct pd_export_info)
#define PD_EVENT_SIZE_1_0		sizeof(struct pd_event)
#define PD_CACHE_STATS_SIZE_1_0		sizeof(struct pd_cache_stats)
#define PD_RKEY_SIZE_1_0		sizeof(struct pd_rkey)

/*
 * The library's struct of have bytes into the caller's of size: no byte
 * past size is written, bytes the library does not know are zeroed.
 * -EINVAL (naming what) for a size below min, the 1.0 layout: nothing
 * shorter was ever published.
 */
int pd_copy_out(const char *what, void *dst, size_t size, const void *src,
		size_t have, size_t min, size_t *filled);

#endif
