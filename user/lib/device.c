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
#include <pthread.h>
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
#include "fabric.h"

#define APP_QUEUE_MAX	1024

/*
 * A dma-buf this handle exported, or (subscribed) one it only holds, whose
 * revocation the kernel reports here through PEERDIRECT_IOCTL_SUBSCRIBE.
 * Export ids are per exporting device, so subscribed records are matched
 * by inode.  A record lives while registrations use it: uses counts those
 * being made (pd_fabric_origin_of to pd_fabric_origin_unpin), entries the
 * cache entries made (pd_device_rec_hold to pd_device_rec_release).  When
 * both reach 0 a subscription is cancelled in the kernel (the kernel's
 * max_subscriptions counts live ones) and the record goes; so does an
 * export's record once it is revoked.
 */
struct export_rec {
	uint64_t export_id, st_dev, st_ino;
	unsigned int uses, entries;
	bool revoked, subscribed;
};

struct pd_device {
	int fd;
	unsigned int index;
	uint64_t origin;
	unsigned int refs;		/* atomic: the caller's, each subscriber's, readers' */
	/* Everything below is under lock, which is held while events are
	 * read and dispatched, so subscribers see them in order. */
	pthread_mutex_t lock;
	bool gone, closed;
	struct pd_fabric **subs;
	size_t nsubs, subs_cap;
	/* The records, under recs_lock: a leaf, taken inside lock too, so a
	 * registration released while events are dispatched can drop its
	 * record. */
	pthread_mutex_t recs_lock;
	struct export_rec *exports;
	size_t nexports, exports_cap;
	/* Events for pd_device_read_events, oldest first. */
	struct pd_event *appq;
	size_t app_head, app_count;
	bool app_lost;
};

_Static_assert(PD_REASON_OVERFLOW == PEERDIRECT_REASON_OVERFLOW,
	       "event reasons mirror the uapi");

static uint64_t next_origin(void)
{
	static uint64_t origin;

	return __atomic_add_fetch(&origin, 1, __ATOMIC_RELAXED);
}

static int dev_ioctl(struct pd_device *dev, unsigned long cmd, void *arg,
		     const char *what)
{
	if (!dev)
		return pd_error(-EINVAL, "%s: device is NULL", what);
	if (dev->closed)
		return pd_error(-EBADF, "%s: device %u was closed", what, dev->index);
	if (ioctl(dev->fd, cmd, arg) < 0)
		return pd_error(-errno, "%s on /dev/peerdirect%u: %s", what,
				dev->index, strerror(errno));
	return 0;
}

int pd_device_wrap_fd(int fd, unsigned int index, struct pd_device **out)
{
	struct pd_device *dev;

	if (fd < 0 || !out)
		return pd_error(-EINVAL, "pd_device_wrap_fd: %s", fd < 0 ? "bad fd" : "out is NULL");
	dev = calloc(1, sizeof(*dev));
	if (dev)
		dev->appq = calloc(APP_QUEUE_MAX, sizeof(*dev->appq));
	if (!dev || !dev->appq) {
		free(dev);
		return pd_error(-ENOMEM, "pd_device_open: out of memory");
	}
	/* Non-blocking: the reader drains with read() until EAGAIN. */
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	pthread_mutex_init(&dev->lock, NULL);
	pthread_mutex_init(&dev->recs_lock, NULL);
	dev->fd = fd;
	dev->index = index;
	dev->origin = next_origin();
	dev->refs = 1;
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

void pd_device_get(struct pd_device *dev)
{
	__atomic_add_fetch(&dev->refs, 1, __ATOMIC_RELAXED);
}

void pd_device_put(struct pd_device *dev)
{
	if (__atomic_sub_fetch(&dev->refs, 1, __ATOMIC_ACQ_REL))
		return;
	pthread_mutex_destroy(&dev->lock);
	pthread_mutex_destroy(&dev->recs_lock);
	free(dev->subs);
	free(dev->exports);
	free(dev->appq);
	free(dev);
}

uint64_t pd_device_origin(const struct pd_device *dev)
{
	return dev->origin;
}

/*
 * The file goes, and with it (in the kernel) every allocation and export it
 * owned: the subscribers drop this device's dma-bufs and forget it.  The
 * memory stays until the last reference (a fabric's poll in flight) goes.
 */
void pd_device_close(struct pd_device *dev)
{
	size_t i;

	if (!dev)
		return;
	pthread_mutex_lock(&dev->lock);
	dev->closed = true;
	for (i = 0; i < dev->nsubs; i++) {
		pd_fabric_origin_gone(dev->subs[i], dev->origin, PD_REASON_CLOSED);
		pd_fabric_forget_device(dev->subs[i], dev);
		pd_device_put(dev);	/* the subscription's reference */
	}
	dev->nsubs = 0;
	/* Records' users send SUBSCRIBE on dev->fd under recs_lock. */
	pthread_mutex_lock(&dev->recs_lock);
	close(dev->fd);
	dev->fd = -1;
	pthread_mutex_unlock(&dev->recs_lock);
	pthread_mutex_unlock(&dev->lock);
	pd_device_put(dev);
}

int pd_device_subscribe(struct pd_device *dev, struct pd_fabric *fab)
{
	struct pd_fabric **subs;
	size_t i;
	int ret = 0;

	pthread_mutex_lock(&dev->lock);
	for (i = 0; i < dev->nsubs; i++) {
		if (dev->subs[i] == fab)
			ret = pd_error(-EEXIST, "pd_fabric_attach_device: device %u is already attached",
				       dev->index);
	}
	if (!ret && dev->closed)
		ret = pd_error(-EBADF, "pd_fabric_attach_device: device %u was closed", dev->index);
	if (!ret && dev->nsubs == dev->subs_cap) {
		subs = realloc(dev->subs, (dev->subs_cap * 2 + 4) * sizeof(*subs));
		if (!subs)
			ret = pd_error(-ENOMEM, "pd_fabric_attach_device: out of memory");
		else
			dev->subs = subs, dev->subs_cap = dev->subs_cap * 2 + 4;
	}
	if (!ret)
		ret = pd_fabric_remember_device(fab, dev);
	if (!ret) {
		dev->subs[dev->nsubs++] = fab;
		pd_device_get(dev);
	}
	pthread_mutex_unlock(&dev->lock);
	return ret;
}

int pd_device_unsubscribe(struct pd_device *dev, struct pd_fabric *fab)
{
	size_t i;

	pthread_mutex_lock(&dev->lock);
	for (i = 0; i < dev->nsubs && dev->subs[i] != fab; i++)
		;
	if (i == dev->nsubs) {
		pthread_mutex_unlock(&dev->lock);
		return pd_error(-ENOENT, "pd_fabric_detach_device: device %u is not attached",
				dev->index);
	}
	dev->subs[i] = dev->subs[--dev->nsubs];
	pd_fabric_origin_gone(fab, dev->origin, PD_REASON_DETACHED);
	pd_fabric_forget_device(fab, dev);
	pthread_mutex_unlock(&dev->lock);
	pd_device_put(dev);
	return 0;
}

static struct export_rec *find_export(struct pd_device *dev, uint64_t export_id)
{
	size_t i;

	for (i = 0; i < dev->nexports; i++) {
		if (!dev->exports[i].subscribed && dev->exports[i].export_id == export_id)
			return &dev->exports[i];
	}
	return NULL;
}

/* st_dev ANY_DEV: an event, which names the inode only (every dma-buf
 * lives on the one dma-buf filesystem, so the inode is enough there). */
#define ANY_DEV UINT64_MAX

static struct export_rec *find_subscribed(struct pd_device *dev, uint64_t st_dev,
					  uint64_t st_ino)
{
	size_t i;

	for (i = 0; i < dev->nexports; i++) {
		if (dev->exports[i].subscribed && dev->exports[i].st_ino == st_ino &&
		    (st_dev == ANY_DEV || dev->exports[i].st_dev == st_dev))
			return &dev->exports[i];
	}
	return NULL;
}

static struct export_rec *new_rec_locked(struct pd_device *dev)
{
	struct export_rec *rec;
	size_t i;

	/* Revoked records nothing uses go before the array grows: a process
	 * that exports and frees for weeks keeps only what it still uses. */
	for (i = 0; dev->nexports == dev->exports_cap && i < dev->nexports;) {
		rec = &dev->exports[i];
		if (rec->revoked && !rec->uses && !rec->entries)
			*rec = dev->exports[--dev->nexports];
		else
			i++;
	}
	if (dev->nexports == dev->exports_cap) {
		rec = realloc(dev->exports, (dev->exports_cap * 2 + 16) * sizeof(*rec));
		if (!rec)
			return NULL;
		dev->exports = rec;
		dev->exports_cap = dev->exports_cap * 2 + 16;
	}
	return &dev->exports[dev->nexports++];
}

int pd_device_track_export(struct pd_device *dev, int fd, uint64_t export_id)
{
	struct export_rec *rec;
	struct stat st;
	int ret = 0;

	if (!dev || fstat(fd, &st))
		return pd_error(dev ? -errno : -EINVAL, "pd_device_track_export: %s",
				dev ? strerror(errno) : "device is NULL");
	pthread_mutex_lock(&dev->recs_lock);
	rec = find_export(dev, export_id);
	if (!rec)
		rec = new_rec_locked(dev);
	if (rec)
		*rec = (struct export_rec) { .export_id = export_id, .st_dev = st.st_dev,
					     .st_ino = st.st_ino };
	else
		ret = pd_error(-ENOMEM, "pd_device_track_export: out of memory");
	pthread_mutex_unlock(&dev->recs_lock);
	return ret;
}

int pd_device_lookup_export(struct pd_device *dev, uint64_t st_dev, uint64_t st_ino,
			    uint64_t *export_id)
{
	size_t i;
	int ret = 0;

	pthread_mutex_lock(&dev->recs_lock);
	for (i = 0; i < dev->nexports; i++) {
		struct export_rec *r = &dev->exports[i];

		if (r->st_dev != st_dev || r->st_ino != st_ino)
			continue;
		*export_id = r->export_id;
		ret = 1;
		if (!r->revoked)
			r->uses++;
		if (r->revoked)
			ret = pd_error(-ENODEV, "dma-buf inode %llu (export %llu of /dev/peerdirect%u) was revoked, or its device went: re-export and register again",
				       (unsigned long long)st_ino, (unsigned long long)r->export_id,
				       dev->index);
		break;
	}
	pthread_mutex_unlock(&dev->recs_lock);
	return ret;
}

/*
 * Ends this file's subscription to the dma-buf fd.  Silent: it runs where a
 * registration is released, which reports nothing, and a subscription it
 * cannot end (already ended by a revocation, ENOENT; the device closed)
 * ends with the dma-buf or the file anyway.
 */
static void cancel_subscription(struct pd_device *dev, int fd)
{
	struct peerdirect_subscribe s = {
		.argsz = sizeof(s), .flags = PEERDIRECT_SUBSCRIBE_CANCEL, .fd = fd,
	};
	int saved = errno;

	(void)ioctl(dev->fd, PEERDIRECT_IOCTL_SUBSCRIBE, &s);
	errno = saved;
}

int pd_device_subscribe_dmabuf(struct pd_device *dev, int fd, uint64_t st_dev,
			       uint64_t st_ino)
{
	struct peerdirect_subscribe s = {
		.argsz = sizeof(s), .fd = fd, .cookie = st_ino,
	};
	struct export_rec *rec;
	int ret = 1;

	pthread_mutex_lock(&dev->recs_lock);
	rec = find_subscribed(dev, st_dev, st_ino);
	if (rec) {
		rec->uses++;
		goto out;
	}
	if (ioctl(dev->fd, PEERDIRECT_IOCTL_SUBSCRIBE, &s) && errno != EEXIST) {
		/* EEXIST: this file is subscribed already (a record dropped
		 * without its cancel): it reports, so it is ours again. */
		/* Another exporter's, a device without subscriptions (or a
		 * stand-in fd): nothing will report this dma-buf's revocation. */
		if (errno == EINVAL || errno == ENOTTY)
			ret = 0;
		else if (errno == ENOSPC)
			/* Registering it anyway would leave a revocation
			 * unreported: stale bytes, or SIGBUS on the mapping. */
			ret = pd_error(-ENOSPC, "subscribe to dma-buf inode %llu on /dev/peerdirect%u: this open device file already watches the module's max_subscriptions dma-bufs (the limit counts those registered now): its revocation could not be reported, so it is not registered; deregister others, or raise the peerdirect module parameter max_subscriptions",
				       (unsigned long long)st_ino, dev->index);
		else
			ret = pd_error(-errno, "subscribe to dma-buf inode %llu on /dev/peerdirect%u: %s%s",
				       (unsigned long long)st_ino, dev->index, strerror(errno),
				       errno == ENODEV ? " (it was revoked: re-export and register again)" : "");
		goto out;
	}
	rec = new_rec_locked(dev);
	if (!rec) {
		cancel_subscription(dev, fd);
		ret = pd_error(-ENOMEM, "subscribe to dma-buf inode %llu: out of memory",
			       (unsigned long long)st_ino);
		goto out;
	}
	*rec = (struct export_rec) { .export_id = s.export_id, .st_dev = st_dev,
				     .st_ino = st_ino, .subscribed = true, .uses = 1 };
out:
	pthread_mutex_unlock(&dev->recs_lock);
	return ret;
}

static struct export_rec *find_rec(struct pd_device *dev, uint64_t st_dev, uint64_t st_ino)
{
	size_t i;

	for (i = 0; i < dev->nexports; i++)
		if (dev->exports[i].st_dev == st_dev && dev->exports[i].st_ino == st_ino)
			return &dev->exports[i];
	return NULL;
}

/* Drops rec if nothing uses it any more; fd (or -1) is the dma-buf, which
 * the kernel needs to cancel a subscription. */
static void rec_maybe_drop_locked(struct pd_device *dev, struct export_rec *rec, int fd)
{
	/* An export's record stays after its revocation, to refuse a late
	 * registration by name; new_rec_locked sweeps those. */
	if (rec->uses || rec->entries || !rec->subscribed)
		return;
	/* A revoked one ended in the kernel (ENOENT then), but one marked
	 * revoked by an overflow or a bad record may still be live. */
	if (fd >= 0)
		cancel_subscription(dev, fd);
	*rec = dev->exports[--dev->nexports];
}

/* One use of the record goes (a pin, or an entry's hold). */
static void rec_put(struct pd_device *dev, uint64_t st_dev, uint64_t st_ino, int fd,
		    bool entry)
{
	struct export_rec *rec;
	unsigned int *count;

	pthread_mutex_lock(&dev->recs_lock);
	rec = find_rec(dev, st_dev, st_ino);
	count = !rec ? NULL : entry ? &rec->entries : &rec->uses;
	if (count && *count) {
		(*count)--;
		rec_maybe_drop_locked(dev, rec, fd);
	}
	pthread_mutex_unlock(&dev->recs_lock);
}

void pd_device_rec_unpin(struct pd_device *dev, uint64_t st_dev, uint64_t st_ino, int fd)
{
	rec_put(dev, st_dev, st_ino, fd, false);
}

void pd_device_rec_hold(struct pd_device *dev, uint64_t st_dev, uint64_t st_ino)
{
	struct export_rec *rec;

	pthread_mutex_lock(&dev->recs_lock);
	rec = find_rec(dev, st_dev, st_ino);
	if (rec)
		rec->entries++;
	pthread_mutex_unlock(&dev->recs_lock);
}

void pd_device_rec_release(struct pd_device *dev, uint64_t st_dev, uint64_t st_ino, int fd)
{
	rec_put(dev, st_dev, st_ino, fd, true);
}

size_t pd_device_nr_recs(struct pd_device *dev)
{
	size_t n;

	pthread_mutex_lock(&dev->recs_lock);
	n = dev->nexports;
	pthread_mutex_unlock(&dev->recs_lock);
	return n;
}

static void app_queue_locked(struct pd_device *dev, const struct pd_event *ev)
{
	if (dev->app_count == APP_QUEUE_MAX) {
		/* The oldest goes; the application learns it lost some. */
		dev->app_head = (dev->app_head + 1) % APP_QUEUE_MAX;
		dev->app_count--;
		dev->app_lost = true;
	}
	dev->appq[(dev->app_head + dev->app_count) % APP_QUEUE_MAX] = *ev;
	dev->app_count++;
}

/* Every export of the device is revoked, or may be: all subscribers drop
 * its dma-bufs, and registering one of them again is refused. */
static void origin_gone_locked(struct pd_device *dev, uint32_t reason)
{
	size_t i;

	pthread_mutex_lock(&dev->recs_lock);
	for (i = 0; i < dev->nexports; i++)
		dev->exports[i].revoked = true;
	pthread_mutex_unlock(&dev->recs_lock);
	for (i = 0; i < dev->nsubs; i++)
		pd_fabric_origin_gone(dev->subs[i], dev->origin, reason);
}

static void handle_event_locked(struct pd_device *dev, const struct pd_event *ev,
				uint32_t flags)
{
	uint64_t st_dev = 0, st_ino = 0;
	struct export_rec *rec;
	size_t i;

	app_queue_locked(dev, ev);
	if (ev->reason == PD_REASON_OVERFLOW || (!ev->export_id && !ev->inode)) {
		origin_gone_locked(dev, ev->reason);
		return;
	}
	pthread_mutex_lock(&dev->recs_lock);
	rec = flags & PEERDIRECT_EVENT_SUBSCRIBED ? find_subscribed(dev, ANY_DEV, ev->inode) :
						    find_export(dev, ev->export_id);
	if (rec) {
		rec->revoked = true;
		st_dev = rec->st_dev;
		st_ino = rec->st_ino;
	}
	pthread_mutex_unlock(&dev->recs_lock);
	/* Not exported through this handle: no registration can have it as
	 * its origin, so there is nothing to invalidate.  The invalidation
	 * may release entries, which drop their records: not under recs_lock. */
	if (!rec)
		return;
	for (i = 0; i < dev->nsubs; i++)
		pd_fabric_revoked(dev->subs[i], dev->origin, st_dev, st_ino, ev->reason);
}

/*
 * A record whose size cannot be right: where the next one starts is
 * unknown, so whatever followed it in this read is lost.  That is an
 * overflow in all but name: every subscriber drops this device's dma-bufs
 * and the application is told it missed events.
 */
static void lost_framing_locked(struct pd_device *dev, unsigned int length, size_t left,
				size_t least)
{
	struct pd_event ev = { .reason = PD_REASON_OVERFLOW };

	pd_error(-EPROTO, "/dev/peerdirect%u: event record of %u bytes (%zu left in the read, %zu the least): treated as an overflow",
		 dev->index, length, left, least);
	handle_event_locked(dev, &ev, 0);
}

/* Reads everything queued on the file and hands it out.  Under lock. */
static int dispatch_locked(struct pd_device *dev)
{
	/* Records are read whole.  Each starts with {type, length}: a newer
	 * kernel may send longer records or types we do not know, which are
	 * skipped by their length. */
	unsigned char buf[16 * 2 * sizeof(struct peerdirect_event)];
	size_t pos;
	ssize_t got;

	if (dev->closed || dev->gone)
		return 0;
	for (;;) {
		got = read(dev->fd, buf, 16 * sizeof(struct peerdirect_event));
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0 && errno == EAGAIN)
			return 0;
		/* ENODEV after removal; end of file on a stand-in whose writer
		 * went: nothing the device exported is valid any more. */
		if ((got < 0 && errno == ENODEV) || got == 0) {
			dev->gone = true;
			origin_gone_locked(dev, PD_REASON_UNPLUG);
			return 0;
		}
		if (got < 0)
			return pd_error(-errno, "read events from /dev/peerdirect%u: %s",
					dev->index, strerror(errno));
		for (pos = 0; pos + sizeof(struct peerdirect_event_header) <= (size_t)got;) {
			struct peerdirect_event_header h;
			struct peerdirect_event k;
			struct pd_event ev;

			/* A record we cannot frame may have hidden a revoke:
			 * everything it could name is suspect, so it counts as
			 * an overflow and the records after it are skipped
			 * rather than misread. */
			memcpy(&h, buf + pos, sizeof(h));
			if (h.length < sizeof(h) || h.length > (size_t)got - pos) {
				lost_framing_locked(dev, h.length, (size_t)got - pos, sizeof(h));
				break;
			}
			if (h.type != PEERDIRECT_EVENT_REVOKE) {
				pos += h.length;
				continue;
			}
			if (h.length < sizeof(k)) {
				/* Framed, but too short to say what it revoked. */
				lost_framing_locked(dev, h.length, (size_t)got - pos, sizeof(k));
				pos += h.length;
				continue;
			}
			memcpy(&k, buf + pos, sizeof(k));
			ev = (struct pd_event) {
				.reason = k.reason, .seq = k.seq, .export_id = k.export_id,
				.handle = k.handle, .inode = k.inode, .offset = k.offset,
				.length = k.length,
			};
			handle_event_locked(dev, &ev, k.flags);
			pos += h.length;
		}
	}
}

void pd_device_dispatch(struct pd_device *dev)
{
	pthread_mutex_lock(&dev->lock);
	dispatch_locked(dev);
	pthread_mutex_unlock(&dev->lock);
}

/* For poll() only: reading it directly would take events from the
 * library's reader. */
int pd_device_fd(const struct pd_device *dev)
{
	return dev ? dev->fd : pd_error(-EINVAL, "pd_device_fd: device is NULL");
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

/*
 * The application's view of the events: whatever the library's reader read
 * for anyone (a fabric's poll included) is queued here too, so nobody takes
 * events away from anybody.  If the application lets more than 1024 pile
 * up, the oldest go and the next read starts with an OVERFLOW record.
 */
/* One record into the caller's array of size-byte elements. */
static void put_event(struct pd_event *events, size_t size, size_t i,
		      const struct pd_event *ev)
{
	pd_copy_out("pd_device_read_events", (char *)events + i * size, size, ev,
		    sizeof(*ev), PD_EVENT_SIZE_1_0, NULL);
}

int pd_device_read_events_sz(struct pd_device *dev, struct pd_event *events,
			     size_t size, size_t max, int timeout_ms)
{
	struct pollfd pfd;
	size_t n = 0;
	int ret = 0;

	if (!dev || !events || !max || size < PD_EVENT_SIZE_1_0)
		return pd_error(-EINVAL, "pd_device_read_events: %s",
				!dev ? "device is NULL" : !events ? "events is NULL" :
				!max ? "max is 0" : "record size below the 1.0 layout");
	pthread_mutex_lock(&dev->lock);
	ret = dispatch_locked(dev);
	if (!ret && !dev->app_count && !dev->app_lost && timeout_ms && !dev->gone && !dev->closed) {
		pfd = (struct pollfd) { .fd = dev->fd, .events = POLLIN };
		pthread_mutex_unlock(&dev->lock);
		ret = poll(&pfd, 1, timeout_ms);
		pthread_mutex_lock(&dev->lock);
		if (ret < 0 && errno != EINTR)
			ret = pd_error(-errno, "poll /dev/peerdirect%u: %s", dev->index, strerror(errno));
		else
			ret = dispatch_locked(dev);
	}
	if (!ret && dev->app_lost) {
		struct pd_event lost = { .reason = PD_REASON_OVERFLOW };

		put_event(events, size, n++, &lost);
		dev->app_lost = false;
	}
	while (!ret && n < max && dev->app_count) {
		put_event(events, size, n++, &dev->appq[dev->app_head]);
		dev->app_head = (dev->app_head + 1) % APP_QUEUE_MAX;
		dev->app_count--;
	}
	if (!ret && !n && dev->gone)
		ret = pd_error(-ENODEV, "/dev/peerdirect%u was removed", dev->index);
	pthread_mutex_unlock(&dev->lock);
	return ret < 0 ? ret : (int)n;
}
