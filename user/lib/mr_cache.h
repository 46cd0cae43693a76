/* SPDX-License-Identifier: MIT */
#ifndef PD_MR_CACHE_H
#define PD_MR_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "peerdirect.h"

enum pd_mem_kind { PD_MEM_HOST = 1, PD_MEM_DMABUF = 2 };

/*
 * What a registration is keyed by.  A dma-buf is identified by its inode
 * (st_dev/st_ino from fstat), never by fd number: fds are reused and dup'ed,
 * inodes are not while the file lives (the cache's registration keeps a dup).
 * Host memory is keyed by address range and a lookup hits any entry that
 * contains the requested range.
 */
struct pd_mr_key {
	uint32_t kind;		/* enum pd_mem_kind */
	uint32_t access;	/* PD_ACCESS_* */
	uint32_t path;		/* requested enum pd_path (dma-buf only) */
	uint32_t readonly;	/* the dma-buf fd was read-only: so is the mapping */
	const void *domain;
	uint64_t dev, ino;	/* dma-buf identity */
	uint64_t start;		/* host address, or offset into the dma-buf */
	uint64_t len;
	/* Not part of the identity: the device whose events watch this dma-buf
	 * (pd_monitor_origin), 0 if none does. */
	uint64_t origin;
	/* Nor this: the pd_monitor whose record of the dma-buf
	 * pd_watch_resolve pinned; each entry made holds it. */
	void *watcher;
};

/* A lookup key's origin that matches an entry of any origin. */
#define PD_ORIGIN_ANY UINT64_MAX

/* Reasons beyond the uapi's, for entries a device stops watching. */
#define PD_REASON_CLOSED	101	/* the device file was closed */
#define PD_REASON_DETACHED	102	/* pd_fabric_detach_device */

/* Registration is injectable so tests can fail it on purpose. */
struct pd_mr_cache_ops {
	int (*reg)(void *ctx, const struct pd_mr_key *key, int fd, void **handle);
	void (*dereg)(void *ctx, void *handle);
	void *ctx;
};

struct pd_mr_cache;
struct pd_mr_cache_entry;

int pd_mr_cache_create(const struct pd_mr_cache_ops *ops, size_t max_entries,
		       size_t max_bytes, struct pd_mr_cache **out);
/* Deregisters every entry, in use or not: release all handles first. */
void pd_mr_cache_destroy(struct pd_mr_cache *c);

/*
 * Find or register; the entry is in use until pd_mr_cache_put().  Concurrent
 * misses on one key register once: the others wait and share the result.
 * An invalidation that matches the key while it registers is not lost: a
 * dma-buf registration then fails with -ENODEV, a host one is made again.
 */
int pd_mr_cache_get(struct pd_mr_cache *c, const struct pd_mr_key *key, int fd,
		    struct pd_mr_cache_entry **out);
/*
 * The same, for a key resolved (fstat, origin lookup) after reading
 * pd_mr_cache_generation(): invalidations since then count too.  -ESTALE
 * when too many came to tell, or when the key's device stopped watching
 * meanwhile (a detach): resolve the key again.
 */
uint64_t pd_mr_cache_generation(struct pd_mr_cache *c);
int pd_mr_cache_get_since(struct pd_mr_cache *c, const struct pd_mr_key *key, int fd,
			  uint64_t since, struct pd_mr_cache_entry **out);
/*
 * Hit only: a ready, valid entry for key that accept (if not NULL) takes,
 * held, or -ENOENT (nothing is registered and nothing counted: the caller
 * goes on to pd_mr_cache_get_since, which counts).  No system call on the
 * way; accept runs under the cache's lock.
 */
int pd_mr_cache_find(struct pd_mr_cache *c, const struct pd_mr_key *key,
		     bool (*accept)(const struct pd_mr_key *entry, const void *arg),
		     const void *arg, struct pd_mr_cache_entry **out);
/* Threads waiting for another's registration of the same key (tests). */
unsigned int pd_mr_cache_waiters(struct pd_mr_cache *c);
/* false: host entries are deregistered at their last release instead of
 * idling in the LRU (providers that pin pages, with no memory monitor). */
void pd_mr_cache_set_retain_idle_host(struct pd_mr_cache *c, bool retain);
void pd_mr_cache_put(struct pd_mr_cache *c, struct pd_mr_cache_entry *e);
/* Another reference on an entry the caller already holds (a request on a
 * registration): the entry stays registered until every holder put it. */
void pd_mr_cache_hold(struct pd_mr_cache *c, struct pd_mr_cache_entry *e);

/* 0 keeps a limit as it is; idle entries are evicted to fit. */
int pd_mr_cache_set_limits(struct pd_mr_cache *c, size_t max_entries,
			   size_t max_bytes);
/* Every entry of the dma-buf {dev, ino}: idle ones go, in-use and uncached
 * ones fail pd_mr_entry_check with -ENODEV.  Returns how many. */
unsigned int pd_mr_cache_invalidate_dmabuf(struct pd_mr_cache *c, uint64_t dev,
					   uint64_t ino, uint32_t reason);
/* Deregisters the idle entries of origin's dma-bufs (their subscriptions
 * can then end); how many went. */
unsigned int pd_mr_cache_drop_idle_origin(struct pd_mr_cache *c, uint64_t origin);
/* Every dma-buf entry whose key.origin is origin (a device overflowed, went
 * away, was closed or detached). */
unsigned int pd_mr_cache_invalidate_origin(struct pd_mr_cache *c, uint64_t origin,
					   uint32_t reason);
unsigned int pd_mr_cache_invalidate_host(struct pd_mr_cache *c,
					 const void *domain, uint64_t start,
					 uint64_t len);
void pd_mr_cache_stats(struct pd_mr_cache *c, struct pd_cache_stats *out);

void *pd_mr_entry_handle(const struct pd_mr_cache_entry *e);
const struct pd_mr_key *pd_mr_entry_key(const struct pd_mr_cache_entry *e);
/* 0, or -ENODEV with a message when the kernel revoked the dma-buf. */
int pd_mr_entry_check(const struct pd_mr_cache_entry *e);

/* A revocation reason (PD_REASON_*) in words. */
const char *pd_reason_name(uint32_t reason);

#endif
