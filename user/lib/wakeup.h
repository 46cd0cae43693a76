/* SPDX-License-Identifier: MIT */
#ifndef PD_WAKEUP_H
#define PD_WAKEUP_H

#include <stdbool.h>
#include <stdint.h>

/*
 * How a waiter sleeps until its fabric makes progress, instead of
 * spinning or yielding: it blocks in poll() on the completion queue's
 * wait fd (what the provider signals when a completion can be read) and
 * on an eventfd of its own thread, which whoever makes progress without
 * a completion writes (a completion another thread read, a copy done, a
 * request failed or freed).  A progress count, bumped under the fabric's
 * lock, closes the gap between a waiter's last test and its sleep.
 */
struct pd_sleeper;

struct pd_wakeup {
	int cq_fd;		/* the CQ's FI_WAIT_FD, or -1 */
	uint64_t gen;		/* progress so far; written under the fabric lock */
	struct pd_sleeper *sleepers;	/* under the fabric lock */
	int64_t spin_ns;	/* pd_wait polls this long before it sleeps; <0: always */
};

struct pd_fabric;

/* Under the fabric's lock: something a waiter may be waiting for happened. */
static inline void pd_wakeup_progress_locked(struct pd_wakeup *w)
{
	__atomic_store_n(&w->gen, w->gen + 1, __ATOMIC_RELEASE);
}
/* Under the fabric's lock, before it is dropped: wakes each sleeper that
 * went to sleep before the latest progress. */
void pd_wakeup_signal_locked(struct pd_wakeup *w);
static inline uint64_t pd_wakeup_gen(const struct pd_wakeup *w)
{
	return __atomic_load_n(&w->gen, __ATOMIC_ACQUIRE);
}

enum pd_wake {
	PD_WAKE_AGAIN,		/* progress since seen, or a completion to read: test again */
	PD_WAKE_SLEPT,		/* slept: woken, or timeout_ms passed */
	PD_WAKE_BUSY,		/* fi_trywait kept saying a completion is due: nap */
	PD_WAKE_NO_FD,		/* this fabric has nothing to sleep on: nap */
	PD_WAKE_CLOSED,		/* the fabric was closed */
};
/*
 * Sleeps until progress after seen (a pd_wakeup_gen read before the
 * caller's last test), a completion to read, or timeout_ms, which
 * shrinks to the liveness scan's period and to 10 ms while chunks wait to
 * be posted.  *busy counts the caller's PD_WAKE_AGAINs from fi_trywait in
 * a row: past a few, PD_WAKE_BUSY.
 */
enum pd_wake pd_wakeup_block(struct pd_fabric *fab, uint64_t seen, int timeout_ms,
			     unsigned int *busy);
/* Where it cannot sleep on an event: a short sleep, growing with *naps
 * (reset it when the caller sees progress), not a yield (see wakeup.c). */
void pd_wakeup_nap(unsigned int *naps);

#endif
