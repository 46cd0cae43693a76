// SPDX-License-Identifier: MIT
/*
 * Tagged send/receive and RMA write over one RDM endpoint.
 *
 * A message is cut into wire chunks of fab->chunk bytes (the provider's
 * max_msg_size caps it, the bounce pool's slots have that size); chunk i
 * travels with tag | i << fab->tag_bits, so chunks match their receives
 * whatever order the provider delivers them in.  Both sides agree on the
 * chunk size and tag layout (checked by pd_fabric_insert).  Ordering:
 *  - chunk i of a request is never posted before chunk i of an earlier
 *    request of the same kind, tag and peer (a receive from any peer
 *    conflicts with every peer), so two such messages cannot swap chunks;
 *    the provider keeps sends in order on the wire (FI_ORDER_SAS);
 *  - a multi-chunk receive posts chunk 0 alone.  Its completion carries the
 *    sender's message length (a word in its CQ data, xfer_wire.h) and, for
 *    a receive from any peer, the sender (FI_SOURCE), from whom alone the
 *    other chunks are then received (FI_DIRECTED_RECV).  A message of
 *    another length fails the receive with -EMSGSIZE, and the chunks of it
 *    that the receive cannot hold are drained into a scratch chunk, so
 *    none is left to meet a later receive of the tag.
 * Failure mid-message: sends are never cancelled (a chunk that did not go
 * would leave its receive to take the next message's).  A send that fails
 * or is freed after its chunk 0 went sends an empty stand-in for each
 * chunk not yet out, whose CQ data carries its errno: the receive fails
 * at once with -ECONNABORTED instead of at its own timeout.  A receive
 * that fails or is freed after its chunk 0 came takes the sender's other
 * chunks into the scratch chunk, not into the caller's buffer.
 * Staging (bounce path): every request owns one staging buffer from start
 * to finish, a pool slot if one is free, else a buffer registered for it
 * alone; so a request never waits for another's slot, and receives that
 * are not matched yet cannot starve the others (an MPI-legal pattern
 * deadlocked when they held all the slots).  Once a request's chunk 0 has
 * completed, its later chunks may also borrow free pool slots to pipeline.
 * The CPU copies and their DMA_BUF_IOCTL_SYNC brackets run outside the
 * fabric lock, in the thread that found them to do ("jobs").
 * Progress is manual: fi_cq_read from test/wait, which also posts chunks
 * that met -FI_EAGAIN, waited for a staging buffer or an earlier request.
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>

#include "bounce_pool.h"
#include "errors.h"
#include "fabric.h"
#include "list.h"
#include "log.h"
#include "xfer_wire.h"

/* The last chunk index is the probes' (see peer liveness below). */
#define MAX_CHUNKS	((1u << PD_CHUNK_BITS) - 1)
#define PROBE_CHUNK	((1ULL << PD_CHUNK_BITS) - 1)
#define CQ_BURST	32
#define CQ_MAX_BURSTS	64	/* per progress call: bounded time under the lock */
#define DRAIN_WINDOW	8	/* drains in flight past a receive's own chunks */

enum req_kind { REQ_SEND, REQ_RECV, REQ_WRITE };
static const char *const kind_names[] = { "send", "recv", "write" };
/* Per kind: the entry point that starts it, and the access it needs. */
static const struct {
	const char *fn, *access_name;
	unsigned int access;
} kind_ops[] = {
	[REQ_SEND] = { "pd_tsend", "PD_ACCESS_SEND", PD_ACCESS_SEND },
	[REQ_RECV] = { "pd_trecv", "PD_ACCESS_RECV", PD_ACCESS_RECV },
	[REQ_WRITE] = { "pd_write", "PD_ACCESS_WRITE", PD_ACCESS_WRITE },
};


/* Ordering state of one (kind, tag, peer); see "ordering" below. */
struct pd_lane {
	struct pd_lane *hnext;		/* hash chain */
	uint64_t tag, peer;
	enum req_kind kind;
	unsigned int refs;		/* requests that name it */
	struct pd_list order;		/* requests bound by it, oldest first */
	/* The tag's record (REQ_RECV, tag, PD_ANY_PEER) only. */
	struct pd_list unposted, any, held;
};

/* Where an operation's staged bytes are (bounce path). */
enum stage_state {
	ST_NONE,	/* no staging buffer */
	ST_COPYING,	/* a job copies into it (send, write) or out of it (recv) */
	ST_STAGED,	/* holds the chunk, ready to post (send, write) */
	ST_POSTED,	/* the provider has it */
};

struct pd_op {
	struct fi_context2 ctx;		/* first: libfabric's FI_CONTEXT2 space */
	struct pd_req *req;		/* NULL: a probe (peer liveness) */
	uint32_t chunk;
	int slot;			/* borrowed pool slot, or -1 */
	bool own;			/* uses the request's own staging buffer */
	bool inflight, cancelled;
	bool aux;			/* a drain or stand-in: touches no memory of the caller */
	bool taken;			/* (receive) back, having taken its chunk off the wire */
	uint8_t stage;			/* enum stage_state */
	size_t len;			/* bytes received (recv), for the copy-out */
	int copy_ret;
	char *copy_err;			/* the failed copy's message */
	struct pd_op *job_next;
};

/*
 * Peer liveness.  libfabric does not report a peer that is gone: tcp
 * answers every send with -FI_EAGAIN while it retries the connection, and a
 * receive has nothing to fail it.  So when a request on a peer has waited
 * half the peer timeout, a probe (an empty message under the reserved chunk
 * index, which every fabric keeps a receive posted for) goes to that peer.
 * A probe the provider has not completed within the other half, or one
 * that fails with a connection error, means the peer is gone: its requests
 * fail with -ECONNRESET at once, and so does any new one.
 */
struct pd_peer {
	uint64_t addr;
	bool probing, posted, dead;
	int64_t probe_start;
	int64_t answered;		/* when its last probe completed */
	uint64_t eagain;
	int err;
	char why[200];
	struct pd_op op;		/* the probe send: its address never moves */
};

struct pd_peers {
	struct pd_peer **peer;		/* by fi_addr (FI_AV_TABLE indices) */
	size_t n;
	struct pd_op probe_rx;		/* the standing receive for probes */
	bool rx_posted;
	char buf[16];			/* [0, 8): probes land, [8, 16): probes go */
	struct fid_mr *mr;
	void *desc;
	int64_t last_scan;
	/* Ordering lanes, hashed by key; the requests' creation count. */
	struct pd_lane **lane;
	size_t nbuckets, nlanes;
	uint64_t seq;
	bool cq_data;			/* chunk 0 carries its message's length */
	/* Where drains land: a chunk, made on first need (scratch_get). */
	void *scratch;
	struct fid_mr *scratch_mr;
	void *scratch_desc;
};

/*
 * A request holds a reference on its fabric and on the cache entry of its
 * registration (not on the caller's pd_mr handle), so the registration, its
 * mapping and the staging buffers stay alive until the provider has
 * reported every posted operation, whatever the caller frees first.
 */
struct pd_req {
	struct pd_fabric *fab;
	enum req_kind kind;
	struct pd_mr_cache_entry *entry;
	struct pd_mr_reg *reg;
	char *cpu, *io;			/* the caller's range start, CPU and I/O views */
	enum pd_path path;
	size_t off, len;
	uint64_t peer, tag, raddr, rkey;
	uint32_t nchunks, next, done, inflight;
	uint32_t aux_inflight;		/* drains and stand-ins among inflight */
	/* Receives: the chunks the sender put on the wire (its length word,
	 * once chunk 0 is in); drain: those this receive cannot hold are
	 * taken into scratch, from next up to wire_n, so none is left to
	 * meet a later receive of the tag.  xops: the drains' operations
	 * past the receive's own chunks. */
	uint32_t wire_n;
	bool drain;
	struct pd_op *xops;
	/* Receives: one past the highest chunk a later request of its lane
	 * posted (those chunks of its own must stay posted). */
	uint32_t passed;
	bool wire_lost;			/* could not keep the wire whole: gave up */
	uint32_t copying;		/* operations with a job queued or running */
	uint32_t running;		/* jobs running now, outside the lock */
	/* -FI_EAGAIN answers to posting a chunk: libfabric returns it both for
	 * a full queue and, forever, for a peer it cannot reach (tcp retries
	 * the connection on every post), and leaves giving up to the caller. */
	uint64_t eagain;
	int status;
	bool freed, pending;
	/* pd_req_free waits for a running copy: only it may destroy then. */
	bool freeing;
	bool destroyed;			/* on the fabric's dead list */
	bool await_src;			/* multi-chunk from any peer: chunk 0 names it */
	bool peer_dead;			/* failed with its peer: done whatever is in flight */
	bool first_done;		/* chunk 0 completed: the peer is at it */
	/* The request's own staging buffer (bounce path): a pool slot, or a
	 * buffer of its own; own_busy while an operation uses it. */
	int own_slot;
	struct pd_stage *own_stage;
	size_t stage_bytes;		/* counted in fab->staging_bytes */
	bool own_busy;
	int64_t start_ms;
	size_t bytes;
	/* Ordering (sends and receives): its lane once its peer is known, the
	 * tag's record (receives), a lane for the sender a receive from any
	 * peer learns (allocated up front: completions cannot fail on memory),
	 * its links, and its rank in creation order. */
	struct pd_lane *lane, *tagl, *spare;
	struct pd_list ord;		/* in lane->order, or in tagl->held */
	struct pd_list u0, anyl;		/* in tagl->unposted, tagl->any */
	uint64_t seq;
	bool ordered;			/* joined, not yet left */
	bool admitted;			/* in lane->order */
	struct pd_req *pend_prev, *pend_next, *live_prev, *live_next, *dead_next;
	char msg[320];
	struct pd_op ops[];
};

static size_t chunk_len(const struct pd_req *r, uint32_t i)
{
	size_t off = (size_t)i * r->fab->chunk;

	return r->len - off < r->fab->chunk ? r->len - off : r->fab->chunk;
}

static void reorder(struct pd_req *r);
static void abandon(struct pd_req *r);
static void enqueue_pending(struct pd_req *r);

static void fail_req(struct pd_req *r, int err, const char *msg)
{
	if (r->status)
		return;
	r->status = err;
	pd_wakeup_progress_locked(&r->fab->wakeup);
	abandon(r);
	reorder(r);
	snprintf(r->msg, sizeof(r->msg), "%s of %zu bytes (tag 0x%llx, %s path): %s",
		 kind_names[r->kind], r->len, (unsigned long long)r->tag,
		 pd_path_name(r->path), msg);
	/* The caller closing the fabric is no error of the job's. */
	if (err == -ECANCELED || err == -ESHUTDOWN)
		pd_log(PD_LOG_DEBUG, "request failed on %s: %s", r->fab->provider, r->msg);
	else
		pd_log_rl(PD_LOG_ERROR, "request failed on %s: %s", r->fab->provider, r->msg);
}

/* Nothing more will happen to it: every operation is back from the
 * provider and from the copy jobs. */
static bool idle(const struct pd_req *r)
{
	return r->inflight == 0 && r->copying == 0;
}

/* A failed request is reported once nothing in flight touches the
 * caller's memory any more: drains may go on (the request lives on until
 * they end).  One whose peer died is reported at once: what the provider
 * still holds of it may never complete (the request itself lives on until
 * it does, or until the fabric closes). */
static bool finished(const struct pd_req *r)
{
	if (r->status)
		return r->peer_dead || (r->inflight == r->aux_inflight && r->copying == 0);
	return idle(r) && r->done == r->nchunks;
}

/*
 * The chunk index up to which r would post now.  A failed or freed request
 * keeps the wire whole for the requests behind it: a send that put chunk 0
 * out sends a stand-in for each chunk it did not (an empty message, which
 * no chunk of a message ever is), and a receive whose chunk 0 is in drains
 * the sender's chunks it will not take.
 */
static uint32_t post_end(const struct pd_req *r)
{
	if (r->fab->closed || r->peer_dead || r->wire_lost)
		return 0;
	/* (first: chunk 0's length check sets it before failing the request) */
	if (r->drain)
		return r->wire_n;
	if (!r->status && !r->freed)
		return r->nchunks;
	return r->kind == REQ_SEND && r->next ? r->nchunks : 0;
}

/*
 * A failed request's other operations are cancelled where that is safe, so
 * it ends now rather than when the caller's timeout runs out.  What may be
 * cancelled, unless the peer is gone (then everything):
 *  - no drain or stand-in: each takes or stands for a chunk on the wire;
 *  - no send: a chunk of it that did not go would leave its receive to
 *    take the same chunk of the next message, which may be posted by then
 *    (rxm and shm do not cancel sends anyway, measured on 1.17);
 *  - of a receive whose chunk 0 is in, only what abandon() picks;
 *  - the rest (chunk 0 of a receive, writes): a cancelled one took nothing.
 */
static void cancel_op(struct pd_req *r, struct pd_op *op)
{
	if (!op->inflight || op->cancelled)
		return;
	if (!r->peer_dead && (op->aux || r->kind == REQ_SEND ||
			      (r->kind == REQ_RECV && r->first_done)))
		return;
	op->cancelled = true;
	fi_cancel(&r->fab->ep->fid, &op->ctx);
}

static void cancel_inflight(struct pd_req *r)
{
	uint32_t i;

	if (r->fab->closed)
		return;
	for (i = 0; i < r->nchunks; i++)
		cancel_op(r, &r->ops[i]);
	for (i = 0; r->xops && i < DRAIN_WINDOW; i++)
		cancel_op(r, &r->xops[i]);
}

/*
 * A receive whose chunk 0 is in failed or was freed: the sender's other
 * chunks go to drains, not to its buffer.  Its posted receives no later
 * request of the lane has passed are cancelled and drained instead (those
 * a later one passed stay: the chunk would go to that one); so are those
 * past the sender's message, which would take the next message's chunks.
 * Once per request (drain set); before any drain is posted.
 */
static void abandon(struct pd_req *r)
{
	uint32_t from, top, low, i;

	if (r->kind != REQ_RECV || !r->first_done || r->drain || r->peer == PD_ANY_PEER ||
	    r->peer_dead || r->fab->closed)
		return;
	r->drain = true;
	from = r->passed > 1 ? r->passed : 1;
	top = r->next < r->nchunks ? r->next : r->nchunks;
	low = r->next;
	for (i = 1; i < top; i++) {
		struct pd_op *op = &r->ops[i];

		if (!op->inflight || op->cancelled || (i < from && i < r->wire_n))
			continue;
		op->cancelled = true;
		fi_cancel(&r->fab->ep->fid, &op->ctx);
		if (i < low && i < r->wire_n)
			low = i;
	}
	/* Back to the first one cancelled: its completion says whether it
	 * took its chunk after all, or a drain must. */
	if (low < r->next) {
		r->next = low;
		enqueue_pending(r);
	}
}

static void fail_and_cancel(struct pd_req *r, int err, const char *msg)
{
	fail_req(r, err, msg);
	cancel_inflight(r);
}

static void unlink_pending(struct pd_req *r)
{
	struct pd_fabric *fab = r->fab;

	if (!r->pending)
		return;
	pd_wakeup_progress_locked(&fab->wakeup);	/* a place in the queue */
	if (r->pend_prev)
		r->pend_prev->pend_next = r->pend_next;
	else
		fab->pending = r->pend_next;
	if (r->pend_next)
		r->pend_next->pend_prev = r->pend_prev;
	else
		fab->pending_tail = r->pend_prev;
	r->pending = false;
	fab->npending--;
}

/* FIFO: requests keep the order they were made in. */
static void enqueue_pending(struct pd_req *r)
{
	struct pd_fabric *fab = r->fab;

	if (r->pending)
		return;
	r->pend_next = NULL;
	r->pend_prev = fab->pending_tail;
	if (fab->pending_tail)
		fab->pending_tail->pend_next = r;
	else
		fab->pending = r;
	fab->pending_tail = r;
	r->pending = true;
	fab->npending++;
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- ordering ------------------------------------------------------------ */

/*
 * Whether chunk i of a request may go is decided in O(1) from per-(kind,
 * tag, peer) state: a lane lists, oldest first, the requests of its key
 * still bound by the order, and each waits only for the one before it
 * (that one never gets ahead of its own predecessor).  Before, every check
 * scanned the earlier waiting requests, O(pending^2) per progress call
 * under back pressure.  Receives from any peer conflict with every peer of
 * their tag; the tag's record (its lane keyed PD_ANY_PEER) keeps, in
 * creation order:
 *  - unposted: the tag's receives that have not posted chunk 0; one that
 *    is in no lane yet posts chunk 0 only at the head, after every earlier
 *    receive of the tag;
 *  - any: receives from any peer until chunk 0 is in (naming the sender),
 *    then they join that sender's lane;
 *  - held: receives naming a peer made while an earlier one from any peer
 *    is in `any`.  They join their lanes, in creation order, as those
 *    before them leave `any`, and meanwhile post chunk 0 only at the head
 *    of `unposted`.  That orders them behind other peers' receives too, but
 *    changes no match: while they are held, a message they could take goes
 *    to the earlier any-peer receive first.
 * A request leaves its lane once the order no longer binds it (in_order());
 * one that ended without settling yet is dropped when found before the
 * request being checked.
 */
static size_t lane_hash(enum req_kind kind, uint64_t tag, uint64_t peer)
{
	uint64_t h = (tag ^ (uint64_t)kind << 60) * 0x9e3779b97f4a7c15ULL ^ peer * 0xc2b2ae3d27d4eb4fULL;

	return (size_t)(h ^ h >> 29);
}

static struct pd_lane *lane_find(struct pd_peers *ps, enum req_kind kind, uint64_t tag,
				 uint64_t peer)
{
	struct pd_lane *l;

	if (!ps->nbuckets)
		return NULL;
	for (l = ps->lane[lane_hash(kind, tag, peer) & (ps->nbuckets - 1)]; l; l = l->hnext) {
		if (l->kind == kind && l->tag == tag && l->peer == peer)
			return l;
	}
	return NULL;
}

static void lane_init(struct pd_lane *l, enum req_kind kind, uint64_t tag, uint64_t peer)
{
	*l = (struct pd_lane){ .kind = kind, .tag = tag, .peer = peer };
	pd_list_init(&l->order);
	pd_list_init(&l->unposted);
	pd_list_init(&l->any);
	pd_list_init(&l->held);
}

/* The table doubles with the lanes; a doubling that finds no memory only
 * leaves the chains longer.  False only if there is no table at all. */
static bool lane_insert(struct pd_peers *ps, struct pd_lane *l)
{
	struct pd_lane **b;

	if (ps->nlanes >= ps->nbuckets) {
		size_t n = ps->nbuckets ? ps->nbuckets * 2 : 64, i;
		struct pd_lane **v = calloc(n, sizeof(*v)), *e, *next;

		if (v) {
			for (i = 0; i < ps->nbuckets; i++) {
				for (e = ps->lane[i]; e; e = next) {
					next = e->hnext;
					b = &v[lane_hash(e->kind, e->tag, e->peer) & (n - 1)];
					e->hnext = *b;
					*b = e;
				}
			}
			free(ps->lane);
			ps->lane = v;
			ps->nbuckets = n;
		}
	}
	if (!ps->nbuckets)
		return false;
	b = &ps->lane[lane_hash(l->kind, l->tag, l->peer) & (ps->nbuckets - 1)];
	l->hnext = *b;
	*b = l;
	ps->nlanes++;
	return true;
}

/* The lane of a key, made if need be, with a reference for the caller. */
static struct pd_lane *lane_get(struct pd_fabric *fab, enum req_kind kind, uint64_t tag,
				uint64_t peer)
{
	struct pd_lane *l = lane_find(fab->peers, kind, tag, peer);

	if (!l) {
		l = malloc(sizeof(*l));
		if (!l)
			return NULL;
		lane_init(l, kind, tag, peer);
		if (!lane_insert(fab->peers, l)) {
			free(l);
			return NULL;
		}
	}
	l->refs++;
	return l;
}

static void lane_put(struct pd_fabric *fab, struct pd_lane *l)
{
	struct pd_peers *ps = fab->peers;
	struct pd_lane **p;

	if (!l || --l->refs)
		return;
	p = &ps->lane[lane_hash(l->kind, l->tag, l->peer) & (ps->nbuckets - 1)];
	while (*p != l)
		p = &(*p)->hnext;
	*p = l->hnext;
	ps->nlanes--;
	free(l);
}

/* Still bound by the order: it has chunks to post, or may have (a receive
 * with receives out), or, a send without FI_ORDER_SAS, the provider still
 * has it. */
static bool in_order(const struct pd_req *r)
{
	struct pd_fabric *fab = r->fab;

	if (r->kind == REQ_WRITE || fab->closed || r->peer_dead)
		return false;
	if (r->next < post_end(r))
		return true;
	if (r->kind == REQ_SEND)
		return !fab->sas && !idle(r);
	/* While its receives are out: chunk 0's completion may call for
	 * drains, and abandon() must learn which chunks later receives of
	 * the lane have posted (their `passed`).  Its next is past them all:
	 * it holds no one back. */
	return r->inflight > r->aux_inflight;
}

/* The tag's held and resolved any-peer receives whose turn has come join
 * their lanes, in creation order. */
static void tag_admit(struct pd_lane *t)
{
	struct pd_req *x, *h;

	for (;;) {
		x = pd_list_empty(&t->any) ? NULL : pd_list_entry(t->any.next, struct pd_req, anyl);
		if (x && !in_order(x)) {
			pd_list_del(&x->anyl);	/* failed or freed: blocks no one */
			continue;
		}
		while (!pd_list_empty(&t->held)) {
			h = pd_list_entry(t->held.next, struct pd_req, ord);
			if (x && h->seq > x->seq)
				break;
			pd_list_del(&h->ord);
			pd_list_add_tail(&h->lane->order, &h->ord);
			h->admitted = true;
		}
		if (!x || !x->lane)	/* none left, or its sender still unknown */
			return;
		pd_list_del(&x->anyl);
		pd_list_add_tail(&x->lane->order, &x->ord);
		x->admitted = true;
	}
}

/* r takes its place behind every earlier request of its kind and tag to
 * (or from) a conflicting peer; -ENOMEM before any of it was posted. */
static int order_join(struct pd_req *r)
{
	struct pd_fabric *fab = r->fab;
	struct pd_lane *tagl = NULL, *lane = NULL, *spare = NULL;

	if (r->kind == REQ_WRITE)
		return 0;
	if (r->kind == REQ_RECV && !(tagl = lane_get(fab, REQ_RECV, r->tag, PD_ANY_PEER)))
		goto nomem;
	if (r->peer != PD_ANY_PEER) {
		if (!(lane = lane_get(fab, r->kind, r->tag, r->peer)))
			goto nomem;
	} else if (!(spare = malloc(sizeof(*spare)))) {
		goto nomem;
	}
	r->tagl = tagl;
	r->lane = lane;
	r->spare = spare;
	r->seq = fab->peers->seq++;
	r->ordered = true;
	if (r->kind == REQ_SEND) {
		pd_list_add_tail(&lane->order, &r->ord);
		r->admitted = true;
		return 0;
	}
	pd_list_add_tail(&tagl->unposted, &r->u0);
	if (r->peer == PD_ANY_PEER) {
		pd_list_add_tail(&tagl->any, &r->anyl);
	} else if (!pd_list_empty(&tagl->any)) {
		pd_list_add_tail(&tagl->held, &r->ord);
	} else {
		pd_list_add_tail(&lane->order, &r->ord);
		r->admitted = true;
	}
	return 0;
nomem:
	lane_put(fab, tagl);
	lane_put(fab, lane);
	return pd_error(-ENOMEM, "%s: out of memory", kind_ops[r->kind].fn);
}

/* A receive from any peer learned its sender (r->peer): it is ordered with
 * that peer's receives from now on. */
static void order_resolve(struct pd_req *r)
{
	struct pd_lane *l;

	if (!r->ordered || r->lane)
		return;
	l = lane_find(r->fab->peers, REQ_RECV, r->tag, r->peer);
	if (l) {
		l->refs++;
		free(r->spare);
	} else {
		/* the tag's record is in the table: this cannot fail */
		l = r->spare;
		lane_init(l, REQ_RECV, r->tag, r->peer);
		l->refs = 1;
		lane_insert(r->fab->peers, l);
	}
	r->spare = NULL;
	r->lane = l;
	tag_admit(r->tagl);
}

static void order_leave(struct pd_req *r)
{
	struct pd_fabric *fab = r->fab;

	if (!r->ordered)
		return;
	r->ordered = r->admitted = false;
	pd_list_del(&r->ord);
	pd_list_del(&r->u0);
	pd_list_del(&r->anyl);
	if (r->tagl)
		tag_admit(r->tagl);
	lane_put(fab, r->lane);
	lane_put(fab, r->tagl);
	free(r->spare);
	r->lane = r->tagl = r->spare = NULL;
}

static void reorder(struct pd_req *r)
{
	if (r->ordered && !in_order(r))
		order_leave(r);
}

/* The request before r in its lane that the order still binds. */
static struct pd_req *lane_prev(struct pd_req *r)
{
	struct pd_req *p;

	while (r->ord.prev != &r->lane->order) {
		p = pd_list_entry(r->ord.prev, struct pd_req, ord);
		if (in_order(p))
			return p;
		order_leave(p);
	}
	return NULL;
}

/* The tag's oldest receive that has not posted chunk 0 and still may. */
static struct pd_req *unposted_head(struct pd_lane *t)
{
	struct pd_req *h;

	while (!pd_list_empty(&t->unposted)) {
		h = pd_list_entry(t->unposted.next, struct pd_req, u0);
		if (in_order(h))
			return h;
		order_leave(h);
	}
	return NULL;
}

/* ---- staging buffers ----------------------------------------------------- */

static char *stage_ptr(struct pd_req *r, struct pd_op *op)
{
	if (!op->own)
		return pd_bounce_slot_ptr(r->fab->bounce, op->slot);
	return r->own_stage ? r->own_stage->mem : pd_bounce_slot_ptr(r->fab->bounce, r->own_slot);
}

static void *stage_desc(struct pd_req *r, struct pd_op *op)
{
	return op->own && r->own_stage ? r->own_stage->desc : pd_bounce_desc(r->fab->bounce);
}

/* A staging buffer for op: the request's own if it is free; once chunk 0
 * has completed, a free pool slot too, leaving one for a newcomer. */
static bool take_stage(struct pd_req *r, struct pd_op *op)
{
	struct pd_fabric *fab = r->fab;

	if (!r->own_busy && (r->own_stage || r->own_slot >= 0)) {
		r->own_busy = true;
		op->own = true;
		return true;
	}
	if (op->chunk > 0 && r->first_done && pd_bounce_nfree(fab->bounce) > 1) {
		op->slot = pd_bounce_slot_get(fab->bounce);
		return true;
	}
	return false;
}

static void put_stage(struct pd_req *r, struct pd_op *op)
{
	pd_wakeup_progress_locked(&r->fab->wakeup);	/* a staging buffer */
	if (op->own) {
		r->own_busy = false;
		op->own = false;
	} else if (op->slot >= 0) {
		pd_bounce_slot_put(r->fab->bounce, op->slot);
		op->slot = -1;
	}
	op->stage = ST_NONE;
}

/* Own staging sizes: a page shifted left, up to the chunk (which need not
 * be a power of two), so that spares fit the requests that follow. */
static size_t stage_len(const struct pd_fabric *fab, size_t len)
{
	size_t n = (size_t)sysconf(_SC_PAGESIZE);

	while (n < len && n < fab->chunk)
		n <<= 1;
	return n < fab->chunk ? n : fab->chunk;
}

/* The spare list of a stage_len() size. */
static unsigned int stage_index(const struct pd_fabric *fab, size_t slen)
{
	size_t n = (size_t)sysconf(_SC_PAGESIZE);
	unsigned int i = 0;

	(void)fab;
	while (n < slen && i < PD_STAGE_SIZES - 1) {
		n <<= 1;
		i++;
	}
	return i;
}

/* The own buffer goes back as soon as the request is finished, not when
 * the caller frees it (a window of completed requests would hold them). */
static void release_own(struct pd_req *r)
{
	struct pd_fabric *fab = r->fab;

	if (r->own_busy || !idle(r) || !(r->status || r->freed || r->done == r->nchunks))
		return;
	if (r->own_slot >= 0) {
		pd_bounce_slot_put(fab->bounce, r->own_slot);
		r->own_slot = -1;
	}
	if (r->own_stage) {
		struct pd_stage *st = r->own_stage;
		unsigned int i = stage_index(fab, st->len);

		r->own_stage = NULL;
		fab->staging_bytes -= r->stage_bytes;
		r->stage_bytes = 0;
		if (fab->spare_bytes + st->len <= fab->bounce_slots * fab->chunk) {
			st->next = fab->spare_stages[i];
			fab->spare_stages[i] = st;
			fab->spare_bytes += st->len;
			return;
		}
		/* fi_close and munmap: after the lock */
		st->next = fab->dead_stages;
		fab->dead_stages = st;
	}
}

/* A spare own staging buffer of stage_len(len) bytes, or NULL. */
static struct pd_stage *take_spare_locked(struct pd_fabric *fab, size_t slen)
{
	unsigned int i = stage_index(fab, slen);
	struct pd_stage *st = fab->spare_stages[i];

	if (st) {
		fab->spare_stages[i] = st->next;
		st->next = NULL;
		fab->spare_bytes -= st->len;
	}
	return st;
}

/*
 * The buffer of slen bytes counts against max_staging from here until the
 * request lets it go: a spare if one fits (r->own_stage), else the caller
 * allocates one outside the lock.  Past the cap the post fails, before
 * anything was queued, so nothing is lost.
 */
static int reserve_staging_locked(struct pd_req *r, const char *fn, size_t slen)
{
	struct pd_fabric *fab = r->fab;
	size_t need = pd_stage_bytes(slen);

	if (need > fab->max_staging || fab->staging_bytes > fab->max_staging - need)
		return pd_error(-EAGAIN, "%s: bounce staging beyond the pool's %zu slots would hold %zu bytes, past the cap of %zu (max_staging_bytes, PEERDIRECT_MAX_STAGING_BYTES): complete some bounce requests and try again",
				fn, fab->bounce_slots, fab->staging_bytes + need, fab->max_staging);
	fab->staging_bytes += need;
	r->stage_bytes = need;
	r->own_stage = take_spare_locked(fab, slen);
	return 0;
}

/* The request leaves every list; its references are dropped by
 * pd_xfer_unlock_and_reap, outside the lock (a last put deregisters). */
static void destroy_locked(struct pd_req *r)
{
	struct pd_fabric *fab = r->fab;
	uint32_t i;

	r->destroyed = true;
	for (i = 0; i < r->nchunks; i++) {
		if (r->ops[i].stage != ST_NONE && !r->ops[i].inflight)
			put_stage(r, &r->ops[i]);
	}
	release_own(r);
	unlink_pending(r);
	order_leave(r);
	if (r->live_prev)
		r->live_prev->live_next = r->live_next;
	else
		fab->live = r->live_next;
	if (r->live_next)
		r->live_next->live_prev = r->live_prev;
	else
		fab->live_tail = r->live_prev;
	r->dead_next = fab->dead;
	fab->dead = r;
}

/* Several jobs of one request settle it in turn: the first that finds it
 * finished destroys it, the others find it destroyed. */
static void settle(struct pd_req *r)
{
	if (r->destroyed)
		return;
	if (idle(r))
		release_own(r);
	reorder(r);
	if (r->freed && !r->freeing && idle(r) && r->next >= post_end(r))
		destroy_locked(r);
}

void pd_xfer_unlock_and_reap(struct pd_fabric *fab)
{
	struct pd_req *dead = fab->dead, *next;
	struct pd_stage *stages = fab->dead_stages, *snext;

	fab->dead = NULL;
	fab->dead_stages = NULL;
	pd_wakeup_signal_locked(&fab->wakeup);
	pthread_mutex_unlock(&fab->lock);
	for (; stages; stages = snext) {
		snext = stages->next;
		pd_stage_free(stages);
	}
	for (; dead; dead = next) {
		next = dead->dead_next;
		pd_mr_cache_put(fab->cache, dead->entry);
		free(dead->xops);
		free(dead);
		pd_fabric_put(fab);	/* may be the last reference: fab goes */
	}
}

/* ---- posting ------------------------------------------------------------- */

static void queue_job(struct pd_req *r, struct pd_op *op)
{
	op->stage = ST_COPYING;
	op->job_next = r->fab->jobs;
	r->fab->jobs = op;
	r->copying++;
}

/*
 * Where drains land: one chunk, shared by every drain of the fabric (nobody
 * reads it), made on the fabric's first length mismatch.  Under the lock:
 * registration is FI_THREAD_SAFE, and this is an error path, once.  Drains
 * take whole chunks rather than truncating into a short buffer: on
 * libfabric 1.17 a truncated receive left rxm's connection stalled above
 * its eager size and hung shm (measured).
 */
static int scratch_get(struct pd_fabric *fab)
{
	struct pd_peers *ps = fab->peers;
	void *p;
	int ret;

	if (ps->scratch)
		return 0;
	p = mmap(NULL, fab->chunk, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return pd_error(-errno, "mmap of a %zu-byte drain buffer: %s", fab->chunk,
				strerror(errno));
	ret = fi_mr_reg(fab->domain, p, fab->chunk, FI_RECV, 0, pd_next_mr_key(), 0,
			&ps->scratch_mr, NULL);
	if (ret) {
		munmap(p, fab->chunk);
		return pd_error(ret, "fi_mr_reg of the drain buffer on %s: %s", fab->provider,
				fi_strerror(-ret));
	}
	ps->scratch = p;
	ps->scratch_desc = fi_mr_desc(ps->scratch_mr);
	return 0;
}

/* Takes chunk i of the sender's message off the wire, into scratch: 0,
 * 1 (already taken: its receive came back with it), -EAGAIN (its
 * operation is still busy, or the provider's queue is full), or an
 * error. */
static int post_drain(struct pd_req *r, uint32_t i)
{
	struct pd_fabric *fab = r->fab;
	struct pd_peers *ps = fab->peers;
	struct pd_op *op;
	ssize_t ret;

	if (i < r->nchunks) {
		op = &r->ops[i];
	} else {
		if (!r->xops && !(r->xops = calloc(DRAIN_WINDOW, sizeof(*r->xops))))
			return pd_error(-ENOMEM, "draining chunk %u: out of memory", i);
		op = &r->xops[(i - r->nchunks) % DRAIN_WINDOW];
	}
	if (op->inflight)
		return -EAGAIN;
	if (op->taken && i < r->nchunks)
		return 1;
	if (op->stage != ST_NONE)
		put_stage(r, op);
	ret = scratch_get(fab);
	if (ret)
		return (int)ret;
	op->req = r;
	op->chunk = i;
	op->slot = -1;
	op->cancelled = op->taken = false;
	ret = fi_trecv(fab->ep, ps->scratch, fab->chunk, ps->scratch_desc, r->peer,
		       r->tag | (uint64_t)i << fab->tag_bits, 0, &op->ctx);
	if (ret == -FI_EAGAIN) {
		r->eagain++;
		return -EAGAIN;
	}
	if (ret)
		return pd_error((int)ret, "fi_trecv draining chunk %u on %s: %s", i, fab->provider,
				fi_strerror((int)-ret));
	op->inflight = op->aux = true;
	r->inflight++;
	r->aux_inflight++;
	return 0;
}

/*
 * Chunk i of a send that failed or was freed after its chunk 0 went: an
 * empty message in its place, whose CQ data says why, so that the receive
 * fails now with -ECONNABORTED rather than at its own timeout, and takes
 * every chunk of the message off the wire.  0, -EAGAIN, -EINPROGRESS (a
 * staging copy of the chunk is still running), or an error.
 */
static int post_standin(struct pd_req *r, uint32_t i)
{
	struct pd_fabric *fab = r->fab;
	struct pd_peers *ps = fab->peers;
	struct pd_op *op = &r->ops[i];
	uint64_t wtag = r->tag | (uint64_t)i << fab->tag_bits;
	ssize_t ret;

	if (op->stage == ST_COPYING)
		return -EINPROGRESS;
	if (op->stage != ST_NONE)
		put_stage(r, op);
	op->req = r;
	op->chunk = i;
	op->cancelled = false;
	if (ps->cq_data)
		ret = fi_tsenddata(fab->ep, ps->buf + 8, 0, ps->desc,
				   pd_wire_abort_word(r->status ? r->status : -ECANCELED), r->peer, wtag,
				   &op->ctx);
	else
		ret = fi_tsend(fab->ep, ps->buf + 8, 0, ps->desc, r->peer, wtag, &op->ctx);
	if (ret == -FI_EAGAIN) {
		r->eagain++;
		return -EAGAIN;
	}
	if (ret)
		return pd_error((int)ret, "fi_tsend of an abort stand-in for chunk %u on %s: %s", i,
				fab->provider, fi_strerror((int)-ret));
	op->inflight = op->aux = true;
	r->inflight++;
	r->aux_inflight++;
	return 0;
}

/*
 * 0 posted; 1 nothing to post for this chunk; -EAGAIN try again after
 * progress; -EINPROGRESS its staging copy is queued (the caller runs the
 * jobs); other: the request failed.
 */
static int post_chunk(struct pd_req *r, uint32_t i)
{
	struct pd_fabric *fab = r->fab;
	struct pd_mr_reg *reg = r->reg;
	struct pd_op *op = &r->ops[i];
	size_t coff = (size_t)i * fab->chunk, clen = chunk_len(r, i);
	uint64_t wtag = r->tag | ((uint64_t)i << fab->tag_bits);
	void *buf, *desc;
	ssize_t ret;

	/* A chunk whose copy runs is read by the copier without the lock:
	 * nothing of it is written under the lock meanwhile, not even the
	 * same values (TSan, test_fuzz). */
	if (i < r->nchunks && op->stage == ST_COPYING)
		return -EINPROGRESS;
	if (r->drain)
		return post_drain(r, i);
	if (r->status || r->freed)
		return post_standin(r, i);
	/* Revoked mid-message: the chunks not out yet must not move the
	 * revoked buffer's bytes (pd_test would distrust them anyway). */
	if (r->path != PD_PATH_HOST && (ret = pd_mr_entry_check(r->entry)))
		return (int)ret;
	op->req = r;
	op->chunk = i;
	if (reg->path == PD_PATH_BOUNCE) {
		/* A chunk staged before an -FI_EAGAIN is kept: copy once only. */
		if (op->stage == ST_NONE) {
			if (!take_stage(r, op))
				return -EAGAIN;
			if (r->kind != REQ_RECV) {
				queue_job(r, op);
				return -EINPROGRESS;
			}
			op->stage = ST_STAGED;
		}
		buf = stage_ptr(r, op);
		desc = stage_desc(r, op);
	} else {
		buf = r->io + coff;
		desc = reg->desc;
	}
	switch (r->kind) {
	case REQ_SEND:
		if (i == 0 && fab->peers->cq_data)
			ret = fi_tsenddata(fab->ep, buf, clen, desc, pd_wire_len_word(r->len, fab->chunk),
					   r->peer, wtag, &op->ctx);
		else
			ret = fi_tsend(fab->ep, buf, clen, desc, r->peer, wtag, &op->ctx);
		break;
	case REQ_RECV:
		ret = fi_trecv(fab->ep, buf, clen, desc,
			       r->peer != PD_ANY_PEER ? r->peer : FI_ADDR_UNSPEC, wtag, 0, &op->ctx);
		break;
	default:
		ret = fi_write(fab->ep, buf, clen, desc, r->peer, r->raddr + coff, r->rkey,
			       &op->ctx);
		break;
	}
	if (ret) {
		if (ret == -FI_EAGAIN) {
			r->eagain++;
			return -EAGAIN;
		}
		if (op->stage != ST_NONE)
			put_stage(r, op);
		return pd_error((int)ret, "fi_%s on %s: %s", r->kind == REQ_WRITE ? "write" :
				r->kind == REQ_SEND ? "tsend" : "trecv", fab->provider,
				fi_strerror((int)-ret));
	}
	if (op->stage != ST_NONE)
		op->stage = ST_POSTED;
	op->inflight = true;
	r->inflight++;
	return 0;
}

/*
 * May chunk i of r go now?  Not before chunk i of an earlier request of the
 * same kind and tag to or from a conflicting peer: on the wire, or in the
 * receive queue, it would take that request's place.  A multi-chunk
 * receive posts only chunk 0 until it is in: chunk 0 says how long the
 * sender's message is, and a receive that posted chunk 1 of a message
 * shorter than its own would take the next message's (a receive from any
 * peer also learns its sender, and is in no lane until then).  Without
 * FI_ORDER_SAS, same-tag sends to one peer go one at a time.
 */
static bool may_post(struct pd_req *r, uint32_t i)
{
	struct pd_req *p;

	if (!r->ordered)
		return true;
	if (!r->admitted)
		return i == 0 && unposted_head(r->tagl) == r;
	if (r->kind == REQ_RECV && i > 0 && !r->first_done)
		return false;
	p = lane_prev(r);
	if (r->kind == REQ_SEND && !r->fab->sas)
		return !p;
	return !p || p->next > i;
}

/* A drain or stand-in could not be posted: the chunks it was to stand
 * for stay as they are.  Said once, loudly, since a later request of the
 * tag may meet them. */
static void wire_lost(struct pd_req *r, const char *why)
{
	r->wire_lost = true;
	pd_log(PD_LOG_ERROR, "%s: chunks %u and later of the message are left on the wire unmatched, a later %s of tag 0x%llx %s peer %llu may meet them: %s",
	       r->msg, r->next, kind_names[r->kind], (unsigned long long)r->tag,
	       r->kind == REQ_SEND ? "to" : "from", (unsigned long long)r->peer, why);
}

/* Posts what may go; r stays on the pending list while chunks are left. */
static void post_more(struct pd_req *r)
{
	int ret;

	while (r->next < post_end(r) && may_post(r, r->next)) {
		ret = post_chunk(r, r->next);
		if (ret == -EAGAIN || ret == -EINPROGRESS)
			break;
		if (ret < 0) {
			if (r->status || r->freed)
				wire_lost(r, pd_last_error());
			else
				fail_and_cancel(r, ret, pd_last_error());
			continue;
		}
		if (r->next++ == 0)
			pd_list_del(&r->u0);
		/* abandon() must not take back a chunk a later receive of the
		 * lane posted after this one's: the sender's would go there */
		if (r->kind == REQ_RECV && r->admitted && r->ord.prev != &r->lane->order) {
			struct pd_req *p = pd_list_entry(r->ord.prev, struct pd_req, ord);

			if (p->passed < r->next)
				p->passed = r->next;
		}
	}
	if (r->next >= post_end(r))
		unlink_pending(r);
	settle(r);
}

static void post_pending(struct pd_fabric *fab)
{
	struct pd_req *r, *next;

	for (r = fab->pending; r; r = next) {
		next = r->pend_next;
		post_more(r);
	}
}

/* ---- copy jobs ----------------------------------------------------------- */

/*
 * Runs the queued staging copies with the lock dropped, then settles them
 * under it and posts what they staged (which may queue more).  Called with
 * the lock held, by whoever queued jobs; returns with it held.  A job of a
 * freed request copies nothing: the caller has the buffer back, and
 * pd_req_free waits for a job already running.
 */
static void run_jobs(struct pd_fabric *fab)
{
	struct pd_op *jobs, *op;
	struct pd_req *r;

	while ((jobs = fab->jobs)) {
		fab->jobs = NULL;
		for (op = jobs; op; op = op->job_next) {
			op->copy_ret = 0;
			op->copy_err = NULL;
			op->req->running++;
		}
		/* What the completions that queued these jobs settled wakes its
		 * sleepers now, not after the copies. */
		pd_wakeup_signal_locked(&fab->wakeup);
		pthread_mutex_unlock(&fab->lock);
		for (op = jobs; op; op = op->job_next) {
			r = op->req;
			/* freed and status are written under the lock; a stale
			 * "not yet" only means one copy pd_req_free waits for. */
			if (__atomic_load_n(&r->freed, __ATOMIC_ACQUIRE))
				continue;
			if (r->kind == REQ_RECV)
				op->copy_ret = pd_dmabuf_copy_to(r->reg->fd,
								 r->cpu + (size_t)op->chunk * fab->chunk,
								 stage_ptr(r, op), op->len);
			else
				op->copy_ret = pd_dmabuf_copy_from(r->reg->fd, stage_ptr(r, op),
								   r->cpu + (size_t)op->chunk * fab->chunk,
								   chunk_len(r, op->chunk));
			if (op->copy_ret)
				op->copy_err = strdup(pd_last_error());
		}
		pthread_mutex_lock(&fab->lock);
		for (op = jobs; op; op = op->job_next) {
			r = op->req;
			r->running--;
			r->copying--;
			if (op->copy_ret) {
				put_stage(r, op);
				fail_and_cancel(r, op->copy_ret, op->copy_err ? op->copy_err : "copy failed");
				free(op->copy_err);
				op->copy_err = NULL;
			} else if (r->kind == REQ_RECV) {
				put_stage(r, op);
				if (!r->freed && !r->status) {
					r->done++;
					r->bytes += op->len;
				}
			} else if (r->freed || r->status) {
				put_stage(r, op);
			} else {
				op->stage = ST_STAGED;
			}
		}
		pthread_cond_broadcast(&fab->jobs_done);
		pd_wakeup_progress_locked(&fab->wakeup);
		for (op = jobs; op; op = op->job_next)
			settle(op->req);
		post_pending(fab);
	}
}

/* Every public entry point leaves through here: jobs, then the lock, then
 * what destroyed requests held. */
static void leave(struct pd_fabric *fab)
{
	run_jobs(fab);
	pd_xfer_unlock_and_reap(fab);
}

/* ---- peer liveness ----------------------------------------------------- */

static uint64_t probe_tag(const struct pd_fabric *fab)
{
	return PROBE_CHUNK << fab->tag_bits;
}

/* The peer's state (FI_AV_TABLE addresses are small indices), or NULL. */
static struct pd_peer *peer_of(struct pd_fabric *fab, uint64_t addr, bool create)
{
	struct pd_peers *ps = fab->peers;
	struct pd_peer **v;
	size_t n;

	if (!ps || addr == PD_ANY_PEER || addr >= (1u << 20))
		return NULL;
	if (addr >= ps->n) {
		if (!create)
			return NULL;
		n = addr + 16;
		v = realloc(ps->peer, n * sizeof(*v));
		if (!v)
			return NULL;
		memset(v + ps->n, 0, (n - ps->n) * sizeof(*v));
		ps->peer = v;
		ps->n = n;
	}
	if (!ps->peer[addr] && create) {
		ps->peer[addr] = calloc(1, sizeof(struct pd_peer));
		if (ps->peer[addr])
			ps->peer[addr]->addr = addr;
	}
	return ps->peer[addr];
}

int pd_xfer_init(struct pd_fabric *fab)
{
	struct pd_peers *ps = calloc(1, sizeof(*ps));
	int ret;

	if (!ps)
		return pd_error(-ENOMEM, "pd_fabric_open: out of memory");
	ret = fi_mr_reg(fab->domain, ps->buf, sizeof(ps->buf), FI_SEND | FI_RECV, 0,
			pd_next_mr_key(), 0, &ps->mr, NULL);
	if (ret) {
		free(ps);
		return pd_error(ret, "fi_mr_reg of the probe buffer on %s: %s", fab->provider,
				fi_strerror(-ret));
	}
	ps->desc = fi_mr_desc(ps->mr);
	ps->cq_data = fab->info->domain_attr->cq_data_size >= PD_WIRE_DATA_BYTES;
	fab->peers = ps;
	return 0;
}

void pd_xfer_fini(struct pd_fabric *fab)
{
	struct pd_peers *ps = fab->peers;
	struct pd_stage *st;
	size_t i;

	for (i = 0; i < PD_STAGE_SIZES; i++) {
		while ((st = fab->spare_stages[i])) {
			fab->spare_stages[i] = st->next;
			pd_stage_free(st);
		}
	}
	fab->spare_bytes = 0;
	if (!ps)
		return;
	for (i = 0; i < ps->n; i++)
		free(ps->peer[i]);
	free(ps->peer);
	/* Every request has left its lanes by now (each holds the fabric). */
	for (i = 0; i < ps->nbuckets; i++) {
		struct pd_lane *l, *next;

		for (l = ps->lane[i]; l; l = next) {
			next = l->hnext;
			free(l);
		}
	}
	free(ps->lane);
	if (ps->scratch) {
		fi_close(&ps->scratch_mr->fid);
		munmap(ps->scratch, fab->chunk);
	}
	fi_close(&ps->mr->fid);
	free(ps);
	fab->peers = NULL;
}

static bool connection_error(int err)
{
	return err == -ECONNRESET || err == -ECONNREFUSED || err == -ENOTCONN ||
	       err == -EHOSTUNREACH || err == -ENETUNREACH || err == -ECONNABORTED ||
	       err == -EPIPE || err == -EHOSTDOWN;
}

/* It still waits on its peer: for a completion, to post (drains of a failed
 * or freed request too), or to finish. */
static bool waiting(const struct pd_req *r)
{
	return r->inflight || r->copying || r->next < post_end(r) || (!r->status && !finished(r));
}

/* Every live request on the peer fails now, and so will every new one. */
static void peer_died(struct pd_fabric *fab, uint64_t addr, const char *why)
{
	struct pd_peer *p = peer_of(fab, addr, true);
	struct pd_req *r;

	if (!p || p->dead)
		return;
	pd_wakeup_progress_locked(&fab->wakeup);
	p->dead = true;
	p->posted = p->op.inflight;
	p->probing = false;
	p->err = -ECONNRESET;
	snprintf(p->why, sizeof(p->why), "peer %llu is gone: %s", (unsigned long long)addr, why);
	for (r = fab->live; r; r = r->live_next) {
		if (r->peer != addr || r->peer_dead || !waiting(r))
			continue;
		r->peer_dead = true;
		fail_and_cancel(r, p->err, p->why);
		reorder(r);
	}
}

static void post_probe(struct pd_fabric *fab, uint64_t addr, struct pd_peer *p)
{
	ssize_t ret = fi_tsend(fab->ep, fab->peers->buf + 8, 0, fab->peers->desc, addr,
			       probe_tag(fab), &p->op.ctx);
	char why[160];

	if (!ret) {
		p->posted = true;
		p->op.inflight = true;
	} else if (ret == -FI_EAGAIN) {
		p->eagain++;
	} else {
		snprintf(why, sizeof(why), "a probe could not be posted (%s: %s)", fab->provider,
			 fi_strerror((int)-ret));
		peer_died(fab, addr, why);
	}
}

static void probe_done(struct pd_fabric *fab, struct pd_op *op, int err, const char *msg)
{
	struct pd_peers *ps = fab->peers;
	struct pd_peer *p;
	char why[240];

	op->inflight = false;
	if (op == &ps->probe_rx) {
		ps->rx_posted = false;	/* reposted by the next scan */
		return;
	}
	p = (struct pd_peer *)((char *)op - offsetof(struct pd_peer, op));
	p->posted = false;
	if (err && connection_error(err)) {
		snprintf(why, sizeof(why), "a probe failed (%s)", msg);
		peer_died(fab, p->addr, why);
	} else {
		p->probing = false;	/* it answered: alive */
		p->answered = now_ms();
	}
}

/*
 * Every PD_SCAN_MS: requests on a peer that have waited half the peer timeout
 * get a probe sent to that peer, unless one answered within the last half;
 * a probe not completed within the other half declares the peer gone.  The
 * probe receive is posted whatever this fabric's own timeout: a probe
 * nobody receives stays in the peer's provider as an unexpected message.
 */
static void scan_peers(struct pd_fabric *fab)
{
	struct pd_peers *ps = fab->peers;
	int64_t now, half = fab->peer_timeout_ms / 2;
	struct pd_req *r;
	struct pd_peer *p;
	size_t a;
	char why[200];

	if (fab->closed || !ps)
		return;
	if (!ps->rx_posted && !ps->probe_rx.inflight &&
	    !fi_trecv(fab->ep, ps->buf, 8, ps->desc, FI_ADDR_UNSPEC, probe_tag(fab),
		      (1ULL << fab->tag_bits) - 1, &ps->probe_rx.ctx)) {
		ps->rx_posted = true;
		ps->probe_rx.inflight = true;
	}
	if (fab->peer_timeout_ms < 0)
		return;
	now = now_ms();
	if (now - ps->last_scan < PD_SCAN_MS)
		return;
	ps->last_scan = now;
	for (r = fab->live; r; r = r->live_next) {
		if (r->peer == PD_ANY_PEER || r->peer_dead || !waiting(r) || now - r->start_ms < half)
			continue;
		p = peer_of(fab, r->peer, true);
		if (p && !p->dead && !p->probing && now - p->answered >= half) {
			p->probing = true;
			p->posted = p->op.inflight;	/* a late earlier probe counts */
			p->probe_start = now;
			p->eagain = 0;
		}
	}
	for (a = 0; a < ps->n; a++) {
		p = ps->peer[a];
		if (!p || !p->probing)
			continue;
		if (!p->posted && !p->op.inflight)
			post_probe(fab, a, p);
		if (p->probing && now - p->probe_start >= half) {
			snprintf(why, sizeof(why), "a probe was not %s within %lld ms (%s answered -FI_EAGAIN %llu times)",
				 p->posted ? "completed" : "accepted", (long long)(now - p->probe_start),
				 fab->provider, (unsigned long long)p->eagain);
			peer_died(fab, a, why);
		}
	}
}

/* ---- completions ------------------------------------------------------- */

/* "peer N", or "an unknown peer" for a receive from any peer whose
 * provider does not say who sent (no FI_SOURCE). */
static const char *peer_name(const struct pd_req *r, char *buf, size_t len)
{
	if (r->peer == PD_ANY_PEER)
		return "an unknown peer";
	snprintf(buf, len, "peer %llu", (unsigned long long)r->peer);
	return buf;
}

/*
 * How many chunks the sender of chunk 0 (len bytes, CQ data `data`) put on
 * the wire.  0, or -EMSGSIZE (the text in why) for a message this receive
 * cannot take: its other chunks are then drained.
 */
static int recv_length(struct pd_req *r, size_t len, uint64_t data, char *why, size_t wlen)
{
	struct pd_fabric *fab = r->fab;
	uint64_t slen = 0;
	uint32_t sn;
	bool exact, bad;
	char peer[32];

	if (len < fab->chunk) {
		/* a chunk short of full is its message's last */
		exact = true;
		slen = len;
		sn = 1;
	} else if (pd_wire_parse_len(data, fab->chunk, &slen, &sn) &&
		   (!slen || sn > 1 || slen == len)) {
		/* (a word that contradicts the full chunk 0 is no word) */
		exact = slen != 0;
	} else {
		/* No length word (a provider without CQ data): the chunks'
		 * own lengths tell a shorter message, nothing a longer one. */
		return 0;
	}
	/* A one-chunk receive may be longer than its message (the API's
	 * promise); a longer one must be exact. */
	if (r->nchunks == 1)
		bad = sn > 1;
	else
		bad = exact ? slen != r->len : sn != r->nchunks;
	if (!bad)
		return 0;
	r->wire_n = sn;
	if (sn > 1) {
		if (r->peer != PD_ANY_PEER)
			r->drain = true;
		else
			pd_log(PD_LOG_ERROR, "recv of %zu bytes (tag 0x%llx): the sender of a longer message is unknown (no FI_SOURCE): its chunks 1 to %u stay unreceived, a later receive of the tag may meet them",
			       r->len, (unsigned long long)r->tag, sn - 1);
	}
	if (!exact)
		snprintf(why, wlen, "message length mismatch: %s sent %u chunks of %zu bytes (at least 1 GiB), this receive was posted for %zu bytes in %u: a message must be received with the length it was sent with",
			 peer_name(r, peer, sizeof(peer)), sn, fab->chunk, r->len, r->nchunks);
	else if (r->nchunks == 1)
		snprintf(why, wlen, "message length mismatch: %s sent %llu bytes, more than the %zu this receive was posted for",
			 peer_name(r, peer, sizeof(peer)), (unsigned long long)slen, r->len);
	else
		snprintf(why, wlen, "message length mismatch: %s sent %llu bytes, this receive was posted for %zu: a message of more than one chunk must be received with the length it was sent with",
			 peer_name(r, peer, sizeof(peer)), (unsigned long long)slen, r->len);
	return -EMSGSIZE;
}

/*
 * Chunk 0 of a receive is in: who sent it (a receive from any peer takes
 * the rest from that sender only) and how long its message is.  0, or why
 * the request fails (-EMSGSIZE, -EPROTO; the text in why).
 */
static int recv_chunk0(struct pd_req *r, size_t len, fi_addr_t src, uint64_t data, char *why,
		       size_t wlen)
{
	bool named = false;
	int ret;

	if (r->peer == PD_ANY_PEER && src != FI_ADDR_NOTAVAIL && src != FI_ADDR_UNSPEC) {
		r->peer = src;
		r->await_src = false;
		named = true;
	}
	if (r->await_src) {
		snprintf(why, wlen, "the sender of chunk 0 is not in the address vector (insert every peer before receiving from PD_ANY_PEER)");
		return -EPROTO;
	}
	r->first_done = true;
	ret = recv_length(r, len, data, why, wlen);
	if (!ret && (r->status || r->freed))
		abandon(r);	/* its cancel came too late: chunk 0 is in */
	/* Only now: whether it joins its sender's lane depends on whether it
	 * still drains. */
	if (named)
		order_resolve(r);
	return ret;
}

/*
 * Chunk i > 0 of a receive is in.  An empty one is the sender's abort
 * stand-in: the receive fails now, -ECONNABORTED (not -EPIPE: the peer is
 * alive, and -ECONNRESET already means it is gone), and drains the rest.
 * One short of its share means a shorter message than the receive's: its
 * sender sent no length word.  Posted receives past the sender's message
 * would take the next message's chunks: abandon() cancels them.
 */
static int recv_chunk(struct pd_req *r, struct pd_op *op, size_t len, uint64_t data, char *why,
		      size_t wlen)
{
	struct pd_fabric *fab = r->fab;
	uint32_t i = op->chunk;
	int e;

	if (!len) {
		e = pd_wire_abort_errno(data);
		snprintf(why, wlen, "peer %llu aborted the message at chunk %u of %u: the sender's request %s%s%s; the rest of the message is drained",
			 (unsigned long long)r->peer, i, r->nchunks,
			 e == -ECANCELED ? "was freed before it completed" :
			 e ? "failed (" : "failed or was freed",
			 e && e != -ECANCELED ? strerror(-e) : "", e && e != -ECANCELED ? ")" : "");
		return -ECONNABORTED;
	}
	if (len >= chunk_len(r, i))
		return 0;
	snprintf(why, wlen, "message length mismatch: peer %llu sent %llu bytes (chunk %u of %u is %zu bytes, not %zu), this receive was posted for %zu: a message of more than one chunk must be received with the length it was sent with",
		 (unsigned long long)r->peer, (unsigned long long)i * fab->chunk + len, i, r->nchunks,
		 len, chunk_len(r, i), r->len);
	r->wire_n = i + 1;
	return -EMSGSIZE;
}

/* A drain or stand-in is back: its chunk left the wire (or its peer is
 * gone). */
static void aux_done(struct pd_fabric *fab, struct pd_req *r, struct pd_op *op, int err,
		     const char *msg)
{
	r->aux_inflight--;
	op->taken = err != -ECANCELED;
	if (!err || err == -ECANCELED)
		return;
	if (connection_error(err) && r->peer != PD_ANY_PEER)
		peer_died(fab, r->peer, msg);
	else
		pd_log(PD_LOG_DEBUG, "%s: %s chunk %u failed: %s", r->msg,
		       r->kind == REQ_SEND ? "the stand-in for" : "draining", op->chunk, msg);
}

static void complete_op(struct pd_fabric *fab, struct pd_op *op, size_t len, int err,
			const char *msg, fi_addr_t src, uint64_t data)
{
	struct pd_req *r = op->req;
	bool aux = op->aux;
	char why[320];
	int bad;

	if (!r) {
		probe_done(fab, op, err, msg);
		return;
	}
	op->inflight = op->aux = false;
	r->inflight--;
	if (aux) {
		aux_done(fab, r, op, err, msg);
		settle(r);
		return;
	}
	if (r->kind == REQ_RECV)
		op->taken = err != -ECANCELED;
	if (!err && r->kind == REQ_RECV) {
		bad = op->chunk ? recv_chunk(r, op, len, data, why, sizeof(why)) :
				  recv_chunk0(r, len, src, data, why, sizeof(why));
		if (bad) {
			fail_and_cancel(r, bad, why);
			if (op->stage != ST_NONE)
				put_stage(r, op);
			goto out;
		}
	}
	if (!err && op->chunk == 0)
		r->first_done = true;
	if (err) {
		fail_and_cancel(r, err, msg);
		if (connection_error(err) && r->peer != PD_ANY_PEER)
			peer_died(fab, r->peer, msg);
		if (op->stage != ST_NONE)
			put_stage(r, op);
	} else if (r->kind == REQ_RECV && op->stage != ST_NONE && !r->status && !r->freed) {
		/* Out of the staging buffer, outside the lock. */
		op->len = len;
		queue_job(r, op);
	} else {
		if (op->stage != ST_NONE)
			put_stage(r, op);
		r->done++;
		r->bytes += r->kind == REQ_RECV ? len : chunk_len(r, op->chunk);
	}
out:
	/* chunk 0 may have called for drains, a failure for stand-ins or
	 * drains, a rewound receive's cancel for a drain in its place */
	if (r->next < post_end(r))
		enqueue_pending(r);
	settle(r);
}

/*
 * Reads completions (at most CQ_MAX_BURSTS bursts: bounded time under the
 * lock), then posts what waits.  An error entry that cannot be read ends
 * the call with that error instead of spinning.
 */
static int progress_locked(struct pd_fabric *fab)
{
	struct fi_cq_tagged_entry ent[CQ_BURST];
	fi_addr_t src[CQ_BURST];
	unsigned int bursts;
	ssize_t n;
	int i, events = 0;

	if (fab->closed)
		return 0;
	for (bursts = 0; bursts < CQ_MAX_BURSTS; bursts++) {
		n = fab->source ? fi_cq_readfrom(fab->cq, ent, CQ_BURST, src) :
				  fi_cq_read(fab->cq, ent, CQ_BURST);
		if (n > 0) {
			for (i = 0; i < n; i++)
				complete_op(fab, ent[i].op_context, ent[i].len, 0, NULL,
					    fab->source ? src[i] : FI_ADDR_NOTAVAIL,
					    ent[i].flags & FI_REMOTE_CQ_DATA ? ent[i].data : 0);
			events += (int)n;
			if (n == CQ_BURST)
				continue;
		} else if (n == -FI_EAVAIL) {
			struct fi_cq_err_entry err = { 0 };
			char text[256], prov[200];
			const char *s;
			ssize_t ret = fi_cq_readerr(fab->cq, &err, 0);

			if (events)
				pd_wakeup_progress_locked(&fab->wakeup);
			if (ret != 1)
				return pd_error(ret < 0 ? (int)ret : -EIO, "fi_cq_readerr on %s after -FI_EAVAIL: %s",
						fab->provider, ret < 0 ? fi_strerror((int)-ret) : "no entry");
			if (!err.op_context)
				continue;
			/* The provider's own text, when it has one (rxm answers
			 * prov_errno 0 with "Function not implemented"). */
			s = err.prov_errno ? fi_cq_strerror(fab->cq, err.prov_errno, err.err_data,
							    prov, sizeof(prov)) : NULL;
			snprintf(text, sizeof(text), "%s (%s%s%s)", fi_strerror(err.err),
				 fab->provider, s ? ": " : "", s ? s : "");
			complete_op(fab, err.op_context, err.len, -(int)err.err, text, FI_ADDR_NOTAVAIL, 0);
			events++;
			continue;
		} else if (n != -FI_EAGAIN) {
			if (events)
				pd_wakeup_progress_locked(&fab->wakeup);
			return pd_error((int)n, "fi_cq_read on %s: %s", fab->provider,
					fi_strerror((int)-n));
		}
		break;
	}
	if (events)
		pd_wakeup_progress_locked(&fab->wakeup);
	scan_peers(fab);
	post_pending(fab);
	return events;
}

int pd_progress(struct pd_fabric *fab)
{
	int ret;

	if (!fab)
		return pd_error(-EINVAL, "pd_progress: fabric is NULL");
	if (pd_forked_since(fab->fork_gen))
		return pd_fork_refuse("pd_progress");
	pthread_mutex_lock(&fab->lock);
	ret = progress_locked(fab);
	leave(fab);
	return ret;
}

uint64_t pd_fabric_progress_count(struct pd_fabric *fab)
{
	return fab ? pd_wakeup_gen(&fab->wakeup) : 0;
}

static int64_t elapsed_ns(const struct timespec *t0)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (t.tv_sec - t0->tv_sec) * 1000000000LL + (t.tv_nsec - t0->tv_nsec);
}

static int ms_left(int64_t deadline)
{
	int64_t left = deadline - now_ms();

	return left <= 0 ? 0 : left > INT32_MAX ? INT32_MAX : (int)left;
}

/*
 * After the spin budget: sleep on the CQ and this thread's eventfd, or
 * nap where there is nothing to sleep on (or fi_trywait keeps saying a
 * completion is due that no read finds).  false: the fabric was closed.
 */
static bool rest(struct pd_fabric *fab, uint64_t seen, int64_t deadline, unsigned int *busy,
		 unsigned int *naps)
{
	switch (pd_wakeup_block(fab, seen, deadline == INT64_MAX ? -1 : ms_left(deadline), busy)) {
	case PD_WAKE_CLOSED:
		return false;
	case PD_WAKE_BUSY:
	case PD_WAKE_NO_FD:
		pd_wakeup_nap(naps);
		break;
	default:
		break;
	}
	return true;
}

/*
 * pd_wait for a caller that watches many requests: it polls the fabric
 * for the spin budget, then sleeps until progress (wakeup.c).  1 when the
 * fabric progressed past count, 0 when timeout_ms passed first (as
 * poll(2)), or an error.
 */
int pd_fabric_wait(struct pd_fabric *fab, uint64_t count, int timeout_ms)
{
	int64_t deadline = timeout_ms < 0 ? INT64_MAX : now_ms() + timeout_ms;
	unsigned int busy = 0, naps = 0;
	struct timespec t0;
	bool closed;
	int ret;

	if (!fab)
		return pd_error(-EINVAL, "pd_fabric_wait: fabric is NULL");
	if (pd_forked_since(fab->fork_gen))
		return pd_fork_refuse("pd_fabric_wait");
	/* Held while it sleeps: a close meanwhile wakes it, and the fabric
	 * (its lock, its CQ's fd) outlives the wait. */
	pd_fabric_get(fab);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		pthread_mutex_lock(&fab->lock);
		closed = fab->closed;
		ret = closed ? 0 : progress_locked(fab);
		leave(fab);
		if (closed || ret < 0 || pd_wakeup_gen(&fab->wakeup) != count || now_ms() >= deadline)
			break;
		if (fab->wakeup.spin_ns >= 0 && elapsed_ns(&t0) >= fab->wakeup.spin_ns &&
		    !rest(fab, count, deadline, &busy, &naps)) {
			closed = true;
			break;
		}
	}
	if (closed)
		ret = pd_error(-ESHUTDOWN, "pd_fabric_wait: the fabric was closed");
	else if (ret >= 0)
		ret = pd_wakeup_gen(&fab->wakeup) != count;
	pd_fabric_put(fab);
	return ret;
}

/*
 * What a caller can get wrong, and what the fabric cannot carry, before
 * anything is allocated: 0 with *nchunks set, or the error.
 */
static int check_start(struct pd_fabric *fab, enum req_kind kind, struct pd_mr *mr,
		       size_t off, size_t len, uint64_t peer, uint64_t tag,
		       const struct pd_rkey *rk, uint64_t roff, struct pd_req **out,
		       size_t *nchunks_out)
{
	const char *fn = kind_ops[kind].fn;
	size_t nchunks;
	int ret;

	if (!fab || !mr || !out)
		return pd_error(-EINVAL, "%s: %s is NULL", fn, !fab ? "fabric" : !mr ? "mr" : "req");
	if (pd_forked_since(fab->fork_gen))
		return pd_fork_refuse(fn);
	if (mr->fab != fab)
		return pd_error(-EINVAL, "%s: mr was registered on another fabric", fn);
	if (!len || off > mr->len || len > mr->len - off)
		return pd_error(-EINVAL, "%s: %s", fn, !len ? "length is 0" :
				"range is outside the registration");
	if (tag >> fab->tag_bits)
		return pd_error(-EINVAL, "%s: tag 0x%llx needs more than the %u bits %s leaves for tags",
				fn, (unsigned long long)tag, fab->tag_bits, fab->provider);
	if (!(mr->access & kind_ops[kind].access))
		return pd_error(-EACCES, "%s: the registration was made for access 0x%x, without %s%s",
				fn, mr->access, kind_ops[kind].access_name,
				kind == REQ_RECV && pd_mr_entry_key(mr->entry)->readonly ?
				" (the dma-buf fd is read-only)" : "");
	if (kind != REQ_RECV && peer == PD_ANY_PEER)
		return pd_error(-EINVAL, "%s: a destination peer is required", fn);
	if (peer != PD_ANY_PEER && peer >= __atomic_load_n(&fab->npeers, __ATOMIC_ACQUIRE))
		return pd_error(-EINVAL, "%s: peer %llu was never returned by pd_fabric_insert on this fabric",
				fn, (unsigned long long)peer);
	if (kind == REQ_RECV && peer != PD_ANY_PEER && !fab->directed_recv)
		return pd_error(-EOPNOTSUPP, "%s: %s lacks FI_DIRECTED_RECV, so a receive cannot name its peer: receive from PD_ANY_PEER",
				fn, fab->provider);
	if (kind == REQ_WRITE && (!rk || roff > rk->len || len > rk->len - roff))
		return pd_error(-EINVAL, "%s: %s", fn, !rk ? "rkey is NULL" :
				"remote range is outside the remote registration");
	if (kind == REQ_WRITE && mr->reg->path == PD_PATH_BOUNCE && !pd_mr_cpu_ptr(mr))
		return pd_error(-EINVAL, "%s: bounce registration without a mapping", fn);
	/* Pending revocations first: a revoked buffer must fail here rather
	 * than fault in the provider or move stale bytes. */
	if (mr->reg->path != PD_PATH_HOST && pd_watch_count(fab->watch))
		pd_fabric_poll_events(fab);
	ret = pd_mr_entry_check(mr->entry);
	if (ret)
		return ret;
	nchunks = len / fab->chunk + (len % fab->chunk != 0);	/* len + chunk - 1 may wrap */
	if (nchunks > MAX_CHUNKS)
		return pd_error(-EMSGSIZE, "%s: %zu bytes need %zu chunks of %zu, more than %u",
				fn, len, nchunks, fab->chunk, MAX_CHUNKS);
	if (kind == REQ_RECV && peer == PD_ANY_PEER && nchunks > 1 &&
	    !(fab->source && fab->directed_recv))
		return pd_error(-EOPNOTSUPP, "%s: %s lacks FI_SOURCE or FI_DIRECTED_RECV, so a message of %zu chunks from PD_ANY_PEER could mix senders: name the peer, or receive at most %zu bytes",
				fn, fab->provider, nchunks, fab->chunk);
	*nchunks_out = nchunks;
	return 0;
}

static struct pd_req *new_req(struct pd_fabric *fab, enum req_kind kind, struct pd_mr *mr,
			      size_t off, size_t len, uint64_t peer, uint64_t tag,
			      const struct pd_rkey *rk, uint64_t roff, size_t nchunks)
{
	struct pd_req *r;
	size_t i;

	r = calloc(1, sizeof(*r) + nchunks * sizeof(r->ops[0]));
	if (!r)
		return NULL;
	*r = (struct pd_req) {
		.fab = fab, .kind = kind, .entry = mr->entry, .reg = mr->reg,
		.cpu = pd_mr_cpu(mr) ? pd_mr_cpu(mr) + off : NULL,
		.io = pd_mr_io(mr) ? pd_mr_io(mr) + off : NULL,
		.path = mr->reg->path, .off = off, .len = len, .peer = peer,
		.tag = tag, .nchunks = (uint32_t)nchunks, .wire_n = (uint32_t)nchunks,
		.raddr = rk ? rk->addr + roff : 0, .rkey = rk ? rk->key : 0,
		.await_src = kind == REQ_RECV && peer == PD_ANY_PEER && nchunks > 1,
	};
	for (i = 0; i < nchunks; i++)
		r->ops[i].slot = -1;
	r->own_slot = -1;
	pd_list_init(&r->ord);
	pd_list_init(&r->u0);
	pd_list_init(&r->anyl);
	if (fab->peer_timeout_ms >= 0)
		r->start_ms = now_ms();
	return r;
}

/* Its own staging buffer: a pool slot, else one registered for it
 * (outside the lock), so it never waits for another request's.  0 or the
 * error. */
static int own_staging(struct pd_req *r, const char *fn)
{
	struct pd_fabric *fab = r->fab;
	size_t slen = stage_len(fab, r->len);
	int ret = 0;

	pthread_mutex_lock(&fab->lock);
	/* A closed fabric fails the request below, with ESHUTDOWN. */
	if (!fab->closed) {
		r->own_slot = pd_bounce_slot_get(fab->bounce);
		if (r->own_slot < 0)
			ret = reserve_staging_locked(r, fn, slen);
	}
	pthread_mutex_unlock(&fab->lock);
	if (!ret && r->stage_bytes && !r->own_stage) {
		ret = pd_stage_alloc(fab->domain, slen, pd_next_mr_key(), &r->own_stage);
		if (ret) {
			pthread_mutex_lock(&fab->lock);
			fab->staging_bytes -= r->stage_bytes;
			pd_wakeup_progress_locked(&fab->wakeup);	/* staging room */
			pd_xfer_unlock_and_reap(fab);
		}
	}
	return ret;
}

static int start(struct pd_fabric *fab, enum req_kind kind, struct pd_mr *mr,
		 size_t off, size_t len, uint64_t peer, uint64_t tag,
		 const struct pd_rkey *rk, uint64_t roff, struct pd_req **out)
{
	const char *fn = kind_ops[kind].fn;
	struct pd_peer *p;
	struct pd_req *r;
	size_t nchunks = 0;
	char why[200];
	int ret;

	ret = check_start(fab, kind, mr, off, len, peer, tag, rk, roff, out, &nchunks);
	if (ret)
		return ret;
	r = new_req(fab, kind, mr, off, len, peer, tag, rk, roff, nchunks);
	if (!r)
		return pd_error(-ENOMEM, "%s: out of memory", fn);
	if (r->path == PD_PATH_BOUNCE) {
		ret = own_staging(r, fn);
		if (ret) {
			free(r);
			return ret;
		}
	}
	pd_mr_cache_hold(fab->cache, mr->entry);
	pd_fabric_get(fab);
	pthread_mutex_lock(&fab->lock);
	if (fab->closed)
		fail_req(r, -ESHUTDOWN, "the fabric was closed");
	if ((p = peer_of(fab, peer, false)) && p->dead)
		fail_req(r, p->err, p->why);
	/* Back pressure: progress first, and if as many requests still wait
	 * to be posted, the caller must let them drain. */
	if (!r->status && fab->npending >= fab->max_pending)
		progress_locked(fab);
	if (!r->status && fab->npending >= fab->max_pending) {
		snprintf(why, sizeof(why), "%zu requests already wait to be posted (a full queue, or a peer that cannot be reached): progress them (pd_test, pd_progress) and try again",
			 fab->npending);
		fail_req(r, -EAGAIN, why);
	}
	if (!r->status && order_join(r))
		fail_req(r, -ENOMEM, pd_last_error());
	r->live_prev = fab->live_tail;
	if (fab->live_tail)
		fab->live_tail->live_next = r;
	else
		fab->live = r;
	fab->live_tail = r;
	if (!r->status) {
		/* Behind older waiting requests: post_more keeps their order. */
		enqueue_pending(r);
		if (r->pend_prev)
			progress_locked(fab);
		else
			post_more(r);
	}
	run_jobs(fab);
	if (r->status && idle(r) && r->next >= post_end(r)) {
		ret = pd_error(r->status, "%s", r->msg);
		destroy_locked(r);
		pd_xfer_unlock_and_reap(fab);
		return ret;
	}
	leave(fab);
	*out = r;
	return 0;
}

int pd_tsend(struct pd_fabric *fab, struct pd_mr *mr, size_t off, size_t len,
	     uint64_t peer, uint64_t tag, struct pd_req **req)
{
	return start(fab, REQ_SEND, mr, off, len, peer, tag, NULL, 0, req);
}

int pd_trecv(struct pd_fabric *fab, struct pd_mr *mr, size_t off, size_t len,
	     uint64_t peer, uint64_t tag, struct pd_req **req)
{
	return start(fab, REQ_RECV, mr, off, len, peer, tag, NULL, 0, req);
}

int pd_write(struct pd_fabric *fab, struct pd_mr *mr, size_t off, size_t len,
	     uint64_t peer, const struct pd_rkey *rkey, uint64_t roff,
	     struct pd_req **req)
{
	return start(fab, REQ_WRITE, mr, off, len, peer, 0, rkey, roff, req);
}

int pd_test(struct pd_req *r, size_t *bytes)
{
	struct pd_fabric *fab;
	int ret, state;

	if (!r)
		return pd_error(-EINVAL, "pd_test: req is NULL");
	fab = r->fab;
	if (pd_forked_since(fab->fork_gen))
		return pd_fork_refuse("pd_test");
	pthread_mutex_lock(&fab->lock);
	/* A request completed by an earlier progress call needs none: each
	 * fi_cq_read can be a poll() syscall (tcp), and waiting on a window of
	 * requests in order would pay one per request. */
	if (!finished(r)) {
		ret = progress_locked(fab);
		run_jobs(fab);
	} else {
		ret = 0;
	}
	state = finished(r);
	if (state && r->status)
		ret = pd_error(r->status, "%s", r->msg);
	else if (ret > 0)
		ret = 0;
	if (bytes)
		*bytes = r->bytes;
	leave(fab);
	if (ret < 0)
		return ret;
	/* Data that crossed a revoked dma-buf is not trusted. */
	if (state && r->path != PD_PATH_HOST && !fab->closed &&
	    pd_watch_count(fab->watch)) {
		pd_fabric_poll_events(fab);
		ret = pd_mr_entry_check(r->entry);
		if (ret)
			return ret;
	}
	return state;
}


/* Says how far the request got: unposted chunks are what a peer that is
 * gone looks like, posted ones a peer that does not answer.  A request
 * that failed but is not finished (the provider still holds an operation
 * of it that it would not cancel, or has not yet) reports its failure. */
static int timed_out(struct pd_req *r, int timeout_ms)
{
	uint32_t posted, done, held, nchunks = r->nchunks;
	char why[256] = "", msg[sizeof(r->msg)];
	uint64_t eagain;
	int status;

	pthread_mutex_lock(&r->fab->lock);
	posted = r->next < nchunks ? r->next : nchunks;
	done = r->done;
	eagain = r->eagain;
	status = r->status;
	held = r->inflight - r->aux_inflight + r->copying;
	memcpy(msg, r->msg, sizeof(msg));
	pthread_mutex_unlock(&r->fab->lock);
	if (status)
		return pd_error(status, "%s (after %d ms the provider still holds %u of its operations: its buffer is not free yet)",
				msg, timeout_ms, held);
	if (posted < nchunks && eagain)
		snprintf(why, sizeof(why), "; %s answered -FI_EAGAIN %llu times (a full queue, or a peer that cannot be reached)",
			 r->fab->provider, (unsigned long long)eagain);
	return pd_error(-ETIMEDOUT, "%s of %zu bytes (tag 0x%llx): no completion after %d ms (%u of %u chunks posted, %u done%s)",
			kind_names[r->kind], r->len, (unsigned long long)r->tag, timeout_ms,
			posted, nchunks, done, why);
}

int pd_wait(struct pd_req *r, int timeout_ms, size_t *bytes)
{
	int64_t deadline = timeout_ms < 0 ? INT64_MAX : now_ms() + timeout_ms;
	struct pd_fabric *fab = r ? r->fab : NULL;
	unsigned int busy = 0, naps = 0;
	uint64_t seen = 0;
	struct timespec t0;
	bool spin = true;
	int ret;

	/*
	 * Busy polling first, like a raw libfabric loop: a completion that
	 * comes within the budget costs no system call and no wake-up.  Then
	 * sleep until one comes (wakeup.c); a closed fabric fails the
	 * request, which the next test returns.
	 */
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		if (fab && !spin)
			seen = pd_wakeup_gen(&fab->wakeup);
		if ((ret = pd_test(r, bytes)) != 0)
			break;
		if (now_ms() >= deadline)
			return timed_out(r, timeout_ms);
		if (spin)
			spin = fab->wakeup.spin_ns < 0 || elapsed_ns(&t0) < fab->wakeup.spin_ns;
		else if (rest(fab, seen, deadline, &busy, &naps) && pd_wakeup_gen(&fab->wakeup) != seen)
			naps = 0;	/* it moved: the next nap is short again */
	}
	return ret < 0 ? ret : 0;
}

void pd_req_free(struct pd_req *r)
{
	struct pd_fabric *fab;

	/* A forked child's copy: cancelling would reach the parent's
	 * endpoint; the child's memory is all it holds. */
	if (!r || pd_forked_since(r->fab->fork_gen))
		return;
	fab = r->fab;
	pthread_mutex_lock(&fab->lock);
	__atomic_store_n(&r->freed, true, __ATOMIC_RELEASE);
	/* After this returns no copy touches the caller's memory.  The copy's
	 * thread settles r meanwhile, but leaves destroying it to us. */
	r->freeing = true;
	while (r->running)
		pthread_cond_wait(&fab->jobs_done, &fab->lock);
	r->freeing = false;
	abandon(r);
	cancel_inflight(r);
	if (r->next < post_end(r)) {
		/* stand-ins or drains: the wire stays whole behind it */
		enqueue_pending(r);
		post_more(r);
	} else {
		unlink_pending(r);
		settle(r);
	}
	leave(fab);
}

/* The endpoint is closed: nothing posted will complete.  Requests the
 * caller freed go; the others fail and wait for pd_req_free. */
void pd_xfer_close_locked(struct pd_fabric *fab)
{
	struct pd_req *r, *next;
	uint32_t i;

	for (r = fab->live; r; r = next) {
		next = r->live_next;
		for (i = 0; i < r->nchunks; i++) {
			if (r->ops[i].inflight) {
				r->ops[i].inflight = false;
				r->inflight--;
			}
			if (r->ops[i].stage != ST_NONE && r->ops[i].stage != ST_COPYING)
				put_stage(r, &r->ops[i]);
		}
		for (i = 0; r->xops && i < DRAIN_WINDOW; i++) {
			if (r->xops[i].inflight) {
				r->xops[i].inflight = false;
				r->inflight--;
			}
		}
		r->aux_inflight = 0;
		unlink_pending(r);
		fail_req(r, -ECANCELED, "the fabric was closed before it completed");
		settle(r);
	}
	pd_wakeup_progress_locked(&fab->wakeup);
}
