// SPDX-License-Identifier: MIT
/*
 * pd-xfer: two processes move device memory through libpeerdirect and check
 * every transfer end to end.  Rank 0 writes a pattern per iteration into its
 * buffer and sends it; rank 1 receives into its own and both compare 64-bit
 * FNV-1a checksums over the rendezvous.  Each iteration ends in exactly one
 * of: OK, ERROR (a clear failure, e.g. the export was revoked) or MISMATCH
 * (wrong data delivered silently: the one outcome that must never happen).
 *
 * Exit status (tool_cli.h, pd-xfer(1)): 0 all OK, 1 some ERROR and no
 * MISMATCH, 2 usage, 3 setup failed, 4 permission denied, 5 any MISMATCH.
 */
#include <getopt.h>
#include <inttypes.h>

#include "dmabuf_source.h"
#include "fnv1a.h"
#include "tool_args.h"
#include "tool_cli.h"
#include "tool_env.h"
#include "tool_version.h"
#include "peerdirect_ext.h"

#define TOOL_NAME "pd-xfer"

struct opts {
	int rank, iters, timeout_ms, revoke_after, remap;
	size_t size;
	char host[256];	/* of --rendezvous HOST:PORT */
	const char *provider, *memory, *path;
	uint16_t port;
};

struct verdict {
	int32_t status;		/* 0 or a negative errno */
	uint32_t pad;
	uint64_t checksum;
};

static void pattern_fill(unsigned char *p, size_t len, int iter)
{
	uint64_t x = 0x9e3779b97f4a7c15ULL * (uint64_t)(iter + 1);
	size_t i;

	for (i = 0; i < len; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		p[i] = (unsigned char)x;
	}
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: pd-xfer --rank 0|1 --rendezvous HOST:PORT [options]\n"
		"  --size BYTES       transfer size (default 4M; K/M/G suffixes)\n"
		"  --iters N          iterations (default 10)\n"
		"  --memory KIND      device:DEV | handed:DEV | udmabuf | memfd | host (default device:0)\n"
		"  --device DEV       --memory device:DEV; DEV an index, a path (/dev/peerdirect0,\n"
		"                     /dev/peerdirect/by-path/pci-...) or pci:DDDD:BB:DD.F\n"
		"  --provider NAME    libfabric provider (default auto)\n"
		"  --path PATH        auto|dmabuf|mapped|bounce (default auto)\n"
		"  --timeout MS       bound on every wait (default 10000)\n"
		"  --revoke-after N   revoke this rank's export after N iterations\n"
		"  --remap            host memory: before every iteration but the first,\n"
		"                     deregister, put new pages at the same address and\n"
		"                     register again (a stale registration shows as MISMATCH)\n"
		"  --help, --version\n"
		"exit: 0 all OK, 1 an ERROR, 2 usage, 3 setup, 4 permission denied,\n"
		"      5 data failed verification (a MISMATCH)\n");
}

/* 0 to run, -1 done (--help, --version: exit 0), else the exit code. */
static int parse(int argc, char **argv, struct opts *o, char *devbuf, size_t devlen)
{
	static const struct option lo[] = {
		{ "rank", 1, 0, 'r' }, { "rendezvous", 1, 0, 'R' }, { "size", 1, 0, 's' },
		{ "iters", 1, 0, 'i' }, { "memory", 1, 0, 'm' }, { "provider", 1, 0, 'p' },
		{ "path", 1, 0, 'P' }, { "timeout", 1, 0, 't' }, { "revoke-after", 1, 0, 'v' },
		{ "remap", 0, 0, 'M' }, { "help", 0, 0, 'h' }, { "version", 0, 0, 'V' },
		{ "device", 1, 0, 'D' }, { 0 },
	};
	int c;

	if (tool_refuse_empty(TOOL_NAME, argc, argv))
		return TOOL_EX_USAGE;
	*o = (struct opts) { .rank = -1, .iters = 10, .timeout_ms = 10000, .revoke_after = -1,
			     .size = 4 << 20, .memory = "device:0" };
	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 'r': if (TOOL_INT_ARG("--rank", 0, 1, &o->rank)) return TOOL_EX_USAGE; break;
		case 'R':
			if (tool_hostport(TOOL_NAME, "--rendezvous", optarg, o->host, sizeof(o->host),
					  &o->port))
				return TOOL_EX_USAGE;
			break;
		case 's':
			if (pd_ext_parse_size(optarg, &o->size) || !o->size) {
				fprintf(stderr, "--size '%s' is not a size\n", optarg);
				return TOOL_EX_USAGE;
			}
			break;
		case 'i': if (TOOL_INT_ARG("--iters", 1, 1000000, &o->iters)) return TOOL_EX_USAGE; break;
		case 'm': o->memory = optarg; break;
		case 'p': o->provider = optarg; break;
		case 'P': o->path = optarg; break;
		case 't':
			if (TOOL_INT_ARG("--timeout", 1, TOOL_MAX_TIMEOUT_MS, &o->timeout_ms))
				return TOOL_EX_USAGE;
			break;
		case 'v':
			if (TOOL_INT_ARG("--revoke-after", 0, 1000000, &o->revoke_after))
				return TOOL_EX_USAGE;
			break;
		case 'M': o->remap = 1; break;
		case 'D': o->memory = source_device_spec(optarg, devbuf, devlen); break;
		case 'h': usage(stdout); return -1;
		case 'V': tool_print_version(TOOL_NAME); return -1;
		default: usage(stderr); return TOOL_EX_USAGE;
		}
	}
	if (optind != argc || o->rank < 0 || !o->host[0]) {
		usage(stderr);
		return TOOL_EX_USAGE;
	}
	if ((!strncmp(o->memory, "device:", 7) || !strncmp(o->memory, "handed:", 7)) &&
	    source_device_index(o->memory, &c) == -EINVAL)
		return TOOL_EX_USAGE;	/* syntax; a device that is not there is setup's */
	if (o->remap && strcmp(o->memory, "host")) {
		fprintf(stderr, "--remap needs --memory host (it replaces anonymous pages)\n");
		return TOOL_EX_USAGE;
	}
	return 0;
}

static int setup(const struct opts *o, struct pd_rdv **rdv, struct pd_fabric **fab,
		 uint64_t *peer)
{
	struct pd_fabric_attr attr;
	char mine[256] = { 0 }, all[2][256];
	size_t len = sizeof(mine);
	int ret;

	pd_fabric_attr_init(&attr);
	attr.provider = o->provider;
	if (o->path && (ret = pd_path_parse(o->path, &attr.path)))
		return ret;
	/* a rank started alone otherwise looks hung */
	fprintf(stderr, "pd-xfer rank %d: waiting for its peer (rank %d) at %s:%u (up to %d ms)\n",
		o->rank, !o->rank, o->host, (unsigned int)o->port, o->timeout_ms * 3);
	ret = pd_rdv_open(o->host, o->port, o->rank, 2, o->timeout_ms * 3, rdv);
	if (!ret)
		ret = pd_fabric_open(&attr, fab);
	if (!ret)
		ret = pd_fabric_addr(*fab, mine, &len) ?: pd_rdv_allgather(*rdv, mine, sizeof(mine), all);
	if (!ret)
		ret = pd_fabric_insert(*fab, all[!o->rank], len, peer);
	return ret;
}

static int one_transfer(const struct opts *o, struct pd_fabric *fab, struct pd_mr *mr,
			uint64_t peer, int iter)
{
	struct pd_req *req;
	size_t got = 0;
	int ret;

	ret = o->rank == 0 ? pd_tsend(fab, mr, 0, o->size, peer, (uint64_t)iter, &req) :
			     pd_trecv(fab, mr, 0, o->size, peer, (uint64_t)iter, &req);
	if (ret)
		return ret;
	ret = pd_wait(req, o->timeout_ms, &got);
	pd_req_free(req);
	if (!ret && got != o->size)
		ret = pd_ext_error(-EIO, "completed %zu of %zu bytes", got, o->size);
	return ret;
}

int main(int argc, char **argv)
{
	struct dmabuf_source src;
	struct pd_cache_stats st;
	struct pd_fabric *fab = NULL;
	struct pd_rdv *rdv = NULL;
	struct pd_mr *mr = NULL;
	unsigned char *host;
	struct opts o;
	uint64_t peer;
	int i, ret, errors = 0, mismatches = 0;
	char devbuf[PATH_MAX + 8];

	tool_env_defaults();

	ret = parse(argc, argv, &o, devbuf, sizeof(devbuf));
	if (ret)
		return ret < 0 ? TOOL_EX_OK : ret;
	memset(&src, 0, sizeof(src));
	src.fd = -1;
	host = malloc(o.size);
	ret = host ? 0 : -ENOMEM;
	if (!ret)
		ret = source_open(&src, o.memory, o.size);
	if (!ret)
		ret = setup(&o, &rdv, &fab, &peer);
	if (!ret)
		ret = source_register(&src, fab, &mr);
	if (ret) {
		fprintf(stderr, "pd-xfer rank %d: setup: %s (%s)\n", o.rank, pd_last_error(),
			pd_strerror(ret));
		mismatches = ret == -EPERM || ret == -EACCES ? -2 : -1;
		goto out;
	}
	/* the marker last: scripts match the line's fields before it */
	printf("rank %d provider %s memory %s size %zu path %s: %s%s\n", o.rank,
	       pd_fabric_provider(fab), o.memory, o.size, pd_path_name(pd_mr_path(mr)),
	       pd_mr_reason(mr), src.simulated ? " (simulated: RAM, not an accelerator)" : "");
	for (i = 0; i < o.iters; i++) {
		struct verdict mine = { 0 }, both[2];
		char msg[512] = "";

		if (o.revoke_after == i && src.dev) {
			ret = pd_device_revoke(src.owner ? src.owner : src.dev, PD_REVOKE_EXPORT,
					       src.exp.export_id, NULL, NULL);
			printf("rank %d iter %d: revoked export %" PRIu64 ": %s\n", o.rank, i,
			       src.exp.export_id, ret ? pd_last_error() : "ok");
		}
		if (o.remap && i) {
			pd_mr_dereg(mr);
			mr = NULL;
			mine.status = source_remap_host(&src);
			if (mine.status)
				snprintf(msg, sizeof(msg), "remap of the host buffer: %s",
					 strerror(-mine.status));
			else
				mine.status = source_register(&src, fab, &mr);
		}
		if (o.rank == 0 && !mine.status) {
			pattern_fill(host, o.size, i);
			mine.status = source_write(&src, host, o.size);
		}
		if (!mine.status)
			mine.status = one_transfer(&o, fab, mr, peer, i);
		if (!mine.status)
			mine.status = source_read(&src, host, o.size);
		if (!mine.status)
			mine.checksum = fnv1a(FNV1A_INIT, host, o.size);
		else if (!msg[0])
			snprintf(msg, sizeof(msg), "%s", pd_last_error());
		ret = pd_rdv_allgather(rdv, &mine, sizeof(mine), both);
		if (ret) {
			fprintf(stderr, "rank %d: rendezvous lost: %s\n", o.rank, pd_last_error());
			mismatches = -1;
			goto out;
		}
		if (both[0].status || both[1].status) {
			errors++;
			printf("rank %d iter %d: ERROR%s%s%s%s (peer: %s)\n", o.rank, i,
			       mine.status ? " " : "",
			       mine.status ? pd_strerror(mine.status) : "",
			       mine.status ? ": " : "", mine.status ? msg : "",
			       both[!o.rank].status ? pd_strerror(both[!o.rank].status) : "ok");
		} else if (both[0].checksum != both[1].checksum) {
			mismatches++;
			printf("rank %d iter %d: MISMATCH sent 0x%016" PRIx64 " received 0x%016" PRIx64 "\n",
			       o.rank, i, both[0].checksum, both[1].checksum);
		} else {
			printf("rank %d iter %d: OK %zu bytes checksum 0x%016" PRIx64 "\n", o.rank, i,
			       o.size, mine.checksum);
		}
		fflush(stdout);
	}
	pd_fabric_poll_events(fab);
	pd_fabric_cache_stats(fab, &st);
	printf("rank %d summary: ok %d error %d mismatch %d; cache lookups %" PRIu64 " hits %" PRIu64
	       " misses %" PRIu64 " invalidations %" PRIu64 " entries %" PRIu64 "\n", o.rank,
	       o.iters - errors - mismatches, errors, mismatches, st.lookups, st.hits, st.misses,
	       st.invalidations, st.entries);
	pd_rdv_barrier(rdv);
out:
	pd_mr_dereg(mr);
	pd_fabric_close(fab);
	pd_rdv_close(rdv);
	source_close(&src);
	free(host);
	return mismatches == -2 ? TOOL_EX_PERM : mismatches < 0 ? TOOL_EX_SETUP :
	       mismatches ? TOOL_EX_DATA : errors ? TOOL_EX_FAIL : TOOL_EX_OK;
}
