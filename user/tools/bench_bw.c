// SPDX-License-Identifier: MIT
/*
 * pd-bench bw and paths: two processes (rank 1 forked) over the TCP
 * rendezvous.  bw: tagged send/recv on host memory through the shim and
 * through a raw libfabric loop on the same endpoint and registration.
 * paths: dma-buf memory on the direct path against bounce, every byte
 * checked.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include "bench.h"
#include "bench_report.h"
#include "dmabuf_source.h"
#include "listen_port.h"
#include "tool_cli.h"
#include "peerdirect_ext.h"


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
		bench_die("rendezvous", ret);
	p->fab = bench_open_fabric(o, path);
	ret = pd_fabric_addr(p->fab, mine, &len) ?: pd_rdv_allgather(p->rdv, mine, sizeof(mine), all) ?:
	      pd_fabric_insert(p->fab, all[!p->rank], len, &p->peer);
	if (ret)
		bench_die("address exchange", ret);
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
size_t bench_run_total = (size_t)512 << 20;

static int rounds_for(size_t size)
{
	size_t total = bench_run_total, per = size * (size_t)window_for(size);

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
		bench_die(raw ? "raw loop" : "shim loop", ret);
	if (pd_rdv_allgather(p->rdv, &ack, 1, acks))
		bench_die("ack", -EIO);
	return (double)size * w * rounds / ((double)(now_ns() - t0) / 1e9) / 1e6;
}

static pid_t fork_pair(struct pair *p)
{
	pid_t pid;

	fflush(NULL);
	pid = fork();
	if (pid < 0)
		bench_die("fork", -errno);
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

int mode_bw(const struct opts *o)
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
		bench_die("fabric", -EINVAL);
	buf = mmap(NULL, max, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (buf == MAP_FAILED || pd_mr_reg_host(p.fab, buf, max, 0, &mr))
		bench_die("buffer", -ENOMEM);
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
		shim = bench_median_d(shims, (size_t)n);
		raw = bench_median_d(raws, (size_t)n);

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
	p->fab = bench_open_fabric(o, path);
	ret = pd_fabric_addr(p->fab, mine, &len) ?: pd_rdv_allgather(p->rdv, mine, sizeof(mine), all) ?:
	      pd_fabric_insert(p->fab, all[!p->rank], len, &p->peer);
	if (ret)
		bench_die("address exchange", ret);
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
		bench_die("memory", -ENOMEM);
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
		bench_die("checked transfer", ret);
	if (p->rank == 1) {
		if ((ret = source_read(src, got, size)))
			bench_die("checked transfer: read back", ret);
		for (i = 0; i < size; i++)
			bad += got[i] != want[i];
	}
	if (pd_rdv_allgather(p->rdv, &bad, sizeof(bad), all))
		bench_die("check result", -EIO);
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
int mode_paths(const struct opts *o)
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
			bench_die_code("memory", ret, TOOL_EX_SETUP);
		ret = source_register(&src[l], p[l].fab, &mr[l]);
		if (ret)
			bench_die("registration", ret);
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
			med[l] = bench_median_d(bw[l], (size_t)o->repeats);	/* sorts */
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
