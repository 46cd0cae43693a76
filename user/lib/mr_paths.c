// SPDX-License-Identifier: MIT
/*
 * The three ways dma-buf memory reaches the provider, tried in order when
 * the path is auto:
 *  1. dmabuf: FI_MR_DMABUF (libfabric >= 1.20 at run time, provider with
 *     FI_HMEM), zero copy for the NIC; base_addr comes from an mmap of the
 *     dma-buf because providers copy small messages with the CPU.  Taken
 *     whatever headers the library was built against (fi_compat.h).
 *  2. mapped: mmap the dma-buf once and register the mapping as host memory.
 *     Only for providers that copy with the CPU: the exporter's mmap is
 *     VM_PFNMAP, so a provider that pins pages (verbs) gets EFAULT.
 *  3. bounce: copy through the pre-registered staging pool, SYNC-bracketed.
 * Each registration records why it ended where it did.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_errno.h>

#include "abi.h"
#include "bounce_pool.h"
#include "errors.h"
#include "fabric.h"
#include "log.h"

static uint64_t fi_access(unsigned int access)
{
	uint64_t a = 0;

	if (access & PD_ACCESS_SEND)
		a |= FI_SEND;
	if (access & PD_ACCESS_RECV)
		a |= FI_RECV;
	if (access & PD_ACCESS_WRITE)
		a |= FI_WRITE;
	if (access & PD_ACCESS_REMOTE_WRITE)
		a |= FI_REMOTE_WRITE;
	return a;
}

static void note(struct pd_mr_reg *r, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void note(struct pd_mr_reg *r, const char *fmt, ...)
{
	size_t used = strlen(r->reason);
	va_list ap;

	if (used + 1 >= sizeof(r->reason))
		return;
	va_start(ap, fmt);
	vsnprintf(r->reason + used, sizeof(r->reason) - used, fmt, ap);
	va_end(ap);
}

/*
 * Keys must be unique per domain unless the provider picks them: every
 * registration of the library (the staging pool and probe buffer too)
 * takes one from here.  Not sequential: a peer that knows one key must not
 * be able to name the next registration.  A counter goes through a keyed
 * 4-round Feistel permutation of 32 bits (32: the smallest mr_key_size a
 * provider announces), so keys stay unique for 2^32 registrations and are
 * unpredictable without the process's random round keys.  Hardening, not
 * cryptography; providers that choose keys themselves (FI_MR_PROV_KEY:
 * verbs, efa, and libfabric's util providers) use their own.
 */
static uint32_t round_keys[4];
static pthread_once_t round_keys_once = PTHREAD_ONCE_INIT;

static void make_round_keys(void)
{
	uint64_t t = (uint64_t)time(NULL) ^ (uint64_t)getpid() << 32 ^ (uintptr_t)&t;

	if (getrandom(round_keys, sizeof(round_keys), GRND_NONBLOCK) != sizeof(round_keys)) {
		/* No entropy yet (early boot): better than a plain counter. */
		for (unsigned int i = 0; i < 4; i++) {
			t = t * 6364136223846793005ULL + 1442695040888963407ULL;
			round_keys[i] = (uint32_t)(t >> 32);
		}
	}
}

static uint32_t feistel_round(uint32_t half, uint32_t key)
{
	uint32_t x = (half ^ key) * 0x85ebca6bu;

	x ^= x >> 13;
	x *= 0xc2b2ae35u;
	return (x ^ (x >> 16)) & 0xffffu;
}

uint64_t pd_next_mr_key(void)
{
	static uint32_t counter;
	uint32_t v = __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED);
	uint32_t l = v >> 16, r = v & 0xffffu, t;
	unsigned int i;

	pthread_once(&round_keys_once, make_round_keys);
	for (i = 0; i < 4; i++) {
		t = r;
		r = l ^ feistel_round(r, round_keys[i]);
		l = t;
	}
	return (uint64_t)(l << 16 | r);
}

static int reg_virtual(struct pd_fabric *fab, struct pd_mr_reg *r, void *addr,
		       size_t len, unsigned int access)
{
	int ret = fi_mr_reg(fab->domain, addr, len, fi_access(access), 0,
			    pd_next_mr_key(), 0, &r->mr, NULL);

	if (ret)
		return ret;
	r->desc = fi_mr_desc(r->mr);
	r->rkey = fi_mr_key(r->mr);
	r->cpu = r->iobase = addr;
	r->rma_base = fab->virt_addr ? (uintptr_t)addr : 0;
	return 0;
}

static int reg_host(struct pd_fabric *fab, const struct pd_mr_key *k,
		    struct pd_mr_reg *r)
{
	int ret = reg_virtual(fab, r, (void *)(uintptr_t)k->start, k->len, k->access);

	if (ret)
		return pd_error(ret, "fi_mr_reg of host memory [0x%llx, +%llu) on %s: %s",
				(unsigned long long)k->start, (unsigned long long)k->len,
				fab->provider, fi_strerror(-ret));
	r->path = PD_PATH_HOST;
	note(r, "host memory");
	return 0;
}

/*
 * mmap the page-aligned range around [start, start + len) once; every path
 * needs it: dmabuf for base_addr, mapped for the registration, bounce for
 * the CPU copies.  A failure is kept in r->map_err, not returned: the
 * dmabuf path could do without a mapping if a provider never touched the
 * bytes with the CPU.
 */
static void map_dmabuf(const struct pd_mr_key *k, struct pd_mr_reg *r)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	uint64_t aligned = k->start & ~(uint64_t)(pg - 1);
	size_t delta = (size_t)(k->start - aligned);

	r->map_len = (delta + k->len + pg - 1) & ~(pg - 1);
	/* Mapped for what the registration does, no more: a read-only export
	 * cannot be mapped for writing, and one registered only to be read
	 * (sent, an RMA source) is not, so no path writes it by mistake. */
	bool writes = !k->readonly && (k->access & (PD_ACCESS_RECV | PD_ACCESS_REMOTE_WRITE));

	r->map = mmap(NULL, r->map_len, PROT_READ | (writes ? PROT_WRITE : 0), MAP_SHARED,
		      r->fd, (off_t)aligned);
	if (r->map == MAP_FAILED) {
		r->map = NULL;
		r->map_err = -errno;
		return;
	}
	/* A forked child does not get the mapping: it would keep the
	 * dma-buf's memory alive as long as the child lives. */
	madvise(r->map, r->map_len, MADV_DONTFORK);
	r->cpu = r->iobase = (char *)r->map + delta;
}

/* Why the fabric takes no FI_MR_DMABUF registration at all, or 0. */
static int dmabuf_refusal(const struct pd_fabric *fab, char *why, size_t len)
{
	if (!pd_fi_has_dmabuf(fab->fi_api))
		snprintf(why, len, "libfabric %u.%u (loaded at run time) without FI_MR_DMABUF (needs 1.20)",
			 FI_MAJOR(fab->fi_runtime), FI_MINOR(fab->fi_runtime));
	else if (fab->hmem_unasked)
		snprintf(why, len, "FI_HMEM not asked of %s: %s", fab->provider, fab->hmem_unasked);
	else if (!fab->hmem)
		snprintf(why, len, "provider %s lacks FI_HMEM", fab->provider);
	else
		return 0;
	return -EOPNOTSUPP;
}

/*
 * Where a dma-buf registration on this fabric will land, and why (the
 * fabric-open log line): reg_dmabuf's order, for a dma-buf that can be
 * mmapped.
 */
enum pd_path pd_paths_plan(const struct pd_fabric *fab, char *why, size_t len)
{
	enum pd_path forced = __atomic_load_n(&fab->path, __ATOMIC_RELAXED);
	char refusal[256];

	if (forced != PD_PATH_AUTO) {
		snprintf(why, len, "forced (PEERDIRECT_PATH or the fabric's attr)");
		return forced;
	}
	if (!dmabuf_refusal(fab, refusal, sizeof(refusal))) {
		snprintf(why, len, "FI_MR_DMABUF on %s, base_addr from an mmap of the dma-buf",
			 fab->provider);
		return PD_PATH_DMABUF;
	}
	if (fab->cpu_mover) {
		snprintf(why, len, "dmabuf: %s; mapped: provider %s copies with the CPU", refusal,
			 fab->provider);
		return PD_PATH_MAPPED;
	}
	snprintf(why, len, "dmabuf: %s; mapped: %s must pin pages and cannot pin the VM_PFNMAP mapping; bounce: staged through %zu x %zu B registered host slots",
		 refusal, fab->provider, fab->bounce_slots, fab->chunk);
	return PD_PATH_BOUNCE;
}

static int try_dmabuf_mr(struct pd_fabric *fab, const struct pd_mr_key *k,
			 struct pd_mr_reg *r)
{
	/*
	 * libfabric's base_addr is the virtual address of the dma-buf's byte 0,
	 * so base_addr + offset is the first registered byte.  Util-based
	 * providers (tcp, shm, rxm, rxd) turn the registration into the iov
	 * {base_addr + offset, len} (ofi_mr_get_iov_from_dmabuf): RMA targets
	 * are checked against it and written through it, and eager, inject and
	 * SAR copies read it with the CPU.  Only the range is mapped, so byte 0
	 * may lie outside the mapping; only the sum is ever dereferenced.
	 */
	struct pd_fi_mr_dmabuf dmabuf = {
		.fd = r->fd, .offset = k->start, .len = k->len,
	};
	/* Our copy of the ABI (fi_compat.h), whole and zeroed past these. */
	struct pd_fi_mr_attr attr = {
		.dmabuf = &dmabuf, .iov_count = 1, .access = fi_access(k->access),
		.iface = FI_HMEM_SYSTEM,
	};
	char why[256];
	int ret;

	if (dmabuf_refusal(fab, why, sizeof(why))) {
		note(r, "dmabuf: %s; ", why);
		return -EOPNOTSUPP;
	}
	/* No provider here is known to leave every byte to the NIC: a NULL
	 * base_addr would have them copy from the address 'offset'. */
	if (r->map_err) {
		note(r, "dmabuf: the dma-buf cannot be mmapped (%s), and %s copies some messages with the CPU from base_addr + offset; ",
		     strerror(-r->map_err), fab->provider);
		return -EOPNOTSUPP;
	}
	dmabuf.base_addr = (void *)((uintptr_t)r->cpu - (uintptr_t)k->start);
	attr.requested_key = pd_next_mr_key();
	ret = fi_mr_regattr(fab->domain, (const struct fi_mr_attr *)(const void *)&attr,
			    PD_FI_MR_DMABUF, &r->mr);
	if (ret) {
		r->mr = NULL;
		note(r, "dmabuf: fi_mr_regattr(FI_MR_DMABUF) on %s: %s; ", fab->provider,
		     fi_strerror(-ret));
		return ret;
	}
	r->desc = fi_mr_desc(r->mr);
	r->rkey = fi_mr_key(r->mr);
	/* Buffers are posted at their CPU address (r->iobase from the mapping),
	 * and with FI_MR_VIRT_ADDR the peer targets that same address. */
	r->rma_base = fab->virt_addr ? (uintptr_t)r->cpu : 0;
	return 0;
}

static int reg_dmabuf(struct pd_fabric *fab, const struct pd_mr_key *k, int fd,
		      struct pd_mr_reg *r)
{
	enum pd_path want = (enum pd_path)k->path;
	struct pd_bounce_pool *pool;
	int ret;

	r->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (r->fd < 0)
		return pd_error(-errno, "dma-buf fd %d: %s", fd, strerror(errno));
	pd_fork_track(&r->own_fd, &r->fd);
	if (want != PD_PATH_AUTO)
		note(r, "forced (PEERDIRECT_PATH or pd_fabric_set_path); ");
	map_dmabuf(k, r);

	if (want == PD_PATH_AUTO || want == PD_PATH_DMABUF) {
		ret = try_dmabuf_mr(fab, k, r);
		if (!ret) {
			r->path = PD_PATH_DMABUF;
			note(r, "FI_MR_DMABUF on %s, base_addr from an mmap of the dma-buf",
			     fab->provider);
			return 0;
		}
		if (want == PD_PATH_DMABUF)
			return pd_error(ret, "forced path dmabuf is impossible: %s", r->reason);
	}

	if (r->map_err)
		return pd_error(r->map_err, "mmap of dma-buf fd %d [%llu, +%llu): %s (the mapped and bounce paths need CPU access; %s)",
				fd, (unsigned long long)k->start, (unsigned long long)k->len,
				strerror(-r->map_err), r->reason);

	if (want == PD_PATH_MAPPED || (want == PD_PATH_AUTO && fab->cpu_mover)) {
		ret = reg_virtual(fab, r, r->cpu, k->len, k->access);
		if (!ret) {
			r->path = PD_PATH_MAPPED;
			note(r, "mapped: provider %s copies with the CPU", fab->provider);
			return 0;
		}
		if (want == PD_PATH_MAPPED)
			return pd_error(ret, "forced path mapped is impossible: fi_mr_reg of the dma-buf mapping on %s: %s%s",
					fab->provider, fi_strerror(-ret),
					ret == -EFAULT ? " (the mapping is VM_PFNMAP and cannot be pinned)" : "");
		note(r, "mapped: fi_mr_reg of the mapping: %s; ", fi_strerror(-ret));
	} else if (want == PD_PATH_AUTO) {
		note(r, "mapped: skipped, %s must pin pages (DMA or cross-process copy) and cannot pin the VM_PFNMAP mapping; ",
		     fab->provider);
	}

	ret = pd_fabric_bounce_pool(fab, &pool);
	if (ret)
		return ret;
	r->path = PD_PATH_BOUNCE;
	r->iobase = NULL;
	r->rma_base = 0;
	note(r, "bounce: staged through %zu x %zu B registered host slots", fab->bounce_slots,
	     fab->chunk);
	if (want == PD_PATH_AUTO)
		pd_log_rl(PD_LOG_WARN, "dma-buf fd %d [%llu, +%llu) on %s falls back to bounce: %s",
			  fd, (unsigned long long)k->start, (unsigned long long)k->len,
			  fab->provider, r->reason);
	return 0;
}

void pd_paths_deregister(void *ctx, void *handle)
{
	struct pd_mr_reg *r = handle;

	(void)ctx;
	if (!r)
		return;
	if (r->mr)
		fi_close(&r->mr->fid);
	if (r->map)
		munmap(r->map, r->map_len);
	if (r->watcher)
		pd_watch_release(r->watcher, r->st_dev, r->st_ino, r->fd);
	if (r->fd >= 0) {
		pd_fork_untrack(&r->own_fd);
		close(r->fd);
	}
	free(r);
}

int pd_paths_register(void *ctx, const struct pd_mr_key *k, int fd,
		      void **handle)
{
	struct pd_fabric *fab = ctx;
	struct pd_mr_reg *r = calloc(1, sizeof(*r));
	int ret;

	if (!r)
		return pd_error(-ENOMEM, "registration: out of memory");
	r->fab = fab;
	r->fd = -1;
	ret = k->kind == PD_MEM_HOST ? reg_host(fab, k, r) : reg_dmabuf(fab, k, fd, r);
	if (ret) {
		pd_paths_deregister(fab, r);
		return ret;
	}
	pd_log(PD_LOG_DEBUG, "registered %s [0x%llx, +%llu) on %s: path %s: %s",
		  k->kind == PD_MEM_HOST ? "host memory" : "a dma-buf",
		  (unsigned long long)k->start, (unsigned long long)k->len, fab->provider,
		  pd_path_name(r->path), r->reason);
	/* The entry keeps its dma-buf's record, and so its subscription. */
	if (k->kind == PD_MEM_DMABUF && k->watcher) {
		r->watcher = k->watcher;
		pd_watch_hold(r->watcher, k->dev, k->ino);
		r->st_dev = k->dev;
		r->st_ino = k->ino;
	}
	*handle = r;
	return 0;
}

/* What reaches the memory from outside: the peer's RMA, and receives. */
#define PD_ACCESS_WRITES_MEMORY	(PD_ACCESS_RECV | PD_ACCESS_REMOTE_WRITE)

/*
 * 0 is the least privilege that still moves data: local send, receive and
 * RMA source, never a peer's write (that takes PD_ACCESS_REMOTE_WRITE
 * named).  Memory the caller may only read (a read-only export) gets
 * nothing that writes it.
 */
int pd_mr_check_access(const char *fn, unsigned int *access, bool readonly, int fd)
{
	if (*access & ~PD_ACCESS_ALL)
		return pd_error(-EINVAL, "%s: unknown access bits 0x%x", fn,
				*access & ~PD_ACCESS_ALL);
	if (!*access)
		*access = (PD_ACCESS_SEND | PD_ACCESS_RECV | PD_ACCESS_WRITE) &
			  ~(readonly ? PD_ACCESS_WRITES_MEMORY : 0u);
	if (readonly && (*access & PD_ACCESS_WRITES_MEMORY))
		return pd_error(-EACCES, "%s: dma-buf fd %d is read-only (exported without PD_EXPORT_RDWR): it can be registered for PD_ACCESS_SEND and PD_ACCESS_WRITE only, not 0x%x",
				fn, fd, *access & PD_ACCESS_WRITES_MEMORY);
	return 0;
}

/* The dma-buf's length: st_size for a file (a memfd stand-in), else what
 * lseek(SEEK_END) answers (a dma-buf's size; its position does not move).
 * 0: unknown. */
uint64_t pd_dmabuf_size(int fd, const struct stat *st)
{
	off_t end;

	if (S_ISREG(st->st_mode))
		return (uint64_t)st->st_size;
	end = lseek(fd, 0, SEEK_END);
	return end > 0 ? (uint64_t)end : 0;
}

/* delta: where the user's range starts inside the cached registration. */
int pd_mr_wrap(struct pd_fabric *fab, struct pd_mr_cache_entry *e, size_t delta,
		size_t len, unsigned int access, struct pd_mr **out)
{
	struct pd_mr_reg *r = pd_mr_entry_handle(e);
	struct pd_mr *mr = malloc(sizeof(*mr));

	if (!mr) {
		pd_mr_cache_put(fab->cache, e);
		return pd_error(-ENOMEM, "registration: out of memory");
	}
	*mr = (struct pd_mr) { .fab = fab, .entry = e, .reg = r, .delta = delta, .len = len,
			      .access = access };
	pd_fabric_get(fab);
	*out = mr;
	return 0;
}

int pd_mr_reg_host(struct pd_fabric *fab, void *ptr, size_t len,
		   unsigned int access, struct pd_mr **out)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	struct pd_mr_cache_entry *e;
	struct pd_mr_key k = { .kind = PD_MEM_HOST };
	uintptr_t start = (uintptr_t)ptr;
	int ret;

	if (!fab || !ptr || !len || !out)
		return pd_error(-EINVAL, "pd_mr_reg_host: %s", !fab ? "fabric is NULL" :
				!ptr ? "ptr is NULL" : !len ? "length is 0" : "out is NULL");
	if (pd_forked_since(fab->fork_gen))
		return pd_fork_refuse("pd_mr_reg_host");
	ret = pd_mr_check_access("pd_mr_reg_host", &access, false, -1);
	if (ret)
		return ret;
	if (start + len < start)
		return pd_error(-EINVAL, "pd_mr_reg_host: range wraps around");
	/* Whole pages: neighbours in the same pages then hit the same entry.
	 * Not an RMA target: a peer may write exactly the bytes asked for,
	 * not their neighbours in the same pages. */
	if (access & PD_ACCESS_REMOTE_WRITE) {
		k.start = start;
		k.len = len;
	} else {
		k.start = start & ~(uintptr_t)(pg - 1);
		k.len = ((start + len + pg - 1) & ~(uintptr_t)(pg - 1)) - k.start;
	}
	k.access = access;
	k.domain = fab->domain;
	ret = pd_mr_cache_get(fab->cache, &k, -1, &e);
	if (ret)
		return ret;
	return pd_mr_wrap(fab, e, start - pd_mr_entry_key(e)->start, len, access, out);
}

/* fd is our own dup of the caller's fd (named by its number in messages). */
static int reg_dmabuf_fd(struct pd_fabric *fab, int fd, int user_fd, uint64_t offset,
			 size_t len, unsigned int access, struct pd_mr **out)
{
	struct pd_monitor *watcher;
	struct pd_mr_cache_entry *e;
	struct pd_mr_key k = { .kind = PD_MEM_DMABUF };
	unsigned int attempt;
	struct stat st;
	uint64_t gen, size;
	int ret, fl;

	fl = fcntl(fd, F_GETFL);
	if (fl < 0)
		return pd_error(-errno, "pd_mr_reg_dmabuf: fd %d: %s", user_fd, strerror(errno));
	k.readonly = (fl & O_ACCMODE) == O_RDONLY;
	ret = pd_mr_check_access("pd_mr_reg_dmabuf", &access, k.readonly, fd);
	if (ret)
		return ret;
	if (offset + len < offset)
		return pd_error(-EINVAL, "pd_mr_reg_dmabuf: range wraps around");
	for (attempt = 0;; attempt++) {
		/* Pending revocations first; then the generation, before the
		 * key is resolved: a revocation after this point is caught by
		 * the cache even if it lands before the miss registers. */
		if (pd_watch_count(fab->watch))
			pd_fabric_poll_events(fab);
		gen = pd_mr_cache_generation(fab->cache);
		if (fstat(fd, &st))
			return pd_error(-errno, "pd_mr_reg_dmabuf: fd %d: %s", user_fd,
					strerror(errno));
		size = pd_dmabuf_size(fd, &st);
		if (size && offset + len > size)
			return pd_error(-EINVAL, "pd_mr_reg_dmabuf: [%llu, +%zu) is past the end of the %llu-byte dma-buf",
					(unsigned long long)offset, len, (unsigned long long)size);
		k.dev = st.st_dev;
		k.ino = st.st_ino;
		k.start = offset;
		k.len = len;
		k.access = access;
		k.path = __atomic_load_n(&fab->path, __ATOMIC_RELAXED);
		k.domain = fab->domain;
		ret = pd_watch_resolve(fab->watch, fd, k.dev, k.ino, &k.origin, &watcher);
		if (ret)
			return ret;
		k.watcher = watcher;
		ret = pd_mr_cache_get_since(fab->cache, &k, fd, gen, &e);
		pd_watch_unpin(watcher, k.dev, k.ino, fd);
		if (ret != -ESTALE || attempt == 3)
			break;
	}
	if (ret)
		return ret == -ESTALE ? pd_error(-EAGAIN, "pd_mr_reg_dmabuf: revocations keep arriving; try again") : ret;
	return pd_mr_wrap(fab, e, 0, len, access, out);
}

/*
 * Another thread of the caller may close the fd number and open something
 * else under it while this runs: the identity is read from, and the
 * registration made through, one dup, so they cannot name two files.
 */
int pd_mr_reg_dmabuf(struct pd_fabric *fab, int fd, uint64_t offset,
		     size_t len, unsigned int access, struct pd_mr **out)
{
	struct pd_owned_fd owned;
	int own, ret;

	if (!fab || !len || !out)
		return pd_error(-EINVAL, "pd_mr_reg_dmabuf: %s", !fab ? "fabric is NULL" :
				!len ? "length is 0" : "out is NULL");
	if (pd_forked_since(fab->fork_gen))
		return pd_fork_refuse("pd_mr_reg_dmabuf");
	own = fd < 0 ? -1 : fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (own < 0)
		return pd_error(fd < 0 ? -EBADF : -errno, "pd_mr_reg_dmabuf: fd %d: %s", fd,
				strerror(fd < 0 ? EBADF : errno));
	/* A fork meanwhile must not leave the child holding the dma-buf. */
	pd_fork_track(&owned, &own);
	ret = reg_dmabuf_fd(fab, own, fd, offset, len, access, out);
	pd_fork_untrack(&owned);
	if (own >= 0)
		close(own);
	return ret;
}

/* Requests on mr hold the entry themselves: releasing the handle first is
 * safe, the registration goes when the last of them is done. */
void pd_mr_dereg(struct pd_mr *mr)
{
	struct pd_fabric *fab;

	/* A forked child's copy: deregistering would close the parent's
	 * provider objects; the child's memory is all it holds. */
	if (!mr || pd_forked_since(mr->fab->fork_gen))
		return;
	fab = mr->fab;
	pd_mr_cache_put(fab->cache, mr->entry);
	free(mr);
	pd_fabric_put(fab);
}

enum pd_path pd_mr_path(const struct pd_mr *mr)
{
	return mr ? mr->reg->path : PD_PATH_AUTO;
}

const char *pd_mr_reason(const struct pd_mr *mr)
{
	return mr ? mr->reg->reason : "";
}

void *pd_mr_cpu_ptr(const struct pd_mr *mr)
{
	return mr ? pd_mr_cpu(mr) : NULL;
}

int pd_mr_rkey_sz(const struct pd_mr *mr, struct pd_rkey *out, size_t size,
		  size_t *filled)
{
	struct pd_rkey rk;

	if (!mr || !out)
		return pd_error(-EINVAL, "pd_mr_rkey: NULL argument");
	if (!mr->reg->mr)
		return pd_error(-EOPNOTSUPP, "pd_mr_rkey: a %s-path registration cannot be an RMA target (%s)",
				pd_path_name(mr->reg->path), mr->reg->reason);
	if (!(mr->access & PD_ACCESS_REMOTE_WRITE))
		return pd_error(-EACCES, "pd_mr_rkey: the registration does not allow PD_ACCESS_REMOTE_WRITE (access 0 grants local access only): register with it to be an RMA target");
	rk = (struct pd_rkey) { .addr = pd_mr_rma_addr(mr), .key = mr->reg->rkey, .len = mr->len };
	return pd_copy_out("pd_mr_rkey", out, size, &rk, sizeof(rk), PD_RKEY_SIZE_1_0, filled);
}

int pd_mr_invalidate_host(struct pd_fabric *fab, const void *ptr, size_t len)
{
	if (!fab || !ptr || !len)
		return pd_error(-EINVAL, "pd_mr_invalidate_host: %s", !fab ? "fabric is NULL" :
				!ptr ? "ptr is NULL" : "length is 0");
	return (int)pd_mr_cache_invalidate_host(fab->cache, fab->domain,
						(uintptr_t)ptr, len);
}
