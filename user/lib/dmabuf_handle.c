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
#include "device.h"
#include "fabric.h"

struct pd_dmabuf {
	struct pd_fabric *fab;
	int fd;			/* our dup: the inode cannot be reused */
	bool readonly;
	uint64_t dev, ino, size;	/* size 0: unknown */
};

int pd_dmabuf_import(struct pd_fabric *fab, int fd, struct pd_dmabuf **out)
{
	struct pd_dmabuf *b;
	struct stat st;
	int fl;

	if (!fab || !out)
		return pd_error(-EINVAL, "pd_dmabuf_import: %s", !fab ? "fabric is NULL" : "out is NULL");
	fl = fd < 0 ? -1 : fcntl(fd, F_GETFL);
	if (fl < 0 || fstat(fd, &st))
		return pd_error(fd < 0 ? -EBADF : -errno, "pd_dmabuf_import: fd %d: %s", fd,
				strerror(fd < 0 ? EBADF : errno));
	b = calloc(1, sizeof(*b));
	if (!b)
		return pd_error(-ENOMEM, "pd_dmabuf_import: out of memory");
	b->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (b->fd < 0) {
		free(b);
		return pd_error(-errno, "pd_dmabuf_import: dup of fd %d: %s", fd, strerror(errno));
	}
	b->fab = fab;
	b->readonly = (fl & O_ACCMODE) == O_RDONLY;
	b->dev = st.st_dev;
	b->ino = st.st_ino;
	b->size = pd_dmabuf_size(fd, &st);
	pd_fabric_get(fab);
	*out = b;
	return 0;
}

void pd_dmabuf_release(struct pd_dmabuf *b)
{
	if (!b)
		return;
	close(b->fd);
	pd_fabric_put(b->fab);
	free(b);
}

/* The miss: as pd_mr_reg_dmabuf, with the identity already known. */
static int reg_miss(struct pd_dmabuf *b, struct pd_mr_key *k, struct pd_mr_cache_entry **e)
{
	struct pd_fabric *fab = b->fab;
	struct pd_device *watcher;
	unsigned int attempt;
	uint64_t gen;
	int ret;

	for (attempt = 0;; attempt++) {
		if (__atomic_load_n(&fab->ndevs, __ATOMIC_RELAXED))
			pd_fabric_poll_events(fab);
		gen = pd_mr_cache_generation(fab->cache);
		ret = pd_fabric_origin_of(fab, b->fd, k->dev, k->ino, &k->origin, &watcher);
		if (ret)
			break;
		k->watcher = watcher;
		ret = pd_mr_cache_get_since(fab->cache, k, b->fd, gen, e);
		k->watcher = NULL;
		pd_fabric_origin_unpin(watcher, k->dev, k->ino, b->fd);
		if (ret != -ESTALE || attempt == 3)
			break;
	}
	return ret == -ESTALE ? pd_error(-EAGAIN, "pd_mr_reg_imported: revocations keep arriving; try again") : ret;
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
	ret = pd_mr_check_access("pd_mr_reg_imported", &access, b->readonly, b->fd);
	if (ret)
		return ret;
	if (offset + len < offset || (b->size && offset + len > b->size))
		return pd_error(-EINVAL, "pd_mr_reg_imported: [%llu, +%zu) is past the end of the %llu-byte dma-buf",
				(unsigned long long)offset, len, (unsigned long long)b->size);
	k = (struct pd_mr_key) {
		.kind = PD_MEM_DMABUF, .access = access, .path = b->fab->path,
		.readonly = b->readonly, .domain = b->fab->domain, .dev = b->dev,
		.ino = b->ino, .start = offset, .len = len, .origin = PD_ORIGIN_ANY,
	};
	ret = pd_mr_cache_find(b->fab->cache, &k, &e);
	/* Made while no device watched the dma-buf, and one is attached now:
	 * register it again, watched. */
	if (!ret && !pd_mr_entry_key(e)->origin &&
	    __atomic_load_n(&b->fab->ndevs, __ATOMIC_RELAXED)) {
		pd_mr_cache_put(b->fab->cache, e);
		ret = -ENOENT;
	}
	k.origin = 0;
	if (ret)
		ret = reg_miss(b, &k, &e);
	if (ret)
		return ret;
	return pd_mr_wrap(b->fab, e, 0, len, access, out);
}
