// SPDX-License-Identifier: MIT
/*
 * Imported dma-bufs (performance goal P3).  pd_mr_reg_dmabuf must fstat the
 * fd on every call to learn which dma-buf it is (fd numbers are reused and
 * dup'ed), and the syscall is most of a hit's cost.  A handle resolves the
 * fd once -- identity, size, read-only or not, a dup that keeps the inode
 * alive -- so a registration through it that hits the cache is a hash
 * probe and makes no system call.
 *
 * What a hit skips is the event drain: a revocation that is queued but not
 * yet read is found before the next transfer on the registration (transfers
 * drain events before posting), and every miss drains them first.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "errors.h"
#include "fabric.h"

struct pd_dmabuf {
	struct pd_fabric *fab;
	int fd;			/* our dup: the inode cannot be reused */
	struct pd_owned_fd own_fd;	/* closed in a forked child */
	bool readonly;
	uint64_t dev, ino, size;	/* size 0: unknown */
	/* Atomic: 1 + the watch generation at which no attached device could
	 * watch this dma-buf (another exporter's), 0 if not known.  Its
	 * unwatched entries are then hits until a device comes or goes. */
	unsigned int unwatched;
};

int pd_dmabuf_import(struct pd_fabric *fab, int fd, struct pd_dmabuf **out)
{
	struct pd_dmabuf *b;
	struct stat st;
	int fl, ret;

	if (!fab || !out)
		return pd_error(-EINVAL, "pd_dmabuf_import: %s", !fab ? "fabric is NULL" : "out is NULL");
	if (pd_forked_since(fab->fork_gen))
		return pd_fork_refuse("pd_dmabuf_import");
	b = calloc(1, sizeof(*b));
	if (!b)
		return pd_error(-ENOMEM, "pd_dmabuf_import: out of memory");
	/* Dup first: what is checked is what is kept, whatever the caller's
	 * other threads do with the fd number meanwhile. */
	b->fd = fd < 0 ? -1 : fcntl(fd, F_DUPFD_CLOEXEC, 0);
	fl = b->fd < 0 ? -1 : fcntl(b->fd, F_GETFL);
	if (fl < 0 || fstat(b->fd, &st)) {
		ret = pd_error(fd < 0 ? -EBADF : -errno, "pd_dmabuf_import: fd %d: %s", fd,
			       strerror(fd < 0 ? EBADF : errno));
		if (b->fd >= 0)
			close(b->fd);
		free(b);
		return ret;
	}
	b->fab = fab;
	b->readonly = (fl & O_ACCMODE) == O_RDONLY;
	b->dev = st.st_dev;
	b->ino = st.st_ino;
	b->size = pd_dmabuf_size(b->fd, &st);
	pd_fork_track(&b->own_fd, &b->fd);
	pd_fabric_get(fab);
	*out = b;
	return 0;
}

void pd_dmabuf_release(struct pd_dmabuf *b)
{
	/* In a forked child: its fd is closed, and its fabric is the
	 * parent's; nothing to release that the child could. */
	if (!b || pd_forked_since(b->fab->fork_gen))
		return;
	pd_fork_untrack(&b->own_fd);
	close(b->fd);
	pd_fabric_put(b->fab);
	free(b);
}

/* The miss: as pd_mr_reg_dmabuf, with the identity already known. */
static int reg_miss(struct pd_dmabuf *b, struct pd_mr_key *k, struct pd_mr_cache_entry **e)
{
	struct pd_fabric *fab = b->fab;
	struct pd_monitor *watcher;
	unsigned int attempt, wgen;
	uint64_t gen;
	int ret;

	for (attempt = 0;; attempt++) {
		wgen = pd_watch_generation(fab->watch);
		if (pd_watch_count(fab->watch))
			pd_fabric_poll_events(fab);
		gen = pd_mr_cache_generation(fab->cache);
		ret = pd_watch_resolve(fab->watch, b->fd, k->dev, k->ino, &k->origin, &watcher);
		if (ret)
			break;
		if (!k->origin && pd_watch_count(fab->watch))
			__atomic_store_n(&b->unwatched, wgen + 1, __ATOMIC_RELAXED);
		k->watcher = watcher;
		ret = pd_mr_cache_get_since(fab->cache, k, b->fd, gen, e);
		k->watcher = NULL;
		pd_watch_unpin(watcher, k->dev, k->ino, b->fd);
		if (ret != -ESTALE || attempt == 3)
			break;
	}
	return ret == -ESTALE ? pd_error(-EAGAIN, "pd_mr_reg_imported: revocations keep arriving; try again") : ret;
}

/*
 * An entry made while no device watched the dma-buf is registered again,
 * watched, once one is attached -- unless the attached ones already said
 * they cannot watch it.
 */
static bool hit_ok(const struct pd_mr_key *entry, const void *arg)
{
	const struct pd_dmabuf *b = arg;
	const struct pd_watch *w = b->fab->watch;

	return entry->origin || !pd_watch_count(w) ||
	       __atomic_load_n(&b->unwatched, __ATOMIC_RELAXED) == pd_watch_generation(w) + 1;
}

int pd_mr_reg_imported(struct pd_dmabuf *b, uint64_t offset, size_t len,
		       unsigned int access, struct pd_mr **out)
{
	struct pd_mr_cache_entry *e;
	struct pd_mr_key k;
	int ret;

	if (!b || !len || !out)
		return pd_error(-EINVAL, "pd_mr_reg_imported: %s", !b ? "handle is NULL" :
				!len ? "length is 0" : "out is NULL");
	if (pd_forked_since(b->fab->fork_gen))
		return pd_fork_refuse("pd_mr_reg_imported");
	ret = pd_mr_check_access("pd_mr_reg_imported", &access, b->readonly, b->fd);
	if (ret)
		return ret;
	if (offset + len < offset || (b->size && offset + len > b->size))
		return pd_error(-EINVAL, "pd_mr_reg_imported: [%llu, +%zu) is past the end of the %llu-byte dma-buf",
				(unsigned long long)offset, len, (unsigned long long)b->size);
	k = (struct pd_mr_key) {
		.kind = PD_MEM_DMABUF, .access = access, .path = __atomic_load_n(&b->fab->path, __ATOMIC_RELAXED),
		.readonly = b->readonly, .domain = b->fab->domain, .dev = b->dev,
		.ino = b->ino, .start = offset, .len = len, .origin = PD_ORIGIN_ANY,
	};
	ret = pd_mr_cache_find(b->fab->cache, &k, hit_ok, b, &e);
	k.origin = 0;
	if (ret)
		ret = reg_miss(b, &k, &e);
	if (ret)
		return ret;
	return pd_mr_wrap(b->fab, e, 0, len, access, out);
}
