/* SPDX-License-Identifier: MIT */
/*
 * Two-process transport tests: the test forks a peer, each side opens its
 * own fabric (never across fork), addresses travel over a socketpair.
 * Every wait is bounded; a peer that outlives its budget is killed.
 */
#ifndef PD_TEST_PEER_PAIR_H
#define PD_TEST_PEER_PAIR_H

#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>

#include "peerdirect.h"

#define WAIT_MS 20000

struct peer {
	struct pd_fabric *fab;
	uint64_t other;		/* the other process's fabric address */
	int sock;		/* out-of-band channel */
	int rank;		/* 0: the test process, 1: its child */
};

static inline int oob_io(int sock, void *buf, size_t len, bool sending)
{
	struct pollfd p = { .fd = sock, .events = sending ? POLLOUT : POLLIN };
	char *c = buf;

	while (len) {
		ssize_t n;

		if (poll(&p, 1, WAIT_MS) <= 0)
			return -ETIMEDOUT;
		n = sending ? send(sock, c, len, MSG_NOSIGNAL) : recv(sock, c, len, 0);
		if (n <= 0)
			return n == 0 ? -ECONNRESET : -errno;
		c += n;
		len -= (size_t)n;
	}
	return 0;
}

static inline int oob_send(struct peer *p, const void *buf, size_t len)
{
	return oob_io(p->sock, (void *)buf, len, true);
}

static inline int oob_recv(struct peer *p, void *buf, size_t len)
{
	return oob_io(p->sock, buf, len, false);
}

static inline int oob_sync(struct peer *p)
{
	char c = 1;

	return oob_send(p, &c, 1) ?: oob_recv(p, &c, 1);
}

static inline int peer_open(struct peer *p, const char *prov,
			    const struct pd_fabric_attr *attr)
{
	struct pd_fabric_attr a;
	char mine[256], theirs[256];
	size_t len = sizeof(mine);
	uint64_t tlen;
	int ret;

	if (attr)
		a = *attr;
	else
		pd_fabric_attr_init(&a);
	a.provider = prov;
	ret = pd_fabric_open(&a, &p->fab);
	if (ret)
		return ret;
	ret = pd_fabric_addr(p->fab, mine, &len);
	tlen = len;
	if (!ret)
		ret = oob_send(p, &tlen, sizeof(tlen)) ?: oob_send(p, mine, len);
	if (!ret)
		ret = oob_recv(p, &tlen, sizeof(tlen));
	if (!ret && tlen > sizeof(theirs))
		ret = -EPROTO;
	if (!ret)
		ret = oob_recv(p, theirs, tlen) ?: pd_fabric_insert(p->fab, theirs, tlen, &p->other);
	return ret;
}

/* Fills or checks a pattern that differs per byte, per size and per seed. */
static inline unsigned char pattern(size_t i, uint64_t seed)
{
	uint64_t x = (i + 1) * 0x9e3779b97f4a7c15ULL ^ seed;

	return (unsigned char)(x >> 29 ^ x);
}

static inline void fill(void *buf, size_t len, uint64_t seed)
{
	unsigned char *b = buf;
	size_t i;

	for (i = 0; i < len; i++)
		b[i] = pattern(i, seed);
}

/* A memfd of len bytes filled with seed's pattern (-1 on failure). */
static inline int memfd_of(size_t len, uint64_t seed)
{
	int fd = memfd_create("pd-test-dmabuf", MFD_CLOEXEC);
	char *p;

	if (fd < 0)
		return -1;
	p = ftruncate(fd, (off_t)len) ? MAP_FAILED :
	    mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		close(fd);
		return -1;
	}
	fill(p, len, seed);
	munmap(p, len);
	return fd;
}

/* Index of the first wrong byte, or -1. */
static inline long check(const void *buf, size_t len, uint64_t seed)
{
	const unsigned char *b = buf;
	size_t i;

	for (i = 0; i < len; i++) {
		if (b[i] != pattern(i, seed))
			return (long)i;
	}
	return -1;
}

typedef int (*peer_fn)(struct peer *p, void *arg);

/*
 * Runs fn in this process (rank 0) and in a forked child (rank 1), each
 * after opening a fabric on prov.  Returns 0 when both returned 0; the
 * child's failure is reported as its exit status.
 */
static inline int run_pair(const char *prov, const struct pd_fabric_attr *attr,
			   peer_fn fn, void *arg, int *child_status)
{
	struct peer p = { 0 };
	int sv[2], ret, status = 0, waited_ms = 0;
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		return -errno;
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		return -errno;
	p.rank = pid == 0;
	p.sock = sv[p.rank];
	close(sv[!p.rank]);
	ret = peer_open(&p, prov, attr);
	if (ret)
		fprintf(stderr, "# rank %d: open %s: %s\n", p.rank, prov, pd_last_error());
	else
		ret = fn(&p, arg);
	if (ret && ret != -ECANCELED)
		fprintf(stderr, "# rank %d failed: %d (%s): %s\n", p.rank, ret, pd_strerror(ret),
			pd_last_error());
	pd_fabric_close(p.fab);
	close(p.sock);
	if (pid == 0)
		_exit(ret ? 1 : 0);
	while (waitpid(pid, &status, WNOHANG) == 0) {
		if (waited_ms > WAIT_MS) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			break;
		}
		usleep(10000);
		waited_ms += 10;
	}
	*child_status = status;
	if (ret)
		return ret;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -ECHILD;
}

static inline int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

#endif
