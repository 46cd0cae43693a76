// SPDX-License-Identifier: MIT
/*
 * pd-coll algorithms, on one lane's region (input, output, scratch):
 *
 *   allreduce      ring (reduce-scatter then allgather, 2(n-1) steps), or
 *                  recursive doubling (log2 n exchanges of the whole
 *                  vector, plus one step in and out for the ranks beyond a
 *                  power of two) up to --rd-max bytes
 *   allgather      ring, n-1 steps
 *   reduce-scatter ring with a double-buffered accumulator, n-1 steps
 *   broadcast      pipelined chain from the root
 *   reduce         pipelined chain ending at the root (non-roots reduce
 *                  into scratch: their buffers are left as they were)
 *   alltoall       pairwise exchange, n-1 steps
 *   sendrecv       to rank+1, from rank-1
 *
 * Buffer geometry and bus-bandwidth factors are nccl-tests' (src/<collective>.cu
 * GetCollByteCount and GetBw, doc/PERFORMANCE.md).  Received pieces are
 * reduced as they arrive, never into a piece that is still being sent.
 */
#include "coll.h"

void coll_geom(enum coll_kind k, size_t bytes, size_t esz, int n, struct geom *g)
{
	size_t count = bytes / esz, base = (count / (size_t)n) & ~(16 / esz - 1);
	double nn = n, ring = (nn - 1) / nn;

	*g = (struct geom) { .count = count, .sendcount = count, .recvcount = count,
			     .alg_factor = 1, .bus_factor = 1 };
	switch (k) {
	case C_ALLREDUCE:
		g->bus_factor = 2 * ring;
		break;
	case C_ALLGATHER:
		*g = (struct geom) { .count = base, .sendcount = base, .recvcount = base * (size_t)n,
				     .send_ip_off = base, .alg_factor = nn, .bus_factor = ring };
		break;
	case C_REDUCESCATTER:
		*g = (struct geom) { .count = base, .sendcount = base * (size_t)n, .recvcount = base,
				     .recv_ip_off = base, .alg_factor = nn, .bus_factor = ring };
		break;
	case C_ALLTOALL:
		*g = (struct geom) { .count = base, .sendcount = base * (size_t)n,
				     .recvcount = base * (size_t)n, .alg_factor = nn, .bus_factor = ring };
		break;
	default:	/* broadcast, reduce, sendrecv: factor 1 */
		break;
	}
}

struct red {
	size_t dst, a, b;	/* region offsets: dst[i] = a[i] op b[i] */
};

static int reduce_piece(struct run *r, size_t off, size_t len, void *arg)
{
	const struct red *x = arg;
	char *m = r->l->src.map;
	int ret = pend_wait(r, x->dst + off, len) ?: cpu_begin(r);

	if (ret)
		return ret;
	reduce_into(r->t, r->op, m + x->dst + off, m + x->a + off, m + x->b + off, len / r->esz);
	return cpu_end(r);
}

static int right(const struct run *r)
{
	return (r->rank + 1) % r->n;
}

static int left(const struct run *r)
{
	return (r->rank + r->n - 1) % r->n;
}

/* Byte offset and length of ring segment s of count elements. */
static size_t sego(const struct run *r, size_t count, int s)
{
	return count * (size_t)s / (size_t)r->n * r->esz;
}

static size_t segl(const struct run *r, size_t count, int s)
{
	return sego(r, count, s + 1) - sego(r, count, s);
}

/*
 * Reduce-scatter: step s receives the left neighbour's partial sum of
 * segment R-s-1 and adds this rank's input to it into out (each segment is
 * reduced once here, so the input is always the other operand); step 0
 * sends the input's segment R, later steps the segment reduced the step
 * before.  The allgather then writes every segment of out but the one this
 * rank finished.  So out-of-place needs no copy of the input first.
 */
static int allreduce_ring(struct run *r, size_t count, size_t in, size_t out)
{
	int n = r->n, R = r->rank, s, ret = 0;

	for (s = 0; s < n - 1 && !ret; s++) {
		int ss = (R - s + n) % n, rs = (R - s - 1 + n) % n;
		struct red red = { out + sego(r, count, rs), in + sego(r, count, rs),
				   OFF_SCR(r) + sego(r, count, rs) };
		struct xchg x = { .speer = right(r), .soff = (s ? out : in) + sego(r, count, ss),
				  .slen = segl(r, count, ss), .rpeer = left(r),
				  .roff = OFF_SCR(r) + sego(r, count, rs), .rlen = segl(r, count, rs),
				  .step = s, .on_recv = reduce_piece, .arg = &red };

		ret = xchg(r, &x);
	}
	for (s = 0; s < n - 1 && !ret; s++) {
		int ss = (R + 1 - s + n) % n, rs = (R - s + n) % n;
		struct xchg x = { .speer = right(r), .soff = out + sego(r, count, ss),
				  .slen = segl(r, count, ss), .rpeer = left(r),
				  .roff = out + sego(r, count, rs), .rlen = segl(r, count, rs),
				  .step = n + s };

		ret = xchg(r, &x);
	}
	return ret;
}

/*
 * Recursive doubling; ranks past the largest power of two p fold into
 * their even neighbour first and get the result back last.  A rank sends
 * the input until it has reduced once, and its first reduction writes out
 * (src + received -> out): out of place there is no copy of the input,
 * and no peer reads out before this rank has written it.  That first
 * reduction may run piece by piece as the pieces arrive, since it writes
 * nothing being sent; later ones send out and wait for the send.
 */
static int allreduce_rd(struct run *r, size_t count, size_t in, size_t out)
{
	int n = r->n, R = r->rank, p = 1, rem, me, mask, step = 1, ret = 0;
	size_t len = count * r->esz, scr = OFF_SCR(r), src = in;

	while (p * 2 <= n)
		p *= 2;
	rem = n - p;
	if (R < 2 * rem) {
		struct red red = { out, in, scr };
		struct xchg x = { .speer = -1, .rpeer = -1, .step = 0 };

		if (R % 2 == 0) {
			x.speer = R + 1, x.soff = in, x.slen = len;
			me = -1;
		} else {
			x.rpeer = R - 1, x.roff = scr, x.rlen = len;
			x.on_recv = reduce_piece, x.arg = &red;
			me = R / 2;
			src = out;
		}
		ret = xchg(r, &x);
	} else {
		me = R - rem;
	}
	for (mask = 1; me >= 0 && mask < p && !ret; mask <<= 1, step++) {
		int pn = me ^ mask, partner = pn < rem ? pn * 2 + 1 : pn + rem;
		struct red red = { out, src, scr };
		struct xchg x = { .speer = partner, .soff = src, .slen = len, .rpeer = partner,
				  .roff = scr, .rlen = len, .step = step };

		if (src != out) {
			x.on_recv = reduce_piece, x.arg = &red;
			ret = xchg(r, &x);
		} else {
			/* Reduce only when the send of out is done. */
			ret = xchg(r, &x) ?: reduce_piece(r, 0, len, &red);
		}
		src = out;
	}
	if (!ret && R < 2 * rem) {
		struct xchg x = { .speer = -1, .rpeer = -1, .step = 0xfe };

		if (R % 2)
			x.speer = R - 1, x.soff = out, x.slen = len;
		else
			x.rpeer = R + 1, x.roff = out, x.rlen = len;
		ret = xchg(r, &x);
	}
	return ret;
}

static int reduce_scatter(struct run *r, size_t base, size_t in, size_t out)
{
	int n = r->n, R = r->rank, s, ret = 0;
	size_t blk = base * r->esz, h[2] = { OFF_SCR(r), OFF_SCR(r) + blk };

	for (s = 0; s < n - 1 && !ret; s++) {
		int rs = (R - s - 2 + 2 * n) % n;
		struct red red = { s == n - 2 ? out : h[s % 2], h[s % 2], in + (size_t)rs * blk };
		struct xchg x = { .speer = right(r), .slen = blk, .rpeer = left(r), .roff = h[s % 2],
				  .rlen = blk, .step = s, .on_recv = reduce_piece, .arg = &red };

		x.soff = s == 0 ? in + (size_t)((R - 1 + n) % n) * blk : h[(s - 1) % 2];
		ret = xchg(r, &x);
	}
	return ret;
}

static int allgather(struct run *r, size_t base, size_t in, size_t out)
{
	int n = r->n, R = r->rank, s, ret;
	size_t blk = base * r->esz;

	ret = local_copy(r, out + (size_t)R * blk, in, blk);
	for (s = 0; s < n - 1 && !ret; s++) {
		struct xchg x = { .speer = right(r), .soff = out + (size_t)((R - s + n) % n) * blk,
				  .slen = blk, .rpeer = left(r),
				  .roff = out + (size_t)((R - s - 1 + n) % n) * blk, .rlen = blk,
				  .step = s };

		ret = xchg(r, &x);
	}
	return ret;
}

static int broadcast(struct run *r, size_t count, size_t in, size_t out)
{
	int n = r->n, pos = (r->rank - r->o->root + n) % n;
	size_t len = count * r->esz;
	struct xchg x = { .speer = -1, .rpeer = -1, .step = 0 };

	if (pos == 0) {
		x.speer = right(r), x.soff = in, x.slen = len;
		return local_copy(r, out, in, len) ?: xchg(r, &x);
	}
	x.rpeer = left(r), x.roff = out, x.rlen = len;
	if (pos < n - 1)
		x.speer = right(r), x.soff = out, x.slen = len, x.chain = true;
	return xchg(r, &x);
}

static int reduce(struct run *r, size_t count, size_t in, size_t out)
{
	int n = r->n, pos = (r->rank - r->o->root - 1 + 2 * n) % n;
	size_t len = count * r->esz, scr = OFF_SCR(r);
	struct red red = { pos == n - 1 ? out : scr, scr, in };
	struct xchg x = { .speer = -1, .rpeer = -1, .step = 0 };

	if (pos == 0) {
		x.speer = right(r), x.soff = in, x.slen = len;
		return xchg(r, &x);
	}
	x.rpeer = left(r), x.roff = scr, x.rlen = len, x.on_recv = reduce_piece, x.arg = &red;
	if (pos < n - 1)
		x.speer = right(r), x.soff = scr, x.slen = len, x.chain = true;
	return xchg(r, &x);
}

static int alltoall(struct run *r, size_t base, size_t in, size_t out, bool ip)
{
	int n = r->n, R = r->rank, s, ret;
	size_t blk = base * r->esz, dst = ip ? OFF_SCR(r) : out;

	ret = local_copy(r, dst + (size_t)R * blk, in + (size_t)R * blk, blk);
	for (s = 1; s < n && !ret; s++) {
		int to = (R + s) % n, from = (R - s + n) % n;
		struct xchg x = { .speer = to, .soff = in + (size_t)to * blk, .slen = blk,
				  .rpeer = from, .roff = dst + (size_t)from * blk, .rlen = blk,
				  .step = s };

		ret = xchg(r, &x);
	}
	return ret ?: ip ? local_copy(r, out, dst, (size_t)n * blk) : 0;
}

static int sendrecv(struct run *r, size_t count, size_t in, size_t out, bool ip)
{
	size_t len = count * r->esz, dst = ip ? OFF_SCR(r) : out;
	struct xchg x = { .speer = right(r), .soff = in, .slen = len, .rpeer = left(r),
			  .roff = dst, .rlen = len, .step = 0 };

	return xchg(r, &x) ?: ip ? local_copy(r, out, dst, len) : 0;
}

int coll_run(struct run *r, enum coll_kind k, const struct geom *g, bool ip)
{
	size_t in = coll_in_off(r, g, ip), out = coll_out_off(r, g, ip);
	bool rd;
	int ret;

	r->seq++;
	switch (k) {
	case C_ALLREDUCE:
		rd = r->o->algo == ALGO_RD ||
		     (r->o->algo == ALGO_AUTO && g->count * r->esz <= r->o->rd_max);
		ret = rd ? allreduce_rd(r, g->count, in, out) : allreduce_ring(r, g->count, in, out);
		break;
	case C_ALLGATHER: ret = allgather(r, g->count, in, out); break;
	case C_REDUCESCATTER: ret = reduce_scatter(r, g->count, in, out); break;
	case C_BROADCAST: ret = broadcast(r, g->count, in, out); break;
	case C_REDUCE: ret = reduce(r, g->count, in, out); break;
	case C_ALLTOALL: ret = alltoall(r, g->count, in, out, ip); break;
	default: ret = sendrecv(r, g->count, in, out, ip); break;
	}
	/* Its buffers are the caller's again: no send may still read them. */
	ret = ret ?: pend_wait(r, 0, SIZE_MAX);
	if (ret)
		pend_drop(r);
	return ret;
}
