/* SPDX-License-Identifier: MIT */
/*
 * A circular doubly linked list with a sentinel: membership is tested and
 * ended in O(1), and a node unlinked twice stays harmless (it points at
 * itself).  The cache's CLOCK order and the transfer queues share it.
 */
#ifndef PD_LIST_H
#define PD_LIST_H

#include <stdbool.h>
#include <stddef.h>

struct pd_list {
	struct pd_list *prev, *next;
};

static inline void pd_list_init(struct pd_list *l)
{
	l->prev = l->next = l;
}

static inline bool pd_list_empty(const struct pd_list *l)
{
	return l->next == l;
}

static inline void pd_list_add_tail(struct pd_list *head, struct pd_list *n)
{
	n->prev = head->prev;
	n->next = head;
	head->prev->next = n;
	head->prev = n;
}

static inline void pd_list_del(struct pd_list *n)
{
	n->prev->next = n->next;
	n->next->prev = n->prev;
	pd_list_init(n);
}

#define pd_list_entry(p, type, member) ((type *)(void *)((char *)(p) - offsetof(type, member)))

#endif
