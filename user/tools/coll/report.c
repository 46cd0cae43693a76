// SPDX-License-Identifier: MIT
/*
 * What rank 0 prints, apart from measuring: the run's header, nccl-tests'
 * table (a row per size and path), the paired ratios, each table's
 * footer and the run's average line; and the --csv and --plot files.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "coll.h"
#include "stats.h"

extern char **environ;

static struct outfile csv, plotdat;
static int nplot;
static char plotnames[256][48];

/* nccl-tests' getFloatStr: as many decimals as the width allows. */
static void fmt(double v, int w, char *s)
{
	if (snprintf(s, (size_t)w + 1, "%*.2f", w, v) <= w)
		return;
	if (snprintf(s, (size_t)w + 1, "%*.1f", w, v) <= w)
		return;
	if (snprintf(s, (size_t)w + 1, "%*.0f", w, v) <= w)
		return;
	snprintf(s, (size_t)w + 1, w >= 7 ? "%*.1e" : "%*.0e", w, v);
}

static const char *lane_memory(const struct opts *o, int p)
{
	return p == LANE_HOST ? "host" : p == LANE_NET ? o->net_memory : o->memory;
}

static void csv_header(void)
{
	fprintf(csv.f, "collective,path,path_used,provider,memory,nranks,size,count,type,redop,root,placement,time_us,algbw_gbs,busbw_gbs,wrong,iters,sweep_size\n");
}

/* One ratio cell: "1.22x [1.13, 1.34]" (median [quartiles]), "1.22x (of 2)"
 * below 4 pairs, "n/a" for none. */
static void ratio_cell(const struct coll_ratio *r, char *s, size_t len)
{
	if (!r->n)
		snprintf(s, len, "n/a");
	else if (r->n < 4)
		snprintf(s, len, "%.2fx (of %zu)", r->med, r->n);
	else
		snprintf(s, len, "%.2fx [%.2f, %.2f]", r->med, r->q1, r->q3);
}

/* The primary path: the first lane run (direct, else bounce, else host). */
static int primary_lane(const struct opts *o)
{
	int p;

	for (p = 0; p < NLANES; p++)
		if (o->lanes[p])
			return p;
	return 0;
}

/*
 * nccl-tests' line, exactly as its common.cu prints it ("%g " then the
 * newline: no NCCL_TESTS_MIN_BW verdict), once per run after the last
 * table, as nccl-tests does however many types and ops it ran: the
 * primary path's busbw averaged over every row of every table.
 */
static void nccl_avg_line(const struct opts *o, const double sum[NLANES], int rows)
{
	int p = primary_lane(o);

	printf("# %-20s : %g \n", "Avg bus bandwidth", rows ? sum[p] / (2.0 * rows) : 0.0);
}

/*
 * A table's averages, every path's, on lines of pd-coll's own, which
 * parsers of nccl-tests' output do not match.  Then whether each
 * comparison's average and paired ratios agree, and why not if not.
 */
static void avg_footer(const struct opts *o, const double avg[NLANES], int rows,
		       const struct coll_ratio ratio[][NLANES], int nrat)
{
	double a[NLANES], scratch[64], overall;
	struct coll_ratio col[64];
	int p, primary = primary_lane(o), si;

	for (p = 0; p < NLANES; p++)
		a[p] = rows ? avg[p] / (2.0 * rows) : 0.0;
	for (p = 0; p < NLANES; p++)
		if (o->lanes[p])
			printf("# pd-coll avg busbw (%s): %g%s\n", lane_names[p], a[p],
			       p == primary ? " (the primary path: nccl-tests' average at the end)" : "");
	for (p = LANE_DIRECT + 1; p < NLANES; p++) {
		int b = coll_ratio_base(p);

		if (!o->lanes[p] || !o->lanes[b])
			continue;
		for (si = 0; si < nrat; si++)
			col[si] = ratio[si][p];
		if (coll_direction_agree(a[b], a[p], col, (size_t)nrat, scratch, &overall) != 0)
			continue;
		printf("# pd-coll %s/%s: the averages rank %s above %s, the paired ratios "
		       "(median over sizes %.2fx) the other way: the averages are each path's own "
		       "mean over sizes and placements, weighed by the largest sizes and slow "
		       "iterations; the ratios pair each iteration's two times: trust the ratios\n",
		       lane_names[b], lane_names[p], a[p] > a[b] ? lane_names[p] : lane_names[b],
		       a[p] > a[b] ? lane_names[b] : lane_names[p], overall);
	}
}

void report_table_header(const struct opts *o, enum coll_kind k, enum dtype t, int op)
{
	printf("#\n# Collective: %s, type %s, redop %s, root %d; time: %s of the slowest rank per iteration\n",
	       coll_names[k], type_names[t], coll_reducing(k) ? op_names[op] : "none",
	       coll_rooted(k) ? o->root : -1, o->median ? "median" : "mean");
	printf("# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          \n", "", "", "", "", "");
	printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s  %s\n", "size",
	       "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw",
	       "busbw", "#wrong", "path");
	printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n", "(B)",
	       "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
}

static void plot_block(const char *coll, const char *path, const char *type, const char *op)
{
	if (!plotdat.f || nplot >= 256)
		return;
	if (nplot)
		fprintf(plotdat.f, "\n\n");
	snprintf(plotnames[nplot++], sizeof(plotnames[0]), "%s %s %s%s%s", coll, path, type,
		 *op ? " " : "", op);
}

static int run_plot(const char *png, const char *dat)
{
	char script[4200];
	FILE *f;
	int i, st, bad;
	pid_t pid;
	char *argv[] = { "gnuplot", script, NULL };

	snprintf(script, sizeof(script), "%s.gp", png);
	f = fopen(script, "w");
	if (!f) {
		fprintf(stderr, "pd-coll: --plot: %s: %s\n", script, strerror(errno));
		return -EIO;
	}
	fprintf(f, "set terminal pngcairo size 1100,650 noenhanced\nset output '%s'\n"
		   "set title 'pd-coll: out-of-place bus bandwidth'\nset logscale x 2\n"
		   "set format x '%%.0b %%BB'\nset yrange [0:*]\nset xlabel 'size'\nset ylabel 'busbw (GB/s)'\n"
		   "set key outside right\nset grid\nplot ", png);
	for (i = 0; i < nplot; i++)
		fprintf(f, "%s'%s' index %d using 1:2 with linespoints title '%s'", i ? ", \\\n  " : "",
			dat, i, plotnames[i]);
	fprintf(f, "\n");
	bad = ferror(f);
	if (fclose(f) || bad) {
		fprintf(stderr, "pd-coll: --plot: %s: could not write it whole\n", script);
		return -EIO;
	}
	if (posix_spawnp(&pid, "gnuplot", NULL, NULL, argv, environ)) {
		fprintf(stderr, "pd-coll: --plot: cannot run gnuplot (apt-get install gnuplot-nox)\n");
		return -ENOENT;
	}
	if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st)) {
		fprintf(stderr, "pd-coll: --plot: gnuplot %s failed\n", script);
		return -EIO;
	}
	return 0;
}

/* Rank 0's: before anything runs, so that every rank refuses together. */
bool report_open_outputs(const struct opts *o, char *datpath, size_t len)
{
	if (o->csv && outfile_open(&csv, o->csv, "--csv"))
		return false;
	if (o->plot) {
		snprintf(datpath, len, "%s.dat", o->plot);
		if (outfile_open(&plotdat, datpath, "--plot"))
			return false;
	}
	return true;
}

/*
 * The run's header: the command, the ranks, how messages are cut, each
 * path's memory and registration, the copy the bounce path adds, and the
 * test switches that change what the run measures.
 */
void report_run_header(const char *cmd, const struct opts *o, const struct boot *b,
		       const struct rankinfo *ris, const struct lane *lanes, struct pd_fabric *first)
{
	char small[80] = "", wire[40] = "";
	size_t wire_chunk;
	int p;

	printf("# pd-coll: %s\n# %d ranks, bootstrap: %s\n", cmd, b->size, b->how);
	for (p = 0; p < b->size; p++)
		printf("#  Rank %2d Pid %6d on %10s\n", p, ris[p].pid, ris[p].host);
	wire_chunk = pd_fabric_chunk_size(first);
	if (o->small_chunk)
		snprintf(small, sizeof(small), " (%zu B for messages up to %zu B%s",
			 o->small_chunk, o->small_max, o->piece != wire_chunk ? "; " : ")");
	if (o->piece != wire_chunk)
		snprintf(wire, sizeof(wire), "%swire chunk %zu B)", o->small_chunk ? "" : " (",
			 wire_chunk);
	printf("# provider %s; pieces of %zu B%s%s, %d in flight per direction on every path; "
	       "allreduce %s (--rd-max %zu)\n",
	       pd_fabric_provider(first),
	       o->piece, small, wire, o->depth, o->algo == ALGO_RING ? "ring" : o->algo == ALGO_RD ?
	       "recursive doubling" : "recursive doubling up to --rd-max, ring above", o->rd_max);
	for (p = 0; p < LANE_NET; p++)
		if (o->lanes[p])
			printf("# path %-6s: memory %-8s %s: %s%s\n", lane_names[p],
			       p == LANE_HOST ? "host" : o->memory, pd_path_name(pd_mr_path(lanes[p].mr)),
			       pd_mr_reason(lanes[p].mr), p != LANE_HOST && lanes[p].src.simulated ?
			       " (simulated device: RAM, not an accelerator)" : "");
	if (o->lanes[LANE_DIRECT] || o->lanes[LANE_BOUNCE]) {
		const struct lane *l = &lanes[o->lanes[LANE_DIRECT] ? LANE_DIRECT : LANE_BOUNCE];
		size_t len = o->maxb < (64 << 20) ? o->maxb : (64 << 20);
		double up, down;

		coll_copy_bandwidth(l, len, &up, &down);
		model_set_copies(up, down);
		printf("# CPU copy of %zu B (rank 0, median of 5): host to %s %.2f GB/s, %s to host %.2f GB/s\n",
		       len, o->memory, up, o->memory, down);
	}
	if (o->lanes[LANE_NET])
		printf("# path %-6s: %s; host/net: the net path's time over the host path's\n",
		       lane_names[LANE_NET], net_lane_describe(&lanes[LANE_NET]));
	printf("# paths alternate per iteration, each first in turn in the timed ones; every checked iteration verifies every element on every rank\n");
	if (o->corrupt == CORRUPT_POISON)
		printf("# --test-corrupt: one output element per checked iteration is put back to its poison\n");
	if (o->corrupt == CORRUPT_MISPLACE)
		printf("# --test-misplace: each checked output's second half is overwritten with its first\n");
	if (o->max_pend < MAX_PEND)
		printf("# --test-max-pending %d: an exchange waits for its oldest sends past that many\n",
		       o->max_pend);
	if (o->slow_lane >= 0)
		printf("# --test-slow-path %s: every timed iteration of that path takes %d ms more\n",
		       lane_names[o->slow_lane], SLOW_PATH_NS / 1000000);
	if (csv.f)
		csv_header();
	fflush(stdout);
}

/* One size's rows, a path each, and its CSV rows; res[p][ip] filled by
 * summarize for both placements of each path. */
void report_rows(const struct opts *o, const struct table_row *row, const struct lane *lanes,
		 struct table_sums *t)
{
	const struct geom *g = row->g;
	size_t bytes = (g->sendcount > g->recvcount ? g->sendcount : g->recvcount) * row->esz;
	int p, ip;

	t->rows++;
	for (p = 0; p < NLANES; p++) {
		if (!o->lanes[p])
			continue;
		printf("%12zu  %12zu  %8s  %6s  %6d", bytes, g->count, type_names[row->t],
		       coll_reducing(row->k) ? op_names[row->op] : "none",
		       coll_rooted(row->k) ? o->root : -1);
		for (ip = 0; ip < 2; ip++) {
			const struct result *res = &row->res[p][ip];
			char ts[16], as[16], bs[16];

			fmt(res->us, 7, ts);
			fmt(res->alg, 6, as);
			fmt(res->bus, 6, bs);
			if (o->check)
				printf("  %7s  %6s  %6s  %6g", ts, as, bs, (double)res->wrong);
			else
				printf("  %7s  %6s  %6s    N/A", ts, as, bs);
			t->avg[p] += res->bus;
			t->wrong += res->wrong;
			if (csv.f)
				fprintf(csv.f, "%s,%s,%s,%s,%s,%d,%zu,%zu,%s,%s,%d,%s,%.3f,%.6f,%.6f,%llu,%d,%zu\n",
					coll_names[row->k], lane_names[p],
					p == LANE_NET ? "plugin" : pd_path_name(pd_mr_path(lanes[p].mr)),
					p == LANE_NET ? net_lane_name(&lanes[p]) : pd_fabric_provider(lanes[p].fab),
					lane_memory(o, p), row->nranks, bytes,
					g->count, type_names[row->t],
					coll_reducing(row->k) ? op_names[row->op] : "none",
					coll_rooted(row->k) ? o->root : -1, ip ? "in-place" : "out-of-place",
					res->us, res->alg, res->bus,
					(unsigned long long)res->wrong, o->iters, row->size);
		}
		printf("  %s\n", lane_names[p]);
	}
	if (t->nrat < 64) {
		t->rsize[t->nrat] = (double)row->size;
		for (p = 0; p < NLANES; p++)
			t->pbus[p][t->nrat] = o->lanes[p] ? row->res[p][0].bus : 0;
		memcpy(t->ratio[t->nrat], row->ratio, sizeof(t->ratio[0]));
		t->nrat++;
	}
	fflush(stdout);
}

/* Each table's paired ratios: direct over bounce and host, host over net. */
static void ratio_table(const struct opts *o, const struct table_sums *t)
{
	bool native = o->lanes[0] && (o->lanes[1] || o->lanes[2]);
	bool net = o->lanes[LANE_HOST] && o->lanes[LANE_NET];
	int si;

	if (!(native || net) || !t->nrat)
		return;
	printf("# ratios: paired, per timed iteration the other path's time over %s; their median [quartiles]\n",
	       native && net ? "direct's (host's for net)" : native ? "direct's" : "host's");
	printf("# out-of-place busbw ratios: %10s", "size");
	if (native)
		printf("  %-24s  %s", "direct/bounce", net ? "direct/host             " : "direct/host");
	printf("%s\n", net ? "  host/net" : "");
	for (si = 0; si < t->nrat; si++) {
		char cb[64], ch[64], cn[64];

		ratio_cell(&t->ratio[si][LANE_BOUNCE], cb, sizeof(cb));
		ratio_cell(&t->ratio[si][LANE_HOST], ch, sizeof(ch));
		ratio_cell(&t->ratio[si][LANE_NET], cn, sizeof(cn));
		printf("#                            %10.0f", t->rsize[si]);
		if (native)
			printf("  %-24s  %s%*s", cb, ch, net ? (int)(24 - strlen(ch)) : 0, "");
		printf("%s%s\n", net ? "  " : "", net ? cn : "");
	}
}

/* Direct over bounce beside the model's bound from this run's own inputs
 * (model.c): the goal is measured/bound of at least 0.9 at 32 MiB and up. */
static void model_table(const struct opts *o, const struct table_sums *t)
{
	int si;

	if (!o->lanes[LANE_DIRECT] || !o->lanes[LANE_BOUNCE] || !t->nrat)
		return;
	printf("# direct/bounce against the model (performance.md, section 5): bound = 1 + B_L (1/B_dh + 1/B_hd), B_L = direct's busbw at the size, B_dh and B_hd the CPU copies above; copies not overlapping the wire, reduction left out\n");
	printf("# %27s %10s  %8s  %8s  %8s  %14s\n", "", "size", "B_L GB/s", "measured", "bound",
	       "measured/bound");
	for (si = 0; si < t->nrat; si++) {
		double bound = model_direct_over_bounce(t->pbus[LANE_DIRECT][si]);
		const struct coll_ratio *r = &t->ratio[si][LANE_BOUNCE];

		if (!r->n || isnan(bound))
			continue;
		printf("# %27s %10.0f  %8.3f  %7.2fx  %7.2fx  %14.2f\n", "", t->rsize[si],
		       t->pbus[LANE_DIRECT][si], r->med, bound, r->med / bound);
	}
}

/*
 * A table's end, also when it was cut short (ended: the run stops after
 * it): the paired ratios, nccl-tests' out-of-bounds line, the averages;
 * its busbw goes into the run's sums and its points into the plot.
 */
void report_table_footer(const struct opts *o, enum coll_kind k, enum dtype type, int op,
			 const struct table_sums *t, bool ended, struct run_sums *run)
{
	int p, si;

	ratio_table(o, t);
	model_table(o, t);
	/* A table cut short checked only what it ran. */
	printf("# %-20s : %llu %s\n", "Out of bounds values", (unsigned long long)t->wrong,
	       t->wrong ? "FAILED" : ended ? "INCOMPLETE" : "OK");
	avg_footer(o, t->avg, t->rows, t->ratio, t->nrat);
	for (p = 0; p < NLANES; p++)
		run->sum[p] += t->avg[p];
	run->rows += t->rows;
	if (plotdat.f) {
		for (p = 0; p < NLANES; p++) {
			if (!o->lanes[p])
				continue;
			plot_block(coll_names[k], lane_names[p], type_names[type],
				   coll_reducing(k) ? op_names[op] : "");
			for (si = 0; si < t->nrat; si++)
				fprintf(plotdat.f, "%.0f %.6f\n", t->rsize[si], t->pbus[p][si]);
		}
	}
	fflush(stdout);
}

void report_run_footer(const struct opts *o, const struct run_sums *run, bool ended)
{
	if (o->lanes[LANE_DIRECT] && o->lanes[LANE_BOUNCE])
		model_print_article();
	nccl_avg_line(o, run->sum, run->rows);
	printf("#\n# Collective test %s: pd-coll\n", ended ? "ended early" : "concluded");
}

/* The result files: kept if the run went ahead (began), whatever it
 * found, then the plot drawn.  0, or 1 if one could not be written. */
int report_close_outputs(const struct opts *o, bool began, const char *datpath)
{
	int status = 0;

	if (!outfile_close(&csv, began))
		status = 1;
	if (plotdat.f && (!outfile_close(&plotdat, began) || (began && nplot && run_plot(o->plot, datpath))))
		status = 1;
	return status;
}

/* Refused before it ran: what was there stays. */
void report_drop_outputs(void)
{
	outfile_close(&csv, false);
	outfile_close(&plotdat, false);
}
