// SPDX-License-Identifier: MIT
/*
 * pd-bench: the only source of libpeerdirect performance figures.
 *
 *   pd-bench cache [--provider P] [--entries N] [--memory memfd|device:N]
 *       median cost of a cache hit (register + release of a cached range) at
 *       N live entries, against the provider's own uncached fi_mr_reg: host
 *       ranges, dma-bufs by fd, and dma-bufs through an imported handle;
 *       over the first 20,100 random hits, and warm (the last 20,100 of
 *       200,100).
 *   pd-bench bw [--provider P] [--sizes 4K,1M,64M]
 *       tagged send/recv bandwidth between two processes on host memory:
 *       through the shim, and through a raw libfabric loop on the same
 *       endpoint and registration.
 *   pd-bench paths --memory device:N|memfd [--provider P] [--sizes ...]
 *       dma-buf memory: direct path (auto: dmabuf or mapped) against bounce.
 *   pd-bench lifecycle --memory device:N|memfd [--sizes 4K,1M,64M] [--repeats N]
 *       median cost of each step of a dma-buf's life: alloc, export,
 *       registration miss and hit, import and hit by handle, dereg, revoke
 *       with and without an importer, the library's teardown, free.
 *   pd-bench latency [--provider P] [--sizes 8,64,1K,4K,64K] [--iters N] [--repeats R]
 *       ping-pong one-way latency through the public API, beside fi_pingpong
 *       on the same provider (bench_latency.c).
 *   pd-bench msgrate [--provider P] [--sizes 8,64,1K] [--window W] [--iters N]
 *       messages per second, a window of sends in flight (bench_latency.c).
 *
 * Two-process modes fork: rank 1 is the child; they meet over the TCP
 * rendezvous on 127.0.0.1 (--port).  Every figure line is prefixed with the
 * exact command that produced it.
 */
#include <getopt.h>
#include <inttypes.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>

#include <rdma/fabric.h>
#include "tool_cli.h"
#include "tool_version.h"
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include "bench_report.h"
#include "bench_lifecycle.h"
#include "bench_latency.h"
#include "dmabuf_source.h"
#include "listen_port.h"
#include "tool_args.h"
#include "tool_env.h"
#include "peerdirect_ext.h"


#include "bench.h"

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

uint64_t bench_median(uint64_t *v, size_t n)
{
	qsort(v, n, sizeof(*v), cmp_u64);
	return v[n / 2];
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

double bench_median_d(double *v, size_t n)
{
	qsort(v, n, sizeof(*v), cmp_d);
	return v[n / 2];
}

/* The tools' exit codes: what could not be set up is 3 (permission 4),
 * what failed once running is 1. */
_Noreturn void bench_die_code(const char *what, int ret, int code)
{
	fprintf(stderr, "pd-bench: %s: %s (%s)\n", what, pd_last_error(), pd_strerror(ret));
	exit(ret == -EPERM || ret == -EACCES ? TOOL_EX_PERM : code);
}

_Noreturn void bench_die(const char *what, int ret)
{
	bench_die_code(what, ret, TOOL_EX_FAIL);
}

struct pd_fabric *bench_open_fabric(const struct opts *o, enum pd_path path)
{
	struct pd_fabric_attr attr;
	struct pd_fabric *fab;
	int ret;

	pd_fabric_attr_init(&attr);
	attr.provider = o->provider;
	attr.path = path;
	attr.cache_max_entries = (size_t)o->entries * 2 + 16;
	ret = pd_fabric_open(&attr, &fab);
	if (ret)
		bench_die_code("fabric", ret, TOOL_EX_SETUP);
	return fab;
}

static int mode_lifecycle(const struct opts *o)
{
	struct pd_device_info info = { 0 };
	struct pd_device *dev = NULL;
	struct pd_fabric *fab;
	int ret, index = -1;	/* -1: memfd */

	/* Before the fabric: a bad --memory costs nothing to refuse. */
	if (!strncmp(o->memory, "device:", 7)) {
		ret = source_device_index(o->memory, &index);
		if (ret)
			return ret == -EINVAL ? TOOL_EX_USAGE : TOOL_EX_SETUP;
	} else if (strcmp(o->memory, "memfd")) {
		fprintf(stderr, "pd-bench lifecycle: --memory device:DEV or memfd\n");
		return TOOL_EX_USAGE;
	}
	fab = bench_open_fabric(o, PD_PATH_AUTO);
	if (index >= 0) {
		ret = pd_device_open((unsigned int)index, &dev) ?:
		      pd_device_query(dev, &info) ?:
		      pd_fabric_attach_device(fab, dev);
		if (ret)
			bench_die_code("device", ret, TOOL_EX_SETUP);
	}
	printf("# %s\n# provider %s, memory %s, path auto%s\n", cmdline, pd_fabric_provider(fab),
	       o->memory, dev && info.backend == SRC_BACKEND_SIM ?
	       " (simulated: RAM, not an accelerator)" : "");
	ret = bench_lifecycle(fab, dev, o->sizes, o->nsizes, o->repeats);
	if (ret)
		bench_die("lifecycle", ret);
	pd_fabric_close(fab);
	pd_device_close(dev);
	return 0;
}

static int bad(const char *opt, const char *val, const char *want)
{
	return tool_bad(TOOL_NAME, opt, val, want);
}

/* "A,B": rank 0 and what runs beside it on A, rank 1 and its peer on B;
 * both must be CPUs this process may run on (a rank that cannot pin
 * itself would leave the other waiting for the rendezvous). */
static int parse_cpus(char *arg, int cpus[2])
{
	char *comma = strchr(arg, ',');
	cpu_set_t allowed;
	int i;

	if (!comma || sched_getaffinity(0, sizeof(allowed), &allowed))
		return -1;
	*comma = '\0';
	if (tool_number(arg, 0, CPU_SETSIZE - 1, &cpus[0]) || tool_number(comma + 1, 0, CPU_SETSIZE - 1, &cpus[1]))
		return -1;
	*comma = ',';
	for (i = 0; i < 2; i++)
		if (!CPU_ISSET(cpus[i], &allowed))
			return -1;
	return 0;
}

static int parse(int argc, char **argv, struct opts *o)
{
	static const struct option lo[] = {
		{ "provider", 1, 0, 'p' }, { "sizes", 1, 0, 's' }, { "entries", 1, 0, 'e' },
		{ "memory", 1, 0, 'm' }, { "port", 1, 0, 'P' }, { "repeats", 1, 0, 'r' },
		{ "iters", 1, 0, 'i' }, { "window", 1, 0, 'w' }, { "cpus", 1, 0, 'c' },
		{ "total", 1, 0, 't' }, { "device", 1, 0, 'D' }, { "help", 0, 0, 'h' },
		{ "version", 0, 0, 'V' }, { 0 },
	};
	static char devbuf[PATH_MAX + 8];
	static const size_t lat_sizes[] = { 8, 64, 1024, 4096, 65536 }, rate_sizes[] = { 8, 64, 1024 };
	char *tok, *save;
	int c, port;

	record_cmdline(argc, argv);
	if (tool_refuse_empty(TOOL_NAME, argc, argv))
		return -1;
	*o = (struct opts) { .entries = 10000, .memory = "memfd", .repeats = 5,
			     .sizes = { 4096, 1 << 20, 64 << 20 }, .nsizes = 3,
			     .window = 64, .cpus = { -1, -1 } };
	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 'p': o->provider = optarg; break;
		case 'e':
			if (tool_number(optarg, 201, 1000000, &o->entries))
				return bad("--entries", optarg, "want 201 to 1000000");
			break;
		case 'm': o->memory = optarg; break;
		case 'D': o->memory = source_device_spec(optarg, devbuf, sizeof(devbuf)); break;
		case 'h': return 'h';
		case 'V': return 'V';
		case 'P':
			if (tool_number(optarg, 1, 65535, &port))
				return bad("--port", optarg, "want 1 to 65535");
			o->port = (uint16_t)port;
			break;
		case 'r':
			if (tool_number(optarg, 1, MAX_REPEATS, &o->repeats))
				return bad("--repeats", optarg, "want 1 to 31");
			o->repeats_given = true;
			break;
		case 'i':
			if (tool_number(optarg, 1, LAT_MAX_ITERS, &o->iters))
				return bad("--iters", optarg, "want 1 to 1000000");
			break;
		case 'w':
			if (tool_number(optarg, 1, LAT_MAX_WINDOW, &o->window))
				return bad("--window", optarg, "want 1 to 1024 messages in flight");
			break;
		case 't':
			if (pd_ext_parse_size(optarg, &bench_run_total) || !bench_run_total)
				return bad("--total", optarg, "not a size above 0 (a number with K, M or G)");
			break;
		case 'c':
			if (parse_cpus(optarg, o->cpus))
				return bad("--cpus", optarg, "want A,B: two CPUs this process may run on");
			break;
		case 's':
			o->nsizes = 0;
			o->sizes_given = true;
			for (tok = strtok_r(optarg, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
				if (o->nsizes == MAX_SIZES)
					return bad("--sizes", tok, "one size too many (at most 16)");
				if (pd_ext_parse_size(tok, &o->sizes[o->nsizes]) || !o->sizes[o->nsizes])
					return bad("--sizes", tok, "not a size above 0 (a number with K, M or G)");
				o->nsizes++;
			}
			break;
		default:
			return -1;
		}
	}
	if (optind != argc - 1 || o->entries < 201 || !o->nsizes || o->repeats < 1 ||
	    o->repeats > MAX_REPEATS)
		return -1;
	o->mode = argv[optind];
	if (!o->port) {
		/* and the next one, for fi_pingpong beside latency */
		int port = listen_ports(2);

		if (port < 0)
			return bad("--port", "(none given)", "no free port below the ephemeral range: give one");
		o->port = (uint16_t)port;
	}
	/* Small messages are what these two modes are about. */
	if (!o->sizes_given && (!strcmp(o->mode, "latency") || !strcmp(o->mode, "msgrate"))) {
		bool lat = !strcmp(o->mode, "latency");

		o->nsizes = lat ? 5 : 3;
		memcpy(o->sizes, lat ? lat_sizes : rate_sizes, (size_t)o->nsizes * sizeof(size_t));
	}
	/* Enough that fi_pingpong's start-up (in its timed loop) weighs little. */
	if (!o->iters)
		o->iters = !strcmp(o->mode, "msgrate") ? 1000 : 10000;
	return 0;
}

static int mode_latency(const struct opts *o, bool latency)
{
	struct lat_opts l = {
		.cmdline = cmdline, .provider = o->provider, .sizes = o->sizes,
		.nsizes = o->nsizes, .iters = o->iters, .repeats = o->repeats,
		.window = o->window, .cpus = { o->cpus[0], o->cpus[1] }, .port = o->port,
	};

	return latency ? bench_latency(&l) : bench_msgrate(&l);
}

int main(int argc, char **argv)
{
	struct opts o;
	int ret;

	tool_env_defaults();

	ret = parse(argc, argv, &o);
	if (ret == 'V') {
		tool_print_version(TOOL_NAME);
		return TOOL_EX_OK;
	}
	if (ret) {
		fprintf(ret == 'h' ? stdout : stderr,
			"usage: pd-bench MODE [options] (options before or after the mode)\n"
			"  MODE: cache|bw|paths|lifecycle|latency|msgrate\n"
			"  [--provider P] [--entries N>200] [--sizes 4K,1M,64M] [--repeats 5]\n"
			"  [--memory device:DEV|memfd] [--device DEV] [--iters N] [--window W]\n"
			"  [--cpus A,B] [--total BYTES] [--port P] [--help] [--version]\n"
			"  DEV: an index, a path (/dev/peerdirect0, /dev/peerdirect/by-path/pci-...)\n"
			"       or pci:DDDD:BB:DD.F\n"
			"exit: 0 ok, 1 failed, 2 usage, 3 setup, 4 permission denied,\n"
			"      5 data failed verification (paths: #wrong above 0)\n");
		return ret == 'h' ? TOOL_EX_OK : TOOL_EX_USAGE;
	}
	if (!strcmp(o.mode, "cache")) {
		mode_cache(&o);
		return 0;
	}
	if (!strcmp(o.mode, "bw"))
		return mode_bw(&o);
	if (!strcmp(o.mode, "paths"))
		return mode_paths(&o);
	if (!strcmp(o.mode, "lifecycle"))
		return mode_lifecycle(&o);
	if (!strcmp(o.mode, "latency") || !strcmp(o.mode, "msgrate"))
		return mode_latency(&o, !strcmp(o.mode, "latency"));
	fprintf(stderr, "pd-bench: unknown mode '%s' (cache, bw, paths, lifecycle, latency, msgrate)\n",
		o.mode);
	return TOOL_EX_USAGE;
}

