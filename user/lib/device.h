/* SPDX-License-Identifier: MIT */
/*
 * Internal: the device's event reader.  read() on the device file consumes
 * events, so one reader per pd_device reads them all and hands each to
 * every subscriber (the fabrics attached to it) and to the application's
 * own queue (pd_device_read_events).  The device also remembers the
 * dma-bufs it exported ({st_dev, st_ino} by export id), which is how a
 * fabric knows which device a registered dma-buf belongs to (its origin).
 */
#ifndef PD_DEVICE_H
#define PD_DEVICE_H

#include <stdint.h>

#include "peerdirect.h"

struct pd_fabric;

/* A pd_device over any fd delivering peerdirect_event records (tests use a
 * SOCK_SEQPACKET socketpair).  pd_device_close closes fd. */
int pd_device_wrap_fd(int fd, unsigned int index, struct pd_device **out);
/* Remember that export_id is the dma-buf open as fd (pd_device_export does
 * this for every export it makes). */
int pd_device_track_export(struct pd_device *dev, int fd, uint64_t export_id);

/* Never 0, unique in the process: the origin tag of the cache's entries. */
uint64_t pd_device_origin(const struct pd_device *dev);

void pd_device_get(struct pd_device *dev);
void pd_device_put(struct pd_device *dev);

/* Subscription: -EEXIST if already subscribed. */
int pd_device_subscribe(struct pd_device *dev, struct pd_fabric *fab);
/* -ENOENT if not subscribed.  The fabric's entries of dev's dma-bufs are
 * invalidated: nothing would report their revocation any more. */
int pd_device_unsubscribe(struct pd_device *dev, struct pd_fabric *fab);

/*
 * Asks the kernel to report the revocation of the dma-buf fd ({st_dev,
 * st_ino}) on dev, for a dma-buf dev did not export (a runtime handed us the
 * fd).  1 if reported from now on (or already), with the record pinned for
 * the caller (pd_device_rec_unpin); 0 if it cannot be (another exporter's
 * dma-buf, a device without subscriptions); -ENOSPC if the module's
 * max_subscriptions is reached, -ENODEV if it is already revoked, another
 * negative errno on failure.
 */
int pd_device_subscribe_dmabuf(struct pd_device *dev, int fd, uint64_t st_dev,
			       uint64_t st_ino);

/* Reads what the device has queued (no wait) and dispatches it. */
void pd_device_dispatch(struct pd_device *dev);

/*
 * Was {st_dev, st_ino} exported by dev?  1 (and *export_id) if so and still
 * valid, with the record pinned for the caller (pd_device_rec_unpin); 0 if
 * dev does not know it, -ENODEV (with a message) if it was revoked or its
 * device is gone.
 */
int pd_device_lookup_export(struct pd_device *dev, uint64_t st_dev, uint64_t st_ino,
			    uint64_t *export_id);

/*
 * A record's users: a pin from the lookup or subscription until the
 * registration is made or has failed (unpin), and one hold per cache entry
 * made (hold, release).  With neither left, a subscription is cancelled in
 * the kernel through fd (the dma-buf, or -1) and its record goes.
 */
void pd_device_rec_unpin(struct pd_device *dev, uint64_t st_dev, uint64_t st_ino, int fd);
void pd_device_rec_hold(struct pd_device *dev, uint64_t st_dev, uint64_t st_ino);
void pd_device_rec_release(struct pd_device *dev, uint64_t st_dev, uint64_t st_ino, int fd);
/* How many dma-bufs the device tracks (exported or subscribed), for tests. */
size_t pd_device_nr_recs(struct pd_device *dev);

#endif
