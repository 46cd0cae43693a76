// SPDX-License-Identifier: GPL-2.0
/* Exports: fds, CPU mappings, SYNC, names and limits. */
#include <sys/stat.h>
#include "kselftest_harness.h"
#include "pd_test.h"

FIXTURE(exp) {
	int fd;
	struct peerdirect_query q;
	int64_t h;
	size_t len;
};

FIXTURE_SETUP(exp)
{
	self->fd = pd_open(PD_DEV0);
	ASSERT_LE(0, self->fd);
	ASSERT_EQ(0, pd_query(self->fd, &self->q));
	self->len = 4 * self->q.page_size;
	self->h = pd_alloc(self->fd, self->len);
	ASSERT_LT(0, self->h);
}

FIXTURE_TEARDOWN(exp)
{
	close(self->fd);
}

TEST_F(exp, fd_identity_and_cloexec)
{
	struct stat st;
	__u64 id1 = 0, id2 = 0;
	struct peerdirect_export e = {
		.argsz = sizeof(e), .flags = PEERDIRECT_EXPORT_RDWR | PEERDIRECT_EXPORT_CLOEXEC, .handle = self->h,
		.length = self->len,
	};
	int d2;

	ASSERT_EQ(0, ioctl(self->fd, PEERDIRECT_IOCTL_EXPORT, &e));
	id1 = e.export_id;
	EXPECT_LT(0, id1);
	ASSERT_EQ(0, fstat(e.fd, &st));
	EXPECT_EQ(st.st_ino, e.inode);
	EXPECT_EQ(self->len, (size_t)lseek(e.fd, 0, SEEK_END));
	EXPECT_TRUE(fcntl(e.fd, F_GETFD) & FD_CLOEXEC);
	EXPECT_EQ(O_RDWR, fcntl(e.fd, F_GETFL) & O_ACCMODE);

	d2 = pd_export_id(self->fd, self->h, 0, 4096, 0, &id2);
	ASSERT_LE(0, d2);
	EXPECT_NE(id1, id2);
	EXPECT_FALSE(fcntl(d2, F_GETFD) & FD_CLOEXEC);
	EXPECT_EQ(O_RDONLY, fcntl(d2, F_GETFL) & O_ACCMODE);
	close(e.fd);
	close(d2);
}

/* Bytes written through one export are read through another. */
TEST_F(exp, mmap_round_trip_between_exports)
{
	size_t ps = self->q.page_size;
	int whole = pd_export(self->fd, self->h, 0, self->len);
	int part = pd_export(self->fd, self->h, ps, 2 * ps);
	unsigned char *w, *r;

	ASSERT_LE(0, whole);
	ASSERT_LE(0, part);
	w = mmap(NULL, self->len, PROT_READ | PROT_WRITE, MAP_SHARED, whole, 0);
	ASSERT_NE(MAP_FAILED, w);
	ASSERT_EQ(0, pd_sync(whole, DMA_BUF_SYNC_START | DMA_BUF_SYNC_WRITE));
	pd_fill(w, self->len, 0x1234);
	ASSERT_EQ(0, pd_sync(whole, DMA_BUF_SYNC_END | DMA_BUF_SYNC_WRITE));

	r = mmap(NULL, 2 * ps, PROT_READ, MAP_SHARED, part, 0);
	ASSERT_NE(MAP_FAILED, r);
	ASSERT_EQ(0, pd_sync(part, DMA_BUF_SYNC_START | DMA_BUF_SYNC_READ));
	EXPECT_EQ(0, memcmp(w + ps, r, 2 * ps));
	ASSERT_EQ(0, pd_sync(part, DMA_BUF_SYNC_END | DMA_BUF_SYNC_READ));

	/* a mapping at a page offset inside the dma-buf */
	munmap(r, 2 * ps);
	r = mmap(NULL, 4096, PROT_READ, MAP_SHARED, part, 4096);
	ASSERT_NE(MAP_FAILED, r);
	EXPECT_EQ(0, memcmp(w + ps + 4096, r, 4096));
	munmap(r, 4096);
	munmap(w, self->len);
	close(whole);
	close(part);
}

TEST_F(exp, sync_rejects_bad_flags)
{
	int d = pd_export(self->fd, self->h, 0, 4096);

	ASSERT_LE(0, d);
	EXPECT_EQ(-EINVAL, pd_sync(d, 0x100));
	EXPECT_EQ(-EINVAL, pd_sync(d, DMA_BUF_SYNC_START));
	close(d);
}

TEST_F(exp, mmap_beyond_the_buffer_is_einval)
{
	int d = pd_export(self->fd, self->h, 0, 8192);
	void *p;

	ASSERT_LE(0, d);
	p = mmap(NULL, 3 * 4096, PROT_READ, MAP_SHARED, d, 0);
	EXPECT_EQ(MAP_FAILED, p);
	EXPECT_EQ(EINVAL, errno);
	p = mmap(NULL, 4096, PROT_READ, MAP_SHARED, d, 2 * 4096);
	EXPECT_EQ(MAP_FAILED, p);
	close(d);
}

TEST_F(exp, private_mapping_is_refused)
{
	int d = pd_export(self->fd, self->h, 0, 4096);
	void *p;

	ASSERT_LE(0, d);
	p = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, d, 0);
	EXPECT_EQ(MAP_FAILED, p);
	EXPECT_EQ(EINVAL, errno);
	close(d);
}

TEST_F(exp, read_only_export_refuses_writable_mappings)
{
	int d = pd_export_id(self->fd, self->h, 0, 4096, PEERDIRECT_EXPORT_CLOEXEC, NULL);
	void *p;

	ASSERT_LE(0, d);
	p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, d, 0);
	EXPECT_EQ(MAP_FAILED, p);
	EXPECT_EQ(EACCES, errno);
	p = mmap(NULL, 4096, PROT_READ, MAP_SHARED, d, 0);
	ASSERT_NE(MAP_FAILED, p);
	EXPECT_EQ(-1, mprotect(p, 4096, PROT_READ | PROT_WRITE));
	EXPECT_EQ(EACCES, errno);
	munmap(p, 4096);
	close(d);
}

TEST_F(exp, set_name_shows_in_fdinfo)
{
	int d = pd_export(self->fd, self->h, 0, 4096);
	char path[64], buf[1024];
	ssize_t n;
	int f;

	ASSERT_LE(0, d);
	ASSERT_EQ(0, ioctl(d, DMA_BUF_SET_NAME_B, "grad-bucket-7"));
	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", d);
	f = open(path, O_RDONLY);
	ASSERT_LE(0, f);
	n = read(f, buf, sizeof(buf) - 1);
	ASSERT_LT(0, n);
	buf[n] = 0;
	EXPECT_NE(NULL, strstr(buf, "name:\tgrad-bucket-7")) TH_LOG("%s", buf);
	EXPECT_NE(NULL, strstr(buf, "exp_name:\tpeerdirect")) TH_LOG("%s", buf);
	EXPECT_NE(NULL, strstr(buf, "size:\t4096")) TH_LOG("%s", buf);
	close(f);
	close(d);
}

TEST_F(exp, export_limit_is_enospc_until_one_is_released)
{
	int fds[256], i, n = self->q.max_exports;

	ASSERT_GE(256, n);
	for (i = 0; i < n; i++) {
		fds[i] = pd_export(self->fd, self->h, 0, 4096);
		ASSERT_LE(0, fds[i]) TH_LOG("export %d: %d", i, fds[i]);
	}
	EXPECT_EQ(-ENOSPC, pd_export(self->fd, self->h, 0, 4096));
	close(fds[0]);
	fds[0] = pd_export(self->fd, self->h, 0, 4096);
	EXPECT_LE(0, fds[0]);
	for (i = 0; i < n; i++)
		close(fds[i]);
}

TEST_F(exp, export_after_free_is_enoent)
{
	ASSERT_EQ(0, pd_free(self->fd, self->h));
	EXPECT_EQ(-ENOENT, pd_export(self->fd, self->h, 0, 4096));
}

TEST_HARNESS_MAIN
