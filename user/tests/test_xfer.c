// SPDX-License-Identifier: MIT
/* Two-process transfers of host memory over tcp and shm. */
#include <pthread.h>
#include <sys/mman.h>

#include "kselftest_harness.h"
#include "peer_pair.h"
#include "../tools/listen_port.h"

static void *map_buf(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

/* Rank 0 sends each size to rank 1, which checks every byte. */
struct sizes_arg {
	const size_t *sizes;
	int n;
};

static int exchange_sizes(struct peer *p, void *arg)
{
	struct sizes_arg *a = arg;
	size_t max = 0, got;
	struct pd_req *req;
	struct pd_mr *mr;
	long bad;
	void *buf;
	int i, ret = 0;

	for (i = 0; i < a->n; i++)
		max = a->sizes[i] > max ? a->sizes[i] : max;
	buf = map_buf(max);
	if (!buf)
		return -ENOMEM;
	ret = pd_mr_reg_host(p->fab, buf, max, 0, &mr);
	for (i = 0; !ret && i < a->n; i++) {
		size_t len = a->sizes[i];

		if (p->rank == 0) {
			fill(buf, len, len);
			ret = pd_tsend(p->fab, mr, 0, len, p->other, (uint64_t)i, &req);
		} else {
			memset(buf, 0, len);
			ret = pd_trecv(p->fab, mr, 0, len, p->other, (uint64_t)i, &req);
		}
		if (ret)
			break;
		ret = pd_wait(req, WAIT_MS, &got);
		pd_req_free(req);
		if (!ret && got != len) {
			fprintf(stderr, "# size %zu: completed %zu bytes\n", len, got);
			ret = -EIO;
		}
		if (!ret && p->rank == 1 && (bad = check(buf, len, len)) >= 0) {
			fprintf(stderr, "# size %zu: byte %ld wrong\n", len, bad);
			ret = -EIO;
		}
	}
	if (mr)
		pd_mr_dereg(mr);
	munmap(buf, max);
	return ret;
}

FIXTURE(pair) {
	int status;
};

FIXTURE_VARIANT(pair) {
	const char *provider;
	bool huge;
	const char *truncation_broken;
};

FIXTURE_VARIANT_ADD(pair, tcp) { .provider = "tcp", .huge = true };
FIXTURE_VARIANT_ADD(pair, shm) {
	.provider = "shm",
	/* Measured: 1.17 never returns from fi_cq_read, 2.1 never completes
	 * the receive (no error entry within 5 s). */
	.truncation_broken = "libfabric shm reports no truncation (1.17 spins in fi_cq_read, 2.1 never completes the receive)",
};

FIXTURE_SETUP(pair) { self->status = 0; }
FIXTURE_TEARDOWN(pair) {}

TEST_F_TIMEOUT(pair, sizes_with_data_checked, 120)
{
	static const size_t small[] = { 1, 7, 4096, 65537, 1 << 20, (4 << 20) + 3, 64 << 20 };
	static const size_t huge[] = { 256 << 20 };
	/* Under valgrind (make valgrind) the big sizes would outlast the
	 * harness timeout, and under TSan (make check-tsan) a loaded machine
	 * (PEERDIRECT_TEST_QUICK): they stay in make check and check-asan. */
	bool quick = getenv("PEERDIRECT_TEST_QUICK") != NULL;
	struct sizes_arg a = { small, quick ? 6 : 7 };

	/*
	 * Every byte of every size, not liveness (killed_peer_gives_error_not_hang
	 * has that): under ThreadSanitizer beside two CPU hogs a rank copying
	 * 256 MiB went 5 s without answering the other's probe, and the default
	 * 10 s peer timeout declared it gone.  The ranks inherit this.
	 */
	setenv("PEERDIRECT_PEER_TIMEOUT_MS", "120000", 1);
	ASSERT_EQ(0, run_pair(variant->provider, NULL, exchange_sizes, &a, &self->status));
	if (variant->huge && !quick) {
		a = (struct sizes_arg) { huge, 1 };
		ASSERT_EQ(0, run_pair(variant->provider, NULL, exchange_sizes, &a, &self->status));
	}
}

/* Chunking with a small wire chunk: 1 MiB in 16 pieces, odd tail. */
TEST_F(pair, small_chunks_reassemble)
{
	static const size_t sizes[] = { (1 << 20) + 17 };
	struct sizes_arg a = { sizes, 1 };
	struct pd_fabric_attr attr;

	pd_fabric_attr_init(&attr);
	attr.chunk_size = 64 << 10;
	ASSERT_EQ(0, run_pair(variant->provider, &attr, exchange_sizes, &a, &self->status));
}

#define MANY 200
#define SLICE 4096

/* Many outstanding requests; the receiver posts in reverse tag order. */
static int many_outstanding(struct peer *p, void *arg)
{
	struct pd_req *req[MANY];
	struct pd_mr *mr;
	char *buf = map_buf(MANY * SLICE);
	int i, ret, posted = 0;

	(void)arg;
	if (!buf)
		return -ENOMEM;
	ret = pd_mr_reg_host(p->fab, buf, MANY * SLICE, 0, &mr);
	for (i = 0; !ret && i < MANY; i++, posted++) {
		int t = p->rank == 0 ? i : MANY - 1 - i;

		if (p->rank == 0) {
			fill(buf + (size_t)t * SLICE, SLICE, (uint64_t)t);
			ret = pd_tsend(p->fab, mr, (size_t)t * SLICE, SLICE, p->other, (uint64_t)t, &req[i]);
		} else {
			ret = pd_trecv(p->fab, mr, (size_t)t * SLICE, SLICE, p->other, (uint64_t)t, &req[i]);
		}
	}
	for (i = 0; i < posted; i++) {
		if (!ret)
			ret = pd_wait(req[i], WAIT_MS, NULL);
		pd_req_free(req[i]);
	}
	for (i = 0; !ret && p->rank == 1 && i < MANY; i++) {
		if (check(buf + (size_t)i * SLICE, SLICE, (uint64_t)i) >= 0)
			ret = -EIO;
	}
	if (!ret)
		ret = oob_sync(p);	/* the sender's buffer lives until the data landed */
	if (mr)
		pd_mr_dereg(mr);
	munmap(buf, MANY * SLICE);
	return ret;
}

TEST_F(pair, many_outstanding_requests)
{
	ASSERT_EQ(0, run_pair(variant->provider, NULL, many_outstanding, NULL, &self->status));
}

/* RMA write of a multi-chunk range at an offset, then a tagged "done". */
static int rma_write(struct peer *p, void *arg)
{
	const size_t len = (3 << 20) + 5, off = 4096;
	struct pd_rkey rk;
	struct pd_req *req;
	struct pd_mr *mr;
	char *buf = map_buf(len + 2 * off);
	int ret;

	(void)arg;
	if (!buf)
		return -ENOMEM;
	ret = pd_mr_reg_host(p->fab, buf, len + 2 * off, PD_ACCESS_ALL, &mr);
	if (!ret && p->rank == 1) {
		memset(buf, 0, len + 2 * off);
		ret = pd_mr_rkey(mr, &rk) ?: oob_send(p, &rk, sizeof(rk));
		if (!ret)
			ret = pd_trecv(p->fab, mr, 0, 1, p->other, 99, &req);
		if (!ret) {
			ret = pd_wait(req, WAIT_MS, NULL);
			pd_req_free(req);
		}
		if (!ret && check(buf + off, len, 42) >= 0)
			ret = -EIO;
		if (!ret && (buf[off - 1] || buf[off + len]))
			ret = -EIO;	/* wrote outside the range */
	} else if (!ret) {
		fill(buf, len, 42);
		ret = oob_recv(p, &rk, sizeof(rk));
		if (!ret)
			ret = pd_write(p->fab, mr, 0, len, p->other, &rk, off, &req);
		if (!ret) {
			ret = pd_wait(req, WAIT_MS, NULL);
			pd_req_free(req);
		}
		if (!ret)
			ret = pd_tsend(p->fab, mr, 0, 1, p->other, 99, &req);
		if (!ret) {
			ret = pd_wait(req, WAIT_MS, NULL);
			pd_req_free(req);
		}
	}
	if (!ret)
		ret = oob_sync(p);
	if (mr)
		pd_mr_dereg(mr);
	munmap(buf, len + 2 * off);
	return ret;
}

TEST_F(pair, rma_write_lands_in_range)
{
	ASSERT_EQ(0, run_pair(variant->provider, NULL, rma_write, NULL, &self->status));
}

/* A receive shorter than the message fails with the provider's text. */
static int truncation(struct peer *p, void *arg)
{
	char buf[8192];
	struct pd_req *req;
	struct pd_mr *mr;
	int ret, *seen = arg;

	ret = pd_mr_reg_host(p->fab, buf, sizeof(buf), 0, &mr);
	if (ret)
		return ret;
	if (p->rank == 0)
		ret = pd_tsend(p->fab, mr, 0, sizeof(buf), p->other, 5, &req);
	else
		ret = pd_trecv(p->fab, mr, 0, 1024, p->other, 5, &req);
	if (!ret) {
		ret = pd_wait(req, 5000, NULL);
		pd_req_free(req);
	}
	if (p->rank == 1) {
		/* Expected to fail: report how, succeed if it did. */
		*seen = ret;
		if (ret && ret != -ETIMEDOUT && strstr(pd_last_error(), "recv of 1024 bytes"))
			ret = 0;
		else
			ret = -EPROTO;
		fprintf(stderr, "# truncated receive reported: %s\n", pd_last_error());
	} else {
		ret = 0;	/* the sender may or may not see an error */
	}
	oob_sync(p);
	pd_mr_dereg(mr);
	return ret;
}

TEST_F(pair, truncated_receive_reports_provider_error)
{
	int seen = 0;

	if (variant->truncation_broken)
		SKIP(return, "%s", variant->truncation_broken);
	ASSERT_EQ(0, run_pair(variant->provider, NULL, truncation, &seen, &self->status));
}

/*
 * The child dies with SIGKILL after the first message.  Neither libfabric
 * reports a dead peer promptly: rxm (1.17) and tcp (2.1) answer every later
 * send with -FI_EAGAIN while they retry the connection, and leave giving up
 * to the caller; a receive from a dead peer has nothing to fail it.  So the
 * survivor's operations must end by their own bound, and say why.  Only the
 * first send after the death may complete: a completion means the buffer is
 * free, and tcp can write a message into the socket before it sees the
 * reset.  Ordering is deterministic: the survivor sends only once the
 * child's end of the socketpair is closed, i.e. the child is gone.
 */
#define KILLED_WAIT_MS 1000

struct killed_result {
	int ret[3];		/* send, send, receive after the death */
	char msg[3][400];
	int64_t ms[3];
};

static int killed_peer(struct peer *p, void *arg)
{
	const size_t len = 1 << 20;
	struct killed_result *res = arg;
	struct pd_req *req;
	struct pd_mr *mr;
	char *buf = map_buf(len), c;
	int ret, i;

	if (!buf)
		return -ENOMEM;
	ret = pd_mr_reg_host(p->fab, buf, len, 0, &mr);
	if (ret)
		return ret;
	if (p->rank == 1) {
		ret = pd_trecv(p->fab, mr, 0, len, p->other, 0, &req);
		if (!ret)
			ret = pd_wait(req, WAIT_MS, NULL);
		if (ret)
			return ret;	/* exits 1: the test sees no SIGKILL */
		raise(SIGKILL);
	}
	ret = pd_tsend(p->fab, mr, 0, len, p->other, 0, &req);
	if (!ret) {
		ret = pd_wait(req, WAIT_MS, NULL);
		pd_req_free(req);
	}
	/* EOF on the socketpair: the child no longer exists. */
	if (!ret && oob_recv(p, &c, 1) != -ECONNRESET)
		ret = -EPROTO;
	for (i = 0; !ret && i < 3; i++) {
		int64_t t0 = mono_ms();

		res->ret[i] = i < 2 ? pd_tsend(p->fab, mr, 0, len, p->other, 1 + (uint64_t)i, &req) :
			      pd_trecv(p->fab, mr, 0, len, p->other, 77, &req);
		if (!res->ret[i]) {
			res->ret[i] = pd_wait(req, KILLED_WAIT_MS, NULL);
			pd_req_free(req);
		}
		res->ms[i] = mono_ms() - t0;
		snprintf(res->msg[i], sizeof(res->msg[i]), "%s", res->ret[i] ? pd_last_error() : "completed");
		fprintf(stderr, "# %s %d after the death: %d in %lld ms: %s\n", i < 2 ? "send" : "receive",
			i, res->ret[i], (long long)res->ms[i], res->msg[i]);
	}
	pd_mr_dereg(mr);
	munmap(buf, len);
	return ret;
}

TEST_F(pair, killed_peer_gives_error_not_hang)
{
	struct killed_result res;
	int i;

	memset(&res, 0, sizeof(res));
	/* rank 0's own steps succeeded; only the child's exit is "wrong" */
	EXPECT_EQ(-ECHILD, run_pair(variant->provider, NULL, killed_peer, &res, &self->status));
	EXPECT_TRUE(WIFSIGNALED(self->status) && WTERMSIG(self->status) == SIGKILL);
	for (i = 0; i < 3; i++) {
		/* bounded: the wait's own timeout plus a loaded machine's slack */
		EXPECT_LT(res.ms[i], KILLED_WAIT_MS + 5000) TH_LOG("operation %d", i);
		if (!res.ret[i])
			continue;
		/* either the provider's error or our timeout, never a bare code */
		if (res.ret[i] == -ETIMEDOUT) {
			EXPECT_NE(NULL, strstr(res.msg[i], "chunks posted")) TH_LOG("%s", res.msg[i]);
		} else {
			EXPECT_NE(NULL, strstr(res.msg[i], variant->provider)) TH_LOG("%s", res.msg[i]);
		}
	}
	EXPECT_NE(0, res.ret[1]) TH_LOG("a second send to a dead peer completed");
	EXPECT_NE(0, res.ret[2]) TH_LOG("a receive from a dead peer completed");
}

TEST(receive_without_sender_times_out)
{
	struct pd_fabric *fab;
	struct pd_req *req;
	struct pd_mr *mr;
	char buf[64];
	int64_t t0;

	ASSERT_EQ(0, pd_fabric_open(NULL, &fab));
	ASSERT_EQ(0, pd_mr_reg_host(fab, buf, sizeof(buf), 0, &mr));
	ASSERT_EQ(0, pd_trecv(fab, mr, 0, sizeof(buf), PD_ANY_PEER, 1, &req));
	t0 = mono_ms();
	EXPECT_EQ(-ETIMEDOUT, pd_wait(req, 200, NULL));
	EXPECT_GE(mono_ms() - t0, 200);
	EXPECT_LT(mono_ms() - t0, 5000);	/* the timeout, not never */
	EXPECT_NE(NULL, strstr(pd_last_error(), "no completion after 200 ms"));
	EXPECT_EQ(0, pd_test(req, NULL));
	pd_req_free(req);	/* cancels the posted receive */
	pd_mr_dereg(mr);
	pd_fabric_close(fab);
}

/* One fabric, several threads: transfers with their own tags, plus a thread
 * churning registrations and one reading stats.  Every byte is checked. */
struct shared_fab {
	struct pd_fabric *fab;
	uint64_t self;
	int id, failures;
};

static void *xfer_thread(void *arg)
{
	struct shared_fab *t = arg;
	char *buf = map_buf(2 * 65536);
	struct pd_req *s, *r;
	struct pd_mr *mr;
	int i;

	if (!buf || pd_mr_reg_host(t->fab, buf, 2 * 65536, 0, &mr)) {
		t->failures++;
		return NULL;
	}
	for (i = 0; i < 100; i++) {
		uint64_t tag = (uint64_t)t->id << 32 | (uint64_t)i, seed = tag * 7 + 1;
		size_t len = 1 + (size_t)(i * 997) % 65536;

		fill(buf, len, seed);
		if (pd_trecv(t->fab, mr, 65536, len, t->self, tag, &r)) {
			t->failures++;
			continue;
		}
		if (pd_tsend(t->fab, mr, 0, len, t->self, tag, &s) == 0) {
			t->failures += pd_wait(s, WAIT_MS, NULL) != 0;
			pd_req_free(s);
		} else {
			t->failures++;
		}
		t->failures += pd_wait(r, WAIT_MS, NULL) != 0;
		pd_req_free(r);
		t->failures += check(buf + 65536, len, seed) >= 0;
	}
	pd_mr_dereg(mr);
	munmap(buf, 2 * 65536);
	return NULL;
}

static void *churn_thread(void *arg)
{
	struct shared_fab *t = arg;
	static char pages[64][4096] __attribute__((aligned(4096)));
	struct pd_cache_stats st;
	struct pd_mr *mr;
	int i;

	for (i = 0; i < 3000; i++) {
		if (pd_mr_reg_host(t->fab, pages[i % 64], 4096, 0, &mr)) {
			t->failures++;
			continue;
		}
		pd_mr_dereg(mr);
		if (i % 500 == 0)
			pd_mr_invalidate_host(t->fab, pages, sizeof(pages));
		t->failures += pd_fabric_cache_stats(t->fab, &st) != 0;
	}
	return NULL;
}

TEST(threads_share_one_fabric)
{
	struct shared_fab t[4];
	struct pd_fabric_attr attr;
	struct pd_fabric *fab;
	pthread_t th[4];
	char addr[256];
	size_t alen = sizeof(addr);
	uint64_t self_addr;
	int i;

	pd_fabric_attr_init(&attr);
	attr.provider = "tcp";
	attr.cache_max_entries = 16;	/* evictions race with lookups */
	attr.chunk_size = 16384;	/* multi-chunk messages too */
	ASSERT_EQ(0, pd_fabric_open(&attr, &fab));
	ASSERT_EQ(0, pd_fabric_addr(fab, addr, &alen));
	ASSERT_EQ(0, pd_fabric_insert(fab, addr, alen, &self_addr));
	for (i = 0; i < 4; i++) {
		t[i] = (struct shared_fab) { .fab = fab, .self = self_addr, .id = i };
		ASSERT_EQ(0, pthread_create(&th[i], NULL, i == 3 ? churn_thread : xfer_thread, &t[i]));
	}
	for (i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		EXPECT_EQ(0, t[i].failures) TH_LOG("thread %d: %s", i, pd_last_error());
	}
	pd_fabric_close(fab);
}

/* The TCP rendezvous helper: two ranks swap fabric addresses, then talk. */
static int rdv_rank(int rank, uint16_t port)
{
	struct pd_fabric *fab;
	struct pd_rdv *rdv;
	char mine[256], all[2][256] = { { 0 } }, buf[100];
	size_t len = sizeof(mine);
	uint64_t peer;
	struct pd_req *req;
	struct pd_mr *mr;
	int ret;

	memset(mine, 0, sizeof(mine));
	ret = pd_rdv_open("127.0.0.1", port, rank, 2, 10000, &rdv);
	if (ret)
		return ret;
	ret = pd_fabric_open(NULL, &fab);
	if (!ret)
		ret = pd_fabric_addr(fab, mine, &len) ?: pd_rdv_allgather(rdv, mine, sizeof(mine), all);
	if (!ret)
		ret = pd_fabric_insert(fab, all[!rank], len, &peer);
	if (!ret)
		ret = pd_mr_reg_host(fab, buf, sizeof(buf), 0, &mr);
	if (!ret) {
		fill(buf, sizeof(buf), 3);
		if (rank == 0)
			ret = pd_tsend(fab, mr, 0, sizeof(buf), peer, 1, &req);
		else
			ret = (memset(buf, 0, sizeof(buf)), pd_trecv(fab, mr, 0, sizeof(buf), peer, 1, &req));
		if (!ret)
			ret = pd_wait(req, WAIT_MS, NULL), pd_req_free(req);
		if (!ret && check(buf, sizeof(buf), 3) >= 0)
			ret = -EIO;
		if (!ret)
			ret = pd_rdv_barrier(rdv);
		pd_mr_dereg(mr);
	}
	pd_fabric_close(fab);
	pd_rdv_close(rdv);
	return ret;
}

TEST(rendezvous_exchanges_addresses)
{
	int port = listen_port(), status;
	pid_t pid;

	ASSERT_LT(0, port) TH_LOG("no free port for the rendezvous");
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0)
		_exit(rdv_rank(1, port) ? 1 : 0);
	EXPECT_EQ(0, rdv_rank(0, port)) TH_LOG("%s", pd_last_error());
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

TEST(rendezvous_without_root_times_out)
{
	struct pd_rdv *rdv;
	int64_t t0 = mono_ms();

	EXPECT_EQ(-ETIMEDOUT, pd_rdv_open("127.0.0.1", 9, 1, 2, 300, &rdv));
	EXPECT_LT(mono_ms() - t0, 3000);
	EXPECT_EQ(-EINVAL, pd_rdv_open("127.0.0.1", 9, 2, 2, 300, &rdv));
	EXPECT_EQ(-EINVAL, pd_rdv_open("127.0.0.1", 9, 0, 1, 0, &rdv));
}

TEST_HARNESS_MAIN
