/* SPDX-License-Identifier: MIT */
#ifndef PD_SLAB_H
#define PD_SLAB_H

#include <stddef.h>

/*
 * Fixed-size objects carved from blocks of many, reused last-freed first.
 * Not thread-safe: its owner's lock guards it.  Blocks go back to the
 * system only at pd_slab_destroy, so its footprint is its peak.
 */
struct pd_slab_block;

struct pd_slab {
	size_t size;		/* of one object, a multiple of align */
	size_t align;
	size_t next_count;	/* objects in the next block */
	void *free;		/* freed objects, linked through their first bytes */
	struct pd_slab_block *blocks;
};

void pd_slab_init(struct pd_slab *s, size_t size, size_t align);
void *pd_slab_alloc(struct pd_slab *s);
void pd_slab_free(struct pd_slab *s, void *obj);
void pd_slab_destroy(struct pd_slab *s);

#endif
