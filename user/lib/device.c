// SPDX-License-Identifier: MIT
/*
 * Thin wrapper over uapi/linux/peerdirect.h: copy arguments in, one ioctl,
 * copy results out.  argsz is always sizeof() of the structs we were built
 * with; the kernel accepts any size from the first published one, so a newer
 * module keeps working with this library.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <linux/peerdirect.h>

#include "peerdirect.h"
#include "abi.h"
#include "device.h"
#include "errors.h"
#include "fork.h"
#include "revocation.h"

struct pd_device {
	int fd;
	unsigned int index;
	bool closed;
	unsigned int fork_gen;		/* pd_fork_gen() when opened */
	/* Owns fd's events and the records of what it exported; frees this
	 * device with its last reference (a fabric may still name it). */
	struct pd_monitor *mon;
};

static int dev_ioctl(struct pd_device *dev, unsigned long cmd, void *arg,
		     const char *what)
{
	if (!dev)
		return pd_error(-EINVAL, "%s: device is NULL", what);
	if (dev->closed)
		return pd_error(-EBADF, "%s: device %u was closed", what, dev->index);
	if (pd_forked_since(dev->fork_gen))
		return pd_fork_refuse(what);
	if (ioctl(dev->fd, cmd, arg) < 0)
		return pd_error(-errno, "%s on /dev/peerdirect%u: %s", what,
				dev->index, strerror(errno));
	return 0;
}

static void device_free(void *dev)
{
	free(dev);
}

int pd_device_wrap_fd(int fd, unsigned int index, struct pd_device **out)
{
	struct pd_device *dev;
	int ret;

	if (fd < 0 || !out)
		return pd_error(-EINVAL, "pd_device_wrap_fd: %s", fd < 0 ? "bad fd" : "out is NULL");
	dev = calloc(1, sizeof(*dev));
	if (!dev)
		return pd_error(-ENOMEM, "pd_device_open: out of memory");
	ret = pd_monitor_create(fd, index, device_free, dev, &dev->mon);
	if (ret) {
		free(dev);
		return ret;
	}
	dev->fd = fd;
	dev->index = index;
	dev->fork_gen = pd_fork_gen();
	*out = dev;
	return 0;
}

/*
 * The module's uapi major must be ours.  A module of uapi 1 matched
 * commands by number alone, and answers this library's (sizeless) commands
 * with ENOTTY.
 */
static int check_abi(struct pd_device *dev, const char *path)
{
	struct peerdirect_query q = { .argsz = sizeof(q) };

	if (ioctl(dev->fd, PEERDIRECT_IOCTL_QUERY, &q))
		return pd_error(errno == ENOTTY ? -EPROTO : -errno,
				"%s: PEERDIRECT_IOCTL_QUERY: %s%s", path, strerror(errno),
				errno == ENOTTY ? " (the loaded module predates uapi 2;"
				" install the module that came with this library)" : "");
	if (q.abi_major != PEERDIRECT_ABI_MAJOR)
		return pd_error(-EPROTO, "%s: the module speaks uapi %u.%u, this library %u.%u",
				path, q.abi_major, q.abi_minor, PEERDIRECT_ABI_MAJOR,
				PEERDIRECT_ABI_MINOR);
	return 0;
}

int pd_device_open(unsigned int index, struct pd_device **out)
{
	char path[64];
	int fd, ret;

	if (!out)
		return pd_error(-EINVAL, "pd_device_open: out is NULL");
	snprintf(path, sizeof(path), "/dev/peerdirect%u", index);
	fd = open(path, O_RDWR | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return pd_error(-errno, "open %s: %s%s", path, strerror(errno),
				errno == ENOENT ? " (is the peerdirect module loaded?)" : "");
	ret = pd_device_wrap_fd(fd, index, out);
	if (ret) {
		close(fd);
		return ret;
	}
	ret = check_abi(*out, path);
	if (ret) {
		pd_device_close(*out);
		*out = NULL;
	}
	return ret;
}

struct pd_monitor *pd_device_monitor(const struct pd_device *dev)
{
	return dev->mon;
}

/*
 * The file goes, and with it (in the kernel) every allocation and export it
 * owned: the attached fabrics drop this device's dma-bufs and forget it.
 */
void pd_device_close(struct pd_device *dev)
{
	/* A forked child's copy: its fds are closed already, and its
	 * fabrics are the parent's. */
	if (!dev || pd_forked_since(dev->fork_gen))
		return;
	dev->closed = true;
	pd_monitor_close(dev->mon);
}

bool pd_device_forked(const struct pd_device *dev)
{
	return pd_forked_since(dev->fork_gen);
}

int pd_device_track_export(struct pd_device *dev, int fd, uint64_t export_id)
{
	if (!dev)
		return pd_error(-EINVAL, "pd_device_track_export: device is NULL");
	return pd_monitor_track_export(dev->mon, fd, export_id);
}

size_t pd_device_nr_recs(struct pd_device *dev)
{
	return pd_monitor_nr_recs(dev->mon);
}

/* Readable whenever pd_device_read_events would return at once: the
 * kernel's queue and the one the library's reader filled, polled as one. */
int pd_device_fd(const struct pd_device *dev)
{
	if (!dev)
		return pd_error(-EINVAL, "pd_device_fd: device is NULL");
	return pd_forked_since(dev->fork_gen) ? pd_fork_refuse("pd_device_fd") :
						 pd_monitor_poll_fd(dev->mon);
}

int pd_device_query_sz(struct pd_device *dev, struct pd_device_info *out,
		       size_t size, size_t *filled)
{
	struct peerdirect_query q = { .argsz = sizeof(q) };
	struct pd_device_info info;
	int ret;

	if (!out)
		return pd_error(-EINVAL, "pd_device_query: info is NULL");
	ret = dev_ioctl(dev, PEERDIRECT_IOCTL_QUERY, &q, "PEERDIRECT_IOCTL_QUERY");
	if (ret)
		return ret;
	info = (struct pd_device_info) {
		.abi_major = q.abi_major, .abi_minor = q.abi_minor,
		.features = q.features, .backend = q.backend, .index = q.index,
		.mem_size = q.mem_size, .mem_free = q.mem_free,
		.page_size = q.page_size, .quota = q.quota,
		.quota_used = q.quota_used, .max_exports = q.max_exports,
		.max_events = q.max_events,
	};
	return pd_copy_out("pd_device_query", out, size, &info, sizeof(info),
			   PD_DEVICE_INFO_SIZE_1_0, filled);
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

int pd_device_export_sz(struct pd_device *dev, uint64_t handle, uint64_t offset,
			uint64_t length, unsigned int flags,
			struct pd_export_info *out, size_t size, size_t *filled)
{
	struct pd_export_info info;
	struct peerdirect_export e = {
		.argsz = sizeof(e), .handle = handle, .offset = offset,
		.length = length,
	};
	int ret;

	if (!out || (flags & ~(PD_EXPORT_RDWR | PD_EXPORT_CLOEXEC)) ||
	    size < PD_EXPORT_INFO_SIZE_1_0)
		return pd_error(-EINVAL, "pd_device_export: %s",
				!out ? "out is NULL" : size < PD_EXPORT_INFO_SIZE_1_0 ?
				"struct size below the 1.0 layout" : "unknown flags");
	if (flags & PD_EXPORT_RDWR)
		e.flags |= PEERDIRECT_EXPORT_RDWR;
	if (flags & PD_EXPORT_CLOEXEC)
		e.flags |= PEERDIRECT_EXPORT_CLOEXEC;
	ret = dev_ioctl(dev, PEERDIRECT_IOCTL_EXPORT, &e, "PEERDIRECT_IOCTL_EXPORT");
	if (ret)
		return ret;
	/* Its events name the export: remember which inode that is. */
	ret = pd_device_track_export(dev, e.fd, e.export_id);
	if (ret) {
		close(e.fd);
		return ret;
	}
	info = (struct pd_export_info) {
		.fd = e.fd, .export_id = e.export_id, .inode = e.inode,
	};
	return pd_copy_out("pd_device_export", out, size, &info, sizeof(info),
			   PD_EXPORT_INFO_SIZE_1_0, filled);
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

int pd_device_read_events_sz(struct pd_device *dev, struct pd_event *events,
			     size_t size, size_t max, int timeout_ms)
{
	if (!dev || !events || !max || size < PD_EVENT_SIZE_1_0)
		return pd_error(-EINVAL, "pd_device_read_events: %s",
				!dev ? "device is NULL" : !events ? "events is NULL" :
				!max ? "max is 0" : "record size below the 1.0 layout");
	if (pd_forked_since(dev->fork_gen))
		return pd_fork_refuse("pd_device_read_events");
	return pd_monitor_read_events(dev->mon, events, size, max, timeout_ms);
}
