// SPDX-License-Identifier: MIT
/*
 * The tools' rendezvous: every call within the caller's deadline whatever
 * the other side does, a handshake that keeps jobs and rank counts apart,
 * every local address, and IPv6.  Ranks are threads of this process.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
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
	char err[256];
	struct pd_rdv *rdv;
};

static void *rank_main(void *p)
{
	struct rank_arg *a = p;

	a->ret = pd_rdv_open(a->host, a->port, a->rank, a->size, a->timeout_ms, &a->rdv);
	snprintf(a->err, sizeof(a->err), "%s", pd_last_error());
	return NULL;
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

/* A wrong --nranks on one rank fails both sides at once, saying so. */
TEST(rank_counts_must_agree)
{
	struct rank_arg r0 = { .host = "127.0.0.1", .rank = 0, .size = 2, .timeout_ms = 3000 };
	struct rank_arg r1 = r0;
	pthread_t t;

	r0.port = r1.port = free_port();
	r1.rank = 1;
	r1.size = 3;
	ASSERT_EQ(0, pthread_create(&t, NULL, rank_main, &r0));
	rank_main(&r1);
	pthread_join(t, NULL);
	EXPECT_EQ(-EPROTO, r0.ret);
	EXPECT_NE(NULL, strstr(r0.err, "started for 3 ranks")) TH_LOG("%s", r0.err);
	EXPECT_EQ(-EPROTO, r1.ret);
	EXPECT_NE(NULL, strstr(r1.err, "started for 2 ranks")) TH_LOG("%s", r1.err);
	if (!r0.ret)
		pd_rdv_close(r0.rdv);
	if (!r1.ret)
		pd_rdv_close(r1.rdv);
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
	EXPECT_EQ(-EPROTO, ret);
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

TEST_HARNESS_MAIN
