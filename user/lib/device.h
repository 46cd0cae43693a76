/* SPDX-License-Identifier: MIT */
/*
 * Internal: the device file.  device.c wraps the ioctls; what the file
 * reports about revocations (its events, the records of what it exported)
 * belongs to its monitor (revocation.h).
 */
#ifndef PD_DEVICE_H
#define PD_DEVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "peerdirect.h"

struct pd_monitor;

/* A pd_device over any fd delivering peerdirect_event records (tests use a
 * SOCK_SEQPACKET socketpair).  pd_device_close closes fd. */
int pd_device_wrap_fd(int fd, unsigned int index, struct pd_device **out);
/* Remember that export_id is the dma-buf open as fd (pd_device_export does
 * this for every export it makes). */
int pd_device_track_export(struct pd_device *dev, int fd, uint64_t export_id);
struct pd_monitor *pd_device_monitor(const struct pd_device *dev);
/* Made before a fork this process is a child of. */
bool pd_device_forked(const struct pd_device *dev);
/* How many dma-bufs the device tracks (exported or subscribed), for tests. */
size_t pd_device_nr_recs(struct pd_device *dev);

#endif
