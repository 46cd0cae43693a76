// SPDX-License-Identifier: MIT
/*
 * Sleeping waits (issue 37).  pd_wait used to spin, then sched_yield()
 * between polls.  On a core shared with runnable threads (a training
 * node's data loaders) a yield hands the core over for the rest of their
 * slice: a 4 KiB allreduce beside two CPU hogs took 4.4 ms, where Open MPI
 * took 11-25 us.  A waiter that sleeps in poll() is woken by the event it
 * waits for, and the scheduler runs a thread that slept at once.
 *
 * The rule libfabric sets for a wait fd (fi_poll(3)): call fi_trywait()
 * first; only when it succeeds may the caller sleep on the fd, because a
 * provider with manual progress signals it only for what comes after.
 *
 * Every sleeper has its own eventfd (one per thread: a thread sleeps in
 * one wait at a time) and is on the fabric's list while it sleeps, with
 * the count it saw.  Progress wakes exactly the sleepers that saw an older
 * count, each through its own fd, under the fabric's lock; a shared fd
 * with a token per sleeper let one sleeper take another's token, and the
 * other slept on.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_eq.h>

#include "fabric.h"
#include "wakeup.h"

#define BUSY_LIMIT	8	/* fi_trywait -FI_EAGAINs in a row before a nap */
#define NAP_MIN_NS	20000
#define NAP_MAX_NS	160000

struct pd_sleeper {
	struct pd_sleeper *next;
	uint64_t seen;
	int fd;
};

/*
 * ---- one eventfd per thread, closed when the thread exits ------------
 * A forked child's thread has the parent's eventfd (the same file, not a
 * copy): a read in the child would take the parent's wake-up.  So the fd
 * is made again in each fork generation (fork.h), and the inherited one
 * closed in the child only.
 */
struct thread_fd {
	int fd;
	unsigned int fork_gen;
};

static pthread_key_t fd_key;
static pthread_once_t fd_once = PTHREAD_ONCE_INIT;
static bool fd_key_ok;

static void close_thread_fd(void *p)
{
	struct thread_fd *t = p;

	close(t->fd);
	free(t);
}

static void make_key(void)
{
	fd_key_ok = !pthread_key_create(&fd_key, close_thread_fd);
}

static int thread_fd(void)
{
	struct thread_fd *t;

	pthread_once(&fd_once, make_key);
	if (!fd_key_ok)
		return -1;
	t = pthread_getspecific(fd_key);
	if (t && t->fork_gen == pd_fork_gen())
		return t->fd;
	if (!t) {
		t = malloc(sizeof(*t));
		if (!t)
			return -1;
		t->fd = -1;
		if (pthread_setspecific(fd_key, t)) {
			free(t);
			return -1;
		}
	}
	if (t->fd >= 0)
		close(t->fd);	/* the parent's, in a child */
	t->fork_gen = pd_fork_gen();
	t->fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	return t->fd;
}

/* ---------------------------------------------------------------------- */

void pd_wakeup_signal_locked(struct pd_wakeup *w)
{
	struct pd_sleeper **p = &w->sleepers, *s;
	uint64_t one = 1;

	while ((s = *p)) {
		if (s->seen == w->gen) {
			p = &s->next;
			continue;
		}
		/* Written before it leaves the list: its thread (and fd)
		 * cannot be gone, as it unlinks itself under this lock. */
		(void)!write(s->fd, &one, sizeof(one));
		*p = s->next;
		s->next = NULL;
		s->fd = -1;	/* unlinked */
	}
}

static void unlink_locked(struct pd_wakeup *w, struct pd_sleeper *me)
{
	struct pd_sleeper **p;

	for (p = &w->sleepers; *p; p = &(*p)->next) {
		if (*p == me) {
			*p = me->next;
			return;
		}
	}
}

/* Sleeps bounded by the liveness scan (it runs from progress calls: an
 * eighth of the peer timeout delays a verdict by that much at most), and
 * to PD_SCAN_MS while chunks wait to be posted (a provider may need
 * progress calls, not only completions, to take them). */
static int slice_locked(const struct pd_fabric *fab, int timeout_ms)
{
	int slice = timeout_ms < 0 ? INT32_MAX : timeout_ms, scan;

	/* Shortened, never lengthened past the caller's timeout. */
	if (fab->peer_timeout_ms > 0) {
		scan = fab->peer_timeout_ms / 8 > PD_SCAN_MS ? fab->peer_timeout_ms / 8 : PD_SCAN_MS;
		slice = scan < slice ? scan : slice;
	}
	if (fab->npending && slice > PD_SCAN_MS)
		slice = PD_SCAN_MS;
	return slice;
}

enum pd_wake pd_wakeup_block(struct pd_fabric *fab, uint64_t seen, int timeout_ms,
			     unsigned int *busy)
{
	struct pd_wakeup *w = &fab->wakeup;
	struct pd_sleeper me = { .seen = seen, .fd = w->cq_fd < 0 ? -1 : thread_fd() };
	struct pollfd pfd[2] = {
		{ .fd = w->cq_fd, .events = POLLIN },
		{ .fd = me.fd, .events = POLLIN },
	};
	struct fid *cq = &fab->cq->fid;
	enum pd_wake ret;
	uint64_t v;
	int slice = 0;

	if (me.fd < 0)
		return PD_WAKE_NO_FD;
	pthread_mutex_lock(&fab->lock);
	if (fab->closed) {
		ret = PD_WAKE_CLOSED;
	} else if (w->gen != seen) {
		ret = PD_WAKE_AGAIN;
	} else if (fi_trywait(fab->fabric, &cq, 1) != FI_SUCCESS) {
		ret = ++*busy > BUSY_LIMIT ? PD_WAKE_BUSY : PD_WAKE_AGAIN;
	} else {
		*busy = 0;
		me.next = w->sleepers;
		w->sleepers = &me;
		slice = slice_locked(fab, timeout_ms);
		ret = PD_WAKE_SLEPT;
	}
	pthread_mutex_unlock(&fab->lock);
	if (ret != PD_WAKE_SLEPT)
		return ret;
	poll(pfd, 2, slice);
	pthread_mutex_lock(&fab->lock);
	if (me.fd >= 0)		/* not woken through the list */
		unlink_locked(w, &me);
	pthread_mutex_unlock(&fab->lock);
	/* Off the list now: nothing writes it until it sleeps again. */
	(void)!read(pfd[1].fd, &v, sizeof(v));
	return PD_WAKE_SLEPT;
}

/*
 * A provider without a wait fd (shm, libfabric 1.17 and 2.1) gives nothing
 * to sleep on, and a yield behind runnable threads costs their whole
 * slice.  A short sleep costs its length plus the timer's slack (50 us),
 * and the scheduler then runs a thread that slept ahead of ones that did
 * not.  It is a timer: it doubles from 20 to 160 us while nothing moves,
 * so a long wait costs few wake-ups and a short one little latency.
 */
void pd_wakeup_nap(unsigned int *naps)
{
	long ns = NAP_MIN_NS << (*naps < 3 ? *naps : 3);
	struct timespec ts = { 0, ns < NAP_MAX_NS ? ns : NAP_MAX_NS };

	(*naps)++;
	nanosleep(&ts, NULL);
}
