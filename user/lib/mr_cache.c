// SPDX-License-Identifier: MIT
/*
 * The registration cache.  libfabric's own MR cache skips dma-buf memory
 * (OFI_MR_NOCACHE) and aws-ofi-nccl's has no LRU, limits or invalidation, so
 * we keep ours:
 *  - a chained hash table: dma-buf entries hash their whole key.  Host
 *    entries live on one of HOST_LEVELS granule sizes (4 KiB, 64 KiB, ...,
 *    x16 each), the smallest that is at least their length, linked under the
 *    one or two granules they touch; a containment lookup probes the granule
 *    of its start address on each non-empty level from its own size up.
 *    One fixed granule would not do: 10k page-sized buffers in one 2 MiB
 *    granule make a 512-entry chain;
 *  - LRU eviction approximated by CLOCK over the cached entries (in-use
 *    entries are never evicted): a hit sets a bit in its own entry instead
 *    of relinking a list, whose neighbours are cold cache lines;
 *  - caps on entries and bytes; an entry that cannot fit because everything
 *    else is in use, or that is larger than the byte cap, is handed out
 *    uncached and deregistered on release (it still gets invalidations);
 *  - registration and deregistration never run under the lock (they take
 *    milliseconds and may re-enter libfabric).  A miss puts a pending entry
 *    in the table first: concurrent misses on its key wait for it (single
 *    flight), and an invalidation that matches it while it registers marks
 *    it, so the registration is not inserted as valid;
 *  - every dma-buf invalidation is logged with a generation number, for
 *    callers that resolved their key before the miss
 *    (pd_mr_cache_get_since); host invalidations are not, as only dma-buf
 *    keys are checked and they would push revocations out of the log;
 *  - a registration failing for lack of resources evicts every idle entry
 *    and is retried once.
 */
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "errors.h"
#include "list.h"
#include "mr_cache.h"
#include "log.h"
#include "slab.h"

#define HOST_LEVELS 10
#define HOST_SHIFT(level) (12 + 4 * (level))
#define MIN_BUCKETS 64
#define INVAL_LOG 64
#define MAX_ATTEMPTS 8

struct hlink {
	struct hlink *next;
	uint64_t hkey;
	struct pd_mr_cache_entry *e;
};

enum entry_state { PENDING, READY, FAILED };

/*
 * A hit reads the first link, the state and the key, and wraps the handle:
 * those come first, and entries are cache-line aligned (entry_new), so a
 * hit touches two lines of the entry rather than three or four.  With
 * thousands of live entries each line is a miss (performance goal P3).
 */
struct pd_mr_cache_entry {
	struct hlink link0;
	void *handle;
	unsigned int refs;	/* holders, and waiters while PENDING */
	uint8_t state;		/* enum entry_state */
	bool hashed;		/* in the table: reachable by lookups */
	bool cached;		/* counted in the caps; on the LRU when idle */
	bool invalid;		/* revoked; read without the lock */
	bool stale;		/* host range invalidated while registering */
	bool referenced;	/* used since CLOCK last passed it */
	bool cap_evicted;	/* retired to stay within a cap: logged at release */
	bool in_slab;		/* from the cache's slab, not malloc */
	uint32_t inval_reason;
	struct pd_mr_key key;
	struct pd_list lru;	/* cached, in use or idle, in CLOCK order */
	struct pd_list all;	/* every entry not yet freed, for invalidations */
	size_t nlinks;
	struct hlink more[];	/* links 1 .. nlinks-1: host ranges over granules */
};

#define ENTRY_ALIGN 64
_Static_assert(offsetof(struct pd_mr_cache_entry, key.origin) + sizeof(uint64_t) <= 2 * ENTRY_ALIGN,
	       "a hit must stay within the entry's first two cache lines");

/* Entries with up to SLAB_LINKS links (every dma-buf entry, every host
 * entry but a long top-level one) come from the cache's slab. */
#define SLAB_LINKS 2
#define SLAB_SIZE (sizeof(struct pd_mr_cache_entry) + (SLAB_LINKS - 1) * sizeof(struct hlink))

static struct hlink *entry_link(struct pd_mr_cache_entry *e, size_t i)
{
	return i ? &e->more[i - 1] : &e->link0;
}

/* What one invalidation covers: a dma-buf, a device's dma-bufs, or a host
 * range. */
struct inval_match {
	enum pd_mem_kind kind;
	uint64_t dev, ino;	/* dma-buf, when origin is 0 */
	uint64_t origin;	/* every dma-buf of this device */
	const void *domain;
	uint64_t start, len;
	uint32_t reason;
};

struct pd_mr_cache {
	pthread_mutex_t lock;
	pthread_cond_t done;	/* a pending entry left PENDING */
	struct pd_mr_cache_ops ops;
	struct hlink **buckets;
	size_t nbuckets, nlinks;
	struct pd_list lru, all;
	size_t max_entries, max_bytes;
	size_t entries, bytes;
	/* Of those, held now: eviction cannot make room they take. */
	size_t busy_entries, busy_bytes;
	size_t host_level_entries[HOST_LEVELS];
	struct pd_slab slab;	/* of entries */
	bool retain_idle_host;
	unsigned int waiters;
	uint64_t gen;		/* dma-buf invalidations so far */
	struct inval_match log[INVAL_LOG];	/* the last ones, by gen % INVAL_LOG */
	struct pd_cache_stats st;
};

#define entry_of(ptr, member) \
	((struct pd_mr_cache_entry *)((char *)(ptr) - offsetof(struct pd_mr_cache_entry, member)))

static uint64_t mix(uint64_t h, uint64_t v)
{
	h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdULL;
	return h ^ (h >> 33);
}

/* Every hit computes this: independent multiplies, one final mix, rather
 * than a chain of six mixes (a fifth of a hit's time). */
static uint64_t dmabuf_hash(const struct pd_mr_key *k)
{
	uint64_t h = k->dev * 0x9e3779b97f4a7c15ULL;

	h ^= k->ino * 0xc2b2ae3d27d4eb4fULL;
	h ^= k->start * 0x165667b19e3779f9ULL;
	h ^= k->len * 0xd6e8feb86659fd93ULL;
	h ^= (((uint64_t)k->access << 32) | k->path | (uint64_t)k->readonly << 31) *
	     0x27d4eb2f165667c5ULL;
	return mix(h, (uintptr_t)k->domain);
}

static uint64_t host_hash(const void *domain, unsigned int level, uint64_t granule)
{
	return mix(mix(1 + level, (uintptr_t)domain), granule);
}

static unsigned int host_level(uint64_t len)
{
	unsigned int level = 0;

	while (level < HOST_LEVELS - 1 && len > 1ULL << HOST_SHIFT(level))
		level++;
	return level;
}

/*
 * a is an entry's key, b the one looked up.  The origin (which device
 * reports the dma-buf's revocation) is not hashed but must match, unless b
 * takes any: an entry made while no device watched the dma-buf must not
 * serve a registration that a device watches now.
 */
static bool dmabuf_match(const struct pd_mr_key *a, const struct pd_mr_key *b)
{
	return a->kind == b->kind && a->dev == b->dev && a->ino == b->ino &&
	       a->start == b->start && a->len == b->len &&
	       a->access == b->access && a->path == b->path &&
	       a->readonly == b->readonly && a->domain == b->domain &&
	       (b->origin == PD_ORIGIN_ANY || a->origin == b->origin);
}

/*
 * An entry a peer may write serves only the same registration again: a
 * containing one would hand a smaller handle its bigger window, and a
 * handle without remote access would keep it writable after its own
 * registration went.
 */
static bool host_contains(const struct pd_mr_key *e, const struct pd_mr_key *k)
{
	if ((e->access | k->access) & PD_ACCESS_REMOTE_WRITE)
		return e->kind == PD_MEM_HOST && e->domain == k->domain &&
		       e->start == k->start && e->len == k->len && e->access == k->access;
	return e->kind == PD_MEM_HOST && e->domain == k->domain &&
	       e->start <= k->start && k->start + k->len <= e->start + e->len &&
	       (e->access & k->access) == k->access;
}

/* Hashed entries that are not invalid: ready ones, and pending ones (whose
 * registration a lookup waits for). */
static bool usable_locked(const struct pd_mr_cache_entry *e)
{
	return !e->invalid && !e->stale;
}

static struct pd_mr_cache_entry *lookup_locked(struct pd_mr_cache *c,
					       const struct pd_mr_key *k)
{
	unsigned int level = 0;
	struct hlink *l;
	uint64_t h;

	if (k->kind != PD_MEM_HOST) {
		h = dmabuf_hash(k);
		l = c->buckets[h & (c->nbuckets - 1)];
		/* A dma-buf entry's only link is its first bytes: fetch the
		 * key's line together with the link's, not after it (for a
		 * host entry's later link it is a harmless stray prefetch). */
		if (l)
			__builtin_prefetch((const void *)((uintptr_t)l + ENTRY_ALIGN));
		for (; l; l = l->next) {
			if (l->hkey == h && usable_locked(l->e) && dmabuf_match(&l->e->key, k))
				return l->e;
		}
		return NULL;
	}
	/* Levels below the request's own size hold only shorter entries. */
	for (level = host_level(k->len); level < HOST_LEVELS; level++) {
		if (!c->host_level_entries[level])
			continue;
		h = host_hash(k->domain, level, k->start >> HOST_SHIFT(level));
		for (l = c->buckets[h & (c->nbuckets - 1)]; l; l = l->next) {
			if (l->hkey == h && usable_locked(l->e) && host_contains(&l->e->key, k))
				return l->e;
		}
	}
	return NULL;
}

static void grow_locked(struct pd_mr_cache *c)
{
	size_t n = c->nbuckets * 2, i;
	struct hlink **b = calloc(n, sizeof(*b));

	if (!b)		/* longer chains, still correct */
		return;
	for (i = 0; i < c->nbuckets; i++) {
		struct hlink *l = c->buckets[i], *next;

		for (; l; l = next) {
			next = l->next;
			l->next = b[l->hkey & (n - 1)];
			b[l->hkey & (n - 1)] = l;
		}
	}
	free(c->buckets);
	c->buckets = b;
	c->nbuckets = n;
}

static void hash_locked(struct pd_mr_cache *c, struct pd_mr_cache_entry *e)
{
	size_t i;

	/* At most half full: at 1 link per bucket a hit walked 1.31 links on
	 * average, each another entry's cache line; at 1/2, 1.15. */
	if (2 * (c->nlinks + e->nlinks) > c->nbuckets)
		grow_locked(c);
	for (i = 0; i < e->nlinks; i++) {
		struct hlink *l = entry_link(e, i);
		struct hlink **b = &c->buckets[l->hkey & (c->nbuckets - 1)];

		l->next = *b;
		*b = l;
	}
	c->nlinks += e->nlinks;
	if (e->key.kind == PD_MEM_HOST)
		c->host_level_entries[host_level(e->key.len)]++;
	e->hashed = true;
}

/* A cached entry became held (1) or idle (-1). */
static void busy_account(struct pd_mr_cache *c, const struct pd_mr_cache_entry *e, int dir)
{
	c->busy_entries += (size_t)dir;
	c->busy_bytes += (size_t)dir * e->key.len;
}

/* Out of the table, and out of the caps if it counted there. */
static void unhash_locked(struct pd_mr_cache *c, struct pd_mr_cache_entry *e)
{
	size_t i;

	if (e->hashed) {
		for (i = 0; i < e->nlinks; i++) {
			struct hlink *l = entry_link(e, i);
			struct hlink **p = &c->buckets[l->hkey & (c->nbuckets - 1)];

			while (*p != l)
				p = &(*p)->next;
			*p = l->next;
		}
		c->nlinks -= e->nlinks;
		if (e->key.kind == PD_MEM_HOST)
			c->host_level_entries[host_level(e->key.len)]--;
		e->hashed = false;
	}
	if (e->cached) {
		pd_list_del(&e->lru);
		c->entries--;
		c->bytes -= e->key.len;
		if (e->refs)
			busy_account(c, e, -1);
		e->cached = false;
	}
}

/* Gone from every list; deregistered by release_victims. */
static void retire_locked(struct pd_mr_cache *c, struct pd_mr_cache_entry *e,
			  struct pd_list *victims)
{
	unhash_locked(c, e);
	pd_list_del(&e->all);
	pd_list_add_tail(victims, &e->lru);
	c->st.dereg_count++;
}

static bool over_caps(const struct pd_mr_cache *c, size_t add_entries,
		      size_t add_bytes)
{
	return c->entries + add_entries > c->max_entries ||
	       c->bytes + add_bytes > c->max_bytes;
}

/*
 * Retires idle entries onto victims until the caps hold with room for
 * add_*; all = true retires every idle one.  CLOCK: the oldest goes unless
 * it is in use or was used since it last came round, which sends it to the
 * back (and clears the mark).  Every entry comes round at most twice.
 */
static void evict_locked(struct pd_mr_cache *c, size_t add_entries,
			 size_t add_bytes, bool all, struct pd_list *victims)
{
	size_t budget = 2 * c->entries + 1;

	while (!pd_list_empty(&c->lru) && budget-- &&
	       (all || over_caps(c, add_entries, add_bytes))) {
		struct pd_mr_cache_entry *e = entry_of(c->lru.next, lru);

		if (e->refs || (e->referenced && !all)) {
			e->referenced = false;
			pd_list_del(&e->lru);
			pd_list_add_tail(&c->lru, &e->lru);
			continue;
		}
		retire_locked(c, e, victims);
		/* all: the provider ran out of resources, not a cap */
		e->cap_evicted = !all;
		c->st.evictions++;
	}
}

static void entry_free(struct pd_mr_cache *c, struct pd_mr_cache_entry *e)
{
	if (e->in_slab)
		pd_slab_free(&c->slab, e);
	else
		free(e);
}

/*
 * Outside the lock: deregistration may block in the provider, and so may a
 * log line's write(2) to a slow file; then the entries go back to the
 * slab under it.  The caps are read racily, for the message only.
 */
static void release_victims(struct pd_mr_cache *c, struct pd_list *victims)
{
	size_t evicted = 0, bytes = 0;
	struct pd_list freed;

	pd_list_init(&freed);

	while (!pd_list_empty(victims)) {
		struct pd_mr_cache_entry *e = entry_of(victims->next, lru);

		pd_list_del(&e->lru);
		if (e->cap_evicted) {
			evicted++;
			bytes += e->key.len;
		}
		if (e->handle)
			c->ops.dereg(c->ops.ctx, e->handle);
		pd_list_add_tail(&freed, &e->lru);
	}
	if (!pd_list_empty(&freed)) {
		pthread_mutex_lock(&c->lock);
		while (!pd_list_empty(&freed)) {
			struct pd_mr_cache_entry *e = entry_of(freed.next, lru);

			pd_list_del(&e->lru);
			entry_free(c, e);
		}
		pthread_mutex_unlock(&c->lock);
	}
	if (evicted)
		pd_log_rl(PD_LOG_WARN, "registration cache: %zu idle registrations (%zu bytes) evicted to stay within its caps (%zu entries, %zu bytes; PEERDIRECT_MR_CACHE_MAX_ENTRIES, PEERDIRECT_MR_CACHE_MAX_BYTES)",
			  evicted, bytes, __atomic_load_n(&c->max_entries, __ATOMIC_RELAXED),
			  __atomic_load_n(&c->max_bytes, __ATOMIC_RELAXED));
}

/* One reference goes.  The last one: a cached entry stays, idle (unless it
 * is a host entry the cache must not keep idle); any other is
 * deregistered. */
static void put_locked(struct pd_mr_cache *c, struct pd_mr_cache_entry *e,
		       struct pd_list *victims)
{
	if (--e->refs)
		return;
	if (e->cached)
		busy_account(c, e, -1);
	if (e->state == FAILED) {
		entry_free(c, e);	/* its owner dropped the handle already */
		return;
	}
	/* Never idle while a peer may write it: after the last
	 * deregistration no remote write may land, whatever key it names. */
	if (e->cached && !e->invalid && !(e->key.access & PD_ACCESS_REMOTE_WRITE) &&
	    (e->key.kind != PD_MEM_HOST || c->retain_idle_host)) {
		evict_locked(c, 0, 0, false, victims);
		return;
	}
	retire_locked(c, e, victims);
}

int pd_mr_cache_create(const struct pd_mr_cache_ops *ops, size_t max_entries,
		       size_t max_bytes, struct pd_mr_cache **out)
{
	struct pd_mr_cache *c;

	if (!ops || !ops->reg || !ops->dereg || !out)
		return pd_error(-EINVAL, "pd_mr_cache_create: ops with reg and dereg required");
	c = calloc(1, sizeof(*c));
	if (!c)
		return pd_error(-ENOMEM, "mr cache: out of memory");
	c->nbuckets = MIN_BUCKETS;
	c->buckets = calloc(c->nbuckets, sizeof(*c->buckets));
	if (!c->buckets) {
		free(c);
		return pd_error(-ENOMEM, "mr cache: out of memory");
	}
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->done, NULL);
	c->ops = *ops;
	c->max_entries = max_entries;
	c->max_bytes = max_bytes;
	c->retain_idle_host = true;
	pd_slab_init(&c->slab, SLAB_SIZE, ENTRY_ALIGN);
	pd_list_init(&c->lru);
	pd_list_init(&c->all);
	*out = c;
	return 0;
}

void pd_mr_cache_destroy(struct pd_mr_cache *c)
{
	struct pd_list victims;

	if (!c)
		return;
	pd_list_init(&victims);
	pthread_mutex_lock(&c->lock);
	while (!pd_list_empty(&c->all))
		retire_locked(c, entry_of(c->all.next, all), &victims);
	pthread_mutex_unlock(&c->lock);
	release_victims(c, &victims);
	pthread_cond_destroy(&c->done);
	pthread_mutex_destroy(&c->lock);
	pd_slab_destroy(&c->slab);
	free(c->buckets);
	free(c);
}

void pd_mr_cache_set_retain_idle_host(struct pd_mr_cache *c, bool retain)
{
	struct pd_list victims, *l, *next;

	pd_list_init(&victims);
	pthread_mutex_lock(&c->lock);
	c->retain_idle_host = retain;
	for (l = c->lru.next; !retain && l != &c->lru; l = next) {
		struct pd_mr_cache_entry *e = entry_of(l, lru);

		next = l->next;
		if (e->key.kind == PD_MEM_HOST && !e->refs)
			retire_locked(c, e, &victims);
	}
	pthread_mutex_unlock(&c->lock);
	release_victims(c, &victims);
}

static struct pd_mr_cache_entry *entry_new(struct pd_mr_cache *c, const struct pd_mr_key *k)
{
	unsigned int level = host_level(k->len);
	size_t n = 1, i, size;
	struct pd_mr_cache_entry *e;
	uint64_t g0 = 0;

	/* At most two granules: the level's granule is at least the length
	 * (only the top level can hold longer entries, over more granules). */
	if (k->kind == PD_MEM_HOST) {
		g0 = k->start >> HOST_SHIFT(level);
		n = ((k->start + k->len - 1) >> HOST_SHIFT(level)) - g0 + 1;
	}
	size = sizeof(*e) + (n - 1) * sizeof(e->more[0]);
	size = (size + ENTRY_ALIGN - 1) & ~(size_t)(ENTRY_ALIGN - 1);
	e = n <= SLAB_LINKS ? pd_slab_alloc(&c->slab) : aligned_alloc(ENTRY_ALIGN, size);
	if (!e)
		return NULL;
	memset(e, 0, size);
	e->in_slab = n <= SLAB_LINKS;
	e->key = *k;
	e->nlinks = n;
	pd_list_init(&e->lru);
	pd_list_init(&e->all);
	for (i = 0; i < n; i++) {
		struct hlink *l = entry_link(e, i);

		l->e = e;
		l->hkey = k->kind == PD_MEM_HOST ?
			host_hash(k->domain, level, g0 + i) : dmabuf_hash(k);
	}
	return e;
}

static bool lack_of_resources(int err)
{
	return err == -ENOMEM || err == -ENOSPC || err == -ENOBUFS ||
	       err == -EMFILE || err == -ENFILE;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* Takes a reference on a found entry; it stays where CLOCK has it. */
static void ref_locked(struct pd_mr_cache *c, struct pd_mr_cache_entry *e)
{
	if (!e->refs++ && e->cached)
		busy_account(c, e, 1);
}

static void hold_locked(struct pd_mr_cache *c, struct pd_mr_cache_entry *e)
{
	ref_locked(c, e);
	e->referenced = true;
}

static int register_with_retry(struct pd_mr_cache *c,
			       const struct pd_mr_key *k, int fd, void **handle)
{
	uint64_t t0 = now_ns();
	struct pd_list victims;
	int ret;

	ret = c->ops.reg(c->ops.ctx, k, fd, handle);
	if (ret && lack_of_resources(ret)) {
		pd_list_init(&victims);
		pthread_mutex_lock(&c->lock);
		evict_locked(c, 0, 0, true, &victims);
		pthread_mutex_unlock(&c->lock);
		release_victims(c, &victims);
		ret = c->ops.reg(c->ops.ctx, k, fd, handle);
	}
	pthread_mutex_lock(&c->lock);
	c->st.reg_ns += now_ns() - t0;
	if (ret)
		c->st.reg_failures++;
	else
		c->st.reg_count++;
	pthread_mutex_unlock(&c->lock);
	return ret;
}

static bool inval_matches(const struct pd_mr_key *k, const struct inval_match *m)
{
	if (k->kind != m->kind)
		return false;
	if (m->kind == PD_MEM_DMABUF)
		return m->origin ? k->origin == m->origin : k->dev == m->dev && k->ino == m->ino;
	return k->domain == m->domain && k->start < m->start + m->len &&
	       m->start < k->start + k->len;
}

const char *pd_reason_name(uint32_t reason)
{
	static const char *const names[] = {
		[PD_REASON_FREE] = "allocation freed", [PD_REASON_REVOKE] = "revoked",
		[PD_REASON_RESET] = "device reset", [PD_REASON_ADMIN] = "revoked by the administrator",
		[PD_REASON_UNPLUG] = "device removed", [PD_REASON_OVERFLOW] = "event queue overflowed",
	};

	if (reason == PD_REASON_CLOSED)
		return "its device was closed";
	if (reason == PD_REASON_DETACHED)
		return "its device was detached: nothing reports its revocation any more";
	return reason < sizeof(names) / sizeof(names[0]) && names[reason] ?
		names[reason] : "invalidated";
}

/*
 * The invalidation revoked nothing: the device that watched the dma-buf
 * was detached, so a registration resolves its key again.  Not a close:
 * the file's exports may go with it, so that stays a revocation.
 */
static bool stopped_watching(uint32_t reason)
{
	return reason == PD_REASON_DETACHED;
}

/*
 * A dma-buf invalidation logged after since that covers k: -ENODEV (the
 * dma-buf is revoked), or -ESTALE when the log no longer reaches back to
 * since.  Host keys are not checked: registering now takes the pages now.
 */
static int log_check_locked(struct pd_mr_cache *c, const struct pd_mr_key *k, uint64_t since)
{
	uint64_t g;

	if (k->kind != PD_MEM_DMABUF || since >= c->gen)
		return 0;
	if (c->gen - since > INVAL_LOG)
		return -ESTALE;
	for (g = since; g < c->gen; g++) {
		const struct inval_match *m = &c->log[g % INVAL_LOG];

		if (!inval_matches(k, m))
			continue;
		/* Its device stopped watching (detached, closed): nothing was
		 * revoked, the key's origin is just out of date.  Resolve it
		 * again, as for a log that ran over. */
		if (stopped_watching(m->reason))
			return -ESTALE;
		return pd_error(-ENODEV, "dma-buf inode %llu was revoked (%s) before it was registered: re-export and register again",
				(unsigned long long)k->ino, pd_reason_name(m->reason));
	}
	return 0;
}

static int get_locked(struct pd_mr_cache *c, const struct pd_mr_key *k, int fd,
		      uint64_t since, struct pd_mr_cache_entry **out)
{
	struct pd_mr_cache_entry *e;
	struct pd_list victims;
	void *handle = NULL;
	unsigned int attempt;
	int ret;

	c->st.lookups++;
	for (attempt = 0;; attempt++) {
		ret = log_check_locked(c, k, since);
		if (ret)
			return ret;
		e = lookup_locked(c, k);
		if (e && e->state == READY) {
			hold_locked(c, e);
			c->st.hits++;
			*out = e;
			return 0;
		}
		if (e) {
			/* Someone registers this key: wait and share. */
			ref_locked(c, e);
			c->waiters++;
			while (e->state == PENDING)
				pthread_cond_wait(&c->done, &c->lock);
			c->waiters--;
			if (e->state == READY && !e->invalid) {
				c->st.hits++;
				*out = e;
				return 0;
			}
			pd_list_init(&victims);
			put_locked(c, e, &victims);
			pthread_mutex_unlock(&c->lock);
			release_victims(c, &victims);
			pthread_mutex_lock(&c->lock);
			if (attempt < MAX_ATTEMPTS)
				continue;
			return pd_error(-EAGAIN, "registration of %llu bytes: invalidated %u times while registering",
					(unsigned long long)k->len, attempt);
		}
		break;
	}

	c->st.misses++;
	for (attempt = 0;; attempt++) {
		e = entry_new(c, k);
		if (!e)
			return pd_error(-ENOMEM, "mr cache: out of memory");
		e->state = PENDING;
		e->refs = 1;
		hash_locked(c, e);
		pd_list_add_tail(&c->all, &e->all);
		pthread_mutex_unlock(&c->lock);

		ret = register_with_retry(c, k, fd, &handle);

		pd_list_init(&victims);
		pthread_mutex_lock(&c->lock);
		if (!ret && (e->invalid || e->stale)) {
			/* Invalidated while registering: what we registered may
			 * be the revoked buffer, or the old pages. */
			/* A device that stopped watching revoked nothing:
			 * the caller resolves the key again (-ESTALE). */
			if (e->invalid && stopped_watching(e->inval_reason))
				ret = -ESTALE;
			else if (e->invalid)
				ret = pd_error(-ENODEV, "dma-buf inode %llu was revoked while it was being registered (%s): re-export and register again",
					       (unsigned long long)k->ino, pd_reason_name(e->inval_reason));
			else
				ret = -EAGAIN;
			pthread_mutex_unlock(&c->lock);
			c->ops.dereg(c->ops.ctx, handle);
			pthread_mutex_lock(&c->lock);
			c->st.dereg_count++;
		}
		if (ret) {
			unhash_locked(c, e);
			pd_list_del(&e->all);
			e->state = FAILED;
			pthread_cond_broadcast(&c->done);
			put_locked(c, e, &victims);
			if (ret == -EAGAIN && attempt < MAX_ATTEMPTS)
				continue;
			if (ret == -EAGAIN)
				ret = pd_error(-EAGAIN, "host registration of %llu bytes: range invalidated %u times while registering",
					       (unsigned long long)k->len, attempt + 1);
			return ret;
		}
		break;
	}
	e->handle = handle;
	/* No room even with every idle entry gone (larger than the byte
	 * cap, or held entries fill it): it can never be cached now, so it
	 * evicts nothing on its way to being handed out uncached. */
	if (c->busy_entries < c->max_entries && c->busy_bytes <= c->max_bytes &&
	    k->len <= c->max_bytes - c->busy_bytes)
		evict_locked(c, 1, k->len, false, &victims);
	if (!over_caps(c, 1, k->len)) {
		e->cached = true;
		pd_list_add_tail(&c->lru, &e->lru);
		c->entries++;
		c->bytes += k->len;
		busy_account(c, e, 1);
	} else {
		unhash_locked(c, e);
		c->st.uncached++;
	}
	e->state = READY;
	pthread_cond_broadcast(&c->done);
	if (!pd_list_empty(&victims)) {
		pthread_mutex_unlock(&c->lock);
		release_victims(c, &victims);
		pthread_mutex_lock(&c->lock);
	}
	*out = e;
	return 0;
}

int pd_mr_cache_get_since(struct pd_mr_cache *c, const struct pd_mr_key *k, int fd,
			  uint64_t since, struct pd_mr_cache_entry **out)
{
	int ret;

	if (!c || !k || !out)
		return pd_error(-EINVAL, "pd_mr_cache_get: NULL argument");
	if (!k->len || k->start + k->len < k->start)
		return pd_error(-EINVAL, "registration of %llu bytes at 0x%llx: %s",
				(unsigned long long)k->len, (unsigned long long)k->start,
				k->len ? "range wraps around" : "length is 0");
	pthread_mutex_lock(&c->lock);
	ret = get_locked(c, k, fd, since, out);
	pthread_mutex_unlock(&c->lock);
	return ret;
}

int pd_mr_cache_get(struct pd_mr_cache *c, const struct pd_mr_key *k, int fd,
		    struct pd_mr_cache_entry **out)
{
	return pd_mr_cache_get_since(c, k, fd, UINT64_MAX, out);
}

int pd_mr_cache_find(struct pd_mr_cache *c, const struct pd_mr_key *k,
		     bool (*accept)(const struct pd_mr_key *entry, const void *arg),
		     const void *arg, struct pd_mr_cache_entry **out)
{
	struct pd_mr_cache_entry *e;
	int ret = -ENOENT;

	pthread_mutex_lock(&c->lock);
	e = lookup_locked(c, k);
	if (e && e->state == READY && (!accept || accept(&e->key, arg))) {
		hold_locked(c, e);
		c->st.lookups++;
		c->st.hits++;
		*out = e;
		ret = 0;
	}
	pthread_mutex_unlock(&c->lock);
	return ret;
}

uint64_t pd_mr_cache_generation(struct pd_mr_cache *c)
{
	return __atomic_load_n(&c->gen, __ATOMIC_ACQUIRE);
}

unsigned int pd_mr_cache_waiters(struct pd_mr_cache *c)
{
	unsigned int n;

	pthread_mutex_lock(&c->lock);
	n = c->waiters;
	pthread_mutex_unlock(&c->lock);
	return n;
}

void pd_mr_cache_put(struct pd_mr_cache *c, struct pd_mr_cache_entry *e)
{
	struct pd_list victims;

	if (!c || !e)
		return;
	pd_list_init(&victims);
	pthread_mutex_lock(&c->lock);
	put_locked(c, e, &victims);
	pthread_mutex_unlock(&c->lock);
	release_victims(c, &victims);
}

void pd_mr_cache_hold(struct pd_mr_cache *c, struct pd_mr_cache_entry *e)
{
	pthread_mutex_lock(&c->lock);
	ref_locked(c, e);
	pthread_mutex_unlock(&c->lock);
}

int pd_mr_cache_set_limits(struct pd_mr_cache *c, size_t max_entries,
			   size_t max_bytes)
{
	struct pd_list victims;

	if (!c)
		return pd_error(-EINVAL, "pd_mr_cache_set_limits: cache is NULL");
	pd_list_init(&victims);
	pthread_mutex_lock(&c->lock);
	if (max_entries)
		__atomic_store_n(&c->max_entries, max_entries, __ATOMIC_RELAXED);
	if (max_bytes)
		__atomic_store_n(&c->max_bytes, max_bytes, __ATOMIC_RELAXED);
	evict_locked(c, 0, 0, false, &victims);
	pthread_mutex_unlock(&c->lock);
	release_victims(c, &victims);
	return 0;
}

/*
 * Every entry the match covers, cached or not: idle ones are deregistered
 * now (after the lock is dropped), in-use ones leave the table (dma-buf
 * ones fail pd_mr_entry_check) and go at their last release, pending ones
 * are marked so their registration is not inserted as valid.
 */
static unsigned int invalidate_where(struct pd_mr_cache *c, const struct inval_match *m)
{
	struct pd_list victims, *l, *next;
	unsigned int n = 0;

	if (!c)
		return 0;
	pd_list_init(&victims);
	pthread_mutex_lock(&c->lock);
	if (m->kind == PD_MEM_DMABUF) {
		c->log[c->gen % INVAL_LOG] = *m;
		__atomic_store_n(&c->gen, c->gen + 1, __ATOMIC_RELEASE);
	}
	for (l = c->all.next; l != &c->all; l = next) {
		struct pd_mr_cache_entry *e = entry_of(l, all);

		next = l->next;
		if (!inval_matches(&e->key, m) || e->invalid || e->stale)
			continue;
		n++;
		c->st.invalidations++;
		if (m->kind == PD_MEM_DMABUF) {
			e->inval_reason = m->reason;
			__atomic_store_n(&e->invalid, true, __ATOMIC_RELEASE);
		} else {
			e->stale = true;
		}
		if (e->state != READY)
			continue;	/* its registering thread sees the mark */
		if (e->refs == 0)
			retire_locked(c, e, &victims);
		else
			unhash_locked(c, e);
	}
	pthread_mutex_unlock(&c->lock);
	release_victims(c, &victims);
	return n;
}

unsigned int pd_mr_cache_invalidate_dmabuf(struct pd_mr_cache *c, uint64_t dev,
					   uint64_t ino, uint32_t reason)
{
	struct inval_match m = {
		.kind = PD_MEM_DMABUF, .dev = dev, .ino = ino, .reason = reason,
	};

	return invalidate_where(c, &m);
}

unsigned int pd_mr_cache_invalidate_origin(struct pd_mr_cache *c, uint64_t origin,
					   uint32_t reason)
{
	struct inval_match m = {
		.kind = PD_MEM_DMABUF, .origin = origin, .reason = reason,
	};

	if (!origin)
		return 0;
	return invalidate_where(c, &m);
}

unsigned int pd_mr_cache_drop_idle_origin(struct pd_mr_cache *c, uint64_t origin)
{
	struct pd_list victims, *l, *next;
	unsigned int n = 0;

	if (!c || !origin)
		return 0;
	pd_list_init(&victims);
	pthread_mutex_lock(&c->lock);
	for (l = c->lru.next; l != &c->lru; l = next) {
		struct pd_mr_cache_entry *e = entry_of(l, lru);

		next = l->next;
		if (e->refs || e->state != READY || e->key.kind != PD_MEM_DMABUF ||
		    e->key.origin != origin)
			continue;
		retire_locked(c, e, &victims);
		c->st.evictions++;
		n++;
	}
	pthread_mutex_unlock(&c->lock);
	release_victims(c, &victims);
	return n;
}

unsigned int pd_mr_cache_invalidate_host(struct pd_mr_cache *c,
					 const void *domain, uint64_t start,
					 uint64_t len)
{
	struct inval_match m = {
		.kind = PD_MEM_HOST, .domain = domain, .start = start, .len = len,
	};

	return invalidate_where(c, &m);
}

void pd_mr_cache_stats(struct pd_mr_cache *c, struct pd_cache_stats *out)
{
	pthread_mutex_lock(&c->lock);
	*out = c->st;
	out->entries = c->entries;
	out->bytes = c->bytes;
	pthread_mutex_unlock(&c->lock);
}

void *pd_mr_entry_handle(const struct pd_mr_cache_entry *e)
{
	return e->handle;
}

const struct pd_mr_key *pd_mr_entry_key(const struct pd_mr_cache_entry *e)
{
	return &e->key;
}

int pd_mr_entry_check(const struct pd_mr_cache_entry *e)
{
	if (!__atomic_load_n(&e->invalid, __ATOMIC_ACQUIRE))
		return 0;
	return pd_error(-ENODEV, "dma-buf inode %llu was revoked by the kernel (%s): registration unusable, re-export and register again",
			(unsigned long long)e->key.ino, pd_reason_name(e->inval_reason));
}
