// SPDX-License-Identifier: GPL-2.0
/* Several devices: separate pools, handles, exports and resets. */
#include <sys/stat.h>
#include "kselftest_harness.h"
#include "pd_test.h"

FIXTURE(two) {
	int fd0, fd1;
	struct peerdirect_query q0, q1;
};

FIXTURE_SETUP(two)
{
	self->fd0 = pd_open(PD_DEV0);
	ASSERT_LE(0, self->fd0);
	self->fd1 = pd_open(PD_DEV1);
	if (self->fd1 < 0)
		SKIP(return, "one device only (load with sim_devices=2)");
	ASSERT_EQ(0, pd_query(self->fd0, &self->q0));
	ASSERT_EQ(0, pd_query(self->fd1, &self->q1));
}

FIXTURE_TEARDOWN(two)
{
	close(self->fd0);
	if (self->fd1 >= 0)
		close(self->fd1);
}

TEST_F(two, devices_have_their_own_index_and_pool)
{
	struct peerdirect_query q;
	int64_t h;

	EXPECT_EQ(0, self->q0.index);
	EXPECT_EQ(1, self->q1.index);
	h = pd_alloc(self->fd1, self->q1.page_size);
	ASSERT_LT(0, h);
	ASSERT_EQ(0, pd_query(self->fd0, &q));
	EXPECT_EQ(self->q0.mem_free, q.mem_free);
	ASSERT_EQ(0, pd_query(self->fd1, &q));
	EXPECT_EQ(self->q1.mem_free - self->q1.page_size, q.mem_free);
	EXPECT_EQ(-ENOENT, pd_free(self->fd0, h + 1000));
	EXPECT_EQ(0, pd_free(self->fd1, h));
}

TEST_F(two, data_stays_on_its_device)
{
	int64_t h0 = pd_alloc(self->fd0, 4096), h1 = pd_alloc(self->fd1, 4096);
	int d0 = pd_export(self->fd0, h0, 0, 4096), d1 = pd_export(self->fd1, h1, 0, 4096);
	unsigned char *p0, *p1;
	struct stat s0, s1;

	ASSERT_LE(0, d0);
	ASSERT_LE(0, d1);
	ASSERT_EQ(0, fstat(d0, &s0));
	ASSERT_EQ(0, fstat(d1, &s1));
	EXPECT_NE(s0.st_ino, s1.st_ino);
	p0 = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, d0, 0);
	p1 = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, d1, 0);
	ASSERT_NE(MAP_FAILED, p0);
	ASSERT_NE(MAP_FAILED, p1);
	pd_fill(p0, 4096, 1);
	pd_fill(p1, 4096, 2);
	EXPECT_EQ(0, pd_check(p0, 4096, 1));
	EXPECT_EQ(0, pd_check(p1, 4096, 2));
	munmap(p0, 4096);
	munmap(p1, 4096);
	close(d0);
	close(d1);
}

TEST_F(two, reset_is_per_device)
{
	int64_t h0 = pd_alloc(self->fd0, 4096), h1 = pd_alloc(self->fd1, 4096);
	int d0 = pd_export(self->fd0, h0, 0, 4096), d1 = pd_export(self->fd1, h1, 0, 4096);
	struct peerdirect_reset rs;

	ASSERT_LE(0, d0);
	ASSERT_LE(0, d1);
	ASSERT_EQ(0, pd_reset(self->fd1, &rs));
	EXPECT_EQ(1, rs.revoked);
	EXPECT_EQ(-ENODEV, pd_sync(d1, DMA_BUF_SYNC_START | DMA_BUF_SYNC_READ));
	EXPECT_EQ(0, pd_sync(d0, DMA_BUF_SYNC_START | DMA_BUF_SYNC_READ));
	EXPECT_EQ(0, pd_sync(d0, DMA_BUF_SYNC_END | DMA_BUF_SYNC_READ));
	close(d0);
	close(d1);
}

TEST_HARNESS_MAIN
