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

#define TOOL_NAME "pd-bench"
#define MAX_SIZES 16
#define RAW_WINDOW 64
#define MAX_REPEATS 31

struct opts {
	const char *mode, *provider, *memory;
	size_t sizes[MAX_SIZES];
	int nsizes, entries, repeats, iters, window, cpus[2];
	bool sizes_given;
	uint16_t port;
};


static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static uint64_t median(uint64_t *v, size_t n)
{
	qsort(v, n, sizeof(*v), cmp_u64);
	return v[n / 2];
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median_d(double *v, size_t n)
{
	qsort(v, n, sizeof(*v), cmp_d);
	return v[n / 2];
}

/* The tools' exit codes: what could not be set up is 3 (permission 4),
 * what failed once running is 1. */
static int die_code(const char *what, int ret, int code)
{
	fprintf(stderr, "pd-bench: %s: %s (%s)\n", what, pd_last_error(), pd_strerror(ret));
	exit(ret == -EPERM || ret == -EACCES ? TOOL_EX_PERM : code);
}

static int die(const char *what, int ret)
{
	return die_code(what, ret, TOOL_EX_FAIL);
}

static struct pd_fabric *open_fabric(const struct opts *o, enum pd_path path)
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
		die_code("fabric", ret, TOOL_EX_SETUP);
	return fab;
}

/* ---- cache ---------------------------------------------------------- */

#define HIT_BATCHES 2001

static void bench_hits(const char *label, struct pd_fabric *fab, int n,
		       int (*reg)(struct pd_fabric *, void *, int, struct pd_mr **), void *ctx)
{
	uint64_t *miss = calloc((size_t)n, sizeof(uint64_t)), hit[HIT_BATCHES], t0;
	struct pd_mr **mrs = calloc((size_t)n, sizeof(*mrs));
	unsigned int seed = 1;
	struct pd_cache_stats st;
	int i, k, ret;

	if (!miss || !mrs)
		die("memory", -ENOMEM);
	for (i = 0; i < n; i++) {
		t0 = now_ns();
		ret = reg(fab, ctx, i, &mrs[i]);
		miss[i] = now_ns() - t0;
		if (ret)
			die("registration", ret);
	}
	for (i = 0; i < n; i++)
		pd_mr_dereg(mrs[i]);
	/*
	 * Batches of 100 random hits; the median batch, per hit.  The first
	 * 201 batches hit each of n entries 20,100/n times on average, mostly
	 * out of the CPU caches the misses just churned (the figure P3 is
	 * judged on); the last 201 come after 180,000 more hits in a tight
	 * loop, which leave the hit's working set (an entry's two lines, its
	 * bucket) cache-resident when it fits: a best case.  Both are printed.
	 */
	for (k = 0; k < HIT_BATCHES; k++) {
		int idx[100];

		for (i = 0; i < 100; i++)
			idx[i] = rand_r(&seed) % n;
		t0 = now_ns();
		for (i = 0; i < 100; i++) {
			struct pd_mr *mr;

			if ((ret = reg(fab, ctx, idx[i], &mr)))
				die("hit", ret);
			pd_mr_dereg(mr);
		}
		hit[k] = (now_ns() - t0) / 100;
	}
	pd_fabric_cache_stats(fab, &st);
	printf("%-34s entries %6" PRIu64 "  hit (get+release) median %6" PRIu64
	       " ns, warm %6" PRIu64 " ns  miss (shim registration) median %8" PRIu64
	       " ns  hits %" PRIu64 "/%" PRIu64 "\n",
	       label, st.entries, median(hit, 201), median(hit + HIT_BATCHES - 201, 201),
	       median(miss, (size_t)n), st.hits, st.lookups);
	free(miss);
	free(mrs);
}

static int reg_page(struct pd_fabric *fab, void *base, int i, struct pd_mr **mr)
{
	return pd_mr_reg_host(fab, (char *)base + (size_t)i * 4096, 4096, 0, mr);
}

static int reg_dmabuf_page(struct pd_fabric *fab, void *fdp, int i, struct pd_mr **mr)
{
	return pd_mr_reg_dmabuf(fab, *(int *)fdp, (uint64_t)i * 4096, 4096, 0, mr);
}

static int reg_imported_page(struct pd_fabric *fab, void *buf, int i, struct pd_mr **mr)
{
	(void)fab;
	return pd_mr_reg_imported(buf, (uint64_t)i * 4096, 4096, 0, mr);
}

static void mode_cache(const struct opts *o)
{
	size_t len = (size_t)o->entries * 4096;
	struct pd_fabric *fab = open_fabric(o, PD_PATH_AUTO);
	struct dmabuf_source src;
	struct pd_dmabuf *buf_handle;
	struct pd_device *dev = NULL;
	int sv[2] = { -1, -1 };
	char label[64];
	uint64_t reg[201], both[201], t0, t1;
	struct pd_fabric_ext_info raw;
	struct fid_mr *mr;
	char *buf;
	int i, ret;

	if ((ret = pd_fabric_ext_query(fab, &raw)))
		die_code("fabric", ret, TOOL_EX_SETUP);
	printf("# %s\n# provider %s\n", cmdline, pd_fabric_provider(fab));
	buf = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (buf == MAP_FAILED)
		die("mmap", -errno);
	memset(buf, 1, len);
	for (i = 0; i < 201; i++) {
		t0 = now_ns();
		ret = fi_mr_reg(raw.domain, buf + (size_t)i * 4096, 4096, FI_SEND | FI_RECV, 0,
				1000000 + (uint64_t)i, 0, &mr, NULL);
		t1 = now_ns();
		if (ret)
			die("fi_mr_reg", ret);
		fi_close(&mr->fid);
		reg[i] = t1 - t0;
		both[i] = now_ns() - t0;
	}
	printf("%-34s fi_mr_reg median %6" PRIu64 " ns  fi_mr_reg+fi_close median %6" PRIu64 " ns\n",
	       "raw libfabric, 4 KiB, uncached", median(reg, 201), median(both, 201));
	bench_hits("shim host 4 KiB ranges", fab, o->entries, reg_page, buf);
	pd_fabric_close(fab);
	munmap(buf, len);
	/*
	 * dma-buf keys: one dma-buf (--memory: a memfd, or a module export
	 * whose device is attached, watching it), N page-sized
	 * registrations at distinct offsets: by fd, then through a handle.
	 */
	ret = source_open(&src, o->memory, len);
	if (ret)
		die_code("memory", ret, TOOL_EX_SETUP);
	snprintf(label, sizeof(label), "shim dma-buf 4 KiB (%.8s, fd)", o->memory);
	fab = open_fabric(o, PD_PATH_AUTO);
	if (src.dev)
		pd_fabric_attach_device(fab, src.dev);
	bench_hits(label, fab, o->entries, reg_dmabuf_page, &src.fd);
	pd_fabric_close(fab);
	/* The same through an imported handle: no fstat per hit. */
	snprintf(label, sizeof(label), "shim dma-buf handle (%.8s%s)", o->memory,
		 src.dev ? ", watched" : "");
	fab = open_fabric(o, PD_PATH_AUTO);
	if (src.dev)
		pd_fabric_attach_device(fab, src.dev);
	if (!pd_dmabuf_import(fab, src.fd, &buf_handle)) {
		bench_hits(label, fab, o->entries, reg_imported_page, buf_handle);
		pd_dmabuf_release(buf_handle);
	}
	pd_fabric_close(fab);
	/*
	 * With a device attached (a socketpair standing in for the device
	 * file): the device's own export, whose revocation it reports, and
	 * another exporter's dma-buf (a GPU driver's, udmabuf) that it
	 * cannot watch, whose hit stays a hash probe once the device said so.
	 * Both kinds of dma-buf P3 speaks of, on this host.
	 */
	for (int watched = 0; !src.dev && watched < 2; watched++) {
		/* watched: the memfd stands for the device's own export */
		fab = open_fabric(o, PD_PATH_AUTO);
		dev = NULL;
		if (!socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) &&
		    !pd_device_ext_wrap_fd(sv[0], 0, &dev) &&
		    (!watched || !pd_device_ext_track_export(dev, src.fd, 1)) &&
		    !pd_fabric_attach_device(fab, dev) &&
		    !pd_dmabuf_import(fab, src.fd, &buf_handle)) {
			bench_hits(watched ? "shim export handle, watched" :
					     "shim foreign handle, dev attached",
				   fab, o->entries, reg_imported_page, buf_handle);
			pd_dmabuf_release(buf_handle);
		}
		pd_fabric_close(fab);
		pd_device_close(dev);
		if (sv[1] >= 0)
			close(sv[1]);
		sv[1] = -1;
	}
	source_close(&src);
}

/* ---- bandwidth -------------------------------------------------------- */

struct pair {
	int rank;
	struct pd_rdv *rdv;
	struct pd_fabric *fab;
	uint64_t peer;
};

static void pair_connect(struct pair *p, const struct opts *o, enum pd_path path)
{
	char mine[256] = { 0 }, all[2][256];
	size_t len = sizeof(mine);
	int ret;

	ret = pd_rdv_open("127.0.0.1", o->port, p->rank, 2, 30000, &p->rdv);
	if (ret)
		die("rendezvous", ret);
	p->fab = open_fabric(o, path);
	ret = pd_fabric_addr(p->fab, mine, &len) ?: pd_rdv_allgather(p->rdv, mine, sizeof(mine), all) ?:
	      pd_fabric_insert(p->fab, all[!p->rank], len, &p->peer);
	if (ret)
		die("address exchange", ret);
}

static void pair_close(struct pair *p)
{
	pd_rdv_barrier(p->rdv);
	pd_fabric_close(p->fab);
	pd_rdv_close(p->rdv);
	p->fab = NULL;
}

static int window_for(size_t size)
{
	return size <= (64 << 10) ? 64 : size <= (4 << 20) ? 16 : 2;
}

/* Bytes one timed run of bw and paths moves (--total). */
static size_t run_total = (size_t)512 << 20;

static int rounds_for(size_t size)
{
	size_t total = run_total, per = size * (size_t)window_for(size);

	if (total < 16 * size)
		total = 16 * size;
	return (int)((total + per - 1) / per);
}

/* W sends (rank 0) or receives (rank 1) in flight, all waited for. */
static int shim_round(struct pair *p, struct pd_mr *mr, size_t size, int w)
{
	struct pd_req *req[RAW_WINDOW];
	int i, ret = 0;

	for (i = 0; i < w && !ret; i++)
		ret = p->rank == 0 ? pd_tsend(p->fab, mr, 0, size, p->peer, 1, &req[i]) :
				     pd_trecv(p->fab, mr, 0, size, p->peer, 1, &req[i]);
	w = ret ? i - 1 : w;
	for (i = 0; i < w; i++) {
		if (!ret)
			ret = pd_wait(req[i], 60000, NULL);
		pd_req_free(req[i]);
	}
	return ret;
}

/* The same round written directly against libfabric, same endpoint. */
static int raw_round(struct pair *p, struct pd_mr *mr, size_t size, int w)
{
	struct fi_context2 ctx[RAW_WINDOW];
	struct fi_cq_tagged_entry ent[16];
	struct pd_fabric_ext_info f;
	void *desc = pd_mr_ext_desc(mr);
	int posted = 0, done = 0;
	ssize_t ret;

	if ((ret = pd_fabric_ext_query(p->fab, &f)))
		return (int)ret;

	/* Same shape as the shim's round: post the window, then drain; poll
	 * the CQ only when the provider pushes back. */
	while (done < w) {
		while (posted < w) {
			ret = p->rank == 0 ?
				fi_tsend(f.ep, pd_mr_ext_io(mr), size, desc, p->peer, 2, &ctx[posted]) :
				fi_trecv(f.ep, pd_mr_ext_io(mr), size, desc, p->peer, 2, 0, &ctx[posted]);
			if (ret == -FI_EAGAIN)
				break;
			if (ret)
				return (int)ret;
			posted++;
		}
		ret = fi_cq_read(f.cq, ent, 16);
		if (ret > 0)
			done += (int)ret;
		else if (ret != -FI_EAGAIN)
			return pd_ext_error((int)ret, "raw loop: fi_cq_read: %s", fi_strerror((int)-ret));
	}
	return 0;
}

/* MB/s (10^6 B/s) measured on rank 0, from the first post to the peer's ack
 * that its last receive completed. */
static double run_bw(struct pair *p, struct pd_mr *mr, size_t size, bool raw)
{
	int w = window_for(size), rounds = rounds_for(size), r, ret = 0;
	char ack = 0, acks[2];
	uint64_t t0;

	ret = raw ? raw_round(p, mr, size, w) : shim_round(p, mr, size, w);	/* warm-up */
	if (!ret)
		ret = pd_rdv_barrier(p->rdv);
	t0 = now_ns();
	for (r = 0; r < rounds && !ret; r++)
		ret = raw ? raw_round(p, mr, size, w) : shim_round(p, mr, size, w);
	if (ret)
		die(raw ? "raw loop" : "shim loop", ret);
	if (pd_rdv_allgather(p->rdv, &ack, 1, acks))
		die("ack", -EIO);
	return (double)size * w * rounds / ((double)(now_ns() - t0) / 1e9) / 1e6;
}

static pid_t fork_pair(struct pair *p)
{
	pid_t pid;

	fflush(NULL);
	pid = fork();
	if (pid < 0)
		die("fork", -errno);
	p->rank = pid == 0;
	return pid;
}

static int finish(pid_t pid)
{
	int status = 0;

	if (pid == 0)
		exit(0);
	waitpid(pid, &status, 0);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

static int mode_bw(const struct opts *o)
{
	struct pd_fabric_ext_info raw;
	size_t max = 0;
	struct pair p = { 0 };
	struct pd_mr *mr;
	char *buf;
	pid_t pid;
	int i;

	for (i = 0; i < o->nsizes; i++)
		max = o->sizes[i] > max ? o->sizes[i] : max;
	pid = fork_pair(&p);
	pair_connect(&p, o, PD_PATH_AUTO);
	if (pd_fabric_ext_query(p.fab, &raw))
		die("fabric", -EINVAL);
	buf = mmap(NULL, max, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (buf == MAP_FAILED || pd_mr_reg_host(p.fab, buf, max, 0, &mr))
		die("buffer", -ENOMEM);
	memset(buf, 3, max);
	if (p.rank == 0)
		printf("# %s\n# provider %s, chunk %zu, host memory, MB/s = 10^6 B/s, median and range of %d alternating runs\n"
		       "%10s %8s %7s %12s %12s %9s\n", cmdline, pd_fabric_provider(p.fab),
		       pd_fabric_chunk_size(p.fab), o->repeats, "size", "window", "rounds", "shim MB/s",
		       "raw MB/s", "shim/raw");
	for (i = 0; i < o->nsizes; i++) {
		size_t s = o->sizes[i];
		bool raw_ok = s <= raw.info->ep_attr->max_msg_size;
		double shims[MAX_REPEATS], raws[MAX_REPEATS] = { 0 }, shim, raw;
		int k, n = o->repeats;

		/* Alternate the two loops so load from other processes hits both. */
		for (k = 0; k < n; k++) {
			shims[k] = run_bw(&p, mr, s, false);
			if (raw_ok)
				raws[k] = run_bw(&p, mr, s, true);
		}
		shim = median_d(shims, (size_t)n);
		raw = median_d(raws, (size_t)n);

		/* The spread shows how much the machine's load moved the runs. */
		if (p.rank == 0)
			printf("%10zu %8d %7d %12.1f %12.1f %8.1f%%   shim %.0f..%.0f raw %.0f..%.0f\n",
			       s, window_for(s), rounds_for(s), shim, raw,
			       raw_ok ? 100.0 * shim / raw : 0.0, shims[0], shims[n - 1], raws[0],
			       raws[n - 1]);
		fflush(stdout);
	}
	pd_mr_dereg(mr);
	pair_close(&p);
	munmap(buf, max);
	return finish(pid);
}

/* A second fabric for the same two ranks, its address over p's rendezvous. */
static void pair_add_fabric(struct pair *p, const struct pair *base, const struct opts *o,
			    enum pd_path path)
{
	char mine[256] = { 0 }, all[2][256];
	size_t len = sizeof(mine);
	int ret;

	*p = (struct pair) { .rank = base->rank, .rdv = base->rdv };
	p->fab = open_fabric(o, path);
	ret = pd_fabric_addr(p->fab, mine, &len) ?: pd_rdv_allgather(p->rdv, mine, sizeof(mine), all) ?:
	      pd_fabric_insert(p->fab, all[!p->rank], len, &p->peer);
	if (ret)
		die("address exchange", ret);
}

/*
 * One checked message of size bytes: rank 0 sends a pattern that differs
 * per lane, size and repeat; rank 1 receives into its buffer poisoned
 * first and counts the bytes that differ.  Each lane has its own buffers,
 * so a receive that writes nothing, or into the other lane's memory,
 * cannot pass.  Returns the count (on both ranks).
 */
static uint64_t check_once(struct pair *p, struct dmabuf_source *src, struct pd_mr *mr,
			   size_t size, unsigned int seed)
{
	unsigned char *want = malloc(size), *got = malloc(size);
	struct pd_req *req;
	uint64_t bad = 0, all[2];
	size_t i;
	int ret;

	if (!want || !got)
		die("memory", -ENOMEM);
	for (i = 0; i < size; i++)
		want[i] = (unsigned char)(i * 131 + seed * 7 + (i >> 12));
	memset(got, 0xa5, size);
	ret = source_write(src, p->rank == 0 ? want : got, size) ?: pd_rdv_barrier(p->rdv);
	if (!ret)
		ret = p->rank == 0 ? pd_tsend(p->fab, mr, 0, size, p->peer, 3, &req) :
				     pd_trecv(p->fab, mr, 0, size, p->peer, 3, &req);
	if (!ret) {
		ret = pd_wait(req, 60000, NULL);
		pd_req_free(req);
	}
	if (ret)
		die("checked transfer", ret);
	if (p->rank == 1) {
		if ((ret = source_read(src, got, size)))
			die("checked transfer: read back", ret);
		for (i = 0; i < size; i++)
			bad += got[i] != want[i];
	}
	if (pd_rdv_allgather(p->rdv, &bad, sizeof(bad), all))
		die("check result", -EIO);
	free(want);
	free(got);
	return all[1];
}

/*
 * Direct (auto: dmabuf or mapped) against bounce on dma-buf memory: both
 * fabrics open side by side, each with its own dma-buf, the two taking
 * turns repeat by repeat (who goes first alternates too), so that load
 * from elsewhere hits both; then one checked message per lane and size.
 */
static int mode_paths(const struct opts *o)
{
	static const enum pd_path paths[2] = { PD_PATH_AUTO, PD_PATH_BOUNCE };
	static const char *const names[2] = { "direct", "bounce" };
	double bw[2][MAX_REPEATS];
	struct dmabuf_source src[2];
	struct pair p[2] = { { 0 } };
	struct pd_mr *mr[2];
	uint64_t wrong_total = 0;
	size_t max = 0;
	pid_t pid;
	int i, k, l, ret;

	for (i = 0; i < o->nsizes; i++)
		max = o->sizes[i] > max ? o->sizes[i] : max;
	pid = fork_pair(&p[0]);
	pair_connect(&p[0], o, paths[0]);
	pair_add_fabric(&p[1], &p[0], o, paths[1]);
	for (l = 0; l < 2; l++) {
		ret = source_open(&src[l], o->memory, max);
		if (ret)
			die_code("memory", ret, TOOL_EX_SETUP);
		ret = source_register(&src[l], p[l].fab, &mr[l]);
		if (ret)
			die("registration", ret);
	}
	if (p[0].rank == 0) {
		printf("# %s\n", cmdline);
		for (l = 0; l < 2; l++)
			printf("# %s: provider %s, memory %s, path %s: %s%s\n", names[l],
			       pd_fabric_provider(p[l].fab), o->memory,
			       pd_path_name(pd_mr_path(mr[l])), pd_mr_reason(mr[l]),
			       src[l].simulated ? " (simulated: RAM, not an accelerator)" : "");
		printf("# MB/s = 10^6 B/s, median and range of %d runs per path, the paths alternating; #wrong: bytes that differ in one checked message per path\n"
		       "%10s %14s %14s %8s %7s %7s   %s\n", o->repeats, "size", "direct MB/s", "bounce MB/s",
		       "ratio", "#wrong", "#wrong", "ranges");
	}
	for (i = 0; i < o->nsizes; i++) {
		size_t s = o->sizes[i];
		double med[2], lo[2], hi[2];
		uint64_t wrong[2];

		for (k = 0; k < o->repeats; k++)
			for (l = 0; l < 2; l++) {
				int lane = (k & 1) ? 1 - l : l;

				bw[lane][k] = run_bw(&p[lane], mr[lane], s, false);
			}
		for (l = 0; l < 2; l++) {
			wrong[l] = check_once(&p[l], &src[l], mr[l], s, (unsigned int)(l * 64 + i));
			wrong_total += wrong[l];
			med[l] = median_d(bw[l], (size_t)o->repeats);	/* sorts */
			lo[l] = bw[l][0];
			hi[l] = bw[l][o->repeats - 1];
		}
		if (p[0].rank == 0)
			printf("%10zu %14.1f %14.1f %7.2fx %7" PRIu64 " %7" PRIu64
			       "   direct %.0f..%.0f bounce %.0f..%.0f\n", s, med[0], med[1],
			       med[0] / med[1], wrong[0], wrong[1], lo[0], hi[0], lo[1], hi[1]);
		fflush(stdout);
	}
	for (l = 0; l < 2; l++) {
		pd_mr_dereg(mr[l]);
		pd_rdv_barrier(p[0].rdv);
		pd_fabric_close(p[l].fab);
		source_close(&src[l]);
	}
	pd_rdv_close(p[0].rdv);
	if (pid == 0)
		exit(wrong_total ? TOOL_EX_DATA : 0);
	ret = finish(pid);
	return wrong_total ? TOOL_EX_DATA : ret;
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
	fab = open_fabric(o, PD_PATH_AUTO);
	if (index >= 0) {
		ret = pd_device_open((unsigned int)index, &dev) ?:
		      pd_device_query(dev, &info) ?:
		      pd_fabric_attach_device(fab, dev);
		if (ret)
			die_code("device", ret, TOOL_EX_SETUP);
	}
	printf("# %s\n# provider %s, memory %s, path auto%s\n", cmdline, pd_fabric_provider(fab),
	       o->memory, dev && info.backend == SRC_BACKEND_SIM ?
	       " (simulated: RAM, not an accelerator)" : "");
	ret = bench_lifecycle(fab, dev, o->sizes, o->nsizes, o->repeats);
	if (ret)
		die("lifecycle", ret);
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
			if (pd_ext_parse_size(optarg, &run_total) || !run_total)
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
