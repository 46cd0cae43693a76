/* SPDX-License-Identifier: MIT */
/* FNV-1a, 64 bits: a checksum of bytes, chained through h. */
#ifndef PD_TOOL_FNV1A_H
#define PD_TOOL_FNV1A_H

#include <stddef.h>
#include <stdint.h>

#define FNV1A_INIT 0xcbf29ce484222325ULL

static inline uint64_t fnv1a(uint64_t h, const void *p, size_t len)
{
	const unsigned char *c = p;

	while (len--)
		h = (h ^ *c++) * 0x100000001b3ULL;
	return h;
}

#endif
