// SPDX-License-Identifier: MIT
/*
 * A star-shaped TCP rendezvous for tools and tests: rank 0 listens, every
 * other rank connects, and allgather goes through rank 0.  Runtimes bring
 * their own out-of-band channel and use pd_fabric_addr/insert instead.
 * Every socket operation is bounded by the timeout given at open, so a dead
 * rank turns into an error, never a hang.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "peerdirect.h"
#include "errors.h"

struct pd_rdv {
	int rank, size, timeout_ms;
	int fds[];		/* rank 0: one per peer; others: fds[0] to rank 0 */
};

static int io_all(int fd, void *buf, size_t len, bool sending, int timeout_ms)
{
	struct pollfd p = { .fd = fd, .events = sending ? POLLOUT : POLLIN };
	char *c = buf;
	ssize_t n;

	while (len) {
		int ret = poll(&p, 1, timeout_ms);

		if (ret == 0)
			return pd_error(-ETIMEDOUT, "rendezvous: peer silent for %d ms", timeout_ms);
		if (ret < 0 && errno != EINTR)
			return pd_error(-errno, "rendezvous: poll: %s", strerror(errno));
		if (ret < 0)
			continue;
		n = sending ? send(fd, c, len, MSG_NOSIGNAL) : recv(fd, c, len, 0);
		if (n == 0)
			return pd_error(-ECONNRESET, "rendezvous: peer closed the connection");
		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			return pd_error(-errno, "rendezvous: %s: %s", sending ? "send" : "recv",
					strerror(errno));
		}
		c += n;
		len -= (size_t)n;
	}
	return 0;
}

static int resolve(const char *host, uint16_t port, struct sockaddr_in *sa)
{
	struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM };
	struct addrinfo *res;
	int ret = getaddrinfo(host, NULL, &hints, &res);

	if (ret)
		return pd_error(-EHOSTUNREACH, "rendezvous: %s: %s", host, gai_strerror(ret));
	*sa = *(struct sockaddr_in *)res->ai_addr;
	sa->sin_port = htons(port);
	freeaddrinfo(res);
	return 0;
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Small request/reply messages: Nagle would add tens of ms to each. */
static void no_delay(int fd)
{
	int one = 1;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

static int accept_peers(struct pd_rdv *r, const struct sockaddr_in *sa)
{
	int one = 1, lfd, i, ret = 0;
	int64_t deadline = now_ms() + r->timeout_ms;

	lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (lfd < 0)
		return pd_error(-errno, "rendezvous: socket: %s", strerror(errno));
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(lfd, (const struct sockaddr *)sa, sizeof(*sa)) || listen(lfd, r->size)) {
		ret = pd_error(-errno, "rendezvous: listen on port %u: %s", ntohs(sa->sin_port),
			       strerror(errno));
		goto out;
	}
	for (i = 1; i < r->size && !ret; i++) {
		struct pollfd p = { .fd = lfd, .events = POLLIN };
		int64_t left = deadline - now_ms();
		uint32_t rank;
		int fd;

		if (left <= 0 || poll(&p, 1, (int)left) <= 0) {
			ret = pd_error(-ETIMEDOUT, "rendezvous: only %d of %d ranks joined within %d ms",
				       i, r->size, r->timeout_ms);
			break;
		}
		fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0) {
			ret = pd_error(-errno, "rendezvous: accept: %s", strerror(errno));
			break;
		}
		ret = io_all(fd, &rank, sizeof(rank), false, r->timeout_ms);
		if (!ret && (rank == 0 || rank >= (uint32_t)r->size || r->fds[rank] >= 0))
			ret = pd_error(-EPROTO, "rendezvous: bad or duplicate rank %u", rank);
		if (ret) {
			close(fd);
			break;
		}
		no_delay(fd);
		r->fds[rank] = fd;
	}
out:
	close(lfd);
	return ret;
}

static int connect_root(struct pd_rdv *r, const struct sockaddr_in *sa)
{
	int64_t deadline = now_ms() + r->timeout_ms;
	uint32_t rank = (uint32_t)r->rank;
	int fd;

	/* Rank 0 may not listen yet: retry until the deadline. */
	for (;;) {
		fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0)
			return pd_error(-errno, "rendezvous: socket: %s", strerror(errno));
		if (!connect(fd, (const struct sockaddr *)sa, sizeof(*sa)))
			break;
		close(fd);
		if (now_ms() >= deadline)
			return pd_error(-ETIMEDOUT, "rendezvous: rank 0 at port %u unreachable for %d ms",
					ntohs(sa->sin_port), r->timeout_ms);
		usleep(20000);
	}
	no_delay(fd);
	r->fds[0] = fd;
	return io_all(fd, &rank, sizeof(rank), true, r->timeout_ms);
}

int pd_rdv_open(const char *host, uint16_t port, int rank, int size,
		int timeout_ms, struct pd_rdv **out)
{
	struct sockaddr_in sa;
	struct pd_rdv *r;
	int i, ret;

	if (!host || !out || size < 1 || rank < 0 || rank >= size || timeout_ms <= 0 || !port)
		return pd_error(-EINVAL, "pd_rdv_open: need host, port, 0 <= rank < size and timeout > 0 (rank %d size %d port %u)",
				rank, size, port);
	ret = resolve(host, port, &sa);
	if (ret)
		return ret;
	r = calloc(1, sizeof(*r) + (size_t)size * sizeof(int));
	if (!r)
		return pd_error(-ENOMEM, "rendezvous: out of memory");
	r->rank = rank;
	r->size = size;
	r->timeout_ms = timeout_ms;
	for (i = 0; i < size; i++)
		r->fds[i] = -1;
	ret = rank == 0 ? accept_peers(r, &sa) : connect_root(r, &sa);
	if (ret) {
		pd_rdv_close(r);
		return ret;
	}
	*out = r;
	return 0;
}

int pd_rdv_allgather(struct pd_rdv *r, const void *in, size_t len, void *out)
{
	uint64_t hdr = len, theirs;
	char *o = out;
	int i, ret;

	if (!r || !in || !out || !len)
		return pd_error(-EINVAL, "pd_rdv_allgather: NULL argument or length 0");
	if (r->rank != 0) {
		if ((ret = io_all(r->fds[0], &hdr, sizeof(hdr), true, r->timeout_ms)) ||
		    (ret = io_all(r->fds[0], (void *)in, len, true, r->timeout_ms)))
			return ret;
		return io_all(r->fds[0], out, len * (size_t)r->size, false, r->timeout_ms);
	}
	memcpy(o, in, len);
	for (i = 1; i < r->size; i++) {
		if ((ret = io_all(r->fds[i], &theirs, sizeof(theirs), false, r->timeout_ms)))
			return ret;
		if (theirs != len)
			return pd_error(-EPROTO, "rendezvous: rank %d sent %llu bytes, expected %zu",
					i, (unsigned long long)theirs, len);
		if ((ret = io_all(r->fds[i], o + (size_t)i * len, len, false, r->timeout_ms)))
			return ret;
	}
	for (i = 1; i < r->size; i++) {
		if ((ret = io_all(r->fds[i], o, len * (size_t)r->size, true, r->timeout_ms)))
			return ret;
	}
	return 0;
}

int pd_rdv_barrier(struct pd_rdv *r)
{
	char in = 1, *all;
	int ret;

	if (!r)
		return pd_error(-EINVAL, "pd_rdv_barrier: rdv is NULL");
	all = malloc((size_t)r->size);
	if (!all)
		return pd_error(-ENOMEM, "rendezvous: out of memory");
	ret = pd_rdv_allgather(r, &in, 1, all);
	free(all);
	return ret;
}

void pd_rdv_close(struct pd_rdv *r)
{
	int i;

	if (!r)
		return;
	for (i = 0; i < r->size; i++) {
		if (r->fds[i] >= 0)
			close(r->fds[i]);
	}
	free(r);
}
