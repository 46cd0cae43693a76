// SPDX-License-Identifier: MIT
/*
 * Revocation tracking (see revocation.h): the records of what a device file
 * reports, the one event reader per file, and the watches told.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <linux/peerdirect.h>

#include "abi.h"
#include "errors.h"
#include "fork.h"
#include "log.h"
#include "mr_cache.h"
#include "revocation.h"

#define APP_QUEUE_MAX	1024
/* Export records kept before the first sweep of those the kernel released. */
#define SWEEP_FIRST	256

/*
 * A dma-buf this file exported, or (subscribed) one it only holds, whose
 * revocation the kernel reports here through PEERDIRECT_IOCTL_SUBSCRIBE.
 * Export ids are per exporting device, so subscribed records are found by
 * inode.  uses counts registrations being made (resolve to unpin), entries
 * the cache entries made (hold to release).  With both 0 a subscription is
 * cancelled in the kernel (its max_subscriptions counts live ones) and the
 * record goes; an export's record goes once the kernel no longer lists the
 * export (its dma-buf was released), or when it was revoked and the table
 * is swept.
 */
struct rec {
	struct rec *next_ino, *next_id;
	uint64_t export_id, st_dev, st_ino;
	uint64_t born;		/* the table's sequence when it was made */
	unsigned int uses, entries;
	bool revoked, subscribed;
	bool suspect;		/* revoked by an overflow: the kernel may say live */
};

/* Chained hashes over the same records: by inode (every record) and by
 * export id (exports only).  A hit costs the same at 1 or 30,000. */
struct rec_table {
	struct rec **by_ino, **by_id;
	size_t nbuckets;	/* a power of two */
	size_t n, nexports;
	uint64_t seq;
	size_t sweep_at;	/* exports that start the next sweep */
	bool no_list;		/* the file answers no PEERDIRECT_IOCTL_LIST */
};

struct pd_monitor {
	int fd;			/* the device file; -1 once closed */
	int evfd;		/* readable while the application queue is not empty */
	int epfd;		/* {fd, evfd}: what applications poll */
	struct pd_owned_fd own_fd, own_evfd, own_epfd;	/* closed in a forked child */
	unsigned int index;
	uint64_t origin;
	unsigned int refs;	/* atomic */
	void (*release)(void *owner);
	void *owner;
	/* Under lock, held while events are read and dispatched. */
	pthread_mutex_t lock;
	bool gone, closed;
	struct pd_watch **watches;
	size_t nwatches, watches_cap;
	/* Under recs_lock, a leaf (see revocation.h). */
	pthread_mutex_t recs_lock;
	struct rec_table recs;
	/* Events for pd_device_read_events, oldest first; under lock. */
	struct pd_event *appq;
	size_t app_head, app_count;
	bool app_lost;
};

struct pd_watch {
	struct pd_watch_ops ops;
	pthread_mutex_t lock;
	struct pd_monitor *mons[PD_MAX_DEVICES];
	unsigned int n;			/* atomic: also read as a hint */
	unsigned int gen;		/* atomic */
	unsigned int invalidations;	/* atomic */
};

_Static_assert(PD_REASON_OVERFLOW == PEERDIRECT_REASON_OVERFLOW,
	       "event reasons mirror the uapi");

/* ---- records ---- */

/* An event names the inode only: every dma-buf lives on the one dma-buf
 * filesystem, so the inode is enough there. */
#define ANY_DEV UINT64_MAX

static size_t hash64(uint64_t v, size_t nbuckets)
{
	v ^= v >> 33;
	v *= 0xff51afd7ed558ccdULL;
	v ^= v >> 33;
	return (size_t)v & (nbuckets - 1);
}

static int table_grow(struct rec_table *t)
{
	size_t nb = t->nbuckets ? t->nbuckets * 2 : 64, i;
	struct rec **by_ino = calloc(nb, sizeof(*by_ino));
	struct rec **by_id = calloc(nb, sizeof(*by_id));
	struct rec *r, *next;

	if (!by_ino || !by_id) {
		free(by_ino);
		free(by_id);
		return -ENOMEM;
	}
	for (i = 0; i < t->nbuckets; i++) {
		for (r = t->by_ino[i]; r; r = next) {
			next = r->next_ino;
			r->next_ino = by_ino[hash64(r->st_ino, nb)];
			by_ino[hash64(r->st_ino, nb)] = r;
		}
		for (r = t->by_id[i]; r; r = next) {
			next = r->next_id;
			r->next_id = by_id[hash64(r->export_id, nb)];
			by_id[hash64(r->export_id, nb)] = r;
		}
	}
	free(t->by_ino);
	free(t->by_id);
	t->by_ino = by_ino;
	t->by_id = by_id;
	t->nbuckets = nb;
	return 0;
}

static struct rec *table_add(struct rec_table *t, const struct rec *proto)
{
	struct rec *r;

	if (t->n >= t->nbuckets && table_grow(t))
		return NULL;
	r = malloc(sizeof(*r));
	if (!r)
		return NULL;
	*r = *proto;
	r->born = ++t->seq;
	r->next_ino = t->by_ino[hash64(r->st_ino, t->nbuckets)];
	t->by_ino[hash64(r->st_ino, t->nbuckets)] = r;
	if (!r->subscribed) {
		r->next_id = t->by_id[hash64(r->export_id, t->nbuckets)];
		t->by_id[hash64(r->export_id, t->nbuckets)] = r;
		t->nexports++;
	}
	t->n++;
	return r;
}

static void table_del(struct rec_table *t, struct rec *r)
{
	struct rec **p;

	for (p = &t->by_ino[hash64(r->st_ino, t->nbuckets)]; *p != r; p = &(*p)->next_ino)
		;
	*p = r->next_ino;
	if (!r->subscribed) {
		for (p = &t->by_id[hash64(r->export_id, t->nbuckets)]; *p != r; p = &(*p)->next_id)
			;
		*p = r->next_id;
		t->nexports--;
	}
	t->n--;
	free(r);
}

static void table_free(struct rec_table *t)
{
	size_t i;
	struct rec *r, *next;

	for (i = 0; i < t->nbuckets; i++) {
		for (r = t->by_ino[i]; r; r = next) {
			next = r->next_ino;
			free(r);
		}
	}
	free(t->by_ino);
	free(t->by_id);
}

static struct rec *find_export_id(struct rec_table *t, uint64_t export_id)
{
	struct rec *r;

	if (!t->nbuckets)
		return NULL;
	for (r = t->by_id[hash64(export_id, t->nbuckets)]; r; r = r->next_id)
		if (r->export_id == export_id)
			return r;
	return NULL;
}

/* kind: 0 any record, 1 exports only, 2 subscriptions only. */
static struct rec *find_ino(struct rec_table *t, uint64_t st_dev, uint64_t st_ino, int kind)
{
	struct rec *r;

	if (!t->nbuckets)
		return NULL;
	for (r = t->by_ino[hash64(st_ino, t->nbuckets)]; r; r = r->next_ino) {
		if (r->st_ino != st_ino || (st_dev != ANY_DEV && r->st_dev != st_dev))
			continue;
		if (!kind || (kind == 2) == r->subscribed)
			return r;
	}
	return NULL;
}

/* ---- monitor lifetime ---- */

static uint64_t next_origin(void)
{
	static uint64_t origin;

	return __atomic_add_fetch(&origin, 1, __ATOMIC_RELAXED);
}

int pd_monitor_create(int fd, unsigned int index, void (*release)(void *owner),
		      void *owner, struct pd_monitor **out)
{
	struct epoll_event ev = { .events = EPOLLIN };
	struct pd_monitor *m = calloc(1, sizeof(*m));
	int ret;

	if (!m)
		return pd_error(-ENOMEM, "pd_device_open: out of memory");
	m->evfd = m->epfd = -1;
	m->appq = calloc(APP_QUEUE_MAX, sizeof(*m->appq));
	if (!m->appq) {
		ret = pd_error(-ENOMEM, "pd_device_open: out of memory");
		goto fail;
	}
	m->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	m->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (m->evfd < 0 || m->epfd < 0 || epoll_ctl(m->epfd, EPOLL_CTL_ADD, fd, &ev) ||
	    epoll_ctl(m->epfd, EPOLL_CTL_ADD, m->evfd, &ev)) {
		ret = pd_error(-errno, "pd_device_open: the event fds: %s", strerror(errno));
		goto fail;
	}
	/* Non-blocking: the reader drains with read() until EAGAIN. */
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	pthread_mutex_init(&m->lock, NULL);
	pthread_mutex_init(&m->recs_lock, NULL);
	m->fd = fd;
	pd_fork_track(&m->own_fd, &m->fd);
	pd_fork_track(&m->own_evfd, &m->evfd);
	pd_fork_track(&m->own_epfd, &m->epfd);
	m->index = index;
	m->origin = next_origin();
	m->refs = 1;
	m->release = release;
	m->owner = owner;
	m->recs.sweep_at = SWEEP_FIRST;
	*out = m;
	return 0;
fail:
	if (m->evfd >= 0)
		close(m->evfd);
	if (m->epfd >= 0)
		close(m->epfd);
	free(m->appq);
	free(m);
	return ret;
}

static void monitor_get(struct pd_monitor *m)
{
	__atomic_add_fetch(&m->refs, 1, __ATOMIC_RELAXED);
}

static void monitor_put(struct pd_monitor *m)
{
	if (__atomic_sub_fetch(&m->refs, 1, __ATOMIC_ACQ_REL))
		return;
	pthread_mutex_destroy(&m->lock);
	pthread_mutex_destroy(&m->recs_lock);
	table_free(&m->recs);
	pd_fork_untrack(&m->own_evfd);
	pd_fork_untrack(&m->own_epfd);
	if (m->evfd >= 0)
		close(m->evfd);
	if (m->epfd >= 0)
		close(m->epfd);
	free(m->watches);
	free(m->appq);
	if (m->release)
		m->release(m->owner);
	free(m);
}

uint64_t pd_monitor_origin(const struct pd_monitor *m)
{
	return m->origin;
}

int pd_monitor_poll_fd(const struct pd_monitor *m)
{
	return m->epfd;
}

static void watch_forget(struct pd_watch *w, struct pd_monitor *m)
{
	unsigned int i;

	pthread_mutex_lock(&w->lock);
	for (i = 0; i < w->n; i++) {
		if (w->mons[i] == m) {
			w->mons[i] = w->mons[w->n - 1];
			__atomic_store_n(&w->n, w->n - 1, __ATOMIC_RELAXED);
			__atomic_add_fetch(&w->gen, 1, __ATOMIC_RELAXED);
			break;
		}
	}
	pthread_mutex_unlock(&w->lock);
}

static void tell_origin_gone(struct pd_watch *w, struct pd_monitor *m, uint32_t reason)
{
	unsigned int n = w->ops.origin_gone(w->ops.ctx, m->origin, reason);

	__atomic_add_fetch(&w->invalidations, n, __ATOMIC_RELAXED);
}

void pd_monitor_close(struct pd_monitor *m)
{
	size_t i;

	if (!m)
		return;
	pthread_mutex_lock(&m->lock);
	m->closed = true;
	for (i = 0; i < m->nwatches; i++) {
		tell_origin_gone(m->watches[i], m, PD_REASON_CLOSED);
		watch_forget(m->watches[i], m);
		monitor_put(m);		/* the watch's reference */
	}
	m->nwatches = 0;
	/* Records' users send SUBSCRIBE on fd under recs_lock. */
	pthread_mutex_lock(&m->recs_lock);
	pd_fork_untrack(&m->own_fd);
	if (m->fd >= 0) {
		epoll_ctl(m->epfd, EPOLL_CTL_DEL, m->fd, NULL);
		close(m->fd);
	}
	m->fd = -1;
	pthread_mutex_unlock(&m->recs_lock);
	pthread_mutex_unlock(&m->lock);
	monitor_put(m);
}

/* ---- exports and subscriptions ---- */

/*
 * Export records of dma-bufs the kernel released go: a process that
 * exports and closes for weeks keeps only what it still uses.  The kernel
 * lists the exports it still has (PEERDIRECT_IOCTL_LIST, uapi 2.1); a
 * record made before the listing and absent from it, or revoked, and used
 * by no registration, is dropped.  Run when the exports double since the
 * last sweep, so its cost is amortised O(1) per export.
 */
static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/*
 * The device's live exports as the kernel lists them (PEERDIRECT_IOCTL_LIST,
 * uapi 2.1): their ids sorted, and those still revoked-but-open in
 * *revoked (sorted too).  0, or a positive errno: ENOTTY/EINVAL from a
 * module that cannot list (or a stand-in file), E2BIG when one listing
 * cannot hold them all.
 */
struct listing {
	uint64_t *ids, *revoked;
	size_t nids, nrevoked;
};

static int list_exports(struct pd_monitor *m, size_t cap, struct listing *out)
{
	struct peerdirect_list l = { .argsz = sizeof(l) };
	struct peerdirect_export_info *info;
	size_t i;
	int err;

	*out = (struct listing) { 0 };
	if (cap > PEERDIRECT_LIST_MAX)
		cap = PEERDIRECT_LIST_MAX;
	info = calloc(cap, sizeof(*info));
	out->ids = malloc((cap + 1) * sizeof(*out->ids));
	out->revoked = malloc((cap + 1) * sizeof(*out->revoked));
	err = info && out->ids && out->revoked ? 0 : ENOMEM;
	if (!err) {
		l.export_size = sizeof(*info);
		l.exports = (uintptr_t)info;
		l.nr_exports = (uint32_t)cap;
		err = m->fd < 0 ? EBADF : ioctl(m->fd, PEERDIRECT_IOCTL_LIST, &l) ? errno : 0;
		if (!err && l.total_exports > l.nr_exports)
			err = E2BIG;
	}
	for (i = 0; !err && i < l.nr_exports; i++) {
		out->ids[out->nids++] = info[i].export_id;
		if (info[i].flags & PEERDIRECT_EXPORT_INFO_REVOKED)
			out->revoked[out->nrevoked++] = info[i].export_id;
	}
	free(info);
	if (err) {
		free(out->ids);
		free(out->revoked);
		*out = (struct listing) { 0 };
		return err;
	}
	qsort(out->ids, out->nids, sizeof(uint64_t), cmp_u64);
	qsort(out->revoked, out->nrevoked, sizeof(uint64_t), cmp_u64);
	return 0;
}

static bool listed(const uint64_t *v, size_t n, uint64_t id)
{
	return n && bsearch(&id, v, n, sizeof(*v), cmp_u64);
}

static void sweep_released(struct pd_monitor *m)
{
	struct rec_table *t = &m->recs;
	struct listing live;
	uint64_t listed_at;
	struct rec *r, *next;
	size_t cap, i;
	bool no_list;
	int err;

	/* The monitor lock keeps m->fd open and its number ours while the
	 * kernel lists (pd_monitor_close takes it first); the listing is a
	 * system call, so not under recs_lock, which every hit's record
	 * lookup takes. */
	pthread_mutex_lock(&m->lock);
	pthread_mutex_lock(&m->recs_lock);
	cap = t->nexports + 64;
	listed_at = t->seq;
	no_list = t->no_list;
	pthread_mutex_unlock(&m->recs_lock);
	err = no_list ? ENOTTY : list_exports(m, cap, &live);
	pthread_mutex_unlock(&m->lock);
	pthread_mutex_lock(&m->recs_lock);
	/* A module before uapi 2.1, or a stand-in file: only revoked
	 * records can go, and unlisted ones stay. */
	if (err == ENOTTY || err == EINVAL)
		t->no_list = true;
	for (i = 0; err != ENOMEM && i < t->nbuckets; i++) {
		for (r = t->by_id[i]; r; r = next) {
			next = r->next_id;
			if (r->uses || r->entries || r->born > listed_at)
				continue;
			if (r->revoked || (!err && !listed(live.ids, live.nids, r->export_id)))
				table_del(t, r);
		}
	}
	t->sweep_at = t->nexports * 2 > SWEEP_FIRST ? t->nexports * 2 : SWEEP_FIRST;
	pthread_mutex_unlock(&m->recs_lock);
	if (!err) {
		free(live.ids);
		free(live.revoked);
	}
}

/*
 * After an overflow every export was marked revoked, since any might have
 * been.  The kernel's listing tells which still live unrevoked: those may
 * be registered again, instead of being refused for good.  The caches'
 * entries went anyway (they re-register on next use).  Subscriptions are
 * of any device's dma-bufs, so this device's listing cannot vouch for
 * them: their records go with their last registration, and a new one asks
 * the kernel again.  Under lock (no event is handled meanwhile).
 */
static void revalidate_exports_locked(struct pd_monitor *m)
{
	struct rec_table *t = &m->recs;
	struct listing live;
	struct rec *r;
	size_t i, cap;

	pthread_mutex_lock(&m->recs_lock);
	cap = t->no_list ? 0 : t->nexports + 64;
	pthread_mutex_unlock(&m->recs_lock);
	if (!cap || list_exports(m, cap, &live))
		return;
	pthread_mutex_lock(&m->recs_lock);
	for (i = 0; i < t->nbuckets; i++)
		for (r = t->by_id[i]; r; r = r->next_id)
			if (listed(live.ids, live.nids, r->export_id) &&
			    !listed(live.revoked, live.nrevoked, r->export_id))
				r->revoked = false;
	pthread_mutex_unlock(&m->recs_lock);
	free(live.ids);
	free(live.revoked);
}

int pd_monitor_track_export(struct pd_monitor *m, int fd, uint64_t export_id)
{
	struct rec proto = { .export_id = export_id };
	struct rec *r;
	struct stat st;
	bool sweep;
	int ret = 0;

	if (fstat(fd, &st))
		return pd_error(-errno, "pd_device_export: fstat of the new dma-buf: %s",
				strerror(errno));
	proto.st_dev = st.st_dev;
	proto.st_ino = st.st_ino;
	pthread_mutex_lock(&m->recs_lock);
	/* The same id again (a test's stand-in), or a stale record of a
	 * reused inode: the new export replaces what nothing uses. */
	r = find_export_id(&m->recs, export_id);
	if (r && !r->uses && !r->entries)
		table_del(&m->recs, r);
	r = find_ino(&m->recs, proto.st_dev, proto.st_ino, 1);
	if (r && !r->uses && !r->entries)
		table_del(&m->recs, r);
	if (!table_add(&m->recs, &proto))
		ret = pd_error(-ENOMEM, "pd_device_export: out of memory");
	sweep = m->recs.nexports >= m->recs.sweep_at;
	pthread_mutex_unlock(&m->recs_lock);
	if (sweep)
		sweep_released(m);
	return ret;
}

size_t pd_monitor_nr_recs(struct pd_monitor *m)
{
	size_t n;

	pthread_mutex_lock(&m->recs_lock);
	n = m->recs.n;
	pthread_mutex_unlock(&m->recs_lock);
	return n;
}

/*
 * A subscription an overflow made suspect, still held by registrations:
 * the kernel ends a subscription when it reports the revocation, so asking
 * again tells.  EEXIST (still there) or 0 (ended some other way, and made
 * again) mean live; ENODEV revoked.  Returns 0 when that is settled, else
 * the errno of an answer that settles nothing (the record stays suspect).
 * Exports are revalidated by the listing instead (one call for all).
 */
static int revalidate_subscription_locked(struct pd_monitor *m, struct rec *r, int fd)
{
	struct peerdirect_subscribe s = {
		.argsz = sizeof(s), .fd = fd, .cookie = r->st_ino,
	};

	if (fd < 0 || m->fd < 0)
		return EBADF;
	if (!ioctl(m->fd, PEERDIRECT_IOCTL_SUBSCRIBE, &s) || errno == EEXIST)
		r->revoked = false;
	else if (errno != ENODEV)
		return errno;
	r->suspect = false;
	return 0;
}

/* 1 with the record pinned, 0 if m does not know the dma-buf, -ENODEV if
 * it exported it and it was revoked. */
static int lookup_export(struct pd_monitor *m, int fd, uint64_t st_dev, uint64_t st_ino)
{
	struct rec *r;
	int ret = 0, err;

	pthread_mutex_lock(&m->recs_lock);
	r = find_ino(&m->recs, st_dev, st_ino, 0);
	if (r && r->revoked && r->suspect && r->subscribed &&
	    (err = revalidate_subscription_locked(m, r, fd)))
		ret = pd_error(-err, "dma-buf inode %llu: events of /dev/peerdirect%u were lost, and asking the kernel whether it is still live failed: %s; try again",
			       (unsigned long long)st_ino, m->index, strerror(err));
	else if (r && r->revoked)
		ret = pd_error(-ENODEV, "dma-buf inode %llu (%s %llu of /dev/peerdirect%u) was revoked, or its device went: re-export and register again",
			       (unsigned long long)st_ino, r->subscribed ? "subscribed, export" : "export",
			       (unsigned long long)r->export_id, m->index);
	else if (r) {
		r->uses++;
		ret = 1;
	}
	pthread_mutex_unlock(&m->recs_lock);
	return ret;
}

/*
 * Ends this file's subscription to the dma-buf fd.  Silent: it runs where a
 * registration is released, which reports nothing, and a subscription it
 * cannot end (already ended by a revocation, ENOENT; the device closed)
 * ends with the dma-buf or the file anyway.
 */
static void cancel_subscription(struct pd_monitor *m, int fd)
{
	struct peerdirect_subscribe s = {
		.argsz = sizeof(s), .flags = PEERDIRECT_SUBSCRIBE_CANCEL, .fd = fd,
	};
	int saved = errno;

	if (m->fd >= 0)
		(void)ioctl(m->fd, PEERDIRECT_IOCTL_SUBSCRIBE, &s);
	errno = saved;
}

/* 1 if m reports fd's revocation from now on, with the record pinned; 0
 * if it cannot (another exporter's dma-buf, a device without
 * subscriptions); a negative errno otherwise. */
static int subscribe_dmabuf(struct pd_monitor *m, int fd, uint64_t st_dev, uint64_t st_ino)
{
	struct peerdirect_subscribe s = {
		.argsz = sizeof(s), .fd = fd, .cookie = st_ino,
	};
	struct rec proto = { .st_dev = st_dev, .st_ino = st_ino, .subscribed = true, .uses = 1 };
	struct rec *r;
	int ret = 1;

	pthread_mutex_lock(&m->recs_lock);
	r = find_ino(&m->recs, st_dev, st_ino, 2);
	if (r) {
		r->uses++;
		goto out;
	}
	if (m->fd < 0) {
		ret = pd_error(-EBADF, "subscribe to dma-buf inode %llu: /dev/peerdirect%u was closed",
			       (unsigned long long)st_ino, m->index);
		goto out;
	}
	/* EEXIST: this file is subscribed already (a record dropped without
	 * its cancel): it reports, so it is ours again. */
	if (ioctl(m->fd, PEERDIRECT_IOCTL_SUBSCRIBE, &s) && errno != EEXIST) {
		if (errno == EINVAL || errno == ENOTTY)
			ret = 0;
		else if (errno == ENOSPC)
			/* Registering it anyway would leave a revocation
			 * unreported: stale bytes, or SIGBUS on the mapping. */
			ret = pd_error(-ENOSPC, "subscribe to dma-buf inode %llu on /dev/peerdirect%u: this open device file already watches the module's max_subscriptions dma-bufs (the limit counts those registered now): its revocation could not be reported, so it is not registered; deregister others, or raise the peerdirect module parameter max_subscriptions",
				       (unsigned long long)st_ino, m->index);
		else
			ret = pd_error(-errno, "subscribe to dma-buf inode %llu on /dev/peerdirect%u: %s%s",
				       (unsigned long long)st_ino, m->index, strerror(errno),
				       errno == ENODEV ? " (it was revoked: re-export and register again)" : "");
		goto out;
	}
	proto.export_id = s.export_id;
	if (!table_add(&m->recs, &proto)) {
		cancel_subscription(m, fd);
		ret = pd_error(-ENOMEM, "subscribe to dma-buf inode %llu: out of memory",
			       (unsigned long long)st_ino);
	}
out:
	pthread_mutex_unlock(&m->recs_lock);
	return ret;
}

/* One use of the record goes (a pin, or an entry's hold). */
static void rec_put(struct pd_monitor *m, uint64_t st_dev, uint64_t st_ino, int fd,
		    bool entry)
{
	unsigned int *count;
	struct rec *r;

	pthread_mutex_lock(&m->recs_lock);
	r = find_ino(&m->recs, st_dev, st_ino, 0);
	count = !r ? NULL : entry ? &r->entries : &r->uses;
	if (count && *count) {
		(*count)--;
		/* An export's record stays after its revocation, to refuse a
		 * late registration by name, until a sweep.  A subscription
		 * marked revoked by an overflow may still be live in the
		 * kernel: cancel it. */
		if (!r->uses && !r->entries && r->subscribed) {
			if (fd >= 0)
				cancel_subscription(m, fd);
			table_del(&m->recs, r);
		}
	}
	pthread_mutex_unlock(&m->recs_lock);
}

/* ---- events ---- */

static void app_queue_locked(struct pd_monitor *m, const struct pd_event *ev)
{
	uint64_t one = 1;

	if (!m->app_count && !m->app_lost && write(m->evfd, &one, sizeof(one)) < 0)
		pd_log_rl(PD_LOG_WARN, "/dev/peerdirect%u: eventfd write: %s", m->index,
			  strerror(errno));
	if (m->app_count == APP_QUEUE_MAX) {
		/* The oldest goes; the application learns it lost some. */
		m->app_head = (m->app_head + 1) % APP_QUEUE_MAX;
		m->app_count--;
		m->app_lost = true;
	}
	m->appq[(m->app_head + m->app_count) % APP_QUEUE_MAX] = *ev;
	m->app_count++;
}

/* Every dma-buf of the file is revoked, or may be: every watch drops them,
 * and registering one of them again is refused. */
static void origin_gone_locked(struct pd_monitor *m, uint32_t reason)
{
	struct rec *r;
	size_t i;

	pthread_mutex_lock(&m->recs_lock);
	for (i = 0; i < m->recs.nbuckets; i++)
		for (r = m->recs.by_ino[i]; r; r = r->next_ino) {
			r->suspect = reason == PD_REASON_OVERFLOW && (!r->revoked || r->suspect);
			r->revoked = true;
		}
	pthread_mutex_unlock(&m->recs_lock);
	for (i = 0; i < m->nwatches; i++)
		tell_origin_gone(m->watches[i], m, reason);
}

static void handle_event_locked(struct pd_monitor *m, const struct pd_event *ev,
				uint32_t flags)
{
	uint64_t st_dev = 0, st_ino = 0;
	struct rec *r;
	unsigned int n;
	size_t i;

	app_queue_locked(m, ev);
	if (ev->reason == PD_REASON_OVERFLOW || (!ev->export_id && !ev->inode)) {
		origin_gone_locked(m, ev->reason);
		if (ev->reason == PD_REASON_OVERFLOW)
			revalidate_exports_locked(m);
		return;
	}
	pthread_mutex_lock(&m->recs_lock);
	r = flags & PEERDIRECT_EVENT_SUBSCRIBED ? find_ino(&m->recs, ANY_DEV, ev->inode, 2) :
						  find_export_id(&m->recs, ev->export_id);
	if (r) {
		r->revoked = true;
		r->suspect = false;
		st_dev = r->st_dev;
		st_ino = r->st_ino;
	}
	pthread_mutex_unlock(&m->recs_lock);
	/* Not a dma-buf of this file's records: no registration can have it,
	 * so there is nothing to invalidate.  The invalidation may release
	 * entries, which drop their records: not under recs_lock. */
	if (!r)
		return;
	for (i = 0; i < m->nwatches; i++) {
		n = m->watches[i]->ops.revoked(m->watches[i]->ops.ctx, m->origin, st_dev,
					       st_ino, ev->reason);
		__atomic_add_fetch(&m->watches[i]->invalidations, n, __ATOMIC_RELAXED);
	}
}

/*
 * Something that may have hidden a revoke: a record that cannot be framed
 * (whatever followed it in the read is lost), or a read that fails in a way
 * it never should.  An overflow in all but name: every watch drops this
 * file's dma-bufs and the application is told it missed events.
 */
static void lost_events_locked(struct pd_monitor *m)
{
	struct pd_event ev = { .reason = PD_REASON_OVERFLOW };

	handle_event_locked(m, &ev, 0);
}

/* Reads everything queued on the file and hands it out.  Under lock. */
static void dispatch_locked(struct pd_monitor *m)
{
	/* Records are read whole.  Each starts with {type, length}: a newer
	 * kernel may send longer records or types we do not know, which are
	 * skipped by their length. */
	unsigned char buf[16 * 2 * sizeof(struct peerdirect_event)];
	size_t pos;
	ssize_t got;

	if (m->closed || m->gone)
		return;
	for (;;) {
		got = read(m->fd, buf, 16 * sizeof(struct peerdirect_event));
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0 && errno == EAGAIN)
			return;
		/* ENODEV after removal; end of file on a stand-in whose writer
		 * went: nothing the device exported is valid any more. */
		if ((got < 0 && errno == ENODEV) || got == 0) {
			m->gone = true;
			origin_gone_locked(m, PD_REASON_UNPLUG);
			return;
		}
		if (got < 0) {
			/* Failing open would lose every later revocation. */
			pd_error(-errno, "read events from /dev/peerdirect%u: %s: treated as an overflow",
				 m->index, strerror(errno));
			pd_log_rl(PD_LOG_WARN, "read events from /dev/peerdirect%u: %s: treated as an overflow",
				  m->index, strerror(errno));
			lost_events_locked(m);
			return;
		}
		for (pos = 0; pos + sizeof(struct peerdirect_event_header) <= (size_t)got;) {
			struct peerdirect_event_header h;
			struct peerdirect_event k;
			struct pd_event ev;

			memcpy(&h, buf + pos, sizeof(h));
			if (h.length < sizeof(h) || h.length > (size_t)got - pos) {
				pd_error(-EPROTO, "/dev/peerdirect%u: event record of %u bytes (%zu left in the read): treated as an overflow",
					 m->index, h.length, (size_t)got - pos);
				lost_events_locked(m);
				break;
			}
			if (h.type != PEERDIRECT_EVENT_REVOKE) {
				pos += h.length;
				continue;
			}
			if (h.length < sizeof(k)) {
				/* Framed, but too short to say what it revoked. */
				pd_error(-EPROTO, "/dev/peerdirect%u: revoke record of %u bytes, %zu the least: treated as an overflow",
					 m->index, h.length, sizeof(k));
				lost_events_locked(m);
				pos += h.length;
				continue;
			}
			memcpy(&k, buf + pos, sizeof(k));
			ev = (struct pd_event) {
				.reason = k.reason, .seq = k.seq, .export_id = k.export_id,
				.handle = k.handle, .inode = k.inode, .offset = k.offset,
				.length = k.length,
			};
			handle_event_locked(m, &ev, k.flags);
			pos += h.length;
		}
	}
}

/* One record into the caller's array of size-byte elements. */
static void put_event(struct pd_event *events, size_t size, size_t i,
		      const struct pd_event *ev)
{
	pd_copy_out("pd_device_read_events", (char *)events + i * size, size, ev,
		    sizeof(*ev), PD_EVENT_SIZE_1_0, NULL);
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*
 * The application's view: whatever the reader read for anyone (a transfer
 * thread's drain included) is queued here too.  Waiting polls the file and
 * the eventfd together, so an event another thread drained meanwhile wakes
 * the wait instead of being found at its timeout.
 */
int pd_monitor_read_events(struct pd_monitor *m, struct pd_event *events, size_t size,
			   size_t max, int timeout_ms)
{
	int64_t deadline = timeout_ms > 0 ? now_ms() + timeout_ms : 0;
	struct pollfd pfd = { .fd = m->epfd, .events = POLLIN };
	uint64_t drained;
	size_t n = 0;
	int ret = 0, wait;

	pthread_mutex_lock(&m->lock);
	for (;;) {
		dispatch_locked(m);
		if (m->app_count || m->app_lost || m->gone || m->closed || !timeout_ms)
			break;
		wait = timeout_ms < 0 ? -1 : (int)(deadline - now_ms());
		if (timeout_ms > 0 && wait <= 0)
			break;
		pthread_mutex_unlock(&m->lock);
		ret = poll(&pfd, 1, wait);
		pthread_mutex_lock(&m->lock);
		if (ret < 0 && errno != EINTR) {
			ret = pd_error(-errno, "poll /dev/peerdirect%u: %s", m->index, strerror(errno));
			break;
		}
		ret = 0;
	}
	if (!ret && m->app_lost) {
		struct pd_event lost = { .reason = PD_REASON_OVERFLOW };

		put_event(events, size, n++, &lost);
		m->app_lost = false;
	}
	while (!ret && n < max && m->app_count) {
		put_event(events, size, n++, &m->appq[m->app_head]);
		m->app_head = (m->app_head + 1) % APP_QUEUE_MAX;
		m->app_count--;
	}
	/* Empty again: the eventfd stops being readable. */
	if (!m->app_count && !m->app_lost && read(m->evfd, &drained, sizeof(drained)) < 0 &&
	    errno != EAGAIN)
		pd_log_rl(PD_LOG_WARN, "/dev/peerdirect%u: eventfd read: %s", m->index,
			  strerror(errno));
	if (!ret && !n && m->gone)
		ret = pd_error(-ENODEV, "/dev/peerdirect%u was removed", m->index);
	if (!ret && !n && m->closed)
		ret = pd_error(-EBADF, "/dev/peerdirect%u was closed", m->index);
	pthread_mutex_unlock(&m->lock);
	return ret < 0 ? ret : (int)n;
}

/* ---- watches ---- */

int pd_watch_create(const struct pd_watch_ops *ops, struct pd_watch **out)
{
	struct pd_watch *w = calloc(1, sizeof(*w));

	if (!w)
		return pd_error(-ENOMEM, "pd_fabric_open: out of memory");
	w->ops = *ops;
	pthread_mutex_init(&w->lock, NULL);
	*out = w;
	return 0;
}

void pd_watch_detach_all(struct pd_watch *w)
{
	struct pd_monitor *m;

	for (;;) {
		pthread_mutex_lock(&w->lock);
		m = w->n ? w->mons[0] : NULL;
		if (m)
			monitor_get(m);
		pthread_mutex_unlock(&w->lock);
		if (!m)
			break;
		pd_watch_detach(w, m);
		monitor_put(m);
	}
}

void pd_watch_destroy(struct pd_watch *w)
{
	if (!w)
		return;
	pd_watch_detach_all(w);
	pthread_mutex_destroy(&w->lock);
	free(w);
}

int pd_watch_attach(struct pd_watch *w, struct pd_monitor *m)
{
	struct pd_watch **watches;
	size_t i;
	int ret = 0;

	pthread_mutex_lock(&m->lock);
	for (i = 0; i < m->nwatches && !ret; i++)
		if (m->watches[i] == w)
			ret = pd_error(-EEXIST, "pd_fabric_attach_device: device %u is already attached",
				       m->index);
	if (!ret && m->closed)
		ret = pd_error(-EBADF, "pd_fabric_attach_device: device %u was closed", m->index);
	if (!ret && m->nwatches == m->watches_cap) {
		watches = realloc(m->watches, (m->watches_cap * 2 + 4) * sizeof(*watches));
		if (!watches)
			ret = pd_error(-ENOMEM, "pd_fabric_attach_device: out of memory");
		else
			m->watches = watches, m->watches_cap = m->watches_cap * 2 + 4;
	}
	if (!ret) {
		pthread_mutex_lock(&w->lock);
		if (w->n == PD_MAX_DEVICES) {
			ret = pd_error(-ENOSPC, "pd_fabric_attach_device: at most %d devices",
				       PD_MAX_DEVICES);
		} else {
			w->mons[w->n] = m;
			__atomic_store_n(&w->n, w->n + 1, __ATOMIC_RELAXED);
			__atomic_add_fetch(&w->gen, 1, __ATOMIC_RELAXED);
		}
		pthread_mutex_unlock(&w->lock);
	}
	if (!ret) {
		m->watches[m->nwatches++] = w;
		monitor_get(m);
	}
	pthread_mutex_unlock(&m->lock);
	return ret;
}

int pd_watch_detach(struct pd_watch *w, struct pd_monitor *m)
{
	size_t i;

	pthread_mutex_lock(&m->lock);
	for (i = 0; i < m->nwatches && m->watches[i] != w; i++)
		;
	if (i == m->nwatches) {
		pthread_mutex_unlock(&m->lock);
		return pd_error(-ENOENT, "pd_fabric_detach_device: device %u is not attached",
				m->index);
	}
	m->watches[i] = m->watches[--m->nwatches];
	tell_origin_gone(w, m, PD_REASON_DETACHED);
	watch_forget(w, m);
	pthread_mutex_unlock(&m->lock);
	monitor_put(m);
	return 0;
}

unsigned int pd_watch_count(const struct pd_watch *w)
{
	return __atomic_load_n(&w->n, __ATOMIC_RELAXED);
}

unsigned int pd_watch_generation(const struct pd_watch *w)
{
	return __atomic_load_n(&w->gen, __ATOMIC_ACQUIRE);
}

/* The attached monitors, each with a reference the caller puts. */
static unsigned int snapshot(struct pd_watch *w, struct pd_monitor **mons)
{
	unsigned int n, i;

	pthread_mutex_lock(&w->lock);
	n = w->n;
	for (i = 0; i < n; i++) {
		mons[i] = w->mons[i];
		monitor_get(mons[i]);
	}
	pthread_mutex_unlock(&w->lock);
	return n;
}

int pd_watch_drain(struct pd_watch *w)
{
	struct pd_monitor *mons[PD_MAX_DEVICES];
	unsigned int n, i, before;

	before = __atomic_load_n(&w->invalidations, __ATOMIC_RELAXED);
	n = snapshot(w, mons);
	for (i = 0; i < n; i++) {
		pthread_mutex_lock(&mons[i]->lock);
		dispatch_locked(mons[i]);
		pthread_mutex_unlock(&mons[i]->lock);
		monitor_put(mons[i]);
	}
	return (int)(__atomic_load_n(&w->invalidations, __ATOMIC_RELAXED) - before);
}

int pd_watch_resolve(struct pd_watch *w, int fd, uint64_t st_dev, uint64_t st_ino,
		     uint64_t *origin, struct pd_monitor **watcher)
{
	struct pd_monitor *mons[PD_MAX_DEVICES];
	unsigned int n = snapshot(w, mons), i;
	int ret = 0;

	*origin = 0;
	*watcher = NULL;
	for (i = 0; i < n && !ret; i++) {
		ret = lookup_export(mons[i], fd, st_dev, st_ino);
		if (ret == 1)
			*watcher = mons[i];
	}
	if (!ret && n) {
		ret = subscribe_dmabuf(mons[0], fd, st_dev, st_ino);
		/* At the module's max_subscriptions: idle cached registrations
		 * keep theirs, and go first. */
		if (ret == -ENOSPC && w->ops.drop_idle(w->ops.ctx, mons[0]->origin))
			ret = subscribe_dmabuf(mons[0], fd, st_dev, st_ino);
		if (ret == 1)
			*watcher = mons[0];
	}
	if (*watcher) {
		monitor_get(*watcher);
		*origin = (*watcher)->origin;
		ret = 0;
	}
	for (i = 0; i < n; i++)
		monitor_put(mons[i]);
	return ret;
}

void pd_watch_unpin(struct pd_monitor *watcher, uint64_t st_dev, uint64_t st_ino, int fd)
{
	if (watcher) {
		rec_put(watcher, st_dev, st_ino, fd, false);
		monitor_put(watcher);
	}
}

void pd_watch_hold(struct pd_monitor *watcher, uint64_t st_dev, uint64_t st_ino)
{
	struct rec *r;

	monitor_get(watcher);
	pthread_mutex_lock(&watcher->recs_lock);
	r = find_ino(&watcher->recs, st_dev, st_ino, 0);
	if (r)
		r->entries++;
	pthread_mutex_unlock(&watcher->recs_lock);
}

void pd_watch_release(struct pd_monitor *watcher, uint64_t st_dev, uint64_t st_ino, int fd)
{
	rec_put(watcher, st_dev, st_ino, fd, true);
	monitor_put(watcher);
}
