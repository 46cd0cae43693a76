// SPDX-License-Identifier: MIT
/*
 * pd-coll: nccl-tests' collectives over libpeerdirect, every path side by
 * side in one run.
 *
 *   pd-coll [--np N | under mpirun/srun | --rank R --nranks N] [options]
 *
 * Flags as nccl-tests: -b/-e/-f/-i sizes, -n iterations, -w warmup, -c
 * checked iterations, -o sum|min|max|all, -d float|bfloat16|all, -r root;
 * and --coll, --paths, --net (a path through an NCCL net plugin,
 * net_lane.c), --memory, --provider, --csv, --plot, --depth,
 * --chunk, --algo, --rd-max, --stat, --timeout (see usage() and
 * Documentation/man/pd-coll.1).
 *
 * For every size, placement (out-of-place, then in-place) and iteration,
 * the paths take turns (each first in turn over the timed iterations):
 * device memory on the direct path, device memory through bounce, host
 * memory, and with --net the plugin's path.  After the warmups, -c checked iterations
 * each fill the input (hashed values, see data.c), poison output and
 * scratch, barrier over the lane's fabric, run the collective and check
 * every element on every rank; they are not timed.  Then -n timed
 * iterations: barrier and collective, on what the one before left, as
 * nccl-tests does (measure()).  Unlike nccl-tests, which times its
 * iterations back to back and averages over the ranks, each iteration here
 * starts from a barrier (the paths take turns per iteration) and its time
 * is the slowest rank's, release skew included; the table shows the mean
 * over the iterations (--stat median for the median).  The ratios between
 * paths pair the paths' times within each iteration (stats.h).
 * Exit status (the tools' own, tool_cli.h): 0 all verified, 1 transfer
 * error, 2 usage, 3 setup failed (gnuplot missing for --plot included),
 * 4 permission denied, 5 any wrong element.
 *
 * Its one "# Avg bus bandwidth" line is nccl-tests' own, printed once at
 * the end over every table, for the primary path (the first lane run:
 * direct, bounce, host); each table's averages of every path are on lines
 * that nccl-tests parsers do not match (report.c).
 */
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "coll.h"
#include "../bench_report.h"
#include "../tool_cli.h"
#include "../tool_env.h"
#include "peerdirect_ext.h"

const char *const lane_names[NLANES] = { "direct", "bounce", "host", "net" };
const char *const coll_names[NCOLLS] = { "allreduce", "allgather", "reducescatter",
					 "broadcast", "reduce", "alltoall", "sendrecv" };
const char *const type_names[NTYPES] = { "float", "bfloat16" };
const char *const op_names[NOPS] = { "sum", "min", "max" };

/* Per rank and size: what the iterations measured. */
struct sample {
	int32_t status, pad;
	uint64_t wrong[NLANES][2];
	double ns[];		/* [lane][placement][iter] */
};


static struct lane lanes[NLANES];

/* What every table of the run shares. */
struct sweep {
	struct opts *o;
	struct boot *b;
	struct sample *me, *all;	/* this rank's samples; rank 0 gathers every rank's */
	size_t stride, region;
	const size_t *sizes;
	int nsizes;
	struct run_sums run;
};

/*
 * One size of one collective, every lane, both placements: -w warmups
 * (the first fills the buffers), -c checked iterations, then -n timed
 * ones.  As in nccl-tests the check is not timed and the timed iterations
 * run back to back on what the one before left: a refill before each
 * would leave the buffers dirty in the cache, and their write-back would
 * be timed as the collective's.  Returns 0, or the first local transfer
 * error (the sample records it for the others).
 */
static int measure(struct run *r, enum coll_kind k, const struct geom *g, struct sample *me)
{
	const struct opts *o = r->o;
	int ip, it, j, p, ret, on[NLANES], non = 0;

	for (p = 0; p < NLANES; p++)
		if (o->lanes[p])
			on[non++] = p;
	/*
	 * Whether the lane that goes first in an iteration pays for it is not
	 * known (Documentation/results/performance-log.md, section T: differences within
	 * the spread); a fixed order would put any such cost on the direct
	 * lane every time.  So over the timed iterations each goes first in
	 * turn, from the first timed one, and every lane holds every place
	 * equally often when -n is a multiple of the number of lanes.  With
	 * two lanes the last of one iteration then runs again first in the
	 * next (d h | h d), each lane as often.
	 */
	for (ip = 0; ip < 2; ip++) {
		for (it = 0; it < o->warmup + o->check + o->iters; it++) {
			for (j = 0; j < non; j++) {
				int chk = it - o->warmup, timed = chk - o->check;
				bool checked = chk >= 0 && timed < 0;
				uint64_t t0;

				p = on[(j + (timed > 0 ? timed : 0)) % non];
				r->l = &lanes[p];
				ret = it == 0 || checked ? prepare(r, k, g, ip, it) : 0;
				ret = ret ?: lane_barrier(r);
				t0 = coll_now_ns();
				if (!ret)
					ret = coll_run(r, k, g, ip);
				if (p == o->slow_lane && timed >= 0)
					nanosleep(&(struct timespec){ .tv_nsec = SLOW_PATH_NS }, NULL);
				if (ret) {
					fprintf(stderr, "pd-coll: rank %d: %s %s %zu B %s iter %d: %s (%s)\n",
						r->rank, coll_names[k], lane_names[p], g->recvcount * r->esz,
						ip ? "in-place" : "out-of-place", it, pd_last_error(),
						pd_strerror(ret));
					me->status = 1;
					return ret;
				}
				if (timed >= 0)
					me->ns[((size_t)p * 2 + (size_t)ip) * (size_t)o->iters + (size_t)timed] =
						(double)(coll_now_ns() - t0);
				if (!checked)
					continue;
				ret = o->corrupt ? corrupt(r, g, ip, chk) : 0;
				ret = ret ?: verify(r, k, g, ip, it, &me->wrong[p][ip]);
				if (ret) {
					me->status = 1;
					return ret;
				}
			}
		}
	}
	return 0;
}

/* Rank 0: the slowest rank's time in each timed iteration of one lane, ns. */
static void slowest(const struct opts *o, int n, const struct sample *all, size_t stride,
		    int p, int ip, double *t)
{
	int it, q;

	for (it = 0; it < o->iters; it++) {
		t[it] = 0;
		for (q = 0; q < n; q++) {
			const struct sample *s = (const void *)((const char *)all + (size_t)q * stride);
			double v = s->ns[((size_t)p * 2 + (size_t)ip) * (size_t)o->iters + (size_t)it];

			t[it] = v > t[it] ? v : t[it];
		}
	}
}

/* Rank 0: slowest rank per iteration, then the mean or median. */
static void summarize(const struct opts *o, int n, const struct sample *all, size_t stride,
		      const struct geom *g, size_t esz, int p, int ip, struct result *res)
{
	double *t = calloc((size_t)o->iters, sizeof(double)), sec = 0;
	int it, q;

	memset(res, 0, sizeof(*res));
	if (!t)
		return;
	slowest(o, n, all, stride, p, ip, t);
	if (o->median) {
		sec = coll_median(t, (size_t)o->iters) / 1e9;
	} else {
		for (it = 0; it < o->iters; it++)
			sec += t[it] / 1e9 / o->iters;
	}
	for (q = 0; q < n; q++)
		res->wrong += ((const struct sample *)(const void *)((const char *)all + (size_t)q * stride))->wrong[p][ip];
	res->us = sec * 1e6;
	res->alg = (double)(g->count * esz) * g->alg_factor / 1e9 / sec;
	res->bus = res->alg * g->bus_factor;
	res->checked = o->check > 0;
	free(t);
}

/*
 * Rank 0: out-of-place busbw of the direct lane over each other native
 * lane's, and of the host lane over the net lane's (both on host memory
 * by default: the same bytes, libpeerdirect's API against the plugin's),
 * paired per iteration (stats.h): that lane's time over its base's in the
 * same iteration.  out[p] has n 0 where there is no ratio.
 */
static void direct_over(const struct opts *o, int n, const struct sample *all, size_t stride,
			struct coll_ratio out[NLANES])
{
	double *t = calloc((size_t)o->iters * 3, sizeof(double));
	int p;

	for (p = 0; p < NLANES; p++)
		out[p] = (struct coll_ratio){ NAN, NAN, NAN, 0 };
	for (p = LANE_DIRECT + 1; t && p < NLANES; p++) {
		int base = coll_ratio_base(p);

		if (!o->lanes[p] || !o->lanes[base])
			continue;
		slowest(o, n, all, stride, base, 0, t);
		slowest(o, n, all, stride, p, 0, t + o->iters);
		out[p] = coll_paired_ratio(t + o->iters, t, (size_t)o->iters, t + 2 * (size_t)o->iters);
	}
	free(t);
}

/* The copy the bounce path adds, as the CPU does it here: SYNC-bracketed
 * memcpy between host memory and the device memory's mapping, the median
 * of 5, GB/s (an input of the model in Documentation/performance.md). */
void coll_copy_bandwidth(const struct lane *l, size_t len, double *to_dev, double *from_dev)
{
	double t[2][5];
	char *host = malloc(len);
	int k, d;

	*to_dev = *from_dev = 0;
	if (!host)
		return;
	memset(host, 1, len);
	for (k = 0; k < 5; k++) {
		for (d = 0; d < 2; d++) {
			uint64_t t0 = coll_now_ns();

			if (l->src.fd >= 0)
				memfd_sync(l->src.fd, DMA_BUF_SYNC_START | (d ? DMA_BUF_SYNC_READ : DMA_BUF_SYNC_WRITE));
			if (d)
				memcpy(host, l->src.map, len);
			else
				memcpy(l->src.map, host, len);
			if (l->src.fd >= 0)
				memfd_sync(l->src.fd, DMA_BUF_SYNC_END | (d ? DMA_BUF_SYNC_READ : DMA_BUF_SYNC_WRITE));
			t[d][k] = (double)(coll_now_ns() - t0);
		}
	}
	for (d = 0; d < 2; d++)
		*(d ? from_dev : to_dev) = (double)len / coll_median(t[d], 5);
	free(host);
}

/* Every rank takes the same way out of here: nothing in it can fail on
 * one rank alone but the allgather, which fails on all. */
static bool sweeps_agree(struct boot *b, uint64_t plan, bool outputs_open)
{
	uint64_t all[MAX_RANKS];
	bool ok;
	int p;

	/* Rank 0 alone opens the outputs (outputs_open is true on the
	 * others): its failure is plan 0, which no rank's own plan is. */
	plan = outputs_open ? plan | 1 : 0;
	ok = !b->allgather(b, &plan, sizeof(plan), all);
	if (!ok)
		fprintf(stderr, "pd-coll: rank %d: comparing sweeps: %s\n", b->rank, pd_last_error());
	if (ok && !all[0]) {
		if (b->rank)
			fprintf(stderr, "pd-coll: rank %d: rank 0 could not open its --csv or --plot file\n",
				b->rank);
		return false;
	}
	for (p = 1; ok && p < b->size; p++) {
		if (all[p] == all[0])
			continue;
		if (b->rank == 0)
			fprintf(stderr, "pd-coll: rank %d would run a different sweep from rank 0 (sizes, collectives, types, ops, root, paths, -n/-w/-c, --algo, --chunk or --depth differ): give every rank the same options\n",
				p);
		ok = false;
	}
	return ok;
}

/*
 * Whether the library configured some lane's shm endpoint without CMA
 * (FI_SHM_DISABLE_CMA, or FI_HMEM granted, which turns it off): its
 * pins_cpu_maps is false.  Lanes can differ (the bounce lane is opened with
 * path bounce, PEERDIRECT_PATH=dmabuf reaches the auto ones); --rd-max is
 * one for all, so one lane without CMA decides it, whichever --paths chose.
 */
static bool shm_lane_without_cma(const struct opts *o)
{
	struct pd_fabric_ext_info x;
	int p;

	for (p = 0; p < NLANES; p++)
		if (o->lanes[p] && lanes[p].fab && !pd_fabric_ext_query(lanes[p].fab, &x) &&
		    !x.pins_cpu_maps)
			return true;
	return false;
}


/* Every lane the run asked for: one fails on every rank or on none
 * (lane_open).  0 or 3. */
static int open_lanes(const struct opts *o, struct boot *b, size_t region)
{
	int p, ret, status = 0;

	for (p = 0; p < NLANES && !status; p++) {
		int bad = -1;

		lanes[p].src.fd = -1;
		if (!o->lanes[p])
			continue;
		ret = lane_open(&lanes[p], p, o, b, region, &bad);
		if (ret && bad >= 0) {
			if (b->rank == 0)
				fprintf(stderr, "pd-coll: rank %d could not set up its %s path (its own message says why)\n",
					bad, lane_names[p]);
			status = 3;
		} else if (ret) {
			fprintf(stderr, "pd-coll: rank %d: %s path setup: %s (%s)\n", b->rank,
				lane_names[p], pd_last_error(), pd_strerror(ret));
			status = 3;
		}
	}
	return status;
}

/*
 * Every rank's pid and host, and how it cuts messages: pieces and
 * algorithms are derived on every rank, and a rank on another provider or
 * environment would cut them differently and hang.  Every rank takes part,
 * even one without its sample buffers, so that all leave together.  0 or 3.
 */
static int agree_on_cutting(const struct opts *o, struct boot *b, bool ready,
			    struct rankinfo *ris)
{
	struct rankinfo ri = { 0 };
	int p;

	ri.pid = (int32_t)getpid();
	gethostname(ri.host, sizeof(ri.host) - 1);
	ri.ready = ready;
	ri.piece = o->piece, ri.small_chunk = o->small_chunk, ri.small_max = o->small_max;
	ri.rd_max = o->rd_max;
	if (b->allgather(b, &ri, sizeof(ri), ris))
		return 3;
	for (p = 0; p < b->size; p++) {
		if (!ris[p].ready) {
			if (b->rank == 0)
				fprintf(stderr, "pd-coll: rank %d could not allocate its samples\n", p);
			return 3;
		}
		if (ris[p].piece != ris[0].piece || ris[p].small_chunk != ris[0].small_chunk ||
		    ris[p].small_max != ris[0].small_max || ris[p].rd_max != ris[0].rd_max) {
			if (b->rank == 0)
				fprintf(stderr, "pd-coll: rank %d would cut messages differently from rank 0 "
					"(pieces of %" PRIu64 " B, small pieces %" PRIu64 " up to %" PRIu64
					" B, --rd-max %" PRIu64 ", against %" PRIu64 ", %" PRIu64 ", %" PRIu64
					", %" PRIu64 "): give every rank the same provider and options\n",
					p, ris[p].piece, ris[p].small_chunk, ris[p].small_max, ris[p].rd_max,
					ris[0].piece, ris[0].small_chunk, ris[0].small_max, ris[0].rd_max);
			return 3;
		}
	}
	return 0;
}

/* Whether the run stops: a transfer error (1) or a lost rank (3); wrong
 * elements (5) let it go on, the exit status says it. */
static bool stops(int status)
{
	return status == 1 || status == 3;
}

/*
 * One size on every path: measured on every rank, gathered; every rank
 * learns the status.  Rank 0 summarizes the row into *row.  The status.
 */
static int run_size(struct sweep *s, struct run *r, enum coll_kind k, const struct geom *g,
		    int status, struct table_row *row)
{
	const struct opts *o = s->o;
	int p, q, ip;

	memset(s->me, 0, s->stride);
	measure(r, k, g, s->me);
	if (s->b->allgather(s->b, s->me, s->stride, s->all))
		return 3;
	for (p = 0; p < s->b->size; p++) {
		const struct sample *smp = (const void *)((char *)s->all + (size_t)p * s->stride);

		if (smp->status)
			status = 1;
		/* every rank knows: the run goes on, the exit status says it */
		for (q = 0; q < NLANES * 2; q++)
			if (smp->wrong[q / 2][q % 2] && !status)
				status = TOOL_EX_DATA;
	}
	if (stops(status) || s->b->rank)
		return status;
	for (p = 0; p < NLANES; p++) {
		if (!o->lanes[p])
			continue;
		for (ip = 0; ip < 2; ip++)
			summarize(o, s->b->size, s->all, s->stride, g, r->esz, p, ip, &row->res[p][ip]);
	}
	return status;
}

/* One table: a collective, type and op over every size.  The status. */
static int run_table(struct sweep *s, enum coll_kind k, enum dtype type, enum redop op,
		     int status)
{
	const struct opts *o = s->o;
	struct run r = { .o = o, .rank = s->b->rank, .n = s->b->size, .t = type,
			 .op = op, .esz = type == T_FLOAT ? 4 : 2, .max = s->region / 3 };
	struct table_sums t = { 0 };	/* about 8 KiB: no allocation that could fail on one rank */
	struct coll_ratio ratio[NLANES];
	int si;

	if (s->b->rank == 0)
		report_table_header(o, k, type, op);
	for (si = 0; si < s->nsizes && !stops(status); si++) {
		struct table_row row = { .k = k, .t = type, .op = op, .nranks = s->b->size,
					 .esz = r.esz, .size = s->sizes[si], .ratio = ratio };
		struct geom g;

		coll_geom(k, s->sizes[si], r.esz, s->b->size, &g);
		if (!g.sendcount || !g.recvcount)
			continue;
		row.g = &g;
		status = run_size(s, &r, k, &g, status, &row);
		if (stops(status) || s->b->rank)
			continue;
		direct_over(o, s->b->size, s->all, s->stride, ratio);
		report_rows(o, &row, lanes, &t);
	}
	/* A table cut short still gets its footer, then the run ends. */
	if (s->b->rank == 0)
		report_table_footer(o, k, type, op, &t, stops(status), &s->run);
	return status;
}

/* Every table: collectives, then types, then ops (reductions only). */
static int run_tables(struct sweep *s)
{
	const struct opts *o = s->o;
	int ci, ti, oi, status = 0;

	for (ci = 0; ci < o->ncolls && !stops(status); ci++) {
		enum coll_kind k = o->colls[ci];

		for (ti = 0; ti < o->ntypes && !stops(status); ti++)
			for (oi = 0; oi < (coll_reducing(k) ? o->nops : 1) && !stops(status); oi++)
				status = run_table(s, k, o->types[ti],
						   coll_reducing(k) ? o->ops[oi] : OP_SUM, status);
	}
	return status;
}

int main(int argc, char **argv)
{
	struct opts o;
	struct launch_opts lo;
	struct boot b;
	struct sweep s = { .o = &o, .b = &b };
	struct rankinfo ris[MAX_RANKS];
	struct pd_fabric *first;
	size_t sizes[64];
	bool began = false;	/* rank 0 printed its header: the run went ahead */
	char datpath[4200] = "";
	int p, ret, status, child;

	tool_env_defaults();
	record_cmdline(argc, argv);
	ret = coll_parse(argc, argv, &o, &lo);
	if (ret)
		return ret == 'h' ? TOOL_EX_OK : TOOL_EX_USAGE;
	if (coll_sweep_sizes(&o, sizes, &s.nsizes))
		return TOOL_EX_USAGE;
	s.sizes = sizes;
	if (o.plot && !coll_in_path("gnuplot")) {
		fprintf(stderr, "pd-coll: --plot %s: gnuplot is not in PATH (apt-get install "
			"gnuplot-nox); nothing was run\n", o.plot);
		return TOOL_EX_SETUP;
	}
	ret = launch(argc, argv, lo.rdv, lo.rank, lo.nranks, lo.np, &b);
	if (ret) {
		/* Forked ranks fail their rendezvous too: reap them. */
		if (!(lo.np > 0 && b.rank > 0))
			launch_wait_children(3);
		return 3;
	}
	child = lo.np > 0 && b.rank > 0;
	/* Before any lane is opened, which could fail on one rank alone; and
	 * before the root check, which then fails on every rank or none. */
	status = sweeps_agree(&b, coll_sweep_plan(&o, sizes, s.nsizes),
			      b.rank || report_open_outputs(&o, datpath, sizeof(datpath))) ? 0 : 3;
	if (status)
		goto out_boot;
	if (o.root < 0 || o.root >= b.size) {
		fprintf(stderr, "pd-coll: root %d is not a rank of %d\n", o.root, b.size);
		status = 3;
		goto out_boot;
	}
	s.region = 3 * (o.maxb < 4096 ? 4096 : o.maxb);
	status = open_lanes(&o, &b, s.region);
	if (status)
		goto out;
	/* same provider on every native lane; the net lane has no fabric of its own here */
	first = lanes[o.lanes[0] ? 0 : o.lanes[1] ? 1 : 2].fab;
	coll_provider_defaults(&o, pd_fabric_provider(first), b.size, shm_lane_without_cma(&o));
	s.stride = sizeof(struct sample) + (size_t)NLANES * 2 * (size_t)o.iters * sizeof(double);
	s.stride = (s.stride + 7) / 8 * 8;
	s.me = calloc(1, s.stride);
	s.all = calloc((size_t)b.size, s.stride);
	status = agree_on_cutting(&o, &b, s.me && s.all, ris);
	if (status)
		goto out;
	if (b.rank == 0) {
		report_run_header(cmdline, &o, &b, ris, lanes, first);
		began = true;
	}
	/* Test only (--test-kill-rank): a rank lost mid-run, as to the OOM killer. */
	if (o.kill_rank > 0 && o.kill_rank == b.rank)
		raise(SIGKILL);
	status = run_tables(&s);
	if (b.rank == 0)
		report_run_footer(&o, &s.run, stops(status));
out:
	for (p = 0; p < NLANES; p++)
		if (lanes[p].fab || lanes[p].src.map || lanes[p].net)
			lane_close(&lanes[p]);
	if (report_close_outputs(&o, began, datpath))
		status = status ? status : 1;
	if (b.rank == 0 && (fflush(stdout) || ferror(stdout))) {
		fprintf(stderr, "pd-coll: standard output: the results could not be written\n");
		status = status ? status : 1;
	}
	free(s.me);
	free(s.all);
out_boot:
	report_drop_outputs();
	b.close(&b);
	if (!child) {
		int worst = launch_wait_children(status);

		status = worst > status ? worst : status;
	}
	return status;
}
