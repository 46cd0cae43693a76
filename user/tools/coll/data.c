// SPDX-License-Identifier: MIT
/*
 * pd-coll data: float32 and bfloat16, sum/min/max, and the checks.
 *
 * Every input element is a small integer, 1 + h mod m, with m = min(16,
 * 256 / ranks) and h a hash of the element's index and of the rank,
 * iteration, path and placement: every sum stays exact in bfloat16 (8
 * significant bits) whatever the order of the additions, so the expected
 * result is known exactly, and the sequence has no period, so data in the
 * wrong place (a piece, a block, another rank's segment) is wrong in all
 * but about 1 element in m.  (A linear formula, 7i + ... mod 16, repeated
 * every 16 elements: a piece delivered in place of another passed.)  Before every checked iteration the
 * output and the scratch region are poisoned (0xa5 bytes, which no
 * expected value has), so a receive that writes nothing is counted wrong.  The CPU touches
 * device memory only inside SYNC brackets, as an accelerator runtime would.
 */
#include <stdio.h>
#include <string.h>

#include "coll.h"

#define POISON 0xa5

static inline float bf16_to_f(uint16_t v)
{
	uint32_t u = (uint32_t)v << 16;
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

static inline uint16_t f_to_bf16(float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	u += 0x7fff + ((u >> 16) & 1);	/* round to nearest even */
	return (uint16_t)(u >> 16);
}

float load(enum dtype t, const void *p, size_t i)
{
	return t == T_FLOAT ? ((const float *)p)[i] : bf16_to_f(((const uint16_t *)p)[i]);
}

void store(enum dtype t, void *p, size_t i, float v)
{
	if (t == T_FLOAT)
		((float *)p)[i] = v;
	else
		((uint16_t *)p)[i] = f_to_bf16(v);
}

static inline float apply(enum redop op, float a, float b)
{
	switch (op) {
	case OP_MIN: return a < b ? a : b;
	case OP_MAX: return a > b ? a : b;
	default: return a + b;
	}
}

/* restrict lets gcc's -O2 cost model vectorize these loops, which it will
 * not do while the arrays may overlap.  On x86-64 with glibc they also get
 * an AVX2 clone, picked at load time where the CPU has it (the baseline is
 * SSE2).  The clones need ifunc, which musl lacks, and sanitizers
 * instrument the resolver that runs before they are set up (clang's TSan
 * crashes there), so those builds keep the one loop. */
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define REDUCE_SANITIZED
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define REDUCE_SANITIZED
#endif
#if defined(__x86_64__) && defined(__GLIBC__) && !defined(REDUCE_SANITIZED) && defined(__has_attribute)
#if __has_attribute(target_clones)
#define REDUCE_CLONES __attribute__((target_clones("avx2", "default")))
#endif
#endif
#ifndef REDUCE_CLONES
#define REDUCE_CLONES
#endif

REDUCE_CLONES
static void reduce_f32(enum redop op, float *restrict d, const float *restrict x,
		       const float *restrict y, size_t n)
{
	size_t i;

	switch (op) {
	case OP_SUM: for (i = 0; i < n; i++) d[i] = x[i] + y[i]; break;
	case OP_MIN: for (i = 0; i < n; i++) d[i] = x[i] < y[i] ? x[i] : y[i]; break;
	default: for (i = 0; i < n; i++) d[i] = x[i] > y[i] ? x[i] : y[i]; break;
	}
}

REDUCE_CLONES
static void reduce_f32_inplace(enum redop op, float *restrict d, const float *restrict y, size_t n)
{
	size_t i;

	switch (op) {
	case OP_SUM: for (i = 0; i < n; i++) d[i] += y[i]; break;
	case OP_MIN: for (i = 0; i < n; i++) d[i] = d[i] < y[i] ? d[i] : y[i]; break;
	default: for (i = 0; i < n; i++) d[i] = d[i] > y[i] ? d[i] : y[i]; break;
	}
}

/* The algorithms reduce into one of the operands or into a third buffer,
 * never into a partly overlapping one; the operations commute. */
void reduce_into(enum dtype t, enum redop op, void *dst, const void *a, const void *b, size_t n)
{
	size_t i;

	if (t == T_FLOAT && a != b) {
		if (dst == a || dst == b)
			reduce_f32_inplace(op, dst, dst == a ? b : a, n);
		else
			reduce_f32(op, dst, a, b, n);
		return;
	}
	for (i = 0; i < n; i++)
		store(t, dst, i, apply(op, load(t, a, i), load(t, b, i)));
}

/* splitmix64's finalizer: every input bit reaches every output bit. */
static inline uint64_t mix(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

/* One iteration's inputs: per rank, the hash of its seed, made once. */
struct inputs {
	uint64_t m;
	uint64_t base[MAX_RANKS];
};

static void inputs_init(const struct run *r, int iter, int ip, struct inputs *in)
{
	int q;

	in->m = (uint64_t)(256 / r->n);
	in->m = in->m > 16 ? 16 : in->m < 1 ? 1 : in->m;
	for (q = 0; q < r->n; q++)
		in->base[q] = mix(((uint64_t)(uint32_t)iter << 8 | (uint32_t)q) << 3 |
				  (uint64_t)r->l->kind << 1 | (uint64_t)(ip != 0));
}

/* Element i of rank q's input. */
static inline float value(const struct inputs *in, int q, size_t i)
{
	return (float)(1 + mix(in->base[q] + i) % in->m);
}

static char *at(struct run *r, size_t off)
{
	return r->l->src.map + off;
}

int local_copy(struct run *r, size_t dst, size_t src, size_t len)
{
	int ret;

	if (dst == src || !len)
		return 0;
	ret = pend_wait(r, dst, len) ?: cpu_begin(r);
	if (ret)
		return ret;
	memmove(at(r, dst), at(r, src), len);
	return cpu_end(r);
}

size_t coll_in_off(struct run *r, const struct geom *g, bool ip)
{
	return ip ? OFF_OUT(r) + g->send_ip_off * (size_t)r->rank * r->esz : OFF_IN(r);
}

size_t coll_out_off(struct run *r, const struct geom *g, bool ip)
{
	return ip ? OFF_OUT(r) + g->recv_ip_off * (size_t)r->rank * r->esz : OFF_OUT(r);
}

static size_t span(const struct run *r, const struct geom *g)
{
	return (g->sendcount > g->recvcount ? g->sendcount : g->recvcount) * r->esz;
}

int prepare(struct run *r, enum coll_kind k, const struct geom *g, bool ip, int iter)
{
	char *in;
	struct inputs vals;
	size_t i;
	int ret = cpu_begin(r);

	(void)k;
	if (ret)
		return ret;
	inputs_init(r, iter, ip, &vals);
	memset(at(r, OFF_OUT(r)), POISON, span(r, g));
	memset(at(r, OFF_SCR(r)), POISON, span(r, g));
	in = at(r, coll_in_off(r, g, ip));
	for (i = 0; i < g->sendcount; i++)
		store(r->t, in, i, value(&vals, r->rank, i));
	return cpu_end(r);
}

static float reduced(const struct run *r, const struct inputs *vals, size_t i)
{
	float v = value(vals, 0, i);
	int q;

	for (q = 1; q < r->n; q++)
		v = apply(r->op, v, value(vals, q, i));
	return r->t == T_FLOAT ? v : bf16_to_f(f_to_bf16(v));
}

int verify(struct run *r, enum coll_kind k, const struct geom *g, bool ip, int iter,
	   uint64_t *wrong)
{
	const char *out = at(r, coll_out_off(r, g, ip));
	size_t j, n = g->recvcount, c = g->count, first = SIZE_MAX;
	int R = r->rank, N = r->n, ret = cpu_begin(r);
	float got = 0, want = 0;
	struct inputs vals;

	if (ret)
		return ret;
	inputs_init(r, iter, ip, &vals);
	for (j = 0; j < n; j++) {
		float w;
		bool ok;

		switch (k) {
		case C_ALLREDUCE: w = reduced(r, &vals, j); break;
		case C_ALLGATHER: w = value(&vals, (int)(j / c), j % c); break;
		case C_REDUCESCATTER: w = reduced(r, &vals, (size_t)R * c + j); break;
		case C_BROADCAST: w = value(&vals, r->o->root, j); break;
		case C_REDUCE:
			if (R == r->o->root)
				w = reduced(r, &vals, j);
			else if (ip)	/* a non-root's buffer is left as it was */
				w = value(&vals, R, j);
			else
				w = load(r->t, (const unsigned char[4]) { POISON, POISON, POISON, POISON }, 0);
			break;
		case C_ALLTOALL: w = value(&vals, (int)(j / c), (size_t)R * c + j % c); break;
		default: w = value(&vals, (R + N - 1) % N, j); break;
		}
		if (k == C_REDUCE && R != r->o->root && !ip) {
			const unsigned char *b = (const unsigned char *)out + j * r->esz;

			ok = b[0] == POISON && b[r->esz - 1] == POISON;
		} else {
			ok = load(r->t, out, j) == w;
		}
		if (!ok && (*wrong)++ == 0) {
			first = j;
			got = load(r->t, out, j);
			want = w;
		}
	}
	if (first != SIZE_MAX)
		fprintf(stderr, "pd-coll: rank %d: %s %s %s %s iter %d: element %zu of %zu is %g, want %g\n",
			R, coll_names[k], lane_names[r->l->kind], type_names[r->t], ip ? "in-place" : "out-of-place",
			iter, first, n, (double)got, (double)want);
	return cpu_end(r);
}

/*
 * Test only.  --test-corrupt: put the poison back into one output element,
 * as a receive that wrote nothing would leave it.  --test-misplace: copy
 * the output's first half over its second, in whole 64-byte lines, as a
 * transport that delivered one piece (or a stale bounce slot) in place of
 * another would leave it; data that repeated with a short period would
 * pass.
 */
int corrupt(struct run *r, const struct geom *g, bool ip, int iter)
{
	char *out = at(r, coll_out_off(r, g, ip));
	size_t half = g->recvcount * r->esz / 2 & ~(size_t)63;
	int ret = cpu_begin(r);

	if (ret)
		return ret;
	if (r->o->corrupt == CORRUPT_MISPLACE)
		memcpy(out + half, out, half);
	else
		memset(out + ((size_t)iter % g->recvcount) * r->esz, POISON, r->esz);
	return cpu_end(r);
}
