// SPDX-License-Identifier: MIT
/*
 * pd-coll lanes: one fabric per path (direct: device memory on the path
 * the library picks, dmabuf or mapped; bounce: device memory forced through
 * staging; host: host memory), each with its own region, addresses and
 * connections, so that iterations can alternate between them.
 *
 * Every lane moves data the same way: messages cut into pieces (each at
 * most one wire chunk, so one message; of the small chunk for messages of
 * at most --small-max), at most `depth` sends and `depth`
 * receives in flight per exchange, and sends left to complete while the
 * next exchange runs.  So the pipeline depth is the same on every path
 * and a ratio between paths measures the copy, nothing else.  The net
 * lane (net_lane.c) moves the same messages through an NCCL net plugin:
 * only lane_post, lane_test, lane_drop and the idle wait dispatch on it.
 */
#include <stdio.h>
#include <string.h>
#include <sched.h>
#include <time.h>

#include "coll.h"
#include "peerdirect_ext.h"


uint64_t coll_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/*
 * Nothing moved since tok was read: let the library poll for its spin
 * budget and then sleep until its fabric progresses (or end), rather than
 * yield to whatever else wants this core (a rank beside busy threads
 * waited a whole scheduler slice per yield).
 */
int lane_idle(struct run *r, uint64_t tok, uint64_t end)
{
	uint64_t now = coll_now_ns();
	int ms = now >= end ? 0 : (int)((end - now + 999999) / 1000000), ret;

	/* A plugin moves data only inside its calls and has nothing to sleep
	 * on: poll again, as NCCL's proxy thread does, but give the core up
	 * first (a peer rank on this core may be what it waits for). */
	if (r->l->net)
		return sched_yield();
	ret = pd_fabric_wait(r->l->fab, tok, ms);
	return ret < 0 ? ret : 0;
}

int cpu_begin(struct run *r)
{
	return r->l->src.fd < 0 ? 0 : memfd_sync(r->l->src.fd, DMA_BUF_SYNC_START | DMA_BUF_SYNC_RW);
}

int cpu_end(struct run *r)
{
	return r->l->src.fd < 0 ? 0 : memfd_sync(r->l->src.fd, DMA_BUF_SYNC_END | DMA_BUF_SYNC_RW);
}

/* An address, or len 0 from a rank whose lane failed before it had one. */
struct lane_addr {
	uint32_t len;
	char addr[256];
};

/*
 * Every rank takes part in the address exchange and in the agreement that
 * follows, whatever failed before, so that a failure on one rank fails
 * the lane on all of them instead of leaving the others waiting, or
 * reading its next message as this one.  Returns 0; this rank's own
 * error (reported with pd_error); or -ENOTCONN with *bad set to the first
 * rank that failed, when this rank did not.  A failed exchange itself
 * returns its error; the ranks it left behind fail at their next one.
 */
int lane_open(struct lane *l, enum lane_kind kind, const struct opts *o, struct boot *b,
	      size_t region, int *bad)
{
	struct lane_addr all[MAX_RANKS];
	struct pd_fabric_attr attr;
	struct lane_addr mine = { 0 };
	/* depth sends and receives, and depth sends left from the exchange
	 * before; a send beyond the slots gets staging of its own */
	size_t len = sizeof(mine.addr), slots = 3 * (size_t)o->depth + 2;
	int32_t failed[MAX_RANKS];
	bool missing = false;
	int ret, i, xret;

	if (kind == LANE_NET)
		return net_lane_open(l, o, b, region, bad);
	memset(l, 0, sizeof(*l));
	l->kind = kind;
	ret = source_open(&l->src, kind == LANE_HOST ? "host" : o->memory, region);
	if (ret) {
		pd_ext_error(ret, "%s lane: memory %s of %zu bytes: %s", lane_names[kind],
			 kind == LANE_HOST ? "host" : o->memory, region, strerror(-ret));
		/* What it opened before failing: main closes only lanes with a map. */
		source_close(&l->src);
		memset(&l->src, 0, sizeof(l->src));
		l->src.fd = -1;
	}
	if (!ret) {
		pd_fabric_attr_init(&attr);
		attr.provider = o->provider;
		attr.path = kind == LANE_BOUNCE ? PD_PATH_BOUNCE : PD_PATH_AUTO;
		attr.chunk_size = o->chunk;
		attr.bounce_slots = slots < 8 ? 8 : slots;
		ret = pd_fabric_open(&attr, &l->fab) ?: pd_fabric_addr(l->fab, mine.addr, &len);
	}
	if (!ret && (!len || len > sizeof(mine.addr)))
		ret = pd_ext_error(-EPROTO, "%s lane: an address of %zu bytes", lane_names[kind], len);
	if (!ret)
		mine.len = (uint32_t)len;
	xret = b->allgather(b, &mine, sizeof(mine), all);
	if (xret)
		return ret ?: xret;
	for (i = 0; i < b->size && !ret && !missing; i++) {
		missing = !all[i].len || all[i].len > sizeof(all[i].addr);
		if (!missing)
			ret = pd_fabric_insert(l->fab, all[i].addr, all[i].len, &l->peer[i]);
	}
	if (!ret && !missing)
		ret = pd_mr_reg_host(l->fab, l->ctl, sizeof(l->ctl), 0, &l->ctl_mr);
	if (!ret && !missing)
		ret = source_register(&l->src, l->fab, &l->mr);
	xret = b->allgather(b, &(int32_t){ ret ? 1 : 0 }, sizeof(int32_t), failed);
	if (ret || xret)
		return ret ?: xret;
	for (i = 0; i < b->size; i++) {
		if (failed[i] || (missing && !all[i].len)) {
			*bad = i;
			return -ENOTCONN;
		}
	}
	/* An address no rank owned up to failing: a rank of another build. */
	return missing ? pd_ext_error(-EPROTO, "%s lane: an empty address came without a failure",
				  lane_names[kind]) : 0;
}

void lane_close(struct lane *l)
{
	if (l->net || l->kind == LANE_NET) {
		net_lane_close(l);
		return;
	}
	pd_mr_dereg(l->mr);
	pd_mr_dereg(l->ctl_mr);
	if (l->fab)
		pd_fabric_close(l->fab);
	source_close(&l->src);
	memset(l, 0, sizeof(*l));
	l->src.fd = -1;
}

/* 24 bits of collective number, 8 of step, 16 of piece: below 2^48. */
uint64_t coll_tag(struct run *r, int step, size_t piece)
{
	return (r->seq & 0xffffff) << 24 | (uint64_t)(step & 0xff) << 16 | (piece & 0xffff);
}

/* The fabric's progress count: the net lane has none (lane_idle spins). */
static uint64_t progress(const struct lane *l)
{
	return l->net ? 0 : pd_fabric_progress_count(l->fab);
}

int lane_post(struct lane *l, bool send, bool ctl, size_t off, size_t len, int peer,
	      uint64_t tag, void **req)
{
	struct pd_mr *mr = ctl ? l->ctl_mr : l->mr;
	struct pd_req *pr = NULL;
	int ret;

	if (l->net)
		return net_lane_post(l, send, ctl, off, len, peer, tag, req);
	ret = send ? pd_tsend(l->fab, mr, off, len, l->peer[peer], tag, &pr) :
		     pd_trecv(l->fab, mr, off, len, l->peer[peer], tag, &pr);
	*req = pr;
	return ret;
}

int lane_test(struct lane *l, void *req)
{
	int t;

	if (l->net)
		return net_lane_test(l, req);
	t = pd_test(req, NULL);
	if (t == 0)
		return 0;
	pd_req_free(req);
	return t < 0 ? t : 1;
}

/* A plugin cannot cancel: its request ends with its comm (lane_close). */
void lane_drop(struct lane *l, void *req)
{
	if (!l->net)
		pd_req_free(req);
}

static int wait_all(struct run *r, void **req, int n)
{
	uint64_t t0 = coll_now_ns(), end = t0 + (uint64_t)r->o->timeout_ms * 1000000ULL;
	int i, ret = 0, left;

	do {
		uint64_t tok = progress(r->l);

		left = 0;
		for (i = 0; i < n; i++) {
			int t;

			if (!req[i])
				continue;
			t = lane_test(r->l, req[i]);
			if (t == 0) {
				left++;
				continue;
			}
			ret = ret ? ret : t < 0 ? t : 0;
			req[i] = NULL;
		}
		if (left && coll_now_ns() > end) {
			ret = pd_ext_error(-ETIMEDOUT, "barrier: no completion after %d ms", r->o->timeout_ms);
			break;
		}
		if (left)
			ret = lane_idle(r, tok, end);
	} while (left && !ret);
	for (i = 0; i < n; i++)
		lane_drop(r->l, req[i]);
	return ret;
}

/*
 * A dissemination barrier over the lane's own fabric: in round k every
 * rank sends to rank + 2^k and receives from rank - 2^k, so after
 * ceil(log2 n) rounds each has heard from all.  Every rank leaves on a
 * message it received, so ranks leave together and each starts its clock
 * at the same moment: a gather to rank 0 and a release let rank 0 leave one
 * message earlier than the others and so timed that message as part of the
 * collective (MPI_Barrier, what pd-mpi-allreduce times after, is symmetric
 * too).
 */
int lane_barrier(struct run *r)
{
	struct lane *l = r->l;
	int k, round, ret = 0;

	r->seq++;
	for (k = 1, round = 0; k < r->n && !ret; k <<= 1, round++) {
		void *req[2] = { 0 };
		uint64_t tag = coll_tag(r, 0xff, (size_t)round);

		/* Posted again while the plugin says try again (native posts
		 * never do): both loops end, by the post or by a failure. */
		do
			ret = lane_post(l, true, true, MAX_RANKS - 1, 1, (r->rank + k) % r->n, tag,
					&req[0]);
		while (ret == 1);
		do
			ret = ret ?: lane_post(l, false, true, (size_t)round, 1,
					       (r->rank - k + r->n) % r->n, tag, &req[1]);
		while (ret == 1);
		ret = wait_all(r, req, 2) ?: ret;
	}
	return ret;
}

/* The piece size of a message: both ends derive it from its length alone. */
static size_t piece_size(const struct opts *o, size_t len)
{
	return o->small_chunk && len <= o->small_max ? o->small_chunk : o->piece;
}

/*
 * Deferred send completions.  A send completes only when the peer has
 * taken its data (over ofi_rxm, after the peer's read and its
 * acknowledgement), so an exchange that waited for its sends would add
 * that round trip to every step: the next step's data is ready as soon as
 * this step's receives are reduced.  So an exchange returns with its sends
 * pending, and whatever writes the region later (a receive, a reduction,
 * a copy) first waits for the pending sends that read the bytes it
 * writes.  No wait can deadlock: it is for a send of this step or an
 * earlier one, and every rank posts a step's receives having waited only
 * for its own sends of earlier steps (and, in a chain, for data it
 * received), while each wait drives the fabric's progress.  Nothing checks
 * that an exchange's own sends and receives touch different bytes: every
 * collective is built so (a chain sends piece i only once it arrived).
 */
static int pend_test(struct run *r, int i)
{
	int t = lane_test(r->l, r->pend[i].req);

	if (t == 0)
		return 0;
	/* In posting order, oldest first: what pend_poll relies on. */
	memmove(&r->pend[i], &r->pend[i + 1], (size_t)(--r->npend - i) * sizeof(r->pend[0]));
	return t < 0 ? t : 1;
}

static bool overlaps(const struct pend *p, size_t off, size_t len)
{
	return p->off < off + len && off < p->off + p->len;
}

/*
 * Reaps pending sends, oldest first, up to the first one still in flight:
 * testing that one drives progress (on tcp a poll() syscall), and one such
 * call per idle pass is enough.  0 or the first failure.
 */
static int pend_poll(struct run *r)
{
	int t;

	while (r->npend) {
		t = pend_test(r, 0);
		if (t <= 0)
			return t;
	}
	return 0;
}

/* Waits for the pending sends that read any of [off, off + len). */
int pend_wait(struct run *r, size_t off, size_t len)
{
	uint64_t t0 = coll_now_ns(), end = t0 + (uint64_t)r->o->timeout_ms * 1000000ULL;
	int i = 0, t;

	while (i < r->npend) {
		uint64_t tok = progress(r->l);

		if (!overlaps(&r->pend[i], off, len)) {
			i++;
			continue;
		}
		t = pend_test(r, i);
		if (t < 0)
			return t;
		if (t > 0)
			continue;
		if (coll_now_ns() > end)
			return pd_ext_error(-ETIMEDOUT, "a send of %zu bytes: no completion after %d ms",
					r->pend[i].len, r->o->timeout_ms);
		t = lane_idle(r, tok, end);
		if (t)
			return t;
	}
	return 0;
}

/* Cancels what is still pending, after a failure. */
void pend_drop(struct run *r)
{
	while (r->npend)
		lane_drop(r->l, r->pend[--r->npend].req);
}

/* Length of piece i of a message of len bytes in pieces of P. */
static size_t piece_len(size_t len, size_t i, size_t P)
{
	return len - i * P < P ? len - i * P : P;
}

int xchg(struct run *r, const struct xchg *x)
{
	struct lane *l = r->l;
	size_t D = (size_t)r->o->depth;
	/* A chain forwards piece i once piece i arrived: one size for both. */
	size_t PR = piece_size(r->o, x->rlen), PS = x->chain ? PR : piece_size(r->o, x->slen);
	size_t ns = x->speer >= 0 ? (x->slen + PS - 1) / PS : 0;
	size_t nr = x->rpeer >= 0 ? (x->rlen + PR - 1) / PR : 0;
	void *sq[MAX_DEPTH] = { 0 }, *rq[MAX_DEPTH] = { 0 };
	size_t ps = 0, ds = 0, pr = 0, dr = 0, i;
	uint64_t last = coll_now_ns(), end;
	int ret = 0, t;

	/*
	 * Sends are posted before receives.  Posting a receive may copy, there
	 * and then, a message that arrived before it (shm copies a single-copy
	 * message with process_vm_readv under its region lock, and a peer
	 * posting to us spins on that lock).  So a rank that posted receives
	 * first could make its peer wait for the whole copy before the peer's
	 * own data could move: over shm, 8 and 16 MiB allreduce took 18% and
	 * 26% longer.  One rule for every path; its one measured cost, shm's
	 * bounce path at 1 MiB, is in results/performance-log.md, section M.
	 */
	while (!ret && (ps < ns || dr < nr)) {
		uint64_t tok = progress(l);
		bool moved = false;

		for (; !ret && ps < ns && ps - ds < D && (!x->chain || ps < dr); ps++, moved = true) {
			size_t len = piece_len(x->slen, ps, PS);

			ret = lane_post(l, true, false, x->soff + ps * PS, len, x->speer,
					coll_tag(r, x->step, ps), &sq[ps % D]);
			if (ret == 1) {	/* the plugin's try again: later, not posted */
				ret = 0;
				break;
			}
		}
		for (; !ret && pr < nr && pr - dr < D; pr++, moved = true) {
			size_t len = piece_len(x->rlen, pr, PR);

			ret = pend_wait(r, x->roff + pr * PR, len);
			if (ret)
				break;
			ret = lane_post(l, false, false, x->roff + pr * PR, len, x->rpeer,
					coll_tag(r, x->step, pr), &rq[pr % D]);
			if (ret == 1) {
				ret = 0;
				break;
			}
		}
		if (!ret && dr < pr && (t = lane_test(l, rq[dr % D])) != 0) {
			size_t len = piece_len(x->rlen, dr, PR);

			ret = t < 0 ? t : 0;
			rq[dr % D] = NULL;
			if (!ret && x->on_recv)
				ret = x->on_recv(r, dr * PR, len, x->arg);
			dr++;
			moved = true;
		}
		if (!ret && ds < ps && (t = lane_test(l, sq[ds % D])) != 0) {
			ret = t < 0 ? t : 0;
			sq[ds % D] = NULL;
			ds++;
			moved = true;
		}
		if (!moved && r->npend) {
			int before = r->npend;

			ret = pend_poll(r);
			moved = r->npend != before;
		}
		if (moved) {
			last = coll_now_ns();
			continue;
		}
		end = last + (uint64_t)r->o->timeout_ms * 1000000ULL;
		if (coll_now_ns() > end)
			ret = pd_ext_error(-ETIMEDOUT, "step %d: no progress for %d ms (%zu of %zu pieces posted to rank %d, %zu of %zu received from rank %d)",
				       x->step, r->o->timeout_ms, ps, ns, x->speer, dr, nr, x->rpeer);
		else
			ret = lane_idle(r, tok, end);
	}
	for (; !ret && ds < ps; ds++) {
		if (r->npend == r->o->max_pend)
			ret = pend_wait(r, r->pend[0].off, r->pend[0].len);
		if (!ret) {
			r->pend[r->npend++] = (struct pend) { sq[ds % D], x->soff + ds * PS,
							      piece_len(x->slen, ds, PS) };
			sq[ds % D] = NULL;
		}
	}
	for (i = 0; i < D; i++) {
		lane_drop(l, sq[i]);
		lane_drop(l, rq[i]);
	}
	return ret;
}
