// SPDX-License-Identifier: MIT
/*
 * pd-coll's command line: nccl-tests' flags and its own, checked whole
 * before anything runs; the sweep of sizes they give; and the defaults a
 * provider gets for what the command line left unset.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rdma/fabric.h>

#include "coll.h"
#include "../dmabuf_source.h"
#include "../fnv1a.h"
#include "../tool_args.h"
#include "../tool_cli.h"
#include "../tool_version.h"
#include "peerdirect_ext.h"

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
		"  --net PLUGIN           one path more, net: the same messages through an NCCL net\n"
		"                         plugin (a path, or NAME for libnccl-net-NAME.so), compared\n"
		"                         with the host path (host/net ratios)\n"
		"  --net-memory KIND      the net path's memory: host (default, regMr), memfd,\n"
		"                         udmabuf or device:DEV (a dma-buf: regMrDmaBuf)\n"
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
bool coll_in_path(const char *prog)
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

/* Options without a short letter. */
enum { O_COLL = 256, O_PATHS, O_MEMORY, O_PROVIDER, O_DEPTH, O_CHUNK, O_ALGO, O_RDMAX,
       O_SMALL_CHUNK, O_SMALL_MAX, O_STAT, O_CSV, O_PLOT, O_TIMEOUT, O_NP, O_RANK, O_NRANKS, O_RDV, O_CORRUPT,
       O_MISPLACE, O_KILL, O_MAXPEND, O_SLOW, O_VERSION, O_DEVICE, O_NET, O_NET_MEMORY };

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
	{ "device", 1, 0, O_DEVICE }, { "net", 1, 0, O_NET }, { "net-memory", 1, 0, O_NET_MEMORY },
	{ 0 },
};

/* One option: 0, 'h' when it printed what was asked and the run ends, or
 * -1 after saying what is wrong. */
static int parse_option(int c, char *arg, struct opts *o, struct launch_opts *lo)
{
	static char devbuf[PATH_MAX + 8];
	int lanes_sel[NLANES], n, i;

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

		if (tool_number(arg, want, want, &v)) {
			fprintf(stderr, "pd-coll: %s %s: only %s %d (%s)\n", flag, arg, flag, want,
				c == 'g' ? "one device per rank" : c == 't' ? "one thread per rank" :
				c == 'm' ? "one operation per iteration" :
				c == 'a' ? "the slowest rank's time, nccl-tests' -a 3" :
				c == 'z' ? "non-blocking" : "no CUDA graphs");
			return -1;
		}
		break;
	}
	case 'b': if (size_arg(arg, &o->minb, "-b")) return -1; break;
	case 'e': if (size_arg(arg, &o->maxb, "-e")) return -1; break;
	case 'i': if (size_arg(arg, &o->stepb, "-i")) return -1; break;
	case 'f':
		if (factor_arg(arg, &o->stepf))
			return -1;
		break;
	case 'n': if (TOOL_INT_ARG("-n", 1, MAX_ITERS, &o->iters)) return -1; break;
	case 'w': if (TOOL_INT_ARG("-w", 0, MAX_ITERS, &o->warmup)) return -1; break;
	case 'c': if (TOOL_INT_ARG("-c", 0, MAX_ITERS, &o->check)) return -1; break;
	case 'r': if (TOOL_INT_ARG("-r", 0, MAX_RANKS - 1, &o->root)) return -1; break;
	case 'o':
		if ((o->nops = parse_list(arg, op_names, NOPS, o->ops, "op")) < 0)
			return -1;
		break;
	case 'd':
		if ((o->ntypes = parse_list(arg, type_names, NTYPES, o->types, "datatype")) < 0)
			return -1;
		break;
	case O_COLL:
		if ((o->ncolls = parse_list(arg, coll_names, NCOLLS, o->colls, "collective")) < 0)
			return -1;
		break;
	case O_PATHS:
		if ((n = parse_list(arg, lane_names, NLANES, lanes_sel, "path")) < 0)
			return -1;
		memset(o->lanes, 0, sizeof(o->lanes));
		for (i = 0; i < n; i++)
			o->lanes[lanes_sel[i]] = true;
		break;
	case O_MEMORY: o->memory = arg; break;
	case O_NET: o->net = arg; break;
	case O_NET_MEMORY: o->net_memory = arg; break;
	case O_DEVICE: o->memory = source_device_spec(arg, devbuf, sizeof(devbuf)); break;
	case 'h': usage(stdout); return 'h';
	case O_VERSION: tool_print_version(TOOL_NAME); return 'h';
	case O_PROVIDER: o->provider = arg; break;
	case O_DEPTH: if (TOOL_INT_ARG("--depth", 1, MAX_DEPTH, &o->depth)) return -1; break;
	case O_CHUNK:
		if (size_arg(arg, &o->chunk, "--chunk"))
			return -1;
		o->chunk_set = true;
		break;
	case O_ALGO:
		o->algo = !strcmp(arg, "ring") ? ALGO_RING : !strcmp(arg, "rd") ? ALGO_RD :
			  !strcmp(arg, "auto") ? ALGO_AUTO : (enum algo)-1;
		if ((int)o->algo < 0) {
			fprintf(stderr, "pd-coll: --algo auto, ring or rd\n");
			return -1;
		}
		break;
	case O_RDMAX:
		if (size_arg(arg, &o->rd_max, "--rd-max"))
			return -1;
		o->rd_max_set = true;
		break;
	case O_SMALL_CHUNK:
		if (size_arg(arg, &o->small_chunk, "--small-chunk"))
			return -1;
		o->small_set |= SMALL_CHUNK_SET;
		break;
	case O_SMALL_MAX:
		if (size_arg(arg, &o->small_max, "--small-max"))
			return -1;
		o->small_set |= SMALL_MAX_SET;
		break;
	case O_STAT:
		if (strcmp(arg, "mean") && strcmp(arg, "median"))
			return tool_bad(TOOL_NAME, "--stat", arg, "want mean or median");
		o->median = !strcmp(arg, "median");
		break;
	case O_CSV: o->csv = arg; break;
	case O_PLOT: o->plot = arg; break;
	case O_TIMEOUT:
		if (TOOL_INT_ARG("--timeout", 1, TOOL_MAX_TIMEOUT_MS, &o->timeout_ms))
			return -1;
		break;
	case O_NP: if (TOOL_INT_ARG("--np", 2, MAX_RANKS, &lo->np)) return -1; break;
	case O_RANK: if (TOOL_INT_ARG("--rank", 0, MAX_RANKS - 1, &lo->rank)) return -1; break;
	case O_NRANKS: if (TOOL_INT_ARG("--nranks", 2, MAX_RANKS, &lo->nranks)) return -1; break;
	case O_RDV: lo->rdv = arg; break;
	case O_CORRUPT: o->corrupt = CORRUPT_POISON; break;
	case O_MISPLACE: o->corrupt = CORRUPT_MISPLACE; break;
	case O_KILL: if (TOOL_INT_ARG("--test-kill-rank", 1, MAX_RANKS - 1, &o->kill_rank)) return -1; break;
	case O_MAXPEND: if (TOOL_INT_ARG("--test-max-pending", 1, MAX_PEND, &o->max_pend)) return -1; break;
	case O_SLOW:
		if (!*arg || strchr(arg, ',') || !strcmp(arg, "all"))
			return tool_bad(TOOL_NAME, "--test-slow-path", arg, "want one path");
		if (parse_list(arg, lane_names, NLANES, lanes_sel, "path") != 1)
			return -1;
		o->slow_lane = lanes_sel[0];
		break;
	default: usage(stderr); return -1;
	}
	return 0;
}

/* What single options cannot tell: how they go together.  0 or -1. */
static int check_opts(struct opts *o, int argc, char **argv)
{
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
		fprintf(stderr, "pd-coll: --paths: want one or more of direct, bounce and host (net, with --net, runs beside them)\n");
		return -1;
	}
	if (o->lanes[LANE_NET] && !o->net) {
		fprintf(stderr, "pd-coll: --paths net: give the plugin with --net PLUGIN\n");
		return -1;
	}
	if (o->net && !*o->net) {
		fprintf(stderr, "pd-coll: --net: want a plugin's path or name\n");
		return -1;
	}
	/* --net adds its path whatever --paths said: the plugin is what was asked for. */
	o->lanes[LANE_NET] = o->net != NULL;
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

int coll_parse(int argc, char **argv, struct opts *o, struct launch_opts *lo)
{
	int c, ret;

	if (tool_refuse_empty(TOOL_NAME, argc, argv))
		return -1;
	*o = (struct opts) { .minb = 32 << 20, .maxb = 32 << 20, .stepb = 1 << 20, .chunk = 4 << 20,
			     .iters = 20, .warmup = 1, .check = 1, .depth = 4, .timeout_ms = 60000, .max_pend = MAX_PEND,
			     .slow_lane = -1,
			     .ncolls = 1, .ntypes = 1, .nops = 1, .rd_max = 256 << 10,
			     .lanes = { true, true, true }, .net_memory = "host",
			     .memory = access("/dev/peerdirect0", R_OK | W_OK) ? "memfd" : "device:0" };
	*lo = (struct launch_opts) { .rank = -1 };
	while ((c = getopt_long(argc, argv, "b:e:f:i:n:w:c:o:d:r:hg:t:a:m:z:G:", lopts, NULL)) != -1) {
		ret = parse_option(c, optarg, o, lo);
		if (ret)
			return ret;
	}
	if (o->ncolls == 1 && !o->colls[0])
		o->colls[0] = C_ALLREDUCE;
	return check_opts(o, argc, argv);
}

/* What decides the sequence of collectives and messages: ranks that
 * differ in any of it would wait for each other forever, or check data
 * the other never refilled. */
uint64_t coll_sweep_plan(const struct opts *o, const size_t *sizes, int nsizes)
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

/* -b to -e by -f or -i: at most 64 sizes, each larger than the last. */
int coll_sweep_sizes(const struct opts *o, size_t *sizes, int *n)
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

/*
 * Tuning by provider, each measured (Documentation/results/performance-log.md), for
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
/* prov: the provider every lane has; shm_without_cma: some lane's shm
 * endpoint has no CMA (shm_lane_without_cma). */
void coll_provider_defaults(struct opts *o, const char *prov, int nranks, bool shm_without_cma)
{
	bool shm = !strcmp(prov, "shm"), rxm = !strcmp(prov, "tcp;ofi_rxm");
	/* tcp's own RDM endpoint: net, or tcp alone (rxm adds its name). */
	bool tcp_rdm = !strcmp(prov, "net") || !strcmp(prov, "tcp");
	bool rxm_tuned = getenv("FI_OFI_RXM_EAGER_LIMIT") || getenv("FI_OFI_RXM_SAR_LIMIT") ||
			 getenv("FI_OFI_RXM_BUFFER_SIZE");
	size_t piece = 512 << 10;

	if (!o->rd_max_set && shm)
		o->rd_max = nranks == 2 ? (FI_MAJOR(fi_version()) >= 2 && shm_without_cma ?
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
