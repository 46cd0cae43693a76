// SPDX-License-Identifier: MIT
/*
 * A star-shaped TCP rendezvous for tools and tests: rank 0 listens, every
 * other rank connects, and allgather goes through rank 0.  Runtimes bring
 * their own out-of-band channel and use pd_fabric_addr/insert instead.
 *
 * Every call is bounded by the timeout given at open, counted from the
 * call's start: connects are non-blocking, sends and receives never block
 * (a peer that stops reading cannot hold a sender), so a dead or stuck rank
 * turns into an error, never a hang.  Rank 0 listens on every address, v4
 * and v6; the others try each address the host name resolves to.  A
 * handshake carries the job and the number of ranks, so a rank left over
 * from another job is turned away and a wrong rank count fails both sides.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
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

#define RDV_MAGIC	0x50445256u	/* "PDRV" */
#define RDV_VERSION	1u
#define HELLO_MS	2000

struct pd_rdv {
	int rank, size, timeout_ms;
	uint64_t job;
	int fds[];		/* rank 0: one per peer; others: fds[0] to rank 0 */
};

/* What a rank sends on connecting, and rank 0's answer (same layout):
 * status 0, or the errno rank 0 refused it with. */
struct hello {
	uint32_t magic, version;
	uint32_t rank, size;
	uint64_t job;
	int32_t status;
	uint32_t pad;
};

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int left_ms(int64_t deadline)
{
	int64_t left = deadline - now_ms();

	return left <= 0 ? 0 : left > INT32_MAX ? INT32_MAX : (int)left;
}

/* Whole buffer in or out by the deadline; never blocks in send/recv. */
static int io_all(int fd, void *buf, size_t len, bool sending, int64_t deadline,
		  int timeout_ms)
{
	struct pollfd p = { .fd = fd, .events = sending ? POLLOUT : POLLIN };
	char *c = buf;
	ssize_t n;

	while (len) {
		n = sending ? send(fd, c, len, MSG_NOSIGNAL | MSG_DONTWAIT) :
			      recv(fd, c, len, MSG_DONTWAIT);
		if (n == 0)
			return pd_error(-ECONNRESET, "rendezvous: peer closed the connection");
		if (n > 0) {
			c += n;
			len -= (size_t)n;
			continue;
		}
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN)
			return pd_error(-errno, "rendezvous: %s: %s", sending ? "send" : "recv",
					strerror(errno));
		n = poll(&p, 1, left_ms(deadline));
		if (n == 0)
			return pd_error(-ETIMEDOUT, "rendezvous: peer %s for %d ms (%zu bytes left)",
					sending ? "not reading" : "silent", timeout_ms, len);
		if (n < 0 && errno != EINTR)
			return pd_error(-errno, "rendezvous: poll: %s", strerror(errno));
	}
	return 0;
}

/* Small request/reply messages: Nagle would add tens of ms to each. */
static void no_delay(int fd)
{
	int one = 1;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* Every address: v6 with v4 mapped where the host has v6, else v4. */
static int listen_everywhere(uint16_t port, int backlog, int *out)
{
	struct sockaddr_in6 s6 = { .sin6_family = AF_INET6, .sin6_port = htons(port),
				   .sin6_addr = IN6ADDR_ANY_INIT };
	struct sockaddr_in s4 = { .sin_family = AF_INET, .sin_port = htons(port),
				  .sin_addr.s_addr = htonl(INADDR_ANY) };
	int one = 1, zero = 0, fd, err;

	fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd >= 0) {
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
		if (!bind(fd, (struct sockaddr *)&s6, sizeof(s6)) && !listen(fd, backlog)) {
			*out = fd;
			return 0;
		}
		close(fd);
	}
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return pd_error(-errno, "rendezvous: socket: %s", strerror(errno));
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&s4, sizeof(s4)) || listen(fd, backlog)) {
		err = errno;
		close(fd);
		return pd_error(-err, "rendezvous: listen on port %u: %s", port, strerror(err));
	}
	*out = fd;
	return 0;
}

static void hello_init(struct hello *h, const struct pd_rdv *r, uint32_t rank, int32_t status)
{
	*h = (struct hello) {
		.magic = RDV_MAGIC, .version = RDV_VERSION, .rank = rank,
		.size = (uint32_t)r->size, .job = r->job, .status = status,
	};
}

/*
 * One connection's handshake at rank 0: 1 and its rank if it belongs here,
 * 0 if it was turned away (another job, a stray connection), <0 if the job
 * itself is misconfigured.
 */
static int admit(struct pd_rdv *r, int fd, int64_t deadline, uint32_t *rank)
{
	/* A stranger that connects and says nothing must not use up the
	 * whole deadline of the ranks still to come. */
	int64_t hello_by = now_ms() + HELLO_MS < deadline ? now_ms() + HELLO_MS : deadline;
	struct hello h, reply;
	int ret = io_all(fd, &h, sizeof(h), false, hello_by, HELLO_MS);

	if (ret)
		return 0;	/* a silent or vanished stranger: keep waiting */
	if (h.magic != RDV_MAGIC || h.version != RDV_VERSION || h.job != r->job) {
		hello_init(&reply, r, 0, -ESTALE);
		io_all(fd, &reply, sizeof(reply), true, deadline, r->timeout_ms);
		return 0;
	}
	if (h.size != (uint32_t)r->size || !h.rank || h.rank >= (uint32_t)r->size ||
	    r->fds[h.rank] >= 0) {
		hello_init(&reply, r, h.rank, -EPROTO);
		io_all(fd, &reply, sizeof(reply), true, deadline, r->timeout_ms);
		if (h.size != (uint32_t)r->size)
			return pd_error(-EPROTO, "rendezvous: rank %u was started for %u ranks, rank 0 for %d",
					h.rank, h.size, r->size);
		return pd_error(-EPROTO, "rendezvous: bad or duplicate rank %u", h.rank);
	}
	hello_init(&reply, r, h.rank, 0);
	ret = io_all(fd, &reply, sizeof(reply), true, deadline, r->timeout_ms);
	if (ret)
		return ret;
	*rank = h.rank;
	return 1;
}

static int accept_peers(struct pd_rdv *r, uint16_t port, int64_t deadline)
{
	int lfd = -1, joined = 1, ret;

	ret = listen_everywhere(port, r->size, &lfd);
	if (ret)
		return ret;
	while (joined < r->size) {
		struct pollfd p = { .fd = lfd, .events = POLLIN };
		uint32_t rank = 0;
		int fd;

		if (poll(&p, 1, left_ms(deadline)) <= 0 && now_ms() >= deadline) {
			ret = pd_error(-ETIMEDOUT, "rendezvous: only %d of %d ranks joined within %d ms",
				       joined, r->size, r->timeout_ms);
			break;
		}
		fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EAGAIN || errno == EINTR || errno == ECONNABORTED)
				continue;
			ret = pd_error(-errno, "rendezvous: accept: %s", strerror(errno));
			break;
		}
		ret = admit(r, fd, deadline, &rank);
		if (ret <= 0) {
			close(fd);
			if (ret < 0)
				break;
			continue;
		}
		ret = 0;
		no_delay(fd);
		r->fds[rank] = fd;
		joined++;
	}
	close(lfd);
	return ret;
}

/* 0 connected, -errno for this address; never waits past the deadline. */
static int connect_by(const struct addrinfo *ai, int64_t deadline, int *out)
{
	struct pollfd p = { .events = POLLOUT };
	socklen_t len = sizeof(int);
	int fd, err = 0;

	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) && errno != EINPROGRESS) {
		err = -errno;
	} else {
		p.fd = fd;
		if (poll(&p, 1, left_ms(deadline)) <= 0)
			err = -ETIMEDOUT;
		else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) || err)
			err = -(err ? err : errno);
	}
	if (err) {
		close(fd);
		return err;
	}
	*out = fd;
	return 0;
}

static int connect_root(struct pd_rdv *r, const char *host, uint16_t port, int64_t deadline)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
	struct addrinfo *res, *ai;
	struct hello h;
	char service[8];
	int fd = -1, ret, last = -ECONNREFUSED;

	snprintf(service, sizeof(service), "%u", port);
	ret = getaddrinfo(host, service, &hints, &res);
	if (ret)
		return pd_error(-EHOSTUNREACH, "rendezvous: %s: %s", host, gai_strerror(ret));
	/* Rank 0 may not listen yet: go round the addresses until the deadline. */
	while (fd < 0 && now_ms() < deadline) {
		for (ai = res; ai && fd < 0; ai = ai->ai_next)
			last = connect_by(ai, deadline, &fd);
		if (fd < 0)
			poll(NULL, 0, left_ms(deadline) < 20 ? left_ms(deadline) : 20);
	}
	freeaddrinfo(res);
	if (fd < 0)
		return pd_error(-ETIMEDOUT, "rendezvous: rank 0 at %s port %u unreachable for %d ms (%s)",
				host, port, r->timeout_ms, strerror(-last));
	no_delay(fd);
	r->fds[0] = fd;
	hello_init(&h, r, (uint32_t)r->rank, 0);
	ret = io_all(fd, &h, sizeof(h), true, deadline, r->timeout_ms) ?:
	      io_all(fd, &h, sizeof(h), false, deadline, r->timeout_ms);
	if (ret)
		return ret;
	if (h.magic != RDV_MAGIC || h.status == -ESTALE)
		return pd_error(-EPROTO, "rendezvous: rank 0 at %s port %u belongs to another job (ours is %llu)",
				host, port, (unsigned long long)r->job);
	if (h.status)
		return pd_error(-EPROTO, "rendezvous: rank 0 refused rank %d: it was started for %u ranks, this rank for %d%s",
				r->rank, h.size, r->size,
				h.size == (uint32_t)r->size ? " (duplicate rank)" : "");
	return 0;
}

static uint64_t fnv1a(uint64_t h, const char *s)
{
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
	return h;
}

/*
 * The job this rank belongs to, so that rank 0 turns away a rank of
 * another job.  PEERDIRECT_RDV_JOB when set (a number, or text, hashed).
 * Else what the launcher gives every rank of one job alike, most specific
 * first: PMIx's namespace (mpirun of Open MPI 4/5, srun --mpi=pmix), Open
 * MPI's job id, then Slurm's job id alone -- not the step: under one
 * mpirun in a batch job, ranks forked on mpirun's node see the batch step
 * and ranks under the remote daemons another, and ranks started by
 * separate srun calls are one job to their user.  Else 0 (ranks started
 * by hand share no other channel).  Launcher values are hashed with their
 * name.
 */
static uint64_t rdv_job(void)
{
	static const char *const vars[] = {
		"PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid", "SLURM_JOB_ID",
	};
	const char *env = getenv("PEERDIRECT_RDV_JOB");
	uint64_t h;
	size_t i;

	if (env && *env) {	/* empty: unset, as the launchers' below */
		char *end;

		/* A number as given; other text hashed, not read as 0 (which
		 * would match every rank started by hand). */
		errno = 0;
		h = strtoull(env, &end, 10);
		if (isdigit((unsigned char)*env) && !*end && !errno)
			return h;
		h = fnv1a(0xcbf29ce484222325ULL, env);
		return h ? h : 1;
	}
	for (i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
		env = getenv(vars[i]);
		if (!env || !*env)
			continue;
		h = fnv1a(fnv1a(0xcbf29ce484222325ULL, vars[i]), env);
		return h ? h : 1;
	}
	return 0;
}

int pd_rdv_open(const char *host, uint16_t port, int rank, int size,
		int timeout_ms, struct pd_rdv **out)
{
	int64_t deadline = now_ms() + timeout_ms;
	struct pd_rdv *r;
	int i, ret;

	if (!host || !out || size < 1 || rank < 0 || rank >= size || timeout_ms <= 0 || !port)
		return pd_error(-EINVAL, "pd_rdv_open: need host, port, 0 <= rank < size and timeout > 0 (rank %d size %d port %u)",
				rank, size, port);
	r = calloc(1, sizeof(*r) + (size_t)size * sizeof(int));
	if (!r)
		return pd_error(-ENOMEM, "rendezvous: out of memory");
	r->rank = rank;
	r->size = size;
	r->timeout_ms = timeout_ms;
	r->job = rdv_job();
	for (i = 0; i < size; i++)
		r->fds[i] = -1;
	ret = rank == 0 ? accept_peers(r, port, deadline) : connect_root(r, host, port, deadline);
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
	int64_t deadline;
	char *o = out;
	int i, ret;

	if (!r || !in || !out || !len)
		return pd_error(-EINVAL, "pd_rdv_allgather: NULL argument or length 0");
	deadline = now_ms() + r->timeout_ms;
	if (r->rank != 0) {
		if ((ret = io_all(r->fds[0], &hdr, sizeof(hdr), true, deadline, r->timeout_ms)) ||
		    (ret = io_all(r->fds[0], (void *)in, len, true, deadline, r->timeout_ms)))
			return ret;
		return io_all(r->fds[0], out, len * (size_t)r->size, false, deadline, r->timeout_ms);
	}
	memcpy(o, in, len);
	for (i = 1; i < r->size; i++) {
		if ((ret = io_all(r->fds[i], &theirs, sizeof(theirs), false, deadline, r->timeout_ms)))
			return ret;
		if (theirs != len)
			return pd_error(-EPROTO, "rendezvous: rank %d sent %llu bytes, expected %zu",
					i, (unsigned long long)theirs, len);
		if ((ret = io_all(r->fds[i], o + (size_t)i * len, len, false, deadline, r->timeout_ms)))
			return ret;
	}
	for (i = 1; i < r->size; i++) {
		if ((ret = io_all(r->fds[i], o, len * (size_t)r->size, true, deadline, r->timeout_ms)))
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
