/* SPDX-License-Identifier: MIT */
/* Internal: the objects shared by fabric.c, mr_paths.c and xfer.c. */
#ifndef PD_FABRIC_H
#define PD_FABRIC_H

#include <pthread.h>
#include <stdbool.h>

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>

#include "peerdirect.h"
#include "fi_compat.h"
#include "fork.h"
#include "mr_cache.h"
#include "revocation.h"
#include "wakeup.h"

/*
 * Whether FI_MR_DMABUF can be used is the run-time libfabric's answer
 * (fi_compat.h), never the headers': every file (the tests too) asks this.
 */
static inline bool pd_have_fi_mr_dmabuf(void)
{
	return pd_fi_has_dmabuf(pd_fi_api_version(fi_version()));
}

struct pd_bounce_pool;
struct pd_op;
struct pd_req;
struct pd_stage;

struct pd_fabric {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	struct fid_cq *cq;
	struct fid_ep *ep;
	char provider[64];
	uint32_t fi_runtime;	/* fi_version() of the loaded libfabric */
	uint32_t fi_api;	/* the API version asked of fi_getinfo */
	bool cpu_mover;		/* copies with the CPU from a mapping (tcp, shm without CMA) */
	bool pins_cpu_maps;	/* provider pins the pages of CPU mappings (shm's CMA) */
	bool hmem;		/* provider announced FI_HMEM */
	const char *hmem_unasked; /* why FI_HMEM was not asked for, or NULL */
	bool virt_addr;		/* FI_MR_VIRT_ADDR: RMA addresses are VAs */
	bool directed_recv;	/* FI_DIRECTED_RECV: a receive can name its peer */
	bool source;		/* FI_SOURCE: completions name their sender */
	bool sas;		/* FI_ORDER_SAS: sends to a peer arrive in order */
	unsigned int tag_bits;	/* user tag bits; chunk index above them */
	size_t chunk;		/* wire chunk: message pieces, bounce slots */
	size_t bounce_slots;
	size_t universe;	/* expected peers: the AV's count */
	uint64_t npeers;	/* atomic: fi_addrs 0..npeers-1 were inserted (FI_AV_TABLE) */
	size_t max_pending;	/* requests waiting to post before -EAGAIN */
	size_t max_staging;	/* own staging bytes held by requests */
	int peer_timeout_ms;	/* <0: peers are never declared dead */
	enum pd_path path;	/* forced path for dma-bufs, or AUTO */
	struct pd_mr_cache *cache;
	char cq_why_not[128];	/* why the CQ has no wait fd, when it has none */
	struct pd_wakeup wakeup;	/* pd_wait's sleep (wakeup.c) */

	/* Everything below is under lock: ep and cq calls, request lists and
	 * the bounce slots.  Registration is not (FI_THREAD_SAFE domain). */
	pthread_mutex_t lock;
	struct pd_bounce_pool *bounce;
	struct pd_op *jobs;		/* staging copies to run outside the lock */
	pthread_cond_t jobs_done;	/* a batch of jobs was settled */
	struct pd_stage *dead_stages;	/* own staging buffers to free after the lock */
	/* Own staging buffers kept for the next request beyond the pool, up
	 * to the pool's size again (bounce_slots x chunk bytes): mmap and
	 * fi_mr_reg per request cost more than the copy below 1 MiB.  One
	 * list per size (pages << i, the last one the chunk): exact fits. */
#define PD_STAGE_SIZES 48	/* page << 0 .. page << 47: any chunk size */
	struct pd_stage *spare_stages[PD_STAGE_SIZES];
	size_t spare_bytes;
	size_t staging_bytes;		/* own buffers held by requests */
	/* Requests with chunks left to post, in the order they were made:
	 * chunk i of a request never goes before chunk i of an earlier one
	 * with the same tag and peer. */
	struct pd_req *pending, *pending_tail;
	struct pd_req *live, *live_tail;	/* every request not yet freed, oldest first */
	size_t npending;		/* on the pending list */
	struct pd_peers *peers;		/* peer liveness (xfer.c) */
	struct pd_req *dead;		/* destroyed, to release outside the lock */
	bool closed;			/* pd_fabric_close ran: no endpoint */

	/* The attached devices' monitors, told to call into cache. */
	struct pd_watch *watch;
	unsigned int fork_gen;		/* pd_fork_gen() when opened */

	/* One for the caller until pd_fabric_close, one per live pd_mr and
	 * per live request: the last one tears the fabric down. */
	unsigned int refs;
};

/* What the cache stores per registration (its opaque handle). */
struct pd_mr_reg {
	/* What a cache hit reads (pd_mr_wrap): one cache line. */
	char *cpu;		/* CPU address of the first registered byte */
	char *iobase;		/* address libfabric expects for that byte */
	uint64_t rma_base;	/* remote address of the first byte */
	struct pd_fabric *fab;
	struct fid_mr *mr;	/* NULL on the bounce path */
	void *desc;
	uint64_t rkey;
	int fd;			/* dup of the dma-buf, keeps the inode alive */
	struct pd_owned_fd own_fd;	/* closed in a forked child */
	struct pd_monitor *watcher;	/* whose record this entry holds, or NULL */
	uint64_t st_dev, st_ino;
	int map_err;		/* why there is no mapping (negative errno) */
	void *map;		/* mmap of the page-aligned range, or NULL */
	size_t map_len;
	enum pd_path path;
	char reason[512];
};

/*
 * The handle given to users: a view of a (possibly larger) cached entry.
 * Addresses are derived from reg when used, not when the handle is made:
 * a cache hit then never reads the registration's cache line.
 */
struct pd_mr {
	struct pd_fabric *fab;
	struct pd_mr_cache_entry *entry;
	struct pd_mr_reg *reg;
	size_t delta;		/* the user's range within the registration */
	size_t len;
	/* PD_ACCESS_* this handle was asked for: what its transfers may do,
	 * even when the cache serves it from an entry that allows more. */
	uint32_t access;
};

/* First byte of the user's range for the CPU, or NULL; as libfabric
 * addresses it; as a peer's RMA targets it. */
static inline char *pd_mr_cpu(const struct pd_mr *mr)
{
	return mr->reg->cpu ? mr->reg->cpu + mr->delta : NULL;
}

static inline char *pd_mr_io(const struct pd_mr *mr)
{
	return mr->reg->iobase ? mr->reg->iobase + mr->delta : NULL;
}

static inline uint64_t pd_mr_rma_addr(const struct pd_mr *mr)
{
	return mr->reg->rma_base + mr->delta;
}

/* mr_paths.c: a requested key no other registration of the process has. */
uint64_t pd_next_mr_key(void);
/* mr_paths.c: where a dma-buf registration will land, and why. */
enum pd_path pd_paths_plan(const struct pd_fabric *fab, char *why, size_t len);
/* mr_paths.c: the cache's registration functions. */
int pd_paths_register(void *fab, const struct pd_mr_key *key, int fd,
		      void **handle);
void pd_paths_deregister(void *fab, void *handle);
/* mr_paths.c, shared with the imported-dma-buf handles (dmabuf_handle.c):
 * access 0 made explicit and checked against a read-only fd; a dma-buf's
 * size (0: unknown); a cache entry handed out as a pd_mr (the entry's
 * reference passes to it, or is put on failure). */
struct stat;
int pd_mr_check_access(const char *fn, unsigned int *access, bool readonly, int fd);
uint64_t pd_dmabuf_size(int fd, const struct stat *st);
int pd_mr_wrap(struct pd_fabric *fab, struct pd_mr_cache_entry *e, size_t delta,
	       size_t len, unsigned int access, struct pd_mr **out);
/* Creates the staging pool on first use of the bounce path. */
int pd_fabric_bounce_pool(struct pd_fabric *fab, struct pd_bounce_pool **out);

/* How often progress looks for silent peers (xfer.c), and the longest a
 * waiter sleeps while chunks wait to be posted (wakeup.c). */
#define PD_SCAN_MS	10

/* fabric.c */
#define PD_CHUNK_BITS	16	/* the chunk index's share of the tag */
/* User tag bits left by a provider's mem_tag_format (-EOPNOTSUPP if too
 * few). */
int pd_tag_bits_for(uint64_t mem_tag_format, unsigned int *user_bits);
bool pd_provider_copies_with_cpu(const char *provider);
bool pd_provider_pins_cpu_maps(const char *provider, bool hmem);
bool pd_provider_pins_host_pages(const char *provider);

/* The watch's callbacks into the cache (exposed for test_log). */
unsigned int pd_fabric_revoked(void *fab, uint64_t origin, uint64_t st_dev,
			       uint64_t st_ino, uint32_t reason);
unsigned int pd_fabric_origin_gone(void *fab, uint64_t origin, uint32_t reason);

/* A reference for a pd_mr or a request; the last put destroys the fabric. */
void pd_fabric_get(struct pd_fabric *fab);
void pd_fabric_put(struct pd_fabric *fab);

/* xfer.c: peer liveness state, made after the endpoint is enabled. */
int pd_xfer_init(struct pd_fabric *fab);
void pd_xfer_fini(struct pd_fabric *fab);
/* xfer.c: under fab->lock at close; fails every live request. */
void pd_xfer_close_locked(struct pd_fabric *fab);
/* Drops fab->lock, then releases what destroyed requests held. */
void pd_xfer_unlock_and_reap(struct pd_fabric *fab);

#endif
