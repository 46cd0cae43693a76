/* SPDX-License-Identifier: MIT */
/*
 * test_net_plugin's two processes: a forked peer, the handle over a
 * socketpair, both sides dlopen()ing the plugin after the fork, every wait
 * bounded; and the data pattern, buffers and memfd stand-ins the sides use.
 */
#ifndef PD_TEST_NET_PLUGIN_PAIR_H
#define PD_TEST_NET_PLUGIN_PAIR_H

#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "net_plugin_driver.h"

#define MiB (1024 * 1024)

struct pair {
	struct net n;
	int sock;
	int rank;		/* 0 receives (listen, accept), 1 sends (connect) */
	void *lcomm, *comm;	/* comm: the recv comm on 0, the send comm on 1 */
};

static inline int sock_io(int s, void *buf, size_t len, bool out)
{
	char *c = buf;

	while (len) {
		ssize_t k = out ? send(s, c, len, MSG_NOSIGNAL) : recv(s, c, len, 0);

		if (k <= 0)
			return -EPIPE;
		c += k;
		len -= (size_t)k;
	}
	return 0;
}

static inline int sync_pair(struct pair *p)
{
	char c = 0;

	return sock_io(p->sock, &c, 1, true) ?: sock_io(p->sock, &c, 1, false);
}

static inline unsigned char pattern(size_t i, uint64_t seed)
{
	uint64_t x = (i + 1) * 0x9e3779b97f4a7c15ULL ^ (seed * 0xff51afd7ed558ccdULL);

	return (unsigned char)(x >> 29 ^ x);
}

static inline void fill(unsigned char *b, size_t len, uint64_t seed)
{
	for (size_t i = 0; i < len; i++)
		b[i] = pattern(i, seed);
}

/* 0, or the index of the first wrong byte plus one. */
static inline size_t check(const unsigned char *b, size_t len, uint64_t seed)
{
	for (size_t i = 0; i < len; i++)
		if (b[i] != pattern(i, seed))
			return i + 1;
	return 0;
}

static inline void *map(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

/* A memfd standing in for a dma-buf (libpeerdirect registers it as one). */
static inline void *memfd_map(size_t len, int *fd)
{
	void *p;

	*fd = memfd_create("pd-net-test", MFD_CLOEXEC);
	if (*fd < 0 || ftruncate(*fd, (off_t)len))
		return NULL;
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, *fd, 0);
	return p == MAP_FAILED ? NULL : p;
}

/* The cache hits the plugin's last registration line of what reported
 * (they are the device's so far), or -1 without one. */
static inline long long logged_hits(const char *what)
{
	const char *line = NULL, *at = logbuf, *c;
	long long hits;

	while ((at = strstr(at, what)))
		line = at++;
	if (!line || !(c = strstr(line, "; cache ")) || sscanf(c, "; cache %lld hits", &hits) != 1)
		return -1;
	return hits;
}

#define FAIL(...) do { fprintf(stderr, "# rank %d: ", p->rank); \
	fprintf(stderr, __VA_ARGS__); fprintf(stderr, " (line %d)\n", __LINE__); \
	return -1; } while (0)

/* The device both sides listen and connect on. */
static int pair_dev;

static inline int pair_connect(struct pair *p, int ver)
{
	char handle[NCCL_NET_HANDLE_MAXSIZE];
	int ndev = 0;
	ncclResult_t r;

	if (net_open(&p->n, ver))
		FAIL("no ncclNetPlugin_v%d", ver);
	p->n.dev = pair_dev;
	if ((r = net_init(&p->n)) || (r = NET(&p->n, devices, &ndev)) || ndev < 1)
		FAIL("init: %d, %d devices", r, ndev);
	if (p->rank == 0) {
		if ((r = net_listen(&p->n, handle, &p->lcomm)) || !p->lcomm)
			FAIL("listen: %d", r);
		if (sock_io(p->sock, handle, sizeof(handle), true))
			FAIL("handing the handle over");
		if ((r = net_accept(&p->n, p->lcomm, &p->comm)))
			FAIL("accept: %d", r);
	} else {
		if (sock_io(p->sock, handle, sizeof(handle), false))
			FAIL("taking the handle");
		if ((r = net_connect(&p->n, handle, &p->comm)))
			FAIL("connect: %d", r);
	}
	return 0;
}

static inline void pair_close(struct pair *p)
{
	if (p->comm)
		p->rank ? NET(&p->n, closeSend, p->comm) : NET(&p->n, closeRecv, p->comm);
	if (p->lcomm)
		NET(&p->n, closeListen, p->lcomm);
	if (p->n.dl)
		net_close(&p->n);
}

typedef int (*side_fn)(struct pair *p, void *arg);

struct killarg {
	pid_t pid;		/* the child, filled in by run_pair */
	int dies;		/* the child is killed on purpose */
	long long ms;		/* how long the survivor took to fail */
};

/*
 * Forks the sender (the receiver with recv_in_child); both dlopen the
 * plugin after the fork (libfabric is never carried across one).  Returns
 * 0 when both sides returned 0.  A side that kills the child finds its pid
 * in struct killarg, and the child's death is then no failure.
 */
static inline int run_pair_as(const int *vers, int nvers, side_fn recv_fn, side_fn send_fn, void *arg,
		       bool recv_in_child)
{
	struct pair p = { 0 };
	int sv[2], ret = 0, status = 0, i;
	long long end;
	void *hold;
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		return -errno;
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		return -errno;
	p.rank = (pid == 0) ^ recv_in_child;
	p.sock = sv[pid == 0];
	close(sv[pid != 0]);
	if (arg && pid)
		((struct killarg *)arg)->pid = pid;
	/* One load for every version: each table is driven from init to its
	 * closes on the same plugin, and libfabric starts once per process
	 * (over a second under TSan). */
	hold = dlopen(net_plugin_path(), RTLD_NOW | RTLD_LOCAL);
	for (i = 0; !ret && i < nvers; i++) {
		memset(&p.n, 0, sizeof(p.n));
		p.lcomm = p.comm = NULL;
		ret = pair_connect(&p, vers[i]);
		if (!ret)
			ret = p.rank ? send_fn(&p, arg) : recv_fn(&p, arg);
		if (ret)
			fprintf(stderr, "# rank %d failed on ncclNetPlugin_v%d\n", p.rank, vers[i]);
		pair_close(&p);
	}
	if (hold)
		dlclose(hold);
	close(p.sock);
	if (pid == 0)
		_exit(ret ? 1 : 0);
	end = now_ms() + LOOP_MS;
	while (waitpid(pid, &status, WNOHANG) == 0) {
		if (now_ms() > end) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			fprintf(stderr, "# the other side did not finish: killed\n");
			return -ETIMEDOUT;
		}
		usleep(5000);
	}
	if (ret)
		return ret;
	if (arg && ((struct killarg *)arg)->dies)
		return 0;
	return WIFEXITED(status) && !WEXITSTATUS(status) ? 0 : -ECHILD;
}

static inline int run_pair(int ver, side_fn recv_fn, side_fn send_fn, void *arg)
{
	return run_pair_as(&ver, 1, recv_fn, send_fn, arg, false);
}

#endif
