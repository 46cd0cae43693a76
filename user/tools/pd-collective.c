// SPDX-License-Identifier: MIT
/*
 * pd-collective: ring allreduce (reduce-scatter, then allgather) of float32
 * sums over libpeerdirect tagged send/recv, one process per rank, buffers in
 * device memory.  Two fabrics are open at once, one with the path auto
 * (direct: dmabuf or mapped) and one forced to bounce, and their iterations
 * alternate so that load from elsewhere hits both; every iteration's result
 * is checked on every rank.
 *
 *   pd-collective --rank R --nranks N --rendezvous HOST:PORT
 *       [--memory device:N|memfd|host] [--provider P] [--sizes 4K,64K,...]
 *       [--warmup 2] [--iters 5] [--timeout MS]
 *
 * Rank 0 listens on the rendezvous (on every address: HOST is where the
 * others connect).  Rank r's element i in iteration k is the small integer
 * 1 + r + (i * 7 + k * 13 + r * 5) % 64, so every sum is exact in float32
 * whatever the order of the additions and the expected result is known.
 *
 * The time of an iteration is the slowest rank's, from a barrier over the
 * fabric to its local completion; algbw = size / median time (the mean is
 * printed too), busbw = algbw * 2(n-1)/n (nccl-tests' definitions), MB/s =
 * 10^6 B/s.  Sizes up to 1 MiB run 4x the iterations.  Exit status: 0 all verified, 1 transfer errors, 2 any wrong
 * element, 3 setup failed.
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <time.h>

#include "bench_report.h"
#include "dmabuf_source.h"
#include "tool_args.h"
#include "tool_env.h"
#include "errors.h"

#define MAX_SIZES 16
#define MAX_RANKS 64
#define TOOL_NAME "pd-collective"

struct opts {
	int rank, nranks, warmup, iters, timeout_ms, nsizes;
	size_t sizes[MAX_SIZES];
	char host[256];	/* of --rendezvous HOST:PORT */
	const char *provider, *memory;
	uint16_t port;
};

/* One fabric per path, both open at once so that the paths alternate. */
struct lane {
	struct pd_fabric *fab;
	struct pd_mr *mr, *tok_mr;
	uint64_t peers[MAX_RANKS], peer_left, peer_right;
	char tok[MAX_RANKS];	/* host bytes for the fabric barrier */
};

struct ctx {
	const struct opts *o;
	struct pd_rdv *rdv;
	struct lane lanes[2], *l;
	struct dmabuf_source src;
	uint64_t seq;
	size_t max;		/* data at [0, max), scratch at [max, 2 max) */
};

/* Exchanged after every iteration: also the rendezvous' second barrier. */
struct verdict {
	int32_t status;
	uint32_t pad;
	uint64_t wrong;
	uint64_t ns;
};


static float value(int rank, size_t i, int iter)
{
	return (float)(1 + rank + (int)((i * 7 + (size_t)iter * 13 + (size_t)rank * 5) % 64));
}

/* CPU access to the buffer, bracketed like an accelerator runtime would. */
static int cpu_begin(struct ctx *c, uint64_t rw)
{
	return c->src.fd < 0 ? 0 : memfd_sync(c->src.fd, DMA_BUF_SYNC_START | rw);
}

static int cpu_end(struct ctx *c, uint64_t rw)
{
	return c->src.fd < 0 ? 0 : memfd_sync(c->src.fd, DMA_BUF_SYNC_END | rw);
}

static size_t seg_off(size_t count, int n, int s)
{
	return count * (size_t)s / (size_t)n;
}

/* One ring step: send segment `sseg` of data to the right, receive segment
 * `rseg` from the left into data (allgather) or scratch (reduce-scatter). */
static int ring_step(struct ctx *c, size_t count, int sseg, int rseg, bool scratch, int step)
{
	int n = c->o->nranks, ret;
	size_t so = seg_off(count, n, sseg) * 4, sl = seg_off(count, n, sseg + 1) * 4 - so;
	size_t ro = seg_off(count, n, rseg) * 4, rl = seg_off(count, n, rseg + 1) * 4 - ro;
	uint64_t tag = (c->seq << 8) | (uint64_t)step;
	struct pd_req *rreq = NULL, *sreq = NULL;

	tag &= (1ULL << PD_TAG_BITS) - 1;
	/* Send first: posting a receive may copy a message that arrived
	 * before it there and then, and over shm the peer's own send waits
	 * for that copy (performance.md, section 6 M). */
	ret = pd_tsend(c->l->fab, c->l->mr, so, sl, c->l->peer_right, tag, &sreq);
	if (!ret)
		ret = pd_trecv(c->l->fab, c->l->mr, ro + (scratch ? c->max : 0), rl, c->l->peer_left, tag, &rreq);
	if (!ret)
		ret = pd_wait(rreq, c->o->timeout_ms, NULL);
	if (!ret)
		ret = pd_wait(sreq, c->o->timeout_ms, NULL);
	pd_req_free(sreq);
	pd_req_free(rreq);
	if (ret || !scratch)
		return ret;
	/* The "kernel" of the reduction: data[seg] += scratch[seg]. */
	ret = cpu_begin(c, DMA_BUF_SYNC_RW);
	if (!ret) {
		float *d = (float *)(void *)(c->src.map + ro);
		const float *s = (const float *)(const void *)(c->src.map + c->max + ro);
		size_t i;

		for (i = 0; i < rl / 4; i++)
			d[i] += s[i];
		ret = cpu_end(c, DMA_BUF_SYNC_RW);
	}
	return ret;
}

static int allreduce(struct ctx *c, size_t count)
{
	int n = c->o->nranks, r = c->o->rank, s, ret = 0;

	c->seq++;
	for (s = 0; s < n - 1 && !ret; s++)
		ret = ring_step(c, count, (r - s + n) % n, (r - s - 1 + n) % n, true, s);
	for (s = 0; s < n - 1 && !ret; s++)
		ret = ring_step(c, count, (r + 1 - s + n) % n, (r - s + n) % n, false, n + s);
	return ret;
}

/* The timed start: gather to rank 0 and release over the fabric itself (the
 * rendezvous' TCP sockets add tens of ms of skew between ranks). */
static int fab_barrier(struct ctx *c)
{
	struct pd_req *req[MAX_RANKS] = { 0 };
	uint64_t tag = (((c->seq + 1) << 8) | 0xff) & ((1ULL << PD_TAG_BITS) - 1);
	int n = c->o->nranks, r, phase, ret = 0, ret2;

	for (phase = 0; phase < 2 && !ret; phase++) {
		bool gather = phase == 0;

		if (c->o->rank == 0) {
			for (r = 1; r < n && !ret; r++)
				ret = gather ? pd_trecv(c->l->fab, c->l->tok_mr, (size_t)r, 1, c->l->peers[r], tag, &req[r]) :
					       pd_tsend(c->l->fab, c->l->tok_mr, 0, 1, c->l->peers[r], tag, &req[r]);
		} else {
			ret = gather ? pd_tsend(c->l->fab, c->l->tok_mr, 0, 1, c->l->peers[0], tag, &req[0]) :
				       pd_trecv(c->l->fab, c->l->tok_mr, 1, 1, c->l->peers[0], tag, &req[0]);
		}
		for (r = 0; r < n; r++) {
			if (!req[r])
				continue;
			ret2 = pd_wait(req[r], c->o->timeout_ms, NULL);
			ret = ret ? ret : ret2;
			pd_req_free(req[r]);
			req[r] = NULL;
		}
	}
	return ret;
}

static int fill(struct ctx *c, size_t count, int iter)
{
	float *d = (float *)(void *)c->src.map;
	size_t i;
	int ret = cpu_begin(c, DMA_BUF_SYNC_WRITE);

	if (ret)
		return ret;
	for (i = 0; i < count; i++)
		d[i] = value(c->o->rank, i, iter);
	return cpu_end(c, DMA_BUF_SYNC_WRITE);
}

static int check(struct ctx *c, size_t count, int iter, uint64_t *wrong)
{
	const float *d = (const float *)(const void *)c->src.map;
	size_t i;
	int r, ret = cpu_begin(c, DMA_BUF_SYNC_READ);

	if (ret)
		return ret;
	for (i = 0; i < count; i++) {
		float want = 0;

		for (r = 0; r < c->o->nranks; r++)
			want += value(r, i, iter);
		if (d[i] != want && (*wrong)++ == 0)
			fprintf(stderr, "rank %d: iter %d element %zu is %g, want %g\n", c->o->rank,
				iter, i, (double)d[i], (double)want);
	}
	return cpu_end(c, DMA_BUF_SYNC_READ);
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Per timed iteration and path (direct, bounce alternating, so that load
 * from elsewhere hits both), the slowest rank's time in ns into t[p][];
 * sorts them; 0, or -1 on a transfer error, -2 on a wrong element, -3 if
 * the rendezvous was lost. */
static int run_size(struct ctx *c, size_t size, int iters, double *t[2])
{
	struct verdict all[MAX_RANKS];
	size_t count = size / 4;
	int k, p, r, bad = 0;

	for (k = 0; k < c->o->warmup + iters; k++) {
		for (p = 0; p < 2; p++) {
			struct verdict mine = { 0 };
			uint64_t t0, slow = 0;

			c->l = &c->lanes[p];
			mine.status = fill(c, count, k);
			if (!mine.status)
				mine.status = fab_barrier(c);
			t0 = now_ns();
			if (!mine.status)
				mine.status = allreduce(c, count);
			mine.ns = now_ns() - t0;
			if (mine.status)
				fprintf(stderr, "rank %d: %s size %zu iter %d: %s (%s)\n", c->o->rank,
					p ? "bounce" : "direct", size, k, pd_last_error(),
					pd_strerror(mine.status));
			else
				mine.status = check(c, count, k, &mine.wrong);
			if (pd_rdv_allgather(c->rdv, &mine, sizeof(mine), all))
				return -3;
			for (r = 0; r < c->o->nranks; r++) {
				if (all[r].status)
					bad = bad ? bad : -1;
				if (all[r].wrong)
					bad = -2;
				slow = all[r].ns > slow ? all[r].ns : slow;
			}
			if (bad)
				return bad;
			if (k >= c->o->warmup)
				t[p][k - c->o->warmup] = (double)slow;
		}
	}
	for (p = 0; p < 2; p++)
		qsort(t[p], (size_t)iters, sizeof(*t[p]), cmp_d);
	return 0;
}

static int connect_fabric(struct ctx *c, int lane, enum pd_path path)
{
	struct pd_fabric_attr attr;
	char mine[256] = { 0 }, (*all)[256];
	size_t len = sizeof(mine);
	int n = c->o->nranks, r = c->o->rank, ret, i;

	c->l = &c->lanes[lane];
	pd_fabric_attr_init(&attr);
	attr.provider = c->o->provider;
	attr.path = path;
	all = calloc((size_t)n, sizeof(*all));
	if (!all)
		return -ENOMEM;
	ret = pd_fabric_open(&attr, &c->l->fab);
	if (!ret)
		ret = pd_fabric_addr(c->l->fab, mine, &len) ?:
		      pd_rdv_allgather(c->rdv, mine, sizeof(mine), all);
	for (i = 0; i < n && !ret; i++)
		ret = pd_fabric_insert(c->l->fab, all[i], len, &c->l->peers[i]);
	free(all);
	c->l->peer_left = c->l->peers[(r + n - 1) % n];
	c->l->peer_right = c->l->peers[(r + 1) % n];
	if (!ret)
		ret = pd_mr_reg_host(c->l->fab, c->l->tok, sizeof(c->l->tok), 0, &c->l->tok_mr);
	if (!ret)
		ret = source_register(&c->src, c->l->fab, &c->l->mr);
	return ret;
}

static void close_fabric(struct ctx *c, int lane)
{
	c->l = &c->lanes[lane];
	pd_mr_dereg(c->l->mr);
	pd_mr_dereg(c->l->tok_mr);
	pd_fabric_close(c->l->fab);
	c->l->mr = c->l->tok_mr = NULL;
	c->l->fab = NULL;
}

static int iters_for(const struct opts *o, size_t size)
{
	return size <= (1 << 20) ? o->iters * 4 : o->iters;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: pd-collective --rank R --nranks N --rendezvous HOST:PORT [options]\n"
		"  --memory KIND    device:N | udmabuf | memfd | host (default device:0)\n"
		"  --provider NAME  libfabric provider (default auto)\n"
		"  --sizes LIST     bytes per rank, multiples of 4 (default 4K,64K,1M,8M,32M,64M)\n"
		"  --warmup N       untimed iterations per size and path (default 2)\n"
		"  --iters N        timed iterations (default 5; 4x for sizes <= 1M)\n"
		"  --timeout MS     bound on every wait (default 120000)\n");
}

static int parse(int argc, char **argv, struct opts *o)
{
	static const struct option lo[] = {
		{ "rank", 1, 0, 'r' }, { "nranks", 1, 0, 'n' }, { "rendezvous", 1, 0, 'R' },
		{ "memory", 1, 0, 'm' }, { "provider", 1, 0, 'p' }, { "sizes", 1, 0, 's' },
		{ "warmup", 1, 0, 'w' }, { "iters", 1, 0, 'i' }, { "timeout", 1, 0, 't' },
		{ "help", 0, 0, 'h' }, { 0 },
	};
	static const size_t defsizes[] = { 4 << 10, 64 << 10, 1 << 20, 8 << 20, 32 << 20, 64 << 20 };
	char *tok, *save;
	int c, i;

	record_cmdline(argc, argv);
	*o = (struct opts) { .rank = -1, .nranks = 0, .warmup = 2, .iters = 5,
			     .timeout_ms = 120000, .memory = "device:0", .nsizes = 6 };
	memcpy(o->sizes, defsizes, sizeof(defsizes));
	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 'r': if (TOOL_INT_ARG("--rank", 0, MAX_RANKS - 1, &o->rank)) return -1; break;
		case 'n': if (TOOL_INT_ARG("--nranks", 2, MAX_RANKS, &o->nranks)) return -1; break;
		case 'R':
			if (tool_hostport(TOOL_NAME, "--rendezvous", optarg, o->host,
					  sizeof(o->host), &o->port))
				return -1;
			break;
		case 'm': o->memory = optarg; break;
		case 'p': o->provider = optarg; break;
		case 'w': if (TOOL_INT_ARG("--warmup", 0, 100000, &o->warmup)) return -1; break;
		case 'i': if (TOOL_INT_ARG("--iters", 1, 100000, &o->iters)) return -1; break;
		case 't': if (TOOL_INT_ARG("--timeout", 1, TOOL_MAX_TIMEOUT_MS, &o->timeout_ms)) return -1; break;
		case 's':
			o->nsizes = 0;
			for (tok = strtok_r(optarg, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
				if (o->nsizes == MAX_SIZES || pd_parse_size(tok, &o->sizes[o->nsizes]) ||
				    !o->sizes[o->nsizes] || o->sizes[o->nsizes] % 4) {
					fprintf(stderr, "--sizes: bad or too many sizes at '%s'\n", tok);
					return -1;
				}
				o->nsizes++;
			}
			break;
		default: usage(); return -1;
		}
	}
	if (optind != argc || !o->nranks || o->rank < 0 || !o->host[0] || !o->nsizes) {
		usage();
		return -1;
	}
	if (o->rank >= o->nranks) {
		fprintf(stderr, "pd-collective: --rank %d is not a rank of --nranks %d\n", o->rank, o->nranks);
		return -1;
	}
	for (i = 0; i < o->nsizes; i++)
		if (o->sizes[i] / 4 < (size_t)o->nranks) {
			fprintf(stderr, "size %zu: fewer floats than ranks\n", o->sizes[i]);
			return -1;
		}
	return 0;
}

int main(int argc, char **argv)
{
	static const enum pd_path paths[2] = { PD_PATH_AUTO, PD_PATH_BOUNCE };
	double med[2][MAX_SIZES], mean[2][MAX_SIZES], *t[2];
	struct ctx c = { 0 };
	struct opts o;
	int i, j, k, ret, status = 0;

	tool_env_defaults();

	if (parse(argc, argv, &o))
		return 3;
	c.o = &o;
	c.src.fd = -1;
	t[0] = calloc(2 * (size_t)iters_for(&o, 1), sizeof(double));
	if (!t[0])
		return 3;
	t[1] = t[0] + iters_for(&o, 1);
	for (i = 0; i < o.nsizes; i++)
		c.max = o.sizes[i] > c.max ? o.sizes[i] : c.max;
	ret = source_open(&c.src, o.memory, 2 * c.max);
	if (!ret)
		ret = pd_rdv_open(o.host, o.port, o.rank, o.nranks, 300000, &c.rdv);
	for (k = 0; k < 2 && !ret; k++)
		ret = connect_fabric(&c, k, paths[k]);
	if (ret) {
		fprintf(stderr, "pd-collective rank %d: setup: %s (%s)\n", o.rank, pd_last_error(),
			pd_strerror(ret));
		status = 3;
	} else if (o.rank == 0) {
		printf("# %s\n# provider %s, %d ranks, memory %s, float32 sum, MB/s = 10^6 B/s\n",
		       cmdline, pd_fabric_provider(c.lanes[0].fab), o.nranks, o.memory);
		for (k = 0; k < 2; k++)
			printf("# %s: path %s: %s\n", k ? "bounce" : "direct",
			       pd_path_name(pd_mr_path(c.lanes[k].mr)), pd_mr_reason(c.lanes[k].mr));
		printf("# every iteration verified on every rank; the paths alternate per iteration;\n"
		       "# time of an iteration = slowest rank; us and MB/s from the median\n"
		       "# iteration, mean us alongside; algbw/busbw in MB/s\n");
		printf("%10s %5s %8s %8s %8s %8s %8s %8s %8s %8s %6s\n", "size", "iters", "dir us",
		       "bnc us", "dir mean", "bnc mean", "dir alg", "dir bus", "bnc alg",
		       "bnc bus", "ratio");
		fflush(stdout);
	}
	for (i = 0; i < o.nsizes && !status; i++) {
		int it = iters_for(&o, o.sizes[i]);
		double bus = 2.0 * (o.nranks - 1) / o.nranks, a[2];

		ret = run_size(&c, o.sizes[i], it, t);
		if (ret) {
			status = ret == -2 ? 2 : ret == -3 ? 3 : 1;
			if (o.rank == 0)
				printf("# size %zu: %s\n", o.sizes[i],
				       status == 2 ? "WRONG RESULT" : "FAILED (see stderr)");
			break;
		}
		for (k = 0; k < 2; k++) {
			med[k][i] = t[k][it / 2];
			for (mean[k][i] = 0, j = 0; j < it; j++)
				mean[k][i] += t[k][j] / it;
			a[k] = (double)o.sizes[i] / med[k][i] * 1e3;
		}
		if (o.rank == 0)
			printf("%10zu %5d %8.0f %8.0f %8.0f %8.0f %8.1f %8.1f %8.1f %8.1f %5.2fx\n",
			       o.sizes[i], it, med[0][i] / 1e3, med[1][i] / 1e3, mean[0][i] / 1e3,
			       mean[1][i] / 1e3, a[0], a[0] * bus, a[1], a[1] * bus, a[0] / a[1]);
		fflush(stdout);
	}
	if (!status && pd_rdv_barrier(c.rdv))
		status = 3;
	for (k = 0; k < 2; k++)
		if (c.lanes[k].fab)
			close_fabric(&c, k);
	pd_rdv_close(c.rdv);
	source_close(&c.src);
	free(t[0]);
	return status;
}
