// SPDX-License-Identifier: GPL-2.0
/* Allocation, free, zeroing and the per-process quota. */
#define _GNU_SOURCE
#include <sys/wait.h>
#include "kselftest_harness.h"
#include "pd_test.h"

FIXTURE(dev) {
	int fd;
	struct peerdirect_query q;
};

FIXTURE_SETUP(dev)
{
	self->fd = pd_open(PD_DEV0);
	ASSERT_LE(0, self->fd);
	ASSERT_EQ(0, pd_query(self->fd, &self->q));
	ASSERT_EQ(self->q.mem_size, self->q.mem_free)
		TH_LOG("device memory still held by an earlier test");
}

FIXTURE_TEARDOWN(dev)
{
	close(self->fd);
}

TEST_F(dev, alloc_rounds_up_and_accounts)
{
	struct peerdirect_alloc a = { .argsz = sizeof(a), .size = 1 };
	struct peerdirect_query q;

	ASSERT_EQ(0, ioctl(self->fd, PEERDIRECT_IOCTL_ALLOC, &a));
	EXPECT_LT(0, a.handle);
	EXPECT_EQ(self->q.page_size, a.alloc_size);
	ASSERT_EQ(0, pd_query(self->fd, &q));
	EXPECT_EQ(self->q.mem_free - self->q.page_size, q.mem_free);
	EXPECT_EQ(self->q.page_size, q.quota_used);
	EXPECT_EQ(0, pd_free(self->fd, a.handle));
	ASSERT_EQ(0, pd_query(self->fd, &q));
	EXPECT_EQ(self->q.mem_size, q.mem_free);
	EXPECT_EQ(0, q.quota_used);
}

TEST_F(dev, handles_are_unique_and_never_zero)
{
	int64_t h[8];
	int i, j;

	for (i = 0; i < 8; i++) {
		h[i] = pd_alloc(self->fd, 4096);
		ASSERT_LT(0, h[i]);
		for (j = 0; j < i; j++)
			EXPECT_NE(h[i], h[j]);
	}
	for (i = 0; i < 8; i++)
		EXPECT_EQ(0, pd_free(self->fd, h[i]));
	EXPECT_EQ(-ENOENT, pd_free(self->fd, h[0]));
}

TEST_F(dev, memory_is_zeroed_before_reuse)
{
	size_t len = self->q.quota;
	int64_t h = pd_alloc(self->fd, len);
	unsigned char *p;
	size_t i;
	int d;

	ASSERT_LT(0, h);
	d = pd_export(self->fd, h, 0, len);
	ASSERT_LE(0, d);
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, d, 0);
	ASSERT_NE(MAP_FAILED, p);
	memset(p, 0xa5, len);
	munmap(p, len);
	close(d);
	ASSERT_EQ(0, pd_free(self->fd, h));

	/* First fit from an empty pool: the same memory again. */
	h = pd_alloc(self->fd, len);
	ASSERT_LT(0, h);
	d = pd_export(self->fd, h, 0, len);
	ASSERT_LE(0, d);
	p = mmap(NULL, len, PROT_READ, MAP_SHARED, d, 0);
	ASSERT_NE(MAP_FAILED, p);
	for (i = 0; i < len; i++)
		if (p[i])
			break;
	EXPECT_EQ(len, i) TH_LOG("byte %zu not zeroed", i);
	munmap(p, len);
	close(d);
	EXPECT_EQ(0, pd_free(self->fd, h));
}

/* Larger than the device is the caller's error; ENOMEM means "not now". */
TEST_F(dev, larger_than_device_is_einval)
{
	EXPECT_EQ(-EINVAL, pd_alloc(self->fd, self->q.mem_size + self->q.page_size));
	EXPECT_EQ(-EINVAL, pd_alloc(self->fd, ~0ULL));
}

TEST_F(dev, quota_is_edquot_and_recovers)
{
	int64_t h, h2;

	if (self->q.quota == self->q.mem_size)
		SKIP(return, "module loaded without quota_mb");
	h = pd_alloc(self->fd, self->q.quota);
	ASSERT_LT(0, h);
	EXPECT_EQ(-EDQUOT, pd_alloc(self->fd, self->q.page_size));
	ASSERT_EQ(0, pd_free(self->fd, h));
	h2 = pd_alloc(self->fd, self->q.page_size);
	EXPECT_LT(0, h2);
	EXPECT_EQ(0, pd_free(self->fd, h2));
}

/*
 * The quota is per user: a second open file shares it, and so does a
 * child; a process of another user has its own (here: a child that drops
 * to uid 65534 and allocates through the fd it inherited).
 */
TEST_F(dev, quota_is_per_user)
{
	int fd2 = pd_open(PD_DEV0);
	int64_t h;
	pid_t pid;
	int status;

	if (self->q.quota == self->q.mem_size)
		SKIP(return, "module loaded without quota_mb");
	ASSERT_LE(0, fd2);
	h = pd_alloc(self->fd, self->q.quota);
	ASSERT_LT(0, h);
	EXPECT_EQ(-EDQUOT, pd_alloc(fd2, self->q.page_size));

	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		int cfd = pd_open(PD_DEV0);

		if (cfd < 0)
			_exit(10);
		if (pd_alloc(cfd, self->q.page_size) != -EDQUOT)
			_exit(11);
		_exit(0);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_EQ(0, WEXITSTATUS(status)) TH_LOG("child of the same user: step %d", WEXITSTATUS(status));

	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		struct peerdirect_query q;
		uint64_t left = self->q.mem_size - self->q.quota;

		if (setresuid(65534, 65534, 65534))
			_exit(10);
		if (pd_query(fd2, &q) || q.quota_used)
			_exit(11);
		/* its own quota, and only what the other user left on the device */
		if (pd_alloc(fd2, left + self->q.page_size) != -ENOMEM)
			_exit(12);
		if (pd_alloc(fd2, left) <= 0)
			_exit(13);
		if (pd_query(fd2, &q) || q.quota_used != left)
			_exit(14);
		_exit(0);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_EQ(0, WEXITSTATUS(status)) TH_LOG("child of another user: step %d", WEXITSTATUS(status));
	EXPECT_EQ(0, pd_free(self->fd, h));
	close(fd2);
}

TEST_F(dev, handles_belong_to_their_file)
{
	int fd2 = pd_open(PD_DEV0);
	int64_t h = pd_alloc(self->fd, 4096);

	ASSERT_LE(0, fd2);
	ASSERT_LT(0, h);
	EXPECT_EQ(-ENOENT, pd_free(fd2, h));
	EXPECT_EQ(-ENOENT, pd_export(fd2, h, 0, 4096));
	EXPECT_EQ(0, pd_free(self->fd, h));
	close(fd2);
}

/* Closing the file frees what it allocated. */
TEST_F(dev, close_frees_allocations)
{
	int fd2 = pd_open(PD_DEV0);
	struct peerdirect_query q;

	ASSERT_LE(0, fd2);
	ASSERT_LT(0, pd_alloc(fd2, self->q.mem_size / 2));
	ASSERT_LT(0, pd_alloc(fd2, self->q.page_size));
	close(fd2);
	ASSERT_EQ(0, pd_query(self->fd, &q));
	EXPECT_EQ(self->q.mem_size, q.mem_free);
}

TEST_HARNESS_MAIN
