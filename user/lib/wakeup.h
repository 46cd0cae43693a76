/* SPDX-License-Identifier: MIT */
#ifndef PD_WAKEUP_H
#define PD_WAKEUP_H

#include <stdbool.h>
#include <stdint.h>

/*
 * How a waiter sleeps until its fabric makes progress, instead of
 * spinning or yielding: it blocks in poll() on the completion queue's
 * wait fd (what the provider signals when a completion can be read) and
 * on an eventfd that the library's own threads signal when they settle
 * something without a completion (a copy done, a request freed, a
 * completion another thread read).  A progress count, bumped under the
 * fabric's lock, closes the gap between a waiter's last test and its
 * sleep.
 */
struct pd_wakeup {
	int cq_fd;		/* the CQ's FI_WAIT_FD, or -1 */
	int event_fd;		/* EFD_SEMAPHORE: one token per sleeper woken */
	uint64_t gen;		/* progress so far; written under the fabric lock */
	uint64_t signalled;	/* gen when sleepers were last woken (under lock) */
	unsigned int sleepers;	/* atomic */
	long spin_ns;		/* pd_wait polls this long before it blocks */
	const char *why_not;	/* why waits cannot block (no wait fd), or NULL */
};

struct pd_fabric;

/* After the CQ is open: its wait fd, and our eventfd. */
int pd_wakeup_init(struct pd_fabric *fab, long spin_ns);
void pd_wakeup_fini(struct pd_fabric *fab);
/* Under the fabric's lock: something a waiter may be waiting for happened. */
static inline void pd_wakeup_progress_locked(struct pd_wakeup *w)
{
	__atomic_store_n(&w->gen, w->gen + 1, __ATOMIC_RELEASE);
}
/* Under the fabric's lock, before it is dropped: wakes the sleepers if
 * there was progress since they were last woken. */
void pd_wakeup_signal_locked(struct pd_wakeup *w);
static inline uint64_t pd_wakeup_gen(const struct pd_wakeup *w)
{
	return __atomic_load_n(&w->gen, __ATOMIC_ACQUIRE);
}
/*
 * Sleeps until progress after seen (a pd_wakeup_gen read before the
 * caller's last test), a completion to read, or timeout_ms.  Returns at
 * once when there already is one; false when this fabric cannot block
 * (the caller polls instead).
 */
bool pd_wakeup_block(struct pd_fabric *fab, uint64_t seen, int timeout_ms);
/* Where it cannot: a short sleep, not a yield (see wakeup.c). */
void pd_wakeup_nap(void);

#endif
