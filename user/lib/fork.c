// SPDX-License-Identifier: MIT
/*
 * The registry of fds the library owns, closed in a forked child (see
 * fork.h).  PyTorch's DataLoader forks workers from a process that has
 * the library loaded: those workers must neither steal the device's
 * events nor pin exported memory.
 */
#include <errno.h>
#include <pthread.h>
#include <unistd.h>

#include "errors.h"
#include "fork.h"

unsigned int pd_fork_generation;

static pthread_mutex_t owned_lock = PTHREAD_MUTEX_INITIALIZER;
static struct pd_owned_fd *owned;
static pthread_once_t handlers_once = PTHREAD_ONCE_INIT;

/* Held across fork: the list is whole in the child. */
static void before_fork(void)
{
	pthread_mutex_lock(&owned_lock);
}

static void in_parent(void)
{
	pthread_mutex_unlock(&owned_lock);
}

static void in_child(void)
{
	struct pd_owned_fd *o, *next;

	for (o = owned; o; o = next) {
		next = o->next;
		if (*o->fd >= 0)
			close(*o->fd);
		*o->fd = -1;
		o->prev = o->next = NULL;
	}
	owned = NULL;
	__atomic_add_fetch(&pd_fork_generation, 1, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&owned_lock);
}

static void install_handlers(void)
{
	pthread_atfork(before_fork, in_parent, in_child);
}

void pd_fork_track(struct pd_owned_fd *o, int *fd)
{
	pthread_once(&handlers_once, install_handlers);
	pthread_mutex_lock(&owned_lock);
	o->fd = fd;
	o->prev = NULL;
	o->next = owned;
	if (owned)
		owned->prev = o;
	owned = o;
	pthread_mutex_unlock(&owned_lock);
}

void pd_fork_untrack(struct pd_owned_fd *o)
{
	pthread_mutex_lock(&owned_lock);
	/* Not on the list: tracked before a fork this child came from. */
	if (o->prev)
		o->prev->next = o->next;
	else if (owned == o)
		owned = o->next;
	if (o->next)
		o->next->prev = o->prev;
	o->prev = o->next = NULL;
	pthread_mutex_unlock(&owned_lock);
}

int pd_fork_refuse(const char *fn)
{
	return pd_error(-ECHILD, "%s: the object was made before fork(); a child that does not exec must open its own (its copies of the library's fds were closed)",
			fn);
}
