// SPDX-License-Identifier: MIT
/*
 * Blocking waits (issue 37).  pd_wait used to spin, then sched_yield()
 * between polls.  On a core shared with runnable threads (a training
 * node's data loaders) a yield hands the core over for the rest of their
 * slice: a 4 KiB allreduce beside two CPU hogs took 8 ms, two scheduler
 * ticks, where Open MPI took 11-25 us.  A waiter that sleeps in poll() is
 * woken by the event it waits for, and the scheduler runs it at once.
 *
 * The rule libfabric sets for a wait fd: call fi_trywait() first; only
 * when it succeeds may the caller sleep on the fd, because a provider
 * with manual progress signals it only for what arrives after.
 */
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_eq.h>

#include "errors.h"
#include "fabric.h"
#include "wakeup.h"

int pd_wakeup_init(struct pd_fabric *fab, long spin_ns)
{
	struct pd_wakeup *w = &fab->wakeup;
	int fd = -1, ret;

	w->cq_fd = -1;
	w->spin_ns = spin_ns;
	w->event_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK | EFD_SEMAPHORE);
	if (w->event_fd < 0)
		return pd_error(-errno, "pd_fabric_open: eventfd: %s", strerror(errno));
	if (!fab->cq_waits) {
		w->why_not = fab->cq_why_not;
		return 0;
	}
	ret = fi_control(&fab->cq->fid, FI_GETWAIT, &fd);
	if (ret || fd < 0) {
		w->why_not = "the provider's CQ gave no wait fd (FI_GETWAIT)";
		return 0;
	}
	w->cq_fd = fd;
	return 0;
}

void pd_wakeup_fini(struct pd_fabric *fab)
{
	if (fab->wakeup.event_fd >= 0)
		close(fab->wakeup.event_fd);
	fab->wakeup.event_fd = -1;
}

void pd_wakeup_signal_locked(struct pd_wakeup *w)
{
	unsigned int n;

	if (w->signalled == w->gen)
		return;
	w->signalled = w->gen;
	n = __atomic_load_n(&w->sleepers, __ATOMIC_SEQ_CST);
	if (n && w->event_fd >= 0) {
		uint64_t v = n;

		/* Full (2^64 - 2) only with tokens nobody took: already woken. */
		if (write(w->event_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
			return;
	}
}

/*
 * A provider without a wait fd (shm, libfabric 1.17 and 2.1) gives nothing to
 * sleep on, and a yield behind runnable threads costs their whole slice.
 * A short sleep costs its length plus the timer's slack (50 us), and the
 * scheduler then runs a thread that slept ahead of ones that did not.
 */
#define NAP_NS 20000

void pd_wakeup_nap(void)
{
	struct timespec ts = { 0, NAP_NS };

	nanosleep(&ts, NULL);
}

bool pd_wakeup_block(struct pd_fabric *fab, uint64_t seen, int timeout_ms)
{
	struct pd_wakeup *w = &fab->wakeup;
	struct pollfd pfd[2] = {
		{ .fd = w->event_fd, .events = POLLIN },
		{ .fd = w->cq_fd, .events = POLLIN },
	};
	struct fid *cq = &fab->cq->fid;
	bool sleep;
	uint64_t v;

	if (w->cq_fd < 0)
		return false;
	/* Counted before the count is read under the lock: progress made
	 * after this either shows in gen below or finds us counted. */
	__atomic_add_fetch(&w->sleepers, 1, __ATOMIC_SEQ_CST);
	pthread_mutex_lock(&fab->lock);
	sleep = !fab->closed && w->gen == seen && fi_trywait(fab->fabric, &cq, 1) == FI_SUCCESS;
	pthread_mutex_unlock(&fab->lock);
	if (sleep && poll(pfd, 2, timeout_ms) > 0 && (pfd[0].revents & POLLIN))
		(void)!read(w->event_fd, &v, sizeof(v));	/* our token */
	__atomic_sub_fetch(&w->sleepers, 1, __ATOMIC_SEQ_CST);
	return true;
}
