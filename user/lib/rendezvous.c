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
 * and v6.  The others try the addresses the host name resolves to as happy
 * eyeballs do (RFC 8305), so that one that drops SYNs (a filtered AAAA
 * record, say) costs a quarter second, not the deadline.
 *
 * Rank 0 hears every connection side by side, so a stranger that says
 * nothing, or one byte a second, delays no rank; each gets HELLO_MS for
 * its hello.  A hello carries the job and the number of ranks, so a rank
 * left over from another job is turned away and a wrong rank count fails.
 * Whatever a peer sends, the error names what was wrong and where it came
 * from.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "peerdirect.h"
#include "errors.h"
#include "log.h"

#define RDV_MAGIC	0x50445256u	/* "PDRV" */
/* 2: the group is confirmed (GO, ACK) before any rank returns, and rank 0
 * answers allgather with a header that can carry a failure. */
#define RDV_VERSION	2u
/* A rank sends its hello as soon as it connects; a stranger that does not
 * must not hold a place for long. */
#define HELLO_MS	2000
/* RFC 8305's Connection Attempt Delay. */
#define ATTEMPT_DELAY_MS 250
/* Between rounds over every address: rank 0 may not listen yet, and a
 * refused connect costs microseconds. */
#define RETRY_MS	20
#define MAX_ADDRS	16
/* Unheard connections beyond the ranks rank 0 keeps: a flood of strangers
 * costs it the oldest of them (a rank's hello comes at once), not memory
 * or its place in the kernel's accept queue. */
#define SPARE_PENDING	64
#define RDV_MAX_RANKS	(1 << 24)
#define WHERE_LEN	64
#define NOTE_LEN	200

/*
 * The handshake:
 *
 *   rank r                          rank 0
 *   HELLO (rank, size, job)   --->
 *                             <---  WELCOME, or REFUSE (an errno) and close
 *             ... until every rank has joined ...
 *                             <---  GO, or ABORT (an errno) if rank 0 gives up
 *   ACK                       --->
 *
 * The rule that makes both sides agree: a rank other than 0 succeeds only
 * once it has GO, which rank 0 sends only when every rank is in, and it
 * answers GO at once; rank 0 succeeds only once every rank has answered GO
 * within rank 0's deadline.  So rank 0 never reports a group one of whose
 * ranks failed: a rank that gave up before GO (its deadline passed, or it
 * was refused) has closed its connection, and rank 0 sees that.  While
 * ranks are still missing, one that gave up leaves its place to the next
 * comer; no rank ever connects after its own deadline.
 *
 * What no protocol bounded by deadlines avoids: a rank may take GO and
 * return 0 while rank 0 then fails (another rank's ACK never came, or
 * rank 0's deadline passed between GO and the ACKs).  Rank 0 then closes
 * every connection, so that rank's first allgather or barrier fails at
 * once, not at its deadline.
 */
enum kind { K_HELLO = 1, K_WELCOME, K_REFUSE, K_GO, K_ACK, K_ABORT };

/* Every message of the handshake.  Version 1 had the same layout with
 * kind as padding, so a version 1 peer is told apart by version alone. */
struct msg {
	uint32_t magic, version;
	uint32_t rank, size;
	uint64_t job;
	int32_t status;		/* REFUSE, ABORT: a negative errno */
	uint32_t kind;
};
_Static_assert(sizeof(struct msg) == 32, "the wire format");

/* Rank 0's answer to an allgather, before the data: status 0 and the
 * length per rank, or the error that ended the call and whose rank it was. */
struct gather_hdr {
	int32_t status;
	uint32_t culprit;
	uint64_t len;
};
_Static_assert(sizeof(struct gather_hdr) == 16, "the wire format");

struct member {
	int fd;
	char where[WHERE_LEN];	/* its address, for messages */
};

struct pd_rdv {
	int rank, size, timeout_ms;
	uint64_t job;
	/* The first failure of a call: the byte streams are out of step after
	 * it, so every later call fails at once. */
	int broken;
	struct member m[];	/* rank 0: one per rank; others: m[0] is rank 0 */
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

static void addr_str(const struct sockaddr_storage *ss, char *buf, size_t len)
{
	char host[INET6_ADDRSTRLEN] = "?";

	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *s = (const struct sockaddr_in *)ss;

		inet_ntop(AF_INET, &s->sin_addr, host, sizeof(host));
		snprintf(buf, len, "%s:%u", host, ntohs(s->sin_port));
	} else if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *s = (const struct sockaddr_in6 *)ss;

		/* rank 0's v6 socket sees v4 peers mapped: print what they dialled */
		if (IN6_IS_ADDR_V4MAPPED(&s->sin6_addr)) {
			inet_ntop(AF_INET, &s->sin6_addr.s6_addr[12], host, sizeof(host));
			snprintf(buf, len, "%s:%u", host, ntohs(s->sin6_port));
		} else {
			inet_ntop(AF_INET6, &s->sin6_addr, host, sizeof(host));
			snprintf(buf, len, "[%s]:%u", host, ntohs(s->sin6_port));
		}
	} else {
		snprintf(buf, len, "(address family %d)", ss->ss_family);
	}
}

/*
 * The whole buffer in or out by the deadline; never blocks in send/recv.
 * who and what name the peer and the message, for the error.
 */
static int io_all(int fd, void *buf, size_t len, bool sending, int64_t deadline,
		  int timeout_ms, const char *who, const char *what)
{
	struct pollfd p = { .fd = fd, .events = sending ? POLLOUT : POLLIN };
	size_t done = 0;
	char *c = buf;
	ssize_t n;
	int err;

	while (done < len) {
		n = sending ? send(fd, c + done, len - done, MSG_NOSIGNAL | MSG_DONTWAIT) :
			      recv(fd, c + done, len - done, MSG_DONTWAIT);
		if (n > 0) {
			done += (size_t)n;
			continue;
		}
		if (n == 0 && !sending) {
			if (done)
				return pd_error(-ECONNRESET, "rendezvous: %s closed the connection after %zu of %zu bytes of %s",
						who, done, len, what);
			return pd_error(-ECONNRESET, "rendezvous: %s closed the connection before sending %s",
					who, what);
		}
		err = n < 0 ? errno : EIO;
		if (err == EINTR)
			continue;
		if (err != EAGAIN && err != EWOULDBLOCK)
			return pd_error(-err, "rendezvous: %s %s %s %s: %s", sending ? "sending" : "receiving",
					what, sending ? "to" : "from", who, strerror(err));
		n = poll(&p, 1, left_ms(deadline));
		if (n == 0 && sending)
			return pd_error(-ETIMEDOUT, "rendezvous: %s not reading for %d ms (%zu of %zu bytes of %s sent)",
					who, timeout_ms, done, len, what);
		if (n == 0)
			return pd_error(-ETIMEDOUT, "rendezvous: %s silent for %d ms (%zu of %zu bytes of %s received)",
					who, timeout_ms, done, len, what);
		if (n < 0 && errno != EINTR) {
			err = errno;
			return pd_error(-err, "rendezvous: poll: %s", strerror(err));
		}
	}
	return 0;
}

/* A small message where nothing else is in flight, so the socket buffer
 * has room: all of it now, or nothing (a full buffer means a peer that
 * does not read, and it is being dropped anyway). */
static bool send_now(int fd, const void *buf, size_t len)
{
	return send(fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT) == (ssize_t)len;
}

/* Closing with unread bytes queued makes the kernel reset the connection,
 * and a reset can discard the answer just sent before the peer reads it. */
static void drop(int fd)
{
	char buf[512];
	int i;

	for (i = 0; i < 64 && recv(fd, buf, sizeof(buf), MSG_DONTWAIT) > 0; i++)
		;
	close(fd);
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

static struct msg msg_of(const struct pd_rdv *r, uint32_t kind, uint32_t rank, int32_t status)
{
	return (struct msg){ .magic = RDV_MAGIC, .version = RDV_VERSION, .rank = rank,
			     .size = (uint32_t)r->size, .job = r->job, .status = status,
			     .kind = kind };
}

/* ---- rank 0 ------------------------------------------------------------ */

/* A connection whose hello has not come in whole yet. */
struct pending {
	int fd;
	int64_t since, until;
	size_t got;
	struct msg m;
	char where[WHERE_LEN];
};

struct gate {
	struct pd_rdv *r;
	int64_t deadline;
	struct pending *p;
	int np, cap, joined, turned;
	char note[NOTE_LEN];	/* the latest connection turned away, and why */
	char suspect[NOTE_LEN];	/* the latest of our job turned away for its rank count or rank */
};

/* Why a connection was turned away or lost: logged now, and kept for
 * rank 0's error should ranks still be missing at the deadline. */
static void note(struct gate *g, bool suspect, const char *where, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void note(struct gate *g, bool suspect, const char *where, const char *fmt, ...)
{
	char *buf = suspect ? g->suspect : g->note;
	va_list ap;
	int n;

	n = snprintf(buf, NOTE_LEN, "%s ", where);
	va_start(ap, fmt);
	if (n > 0 && n < NOTE_LEN)
		vsnprintf(buf + n, NOTE_LEN - (size_t)n, fmt, ap);
	va_end(ap);
	if (suspect)
		snprintf(g->note, NOTE_LEN, "%s", g->suspect);
	g->turned++;
	pd_log_rl(PD_LOG_WARN, "rendezvous: rank 0: %s", buf);
}

/* Answers a hello with REFUSE and notes why; the caller closes. */
static int refuse(struct gate *g, struct pending *p, int status, bool suspect, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
static int refuse(struct gate *g, struct pending *p, int status, bool suspect, const char *fmt, ...)
{
	struct msg a = msg_of(g->r, K_REFUSE, p->m.rank, status);
	char why[NOTE_LEN];
	va_list ap;

	send_now(p->fd, &a, sizeof(a));
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	note(g, suspect, p->where, "%s", why);
	return 0;
}

/*
 * A member sends nothing between WELCOME and GO, so anything readable is
 * its end (it gave up: its deadline passed) or garbage.  Either way it has
 * not committed to anything, and its place is free for the next comer.
 */
static bool member_stirred(struct gate *g, int k)
{
	struct member *m = &g->r->m[k];
	ssize_t n;
	char c;

	n = recv(m->fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return false;
	note(g, false, m->where, n > 0 ? "(rank %d) sent data before every rank had joined" :
		"(rank %d) left before every rank had joined", k);
	drop(m->fd);
	m->fd = -1;
	g->joined--;
	return true;
}

static bool all_quiet(struct gate *g)
{
	bool quiet = true;
	int k;

	for (k = 1; k < g->r->size; k++) {
		struct pollfd p = { .fd = g->r->m[k].fd, .events = POLLIN };

		if (p.fd >= 0 && poll(&p, 1, 0) > 0 && member_stirred(g, k))
			quiet = false;
	}
	return quiet;
}

/*
 * Who may join.  A peer that does not speak the rendezvous (another magic,
 * or more than a hello), speaks another version, belongs to another job,
 * or claims a rank that cannot exist is turned away: rank 0 keeps waiting.
 *
 * A peer of our job with another rank count, or claiming a rank another
 * live connection holds, is either a misconfiguration of this run or a
 * leftover of an earlier run still retrying.  Only a job id tells them
 * apart.  With one (PEERDIRECT_RDV_JOB or the launcher's), the peer is of
 * this run, and rank 0 fails at once with -EPROTO, naming it.  With job id
 * 0 (ranks started by hand) nothing does, so rank 0 turns the peer away
 * (it fails, with -EPROTO or -EADDRINUSE) and waits for a rank that fits;
 * if none has come by the deadline, rank 0 fails with -EPROTO naming the
 * peer it turned away, the likelier cause than a rank that never started.
 * A holder that has gone (gave up before GO) holds nothing: the newcomer
 * takes the place.  Which of two live processes with one rank is the
 * leftover cannot be told: the first keeps the place.
 *
 * 1: admitted; 0: turned away (the caller closes); <0: rank 0 fails.
 */
static int judge(struct gate *g, struct pending *p)
{
	struct pd_rdv *r = g->r;
	struct msg *h = &p->m, a;
	uint32_t k = h->rank;
	char more;

	if (h->magic != RDV_MAGIC) {
		/* no answer: it would not understand one */
		note(g, false, p->where, "not a rendezvous hello (it began 0x%08x)", h->magic);
		return 0;
	}
	if (h->version != RDV_VERSION)
		return refuse(g, p, -EPROTONOSUPPORT, false, "speaks rendezvous version %u, rank 0 version %u",
			      h->version, RDV_VERSION);
	if (h->kind != K_HELLO)
		return refuse(g, p, -EBADMSG, false, "sent message kind %u, not a hello", h->kind);
	if (recv(p->fd, &more, 1, MSG_PEEK | MSG_DONTWAIT) > 0)
		return refuse(g, p, -EBADMSG, false, "sent more than a hello before its answer");
	if (h->job != r->job)
		return refuse(g, p, -ESTALE, false, "belongs to job %llu, rank 0 to job %llu",
			      (unsigned long long)h->job, (unsigned long long)r->job);
	if (h->size != (uint32_t)r->size) {
		refuse(g, p, -EPROTO, true, "claims rank %u but was started for %u ranks, rank 0 for %d",
		       k, h->size, r->size);
		if (r->job)
			return pd_error(-EPROTO, "rendezvous: rank %u at %s was started for %u ranks, rank 0 for %d",
					k, p->where, h->size, r->size);
		return 0;
	}
	if (!k || k >= (uint32_t)r->size)
		return refuse(g, p, -ERANGE, false, "claims rank %u of %d", k, r->size);
	if (r->m[k].fd >= 0 && !member_stirred(g, (int)k)) {
		refuse(g, p, -EADDRINUSE, true, "claims rank %u, which %s holds", k, r->m[k].where);
		if (r->job)
			return pd_error(-EPROTO, "rendezvous: rank %u joined twice, from %s and from %s (one rank given to two processes?)",
					k, r->m[k].where, p->where);
		return 0;
	}
	a = msg_of(r, K_WELCOME, k, 0);
	if (!send_now(p->fd, &a, sizeof(a))) {
		note(g, false, p->where, "(rank %u) could not be answered", k);
		return 0;
	}
	r->m[k].fd = p->fd;
	memcpy(r->m[k].where, p->where, sizeof(p->where));
	p->fd = -1;
	g->joined++;
	no_delay(r->m[k].fd);
	return 1;
}

/* Reads what a pending connection sent.  0: still pending; 1: done with
 * it (admitted or turned away); <0: rank 0 fails. */
static int hear(struct gate *g, struct pending *p)
{
	ssize_t n = recv(p->fd, (char *)&p->m + p->got, sizeof(p->m) - p->got, MSG_DONTWAIT);
	int ret;

	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return 0;
	if (n <= 0) {
		if (n == 0)
			note(g, false, p->where, "closed the connection after %zu of %zu bytes of its hello",
			     p->got, sizeof(p->m));
		else
			note(g, false, p->where, "failed after %zu of %zu bytes of its hello: %s",
			     p->got, sizeof(p->m), strerror(errno));
		ret = 1;
	} else {
		p->got += (size_t)n;
		if (p->got < sizeof(p->m))
			return 0;
		ret = judge(g, p);
	}
	if (p->fd >= 0)
		drop(p->fd);
	p->fd = -1;
	return ret < 0 ? ret : 1;
}

/* The oldest unheard connection makes room: a rank sends its hello as
 * soon as it connects, so the oldest is the least likely to be one. */
static void evict_oldest(struct gate *g, int64_t now, const char *why)
{
	int i, old = 0;

	for (i = 1; i < g->np; i++)
		if (g->p[i].since < g->p[old].since)
			old = i;
	note(g, false, g->p[old].where, "was dropped unheard after %lld ms (%s)",
	     (long long)(now - g->p[old].since), why);
	drop(g->p[old].fd);
	g->p[old] = g->p[--g->np];
}

static int accept_all(struct gate *g, int lfd, int64_t now)
{
	for (;;) {
		struct sockaddr_storage ss;
		socklen_t len = sizeof(ss);
		struct pending *p;
		int fd, err;

		fd = accept4(lfd, (struct sockaddr *)&ss, &len, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (fd < 0) {
			err = errno;
			if (err == EINTR || err == ECONNABORTED)
				continue;
			if (err == EAGAIN || err == EWOULDBLOCK)
				return 0;
			/* Out of descriptors (strangers beyond a low limit): left
			 * queued, the connection keeps the listener readable, and
			 * rank 0 would spin until its deadline. */
			if ((err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM) && g->np) {
				evict_oldest(g, now, strerror(err));
				continue;
			}
			return pd_error(-err, "rendezvous: accept: %s", strerror(err));
		}
		if (g->np == g->cap)
			evict_oldest(g, now, "too many connections waiting for a hello");
		p = &g->p[g->np++];
		*p = (struct pending){ .fd = fd, .since = now,
				       .until = now + HELLO_MS < g->deadline ? now + HELLO_MS : g->deadline };
		addr_str(&ss, p->where, sizeof(p->where));
	}
}

/* Rank 0's error at its deadline, naming what it saw. */
static int missing(struct gate *g)
{
	struct pd_rdv *r = g->r;
	char miss[64] = "", turned[NOTE_LEN + 64] = "", pend[WHERE_LEN + 96] = "";
	size_t off = 0;
	int k, shown = 0;

	for (k = 1; k < r->size && off < sizeof(miss); k++) {
		if (r->m[k].fd >= 0)
			continue;
		if (shown++ == 4) {
			snprintf(miss + off, sizeof(miss) - off, ", ...");
			break;
		}
		off += (size_t)snprintf(miss + off, sizeof(miss) - off, "%s%d", shown > 1 ? ", " : "", k);
	}
	if (g->suspect[0])
		return pd_error(-EPROTO, "rendezvous: only %d of %d ranks joined within %d ms (missing rank %s); turned away %s",
				g->joined, r->size, r->timeout_ms, miss, g->suspect);
	if (g->turned)
		snprintf(turned, sizeof(turned), "; %d connection%s turned away or lost, the latest: %s",
			 g->turned, g->turned > 1 ? "s" : "", g->note);
	if (g->np)
		snprintf(pend, sizeof(pend), "; %d connection%s still owe a hello, e.g. %s (%zu of %zu bytes)",
			 g->np, g->np > 1 ? "s" : "", g->p[0].where, g->p[0].got, sizeof(g->p[0].m));
	return pd_error(-ETIMEDOUT, "rendezvous: only %d of %d ranks joined within %d ms (missing rank %s)%s%s",
			g->joined, r->size, r->timeout_ms, miss, turned, pend);
}

/* Every rank is in: GO to each, and each must confirm it (the rule given
 * with the handshake, at the top). */
static int confirm(struct pd_rdv *r, int64_t deadline)
{
	char who[WHERE_LEN + 32];
	struct msg m;
	int k, ret;

	for (k = 1; k < r->size; k++) {
		m = msg_of(r, K_GO, (uint32_t)k, 0);
		snprintf(who, sizeof(who), "rank %d (%s)", k, r->m[k].where);
		ret = io_all(r->m[k].fd, &m, sizeof(m), true, deadline, r->timeout_ms, who, "the go-ahead");
		if (ret)
			return ret;
	}
	for (k = 1; k < r->size; k++) {
		snprintf(who, sizeof(who), "rank %d (%s)", k, r->m[k].where);
		ret = io_all(r->m[k].fd, &m, sizeof(m), false, deadline, r->timeout_ms, who,
			     "its confirmation");
		if (ret)
			return ret;
		if (m.magic != RDV_MAGIC || m.version != RDV_VERSION || m.kind != K_ACK ||
		    m.rank != (uint32_t)k)
			return pd_error(-EPROTO, "rendezvous: %s answered the go-ahead with garbage (magic 0x%08x, kind %u, rank %u), not its confirmation",
					who, m.magic, m.kind, m.rank);
	}
	return 0;
}

static int gather_ranks(struct pd_rdv *r, uint16_t port, int64_t deadline)
{
	struct gate g = { .r = r, .deadline = deadline, .joined = 1 };
	struct pollfd *pfd = NULL;
	int lfd = -1, ret, i, k, n;

	g.cap = r->size + SPARE_PENDING;
	/* The kernel's queue holds what arrives between two accept rounds. */
	ret = listen_everywhere(port, g.cap + 128, &lfd);
	if (ret)
		return ret;
	g.p = calloc((size_t)g.cap, sizeof(*g.p));
	pfd = calloc(1 + (size_t)g.cap + (size_t)r->size, sizeof(*pfd));
	if (!g.p || !pfd) {
		ret = pd_error(-ENOMEM, "rendezvous: out of memory");
		goto out;
	}
	for (;;) {
		int64_t now = now_ms(), wake = deadline;

		if (g.joined == r->size && all_quiet(&g)) {
			ret = 0;
			break;
		}
		if (now >= deadline) {
			ret = missing(&g);
			break;
		}
		n = 0;
		pfd[n++] = (struct pollfd){ .fd = lfd, .events = POLLIN };
		for (i = 0; i < g.np; i++) {
			pfd[n++] = (struct pollfd){ .fd = g.p[i].fd, .events = POLLIN };
			if (g.p[i].until < wake)
				wake = g.p[i].until;
		}
		for (k = 1; k < r->size; k++)
			if (r->m[k].fd >= 0)
				pfd[n++] = (struct pollfd){ .fd = r->m[k].fd, .events = POLLIN };
		if (poll(pfd, (nfds_t)n, left_ms(wake)) < 0 && errno != EINTR) {
			ret = pd_error(-errno, "rendezvous: poll: %s", strerror(errno));
			break;
		}
		now = now_ms();
		/* Members first: a place given up is free for the hellos below. */
		for (i = 1 + g.np, k = 1; k < r->size; k++) {
			if (r->m[k].fd < 0)
				continue;
			if (pfd[i++].revents)
				member_stirred(&g, k);
		}
		/* Last first: removing one moves one already seen into its slot. */
		for (i = g.np - 1; i >= 0; i--) {
			struct pending *p = &g.p[i];

			if (pfd[1 + i].revents) {
				ret = hear(&g, p);
			} else if (now >= p->until) {
				note(&g, false, p->where, "sent %zu of %zu bytes of a hello in %lld ms",
				     p->got, sizeof(p->m), (long long)(now - p->since));
				drop(p->fd);
				ret = 1;
			} else {
				ret = 0;
			}
			if (ret < 0)
				goto out;
			if (ret)
				g.p[i] = g.p[--g.np];
		}
		if (pfd[0].revents) {
			ret = accept_all(&g, lfd, now);
			if (ret)
				break;
		}
	}
out:
	close(lfd);
	for (i = 0; i < g.np; i++)
		drop(g.p[i].fd);
	free(g.p);
	free(pfd);
	if (ret) {
		/* Those admitted learn why now, not at their deadlines. */
		for (k = 1; k < r->size; k++) {
			struct msg m = msg_of(r, K_ABORT, (uint32_t)k, ret);

			if (r->m[k].fd >= 0)
				send_now(r->m[k].fd, &m, sizeof(m));
		}
		return ret;
	}
	return confirm(r, deadline);
}

/* ---- the other ranks ----------------------------------------------------- */

/*
 * Test hook: when set, replaces getaddrinfo() for a connecting rank, so
 * that a test can hand it an address list no resolver here gives, such as
 * [an address that drops SYNs, rank 0's].  Returns how many addresses it
 * wrote (at most max), or a negative errno.  Not exported (the library is
 * built with hidden visibility); test_rendezvous.c declares it and links
 * the static library.
 */
typedef int (*pd_rdv_resolver)(const char *host, uint16_t port,
			       struct sockaddr_storage *addrs, int max);
static pd_rdv_resolver resolver;

void pd_rdv_set_resolver(pd_rdv_resolver fn);
void pd_rdv_set_resolver(pd_rdv_resolver fn)
{
	resolver = fn;
}

struct target {
	struct sockaddr_storage ss;
	int fd;			/* an attempt under way, or -1 */
	int err;		/* how the last attempt ended; 0 none yet */
	char where[WHERE_LEN];
};

static int resolve(const char *host, uint16_t port, struct target *t)
{
	struct sockaddr_storage ss[MAX_ADDRS];
	int n = 0, fam, a = 0, b = 0, k;
	bool first = true;

	if (resolver) {
		n = resolver(host, port, ss, MAX_ADDRS);
		if (n < 0)
			return pd_error(n, "rendezvous: %.200s: the test's resolver failed", host);
	} else {
		struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
		struct addrinfo *res, *ai;
		char service[8];
		int ret;

		snprintf(service, sizeof(service), "%u", port);
		ret = getaddrinfo(host, service, &hints, &res);
		if (ret)
			return pd_error(-EHOSTUNREACH, "rendezvous: %.200s: %s", host, gai_strerror(ret));
		for (ai = res; ai && n < MAX_ADDRS; ai = ai->ai_next) {
			if ((ai->ai_family != AF_INET && ai->ai_family != AF_INET6) ||
			    ai->ai_addrlen > sizeof(ss[0]))
				continue;
			memset(&ss[n], 0, sizeof(ss[n]));
			memcpy(&ss[n++], ai->ai_addr, ai->ai_addrlen);
		}
		freeaddrinfo(res);
	}
	if (n <= 0)
		return pd_error(-EHOSTUNREACH, "rendezvous: %.200s has no IPv4 or IPv6 address", host);
	/* RFC 8305 section 4: alternate the families, the resolver's first one
	 * first, so that one family's unreachable addresses do not all come
	 * before the other's. */
	fam = ss[0].ss_family;
	for (k = 0; k < n; k++) {
		int *at = first ? &a : &b;

		while (*at < n && (ss[*at].ss_family == fam) != first)
			(*at)++;
		if (*at == n) {
			first = !first;
			at = first ? &a : &b;
			while (*at < n && (ss[*at].ss_family == fam) != first)
				(*at)++;
		}
		t[k] = (struct target){ .ss = ss[(*at)++], .fd = -1 };
		addr_str(&t[k].ss, t[k].where, sizeof(t[k].where));
		first = !first;
	}
	return n;
}

static socklen_t ss_len(const struct sockaddr_storage *ss)
{
	return ss->ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
}

/*
 * Happy eyeballs (RFC 8305): attempts start in order, each ATTEMPT_DELAY_MS
 * after the last or at once when the last failed, and earlier attempts stay
 * open; the first to complete wins.  Rank 0 may not listen yet, so the
 * addresses are tried again, round after round, RETRY_MS apart, skipping
 * one whose attempt is still under way.  No attempt starts at or after the
 * deadline: a connection rank 0 admitted then would belong to a rank that
 * has already given up.  Returns the winner's index, or -ETIMEDOUT.
 */
static int connect_first(struct target *t, int n, int64_t deadline)
{
	struct pollfd p[MAX_ADDRS];
	int idx = n, win = -1, i, k, np;
	int64_t start_at = 0, round_at = INT64_MIN / 2, now;

	while (win < 0) {
		now = now_ms();
		if (now >= deadline)
			break;
		while (now >= start_at) {
			if (idx == n) {
				if (now < round_at + RETRY_MS) {
					start_at = round_at + RETRY_MS;
					break;
				}
				idx = 0;
				round_at = now;
			}
			while (idx < n && t[idx].fd >= 0)
				idx++;
			if (idx == n)
				continue;
			i = idx++;
			t[i].fd = socket(t[i].ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
			if (t[i].fd < 0) {
				t[i].err = -errno;
				continue;
			}
			if (!connect(t[i].fd, (struct sockaddr *)&t[i].ss, ss_len(&t[i].ss))) {
				win = i;
				break;
			}
			if (errno == EINPROGRESS) {
				start_at = now + ATTEMPT_DELAY_MS;
				continue;
			}
			t[i].err = -errno;
			close(t[i].fd);
			t[i].fd = -1;
		}
		if (win >= 0)
			break;
		for (np = i = 0; i < n; i++)
			if (t[i].fd >= 0)
				p[np++] = (struct pollfd){ .fd = t[i].fd, .events = POLLOUT };
		k = left_ms(start_at < deadline ? start_at : deadline);
		if (poll(np ? p : NULL, (nfds_t)np, k) < 0 && errno != EINTR)
			break;
		for (k = 0; k < np && win < 0; k++) {
			socklen_t len = sizeof(int);
			int err = 0;

			if (!p[k].revents)
				continue;
			for (i = 0; t[i].fd != p[k].fd; i++)
				;
			if (getsockopt(t[i].fd, SOL_SOCKET, SO_ERROR, &err, &len))
				err = errno;
			if (!err) {
				win = i;
				break;
			}
			t[i].err = -err;
			close(t[i].fd);
			t[i].fd = -1;
			/* RFC 8305 section 5: a failure starts the next at once */
			start_at = now_ms();
		}
	}
	for (i = 0; i < n; i++) {
		if (i == win || t[i].fd < 0)
			continue;
		close(t[i].fd);
		t[i].fd = -1;
		if (win < 0)
			t[i].err = -ETIMEDOUT;
	}
	return win >= 0 ? win : -ETIMEDOUT;
}

static int unreachable(const struct pd_rdv *r, const char *host, uint16_t port,
		       const struct target *t, int n)
{
	char list[320] = "";
	size_t off = 0;
	int i;

	for (i = 0; i < n && i < 4 && off < sizeof(list); i++)
		off += (size_t)snprintf(list + off, sizeof(list) - off, "%s%s %s", i ? ", " : "", t[i].where,
					t[i].err == -ETIMEDOUT ? "no answer" :
					t[i].err ? strerror(-t[i].err) : "not tried");
	if (n > 4 && off < sizeof(list))
		snprintf(list + off, sizeof(list) - off, ", and %d more", n - 4);
	return pd_error(-ETIMEDOUT, "rendezvous: rank 0 at %.120s port %u unreachable within %d ms: %s",
			host, port, r->timeout_ms, list);
}

/* An answer from rank 0: what was due, or a refusal, or garbage. */
static int check_answer(const struct pd_rdv *r, const struct msg *m, uint32_t want,
			const char *who)
{
	const char *due = want == K_WELCOME ? "an answer to its hello" : "the go-ahead";
	int st = m->status;

	if (m->magic != RDV_MAGIC)
		return pd_error(-EPROTO, "rendezvous: %s is not a peerdirect rendezvous: it sent 0x%08x, not the magic 0x%08x",
				who, m->magic, RDV_MAGIC);
	if (m->version != RDV_VERSION)
		return pd_error(-EPROTONOSUPPORT, "rendezvous: %s speaks rendezvous version %u, this rank version %u (mixed libpeerdirect versions?)",
				who, m->version, RDV_VERSION);
	if (m->kind == K_REFUSE || m->kind == K_ABORT) {
		/* only a plain errno is passed on as ours */
		if (st >= 0 || st < -4095)
			return pd_error(-EPROTO, "rendezvous: %s refused rank %d with a bad status %d",
					who, r->rank, st);
		if (m->kind == K_ABORT)
			return pd_error(st, "rendezvous: %s gave up before every rank had joined: %s (rank 0's error says more)",
					who, strerror(-st));
		switch (st) {
		case -ESTALE:
			return pd_error(st, "rendezvous: %s belongs to another job (ours is %llu; PEERDIRECT_RDV_JOB names one)",
					who, (unsigned long long)r->job);
		case -EPROTO:
			return pd_error(st, "rendezvous: %s refused rank %d: it was started for %u ranks, this rank for %d",
					who, r->rank, m->size, r->size);
		case -EADDRINUSE:
			return pd_error(st, "rendezvous: %s refused rank %d: another process holds it already (one rank given twice, or a leftover of an earlier run)",
					who, r->rank);
		case -ERANGE:
			return pd_error(st, "rendezvous: %s refused rank %d as out of range for %u ranks",
					who, r->rank, m->size);
		case -EBADMSG:
			return pd_error(st, "rendezvous: %s could not read this rank's hello", who);
		default:
			return pd_error(st, "rendezvous: %s refused rank %d: %s", who, r->rank, strerror(-st));
		}
	}
	if (m->kind != want)
		return pd_error(-EPROTO, "rendezvous: %s sent message kind %u where %s was due",
				who, m->kind, due);
	if (m->job != r->job || m->size != (uint32_t)r->size || m->rank != (uint32_t)r->rank || st)
		return pd_error(-EPROTO, "rendezvous: %s sent %s for rank %u of %u in job %llu (status %d); this is rank %d of %d in job %llu",
				who, due, m->rank, m->size, (unsigned long long)m->job, st,
				r->rank, r->size, (unsigned long long)r->job);
	return 0;
}

static int connect_root(struct pd_rdv *r, const char *host, uint16_t port, int64_t deadline)
{
	struct target t[MAX_ADDRS];
	char who[WHERE_LEN + 160];
	struct msg m;
	int n, w, fd, ret;

	n = resolve(host, port, t);
	if (n < 0)
		return n;
	w = connect_first(t, n, deadline);
	if (w < 0)
		return unreachable(r, host, port, t, n);
	fd = t[w].fd;
	no_delay(fd);
	r->m[0].fd = fd;
	memcpy(r->m[0].where, t[w].where, sizeof(t[w].where));
	snprintf(who, sizeof(who), "rank 0 at %.80s port %u (%s)", host, port, t[w].where);
	m = msg_of(r, K_HELLO, (uint32_t)r->rank, 0);
	ret = io_all(fd, &m, sizeof(m), true, deadline, r->timeout_ms, who, "this rank's hello");
	if (!ret)
		ret = io_all(fd, &m, sizeof(m), false, deadline, r->timeout_ms, who, "its answer to our hello");
	if (!ret)
		ret = check_answer(r, &m, K_WELCOME, who);
	if (ret)
		return ret;
	ret = io_all(fd, &m, sizeof(m), false, deadline, r->timeout_ms, who, "the go-ahead");
	if (ret == -ETIMEDOUT)
		return pd_error(-ETIMEDOUT, "rendezvous: %s admitted rank %d, but not all %d ranks joined within %d ms",
				who, r->rank, r->size, r->timeout_ms);
	if (!ret)
		ret = check_answer(r, &m, K_GO, who);
	if (ret)
		return ret;
	/* GO means every rank is in: this rank is committed, and its answer
	 * lets rank 0 commit too. */
	m = msg_of(r, K_ACK, (uint32_t)r->rank, 0);
	return io_all(fd, &m, sizeof(m), true, deadline, r->timeout_ms, who, "this rank's confirmation");
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
	/* Rank 0 sizes its tables as size plus spares, in int. */
	if (size > RDV_MAX_RANKS)
		return pd_error(-EINVAL, "pd_rdv_open: %d ranks, at most %d", size, RDV_MAX_RANKS);
	r = calloc(1, sizeof(*r) + (size_t)size * sizeof(r->m[0]));
	if (!r)
		return pd_error(-ENOMEM, "rendezvous: out of memory");
	r->rank = rank;
	r->size = size;
	r->timeout_ms = timeout_ms;
	r->job = rdv_job();
	for (i = 0; i < size; i++)
		r->m[i].fd = -1;
	ret = rank == 0 ? gather_ranks(r, port, deadline) : connect_root(r, host, port, deadline);
	if (ret) {
		pd_rdv_close(r);
		return ret;
	}
	*out = r;
	return 0;
}

/* After a failed call: later calls fail at once, and the peers see their
 * connections end now rather than at their own deadlines. */
static int broken(struct pd_rdv *r, int err)
{
	int k;

	if (!r->broken)
		r->broken = err;
	for (k = 0; k < r->size; k++)
		if (r->m[k].fd >= 0)
			shutdown(r->m[k].fd, SHUT_RDWR);
	return err;
}

/* Rank 0 tells the ranks it has not answered why the call ended. */
static void give_up(struct pd_rdv *r, int err, int culprit, int from)
{
	struct gather_hdr h = { .status = err, .culprit = (uint32_t)culprit };
	int k;

	for (k = from; k < r->size; k++)
		if (k != culprit && r->m[k].fd >= 0)
			send_now(r->m[k].fd, &h, sizeof(h));
}

int pd_rdv_allgather(struct pd_rdv *r, const void *in, size_t len, void *out)
{
	uint64_t hdr = len, theirs;
	struct gather_hdr h;
	char who[WHERE_LEN + 32];
	int64_t deadline;
	char *o = out;
	int i, ret, fd;

	if (!r || !in || !out || !len)
		return pd_error(-EINVAL, "pd_rdv_allgather: NULL argument or length 0");
	if (r->broken)
		return pd_error(r->broken, "rendezvous: an earlier call failed (%s): the ranks are out of step",
				strerror(-r->broken));
	deadline = now_ms() + r->timeout_ms;
	if (r->rank != 0) {
		fd = r->m[0].fd;
		snprintf(who, sizeof(who), "rank 0 (%s)", r->m[0].where);
		ret = io_all(fd, &hdr, sizeof(hdr), true, deadline, r->timeout_ms, who,
			     "this rank's allgather length");
		if (!ret)
			ret = io_all(fd, (void *)in, len, true, deadline, r->timeout_ms, who,
				     "this rank's allgather contribution");
		/* Rank 0 may have given up on another rank's account while this
		 * one was still sending, and said why before shutting the
		 * connection: that reason, not the broken pipe. */
		if (ret && recv(fd, &h, sizeof(h), MSG_DONTWAIT) == (ssize_t)sizeof(h) &&
		    h.status < 0 && h.status >= -4095)
			ret = 0;
		else if (!ret)
			ret = io_all(fd, &h, sizeof(h), false, deadline, r->timeout_ms, who,
				     "the allgather header");
		if (!ret && (h.status > 0 || h.status < -4095))
			ret = pd_error(-EPROTO, "rendezvous: %s answered the allgather with a bad status %d",
				       who, h.status);
		else if (!ret && h.status)
			ret = pd_error(h.status, "rendezvous: %s gave up the allgather: rank %u failed it (%s)",
				       who, h.culprit, strerror(-h.status));
		else if (!ret && h.len != len)
			ret = pd_error(-EPROTO, "rendezvous: %s gathers %llu bytes per rank, this rank gave %zu",
				       who, (unsigned long long)h.len, len);
		if (!ret)
			ret = io_all(fd, out, len * (size_t)r->size, false, deadline, r->timeout_ms, who,
				     "the allgather result");
		return ret ? broken(r, ret) : 0;
	}
	memcpy(o, in, len);
	for (i = 1; i < r->size; i++) {
		fd = r->m[i].fd;
		snprintf(who, sizeof(who), "rank %d (%s)", i, r->m[i].where);
		ret = io_all(fd, &theirs, sizeof(theirs), false, deadline, r->timeout_ms, who,
			     "its allgather length");
		if (!ret && theirs != len)
			ret = pd_error(-EPROTO, "rendezvous: %s gave %llu bytes to allgather, rank 0 %zu",
				       who, (unsigned long long)theirs, len);
		if (!ret)
			ret = io_all(fd, o + (size_t)i * len, len, false, deadline, r->timeout_ms, who,
				     "its allgather contribution");
		if (ret) {
			give_up(r, ret, i, 1);
			return broken(r, ret);
		}
	}
	h = (struct gather_hdr){ .len = len };
	for (i = 1; i < r->size; i++) {
		fd = r->m[i].fd;
		snprintf(who, sizeof(who), "rank %d (%s)", i, r->m[i].where);
		ret = io_all(fd, &h, sizeof(h), true, deadline, r->timeout_ms, who, "the allgather header");
		if (!ret)
			ret = io_all(fd, o, len * (size_t)r->size, true, deadline, r->timeout_ms, who,
				     "the allgather result");
		if (ret) {
			give_up(r, ret, i, i + 1);
			return broken(r, ret);
		}
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
		if (r->m[i].fd >= 0)
			close(r->m[i].fd);
	}
	free(r);
}
