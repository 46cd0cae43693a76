// SPDX-License-Identifier: GPL-2.0
/* Lifetimes: owners that free or close while exports and importers live. */
#include <sys/syscall.h>
#include "kselftest_harness.h"
#include "pd_test.h"

static uint64_t mem_free(void)
{
	struct peerdirect_query q;
	int fd = pd_open(PD_DEV0);

	if (fd < 0 || pd_query(fd, &q))
		return 0;
	close(fd);
	return q.mem_free;
}

FIXTURE(lt) {
	struct peerdirect_query q;
};

FIXTURE_SETUP(lt)
{
	int fd = pd_open(PD_DEV0);

	ASSERT_LE(0, fd);
	ASSERT_EQ(0, pd_query(fd, &self->q));
	close(fd);
}

FIXTURE_TEARDOWN(lt)
{
}

/* Closing the owner revokes its exports but the memory waits for the dma-buf. */
TEST_F(lt, owner_close_with_live_export)
{
	int fd = pd_open(PD_DEV0);
	int64_t h = pd_alloc(fd, self->q.page_size);
	int d = pd_export(fd, h, 0, self->q.page_size);

	ASSERT_LE(0, d);
	close(fd);
	EXPECT_EQ(self->q.mem_size - self->q.page_size, mem_free());
	EXPECT_EQ(-ENODEV, pd_sync(d, DMA_BUF_SYNC_START | DMA_BUF_SYNC_READ));
	EXPECT_EQ(MAP_FAILED, mmap(NULL, 4096, PROT_READ, MAP_SHARED, d, 0));
	close(d);
	EXPECT_EQ(self->q.mem_size, mem_free());
}

TEST_F(lt, free_with_live_export_and_mapping)
{
	int fd = pd_open(PD_DEV0);
	int64_t h = pd_alloc(fd, self->q.page_size);
	int d = pd_export(fd, h, 0, self->q.page_size);
	void *p;

	ASSERT_LE(0, d);
	p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, d, 0);
	ASSERT_NE(MAP_FAILED, p);
	ASSERT_EQ(0, pd_free(fd, h));
	/* the mapping is zapped but the vma (and the dma-buf) hold on */
	close(d);
	EXPECT_EQ(self->q.mem_size - self->q.page_size, mem_free());
	munmap(p, 4096);
	EXPECT_EQ(self->q.mem_size, mem_free());
	close(fd);
}

/* An importer outlives both the owner and the exported fd. */
TEST_F(lt, importer_outlives_owner)
{
	int fd = pd_open(PD_DEV0);
	int64_t h = pd_alloc(fd, self->q.page_size);
	int d = pd_export(fd, h, 0, self->q.page_size);
	int imp = pdti_open("peerdirect0");

	ASSERT_LE(0, d);
	ASSERT_LE(0, imp);
	ASSERT_EQ(0, pdti_import(imp, d, PDTI_DYNAMIC, 0));
	close(d);
	close(fd);
	EXPECT_EQ(self->q.mem_size - self->q.page_size, mem_free());
	EXPECT_EQ(-1, ioctl(imp, PDTI_IOCTL_REMAP));
	EXPECT_EQ(ENODEV, errno);
	close(imp);
	EXPECT_EQ(self->q.mem_size, mem_free());
}

/*
 * Something else holding the dma-buf's dentry (an O_PATH open of
 * /proc/self/fd/N) keeps the dma-buf alive after its last file is gone;
 * revoke, free and close must cope (KASAN watches on the debug kernel).
 */
TEST_F(lt, dentry_held_after_last_file_close)
{
	int fd = pd_open(PD_DEV0);
	int64_t h = pd_alloc(fd, self->q.page_size);
	int d = pd_export(fd, h, 0, self->q.page_size), path;
	char proc[64];

	ASSERT_LE(0, d);
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", d);
	path = open(proc, O_PATH);
	ASSERT_LE(0, path);
	close(d);
	usleep(50 * 1000);	/* let the file's RCU free happen */
	EXPECT_EQ(0, pd_revoke(fd, PEERDIRECT_REVOKE_ALLOC, h, 0, NULL));
	EXPECT_EQ(0, pd_reset(fd, NULL));
	EXPECT_EQ(0, pd_free(fd, h));
	close(fd);
	close(path);
	EXPECT_EQ(self->q.mem_size, mem_free());
}

/* rmmod is refused while any dma-buf is alive, even with no device fd open. */
TEST_F(lt, module_unload_refused_while_exported)
{
	int fd = pd_open(PD_DEV0);
	int64_t h = pd_alloc(fd, 4096);
	int d = pd_export(fd, h, 0, 4096);

	ASSERT_LE(0, d);
	close(fd);
	EXPECT_EQ(-1, syscall(SYS_delete_module, "peerdirect", O_NONBLOCK));
	EXPECT_TRUE(errno == EWOULDBLOCK || errno == EBUSY) TH_LOG("errno %d", errno);
	close(d);
}

/* Concurrent close of the fd from another thread cannot race the export. */
TEST_F(lt, many_exports_closed_in_any_order)
{
	int fd = pd_open(PD_DEV0);
	int64_t h = pd_alloc(fd, self->q.page_size);
	int d[8], i, n = self->q.max_exports < 8 ? self->q.max_exports : 8;

	ASSERT_LT(0, h);
	for (i = 0; i < n; i++) {
		d[i] = pd_export(fd, h, 0, 4096);
		ASSERT_LE(0, d[i]);
	}
	for (i = 0; i < n; i += 2)
		close(d[i]);
	ASSERT_EQ(0, pd_free(fd, h));
	for (i = 1; i < n; i += 2)
		close(d[i]);
	EXPECT_EQ(self->q.mem_size, mem_free());
	close(fd);
}

TEST_HARNESS_MAIN
