// SPDX-License-Identifier: MIT
/*
 * Lifetimes: a request keeps what it uses (its registration, the mapping
 * behind it, the fabric) alive until the provider is done with it, in
 * whatever order the caller frees requests, registrations and the fabric.
 * Transfers loop back to the fabric's own address over tcp.
 */
#include "kselftest_harness.h"
#include "loopback.h"

static char page_a[4096] __attribute__((aligned(4096)));
static char page_b[4096] __attribute__((aligned(4096)));

FIXTURE(life) {
	struct pd_fabric *fab;
	uint64_t me;
};

FIXTURE_SETUP(life)
{
	struct pd_fabric_attr attr;

	pd_fabric_attr_init(&attr);
	attr.chunk_size = 65536;
	ASSERT_EQ(0, open_loopback(&attr, &self->fab, &self->me)) TH_LOG("%s", pd_last_error());
}

FIXTURE_TEARDOWN(life)
{
	pd_set_dmabuf_sync(NULL);
	pd_fabric_close(self->fab);
}

/*
 * pd_req_free of an unfinished receive, then pd_mr_dereg, then dropping the
 * range from the cache: the registration must survive until the provider
 * has reported the cancelled receive, and only then be deregistered.
 * (Before the fix the entry was deregistered at once and the cancellation's
 * completion read the freed pd_mr: a use-after-free in fail_req.)
 */
TEST_F(life, freed_request_keeps_its_registration_until_the_provider_is_done)
{
	struct pd_cache_stats st;
	struct pd_req *r;
	struct pd_mr *mr;

	ASSERT_EQ(0, pd_mr_reg_host(self->fab, page_a, sizeof(page_a), 0, &mr));
	ASSERT_EQ(0, pd_trecv(self->fab, mr, 0, sizeof(page_a), self->me, 1, &r));
	pd_req_free(r);
	pd_mr_dereg(mr);
	EXPECT_EQ(1, pd_mr_invalidate_host(self->fab, page_a, sizeof(page_a)));
	st = cache_stats(self->fab);
	EXPECT_EQ(0, st.dereg_count) TH_LOG("deregistered while a cancelled receive was posted on it");
	/* The cancellation completes; the request lets go; the entry goes. */
	EXPECT_TRUE(PROGRESS_UNTIL(self->fab, 5000, cache_stats(self->fab).dereg_count == 1));
}

/* Simulates a cancellation that loses the race with the data: libfabric's
 * fi_cancel is best effort. */
static ssize_t cancel_never(struct fid *fid, void *ctx)
{
	(void)fid;
	(void)ctx;
	return 0;
}

/*
 * A receive on the bounce path, freed before its data came, whose
 * registration was released and dropped from the cache.  When the data does
 * come, nothing may be copied: the caller gave the buffer back.  (Before the
 * fix the late completion copied through the released registration.)
 */
TEST_F(life, late_bounce_completion_of_a_freed_receive_copies_nothing)
{
	const size_t len = 4096;
	struct fi_ops_ep *orig = self->fab->ep->ops, noop = *orig;
	struct pd_req *r, *s;
	struct pd_mr *dev, *host;
	int fd = memfd_of(1 << 20, 3), syncs;

	ASSERT_LE(0, fd);
	pd_set_dmabuf_sync(counting_sync);
	ASSERT_EQ(0, pd_fabric_set_path(self->fab, PD_PATH_BOUNCE));
	ASSERT_EQ(0, pd_mr_reg_dmabuf(self->fab, fd, 0, len, 0, &dev));
	ASSERT_EQ(PD_PATH_BOUNCE, pd_mr_path(dev));
	ASSERT_EQ(0, pd_mr_reg_host(self->fab, page_b, len, 0, &host));
	ASSERT_EQ(0, pd_trecv(self->fab, dev, 0, len, self->me, 7, &r));
	noop.cancel = cancel_never;
	self->fab->ep->ops = &noop;
	pd_req_free(r);
	pd_mr_dereg(dev);
	close(fd);
	/* Drop every dma-buf entry, as a revocation would. */
	pd_fabric_set_cache_limits(self->fab, 1, 0);
	syncs = __atomic_load_n(&sync_count_calls, __ATOMIC_SEQ_CST);
	fill(page_b, len, 9);
	ASSERT_EQ(0, pd_tsend(self->fab, host, 0, len, self->me, 7, &s));
	EXPECT_EQ(0, pd_wait(s, WAIT_MS, NULL)) TH_LOG("%s", pd_last_error());
	pd_req_free(s);
	/* The freed receive is matched and completes inside the library. */
	PROGRESS_UNTIL(self->fab, 2000, self->fab->live == NULL);
	EXPECT_EQ(NULL, self->fab->live);
	EXPECT_EQ(syncs, __atomic_load_n(&sync_count_calls, __ATOMIC_SEQ_CST))
		TH_LOG("a freed receive copied into its registration");
	self->fab->ep->ops = orig;
	pd_mr_dereg(host);
}

/*
 * With room for one entry: a receive posted on A, A's handle released, then
 * B registered.  A is still in use by the receive and must not be evicted
 * (its MR closed) while the provider may write into it.
 */
TEST_F(life, entry_used_by_a_posted_receive_is_not_evicted)
{
	struct pd_cache_stats st;
	struct pd_req *r, *s;
	struct pd_mr *a, *b;

	ASSERT_EQ(0, pd_fabric_set_cache_limits(self->fab, 1, 0));
	ASSERT_EQ(0, pd_mr_reg_host(self->fab, page_a, sizeof(page_a), 0, &a));
	memset(page_a, 0, sizeof(page_a));
	ASSERT_EQ(0, pd_trecv(self->fab, a, 0, sizeof(page_a), self->me, 2, &r));
	pd_mr_dereg(a);
	ASSERT_EQ(0, pd_mr_reg_host(self->fab, page_b, sizeof(page_b), 0, &b));
	st = cache_stats(self->fab);
	EXPECT_EQ(0, st.evictions);
	EXPECT_EQ(0, st.dereg_count);
	fill(page_b, sizeof(page_b), 4);
	ASSERT_EQ(0, pd_tsend(self->fab, b, 0, sizeof(page_b), self->me, 2, &s));
	EXPECT_EQ(0, pd_wait(s, WAIT_MS, NULL));
	EXPECT_EQ(0, pd_wait(r, WAIT_MS, NULL)) TH_LOG("%s", pd_last_error());
	EXPECT_EQ(-1, check(page_a, sizeof(page_a), 4));
	pd_req_free(s);
	pd_req_free(r);
	pd_mr_dereg(b);
}

/*
 * Every order of pd_req_free, pd_mr_dereg and pd_fabric_close over a
 * posted receive is safe, and nothing leaks (check-asan and valgrind).
 * A request outliving its fabric reports that the fabric was closed.
 */
enum step { FREE_REQ, DEREG, CLOSE };

TEST(any_free_order_is_safe)
{
	static const enum step orders[6][3] = {
		{ FREE_REQ, DEREG, CLOSE }, { FREE_REQ, CLOSE, DEREG },
		{ DEREG, FREE_REQ, CLOSE }, { DEREG, CLOSE, FREE_REQ },
		{ CLOSE, FREE_REQ, DEREG }, { CLOSE, DEREG, FREE_REQ },
	};
	int o, i;

	for (o = 0; o < 6; o++) {
		struct pd_fabric_attr attr;
		struct pd_fabric *fab;
		struct pd_req *r;
		struct pd_mr *mr;
		bool closed = false, freed = false;
		uint64_t me;

		pd_fabric_attr_init(&attr);
		ASSERT_EQ(0, open_loopback(&attr, &fab, &me));
		ASSERT_EQ(0, pd_mr_reg_host(fab, page_a, sizeof(page_a), 0, &mr));
		ASSERT_EQ(0, pd_trecv(fab, mr, 0, sizeof(page_a), me, 3, &r));
		for (i = 0; i < 3; i++) {
			switch (orders[o][i]) {
			case FREE_REQ:
				if (closed) {
					EXPECT_EQ(-ECANCELED, pd_test(r, NULL)) TH_LOG("order %d", o);
					EXPECT_NE(NULL, strstr(pd_last_error(), "fabric was closed"))
						TH_LOG("order %d: %s", o, pd_last_error());
				}
				pd_req_free(r);
				freed = true;
				break;
			case DEREG:
				pd_mr_dereg(mr);
				break;
			case CLOSE:
				pd_fabric_close(fab);
				closed = true;
				break;
			}
		}
		EXPECT_TRUE(freed);
	}
}

TEST_HARNESS_MAIN
