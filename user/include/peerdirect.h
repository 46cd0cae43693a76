/* SPDX-License-Identifier: MIT */
/*
 * libpeerdirect: move accelerator memory exported as DMA-BUF (by the
 * peerdirect kernel module) over libfabric, behind a registration cache.
 *
 * This is the only public header.  It needs no libfabric or kernel header,
 * so a collective library can use the peer-direct path through it alone,
 * either by linking (-lpeerdirect, pkg-config peerdirect) or by dlopen()ing
 * libpeerdirect.so.1 and calling pd_get_api().
 *
 * Every function returning int returns 0 (or a count) on success and a
 * negative errno on failure; pd_last_error() then holds a message for the
 * calling thread.  Documentation/libpeerdirect.md has the full story.
 */
#ifndef PEERDIRECT_H
#define PEERDIRECT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The library builds with hidden visibility; what is declared here is its
 * exported interface. */
#if defined(PD_BUILDING_LIB) && defined(__GNUC__)
#pragma GCC visibility push(default)
#endif

#define PD_ABI_MAJOR 1
#define PD_ABI_MINOR 4

struct pd_device;
struct pd_fabric;
struct pd_mr;
struct pd_req;
struct pd_rdv;

/* ---- errors ---------------------------------------------------------- */

/* Message for the last failure in this thread ("" if none). */
const char *pd_last_error(void);
/* Text for a negative errno returned by this library. */
const char *pd_strerror(int err);

/* ---- device memory (wraps uapi/linux/peerdirect.h) ------------------- */

struct pd_device_info {
	uint32_t abi_major, abi_minor;
	uint64_t features;		/* PEERDIRECT_FEAT_* */
	uint32_t backend, index;
	uint64_t mem_size, mem_free, page_size, quota, quota_used;
	uint32_t max_exports, max_events;
};

struct pd_export_info {
	int fd;				/* the dma-buf; caller closes it */
	uint32_t reserved;
	uint64_t export_id;
	uint64_t inode;
};

/* Mirrors PEERDIRECT_REASON_*. */
enum pd_event_reason {
	PD_REASON_FREE = 1, PD_REASON_REVOKE, PD_REASON_RESET,
	PD_REASON_ADMIN, PD_REASON_UNPLUG, PD_REASON_OVERFLOW,
};

struct pd_event {
	uint32_t reason;		/* enum pd_event_reason */
	uint32_t reserved;
	uint64_t seq, export_id, handle, inode, offset, length;
};

#define PD_EXPORT_RDWR		(1u << 0)
#define PD_EXPORT_CLOEXEC	(1u << 1)
#define PD_REVOKE_ALLOC		(1u << 0)
#define PD_REVOKE_EXPORT	(1u << 1)

int pd_device_open(unsigned int index, struct pd_device **out);
void pd_device_close(struct pd_device *dev);
int pd_device_fd(const struct pd_device *dev);
int pd_device_query(struct pd_device *dev, struct pd_device_info *info);
int pd_device_alloc(struct pd_device *dev, uint64_t size, uint64_t *handle,
		    uint64_t *alloc_size);
int pd_device_free(struct pd_device *dev, uint64_t handle);
int pd_device_export(struct pd_device *dev, uint64_t handle, uint64_t offset,
		     uint64_t length, unsigned int flags,
		     struct pd_export_info *out);
/* scope PD_REVOKE_ALLOC (id = handle) or PD_REVOKE_EXPORT (id = export_id) */
int pd_device_revoke(struct pd_device *dev, unsigned int scope, uint64_t id,
		     uint32_t *revoked, uint32_t *pending);
/* Up to max events; waits up to timeout_ms (0: none, <0: forever).
 * Returns the number read (0 on timeout). */
int pd_device_read_events(struct pd_device *dev, struct pd_event *events,
			  size_t max, int timeout_ms);

/* ---- fabric ---------------------------------------------------------- */

enum pd_path {
	PD_PATH_AUTO = 0,	/* choose per registration (dma-buf only) */
	PD_PATH_HOST,		/* host memory registered as is */
	PD_PATH_DMABUF,		/* FI_MR_DMABUF: zero copy from device memory */
	PD_PATH_MAPPED,		/* CPU mapping of the dma-buf registered */
	PD_PATH_BOUNCE,		/* staged through a registered host pool */
};
const char *pd_path_name(enum pd_path path);
/* "auto", "dmabuf", "mapped", "bounce" (and "host"); -EINVAL otherwise. */
int pd_path_parse(const char *name, enum pd_path *out);

/*
 * Zero fields mean "environment variable, else default" (see the
 * documentation for the names).  Call pd_fabric_attr_init() first so that
 * a newer library can tell which fields the caller knew about (size; the
 * library reads none past it).
 */
struct pd_fabric_attr {
	uint32_t size;			/* sizeof(struct pd_fabric_attr) */
	uint32_t flags;			/* must be 0 */
	const char *provider;		/* "tcp", "shm", "verbs", ...; NULL: auto */
	enum pd_path path;		/* forced path for dma-buf memory */
	size_t chunk_size;		/* wire chunk; all peers must agree */
	size_t bounce_slots;		/* staging buffers of chunk_size */
	size_t cache_max_entries;
	size_t cache_max_bytes;
	size_t queue_size;		/* tx/rx queue depth hint */
	size_t universe_size;		/* expected peers (the AV's count) */
	size_t max_pending;		/* requests waiting to be posted before
					 * new posts get -EAGAIN */
	int peer_timeout_ms;		/* a peer that accepts no probe for this
					 * long is dead; <0: never declared */
	/* 1.2 */
	size_t max_staging_bytes;	/* staging held by bounce requests
					 * beyond the pool before new ones
					 * get -EAGAIN */
	/* 1.3 */
	int32_t wait_spin_us;		/* pd_wait polls this long, then sleeps
					 * until a completion or the library's
					 * own progress wakes it; 0: default
					 * (PEERDIRECT_WAIT_SPIN_US, else 50) */
	uint32_t reserved;		/* must be 0 */
	/* 1.4 */
	const char *domain;		/* the provider's domain (NIC) to open,
					 * as pd_fabric_domains() names them;
					 * NULL: PEERDIRECT_DOMAIN, else the
					 * first that fits */
};
/* wait_spin_us: sleep without polling first / never sleep (spin). */
#define PD_WAIT_SPIN_NONE	(-1)
#define PD_WAIT_SPIN_ALWAYS	(-2)
void pd_fabric_attr_init(struct pd_fabric_attr *attr);

int pd_fabric_open(const struct pd_fabric_attr *attr, struct pd_fabric **out);
void pd_fabric_close(struct pd_fabric *fab);
const char *pd_fabric_provider(const struct pd_fabric *fab);
/* 1.4: the provider's domain: the NIC ("eth0", "mlx5_0", "rdmap0s31-rdm")
 * or "shm"; "" for NULL. */
const char *pd_fabric_domain(const struct pd_fabric *fab);
/*
 * 1.4: the domains (NICs) pd_fabric_open(attr) could open, of the provider
 * it would take, each once, in libfabric's order: into buf as names each
 * ended by '\0', then one more '\0'.  The count (0: none fits, and
 * pd_last_error() says why), or
 * -ENOSPC (buf shorter than the names need) or the error of
 * pd_fabric_open's settings and fi_getinfo.  attr may be NULL.
 */
int pd_fabric_domains(const struct pd_fabric_attr *attr, char *buf, size_t len);
size_t pd_fabric_chunk_size(const struct pd_fabric *fab);
int pd_fabric_set_path(struct pd_fabric *fab, enum pd_path path);
/* Raw endpoint address for the runtime's own out-of-band exchange. */
int pd_fabric_addr(struct pd_fabric *fab, void *buf, size_t *len);
/* Insert a peer's raw address; *peer is used in send/recv/write. */
int pd_fabric_insert(struct pd_fabric *fab, const void *addr, size_t len,
		     uint64_t *peer);
/*
 * Revocation events of dev invalidate this fabric's registrations of the
 * dma-bufs dev exported (attach before registering them).  One reader per
 * device hands every event to every fabric attached to it and to
 * pd_device_read_events.  Events are drained on every dma-buf registration
 * and transfer, and by pd_fabric_poll_events(), which returns the entries
 * this fabric lost.  Detaching (or closing the device) invalidates the
 * fabric's registrations of dev's dma-bufs: nothing would report their
 * revocation any more.  -EEXIST / -ENOENT for a double attach / detach.
 */
int pd_fabric_attach_device(struct pd_fabric *fab, struct pd_device *dev);
int pd_fabric_detach_device(struct pd_fabric *fab, struct pd_device *dev);
int pd_fabric_poll_events(struct pd_fabric *fab);

/* ---- registration (cached) ------------------------------------------- */

#define PD_ACCESS_SEND		(1u << 0)
#define PD_ACCESS_RECV		(1u << 1)
#define PD_ACCESS_WRITE		(1u << 2)	/* local source of RMA write */
#define PD_ACCESS_REMOTE_WRITE	(1u << 3)	/* target of RMA write */
#define PD_ACCESS_ALL		0xfu

int pd_mr_reg_host(struct pd_fabric *fab, void *ptr, size_t len,
		   unsigned int access, struct pd_mr **out);
int pd_mr_reg_dmabuf(struct pd_fabric *fab, int fd, uint64_t offset,
		     size_t len, unsigned int access, struct pd_mr **out);
/* Releases the handle; the registration stays cached while idle. */
void pd_mr_dereg(struct pd_mr *mr);
enum pd_path pd_mr_path(const struct pd_mr *mr);
/* Why this path was chosen, e.g. which faster path failed and how. */
const char *pd_mr_reason(const struct pd_mr *mr);
/* CPU pointer to the region (host memory or the dma-buf mapping), or NULL. */
void *pd_mr_cpu_ptr(const struct pd_mr *mr);

/* Remote key: plain data, send it to the peer as is. */
struct pd_rkey {
	uint64_t addr, key, len;
};
int pd_mr_rkey(const struct pd_mr *mr, struct pd_rkey *out);

/*
 * Imported dma-bufs: the fd is resolved once (which dma-buf, its size,
 * read-only or not; the handle keeps its own dup, so the caller may close
 * the fd).  A registration through the handle that the cache already holds
 * makes no system call.  Revocation still reaches it through the attached
 * device's events (drained before each transfer and on every miss).
 */
struct pd_dmabuf;
int pd_dmabuf_import(struct pd_fabric *fab, int fd, struct pd_dmabuf **out);
void pd_dmabuf_release(struct pd_dmabuf *buf);
int pd_mr_reg_imported(struct pd_dmabuf *buf, uint64_t offset, size_t len,
		       unsigned int access, struct pd_mr **out);

/* Drop idle entries covering host range (call before freeing memory that
 * may be reused: providers that pin pages would otherwise keep old pages). */
int pd_mr_invalidate_host(struct pd_fabric *fab, const void *ptr, size_t len);

struct pd_cache_stats {
	uint64_t lookups, hits, misses, evictions, invalidations, uncached;
	uint64_t entries, bytes, reg_count, reg_failures, reg_ns, dereg_count;
};
int pd_fabric_cache_stats(struct pd_fabric *fab, struct pd_cache_stats *out);
/* 0 keeps the current value.  Evicts idle entries to fit. */
int pd_fabric_set_cache_limits(struct pd_fabric *fab, size_t max_entries,
			       size_t max_bytes);

/* ---- transfers -------------------------------------------------------- */

#define PD_ANY_PEER	UINT64_MAX
#define PD_TAG_BITS	48		/* user tags must be below 2^48 */

/*
 * Post operations on [off, off + len) of a registration.  Messages larger
 * than one chunk must be received with the same length they were sent with.
 */
int pd_tsend(struct pd_fabric *fab, struct pd_mr *mr, size_t off, size_t len,
	     uint64_t peer, uint64_t tag, struct pd_req **req);
int pd_trecv(struct pd_fabric *fab, struct pd_mr *mr, size_t off, size_t len,
	     uint64_t peer, uint64_t tag, struct pd_req **req);
int pd_write(struct pd_fabric *fab, struct pd_mr *mr, size_t off, size_t len,
	     uint64_t peer, const struct pd_rkey *rkey, uint64_t roff,
	     struct pd_req **req);
/* Drives progress.  1: complete, 0: pending, <0: failed. */
int pd_test(struct pd_req *req, size_t *bytes);
/* 0 when complete, -ETIMEDOUT after timeout_ms (<0: forever), <0 failed. */
int pd_wait(struct pd_req *req, int timeout_ms, size_t *bytes);
/* Frees a request; an unfinished one is cancelled first. */
void pd_req_free(struct pd_req *req);
int pd_progress(struct pd_fabric *fab);
/*
 * 1.3: waiting on many requests.  Read the count, test the requests, and
 * when none finished, pd_fabric_wait(fab, count, ...) polls for the
 * fabric's spin budget (pd_fabric_attr.wait_spin_us), then sleeps until
 * the fabric progresses past count: a completion, or another thread
 * settling a request.  As poll(2): 1 when it progressed, 0 when
 * timeout_ms (<0: none) passed first; <0 an error (-ESHUTDOWN: the fabric
 * was closed).
 */
uint64_t pd_fabric_progress_count(struct pd_fabric *fab);
int pd_fabric_wait(struct pd_fabric *fab, uint64_t count, int timeout_ms);

/* ---- TCP rendezvous for tools (not for production runtimes) ----------- */

/* Rank 0 listens on host:port, the others connect; timeout bounds setup. */
int pd_rdv_open(const char *host, uint16_t port, int rank, int size,
		int timeout_ms, struct pd_rdv **out);
/* Every rank contributes len bytes; out receives size * len, rank order. */
int pd_rdv_allgather(struct pd_rdv *rdv, const void *in, size_t len,
		     void *out);
int pd_rdv_barrier(struct pd_rdv *rdv);
void pd_rdv_close(struct pd_rdv *rdv);

/* ---- structs that grow (ABI 1.1) ----------------------------------------
 *
 * A struct the library fills or reads may gain fields at its end.  The
 * _sz forms take the caller's sizeof: the library reads and writes no byte
 * past it, zeroes the fields it does not know itself (a caller newer than
 * the library), and stores in *filled (if not NULL) how many bytes it
 * filled.  For events, size is the stride of the array.
 *
 * The macros below route every call made from source through the _sz
 * forms with the caller's own sizeof, so rebuilding is enough.  The plain
 * symbols remain for binaries built before 1.1 and handle the 1.0 layouts
 * only (pd_fabric_attr_init writes the 1.0 size, whatever the library's).
 */
void pd_fabric_attr_init_sz(struct pd_fabric_attr *attr, size_t size);
int pd_device_query_sz(struct pd_device *dev, struct pd_device_info *info,
		       size_t size, size_t *filled);
int pd_device_export_sz(struct pd_device *dev, uint64_t handle,
			uint64_t offset, uint64_t length, unsigned int flags,
			struct pd_export_info *out, size_t size, size_t *filled);
int pd_device_read_events_sz(struct pd_device *dev, struct pd_event *events,
			     size_t size, size_t max, int timeout_ms);
int pd_fabric_cache_stats_sz(struct pd_fabric *fab, struct pd_cache_stats *out,
			     size_t size, size_t *filled);
/* pd_write reads the 1.0 fields of an rkey (addr, key, len) only. */
int pd_mr_rkey_sz(const struct pd_mr *mr, struct pd_rkey *out, size_t size,
		  size_t *filled);

#if !defined(PD_BUILDING_LIB) && !defined(PD_NO_SIZED_CALLS)
#define pd_fabric_attr_init(attr) \
	pd_fabric_attr_init_sz((attr), sizeof(*(attr)))
#define pd_device_query(dev, info) \
	pd_device_query_sz((dev), (info), sizeof(*(info)), NULL)
#define pd_device_export(dev, handle, offset, length, flags, out) \
	pd_device_export_sz((dev), (handle), (offset), (length), (flags), (out), \
			    sizeof(*(out)), NULL)
#define pd_device_read_events(dev, events, max, timeout_ms) \
	pd_device_read_events_sz((dev), (events), sizeof(*(events)), (max), (timeout_ms))
#define pd_fabric_cache_stats(fab, out) \
	pd_fabric_cache_stats_sz((fab), (out), sizeof(*(out)), NULL)
#define pd_mr_rkey(mr, out) pd_mr_rkey_sz((mr), (out), sizeof(*(out)), NULL)
#endif

/* ---- versioned function table for dlopen users ------------------------ */

/*
 * The table's 1.0 slots for growable structs take the 1.0 layouts only, as
 * the plain symbols do: fields added since are ignored (attr) or left
 * unwritten (outputs).  A caller compiled against this header is warned
 * off them; it calls the _sz slots with its own sizeof.  PD_ALLOW_1_0_SLOTS
 * silences the warning alone (PD_NO_SIZED_CALLS also turns off the macros).
 */
#if defined(__GNUC__) && !defined(PD_BUILDING_LIB) && !defined(PD_NO_SIZED_CALLS) && \
	!defined(PD_ALLOW_1_0_SLOTS)
#define PD_API_1_0_LAYOUT \
	__attribute__((deprecated("takes the 1.0 struct layout only: call the _sz slot with sizeof")))
#else
#define PD_API_1_0_LAYOUT
#endif

/* Fields are only ever appended; size tells how many the library has. */
struct pd_api {
	uint32_t size;
	uint16_t abi_major, abi_minor;
	const char *(*last_error)(void);
	const char *(*strerror)(int err);
	int (*device_open)(unsigned int, struct pd_device **);
	void (*device_close)(struct pd_device *);
	int (*device_query)(struct pd_device *, struct pd_device_info *) PD_API_1_0_LAYOUT;
	int (*device_alloc)(struct pd_device *, uint64_t, uint64_t *, uint64_t *);
	int (*device_free)(struct pd_device *, uint64_t);
	int (*device_export)(struct pd_device *, uint64_t, uint64_t, uint64_t,
			     unsigned int, struct pd_export_info *) PD_API_1_0_LAYOUT;
	int (*device_revoke)(struct pd_device *, unsigned int, uint64_t,
			     uint32_t *, uint32_t *);
	int (*device_read_events)(struct pd_device *, struct pd_event *,
				  size_t, int) PD_API_1_0_LAYOUT;
	void (*fabric_attr_init)(struct pd_fabric_attr *) PD_API_1_0_LAYOUT;
	int (*fabric_open)(const struct pd_fabric_attr *, struct pd_fabric **);
	void (*fabric_close)(struct pd_fabric *);
	int (*fabric_set_path)(struct pd_fabric *, enum pd_path);
	int (*fabric_addr)(struct pd_fabric *, void *, size_t *);
	int (*fabric_insert)(struct pd_fabric *, const void *, size_t,
			     uint64_t *);
	int (*fabric_attach_device)(struct pd_fabric *, struct pd_device *);
	int (*fabric_poll_events)(struct pd_fabric *);
	int (*mr_reg_host)(struct pd_fabric *, void *, size_t, unsigned int,
			   struct pd_mr **);
	int (*mr_reg_dmabuf)(struct pd_fabric *, int, uint64_t, size_t,
			     unsigned int, struct pd_mr **);
	void (*mr_dereg)(struct pd_mr *);
	enum pd_path (*mr_path)(const struct pd_mr *);
	const char *(*mr_reason)(const struct pd_mr *);
	int (*mr_rkey)(const struct pd_mr *, struct pd_rkey *) PD_API_1_0_LAYOUT;
	int (*fabric_cache_stats)(struct pd_fabric *, struct pd_cache_stats *) PD_API_1_0_LAYOUT;
	int (*fabric_set_cache_limits)(struct pd_fabric *, size_t, size_t);
	int (*tsend)(struct pd_fabric *, struct pd_mr *, size_t, size_t,
		     uint64_t, uint64_t, struct pd_req **);
	int (*trecv)(struct pd_fabric *, struct pd_mr *, size_t, size_t,
		     uint64_t, uint64_t, struct pd_req **);
	int (*write)(struct pd_fabric *, struct pd_mr *, size_t, size_t,
		     uint64_t, const struct pd_rkey *, uint64_t,
		     struct pd_req **);
	int (*test)(struct pd_req *, size_t *);
	int (*wait)(struct pd_req *, int, size_t *);
	void (*req_free)(struct pd_req *);
	int (*progress)(struct pd_fabric *);
	int (*mr_invalidate_host)(struct pd_fabric *, const void *, size_t);
	/* 1.1: every other public function, and the sized forms */
	int (*device_fd)(const struct pd_device *);
	const char *(*fabric_provider)(const struct pd_fabric *);
	size_t (*fabric_chunk_size)(const struct pd_fabric *);
	const char *(*path_name)(enum pd_path);
	int (*path_parse)(const char *, enum pd_path *);
	int (*fabric_detach_device)(struct pd_fabric *, struct pd_device *);
	void *(*mr_cpu_ptr)(const struct pd_mr *);
	int (*rdv_open)(const char *, uint16_t, int, int, int, struct pd_rdv **);
	int (*rdv_allgather)(struct pd_rdv *, const void *, size_t, void *);
	int (*rdv_barrier)(struct pd_rdv *);
	void (*rdv_close)(struct pd_rdv *);
	void (*fabric_attr_init_sz)(struct pd_fabric_attr *, size_t);
	int (*device_query_sz)(struct pd_device *, struct pd_device_info *, size_t,
			       size_t *);
	int (*device_export_sz)(struct pd_device *, uint64_t, uint64_t, uint64_t,
				unsigned int, struct pd_export_info *, size_t,
				size_t *);
	int (*device_read_events_sz)(struct pd_device *, struct pd_event *, size_t,
				     size_t, int);
	int (*fabric_cache_stats_sz)(struct pd_fabric *, struct pd_cache_stats *,
				     size_t, size_t *);
	int (*mr_rkey_sz)(const struct pd_mr *, struct pd_rkey *, size_t, size_t *);
	int (*dmabuf_import)(struct pd_fabric *, int, struct pd_dmabuf **);
	void (*dmabuf_release)(struct pd_dmabuf *);
	int (*mr_reg_imported)(struct pd_dmabuf *, uint64_t, size_t, unsigned int,
			       struct pd_mr **);
	/* 1.3 */
	uint64_t (*fabric_progress_count)(struct pd_fabric *);
	int (*fabric_wait)(struct pd_fabric *, uint64_t, int);
	/* 1.4 */
	const char *(*fabric_domain)(const struct pd_fabric *);
	int (*fabric_domains)(const struct pd_fabric_attr *, char *, size_t);
};

/*
 * Pass the ABI the caller was compiled against (PD_ABI_MAJOR/MINOR).  The
 * library accepts the same major with a minor up to its own; a caller that
 * needs a newer minor than this library provides is refused (-ENOTSUP).
 */
int pd_get_api(uint32_t abi_major, uint32_t abi_minor,
	       const struct pd_api **out);
typedef int (*pd_get_api_fn)(uint32_t, uint32_t, const struct pd_api **);

#if defined(PD_BUILDING_LIB) && defined(__GNUC__)
#pragma GCC visibility pop
#endif

#ifdef __cplusplus
}
#endif
#endif /* PEERDIRECT_H */
