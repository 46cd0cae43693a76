/* SPDX-License-Identifier: MIT */
/*
 * Internal: fork().  A child that does not exec inherits the library's
 * fds: the device file (the same open file description, so a read in the
 * child would take the parent's events, and the file's allocations,
 * exports and subscriptions would outlive the parent's close) and the dups
 * of dma-bufs (which keep their memory alive).  The child closes every fd
 * the library owns at once, and objects made before the fork refuse every
 * call with -ECHILD; dropping them in the child releases nothing that the
 * parent shares.
 */
#ifndef PD_FORK_H
#define PD_FORK_H

#include <stdbool.h>

/* An fd the library owns, embedded in its owner. */
struct pd_owned_fd {
	int *fd;
	struct pd_owned_fd *prev, *next;
};

/* From when *fd is open until just before it is closed. */
void pd_fork_track(struct pd_owned_fd *o, int *fd);
void pd_fork_untrack(struct pd_owned_fd *o);

/* Bumped in every child: an object records it when made. */
extern unsigned int pd_fork_generation;

static inline unsigned int pd_fork_gen(void)
{
	return __atomic_load_n(&pd_fork_generation, __ATOMIC_RELAXED);
}

static inline bool pd_forked_since(unsigned int gen)
{
	return pd_fork_gen() != gen;
}

/* -ECHILD with a message naming fn. */
int pd_fork_refuse(const char *fn);

#endif
