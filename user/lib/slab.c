// SPDX-License-Identifier: MIT
/*
 * Why not malloc per object: the registration cache's entries were
 * allocated one at a time between a registration's other allocations
 * (its libfabric MR, its 700-byte record), so 10,000 entries were spread
 * over some 15 MB of heap.  A hit then missed the CPU caches and the TLB
 * even when every entry had just been used; packed together the same
 * entries take 2 MB (performance goal P3).
 */
#include <stdint.h>
#include <stdlib.h>

#include "slab.h"

#define FIRST_COUNT 16
#define MAX_COUNT 512

struct pd_slab_block {
	struct pd_slab_block *next;
};

void pd_slab_init(struct pd_slab *s, size_t size, size_t align)
{
	size = size < sizeof(void *) ? sizeof(void *) : size;
	*s = (struct pd_slab) {
		.size = (size + align - 1) / align * align,
		.align = align,
		.next_count = FIRST_COUNT,
	};
}

/* Objects start one alignment unit in, after the block's link. */
static int grow(struct pd_slab *s)
{
	size_t head = s->align < sizeof(struct pd_slab_block) ?
		      sizeof(struct pd_slab_block) : s->align;
	size_t n = s->next_count, bytes = head + n * s->size;
	struct pd_slab_block *b;
	char *obj;

	bytes = (bytes + s->align - 1) / s->align * s->align;
	b = aligned_alloc(s->align, bytes);
	if (!b)
		return -1;
	b->next = s->blocks;
	s->blocks = b;
	/* Linked in address order: consecutive allocations are neighbours. */
	for (obj = (char *)b + head + (n - 1) * s->size;; obj -= s->size) {
		pd_slab_free(s, obj);
		if (obj == (char *)b + head)
			break;
	}
	if (s->next_count < MAX_COUNT)
		s->next_count *= 2;
	return 0;
}

void *pd_slab_alloc(struct pd_slab *s)
{
	void *obj;

	if (!s->free && grow(s))
		return NULL;
	obj = s->free;
	s->free = *(void **)obj;
	return obj;
}

void pd_slab_free(struct pd_slab *s, void *obj)
{
	*(void **)obj = s->free;
	s->free = obj;
}

void pd_slab_destroy(struct pd_slab *s)
{
	while (s->blocks) {
		struct pd_slab_block *b = s->blocks;

		s->blocks = b->next;
		free(b);
	}
	s->free = NULL;
}
