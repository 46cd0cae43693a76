// SPDX-License-Identifier: MIT
/*
 * pd-bench latency and msgrate.
 *
 * latency: rank 0 sends size bytes, rank 1 answers with as many; every
 * round trip is timed on rank 0 and one-way latency is half of it.  Each
 * repeat of the shim's loop is followed by one run of fi_pingpong (server
 * and client both started by rank 0 while rank 1 sleeps in the
 * rendezvous) on the provider the shim's fabric got, so load from other
 * jobs on the machine falls on both alike.  fi_pingpong prints only its
 * mean per run (usec/xfer: elapsed / iterations / 2), so the ratio is
 * taken between means: the median over the repeats of each side's mean.
 *
 * msgrate: rank 0 posts a window of sends back to back and then waits for
 * them all; rank 1 posts the next window's receives before it acks the
 * last one, so no message arrives unexpected.
 *
 * Only the public API is used: what is measured is what a runtime gets.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "peerdirect.h"
#include "bench_latency.h"
#include "bench_report.h"

#define WAIT_MS		60000	/* one transfer; longer is a dead peer */
#define PP_RUN_MS	60000	/* one fi_pingpong run, then it is killed */
#define RDV_MS		(PP_RUN_MS + 60000)	/* rank 1 sleeps through one */
#define TAG_DATA	1
#define TAG_BACK	2

struct lpair {
	int rank;
	pid_t child;		/* rank 0: rank 1's pid */
	struct pd_rdv *rdv;
	struct pd_fabric *fab;
	struct pd_mr *mr;
	char *buf;		/* sends from the first half, receives into the second */
	size_t half;
	uint64_t peer;
};

/* Exit codes as pd-bench's (tool_cli.h): what could not be set up, 3. */
static void fail_code(const char *what, int ret, int code)
{
	fprintf(stderr, "pd-bench: %s: %s (%s)\n", what, pd_last_error(), pd_strerror(ret));
	exit(ret == -EPERM || ret == -EACCES ? 4 : code);
}

static void fail(const char *what, int ret)
{
	fail_code(what, ret, 1);
}

static void pin(int cpu)
{
	cpu_set_t set;

	if (cpu < 0)
		return;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set)) {
		fprintf(stderr, "pd-bench: --cpus: CPU %d: %s\n", cpu, strerror(errno));
		_exit(1);
	}
}

/* Forks rank 1, connects the two and registers 2 * max bytes of host
 * memory on each. */
static void lp_open(struct lpair *p, const struct lat_opts *o, size_t max)
{
	char mine[256] = { 0 }, all[2][256];
	struct pd_fabric_attr attr;
	size_t alen = sizeof(mine);
	int ret;

	fflush(NULL);
	p->child = fork();
	if (p->child < 0)
		fail("fork", -errno);
	p->rank = p->child == 0;
	pin(o->cpus[p->rank]);
	ret = pd_rdv_open("127.0.0.1", o->port, p->rank, 2, RDV_MS, &p->rdv);
	if (ret)
		fail("rendezvous", ret);
	pd_fabric_attr_init(&attr);
	attr.provider = o->provider;
	ret = pd_fabric_open(&attr, &p->fab);
	if (ret)
		fail_code("fabric", ret, 3);
	ret = pd_fabric_addr(p->fab, mine, &alen) ?:
	      pd_rdv_allgather(p->rdv, mine, sizeof(mine), all) ?:
	      pd_fabric_insert(p->fab, all[!p->rank], alen, &p->peer);
	if (ret)
		fail("address exchange", ret);
	p->half = max;
	p->buf = mmap(NULL, 2 * max, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p->buf == MAP_FAILED)
		fail("buffer", -errno);
	memset(p->buf, 5, 2 * max);
	ret = pd_mr_reg_host(p->fab, p->buf, 2 * max, PD_ACCESS_SEND | PD_ACCESS_RECV, &p->mr);
	if (ret)
		fail("registration", ret);
}

static int lp_close(struct lpair *p)
{
	int status = 0;

	pd_rdv_barrier(p->rdv);
	pd_mr_dereg(p->mr);
	pd_fabric_close(p->fab);
	pd_rdv_close(p->rdv);
	munmap(p->buf, 2 * p->half);
	if (p->rank)
		exit(0);
	waitpid(p->child, &status, 0);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

static void barrier(struct lpair *p)
{
	int ret = pd_rdv_barrier(p->rdv);

	if (ret)
		fail("barrier", ret);
}

static struct pd_req *post(struct lpair *p, bool send, size_t len, uint64_t tag)
{
	struct pd_req *r;
	int ret;

	ret = send ? pd_tsend(p->fab, p->mr, 0, len, p->peer, tag, &r) :
		     pd_trecv(p->fab, p->mr, p->half, len, p->peer, tag, &r);
	if (ret)
		fail(send ? "send" : "receive", ret);
	return r;
}

static void finish(struct pd_req *r, const char *what)
{
	int ret = pd_wait(r, WAIT_MS, NULL);

	pd_req_free(r);
	if (ret)
		fail(what, ret);
}

/* ---- latency ------------------------------------------------------------ */

/*
 * n round trips of len bytes.  Rank 0 posts the answer's receive before
 * its send (as fi_pingpong does) and stores each round trip's ns in rtt
 * (NULL: warm-up); rank 1 posts the next receive before it answers.
 */
static void pingpong(struct lpair *p, size_t len, int n, uint32_t *rtt)
{
	struct pd_req *rx = NULL, *tx;
	uint64_t t = now_ns(), t1;
	int i;

	if (p->rank)
		rx = post(p, false, len, TAG_DATA);
	for (i = 0; i < n; i++) {
		if (p->rank == 0) {
			rx = post(p, false, len, TAG_BACK);
			tx = post(p, true, len, TAG_DATA);
			finish(tx, "send");
			finish(rx, "receive");
			t1 = now_ns();
			if (rtt)
				rtt[i] = t1 - t > UINT32_MAX ? UINT32_MAX : (uint32_t)(t1 - t);
			t = t1;
			continue;
		}
		finish(rx, "receive");
		if (i + 1 < n)
			rx = post(p, false, len, TAG_DATA);
		tx = post(p, true, len, TAG_BACK);
		finish(tx, "send");
	}
}

/* fi_pingpong's figure for one size, or why there is none. */
struct pp_run {
	const char *prog;	/* PD_BENCH_FI_PINGPONG, else fi_pingpong from PATH */
	char prov[64];		/* the shim's fabric's provider, e.g. tcp;ofi_rxm */
	char iters[16], size[24], port[8];
	int cpus[2];
	bool gone;		/* could not be started at all: not tried again */
	char why[200];
};

/* argv[0] with stdout and stderr into a pipe; *fd is its read end. */
static pid_t spawn(char *const argv[], int cpu, int *fd)
{
	char msg[256];
	int fds[2], len;
	pid_t pid;

	if (pipe2(fds, O_CLOEXEC))
		return -1;
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		dup2(fds[1], 1);
		dup2(fds[1], 2);
		pin(cpu);
		execvp(argv[0], argv);
		/* No stdio here: a lock held by another thread at fork stays held. */
		len = snprintf(msg, sizeof(msg), "cannot run %s: %s\n", argv[0], strerror(errno));
		if (write(1, msg, len > 0 && (size_t)len < sizeof(msg) ? (size_t)len : 0) < 0)
			_exit(126);
		_exit(127);
	}
	close(fds[1]);
	if (pid < 0)
		close(fds[0]);
	*fd = fds[0];
	return pid;
}

/* Reads fd to its end, keeping what fits in out; false past deadline. */
static bool drain(int fd, char *out, size_t cap, uint64_t deadline)
{
	size_t got = 0;
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	char sink[512];
	ssize_t n;

	out[0] = '\0';
	for (;;) {
		uint64_t now = now_ns();

		if (now >= deadline)
			return false;
		if (poll(&pfd, 1, (int)((deadline - now) / 1000000) + 1) < 0 && errno != EINTR)
			return false;
		n = got + 1 < cap ? read(fd, out + got, cap - 1 - got) : read(fd, sink, sizeof(sink));
		if (n == 0)
			return true;
		if (n < 0 && errno != EINTR && errno != EAGAIN)
			return false;
		if (n > 0 && got + 1 < cap) {
			got += (size_t)n;
			out[got] = '\0';
		}
	}
}

/* The exit status, after killing the process if it is still running at
 * deadline (-1 then). */
static int reap(pid_t pid, uint64_t deadline)
{
	int status;

	while (waitpid(pid, &status, WNOHANG) == 0) {
		if (now_ns() >= deadline) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			return -1;
		}
		usleep(2000);
	}
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void last_line(const char *out, char *why, size_t len, const char *who)
{
	const char *end = out + strlen(out), *start;

	while (end > out && (end[-1] == '\n' || end[-1] == ' '))
		end--;
	for (start = end; start > out && start[-1] != '\n'; start--)
		;
	snprintf(why, len, "%s: %.*s", who, (int)(end - start), start);
}

/* usec/xfer of the row under fi_pingpong's header, found by name. */
static bool parse_usec(const char *out, double *usec)
{
	const char *hdr = strstr(out, "usec/xfer"), *line, *row;
	int col = 0, i;
	char *end;

	if (!hdr)
		return false;
	for (line = hdr; line > out && line[-1] != '\n'; line--)
		;
	for (i = 0; line + i < hdr; i++)	/* columns before it */
		if (line[i] != ' ' && line[i] != '\t' && (i == 0 || line[i - 1] == ' ' || line[i - 1] == '\t'))
			col++;
	row = strchr(hdr, '\n');
	if (!row)
		return false;
	row++;
	for (i = 0; i <= col; i++) {
		row += strspn(row, " \t");
		if (!*row || *row == '\n')
			return false;
		if (i < col)
			row += strcspn(row, " \t\n");
	}
	*usec = strtod(row, &end);
	return end != row && *usec > 0;
}

/* One client/server run on 127.0.0.1; its usec/xfer, or -1 and why. */
static double pp_once(struct pp_run *r)
{
	char *srv[] = { (char *)r->prog, "-p", r->prov, "-e", "rdm", "-m", "tagged", "-I", r->iters,
			"-S", r->size, "-B", r->port, NULL };
	char *cli[] = { (char *)r->prog, "-p", r->prov, "-e", "rdm", "-m", "tagged", "-I", r->iters,
			"-S", r->size, "-P", r->port, "127.0.0.1", NULL };
	uint64_t deadline = now_ns() + (uint64_t)PP_RUN_MS * 1000000, grace;
	char cout[4096] = "", sout[4096] = "";
	int sfd, cfd, cst = -1, sst = -2, raw, tries;
	double usec = -1;
	pid_t s, c = -1;

	s = spawn(srv, r->cpus[1], &sfd);
	if (s < 0) {
		snprintf(r->why, sizeof(r->why), "fork: %s", strerror(errno));
		return -1;
	}
	/* The client cannot know when the server listens: it is started
	 * again while it is refused and the server still runs. */
	for (tries = 0; tries < 500; tries++) {
		c = spawn(cli, r->cpus[0], &cfd);
		if (c < 0)
			break;
		drain(cfd, cout, sizeof(cout), deadline);
		close(cfd);
		cst = reap(c, deadline);
		if (cst == 0 || now_ns() >= deadline ||
		    (!strstr(cout, "failed to connect") && !strstr(cout, "Connection refused")))
			break;
		if (waitpid(s, &raw, WNOHANG) == s) {
			sst = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
			break;
		}
		usleep(10000);
	}
	/* A server whose client finished ends on its own; one still waiting
	 * for a client that failed is killed. */
	grace = cst == 0 || sst != -2 ? 5000000000ULL : 200000000ULL;
	drain(sfd, sout, sizeof(sout), now_ns() + grace);
	close(sfd);
	if (sst == -2)
		sst = reap(s, now_ns() + (cst == 0 ? grace : 0));
	if (cst == 127 || sst == 127) {
		last_line(cst == 127 ? cout : sout, r->why, sizeof(r->why), cst == 127 ? "client" : "server");
		r->gone = true;
	} else if (c < 0) {
		snprintf(r->why, sizeof(r->why), "fork: %s", strerror(errno));
	} else if (cst != 0 && now_ns() >= deadline) {
		snprintf(r->why, sizeof(r->why), "no result within %d s: killed", PP_RUN_MS / 1000);
	} else if (cst != 0) {
		/* A server that failed on its own says more than its client. */
		last_line(sst > 0 ? sout : cout, r->why, sizeof(r->why), sst > 0 ? "server" : "client");
	} else if (sst != 0) {
		last_line(sout, r->why, sizeof(r->why), sst < 0 ? "server killed" : "server");
	} else if (!parse_usec(cout, &usec)) {
		last_line(cout, r->why, sizeof(r->why), "no usec/xfer in its output");
		usec = -1;
	}
	return usec;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

static int cmp_dbl(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median_of(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_dbl);
	return v[n / 2];
}

static size_t largest(const struct lat_opts *o)
{
	size_t max = 1;
	int i;

	for (i = 0; i < o->nsizes; i++)
		max = o->sizes[i] > max ? o->sizes[i] : max;
	return max;
}

/* The provider string as a shell word, so the printed command runs as is. */
static const char *quoted(const char *s, char *buf, size_t len)
{
	if (!s[strcspn(s, ";&|<>()$`\\\"' \t")])
		return s;
	snprintf(buf, len, "'%s'", s);
	return buf;
}

int bench_latency(const struct lat_opts *o)
{
	size_t n = (size_t)o->iters, all = n * (size_t)o->repeats;
	double mean[LAT_MAX_REPEATS], ppv[LAT_MAX_REPEATS], ppm, avg;
	struct pp_run pp = { .cpus = { o->cpus[0], o->cpus[1] } };
	uint32_t *rtt = NULL;
	struct lpair p = { 0 };
	bool said = false;
	char q[80];
	int i, k, npp;

	lp_open(&p, o, largest(o));
	if (p.rank == 0) {
		rtt = malloc(all * sizeof(*rtt));
		if (!rtt)
			fail("memory", -ENOMEM);
		pp.prog = getenv("PD_BENCH_FI_PINGPONG");
		if (!pp.prog || !*pp.prog)
			pp.prog = "fi_pingpong";
		snprintf(pp.prov, sizeof(pp.prov), "%s", pd_fabric_provider(p.fab));
		snprintf(pp.iters, sizeof(pp.iters), "%d", o->iters);
		snprintf(pp.port, sizeof(pp.port), "%u", o->port == 65535 ? 65534u : o->port + 1u);
		printf("# %s\n# provider %s, host memory, tagged messages; one-way latency = round trip / 2, in us;"
		       " %d repeats of %d round trips per size, each followed by one fi_pingpong run\n"
		       "# pd-bench: median, min and p99 of every round trip; avg = median over the repeats of each one's mean\n"
		       "# fi_pingpong: avg = median over the repeats of its usec/xfer (a mean); pd/fi = pd avg / fi_pingpong avg\n"
		       "# fi_pingpong times its start-up (connection, first messages) with its loop, pd-bench warms up first:"
		       " more --iters shrink that share\n"
		       "# fi_pingpong server: %s -p %s -e rdm -m tagged -I %d -S <size> -B %s\n"
		       "# fi_pingpong client: %s -p %s -e rdm -m tagged -I %d -S <size> -P %s 127.0.0.1\n",
		       o->cmdline, pp.prov, o->repeats, o->iters, pp.prog, quoted(pp.prov, q, sizeof(q)),
		       o->iters, pp.port, pp.prog, quoted(pp.prov, q, sizeof(q)), o->iters, pp.port);
		if (o->cpus[0] >= 0)
			printf("# rank 0 and the fi_pingpong client on CPU %d, rank 1 and the server on CPU %d\n",
			       o->cpus[0], o->cpus[1]);
		printf("%10s %9s %9s %9s %9s %12s %8s\n", "size", "med us", "min us", "p99 us", "avg us",
		       "fi_pp avg us", "pd/fi");
		fflush(stdout);
	}
	for (i = 0; i < o->nsizes; i++) {
		size_t s = o->sizes[i];

		pingpong(&p, s, o->iters < 100 ? o->iters : 100, NULL);	/* warm-up */
		snprintf(pp.size, sizeof(pp.size), "%zu", s);
		if (!pp.gone)
			pp.why[0] = '\0';
		for (k = npp = 0; k < o->repeats; k++) {
			uint64_t sum = 0;
			size_t j;

			/* Rank 1 sleeps here while rank 0 runs fi_pingpong. */
			barrier(&p);
			pingpong(&p, s, o->iters, rtt ? rtt + (size_t)k * n : NULL);
			if (p.rank)
				continue;
			for (j = 0; j < n; j++)
				sum += rtt[(size_t)k * n + j];
			mean[k] = (double)sum / (double)n / 2e3;
			/* A failed run is not repeated: it may have waited its
			 * whole deadline. */
			if (!pp.why[0] && (ppv[npp] = pp_once(&pp)) > 0)
				npp++;
		}
		if (p.rank)
			continue;
		if (pp.why[0] && !said) {
			if (pp.gone)
				printf("# fi_pingpong: not available (%s)\n", pp.why);
			else
				printf("# fi_pingpong: not available for size %zu (%s)\n", s, pp.why);
			said = pp.gone;
		}
		qsort(rtt, all, sizeof(*rtt), cmp_u32);
		avg = median_of(mean, o->repeats);
		printf("%10zu %9.2f %9.2f %9.2f %9.2f", s, rtt[all / 2] / 2e3, rtt[0] / 2e3,
		       rtt[all * 99 / 100] / 2e3, avg);
		if (npp == o->repeats) {
			ppm = median_of(ppv, npp);
			/* Three significant digits: libfabric 2.1's fi_pingpong
			 * over shm takes about 1 ms, and a ratio of 0.002
			 * printed as "0.00x" said nothing (and read as 0). */
			printf(" %12.2f %7.3gx\n", ppm, avg / ppm);
		} else {
			printf(" %12s %8s\n", "-", "-");
		}
		fflush(stdout);
	}
	free(rtt);
	return lp_close(&p);
}

/* ---- message rate -------------------------------------------------------- */

/* n windows of w messages of len bytes; messages per second on rank 0,
 * from its first send to the ack of the last window. */
static double window_run(struct lpair *p, size_t len, int w, int n, struct pd_req **req)
{
	struct pd_req **cur = req, **next = req + w, **swap, *ack;
	uint64_t t0;
	int i, j;

	if (p->rank == 0) {
		/* The first ack says rank 1's receives are posted. */
		finish(post(p, false, 1, TAG_BACK), "ack");
		t0 = now_ns();
		for (i = 0; i < n; i++) {
			ack = post(p, false, 1, TAG_BACK);
			for (j = 0; j < w; j++)
				cur[j] = post(p, true, len, TAG_DATA);
			for (j = 0; j < w; j++)
				finish(cur[j], "send");
			finish(ack, "ack");
		}
		return (double)w * n / ((double)(now_ns() - t0) / 1e9);
	}
	for (j = 0; j < w; j++)
		cur[j] = post(p, false, len, TAG_DATA);
	finish(post(p, true, 1, TAG_BACK), "ack");
	for (i = 0; i < n; i++) {
		for (j = 0; j < w; j++)
			finish(cur[j], "receive");
		for (j = 0; i + 1 < n && j < w; j++)
			next[j] = post(p, false, len, TAG_DATA);
		swap = cur, cur = next, next = swap;
		finish(post(p, true, 1, TAG_BACK), "ack");
	}
	return 0;
}

int bench_msgrate(const struct lat_opts *o)
{
	struct pd_req **req = calloc(2 * (size_t)o->window, sizeof(*req));
	double rate[LAT_MAX_REPEATS];
	struct lpair p = { 0 };
	int i, k;

	if (!req)
		fail("memory", -ENOMEM);
	lp_open(&p, o, largest(o));
	if (p.rank == 0) {
		printf("# %s\n# provider %s, host memory, tagged messages; rank 0 posts %d sends back to back and waits for them all,"
		       " rank 1 has their receives posted and acks each window;\n"
		       "# messages per second on rank 0, median and range of %d repeats of %d windows per size\n"
		       "# no libfabric reference for message rate: fi_pingpong's Mxfers/sec is the inverse of its"
		       " ping-pong latency, not a windowed rate, and libfabric-bin has no other benchmark\n",
		       o->cmdline, pd_fabric_provider(p.fab), o->window, o->repeats, o->iters);
		if (o->cpus[0] >= 0)
			printf("# rank 0 on CPU %d, rank 1 on CPU %d\n", o->cpus[0], o->cpus[1]);
		printf("%10s %7s %7s %12s   %s\n", "size", "window", "iters", "msg/s", "range");
		fflush(stdout);
	}
	for (i = 0; i < o->nsizes; i++) {
		size_t s = o->sizes[i];

		window_run(&p, s, o->window, o->iters < 10 ? o->iters : 10, req);	/* warm-up */
		for (k = 0; k < o->repeats; k++) {
			barrier(&p);
			rate[k] = window_run(&p, s, o->window, o->iters, req);
		}
		if (p.rank)
			continue;
		qsort(rate, (size_t)o->repeats, sizeof(rate[0]), cmp_dbl);
		printf("%10zu %7d %7d %12.0f   %.0f..%.0f\n", s, o->window, o->iters,
		       rate[o->repeats / 2], rate[0], rate[o->repeats - 1]);
		fflush(stdout);
	}
	free(req);
	return lp_close(&p);
}
