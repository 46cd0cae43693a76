/* SPDX-License-Identifier: MIT */
/*
 * Internal: revocation tracking, the one place that knows which dma-bufs a
 * device file reports and who must hear of their revocation.
 *
 * A pd_monitor per device file is the only reader of its events (read()
 * consumes them).  It keeps a record per dma-buf the file exported or
 * subscribed to, hashed by inode and by export id, hands each revocation
 * to every watch attached to it and queues it for the application
 * (pd_device_read_events), signalling an eventfd so that a poller never
 * misses one.
 *
 * A pd_watch per fabric holds the monitors attached to it and calls back
 * into the fabric's cache: the pattern of libfabric's ofi_mem_monitor
 * (subscribe, unsubscribe, notify).  A registration asks the watch which
 * monitor reports its dma-buf (pd_watch_resolve); the cache entry it makes
 * then holds that record (pd_watch_hold) until it is deregistered.
 *
 * Lock order: a monitor's lock (held while events are dispatched, so
 * watches see them in order), then a watch's lock; a monitor's record lock
 * is a leaf, so a callback that releases entries may drop their records.
 */
#ifndef PD_REVOCATION_H
#define PD_REVOCATION_H

#include <stddef.h>
#include <stdint.h>

#include "peerdirect.h"

#define PD_MAX_DEVICES 64

struct pd_monitor;
struct pd_watch;

/* ---- the device side ---- */

/*
 * Takes fd (non-blocking from now on; closed by pd_monitor_close).  release
 * (owner) runs when the last reference goes, so that the owner's memory
 * outlives every watch that still names the monitor.
 */
int pd_monitor_create(int fd, unsigned int index, void (*release)(void *owner),
		      void *owner, struct pd_monitor **out);
/* The file closes: every watch drops its dma-bufs (PD_REASON_CLOSED) and
 * forgets the monitor; the caller's reference goes. */
void pd_monitor_close(struct pd_monitor *m);
/* Never 0, unique in the process: the origin tag of cache entries. */
uint64_t pd_monitor_origin(const struct pd_monitor *m);
/* Remember that export_id is the dma-buf open as fd. */
int pd_monitor_track_export(struct pd_monitor *m, int fd, uint64_t export_id);
/* pd_device_read_events: see peerdirect.h. */
int pd_monitor_read_events(struct pd_monitor *m, struct pd_event *events, size_t size,
			   size_t max, int timeout_ms);
/* Readable while pd_monitor_read_events would return at once. */
int pd_monitor_poll_fd(const struct pd_monitor *m);
/* Records kept (exported or subscribed dma-bufs), for tests. */
size_t pd_monitor_nr_recs(struct pd_monitor *m);

/* ---- the fabric side ---- */

struct pd_watch_ops {
	/* One dma-buf of origin was revoked; returns the entries dropped. */
	unsigned int (*revoked)(void *ctx, uint64_t origin, uint64_t st_dev,
				uint64_t st_ino, uint32_t reason);
	/* Every dma-buf of origin may be (overflow, removal, close, detach). */
	unsigned int (*origin_gone)(void *ctx, uint64_t origin, uint32_t reason);
	/* Idle entries of origin go so that their subscriptions can end. */
	unsigned int (*drop_idle)(void *ctx, uint64_t origin);
	void *ctx;
};

int pd_watch_create(const struct pd_watch_ops *ops, struct pd_watch **out);
/* Detaches every monitor (a fabric's close); destroy does too. */
void pd_watch_detach_all(struct pd_watch *w);
void pd_watch_destroy(struct pd_watch *w);
/* -EEXIST / -ENOENT for a double attach / detach, -EBADF on a closed
 * monitor, -ENOSPC beyond PD_MAX_DEVICES.  Detaching drops the watch's
 * entries of the monitor's dma-bufs (PD_REASON_DETACHED). */
int pd_watch_attach(struct pd_watch *w, struct pd_monitor *m);
int pd_watch_detach(struct pd_watch *w, struct pd_monitor *m);
/* Monitors attached now (a hint, read without a lock). */
unsigned int pd_watch_count(const struct pd_watch *w);
/* Changes whenever a monitor is attached or detached. */
unsigned int pd_watch_generation(const struct pd_watch *w);
/* Dispatches what every attached monitor has queued; returns the entries
 * this watch lost meanwhile (to any thread's dispatch). */
int pd_watch_drain(struct pd_watch *w);

/*
 * Which attached monitor reports {st_dev, st_ino}'s revocation: the one
 * that exported it, else the first attached one, subscribed to it through
 * fd (a runtime handed us a dma-buf exported elsewhere).  *origin is 0
 * (and *watcher NULL) when none can: another exporter's dma-buf.
 * Otherwise *watcher holds a reference and the record is pinned until
 * pd_watch_unpin.  -ENODEV if that export was revoked, -ENOSPC at the
 * module's max_subscriptions.
 */
int pd_watch_resolve(struct pd_watch *w, int fd, uint64_t st_dev, uint64_t st_ino,
		     uint64_t *origin, struct pd_monitor **watcher);
void pd_watch_unpin(struct pd_monitor *watcher, uint64_t st_dev, uint64_t st_ino, int fd);
/* A cache entry's hold on the record (and the monitor), until release;
 * fd is the dma-buf, which the kernel needs to end a subscription. */
void pd_watch_hold(struct pd_monitor *watcher, uint64_t st_dev, uint64_t st_ino);
void pd_watch_release(struct pd_monitor *watcher, uint64_t st_dev, uint64_t st_ino, int fd);

#endif
