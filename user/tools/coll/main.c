// SPDX-License-Identifier: MIT
/*
 * pd-coll: nccl-tests' collectives over libpeerdirect, every path side by
 * side in one run.
 *
 *   pd-coll [--np N | under mpirun/srun | --rank R --nranks N] [options]
 *
 * Flags as nccl-tests: -b/-e/-f/-i sizes, -n iterations, -w warmup, -c
 * checked iterations, -o sum|min|max|all, -d float|bfloat16|all, -r root;
 * and --coll, --paths, --memory, --provider, --csv, --plot, --depth,
 * --chunk, --algo, --rd-max, --stat, --timeout (see usage() and
 * Documentation/man/pd-coll.1).
 *
 * For every size, placement (out-of-place, then in-place) and iteration,
 * the paths take turns (each first in turn over the timed iterations):
 * device memory on the direct path, device memory through bounce, host
 * memory.  After the warmups, -c checked iterations
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
 * that nccl-tests parsers do not match (avg_footer()).
 */
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fabric.h>

#include "coll.h"
#include "stats.h"
#include "../bench_report.h"
#include "../fnv1a.h"
#include "../tool_args.h"
#include "../tool_cli.h"
#include "../tool_env.h"
#include "../tool_version.h"
#include "peerdirect_ext.h"

extern char **environ;

const char *const lane_names[NLANES] = { "direct", "bounce", "host" };
const char *const coll_names[NCOLLS] = { "allreduce", "allgather", "reducescatter",
					 "broadcast", "reduce", "alltoall", "sendrecv" };
const char *const type_names[NTYPES] = { "float", "bfloat16" };
const char *const op_names[NOPS] = { "sum", "min", "max" };

struct rankinfo {
	int32_t pid, ready;	/* ready: its sample buffers are there */
	char host[56];
	uint64_t piece, small_chunk, small_max, rd_max;	/* every rank must agree */
};

/* What decides the sequence of collectives and messages: ranks that
 * differ in any of it would wait for each other forever, or check data
 * the other never refilled. */
static uint64_t sweep_plan(const struct opts *o, const size_t *sizes, int nsizes)
{
	int64_t v[] = { nsizes, (int64_t)o->chunk, o->iters, o->warmup, o->check, o->root,
			o->depth, o->ncolls, o->ntypes, o->nops, o->algo };
	uint64_t h = fnv1a(FNV1A_INIT, v, sizeof(v));

	h = fnv1a(h, sizes, sizeof(sizes[0]) * (size_t)nsizes);
	h = fnv1a(h, o->colls, sizeof(o->colls[0]) * (size_t)o->ncolls);
	h = fnv1a(h, o->types, sizeof(o->types[0]) * (size_t)o->ntypes);
	h = fnv1a(h, o->ops, sizeof(o->ops[0]) * (size_t)o->nops);
	return fnv1a(h, o->lanes, sizeof(o->lanes));
}

/* Per rank and size: what the iterations measured. */
struct sample {
	int32_t status, pad;
	uint64_t wrong[NLANES][2];
	double ns[];		/* [lane][placement][iter] */
};

struct result {
	double us, alg, bus;
	uint64_t wrong;
	bool checked;
};

static struct lane lanes[NLANES];
static struct outfile csv, plotdat;	/* rank 0's */
static int nplot;
static char plotnames[256][48];

static bool reducing(enum coll_kind k)
{
	return k == C_ALLREDUCE || k == C_REDUCESCATTER || k == C_REDUCE;
}

static bool rooted(enum coll_kind k)
{
	return k == C_BROADCAST || k == C_REDUCE;
}

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

static void usage(FILE *f)
{
	fprintf(f,
		"usage: pd-coll [--np N | --rank R --nranks N --rendezvous HOST:PORT] [options]\n"
		"  (under mpirun, srun or a PMI launcher rank and size come from the environment)\n"
		"  -b, --minbytes SIZE    smallest size (default 32M)\n"
		"  -e, --maxbytes SIZE    largest size (default 32M)\n"
		"  -f, --stepfactor F     multiply the size by F (default: add -i)\n"
		"  -i, --stepbytes SIZE   add SIZE (default 1M)\n"
		"  -n, --iters N          timed iterations per size, path and placement (default 20)\n"
		"  -w, --warmup_iters N   untimed iterations first (default 1)\n"
		"  -c, --check N          N untimed iterations before the timed ones, each refilled and checked element by element (default 1)\n"
		"  -o, --op OP            sum, min, max or all (default sum)\n"
		"  -d, --datatype T       float, bfloat16 or all (default float)\n"
		"  -r, --root R           root of broadcast and reduce (default 0)\n"
		"  --coll LIST            allreduce,allgather,reducescatter,broadcast,reduce,alltoall,\n"
		"                         sendrecv or all (default allreduce)\n"
		"  --paths LIST           direct,bounce,host (default all three, alternating)\n"
		"  --memory KIND          device memory: device:DEV, udmabuf or memfd\n"
		"                         (default device:0 if /dev/peerdirect0 exists, else memfd)\n"
		"  --device DEV           --memory device:DEV; DEV an index, a path (/dev/peerdirect0,\n"
		"                         /dev/peerdirect/by-path/pci-...) or pci:DDDD:BB:DD.F\n"
		"  --provider NAME        libfabric provider (default: the library's choice)\n"
		"  --depth N              pieces in flight per direction and exchange (default 4)\n"
		"  --chunk SIZE           piece size above --small-max = wire chunk (default 4M;\n"
		"                         over tcp;ofi_rxm, net and tcp without rxm 512K pieces,\n"
		"                         each one message)\n"
		"  --small-chunk SIZE --small-max SIZE   pieces of --small-chunk for messages of at\n"
		"                         most --small-max (default 4K up to 8K over shm, 16K up to\n"
		"                         32K over tcp;ofi_rxm, none otherwise; --small-max 0: none)\n"
		"  --algo auto|ring|rd    allreduce algorithm (auto: rd up to --rd-max, default 256K;\n"
		"                         512K over tcp;ofi_rxm with 2 or 4 ranks, over net and\n"
		"                         tcp without rxm with 2;\n"
		"                         over shm 4M with 2 ranks (512K from libfabric 2),\n"
		"                         1M with 4, else 4K)\n"
		"  --stat mean|median     time statistic over the iterations (default mean)\n"
		"  --csv FILE             one row per size, path and placement\n"
		"  --plot FILE.png        busbw against size per collective and path (gnuplot)\n"
		"  --timeout MS           bound on every exchange (default 60000)\n"
		"  --np N                 fork N local ranks (TCP rendezvous on 127.0.0.1)\n"
		"  --rank R --nranks N --rendezvous HOST:PORT   by hand\n"
		"  -h, --help; --version\n"
		"exit: 0 all verified, 1 transfer error, 2 usage, 3 setup (no gnuplot for --plot,\n"
		"      no device, no peer), 4 permission denied, 5 data failed verification\n"
		"      (a wrong element)\n");
}

/* gnuplot runs at the end: missing, the run would be wasted. */
static bool in_path(const char *prog)
{
	const char *path = getenv("PATH"), *p, *end;
	char full[PATH_MAX];

	for (p = path; p && *p; p = *end ? end + 1 : end) {
		end = strchrnul(p, ':');
		snprintf(full, sizeof(full), "%.*s/%s", (int)(end - p), end == p ? "." : p, prog);
		if (!access(full, X_OK))
			return true;
	}
	return false;
}

static int parse_list(char *arg, const char *const *names, int nnames, int *out, const char *what)
{
	char *tok, *save;
	int i, n = 0;

	if (!strcmp(arg, "all")) {
		for (i = 0; i < nnames; i++)
			out[n++] = i;
		return n;
	}
	for (tok = strtok_r(arg, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		for (i = 0; i < nnames && strcmp(tok, names[i]); i++)
			;
		if (i == nnames && !strcmp(what, "datatype") && (!strcmp(tok, "float32") || !strcmp(tok, "bf16")))
			i = tok[1] == 'l' ? T_FLOAT : T_BF16;
		if (i == nnames || n == nnames) {
			fprintf(stderr, "pd-coll: unknown %s '%s'\n", what, tok);
			return -1;
		}
		out[n++] = i;
	}
	return n;
}

static int size_arg(const char *s, size_t *out, const char *what)
{
	if (pd_ext_parse_size(s, out)) {
		fprintf(stderr, "pd-coll: %s: bad size '%s'\n", what, s);
		return -1;
	}
	return 0;
}

#define MAX_ITERS 100000
#define MAX_BYTES (1ULL << 40)

/* -f: a factor above 1 (0, nccl-tests' "unset", is taken too). */
static int factor_arg(const char *s, double *out)
{
	char *end;

	errno = 0;
	*out = strtod(s, &end);
	if (errno || end == s || *end || !isfinite(*out) || (*out != 0 && *out <= 1) || *out > 1024)
		return tool_bad(TOOL_NAME, "-f", s, "want a factor above 1, at most 1024 (or 0: add -i)");
	return 0;
}

struct launch_opts {
	const char *rdv;
	int rank, nranks, np;
};

static int parse(int argc, char **argv, struct opts *o, struct launch_opts *lo)
{
	enum { O_COLL = 256, O_PATHS, O_MEMORY, O_PROVIDER, O_DEPTH, O_CHUNK, O_ALGO, O_RDMAX,
	       O_SMALL_CHUNK, O_SMALL_MAX, O_STAT, O_CSV, O_PLOT, O_TIMEOUT, O_NP, O_RANK, O_NRANKS, O_RDV, O_CORRUPT,
	       O_MISPLACE, O_KILL, O_MAXPEND, O_SLOW, O_VERSION, O_DEVICE };
	static const struct option lopts[] = {
		{ "minbytes", 1, 0, 'b' }, { "maxbytes", 1, 0, 'e' }, { "stepfactor", 1, 0, 'f' },
		{ "stepbytes", 1, 0, 'i' }, { "iters", 1, 0, 'n' }, { "warmup_iters", 1, 0, 'w' },
		{ "check", 1, 0, 'c' }, { "op", 1, 0, 'o' }, { "datatype", 1, 0, 'd' },
		{ "root", 1, 0, 'r' }, { "help", 0, 0, 'h' }, { "coll", 1, 0, O_COLL },
		{ "paths", 1, 0, O_PATHS }, { "memory", 1, 0, O_MEMORY },
		{ "provider", 1, 0, O_PROVIDER }, { "depth", 1, 0, O_DEPTH },
		{ "chunk", 1, 0, O_CHUNK }, { "algo", 1, 0, O_ALGO }, { "rd-max", 1, 0, O_RDMAX },
		{ "small-chunk", 1, 0, O_SMALL_CHUNK }, { "small-max", 1, 0, O_SMALL_MAX },
		{ "stat", 1, 0, O_STAT }, { "csv", 1, 0, O_CSV }, { "plot", 1, 0, O_PLOT },
		{ "timeout", 1, 0, O_TIMEOUT }, { "np", 1, 0, O_NP }, { "rank", 1, 0, O_RANK },
		{ "nranks", 1, 0, O_NRANKS }, { "rendezvous", 1, 0, O_RDV },
		{ "test-corrupt", 0, 0, O_CORRUPT }, { "test-misplace", 0, 0, O_MISPLACE },
		{ "test-kill-rank", 1, 0, O_KILL }, { "test-max-pending", 1, 0, O_MAXPEND },
		{ "test-slow-path", 1, 0, O_SLOW }, { "version", 0, 0, O_VERSION },
		{ "device", 1, 0, O_DEVICE },
		{ 0 },
	};
	static char devbuf[PATH_MAX + 8];
	int c, lanes_sel[NLANES], n, i;

	if (tool_refuse_empty(TOOL_NAME, argc, argv))
		return -1;
	*o = (struct opts) { .minb = 32 << 20, .maxb = 32 << 20, .stepb = 1 << 20, .chunk = 4 << 20,
			     .iters = 20, .warmup = 1, .check = 1, .depth = 4, .timeout_ms = 60000, .max_pend = MAX_PEND,
			     .slow_lane = -1,
			     .ncolls = 1, .ntypes = 1, .nops = 1, .rd_max = 256 << 10,
			     .lanes = { true, true, true },
			     .memory = access("/dev/peerdirect0", R_OK | W_OK) ? "memfd" : "device:0" };
	*lo = (struct launch_opts) { .rank = -1 };
	while ((c = getopt_long(argc, argv, "b:e:f:i:n:w:c:o:d:r:hg:t:a:m:z:G:", lopts, NULL)) != -1) {
		switch (c) {
		/*
		 * nccl-tests' flags, so that its command lines run: each takes the
		 * one value that means what pd-coll does (one device and thread
		 * per rank, the slowest rank's time, one operation per
		 * iteration, non-blocking, no graphs); another is refused by name.
		 */
		case 'g': case 't': case 'm': case 'a': case 'z': case 'G': {
			int v, want = c == 'a' ? 3 : c == 'z' || c == 'G' ? 0 : 1;
			char flag[3] = { '-', (char)c, 0 };

			if (tool_number(optarg, want, want, &v)) {
				fprintf(stderr, "pd-coll: %s %s: only %s %d (%s)\n", flag, optarg, flag, want,
					c == 'g' ? "one device per rank" : c == 't' ? "one thread per rank" :
					c == 'm' ? "one operation per iteration" :
					c == 'a' ? "the slowest rank's time, nccl-tests' -a 3" :
					c == 'z' ? "non-blocking" : "no CUDA graphs");
				return -1;
			}
			break;
		}
		case 'b': if (size_arg(optarg, &o->minb, "-b")) return -1; break;
		case 'e': if (size_arg(optarg, &o->maxb, "-e")) return -1; break;
		case 'i': if (size_arg(optarg, &o->stepb, "-i")) return -1; break;
		case 'f':
			if (factor_arg(optarg, &o->stepf))
				return -1;
			break;
		case 'n': if (TOOL_INT_ARG("-n", 1, MAX_ITERS, &o->iters)) return -1; break;
		case 'w': if (TOOL_INT_ARG("-w", 0, MAX_ITERS, &o->warmup)) return -1; break;
		case 'c': if (TOOL_INT_ARG("-c", 0, MAX_ITERS, &o->check)) return -1; break;
		case 'r': if (TOOL_INT_ARG("-r", 0, MAX_RANKS - 1, &o->root)) return -1; break;
		case 'o':
			if ((o->nops = parse_list(optarg, op_names, NOPS, o->ops, "op")) < 0)
				return -1;
			break;
		case 'd':
			if ((o->ntypes = parse_list(optarg, type_names, NTYPES, o->types, "datatype")) < 0)
				return -1;
			break;
		case O_COLL:
			if ((o->ncolls = parse_list(optarg, coll_names, NCOLLS, o->colls, "collective")) < 0)
				return -1;
			break;
		case O_PATHS:
			if ((n = parse_list(optarg, lane_names, NLANES, lanes_sel, "path")) < 0)
				return -1;
			memset(o->lanes, 0, sizeof(o->lanes));
			for (i = 0; i < n; i++)
				o->lanes[lanes_sel[i]] = true;
			break;
		case O_MEMORY: o->memory = optarg; break;
		case O_DEVICE: o->memory = source_device_spec(optarg, devbuf, sizeof(devbuf)); break;
		case 'h': usage(stdout); return 'h';
		case O_VERSION: tool_print_version(TOOL_NAME); return 'h';
		case O_PROVIDER: o->provider = optarg; break;
		case O_DEPTH: if (TOOL_INT_ARG("--depth", 1, MAX_DEPTH, &o->depth)) return -1; break;
		case O_CHUNK:
			if (size_arg(optarg, &o->chunk, "--chunk"))
				return -1;
			o->chunk_set = true;
			break;
		case O_ALGO:
			o->algo = !strcmp(optarg, "ring") ? ALGO_RING : !strcmp(optarg, "rd") ? ALGO_RD :
				  !strcmp(optarg, "auto") ? ALGO_AUTO : (enum algo)-1;
			if ((int)o->algo < 0) {
				fprintf(stderr, "pd-coll: --algo auto, ring or rd\n");
				return -1;
			}
			break;
		case O_RDMAX:
			if (size_arg(optarg, &o->rd_max, "--rd-max"))
				return -1;
			o->rd_max_set = true;
			break;
		case O_SMALL_CHUNK:
			if (size_arg(optarg, &o->small_chunk, "--small-chunk"))
				return -1;
			o->small_set |= SMALL_CHUNK_SET;
			break;
		case O_SMALL_MAX:
			if (size_arg(optarg, &o->small_max, "--small-max"))
				return -1;
			o->small_set |= SMALL_MAX_SET;
			break;
		case O_STAT:
			if (strcmp(optarg, "mean") && strcmp(optarg, "median"))
				return tool_bad(TOOL_NAME, "--stat", optarg, "want mean or median");
			o->median = !strcmp(optarg, "median");
			break;
		case O_CSV: o->csv = optarg; break;
		case O_PLOT: o->plot = optarg; break;
		case O_TIMEOUT:
			if (TOOL_INT_ARG("--timeout", 1, TOOL_MAX_TIMEOUT_MS, &o->timeout_ms))
				return -1;
			break;
		case O_NP: if (TOOL_INT_ARG("--np", 2, MAX_RANKS, &lo->np)) return -1; break;
		case O_RANK: if (TOOL_INT_ARG("--rank", 0, MAX_RANKS - 1, &lo->rank)) return -1; break;
		case O_NRANKS: if (TOOL_INT_ARG("--nranks", 2, MAX_RANKS, &lo->nranks)) return -1; break;
		case O_RDV: lo->rdv = optarg; break;
		case O_CORRUPT: o->corrupt = CORRUPT_POISON; break;
		case O_MISPLACE: o->corrupt = CORRUPT_MISPLACE; break;
		case O_KILL: if (TOOL_INT_ARG("--test-kill-rank", 1, MAX_RANKS - 1, &o->kill_rank)) return -1; break;
		case O_MAXPEND: if (TOOL_INT_ARG("--test-max-pending", 1, MAX_PEND, &o->max_pend)) return -1; break;
		case O_SLOW:
			if (!*optarg || strchr(optarg, ',') || !strcmp(optarg, "all"))
				return tool_bad(TOOL_NAME, "--test-slow-path", optarg, "want one path");
			if (parse_list(optarg, lane_names, NLANES, lanes_sel, "path") != 1)
				return -1;
			o->slow_lane = lanes_sel[0];
			break;
		default: usage(stderr); return -1;
		}
	}
	if (o->ncolls == 1 && !o->colls[0])
		o->colls[0] = C_ALLREDUCE;
	if (optind != argc) {
		fprintf(stderr, "pd-coll: unexpected argument '%s'\n",
			argv[optind]);
		return -1;
	}
	if (!o->minb || (!o->stepf && !o->stepb)) {
		fprintf(stderr, "pd-coll: %s 0: want a size above 0\n", o->minb ? "-i" : "-b");
		return -1;
	}
	if (o->maxb > MAX_BYTES) {
		fprintf(stderr, "pd-coll: -e %zu: want at most %llu B (each path holds three times it)\n",
			o->maxb, (unsigned long long)MAX_BYTES);
		return -1;
	}
	if (o->minb > o->maxb) {
		fprintf(stderr, "pd-coll: -b %zu is above -e %zu\n", o->minb, o->maxb);
		return -1;
	}
	if (o->chunk < 4096 || o->chunk % 16) {
		fprintf(stderr, "pd-coll: --chunk %zu: want at least 4096 B, a multiple of 16\n", o->chunk);
		return -1;
	}
	if (!o->lanes[0] && !o->lanes[1] && !o->lanes[2]) {
		fprintf(stderr, "pd-coll: --paths: want one or more of direct, bounce and host\n");
		return -1;
	}
	if (o->small_set == SMALL_MAX_SET && o->small_max == 0) {
		o->small_chunk = 0;	/* --small-max 0 alone: off */
	} else if (o->small_set &&
		   (o->small_chunk < 4096 || o->small_chunk % 16 || o->small_chunk > o->chunk ||
		    o->small_max < o->small_chunk ||
		    (o->small_max + o->small_chunk - 1) / o->small_chunk > 64)) {
		fprintf(stderr, "pd-coll: --small-chunk and --small-max go together (--small-max 0 alone turns them off): a chunk of at least 4096 B, a multiple of 16, at most --chunk, and from 1 to 64 of them in --small-max\n");
		return -1;
	}
	if ((o->maxb + o->chunk - 1) / o->chunk > 65535) {
		fprintf(stderr, "pd-coll: -e %zu needs more than 65535 pieces of --chunk %zu\n",
			o->maxb, o->chunk);
		return -1;
	}
	o->piece = o->chunk;
	return 0;
}

static void csv_header(void)
{
	fprintf(csv.f, "collective,path,path_used,provider,memory,nranks,size,count,type,redop,root,placement,time_us,algbw_gbs,busbw_gbs,wrong,iters,sweep_size\n");
}

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
	 * known (Documentation/performance.md, section T: differences within
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
 * Rank 0: out-of-place busbw of the direct lane over each other lane's,
 * paired per iteration (stats.h): that lane's time over direct's in the
 * same iteration.  out[p] has n 0 where there is no ratio.
 */
static void direct_over(const struct opts *o, int n, const struct sample *all, size_t stride,
			struct coll_ratio out[NLANES])
{
	double *t = calloc((size_t)o->iters * 3, sizeof(double));
	int p;

	for (p = 0; p < NLANES; p++)
		out[p] = (struct coll_ratio){ NAN, NAN, NAN, 0 };
	if (!t || !o->lanes[LANE_DIRECT]) {
		free(t);
		return;
	}
	slowest(o, n, all, stride, LANE_DIRECT, 0, t);
	for (p = LANE_DIRECT + 1; p < NLANES; p++) {
		if (!o->lanes[p])
			continue;
		slowest(o, n, all, stride, p, 0, t + o->iters);
		out[p] = coll_paired_ratio(t + o->iters, t, (size_t)o->iters, t + 2 * (size_t)o->iters);
	}
	free(t);
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
		       struct coll_ratio ratio[][NLANES], int nrat)
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
	if (!o->lanes[LANE_DIRECT])
		return;
	for (p = LANE_DIRECT + 1; p < NLANES; p++) {
		if (!o->lanes[p])
			continue;
		for (si = 0; si < nrat; si++)
			col[si] = ratio[si][p];
		if (coll_direction_agree(a[LANE_DIRECT], a[p], col, (size_t)nrat, scratch,
					 &overall) != 0)
			continue;
		printf("# pd-coll direct/%s: the averages rank %s above %s, the paired ratios "
		       "(median over sizes %.2fx) the other way: the averages are each path's own "
		       "mean over sizes and placements, weighed by the largest sizes and slow "
		       "iterations; the ratios pair each iteration's two times: trust the ratios\n",
		       lane_names[p], a[p] > a[LANE_DIRECT] ? lane_names[p] : "direct",
		       a[p] > a[LANE_DIRECT] ? "direct" : lane_names[p], overall);
	}
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

/* The copy the bounce path adds, as the CPU does it here: SYNC-bracketed
 * memcpy between host memory and the device memory's mapping, the median
 * of 5, GB/s (an input of the model in Documentation/performance.md). */
static void copy_bandwidth(struct lane *l, size_t len, double *to_dev, double *from_dev)
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

static void table_header(const struct opts *o, enum coll_kind k, enum dtype t, int op)
{
	printf("#\n# Collective: %s, type %s, redop %s, root %d; time: %s of the slowest rank per iteration\n",
	       coll_names[k], type_names[t], reducing(k) ? op_names[op] : "none",
	       rooted(k) ? o->root : -1, o->median ? "median" : "mean");
	printf("# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          \n", "", "", "", "", "");
	printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s  %s\n", "size",
	       "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw",
	       "busbw", "#wrong", "path");
	printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n", "(B)",
	       "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
}

/* -b to -e by -f or -i: at most 64 sizes, each larger than the last. */
static int sweep_sizes(const struct opts *o, size_t *sizes, int *n)
{
	size_t s = o->minb, next;

	for (*n = 0; s <= o->maxb; s = next) {
		if (*n == 64) {
			fprintf(stderr, "pd-coll: -b %zu to -e %zu by %s is more than 64 sizes\n", o->minb,
				o->maxb, o->stepf ? "that -f" : "that -i");
			return -1;
		}
		sizes[(*n)++] = s;
		next = o->stepf ? (size_t)((double)s * o->stepf) : s + o->stepb;
		if (next <= s) {
			if (!o->stepf)	/* wrapped */
				break;
			fprintf(stderr, "pd-coll: -f %g does not grow %zu B\n", o->stepf, s);
			return -1;
		}
	}
	return 0;
}

/* Rank 0's: before anything runs, so that every rank refuses together. */
static bool open_outputs(const struct opts *o, char *datpath, size_t len)
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
 * Tuning by provider, each measured (Documentation/performance.md), for
 * what the command line left unset:
 *  - recursive doubling (no copy of the input; with 2 ranks the peer
 *    reads only the input) beats the ring over shm up to 4 MiB with 2
 *    ranks, where both move the same bytes: on libfabric 1.17, and on 2.1
 *    with CMA (by 1.5-1.7x at 1-4 MiB, section 6 S).  Without CMA
 *    (FI_SHM_DISABLE_CMA, copies through shm's own buffers) 2.1's ring
 *    led at 2 and 4 MiB in three sets (by 4-22%; section 6 R), so there
 *    only up to 512 KiB (versions between were not measured, 2.x is
 *    taken for 2.1; 1.17 without CMA keeps 4 MiB); and up to 1 MiB with 4 (it
 *    moves log2(n) times the vector, the ring under twice); over tcp up
 *    to 512 KiB with 2 and 4 ranks; other rank counts, not measured with
 *    it, keep the ring above 4 KiB over shm and 256 KiB elsewhere;
 *  - ofi_rxm moves a message past its SAR limit by rendezvous, both ends
 *    working on each: 512K pieces let those overlap (section 6 M), each
 *    still one message in the lanes' larger wire chunk.  An admin who set
 *    rxm's eager, SAR or buffer sizes moved where rendezvous starts, which
 *    was not measured, and gets whole pieces; so does a sweep whose small
 *    pieces or piece count would not fit;
 *  - tcp's own RDM endpoint, no rxm (libfabric 1.16-1.17's net provider,
 *    named tcp from 1.18): net moved 2 MiB allreduces at half the busbw in
 *    whole 4M pieces that it did in 512K pieces, and with 2 ranks
 *    recursive doubling led the ring at 512 KiB (section 6 N); with 4 it
 *    did not.  libfabric 2.1's tcp did the same (section 6 R);
 *  - a message past the provider's eager size costs a handshake (shm's
 *    4 KiB inject path, ofi_rxm's 16 KiB eager buffers unless
 *    FI_OFI_RXM_BUFFER_SIZE changed them): up to a few of those sizes,
 *    eager pieces are cheaper (section 6 I).  Providers not measured keep
 *    whole pieces.
 */
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

/* prov: the provider every lane has. */
static void provider_defaults(struct opts *o, const char *prov, int nranks)
{
	bool shm = !strcmp(prov, "shm"), rxm = !strcmp(prov, "tcp;ofi_rxm");
	/* tcp's own RDM endpoint: net, or tcp alone (rxm adds its name). */
	bool tcp_rdm = !strcmp(prov, "net") || !strcmp(prov, "tcp");
	bool rxm_tuned = getenv("FI_OFI_RXM_EAGER_LIMIT") || getenv("FI_OFI_RXM_SAR_LIMIT") ||
			 getenv("FI_OFI_RXM_BUFFER_SIZE");
	size_t piece = 512 << 10;

	if (!o->rd_max_set && shm)
		o->rd_max = nranks == 2 ? (FI_MAJOR(fi_version()) >= 2 && shm_lane_without_cma(o) ?
					   512 << 10 : 4 << 20) :
			    nranks == 4 ? 1 << 20 : 4096;
	if (!o->rd_max_set && ((rxm && (nranks == 2 || nranks == 4)) || (tcp_rdm && nranks == 2)))
		o->rd_max = 512 << 10;
	if (!o->chunk_set && ((rxm && !rxm_tuned) || tcp_rdm) && o->small_chunk <= piece &&
	    (o->maxb + piece - 1) / piece <= 65535)
		o->piece = piece;
	if (o->small_set)
		return;
	if (shm)
		o->small_chunk = 4096, o->small_max = 8 << 10;
	else if (rxm && !getenv("FI_OFI_RXM_BUFFER_SIZE"))
		o->small_chunk = 16 << 10, o->small_max = 32 << 10;
	if (o->small_chunk > o->piece)
		o->small_chunk = o->small_max = 0;
}

int main(int argc, char **argv)
{
	struct opts o;
	struct launch_opts lo;
	struct boot b;
	struct sample *me = NULL, *all = NULL;
	struct rankinfo ri = { 0 }, ris[MAX_RANKS];
	struct pd_fabric *first = NULL;
	size_t region, stride, sizes[64], wire_chunk;
	int nsizes = 0, ci, ti, oi, si, p, ret, status = 0, child;
	bool began = false;	/* rank 0 printed its header: the run went ahead */
	double run_sum[NLANES] = { 0 };	/* every table's busbw sums: nccl-tests' average */
	int run_rows = 0;
	char datpath[4200] = "", small[80] = "", wire[40] = "";

	tool_env_defaults();
	record_cmdline(argc, argv);
	ret = parse(argc, argv, &o, &lo);
	if (ret)
		return ret == 'h' ? TOOL_EX_OK : TOOL_EX_USAGE;
	if (sweep_sizes(&o, sizes, &nsizes))
		return TOOL_EX_USAGE;
	if (o.plot && !in_path("gnuplot")) {
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
	status = sweeps_agree(&b, sweep_plan(&o, sizes, nsizes),
			      b.rank || open_outputs(&o, datpath, sizeof(datpath))) ? 0 : 3;
	if (status)
		goto out_boot;
	if (o.root < 0 || o.root >= b.size) {
		fprintf(stderr, "pd-coll: root %d is not a rank of %d\n", o.root, b.size);
		status = 3;
		goto out_boot;
	}
	region = 3 * (o.maxb < 4096 ? 4096 : o.maxb);
	/* A lane fails on every rank or on none (lane_open). */
	for (p = 0; p < NLANES && !status; p++) {
		int bad = -1;

		lanes[p].src.fd = -1;
		if (!o.lanes[p])
			continue;
		ret = lane_open(&lanes[p], p, &o, &b, region, &bad);
		if (ret && bad >= 0) {
			if (b.rank == 0)
				fprintf(stderr, "pd-coll: rank %d could not set up its %s path (its own message says why)\n",
					bad, lane_names[p]);
			status = 3;
		} else if (ret) {
			fprintf(stderr, "pd-coll: rank %d: %s path setup: %s (%s)\n", b.rank,
				lane_names[p], pd_last_error(), pd_strerror(ret));
			status = 3;
		}
	}
	if (status)
		goto out;
	first = lanes[o.lanes[0] ? 0 : o.lanes[1] ? 1 : 2].fab;	/* same provider on every lane */
	provider_defaults(&o, pd_fabric_provider(first), b.size);
	stride = sizeof(struct sample) + (size_t)NLANES * 2 * (size_t)o.iters * sizeof(double);
	stride = (stride + 7) / 8 * 8;
	me = calloc(1, stride);
	all = calloc((size_t)b.size, stride);
	ri.pid = (int32_t)getpid();
	gethostname(ri.host, sizeof(ri.host) - 1);
	ri.ready = me && all;
	ri.piece = o.piece, ri.small_chunk = o.small_chunk, ri.small_max = o.small_max;
	ri.rd_max = o.rd_max;
	/* Every rank, even one without its buffers, so that all leave together. */
	if (b.allgather(&b, &ri, sizeof(ri), ris))
		status = 3;
	/* Pieces and algorithms are derived on every rank: a rank on another
	 * provider or environment would cut messages differently and hang. */
	for (p = 0; !status && p < b.size; p++) {
		if (!ris[p].ready) {
			if (b.rank == 0)
				fprintf(stderr, "pd-coll: rank %d could not allocate its samples\n", p);
			status = 3;
		} else if (ris[p].piece != ris[0].piece || ris[p].small_chunk != ris[0].small_chunk ||
			   ris[p].small_max != ris[0].small_max || ris[p].rd_max != ris[0].rd_max) {
			if (b.rank == 0)
				fprintf(stderr, "pd-coll: rank %d would cut messages differently from rank 0 "
					"(pieces of %" PRIu64 " B, small pieces %" PRIu64 " up to %" PRIu64
					" B, --rd-max %" PRIu64 ", against %" PRIu64 ", %" PRIu64 ", %" PRIu64
					", %" PRIu64 "): give every rank the same provider and options\n",
					p, ris[p].piece, ris[p].small_chunk, ris[p].small_max, ris[p].rd_max,
					ris[0].piece, ris[0].small_chunk, ris[0].small_max, ris[0].rd_max);
			status = 3;
		}
	}
	if (status)
		goto out;
	if (b.rank == 0) {
		printf("# pd-coll: %s\n# %d ranks, bootstrap: %s\n", cmdline, b.size, b.how);
		for (p = 0; p < b.size; p++)
			printf("#  Rank %2d Pid %6d on %10s\n", p, ris[p].pid, ris[p].host);
		wire_chunk = pd_fabric_chunk_size(first);
		if (o.small_chunk)
			snprintf(small, sizeof(small), " (%zu B for messages up to %zu B%s",
				 o.small_chunk, o.small_max, o.piece != wire_chunk ? "; " : ")");
		if (o.piece != wire_chunk)
			snprintf(wire, sizeof(wire), "%swire chunk %zu B)", o.small_chunk ? "" : " (",
				 wire_chunk);
		printf("# provider %s; pieces of %zu B%s%s, %d in flight per direction on every path; "
		       "allreduce %s (--rd-max %zu)\n",
		       pd_fabric_provider(first),
		       o.piece, small, wire, o.depth, o.algo == ALGO_RING ? "ring" : o.algo == ALGO_RD ?
		       "recursive doubling" : "recursive doubling up to --rd-max, ring above", o.rd_max);
		for (p = 0; p < NLANES; p++)
			if (o.lanes[p])
				printf("# path %-6s: memory %-8s %s: %s%s\n", lane_names[p],
				       p == LANE_HOST ? "host" : o.memory, pd_path_name(pd_mr_path(lanes[p].mr)),
				       pd_mr_reason(lanes[p].mr), p != LANE_HOST && lanes[p].src.simulated ?
				       " (simulated device: RAM, not an accelerator)" : "");
		if (o.lanes[LANE_DIRECT] || o.lanes[LANE_BOUNCE]) {
			struct lane *l = &lanes[o.lanes[LANE_DIRECT] ? LANE_DIRECT : LANE_BOUNCE];
			size_t len = o.maxb < (64 << 20) ? o.maxb : (64 << 20);
			double up, down;

			copy_bandwidth(l, len, &up, &down);
			printf("# CPU copy of %zu B (rank 0, median of 5): host to %s %.2f GB/s, %s to host %.2f GB/s\n",
			       len, o.memory, up, o.memory, down);
		}
		printf("# paths alternate per iteration, each first in turn in the timed ones; every checked iteration verifies every element on every rank\n");
		if (o.corrupt == CORRUPT_POISON)
			printf("# --test-corrupt: one output element per checked iteration is put back to its poison\n");
		if (o.corrupt == CORRUPT_MISPLACE)
			printf("# --test-misplace: each checked output's second half is overwritten with its first\n");
		if (o.max_pend < MAX_PEND)
			printf("# --test-max-pending %d: an exchange waits for its oldest sends past that many\n",
			       o.max_pend);
		if (o.slow_lane >= 0)
			printf("# --test-slow-path %s: every timed iteration of that path takes %d ms more\n",
			       lane_names[o.slow_lane], SLOW_PATH_NS / 1000000);
		began = true;
		if (csv.f)
			csv_header();
		fflush(stdout);
	}
	/* Test only (--test-kill-rank): a rank lost mid-run, as to the OOM killer. */
	if (o.kill_rank > 0 && o.kill_rank == b.rank)
		raise(SIGKILL);
	for (ci = 0; ci < o.ncolls && (status == 0 || status == TOOL_EX_DATA); ci++) {
		enum coll_kind k = o.colls[ci];

		for (ti = 0; ti < o.ntypes && (status == 0 || status == TOOL_EX_DATA); ti++) {
			for (oi = 0; oi < (reducing(k) ? o.nops : 1) && (status == 0 || status == TOOL_EX_DATA); oi++) {
				struct run r = { .o = &o, .rank = b.rank, .n = b.size, .t = o.types[ti],
						 .op = reducing(k) ? o.ops[oi] : OP_SUM,
						 .esz = o.types[ti] == T_FLOAT ? 4 : 2, .max = region / 3 };
				double avg[NLANES] = { 0 }, rsize[64], pbus[NLANES][64];
				struct coll_ratio ratio[64][NLANES];
				int nrat = 0, rows = 0;
				uint64_t wrong = 0;

				if (b.rank == 0)
					table_header(&o, k, r.t, r.op);
				for (si = 0; si < nsizes && (status == 0 || status == TOOL_EX_DATA); si++) {
					struct geom g;
					struct result res[NLANES][2];

					coll_geom(k, sizes[si], r.esz, b.size, &g);
					if (!g.sendcount || !g.recvcount)
						continue;
					memset(me, 0, stride);
					measure(&r, k, &g, me);
					if (b.allgather(&b, me, stride, all)) {
						status = 3;
						break;
					}
					for (p = 0; p < b.size; p++) {
						const struct sample *s = (const void *)((char *)all + (size_t)p * stride);
						int q;

						if (s->status)
							status = 1;
						/* every rank knows: the run goes on, the exit status says it */
						for (q = 0; q < NLANES * 2; q++)
							if (s->wrong[q / 2][q % 2] && !status)
								status = TOOL_EX_DATA;
					}
					if (status == 1)
						break;
					if (b.rank)
						continue;
					rows++;
					for (p = 0; p < NLANES; p++) {
						int ip;

						if (!o.lanes[p])
							continue;
						printf("%12zu  %12zu  %8s  %6s  %6d", (g.sendcount > g.recvcount ?
						       g.sendcount : g.recvcount) * r.esz, g.count, type_names[r.t],
						       reducing(k) ? op_names[r.op] : "none", rooted(k) ? o.root : -1);
						for (ip = 0; ip < 2; ip++) {
							char ts[16], as[16], bs[16];

							summarize(&o, b.size, all, stride, &g, r.esz, p, ip, &res[p][ip]);
							fmt(res[p][ip].us, 7, ts);
							fmt(res[p][ip].alg, 6, as);
							fmt(res[p][ip].bus, 6, bs);
							if (o.check)
								printf("  %7s  %6s  %6s  %6g", ts, as, bs, (double)res[p][ip].wrong);
							else
								printf("  %7s  %6s  %6s    N/A", ts, as, bs);
							avg[p] += res[p][ip].bus;
							wrong += res[p][ip].wrong;
							if (csv.f)
								fprintf(csv.f, "%s,%s,%s,%s,%s,%d,%zu,%zu,%s,%s,%d,%s,%.3f,%.6f,%.6f,%llu,%d,%zu\n",
									coll_names[k], lane_names[p],
									pd_path_name(pd_mr_path(lanes[p].mr)),
									pd_fabric_provider(lanes[p].fab),
									p == LANE_HOST ? "host" : o.memory, b.size,
									(g.sendcount > g.recvcount ? g.sendcount : g.recvcount) * r.esz,
									g.count, type_names[r.t],
									reducing(k) ? op_names[r.op] : "none",
									rooted(k) ? o.root : -1, ip ? "in-place" : "out-of-place",
									res[p][ip].us, res[p][ip].alg, res[p][ip].bus,
									(unsigned long long)res[p][ip].wrong, o.iters, sizes[si]);
						}
						printf("  %s\n", lane_names[p]);
					}
					if (nrat < 64) {
						rsize[nrat] = (double)sizes[si];
						for (p = 0; p < NLANES; p++)
							pbus[p][nrat] = o.lanes[p] ? res[p][0].bus : 0;
						direct_over(&o, b.size, all, stride, ratio[nrat]);
						nrat++;
					}
					fflush(stdout);
				}
				if (b.rank) {
					if (status == 1 || status == 3)
						break;
					continue;
				}
				if (o.lanes[0] && (o.lanes[1] || o.lanes[2]) && nrat) {
					printf("# ratios: paired, per timed iteration the other path's time over direct's; their median [quartiles]\n");
					printf("# out-of-place busbw ratios: %10s  %-24s  %s\n", "size",
					       "direct/bounce", "direct/host");
					for (si = 0; si < nrat; si++) {
						char cb[64], ch[64];

						ratio_cell(&ratio[si][LANE_BOUNCE], cb, sizeof(cb));
						ratio_cell(&ratio[si][LANE_HOST], ch, sizeof(ch));
						printf("#                            %10.0f  %-24s  %s\n", rsize[si],
						       cb, ch);
					}
				}
				/* A table cut short checked only what it ran. */
				printf("# %-20s : %llu %s\n", "Out of bounds values", (unsigned long long)wrong,
				       wrong ? "FAILED" : status == 1 || status == 3 ? "INCOMPLETE" : "OK");
				avg_footer(&o, avg, rows, ratio, nrat);
				for (p = 0; p < NLANES; p++)
					run_sum[p] += avg[p];
				run_rows += rows;
				if (plotdat.f) {
					for (p = 0; p < NLANES; p++) {
						if (!o.lanes[p])
							continue;
						plot_block(coll_names[k], lane_names[p], type_names[r.t],
							   reducing(k) ? op_names[r.op] : "");
						for (si = 0; si < nrat; si++)
							fprintf(plotdat.f, "%.0f %.6f\n", rsize[si], pbus[p][si]);
					}
				}
				fflush(stdout);
				/* A table cut short still gets its footer, then the run ends. */
				if (status == 1 || status == 3)
					break;
			}
		}
	}
	if (b.rank == 0) {
		nccl_avg_line(&o, run_sum, run_rows);
		printf("#\n# Collective test %s: pd-coll\n",
		       status == 1 || status == 3 ? "ended early" : "concluded");
	}
out:
	for (p = 0; p < NLANES; p++)
		if (lanes[p].fab || lanes[p].src.map)
			lane_close(&lanes[p]);
	/* Kept if the run went ahead, whatever it found. */
	if (!outfile_close(&csv, began))
		status = status ? status : 1;
	if (plotdat.f && (!outfile_close(&plotdat, began) || (began && nplot && run_plot(o.plot, datpath))))
		status = status ? status : 1;
	if (b.rank == 0 && (fflush(stdout) || ferror(stdout))) {
		fprintf(stderr, "pd-coll: standard output: the results could not be written\n");
		status = status ? status : 1;
	}
	free(me);
	free(all);
out_boot:
	/* Refused before it ran: what was there stays. */
	outfile_close(&csv, false);
	outfile_close(&plotdat, false);
	b.close(&b);
	if (!child) {
		int worst = launch_wait_children(status);

		status = worst > status ? worst : status;
	}
	return status;
}
