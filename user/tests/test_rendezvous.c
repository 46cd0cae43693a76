// SPDX-License-Identifier: MIT
/*
 * The tools' rendezvous: every call within the caller's deadline whatever
 * the other side does, a handshake that keeps jobs and rank counts apart,
 * every local address, and IPv6.  Ranks are threads of this process;
 * garbage peers are raw sockets of the test speaking (or not) the wire
 * format below.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <time.h>

#include "kselftest_harness.h"
#include "peerdirect.h"
#include "../tools/listen_port.h"

static int64_t mono_ms_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A port nobody listens on right now, outside the ephemeral range; 0 (and
 * so a failing test) if there is none. */
static uint16_t free_port(void)
{
	int port = listen_port();

	return port < 0 ? 0 : (uint16_t)port;
}

struct rank_arg {
	const char *host, *job;
	uint16_t port;
	int rank, size, timeout_ms, ret;
	int64_t took;
	atomic_int done;
	char err[512];
	struct pd_rdv *rdv;
};

static void *rank_main(void *p)
{
	struct rank_arg *a = p;
	int64_t t0 = mono_ms_now();

	a->ret = pd_rdv_open(a->host, a->port, a->rank, a->size, a->timeout_ms, &a->rdv);
	a->took = mono_ms_now() - t0;
	snprintf(a->err, sizeof(a->err), "%s", pd_last_error());
	atomic_store(&a->done, 1);
	return NULL;
}

static void rank_close(struct rank_arg *a)
{
	if (!a->ret && a->rdv)
		pd_rdv_close(a->rdv);
	a->rdv = NULL;
}

/*
 * The wire format as rendezvous.c speaks it (version 2), for the raw
 * sockets that play garbage peers: a hello, answered at once by WELCOME or
 * REFUSE; GO once every rank joined, answered by ACK; ABORT when rank 0
 * gives up before GO.  Allgather: each rank sends a u64 length and its
 * bytes, rank 0 answers a gather header and everything.
 */
#define W_MAGIC 0x50445256u
#define W_VERSION 2u
enum { K_HELLO = 1, K_WELCOME, K_REFUSE, K_GO, K_ACK, K_ABORT };
struct wire {
	uint32_t magic, version, rank, size;
	uint64_t job;
	int32_t status;
	uint32_t kind;
};
struct wire_hdr {
	int32_t status;
	uint32_t culprit;
	uint64_t len;
};

static struct wire wire_msg(uint32_t kind, uint32_t rank, uint32_t size, uint64_t job)
{
	return (struct wire){ .magic = W_MAGIC, .version = W_VERSION, .rank = rank,
			      .size = size, .job = job, .kind = kind };
}

/* Job id 0 (ranks started by hand): whatever the machine running the tests
 * exports, for the tests of rank 0's rules with job 0 and of raw peers
 * (which send job 0). */
static void job_zero(void)
{
	static const char *const all[] = { "PEERDIRECT_RDV_JOB", "SLURM_JOB_ID", "SLURM_STEP_ID",
					   "OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE" };
	size_t i;

	for (i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		unsetenv(all[i]);
}

/* All of buf within ms: 0, -ETIMEDOUT, -ECONNRESET at EOF, or -errno. */
static int xfer(int fd, void *buf, size_t len, bool sending, int ms)
{
	struct pollfd p = { .fd = fd, .events = sending ? POLLOUT : POLLIN };
	int64_t end = mono_ms_now() + ms;
	char *c = buf;
	ssize_t n;

	while (len) {
		int left = (int)(end - mono_ms_now());

		if (poll(&p, 1, left > 0 ? left : 0) <= 0)
			return -ETIMEDOUT;
		n = sending ? send(fd, c, len, MSG_NOSIGNAL | MSG_DONTWAIT) :
			      recv(fd, c, len, MSG_DONTWAIT);
		if (n == 0)
			return -ECONNRESET;
		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR)
				continue;
			return -errno;
		}
		c += n;
		len -= (size_t)n;
	}
	return 0;
}

/* 0 once the peer closed (EOF or reset), skipping what it sends first;
 * -ETIMEDOUT if it did not within ms. */
static int wait_closed(int fd, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	int64_t end = mono_ms_now() + ms;
	char buf[256];

	for (;;) {
		int left = (int)(end - mono_ms_now());
		ssize_t n;

		if (poll(&p, 1, left > 0 ? left : 0) <= 0)
			return -ETIMEDOUT;
		n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
			return 0;
	}
}

/* A non-blocking connection to 127.0.0.1:port, under way. */
static int raw_connect(uint16_t port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) && errno != EINPROGRESS) {
		close(fd);
		return -1;
	}
	return fd;
}

/* The job raw ranks claim: rank 0's (0 unless a test names one). */
static uint64_t raw_job;

/* A raw rank that joins properly: its hello sent and WELCOME read. */
static int raw_join(uint16_t port, uint32_t rank, uint32_t size)
{
	struct wire w = wire_msg(K_HELLO, rank, size, raw_job);
	int fd = raw_connect(port);

	if (fd < 0)
		return -1;
	if (xfer(fd, &w, sizeof(w), true, 5000) || xfer(fd, &w, sizeof(w), false, 5000) ||
	    w.magic != W_MAGIC || w.kind != K_WELCOME) {
		close(fd);
		return -1;
	}
	return fd;
}

/* The raw rank confirms the group: GO read, ACK sent. */
static int raw_commit(int fd, uint32_t rank, uint32_t size)
{
	struct wire w;

	if (xfer(fd, &w, sizeof(w), false, 5000) || w.kind != K_GO)
		return -1;
	w = wire_msg(K_ACK, rank, size, raw_job);
	return xfer(fd, &w, sizeof(w), true, 5000);
}

/*
 * Name resolution for a connecting rank.  The library's test hook
 * (rendezvous.c, not exported: tests link the static library) replaces
 * getaddrinfo(), so that a test hands rank 1 a list no resolver here
 * gives, such as [an address that drops SYNs, rank 0's].
 */
typedef int (*pd_rdv_resolver)(const char *host, uint16_t port,
			       struct sockaddr_storage *addrs, int max);
void pd_rdv_set_resolver(pd_rdv_resolver fn);

static struct sockaddr_storage fake_addrs[4];
static int nfake_addrs;

static int fake_resolve(const char *host, uint16_t port, struct sockaddr_storage *addrs, int max)
{
	int i;

	for (i = 0; i < nfake_addrs && i < max; i++)
		addrs[i] = fake_addrs[i];
	return i;
}

static void fake_add(const struct sockaddr_in *sa)
{
	memset(&fake_addrs[nfake_addrs], 0, sizeof(fake_addrs[0]));
	memcpy(&fake_addrs[nfake_addrs++], sa, sizeof(*sa));
}

static void fake_add_ip(const char *ip, uint16_t port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };

	inet_pton(AF_INET, ip, &sa.sin_addr);
	fake_add(&sa);
}

/* A listener whose accept queue is full, so that the kernel drops further
 * SYNs: an address behind a filter, as a host's filtered AAAA record. */
struct dropper {
	int lfd, fill[2];
	struct sockaddr_in sa;
};

static int dropper_open(struct dropper *d, const char *ip)
{
	socklen_t len = sizeof(d->sa);
	struct pollfd p;
	int i;

	d->sa = (struct sockaddr_in){ .sin_family = AF_INET };
	d->fill[0] = d->fill[1] = -1;
	inet_pton(AF_INET, ip, &d->sa.sin_addr);
	d->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (d->lfd < 0 || bind(d->lfd, (struct sockaddr *)&d->sa, sizeof(d->sa)) ||
	    listen(d->lfd, 0) || getsockname(d->lfd, (struct sockaddr *)&d->sa, &len))
		return -1;
	for (i = 0; i < 2; i++) {
		d->fill[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		connect(d->fill[i], (struct sockaddr *)&d->sa, sizeof(d->sa));
	}
	/* The first completes and fills the queue; the second's SYN waits. */
	p = (struct pollfd){ .fd = d->fill[0], .events = POLLOUT };
	return poll(&p, 1, 5000) == 1 ? 0 : -1;
}

static void dropper_close(struct dropper *d)
{
	int i;

	for (i = 0; i < 2; i++)
		if (d->fill[i] >= 0)
			close(d->fill[i]);
	if (d->lfd >= 0)
		close(d->lfd);
}

/* Rank 0's queue is full (it never accepts): the kernel drops our SYNs and
 * a blocking connect() would wait minutes. */
TEST(connect_is_bounded_by_the_deadline)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(sa);
	int lfd = socket(AF_INET, SOCK_STREAM, 0), filler[2], i;
	struct pd_rdv *rdv;
	int64_t t0;

	ASSERT_EQ(0, bind(lfd, (struct sockaddr *)&sa, sizeof(sa)));
	ASSERT_EQ(0, listen(lfd, 0));
	ASSERT_EQ(0, getsockname(lfd, (struct sockaddr *)&sa, &len));
	for (i = 0; i < 2; i++) {
		filler[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
		connect(filler[i], (struct sockaddr *)&sa, sizeof(sa));
	}
	usleep(100000);
	t0 = mono_ms_now();
	EXPECT_EQ(-ETIMEDOUT, pd_rdv_open("127.0.0.1", ntohs(sa.sin_port), 1, 2, 400, &rdv));
	/* ends at its deadline, not never; 10x for a loaded machine */
	EXPECT_GT(4000, mono_ms_now() - t0) TH_LOG("took %lld ms for a 400 ms deadline",
						   (long long)(mono_ms_now() - t0));
	for (i = 0; i < 2; i++)
		close(filler[i]);
	close(lfd);
}

/* Rank 0 joins, then never reads: 32 MiB cannot fit in the socket
 * buffers, and a blocking send would wait forever. */
TEST(send_is_bounded_by_the_deadline)
{
	struct rank_arg r0 = { .host = "127.0.0.1", .rank = 0, .size = 2, .timeout_ms = 5000 };
	struct rank_arg r1 = r0;
	size_t big = 32 << 20;
	char *in = calloc(1, big), *out = calloc(2, big);
	pthread_t t;
	int64_t t0;

	ASSERT_TRUE(in && out);
	r0.port = r1.port = free_port();
	r1.rank = 1;
	r1.timeout_ms = 400;
	ASSERT_EQ(0, pthread_create(&t, NULL, rank_main, &r0));
	rank_main(&r1);
	pthread_join(t, NULL);
	ASSERT_EQ(0, r0.ret) TH_LOG("%s", r0.err);
	ASSERT_EQ(0, r1.ret) TH_LOG("%s", r1.err);
	t0 = mono_ms_now();
	EXPECT_EQ(-ETIMEDOUT, pd_rdv_allgather(r1.rdv, in, big, out));
	EXPECT_GT(4000, mono_ms_now() - t0);
	EXPECT_NE(NULL, strstr(pd_last_error(), "not reading")) TH_LOG("%s", pd_last_error());
	pd_rdv_close(r1.rdv);
	pd_rdv_close(r0.rdv);
	free(in);
	free(out);
}

/*
 * A wrong --nranks on one rank fails both sides, saying so.  When a job id
 * names the run, at once.  With job id 0 (ranks started by hand) it may be
 * a leftover of an earlier run: rank 0 turns it away and waits for a rank
 * that fits until its deadline, and only then fails, naming it.
 */
FIXTURE(counts) { int unused; };
FIXTURE_VARIANT(counts) {
	const char *job;	/* NULL: job id 0 */
	int timeout0;
	bool at_once;		/* rank 0 fails before its deadline */
};
FIXTURE_VARIANT_ADD(counts, named_job) { .job = "9", .timeout0 = 3000, .at_once = true };
FIXTURE_VARIANT_ADD(counts, by_hand) { .timeout0 = 1500 };
FIXTURE_SETUP(counts)
{
	job_zero();
	if (variant->job)
		setenv("PEERDIRECT_RDV_JOB", variant->job, 1);
}
FIXTURE_TEARDOWN(counts) { }

TEST_F(counts, rank_counts_must_agree)
{
	struct rank_arg r0 = { .host = "127.0.0.1", .rank = 0, .size = 2, .timeout_ms = variant->timeout0 };
	struct rank_arg r1 = r0;
	pthread_t t;

	r0.port = r1.port = free_port();
	r1.rank = 1;
	r1.size = 3;
	r1.timeout_ms = 3000;
	ASSERT_EQ(0, pthread_create(&t, NULL, rank_main, &r0));
	rank_main(&r1);
	pthread_join(t, NULL);
	EXPECT_EQ(-EPROTO, r0.ret);
	EXPECT_NE(NULL, strstr(r0.err, "started for 3 ranks")) TH_LOG("%s", r0.err);
	EXPECT_EQ(-EPROTO, r1.ret);
	EXPECT_NE(NULL, strstr(r1.err, "started for 2 ranks")) TH_LOG("%s", r1.err);
	/* refused at once, not at its deadline */
	EXPECT_GT(r1.timeout_ms, r1.took) TH_LOG("rank 1 took %lld ms", (long long)r1.took);
	if (variant->at_once) {
		EXPECT_GT(r0.timeout_ms, r0.took) TH_LOG("rank 0 took %lld ms", (long long)r0.took);
	} else {
		/* it waited for a rank that fits (a bound a slow machine only helps) */
		EXPECT_LE(r0.timeout_ms - 100, r0.took) TH_LOG("rank 0 took %lld ms", (long long)r0.took);
	}
	rank_close(&r0);
	rank_close(&r1);
}

/*
 * A rank of an earlier job that is still retrying is turned away, and the
 * job's own rank still gets in: with the job named by hand, and by default
 * from what each launcher exports alike to the ranks of one job.
 */
/* Waits until something listens on @port (a bind there fails); 0 or -1. */
static int wait_bound(uint16_t port, int ms)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int s, ret, one = 1;

	for (; ms > 0; ms -= 10) {
		s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (s < 0)
			return -1;
		/* Without it, rank 0's bind (SO_REUSEADDR too) fails while
		 * this probe holds the port; with it, the probe still fails
		 * against a listener. */
		setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		ret = bind(s, (struct sockaddr *)&a, sizeof(a));
		close(s);
		if (ret && errno == EADDRINUSE)
			return 0;
		usleep(10 * 1000);
	}
	return -1;
}

FIXTURE(job) { int unused; };
FIXTURE_VARIANT(job) {
	const char *var, *ours, *stale;
	const char *var2, *val2;	/* set for both ranks */
	const char *step0, *step1;	/* SLURM_STEP_ID of rank 0, of rank 1 */
};
FIXTURE_VARIANT_ADD(job, by_hand) { .var = "PEERDIRECT_RDV_JOB", .ours = "7", .stale = "6" };
/* Not a number: hashed, not read as 0 like every rank started by hand. */
FIXTURE_VARIANT_ADD(job, by_hand_text) { .var = "PEERDIRECT_RDV_JOB", .ours = "train-a", .stale = "train-b" };
FIXTURE_VARIANT_ADD(job, slurm_job) { .var = "SLURM_JOB_ID", .ours = "4242", .stale = "4241" };
/* One mpirun in a batch job: its ranks see different Slurm steps, and the
 * namespace decides. */
FIXTURE_VARIANT_ADD(job, pmix_over_slurm_steps) {
	.var = "PMIX_NAMESPACE", .ours = "prterun-node-1234@1", .stale = "prterun-node-1234@2",
	.var2 = "SLURM_JOB_ID", .val2 = "4242", .step0 = "0", .step1 = "1",
};
FIXTURE_VARIANT_ADD(job, open_mpi) {
	.var = "OMPI_MCA_ess_base_jobid", .ours = "2818572289", .stale = "2818572290",
};
FIXTURE_VARIANT_ADD(job, pmix) {
	.var = "PMIX_NAMESPACE", .ours = "prterun-node-1234@1", .stale = "prterun-node-1234@2",
};
FIXTURE_SETUP(job)
{
	static const char *const all[] = { "PEERDIRECT_RDV_JOB", "SLURM_JOB_ID", "SLURM_STEP_ID",
					   "OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE" };
	size_t i;

	for (i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		unsetenv(all[i]);
	if (variant->var2)
		setenv(variant->var2, variant->val2, 1);
}
FIXTURE_TEARDOWN(job) { }

TEST_F(job, a_rank_of_another_job_is_turned_away)
{
	struct rank_arg r0 = { .host = "127.0.0.1", .rank = 0, .size = 2, .timeout_ms = 3000 };
	struct rank_arg r1 = r0;
	struct pd_rdv *stale;
	pthread_t t;
	int ret;

	r0.port = r1.port = free_port();
	r1.rank = 1;
	setenv(variant->var, variant->ours, 1);
	if (variant->step0)
		setenv("SLURM_STEP_ID", variant->step0, 1);
	ASSERT_EQ(0, pthread_create(&t, NULL, rank_main, &r0));
	/* Rank 0 reads the job before it binds: once the port is taken, the
	 * environment may change. */
	if (wait_bound(r0.port, 5000)) {
		pthread_join(t, NULL);
		ASSERT_EQ(0, r0.ret) TH_LOG("rank 0 never listened on port %u: %s", r0.port, r0.err);
		ASSERT_TRUE(0) TH_LOG("rank 0 never listened on port %u", r0.port);
	}
	if (variant->step1)
		setenv("SLURM_STEP_ID", variant->step1, 1);
	setenv(variant->var, variant->stale, 1);
	ret = pd_rdv_open("127.0.0.1", r0.port, 1, 2, 2000, &stale);
	EXPECT_EQ(-ESTALE, ret);
	EXPECT_NE(NULL, strstr(pd_last_error(), "another job")) TH_LOG("%s", pd_last_error());
	if (!ret)
		pd_rdv_close(stale);
	setenv(variant->var, variant->ours, 1);
	rank_main(&r1);
	pthread_join(t, NULL);
	unsetenv(variant->var);
	EXPECT_EQ(0, r0.ret) TH_LOG("%s", r0.err);
	EXPECT_EQ(0, r1.ret) TH_LOG("%s", r1.err);
	if (!r0.ret)
		pd_rdv_close(r0.rdv);
	if (!r1.ret)
		pd_rdv_close(r1.rdv);
}

static void *gather0(void *p)
{
	struct rank_arg *a = p;
	char in = 'a', out[2];

	a->ret = pd_rdv_allgather(a->rdv, &in, 1, out);
	return NULL;
}

/* Rank 0 was named 127.0.0.1 (its /etc/hosts entry, say); rank 1 reaches
 * it by another of its addresses. */
TEST(rank_zero_listens_on_every_address)
{
	struct rank_arg r0 = { .host = "127.0.0.1", .rank = 0, .size = 2, .timeout_ms = 3000 };
	struct rank_arg r1 = r0;
	char in = 'b', out[2];
	pthread_t t;

	r0.port = r1.port = free_port();
	r1.rank = 1;
	r1.host = "127.0.0.2";
	ASSERT_EQ(0, pthread_create(&t, NULL, rank_main, &r0));
	rank_main(&r1);
	pthread_join(t, NULL);
	ASSERT_EQ(0, r0.ret) TH_LOG("%s", r0.err);
	ASSERT_EQ(0, r1.ret) TH_LOG("%s", r1.err);
	ASSERT_EQ(0, pthread_create(&t, NULL, gather0, &r0));
	EXPECT_EQ(0, pd_rdv_allgather(r1.rdv, &in, 1, out)) TH_LOG("%s", pd_last_error());
	pthread_join(t, NULL);
	EXPECT_EQ(0, r0.ret);
	EXPECT_EQ('a', out[0]);
	EXPECT_EQ('b', out[1]);
	pd_rdv_close(r1.rdv);
	pd_rdv_close(r0.rdv);
}

TEST(ipv6)
{
	struct sockaddr_in6 sa = { .sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT };
	struct rank_arg r0 = { .host = "::1", .rank = 0, .size = 2, .timeout_ms = 3000 };
	struct rank_arg r1 = r0;
	int fd = socket(AF_INET6, SOCK_STREAM, 0);
	pthread_t t;

	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		if (fd >= 0)
			close(fd);
		SKIP(return, "no IPv6 loopback here");
	}
	close(fd);
	r0.port = r1.port = free_port();
	r1.rank = 1;
	ASSERT_EQ(0, pthread_create(&t, NULL, rank_main, &r0));
	rank_main(&r1);
	pthread_join(t, NULL);
	ASSERT_EQ(0, r0.ret) TH_LOG("%s", r0.err);
	ASSERT_EQ(0, r1.ret) TH_LOG("%s", r1.err);
	pd_rdv_close(r1.rdv);
	pd_rdv_close(r0.rdv);
}

/* ---- N5: every address in time, and both sides agree ------------------ */

/*
 * Rank 0's name resolves to [an address that drops SYNs, rank 0's own]: the
 * second address is tried about 250 ms after the first (happy eyeballs),
 * with the first still under way, instead of after the first's whole
 * deadline.
 */
TEST(a_first_address_that_drops_syns_does_not_hold_up_the_next)
{
	struct rank_arg r0 = { .host = "127.0.0.1", .rank = 0, .size = 2, .timeout_ms = 8000 };
	struct rank_arg r1 = r0;
	struct dropper d;
	pthread_t t;

	ASSERT_EQ(0, dropper_open(&d, "127.0.0.3"));
	r0.port = r1.port = free_port();
	r1.rank = 1;
	r1.host = "rank0.example";
	fake_add(&d.sa);
	fake_add_ip("127.0.0.1", r0.port);
	pd_rdv_set_resolver(fake_resolve);
	ASSERT_EQ(0, pthread_create(&t, NULL, rank_main, &r0));
	rank_main(&r1);
	pthread_join(t, NULL);
	EXPECT_EQ(0, r1.ret) TH_LOG("%s", r1.err);
	EXPECT_EQ(0, r0.ret) TH_LOG("%s", r0.err);
	/* about 250 ms; half the deadline leaves a loaded machine room */
	EXPECT_GT(r1.timeout_ms / 2, r1.took) TH_LOG("rank 1 took %lld ms", (long long)r1.took);
	rank_close(&r0);
	rank_close(&r1);
	pd_rdv_set_resolver(NULL);
	dropper_close(&d);
}

/* A deadline shorter than the delay before the second address: that
 * address is never tried, not tried late. */
TEST(no_connect_starts_after_the_deadline)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct pollfd p = { .events = POLLIN };
	socklen_t len = sizeof(sa);
	struct dropper d;
	struct pd_rdv *rdv;

	ASSERT_EQ(0, dropper_open(&d, "127.0.0.3"));
	p.fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ASSERT_EQ(0, bind(p.fd, (struct sockaddr *)&sa, sizeof(sa)));
	ASSERT_EQ(0, listen(p.fd, 8));
	ASSERT_EQ(0, getsockname(p.fd, (struct sockaddr *)&sa, &len));
	fake_add(&d.sa);
	fake_add(&sa);
	pd_rdv_set_resolver(fake_resolve);
	EXPECT_EQ(-ETIMEDOUT, pd_rdv_open("rank0.example", ntohs(sa.sin_port), 1, 2, 100, &rdv));
	EXPECT_NE(NULL, strstr(pd_last_error(), "127.0.0.3:")) TH_LOG("%s", pd_last_error());
	/* nothing knocked at the second address, then or later */
	EXPECT_EQ(0, poll(&p, 1, 300));
	close(p.fd);
	pd_rdv_set_resolver(NULL);
	dropper_close(&d);
}

/*
 * The review's case: rank 1's deadline passes while its first address
 * drops SYNs.  It fails; rank 0 must not report a group that rank 1 is
 * not part of (it used to admit rank 1's connection, made after rank 1's
 * deadline, and return 0).
 */
TEST(a_rank_that_gives_up_fails_rank_zero_too)
{
	struct rank_arg r0 = { .host = "127.0.0.1", .rank = 0, .size = 2, .timeout_ms = 2500 };
	struct rank_arg r1 = r0;
	struct dropper d;
	pthread_t t;

	job_zero();
	ASSERT_EQ(0, dropper_open(&d, "127.0.0.3"));
	r0.port = r1.port = free_port();
	r1.rank = 1;
	r1.timeout_ms = 150;
	fake_add(&d.sa);
	fake_add_ip("127.0.0.1", r0.port);
	pd_rdv_set_resolver(fake_resolve);
	ASSERT_EQ(0, pthread_create(&t, NULL, rank_main, &r0));
	if (wait_bound(r0.port, 5000)) {
		pthread_join(t, NULL);
		ASSERT_TRUE(0) TH_LOG("rank 0 never listened: %s", r0.err);
	}
	rank_main(&r1);
	pthread_join(t, NULL);
	EXPECT_EQ(-ETIMEDOUT, r1.ret) TH_LOG("%s", r1.err);
	EXPECT_EQ(-ETIMEDOUT, r0.ret) TH_LOG("%s", r0.err);
	rank_close(&r0);
	rank_close(&r1);
	pd_rdv_set_resolver(NULL);
	dropper_close(&d);
}

/* Rank 2 never comes: rank 1, admitted, does not return 0 for a group
 * that never formed, and hears so when rank 0 gives up, not at its own
 * later deadline. */
TEST(no_rank_returns_before_the_group_is_complete)
{
	struct rank_arg r0 = { .host = "127.0.0.1", .rank = 0, .size = 3, .timeout_ms = 1500 };
	struct rank_arg r1 = r0;
	pthread_t t;

	job_zero();
	r0.port = r1.port = free_port();
	r1.rank = 1;
	r1.timeout_ms = 6000;
	ASSERT_EQ(0, pthread_create(&t, NULL, rank_main, &r0));
	rank_main(&r1);
	pthread_join(t, NULL);
	EXPECT_EQ(-ETIMEDOUT, r1.ret) TH_LOG("%s", r1.err);
	EXPECT_NE(NULL, strstr(r1.err, "gave up")) TH_LOG("%s", r1.err);
	EXPECT_GT(r1.timeout_ms, r1.took);
	EXPECT_EQ(-ETIMEDOUT, r0.ret) TH_LOG("%s", r0.err);
	EXPECT_NE(NULL, strstr(r0.err, "missing rank 2")) TH_LOG("%s", r0.err);
	rank_close(&r0);
	rank_close(&r1);
}

/* A rank that got the go-ahead but left without confirming it: rank 0
 * fails, naming it. */
TEST(rank_zero_needs_every_confirmation)
{
	struct rank_arg r0 = { .host = "127.0.0.1", .rank = 0, .size = 2, .timeout_ms = 3000 };
	struct wire w;
	pthread_t t;
	int fd;

	job_zero();
	r0.port = free_port();
	ASSERT_EQ(0, pthread_create(&t, NULL, rank_main, &r0));
	ASSERT_EQ(0, wait_bound(r0.port, 5000));
	fd = raw_join(r0.port, 1, 2);
	EXPECT_LE(0, fd);
	EXPECT_EQ(0, xfer(fd, &w, sizeof(w), false, 5000));
	EXPECT_EQ(K_GO, w.kind);
	close(fd);
	pthread_join(t, NULL);
	EXPECT_EQ(-ECONNRESET, r0.ret) TH_LOG("%s", r0.err);
	EXPECT_NE(NULL, strstr(r0.err, "rank 1 (127.0.0.1:")) TH_LOG("%s", r0.err);
	EXPECT_NE(NULL, strstr(r0.err, "confirmation")) TH_LOG("%s", r0.err);
	rank_close(&r0);
}

/* ---- job id 0: leftovers of earlier runs are turned away --------------- */

TEST(a_stale_rank_of_another_size_is_turned_away)
{
	struct rank_arg r0 = { .host = "127.0.0.1", .rank = 0, .size = 2, .timeout_ms = 5000 };
	struct rank_arg r1 = r0;
	struct pd_rdv *stale;
	pthread_t t;
	int ret;

	job_zero();
	r0.port = r1.port = free_port();
	r1.rank = 1;
	ASSERT_EQ(0, pthread_create(&t, NULL, rank_main, &r0));
	ASSERT_EQ(0, wait_bound(r0.port, 5000));
	ret = pd_rdv_open("127.0.0.1", r0.port, 1, 3, 2000, &stale);
	EXPECT_EQ(-EPROTO, ret);
	EXPECT_NE(NULL, strstr(pd_last_error(), "started for 2 ranks")) TH_LOG("%s", pd_last_error());
	if (!ret)
		pd_rdv_close(stale);
	rank_main(&r1);
	pthread_join(t, NULL);
	EXPECT_EQ(0, r0.ret) TH_LOG("%s", r0.err);
	EXPECT_EQ(0, r1.ret) TH_LOG("%s", r1.err);
	rank_close(&r0);
	rank_close(&r1);
}

/* A process that held rank 1 and gave up before the group formed leaves
 * rank 1 to the next comer. */
TEST(a_rank_that_left_frees_its_place)
{
	struct rank_arg r0 = { .host = "127.0.0.1", .rank = 0, .size = 3, .timeout_ms = 5000 };
	struct rank_arg r1 = r0, r2 = r0;
	pthread_t t0, t1;
	int fd;

	job_zero();
	r0.port = r1.port = r2.port = free_port();
	r1.rank = 1;
	r2.rank = 2;
	ASSERT_EQ(0, pthread_create(&t0, NULL, rank_main, &r0));
	ASSERT_EQ(0, wait_bound(r0.port, 5000));
	fd = raw_join(r0.port, 1, 3);
	EXPECT_LE(0, fd);
	close(fd);
	ASSERT_EQ(0, pthread_create(&t1, NULL, rank_main, &r1));
	rank_main(&r2);
	pthread_join(t1, NULL);
	pthread_join(t0, NULL);
	EXPECT_EQ(0, r0.ret) TH_LOG("%s", r0.err);
	EXPECT_EQ(0, r1.ret) TH_LOG("%s", r1.err);
	EXPECT_EQ(0, r2.ret) TH_LOG("%s", r2.err);
	rank_close(&r0);
	rank_close(&r1);
	rank_close(&r2);
}

/* Where a job id names the run, two processes with one rank are a
 * misconfiguration: rank 0 fails at once, and so does the second. */
TEST(a_duplicate_rank_of_a_named_job_fails_at_once)
{
	struct rank_arg r0 = { .host = "127.0.0.1", .rank = 0, .size = 3, .timeout_ms = 5000 };
	struct rank_arg r1 = r0;
	pthread_t t;
	int fd;

	job_zero();
	setenv("PEERDIRECT_RDV_JOB", "9", 1);
	raw_job = 9;
	r0.port = r1.port = free_port();
	r1.rank = 1;
	r1.timeout_ms = 3000;
	ASSERT_EQ(0, pthread_create(&t, NULL, rank_main, &r0));
	ASSERT_EQ(0, wait_bound(r0.port, 5000));
	fd = raw_join(r0.port, 1, 3);
	EXPECT_LE(0, fd);
	rank_main(&r1);
	pthread_join(t, NULL);
	EXPECT_EQ(-EADDRINUSE, r1.ret) TH_LOG("%s", r1.err);
	EXPECT_EQ(-EPROTO, r0.ret) TH_LOG("%s", r0.err);
	EXPECT_NE(NULL, strstr(r0.err, "rank 1 joined twice")) TH_LOG("%s", r0.err);
	EXPECT_GT(r0.timeout_ms, r0.took);
	close(fd);
	rank_close(&r0);
	rank_close(&r1);
}

/* ---- item 4: garbage connecting to rank 0 ------------------------------ */

/*
 * Each variant: connections of one kind reach rank 0 first.  With a real
 * rank 1 after them, both ranks complete within the deadline and each
 * stranger is answered (a refusal with its errno when it speaks the
 * rendezvous) and closed.  Alone, rank 0 fails at its deadline naming what
 * it turned away and where from.
 */
FIXTURE(stranger) { int unused; };
FIXTURE_VARIANT(stranger) {
	int copies;		/* connections of this kind (1 if 0) */
	const char *bytes;	/* 32 bytes sent instead of a hello */
	size_t cut;		/* only this much of the hello */
	bool silent;		/* sends nothing */
	bool hang_up;		/* closes after sending */
	bool dribble;		/* one byte per second */
	bool extra;		/* 32 bytes more behind a whole hello */
	bool dup;		/* claims rank 1, held by a rank of 3 */
	uint32_t version, kind, rank, size;	/* 0: a good hello's */
	uint64_t job;
	int refusal;		/* the status of rank 0's answer; 0: none */
	int alone;		/* rank 0's error at its deadline */
	const char *note;	/* in that error */
};
FIXTURE_VARIANT_ADD(stranger, http) {
	.bytes = "GET / HTTP/1.1\r\nHost: pd\r\n\r\n\r\n\r\n",
	.alone = -ETIMEDOUT, .note = "not a rendezvous hello",
};
FIXTURE_VARIANT_ADD(stranger, old_version) {
	.version = 1, .refusal = -EPROTONOSUPPORT, .alone = -ETIMEDOUT, .note = "version 1",
};
FIXTURE_VARIANT_ADD(stranger, future_version) {
	.version = 99, .refusal = -EPROTONOSUPPORT, .alone = -ETIMEDOUT, .note = "version 99",
};
FIXTURE_VARIANT_ADD(stranger, another_job) {
	.job = 12345, .refusal = -ESTALE, .alone = -ETIMEDOUT, .note = "job 12345",
};
/* job id 0: maybe a leftover, turned away; alone, the likely culprit */
FIXTURE_VARIANT_ADD(stranger, wrong_size) {
	.size = 3, .refusal = -EPROTO, .alone = -EPROTO, .note = "started for 3 ranks",
};
FIXTURE_VARIANT_ADD(stranger, rank_out_of_range) {
	.rank = 5, .refusal = -ERANGE, .alone = -ETIMEDOUT, .note = "rank 5",
};
FIXTURE_VARIANT_ADD(stranger, not_a_hello) {
	.kind = K_ACK, .refusal = -EBADMSG, .alone = -ETIMEDOUT, .note = "kind 5",
};
FIXTURE_VARIANT_ADD(stranger, more_than_a_hello) {
	.extra = true, .refusal = -EBADMSG, .alone = -ETIMEDOUT, .note = "more than a hello",
};
FIXTURE_VARIANT_ADD(stranger, duplicate_rank) {
	.dup = true, .size = 3, .refusal = -EADDRINUSE, .alone = -EPROTO, .note = "rank 1",
};
FIXTURE_VARIANT_ADD(stranger, truncated) {
	.cut = 10, .hang_up = true, .alone = -ETIMEDOUT, .note = "after 10 of 32 bytes",
};
FIXTURE_VARIANT_ADD(stranger, truncated_then_silent) {
	.cut = 10, .alone = -ETIMEDOUT, .note = "10 of 32 bytes",
};
FIXTURE_VARIANT_ADD(stranger, silent) {
	.copies = 8, .silent = true, .alone = -ETIMEDOUT, .note = "0 of 32 bytes",
};
FIXTURE_VARIANT_ADD(stranger, slowloris) {
	.copies = 8, .dribble = true, .alone = -ETIMEDOUT, .note = "of 32 bytes",
};
FIXTURE_VARIANT_ADD(stranger, flood) {
	.copies = 100, .silent = true, .alone = -ETIMEDOUT, .note = "of 32 bytes",
};
FIXTURE_SETUP(stranger)
{
	job_zero();
}
FIXTURE_TEARDOWN(stranger) { }

struct dribbler {
	const int *fds;
	int n;
	const char *bytes;
	atomic_int stop;
};

static void *dribble(void *p)
{
	struct dribbler *d = p;
	int i, k, tick;

	for (i = 0; i < 32 && !atomic_load(&d->stop); i++) {
		for (k = 0; k < d->n; k++)
			send(d->fds[k], d->bytes + i, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
		for (tick = 0; tick < 10 && !atomic_load(&d->stop); tick++)
			usleep(100 * 1000);
	}
	return NULL;
}

/* Opens the variant's connections to port and starts them talking. */
static int strangers_start(const FIXTURE_VARIANT(stranger) *v, uint16_t port, int *fds,
			   struct wire *w, char *buf, struct dribbler *d, pthread_t *dt)
{
	int n = v->copies ? v->copies : 1, i;
	size_t len = sizeof(*w);

	*w = wire_msg(v->kind ? v->kind : K_HELLO, v->rank ? v->rank : 1,
		      v->size ? v->size : 2, v->job);
	if (v->version)
		w->version = v->version;
	memcpy(buf, v->bytes ? v->bytes : (const char *)w, sizeof(*w));
	if (v->extra) {
		memset(buf + sizeof(*w), 'x', sizeof(*w));
		len += sizeof(*w);
	}
	if (v->cut)
		len = v->cut;
	for (i = 0; i < n; i++) {
		fds[i] = raw_connect(port);
		if (fds[i] < 0)
			return -1;
		if (v->silent || v->dribble)
			continue;
		if (xfer(fds[i], buf, len, true, 5000))
			return -1;
		if (v->hang_up) {
			close(fds[i]);
			fds[i] = -1;
		}
	}
	if (v->dribble) {
		*d = (struct dribbler){ .fds = fds, .n = n, .bytes = buf };
		return pthread_create(dt, NULL, dribble, d) ? -1 : 0;
	}
	return 0;
}

static void strangers_stop(int *fds, int n, struct dribbler *d, pthread_t *dt, bool dribbling)
{
	int i;

	if (dribbling) {
		atomic_store(&d->stop, 1);
		pthread_join(*dt, NULL);
	}
	for (i = 0; i < n; i++)
		if (fds[i] >= 0)
			close(fds[i]);
}

TEST_F(stranger, is_turned_away_and_the_ranks_complete)
{
	struct rank_arg r0 = { .host = "127.0.0.1", .rank = 0, .size = 2, .timeout_ms = 5000 };
	struct rank_arg r1 = r0;
	int n = variant->copies ? variant->copies : 1, fds[100], i, holder = -1;
	struct dribbler d;
	struct wire w;
	char buf[64];
	pthread_t t, dt;

	r0.port = r1.port = free_port();
	r1.rank = 1;
	if (variant->dup) {
		/* a raw rank 1 holds the place; the real ranks are 0 and 2 */
		r0.size = r1.size = 3;
		r1.rank = 2;
	}
	ASSERT_EQ(0, pthread_create(&t, NULL, rank_main, &r0));
	ASSERT_EQ(0, wait_bound(r0.port, 5000));
	if (variant->dup) {
		holder = raw_join(r0.port, 1, 3);
		ASSERT_LE(0, holder);
	}
	ASSERT_EQ(0, strangers_start(variant, r0.port, fds, &w, buf, &d, &dt));
	if (variant->dup)
		EXPECT_EQ(0, xfer(fds[0], &w, sizeof(w), false, 5000));	/* refused first */
	rank_main(&r1);
	if (variant->dup)
		EXPECT_EQ(0, raw_commit(holder, 1, 3));
	pthread_join(t, NULL);
	EXPECT_EQ(0, r0.ret) TH_LOG("%s", r0.err);
	EXPECT_EQ(0, r1.ret) TH_LOG("%s", r1.err);
	/* Strangers are heard side by side, not one after the other (8 silent
	 * ones took 2 s each); half the deadline leaves a loaded machine room. */
	EXPECT_GT(r1.timeout_ms / 2, r1.took) TH_LOG("rank %d took %lld ms", r1.rank, (long long)r1.took);
	for (i = 0; i < n; i++) {
		if (fds[i] < 0)
			continue;
		if (variant->refusal) {
			if (!variant->dup)
				EXPECT_EQ(0, xfer(fds[i], &w, sizeof(w), false, 5000));
			EXPECT_EQ(W_MAGIC, w.magic);
			EXPECT_EQ(K_REFUSE, w.kind);
			EXPECT_EQ(variant->refusal, w.status);
		}
		EXPECT_EQ(0, wait_closed(fds[i], 5000)) TH_LOG("stranger %d still open", i);
	}
	strangers_stop(fds, n, &d, &dt, variant->dribble);
	if (holder >= 0)
		close(holder);
	rank_close(&r0);
	rank_close(&r1);
}

TEST_F(stranger, is_named_when_rank_zero_gives_up)
{
	struct rank_arg r0 = { .host = "127.0.0.1", .rank = 0, .size = 2, .timeout_ms = 1500 };
	int n = variant->copies ? variant->copies : 1, fds[100], holder = -1;
	struct dribbler d;
	struct wire w;
	char buf[64];
	pthread_t t, dt;

	r0.port = free_port();
	if (variant->dup)
		r0.size = 3;
	ASSERT_EQ(0, pthread_create(&t, NULL, rank_main, &r0));
	ASSERT_EQ(0, wait_bound(r0.port, 5000));
	if (variant->dup) {
		holder = raw_join(r0.port, 1, 3);
		ASSERT_LE(0, holder);
	}
	ASSERT_EQ(0, strangers_start(variant, r0.port, fds, &w, buf, &d, &dt));
	pthread_join(t, NULL);
	EXPECT_EQ(variant->alone, r0.ret) TH_LOG("%s", r0.err);
	EXPECT_NE(NULL, strstr(r0.err, variant->note)) TH_LOG("%s", r0.err);
	EXPECT_NE(NULL, strstr(r0.err, "127.0.0.1:")) TH_LOG("%s", r0.err);
	EXPECT_GT(3 * r0.timeout_ms, r0.took);
	if (holder >= 0) {
		/* the rank that had joined hears why, at once */
		EXPECT_EQ(0, xfer(holder, &w, sizeof(w), false, 5000));
		EXPECT_EQ(K_ABORT, w.kind);
		EXPECT_EQ(variant->alone, w.status);
		close(holder);
	}
	strangers_stop(fds, n, &d, &dt, variant->dribble);
	rank_close(&r0);
}

/* ---- item 4: garbage answering a rank as rank 0 ------------------------ */

enum { SAY, RAW, CUT, HANG_UP, SILENT, DRIBBLE };
FIXTURE(impostor) { int unused; };
FIXTURE_VARIANT(impostor) {
	bool welcome;		/* a proper WELCOME first */
	int act;
	const char *bytes;	/* RAW: 32 bytes */
	uint32_t version, kind, rank, size;	/* SAY: 0 is WELCOME's, or GO's after one */
	bool other_job;
	int32_t status;
	int expect;
	const char *note;
};
FIXTURE_VARIANT_ADD(impostor, http) {
	.act = RAW, .bytes = "HTTP/1.1 400 Bad Request\r\n\r\n\r\n\r\n",
	.expect = -EPROTO, .note = "not a peerdirect rendezvous",
};
FIXTURE_VARIANT_ADD(impostor, old_version) {
	.version = 1, .expect = -EPROTONOSUPPORT, .note = "version 1",
};
FIXTURE_VARIANT_ADD(impostor, future_version) {
	.version = 99, .expect = -EPROTONOSUPPORT, .note = "version 99",
};
FIXTURE_VARIANT_ADD(impostor, other_job) {
	.other_job = true, .expect = -EPROTO, .note = "job 1",
};
FIXTURE_VARIANT_ADD(impostor, wrong_size) {
	.size = 5, .expect = -EPROTO, .note = "of 5",
};
FIXTURE_VARIANT_ADD(impostor, wrong_rank) {
	.rank = 7, .expect = -EPROTO, .note = "rank 7",
};
FIXTURE_VARIANT_ADD(impostor, unknown_kind) {
	.kind = 77, .expect = -EPROTO, .note = "kind 77",
};
FIXTURE_VARIANT_ADD(impostor, refusal_with_a_bad_status) {
	.kind = K_REFUSE, .status = 5, .expect = -EPROTO, .note = "status 5",
};
FIXTURE_VARIANT_ADD(impostor, refused_as_another_job) {
	.kind = K_REFUSE, .status = -ESTALE, .expect = -ESTALE, .note = "another job",
};
FIXTURE_VARIANT_ADD(impostor, refused_as_a_duplicate) {
	.kind = K_REFUSE, .status = -EADDRINUSE, .expect = -EADDRINUSE, .note = "already",
};
FIXTURE_VARIANT_ADD(impostor, truncated) {
	.act = CUT, .expect = -ECONNRESET, .note = "after 10 of 32 bytes",
};
FIXTURE_VARIANT_ADD(impostor, hangs_up) {
	.act = HANG_UP, .expect = -ECONNRESET, .note = "closed the connection before",
};
FIXTURE_VARIANT_ADD(impostor, silent) {
	.act = SILENT, .expect = -ETIMEDOUT, .note = "0 of 32 bytes",
};
FIXTURE_VARIANT_ADD(impostor, slowloris) {
	.act = DRIBBLE, .expect = -ETIMEDOUT, .note = "of 32 bytes",
};
FIXTURE_VARIANT_ADD(impostor, welcome_then_garbage) {
	.welcome = true, .act = RAW, .bytes = "HTTP/1.1 400 Bad Request\r\n\r\n\r\n\r\n",
	.expect = -EPROTO, .note = "not a peerdirect rendezvous",
};
FIXTURE_VARIANT_ADD(impostor, welcome_then_silence) {
	.welcome = true, .act = SILENT, .expect = -ETIMEDOUT, .note = "not all 2 ranks joined",
};
FIXTURE_VARIANT_ADD(impostor, welcome_then_hang_up) {
	.welcome = true, .act = HANG_UP, .expect = -ECONNRESET, .note = "go-ahead",
};
FIXTURE_VARIANT_ADD(impostor, welcome_then_abort) {
	.welcome = true, .kind = K_ABORT, .status = -ETIMEDOUT, .expect = -ETIMEDOUT,
	.note = "gave up",
};
FIXTURE_SETUP(impostor)
{
	job_zero();
}
FIXTURE_TEARDOWN(impostor) { }

/* A listener on 127.0.0.1 that plays rank 0; its port in *port. */
static int fake_rank0(uint16_t *port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) || listen(fd, 8) ||
	    getsockname(fd, (struct sockaddr *)&sa, &len)) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	*port = ntohs(sa.sin_port);
	return fd;
}

static int accept_within(int lfd, int ms)
{
	struct pollfd p = { .fd = lfd, .events = POLLIN };

	return poll(&p, 1, ms) == 1 ? accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK) : -1;
}

TEST_F(impostor, fails_the_rank_clearly_within_its_deadline)
{
	struct rank_arg r1 = { .host = "127.0.0.1", .rank = 1, .size = 2, .timeout_ms = 1500 };
	struct wire hello, w;
	int lfd, fd, i;
	pthread_t t;

	lfd = fake_rank0(&r1.port);
	ASSERT_LE(0, lfd);
	ASSERT_EQ(0, pthread_create(&t, NULL, rank_main, &r1));
	fd = accept_within(lfd, 5000);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, xfer(fd, &hello, sizeof(hello), false, 5000));
	EXPECT_EQ(W_MAGIC, hello.magic);
	EXPECT_EQ(W_VERSION, hello.version);
	EXPECT_EQ(K_HELLO, hello.kind);
	if (variant->welcome) {
		w = wire_msg(K_WELCOME, 1, 2, hello.job);
		EXPECT_EQ(0, xfer(fd, &w, sizeof(w), true, 5000));
	}
	w = wire_msg(variant->kind ? variant->kind : variant->welcome ? K_GO : K_WELCOME,
		     variant->rank ? variant->rank : 1, variant->size ? variant->size : 2,
		     hello.job ^ variant->other_job);
	if (variant->version)
		w.version = variant->version;
	w.status = variant->status;
	switch (variant->act) {
	case SAY:
		EXPECT_EQ(0, xfer(fd, &w, sizeof(w), true, 5000));
		break;
	case RAW:
		EXPECT_EQ(0, xfer(fd, (void *)variant->bytes, sizeof(w), true, 5000));
		break;
	case CUT:
		EXPECT_EQ(0, xfer(fd, &w, 10, true, 5000));
		/* fall through */
	case HANG_UP:
		close(fd);
		fd = -1;
		break;
	case DRIBBLE:
		for (i = 0; i < 32 && !atomic_load(&r1.done); i++) {
			send(fd, (char *)&w + i, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
			usleep(1000 * 1000);
		}
		break;
	}
	pthread_join(t, NULL);
	EXPECT_EQ(variant->expect, r1.ret) TH_LOG("%s", r1.err);
	EXPECT_NE(NULL, strstr(r1.err, variant->note)) TH_LOG("%s", r1.err);
	/* from where: the address rank 0's name led to */
	EXPECT_NE(NULL, strstr(r1.err, "127.0.0.1:")) TH_LOG("%s", r1.err);
	EXPECT_GT(3 * r1.timeout_ms, r1.took);
	if (fd >= 0)
		close(fd);
	close(lfd);
	rank_close(&r1);
}

/* ---- item 4: garbage in allgather --------------------------------------- */

struct gather_arg {
	struct pd_rdv *rdv;
	int ret;
	int64_t took;
	char in[8], out[3 * 8], err[512];
};

static void *gather_main(void *p)
{
	struct gather_arg *g = p;
	int64_t t0 = mono_ms_now();

	g->ret = pd_rdv_allgather(g->rdv, g->in, sizeof(g->in), g->out);
	g->took = mono_ms_now() - t0;
	snprintf(g->err, sizeof(g->err), "%s", pd_last_error());
	return NULL;
}

/*
 * Ranks 0 and 2 are real, rank 1 a raw socket that joins properly and
 * then sends a bad allgather: rank 0 fails naming it, and rank 2 hears of
 * it at once instead of at its deadline.
 */
FIXTURE(bad_member) { int unused; };
FIXTURE_VARIANT(bad_member) {
	uint64_t len;		/* the length it announces */
	size_t sends;		/* bytes of its contribution it sends */
	bool hang_up;
	int expect;
	const char *note;
};
FIXTURE_VARIANT_ADD(bad_member, bad_length) {
	.len = 4096, .expect = -EPROTO, .note = "4096 bytes",
};
FIXTURE_VARIANT_ADD(bad_member, truncated) {
	.len = 8, .sends = 3, .hang_up = true, .expect = -ECONNRESET, .note = "after 3 of 8 bytes",
};
FIXTURE_SETUP(bad_member)
{
	job_zero();
}
FIXTURE_TEARDOWN(bad_member) { }

TEST_F(bad_member, fails_every_rank_at_once)
{
	struct rank_arg r0 = { .host = "127.0.0.1", .rank = 0, .size = 3, .timeout_ms = 5000 };
	struct rank_arg r2 = r0;
	struct gather_arg g0 = { .in = "rank0" }, g2 = { .in = "rank2" };
	char junk[8] = "junk";
	pthread_t t0, t2;
	int fd;

	r0.port = r2.port = free_port();
	r2.rank = 2;
	ASSERT_EQ(0, pthread_create(&t0, NULL, rank_main, &r0));
	ASSERT_EQ(0, wait_bound(r0.port, 5000));
	fd = raw_join(r0.port, 1, 3);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, pthread_create(&t2, NULL, rank_main, &r2));
	EXPECT_EQ(0, raw_commit(fd, 1, 3));
	pthread_join(t2, NULL);
	pthread_join(t0, NULL);
	ASSERT_EQ(0, r0.ret) TH_LOG("%s", r0.err);
	ASSERT_EQ(0, r2.ret) TH_LOG("%s", r2.err);

	g0.rdv = r0.rdv;
	g2.rdv = r2.rdv;
	ASSERT_EQ(0, pthread_create(&t0, NULL, gather_main, &g0));
	ASSERT_EQ(0, pthread_create(&t2, NULL, gather_main, &g2));
	EXPECT_EQ(0, xfer(fd, (void *)&variant->len, sizeof(variant->len), true, 5000));
	if (variant->sends)
		EXPECT_EQ(0, xfer(fd, junk, variant->sends, true, 5000));
	if (variant->hang_up) {
		close(fd);
		fd = -1;
	}
	pthread_join(t0, NULL);
	pthread_join(t2, NULL);
	EXPECT_EQ(variant->expect, g0.ret) TH_LOG("%s", g0.err);
	EXPECT_NE(NULL, strstr(g0.err, "rank 1 (127.0.0.1:")) TH_LOG("%s", g0.err);
	EXPECT_NE(NULL, strstr(g0.err, variant->note)) TH_LOG("%s", g0.err);
	EXPECT_EQ(variant->expect, g2.ret) TH_LOG("%s", g2.err);
	EXPECT_NE(NULL, strstr(g2.err, "rank 1")) TH_LOG("%s", g2.err);
	EXPECT_GT(r2.timeout_ms, g2.took) TH_LOG("rank 2 took %lld ms", (long long)g2.took);
	/* the streams are out of step: later calls fail at once */
	EXPECT_EQ(variant->expect, pd_rdv_barrier(r2.rdv));
	if (fd >= 0)
		close(fd);
	rank_close(&r0);
	rank_close(&r2);
}

/* Rank 0's answer to an allgather announces another length. */
TEST(a_bad_length_from_rank_zero)
{
	struct rank_arg r1 = { .host = "127.0.0.1", .rank = 1, .size = 2, .timeout_ms = 3000 };
	struct gather_arg g1 = { .in = "rank1" };
	struct wire hello, w;
	struct wire_hdr h = { .len = 9999 };
	uint64_t theirs;
	char data[8];
	int lfd, fd;
	pthread_t t;

	job_zero();
	lfd = fake_rank0(&r1.port);
	ASSERT_LE(0, lfd);
	ASSERT_EQ(0, pthread_create(&t, NULL, rank_main, &r1));
	fd = accept_within(lfd, 5000);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, xfer(fd, &hello, sizeof(hello), false, 5000));
	w = wire_msg(K_WELCOME, 1, 2, hello.job);
	EXPECT_EQ(0, xfer(fd, &w, sizeof(w), true, 5000));
	w.kind = K_GO;
	EXPECT_EQ(0, xfer(fd, &w, sizeof(w), true, 5000));
	EXPECT_EQ(0, xfer(fd, &w, sizeof(w), false, 5000));
	EXPECT_EQ(K_ACK, w.kind);
	pthread_join(t, NULL);
	ASSERT_EQ(0, r1.ret) TH_LOG("%s", r1.err);
	g1.rdv = r1.rdv;
	ASSERT_EQ(0, pthread_create(&t, NULL, gather_main, &g1));
	EXPECT_EQ(0, xfer(fd, &theirs, sizeof(theirs), false, 5000));
	EXPECT_EQ(8, theirs);
	EXPECT_EQ(0, xfer(fd, data, sizeof(data), false, 5000));
	EXPECT_EQ(0, xfer(fd, &h, sizeof(h), true, 5000));
	pthread_join(t, NULL);
	EXPECT_EQ(-EPROTO, g1.ret) TH_LOG("%s", g1.err);
	EXPECT_NE(NULL, strstr(g1.err, "9999")) TH_LOG("%s", g1.err);
	EXPECT_NE(NULL, strstr(g1.err, "127.0.0.1:")) TH_LOG("%s", g1.err);
	close(fd);
	close(lfd);
	rank_close(&r1);
}

TEST_HARNESS_MAIN
