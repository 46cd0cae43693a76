// SPDX-License-Identifier: MIT
/*
 * Path selection and the dma-buf data paths, with a memfd standing in for a
 * dma-buf (mmap works; DMA_BUF_IOCTL_SYNC answers ENOTTY, so tests that need
 * the bounce path to succeed install a SYNC stand-in).  Transfers loop back
 * to the same endpoint over tcp.
 */
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <linux/dma-buf.h>

#include "kselftest_harness.h"
#include "peer_pair.h"
#include "bounce_pool.h"
#include "fabric.h"

/* SYNC stand-in: counts brackets, can turn into a revocation. */
static int sync_starts, sync_ends, sync_calls, sync_fail_after = -1;

static int fake_sync(int fd, uint64_t flags)
{
	(void)fd;
	if (sync_fail_after >= 0 && sync_calls++ >= sync_fail_after)
		return -ENODEV;
	if (flags & DMA_BUF_SYNC_END)
		sync_ends++;
	else
		sync_starts++;
	return 0;
}

FIXTURE(paths) {
	struct pd_fabric *fab;
	uint64_t self_addr;
	int fd;
};

static int open_loopback(struct pd_fabric_attr *attr, struct pd_fabric **fab,
			 uint64_t *self_addr)
{
	char addr[256];
	size_t len = sizeof(addr);

	attr->provider = "tcp";
	return pd_fabric_open(attr, fab) ?: pd_fabric_addr(*fab, addr, &len) ?:
	       pd_fabric_insert(*fab, addr, len, self_addr);
}

FIXTURE_SETUP(paths)
{
	struct pd_fabric_attr attr;

	pd_fabric_attr_init(&attr);
	attr.chunk_size = 64 << 10;
	ASSERT_EQ(0, open_loopback(&attr, &self->fab, &self->self_addr)) TH_LOG("%s", pd_last_error());
	self->fd = memfd_of(2 << 20, 11);
	ASSERT_LE(0, self->fd);
}

FIXTURE_TEARDOWN(paths)
{
	pd_set_dmabuf_sync(NULL);
	close(self->fd);
	pd_fabric_close(self->fab);
}

/* Posts send and receive, waits for both; returns the first error. */
static int loop_xfer(struct pd_fabric *fab, uint64_t peer, struct pd_mr *src,
		     struct pd_mr *dst, size_t len)
{
	struct pd_req *s = NULL, *r = NULL;
	int ret = pd_trecv(fab, dst, 0, len, peer, 3, &r), ret2;

	if (ret)
		return ret;
	ret = pd_tsend(fab, src, 0, len, peer, 3, &s);
	if (!ret)
		ret = pd_wait(s, WAIT_MS, NULL);
	/* A failed send leaves the receive unmatched: cancel it, keep the
	 * send's error text. */
	ret2 = ret ? 0 : pd_wait(r, WAIT_MS, NULL);
	pd_req_free(s);
	pd_req_free(r);
	return ret ?: ret2;
}

TEST_F(paths, auto_on_cpu_provider_maps_the_dmabuf)
{
	struct pd_mr *mr;

	ASSERT_EQ(0, pd_mr_reg_dmabuf(self->fab, self->fd, 4096, 8192, 0, &mr));
	EXPECT_EQ(PD_PATH_MAPPED, pd_mr_path(mr));
	/* Why not dmabuf: no FI_MR_DMABUF before libfabric 1.20; from 1.20 on
	 * (measured on 2.1) tcp does not offer FI_HMEM. */
	EXPECT_NE(NULL, strstr(pd_mr_reason(mr), pd_have_fi_mr_dmabuf() ? "lacks FI_HMEM" :
			       "without FI_MR_DMABUF")) TH_LOG("%s", pd_mr_reason(mr));
	EXPECT_NE(NULL, strstr(pd_mr_reason(mr), "copies with the CPU"));
	ASSERT_NE(NULL, pd_mr_cpu_ptr(mr));
	/* The view starts at the registered offset of the "dma-buf". */
	EXPECT_EQ(-1, check((char *)pd_mr_cpu_ptr(mr) - 4096 + 4096, 0, 11));
	EXPECT_EQ(pattern(4096, 11), ((unsigned char *)pd_mr_cpu_ptr(mr))[0]);
	pd_mr_dereg(mr);
}

TEST_F(paths, forced_dmabuf_is_refused_clearly)
{
	struct pd_mr *mr;

	ASSERT_EQ(0, pd_fabric_set_path(self->fab, PD_PATH_DMABUF));
	EXPECT_EQ(-EOPNOTSUPP, pd_mr_reg_dmabuf(self->fab, self->fd, 0, 4096, 0, &mr));
	EXPECT_NE(NULL, strstr(pd_last_error(), "forced path dmabuf is impossible"));
	EXPECT_NE(NULL, strstr(pd_last_error(), pd_have_fi_mr_dmabuf() ? "lacks FI_HMEM" :
			       "without FI_MR_DMABUF")) TH_LOG("%s", pd_last_error());
	EXPECT_EQ(-EINVAL, pd_fabric_set_path(self->fab, PD_PATH_HOST));
	EXPECT_EQ(-EINVAL, pd_fabric_set_path(self->fab, (enum pd_path)42));
}

TEST_F(paths, forced_mapped_on_unmappable_fd_fails)
{
	struct pd_mr *mr;
	int p[2];

	ASSERT_EQ(0, pipe(p));
	ASSERT_EQ(0, pd_fabric_set_path(self->fab, PD_PATH_MAPPED));
	EXPECT_GT(0, pd_mr_reg_dmabuf(self->fab, p[0], 0, 4096, 0, &mr));
	EXPECT_NE(NULL, strstr(pd_last_error(), "mmap of dma-buf")) TH_LOG("%s", pd_last_error());
	close(p[0]);
	close(p[1]);
}

TEST(env_path_forces_bounce_and_rejects_unknown)
{
	struct pd_fabric_attr attr;
	struct pd_fabric *fab;
	struct pd_rkey rk;
	struct pd_mr *mr;
	uint64_t me;
	int fd = memfd_of(1 << 20, 1);

	ASSERT_LE(0, fd);
	setenv("PEERDIRECT_PATH", "warp", 1);
	pd_fabric_attr_init(&attr);
	EXPECT_EQ(-EINVAL, open_loopback(&attr, &fab, &me));
	EXPECT_NE(NULL, strstr(pd_last_error(), "PEERDIRECT_PATH='warp'"));
	setenv("PEERDIRECT_PATH", "bounce", 1);
	pd_fabric_attr_init(&attr);
	ASSERT_EQ(0, open_loopback(&attr, &fab, &me));
	ASSERT_EQ(0, pd_mr_reg_dmabuf(fab, fd, 0, 1 << 20, 0, &mr));
	EXPECT_EQ(PD_PATH_BOUNCE, pd_mr_path(mr));
	EXPECT_STREQ("bounce", pd_path_name(pd_mr_path(mr)));
	/* Nothing the peer could write into. */
	EXPECT_EQ(-EOPNOTSUPP, pd_mr_rkey(mr, &rk));
	pd_mr_dereg(mr);
	pd_fabric_close(fab);
	close(fd);
}

/*
 * shm pins a CPU mapping (process_vm_readv) unless FI_SHM_DISABLE_CMA is
 * true in libfabric's spellings, or its endpoint has FI_HMEM (which turns
 * CMA off from libfabric 1.13); then its copies go through its own buffers
 * and auto may give it the dma-buf.
 */
TEST(shm_without_cma_does_not_pin_cpu_maps)
{
	static const char *const yes[] = { "1", "yes", "TRUE", "on" };
	static const char *const no[] = { "0", "no", "false", "", "2" };
	unsigned int i;

	unsetenv("FI_SHM_DISABLE_CMA");
	EXPECT_TRUE(pd_provider_pins_cpu_maps("shm", false));
	EXPECT_FALSE(pd_provider_pins_cpu_maps("shm", true));
	EXPECT_FALSE(pd_provider_pins_cpu_maps("tcp;ofi_rxm", false));
	for (i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		setenv("FI_SHM_DISABLE_CMA", yes[i], 1);
		EXPECT_FALSE(pd_provider_pins_cpu_maps("shm", false)) TH_LOG("'%s'", yes[i]);
	}
	for (i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
		setenv("FI_SHM_DISABLE_CMA", no[i], 1);
		EXPECT_TRUE(pd_provider_pins_cpu_maps("shm", false)) TH_LOG("'%s'", no[i]);
		EXPECT_FALSE(pd_provider_pins_cpu_maps("shm", true)) TH_LOG("'%s'", no[i]);
	}
	unsetenv("FI_SHM_DISABLE_CMA");
}

TEST_F(paths, mapped_path_moves_data_both_ways)
{
	const size_t len = (1 << 20) + 100;
	char *host = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct pd_mr *dev, *h;
	int fd2 = memfd_of(len, 0);

	ASSERT_NE(MAP_FAILED, host);
	ASSERT_EQ(0, pd_mr_reg_dmabuf(self->fab, self->fd, 0, len, 0, &dev));
	ASSERT_EQ(0, pd_mr_reg_host(self->fab, host, len, 0, &h));
	ASSERT_EQ(0, loop_xfer(self->fab, self->self_addr, dev, h, len)) TH_LOG("%s", pd_last_error());
	EXPECT_EQ(-1, check(host, len, 11));
	pd_mr_dereg(dev);
	/* host -> "device" */
	fill(host, len, 5);
	ASSERT_EQ(0, pd_mr_reg_dmabuf(self->fab, fd2, 0, len, 0, &dev));
	ASSERT_EQ(0, loop_xfer(self->fab, self->self_addr, h, dev, len));
	EXPECT_EQ(-1, check(pd_mr_cpu_ptr(dev), len, 5));
	pd_mr_dereg(dev);
	pd_mr_dereg(h);
	close(fd2);
	munmap(host, len);
}

TEST_F(paths, bounce_without_dmabuf_sync_fails_not_silently)
{
	struct pd_mr *src, *dst;
	char host[4096];
	struct pd_mr *h;
	struct pd_req *r;

	ASSERT_EQ(0, pd_fabric_set_path(self->fab, PD_PATH_BOUNCE));
	ASSERT_EQ(0, pd_mr_reg_dmabuf(self->fab, self->fd, 0, 4096, 0, &src));
	/* A memfd is no dma-buf: SYNC says ENOTTY and the send is refused. */
	EXPECT_EQ(-ENOTTY, pd_tsend(self->fab, src, 0, 4096, self->self_addr, 1, &r));
	EXPECT_NE(NULL, strstr(pd_last_error(), "not a dma-buf")) TH_LOG("%s", pd_last_error());
	/* Receiving into it fails at completion, before any byte is copied. */
	ASSERT_EQ(0, pd_mr_reg_host(self->fab, host, sizeof(host), 0, &h));
	ASSERT_EQ(0, pd_mr_reg_dmabuf(self->fab, self->fd, 8192, 4096, 0, &dst));
	memset(host, 0x5a, sizeof(host));
	EXPECT_EQ(-ENOTTY, loop_xfer(self->fab, self->self_addr, h, dst, 4096));
	EXPECT_EQ(pattern(8192, 11), ((unsigned char *)pd_mr_cpu_ptr(dst))[0]);
	pd_mr_dereg(h);
	pd_mr_dereg(dst);
	pd_mr_dereg(src);
}

TEST_F(paths, bounce_pipeline_brackets_every_chunk)
{
	const size_t len = (1 << 20) + 100;	/* 17 chunks of 64 KiB, 8 slots */
	int fd2 = memfd_of(len, 0);
	struct pd_mr *src, *dst;

	pd_set_dmabuf_sync(fake_sync);
	ASSERT_EQ(0, pd_fabric_set_path(self->fab, PD_PATH_BOUNCE));
	ASSERT_EQ(0, pd_mr_reg_dmabuf(self->fab, self->fd, 0, len, 0, &src));
	ASSERT_EQ(0, pd_mr_reg_dmabuf(self->fab, fd2, 0, len, 0, &dst));
	ASSERT_EQ(PD_PATH_BOUNCE, pd_mr_path(dst));
	ASSERT_EQ(0, loop_xfer(self->fab, self->self_addr, src, dst, len)) TH_LOG("%s", pd_last_error());
	EXPECT_EQ(-1, check(pd_mr_cpu_ptr(dst), len, 11));
	EXPECT_EQ(34, sync_starts);
	EXPECT_EQ(34, sync_ends);
	pd_mr_dereg(src);
	pd_mr_dereg(dst);
	close(fd2);
}

TEST_F(paths, revocation_mid_transfer_fails_clearly)
{
	const size_t len = 1 << 20;
	char *host = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct pd_mr *dev, *h;

	ASSERT_NE(MAP_FAILED, host);
	pd_set_dmabuf_sync(fake_sync);
	ASSERT_EQ(0, pd_fabric_set_path(self->fab, PD_PATH_BOUNCE));
	ASSERT_EQ(0, pd_mr_reg_dmabuf(self->fab, self->fd, 0, len, 0, &dev));
	ASSERT_EQ(0, pd_mr_reg_host(self->fab, host, len, 0, &h));
	/* Sending: the 3rd chunk's SYNC reports the revocation. */
	sync_fail_after = 5;
	EXPECT_EQ(-ENODEV, loop_xfer(self->fab, self->self_addr, dev, h, len));
	EXPECT_NE(NULL, strstr(pd_last_error(), "revoked")) TH_LOG("%s", pd_last_error());
	/* Receiving: the data stops at the revoked buffer, the receive fails. */
	sync_calls = 0;
	sync_fail_after = 1;
	EXPECT_EQ(-ENODEV, loop_xfer(self->fab, self->self_addr, h, dev, 65536));
	EXPECT_NE(NULL, strstr(pd_last_error(), "no data delivered"));
	pd_mr_dereg(dev);
	pd_mr_dereg(h);
	munmap(host, len);
}

TEST_F(paths, cache_keys_dmabuf_by_inode_not_fd)
{
	struct pd_mr *a, *b, *c;
	struct pd_cache_stats st;
	int dup_fd = dup(self->fd), other = memfd_of(4096, 2);
	char host[4096];
	struct pd_mr *h;

	ASSERT_EQ(0, pd_mr_reg_dmabuf(self->fab, self->fd, 0, 4096, 0, &a));
	ASSERT_EQ(0, pd_mr_reg_dmabuf(self->fab, dup_fd, 0, 4096, 0, &b));
	ASSERT_EQ(0, pd_mr_reg_dmabuf(self->fab, other, 0, 4096, 0, &c));
	ASSERT_EQ(0, pd_fabric_cache_stats(self->fab, &st));
	EXPECT_EQ(3, st.lookups);
	EXPECT_EQ(1, st.hits);
	EXPECT_EQ(2, st.reg_count);
	EXPECT_GT(st.reg_ns, 0);
	/* The registration holds its own reference: closing ours is fine. */
	close(dup_fd);
	close(other);
	ASSERT_EQ(0, pd_mr_reg_host(self->fab, host, sizeof(host), 0, &h));
	EXPECT_EQ(0, loop_xfer(self->fab, self->self_addr, c, h, 4096));
	EXPECT_EQ(-1, check(host, 4096, 2));
	pd_mr_dereg(h);
	pd_mr_dereg(a);
	pd_mr_dereg(b);
	pd_mr_dereg(c);
	EXPECT_EQ(-EBADF, pd_mr_reg_dmabuf(self->fab, 1 << 20, 0, 4096, 0, &a)) TH_LOG("%s", pd_last_error());
	EXPECT_EQ(-EBADF, pd_mr_reg_dmabuf(self->fab, -1, 0, 4096, 0, &a));
	EXPECT_EQ(-EINVAL, pd_mr_reg_dmabuf(self->fab, self->fd, 0, 0, 0, &a));
	EXPECT_EQ(-EINVAL, pd_mr_reg_dmabuf(self->fab, self->fd, 2 << 20, 1, 0, &a));
	EXPECT_NE(NULL, strstr(pd_last_error(), "past the end"));
}

TEST_F(paths, revocation_event_fails_in_use_registration)
{
	struct pd_cache_stats st;
	struct stat sb;
	struct pd_mr *mr, *again;
	struct pd_req *r;

	ASSERT_EQ(0, fstat(self->fd, &sb));
	ASSERT_EQ(0, pd_mr_reg_dmabuf(self->fab, self->fd, 0, 4096, 0, &mr));
	/* What pd_fabric_poll_events does with a PD_REASON_REVOKE event. */
	EXPECT_EQ(1, pd_mr_cache_invalidate_dmabuf(self->fab->cache, sb.st_dev, sb.st_ino, PD_REASON_REVOKE));
	EXPECT_EQ(-ENODEV, pd_tsend(self->fab, mr, 0, 4096, self->self_addr, 1, &r));
	EXPECT_NE(NULL, strstr(pd_last_error(), "revoked by the kernel")) TH_LOG("%s", pd_last_error());
	ASSERT_EQ(0, pd_mr_reg_dmabuf(self->fab, self->fd, 0, 4096, 0, &again));
	EXPECT_NE(mr->entry, again->entry);
	ASSERT_EQ(0, pd_fabric_cache_stats(self->fab, &st));
	EXPECT_EQ(1, st.invalidations);
	EXPECT_EQ(2, st.misses);
	pd_mr_dereg(again);
	pd_mr_dereg(mr);
}

TEST(cache_limits_from_env_and_api)
{
	struct pd_fabric_attr attr;
	struct pd_cache_stats st;
	struct pd_fabric *fab;
	static char bufs[3][8192] __attribute__((aligned(4096)));
	struct pd_mr *mr, *sub;
	uint64_t me;
	int i;

	setenv("PEERDIRECT_MR_CACHE_MAX_ENTRIES", "two", 1);
	pd_fabric_attr_init(&attr);
	EXPECT_EQ(-EINVAL, open_loopback(&attr, &fab, &me));
	EXPECT_NE(NULL, strstr(pd_last_error(), "PEERDIRECT_MR_CACHE_MAX_ENTRIES"));
	setenv("PEERDIRECT_MR_CACHE_MAX_ENTRIES", "2", 1);
	pd_fabric_attr_init(&attr);
	ASSERT_EQ(0, open_loopback(&attr, &fab, &me));
	for (i = 0; i < 3; i++) {
		ASSERT_EQ(0, pd_mr_reg_host(fab, bufs[i], 8192, 0, &mr));
		pd_mr_dereg(mr);
	}
	ASSERT_EQ(0, pd_fabric_cache_stats(fab, &st));
	EXPECT_EQ(2, st.entries);
	EXPECT_EQ(1, st.evictions);
	/* A sub-range of a cached buffer is a hit. */
	ASSERT_EQ(0, pd_mr_reg_host(fab, bufs[2] + 100, 50, 0, &sub));
	ASSERT_EQ(0, pd_fabric_cache_stats(fab, &st));
	EXPECT_EQ(1, st.hits);
	pd_mr_dereg(sub);
	ASSERT_EQ(0, pd_fabric_set_cache_limits(fab, 1, 0));
	ASSERT_EQ(0, pd_fabric_cache_stats(fab, &st));
	EXPECT_EQ(1, st.entries);
	EXPECT_EQ(1, pd_mr_invalidate_host(fab, bufs[2], 8192));
	pd_fabric_close(fab);
}

TEST_HARNESS_MAIN
