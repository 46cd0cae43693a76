// SPDX-License-Identifier: MIT
/*
 * Thin wrapper over uapi/linux/peerdirect.h: copy arguments in, one ioctl,
 * copy results out.  argsz is always sizeof() of the structs we were built
 * with; the kernel accepts any size from the first published one, so a newer
 * module keeps working with this library.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <linux/peerdirect.h>

#include "peerdirect.h"
#include "errors.h"

struct pd_device {
	int fd;
	unsigned int index;
};

_Static_assert(PD_REASON_OVERFLOW == PEERDIRECT_REASON_OVERFLOW,
	       "event reasons mirror the uapi");

static int dev_ioctl(struct pd_device *dev, unsigned long cmd, void *arg,
		     const char *what)
{
	if (!dev)
		return pd_error(-EINVAL, "%s: device is NULL", what);
	if (ioctl(dev->fd, cmd, arg) < 0)
		return pd_error(-errno, "%s on /dev/peerdirect%u: %s", what,
				dev->index, strerror(errno));
	return 0;
}

int pd_device_open(unsigned int index, struct pd_device **out)
{
	struct pd_device *dev;
	char path[64];
	int fd;

	if (!out)
		return pd_error(-EINVAL, "pd_device_open: out is NULL");
	snprintf(path, sizeof(path), "/dev/peerdirect%u", index);
	/* Non-blocking so a read after poll() never stalls when another thread
	 * drained the queue first. */
	fd = open(path, O_RDWR | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return pd_error(-errno, "open %s: %s%s", path, strerror(errno),
				errno == ENOENT ? " (is the peerdirect module loaded?)" : "");
	dev = calloc(1, sizeof(*dev));
	if (!dev) {
		close(fd);
		return pd_error(-ENOMEM, "pd_device_open: out of memory");
	}
	dev->fd = fd;
	dev->index = index;
	*out = dev;
	return 0;
}

void pd_device_close(struct pd_device *dev)
{
	if (!dev)
		return;
	close(dev->fd);
	free(dev);
}

int pd_device_fd(const struct pd_device *dev)
{
	return dev ? dev->fd : pd_error(-EINVAL, "pd_device_fd: device is NULL");
}

int pd_device_query(struct pd_device *dev, struct pd_device_info *info)
{
	struct peerdirect_query q = { .argsz = sizeof(q) };
	int ret;

	if (!info)
		return pd_error(-EINVAL, "pd_device_query: info is NULL");
	ret = dev_ioctl(dev, PEERDIRECT_IOCTL_QUERY, &q, "PEERDIRECT_IOCTL_QUERY");
	if (ret)
		return ret;
	*info = (struct pd_device_info) {
		.abi_major = q.abi_major, .abi_minor = q.abi_minor,
		.features = q.features, .backend = q.backend, .index = q.index,
		.mem_size = q.mem_size, .mem_free = q.mem_free,
		.page_size = q.page_size, .quota = q.quota,
		.quota_used = q.quota_used, .max_exports = q.max_exports,
		.max_events = q.max_events,
	};
	return 0;
}

int pd_device_alloc(struct pd_device *dev, uint64_t size, uint64_t *handle,
		    uint64_t *alloc_size)
{
	struct peerdirect_alloc a = { .argsz = sizeof(a), .size = size };
	int ret;

	if (!handle || !size)
		return pd_error(-EINVAL, "pd_device_alloc: %s",
				!handle ? "handle is NULL" : "size is 0");
	ret = dev_ioctl(dev, PEERDIRECT_IOCTL_ALLOC, &a, "PEERDIRECT_IOCTL_ALLOC");
	if (ret)
		return ret;
	*handle = a.handle;
	if (alloc_size)
		*alloc_size = a.alloc_size;
	return 0;
}

int pd_device_free(struct pd_device *dev, uint64_t handle)
{
	struct peerdirect_free f = { .argsz = sizeof(f), .handle = handle };

	return dev_ioctl(dev, PEERDIRECT_IOCTL_FREE, &f, "PEERDIRECT_IOCTL_FREE");
}

int pd_device_export(struct pd_device *dev, uint64_t handle, uint64_t offset,
		     uint64_t length, unsigned int flags,
		     struct pd_export_info *out)
{
	struct peerdirect_export e = {
		.argsz = sizeof(e), .handle = handle, .offset = offset,
		.length = length,
	};
	int ret;

	if (!out || (flags & ~(PD_EXPORT_RDWR | PD_EXPORT_CLOEXEC)))
		return pd_error(-EINVAL, "pd_device_export: %s",
				!out ? "out is NULL" : "unknown flags");
	if (flags & PD_EXPORT_RDWR)
		e.flags |= PEERDIRECT_EXPORT_RDWR;
	if (flags & PD_EXPORT_CLOEXEC)
		e.flags |= PEERDIRECT_EXPORT_CLOEXEC;
	ret = dev_ioctl(dev, PEERDIRECT_IOCTL_EXPORT, &e, "PEERDIRECT_IOCTL_EXPORT");
	if (ret)
		return ret;
	*out = (struct pd_export_info) {
		.fd = e.fd, .export_id = e.export_id, .inode = e.inode,
	};
	return 0;
}

int pd_device_revoke(struct pd_device *dev, unsigned int scope, uint64_t id,
		     uint32_t *revoked, uint32_t *pending)
{
	struct peerdirect_revoke r = { .argsz = sizeof(r) };
	int ret;

	if (scope == PD_REVOKE_ALLOC) {
		r.flags = PEERDIRECT_REVOKE_ALLOC;
		r.handle = id;
	} else if (scope == PD_REVOKE_EXPORT) {
		r.flags = PEERDIRECT_REVOKE_EXPORT;
		r.export_id = id;
	} else {
		return pd_error(-EINVAL, "pd_device_revoke: scope must be exactly one of PD_REVOKE_ALLOC, PD_REVOKE_EXPORT");
	}
	ret = dev_ioctl(dev, PEERDIRECT_IOCTL_REVOKE, &r, "PEERDIRECT_IOCTL_REVOKE");
	if (ret)
		return ret;
	if (revoked)
		*revoked = r.revoked;
	if (pending)
		*pending = r.pending;
	return 0;
}

int pd_device_read_events(struct pd_device *dev, struct pd_event *events,
			  size_t max, int timeout_ms)
{
	/* Records are read whole; a newer kernel may send longer ones, so walk
	 * by the size each record carries. */
	unsigned char buf[16 * 2 * sizeof(struct peerdirect_event)];
	struct pollfd pfd;
	size_t n = 0, pos = 0;
	ssize_t got;
	int ret;

	if (!dev || !events || !max)
		return pd_error(-EINVAL, "pd_device_read_events: %s",
				!dev ? "device is NULL" : !events ? "events is NULL" : "max is 0");
	pfd = (struct pollfd) { .fd = dev->fd, .events = POLLIN };
	ret = poll(&pfd, 1, timeout_ms);
	if (ret < 0)
		return pd_error(-errno, "poll /dev/peerdirect%u: %s", dev->index,
				strerror(errno));
	if (ret == 0)
		return 0;
	if (max > 16)
		max = 16;
	got = read(dev->fd, buf, max * sizeof(struct peerdirect_event));
	if (got < 0) {
		if (errno == EAGAIN)
			return 0;
		return pd_error(-errno, "read events from /dev/peerdirect%u: %s",
				dev->index, strerror(errno));
	}
	while (n < max && pos + sizeof(struct peerdirect_event) <= (size_t)got) {
		struct peerdirect_event k;

		memcpy(&k, buf + pos, sizeof(k));
		if (k.size < sizeof(k))
			return pd_error(-EPROTO, "event record of %u bytes is shorter than %zu",
					k.size, sizeof(k));
		events[n++] = (struct pd_event) {
			.reason = k.reason, .seq = k.seq, .export_id = k.export_id,
			.handle = k.handle, .inode = k.inode, .offset = k.offset,
			.length = k.length,
		};
		pos += k.size;
	}
	return (int)n;
}
