// SPDX-License-Identifier: GPL-2.0
/*
 * Real importers: vgem (DRM PRIME, a static importer, third-party code) and
 * the test importer module (dynamic and pinned, as RDMA imports).
 */
#include "kselftest_harness.h"
#include "pd_test.h"

FIXTURE(imp) {
	int fd;
	struct peerdirect_query q;
	int64_t h;
	size_t len;
	int d;
	unsigned char *map;
};

FIXTURE_SETUP(imp)
{
	self->fd = pd_open(PD_DEV0);
	ASSERT_LE(0, self->fd);
	ASSERT_EQ(0, pd_query(self->fd, &self->q));
	self->len = 8 * self->q.page_size;
	self->h = pd_alloc(self->fd, self->len);
	ASSERT_LT(0, self->h);
	self->d = pd_export(self->fd, self->h, 0, self->len);
	ASSERT_LE(0, self->d);
	self->map = mmap(NULL, self->len, PROT_READ | PROT_WRITE, MAP_SHARED, self->d, 0);
	ASSERT_NE(MAP_FAILED, self->map);
	pd_fill(self->map, self->len, 0xbeef);
}

FIXTURE_TEARDOWN(imp)
{
	munmap(self->map, self->len);
	close(self->d);
	close(self->fd);
}

/*
 * vgem imports through PRIME as a static importer (plain dma_buf_attach, no
 * peer2peer).  What happens at import is the kernel's promise, told by the
 * test importer's probe of the headers both were built from:
 *  - up to 6.16 the default shmem GEM import maps at once (drm_gem_prime_
 *    import_dev, and before 6.16 dma_buf_attach itself), which against our
 *    dynamic exporter means pinned and mapped until the GEM object goes;
 *  - from 6.17 (drm_gem_shmem_prime_import_no_map) it only attaches: no pin,
 *    no mapping, unless the driver later asks for the pages (vgem never
 *    does: it refuses to CPU-map imported objects).
 * Either way the attachment, and the dma-buf, live until GEM close.
 */
TEST_F(imp, vgem_prime_import_holds_what_the_kernel_promises)
{
	struct drm_prime_handle ph = { .fd = -1 };
	struct drm_gem_close gc = { 0 };
	struct peerdirect_revoke r;
	int vgem = pd_open_vgem(), facts = pdti_kernel_facts(), a, p, m, d;
	int lazy, held;
	__u64 id = 0;
	char st[32];

	if (vgem < 0)
		SKIP(return, "vgem not available");
	ASSERT_LE(0, facts) TH_LOG("test importer: %s", strerror(-facts));
	lazy = !!(facts & PDTI_K_GEM_IMPORT_NO_MAP);
	held = !lazy;
	TH_LOG("this kernel's PRIME import %s", lazy ? "only attaches" : "pins and maps");
	d = pd_export_id(self->fd, self->h, 0, self->len, PEERDIRECT_EXPORT_RDWR, &id);
	ASSERT_LE(0, d);
	ph.fd = d;
	if (self->q.backend == PEERDIRECT_BACKEND_PCI_BAR) {
		/* refused at attach, which every kernel does at import */
		EXPECT_EQ(-1, ioctl(vgem, DRM_IOCTL_PRIME_FD_TO_HANDLE, &ph));
		EXPECT_EQ(EOPNOTSUPP, errno);
		close(d);
		close(vgem);
		return;
	}
	ASSERT_EQ(0, ioctl(vgem, DRM_IOCTL_PRIME_FD_TO_HANDLE, &ph)) TH_LOG("%s", strerror(errno));
	close(d);	/* vgem keeps the dma-buf */
	ASSERT_EQ(1, pd_debugfs_export("peerdirect0", id, &a, &p, &m, st, sizeof(st)));
	EXPECT_EQ(1, a);
	EXPECT_EQ(held, p);
	EXPECT_EQ(held, m);
	EXPECT_STREQ("live", st);

	/*
	 * A static importer cannot drop a mapping: revoke reports it pending.
	 * An import that never mapped has nothing to wait for.
	 */
	ASSERT_EQ(0, pd_revoke(self->fd, PEERDIRECT_REVOKE_EXPORT, 0, id, &r));
	EXPECT_EQ(1, r.revoked);
	EXPECT_EQ(held, r.pending);
	ASSERT_EQ(1, pd_debugfs_export("peerdirect0", id, &a, &p, &m, st, sizeof(st)));
	EXPECT_EQ(1, a);
	EXPECT_EQ(held, m);
	EXPECT_STREQ("revoke", st);

	gc.handle = ph.handle;
	EXPECT_EQ(0, ioctl(vgem, DRM_IOCTL_GEM_CLOSE, &gc));
	EXPECT_EQ(0, pd_debugfs_export("peerdirect0", id, &a, &p, &m, st, sizeof(st)));
	close(vgem);
}

TEST_F(imp, pinned_import_matches_exporter_pages)
{
	int t = open(PD_IMPORTER, O_RDWR);
	struct pdti_status st;
	unsigned char *buf = malloc(self->len);

	ASSERT_LE(0, t);
	ASSERT_EQ(0, pdti_import(t, self->d, PDTI_PINNED, 0));
	ASSERT_EQ(0, pdti_status(t, &st));
	EXPECT_EQ(0, st.sg_error);
	EXPECT_EQ(self->len / 4096, st.sg_checked);
	EXPECT_EQ(1, st.pinned);
	EXPECT_EQ(1, st.mapped);
	EXPECT_LE(st.max_entry, 65536);
	/* contiguous device pages are merged into entries */
	EXPECT_GE(self->len / 4096, st.nents);
	EXPECT_LE(self->len / 65536, st.nents);
	ASSERT_EQ(0, pdti_read(t, 0, buf, self->len));
	EXPECT_EQ(0, pd_check(buf, self->len, 0xbeef));
	free(buf);
	close(t);
}

TEST_F(imp, entries_respect_importer_max_segment)
{
	int t = open(PD_IMPORTER, O_RDWR);
	struct pdti_status st;

	ASSERT_LE(0, t);
	ASSERT_EQ(0, pdti_import(t, self->d, PDTI_DYNAMIC, 8192));
	ASSERT_EQ(0, pdti_status(t, &st));
	EXPECT_EQ(0, st.sg_error);
	EXPECT_GE(8192, st.max_entry);
	EXPECT_LE(self->len / 8192, st.nents);
	close(t);

	t = open(PD_IMPORTER, O_RDWR);
	ASSERT_LE(0, t);
	ASSERT_EQ(0, pdti_import(t, self->d, PDTI_DYNAMIC, 1 << 30));
	ASSERT_EQ(0, pdti_status(t, &st));
	EXPECT_EQ(0, st.sg_error);
	EXPECT_GE(self->len / self->q.page_size, st.nents);
	close(t);
}

TEST_F(imp, sub_range_import_reads_the_right_bytes)
{
	size_t ps = self->q.page_size;
	int sub = pd_export(self->fd, self->h, 3 * ps, 2 * ps);
	int t = open(PD_IMPORTER, O_RDWR);
	struct pdti_status st;
	unsigned char *buf = malloc(2 * ps);

	ASSERT_LE(0, sub);
	ASSERT_LE(0, t);
	ASSERT_EQ(0, pdti_import(t, sub, PDTI_PINNED, 0));
	ASSERT_EQ(0, pdti_status(t, &st));
	EXPECT_EQ(0, st.sg_error);
	EXPECT_EQ(2 * ps, st.size);
	ASSERT_EQ(0, pdti_read(t, 0, buf, 2 * ps));
	EXPECT_EQ(0, memcmp(buf, self->map + 3 * ps, 2 * ps));
	EXPECT_EQ(-EINVAL, pdti_read(t, ps, buf, 2 * ps));
	free(buf);
	close(t);
	close(sub);
}

/* Host RAM needs no peer-to-peer; a BAR serves only importers that ask. */
TEST_F(imp, peer2peer_policy_follows_the_backend)
{
	int t = open(PD_IMPORTER, O_RDWR);

	ASSERT_LE(0, t);
	if (self->q.backend == PEERDIRECT_BACKEND_SIM) {
		EXPECT_EQ(0, pdti_import(t, self->d, PDTI_PINNED | PDTI_NO_P2P, 0));
	} else {
		EXPECT_EQ(-EOPNOTSUPP, pdti_import(t, self->d, PDTI_PINNED | PDTI_NO_P2P, 0));
		EXPECT_EQ(0, pdti_import(t, self->d, PDTI_PINNED, 0));
	}
	close(t);
}

static int set_p2p_policy(const char *v)
{
	int f = open("/sys/module/peerdirect/parameters/p2p_policy", O_WRONLY);
	int ok = f >= 0 && write(f, v, 1) == 1;

	if (f >= 0)
		close(f);
	return ok ? 0 : -1;
}

/*
 * p2p_policy=1 also demands a PCI peer-to-peer path; the test importer is
 * not a PCI device, so pci_p2pdma_distance() refuses it on any kernel.
 */
TEST_F(imp, strict_p2p_policy_refuses_non_pci_importers)
{
	int t = open(PD_IMPORTER, O_RDWR);

	if (self->q.backend != PEERDIRECT_BACKEND_PCI_BAR)
		SKIP(close(t); return, "the simulated backend has no peer-to-peer policy");
	ASSERT_LE(0, t);
	ASSERT_EQ(0, set_p2p_policy("1"));
	EXPECT_EQ(-EOPNOTSUPP, pdti_import(t, self->d, PDTI_PINNED, 0));
	ASSERT_EQ(0, set_p2p_policy("0"));
	EXPECT_EQ(0, pdti_import(t, self->d, PDTI_PINNED, 0));
	close(t);
}

TEST_F(imp, importer_writes_are_seen_by_cpu_after_sync)
{
	int t = open(PD_IMPORTER, O_RDWR);
	unsigned char *buf = malloc(4096);

	ASSERT_LE(0, t);
	ASSERT_EQ(0, pdti_import(t, self->d, PDTI_DYNAMIC, 0));
	ASSERT_EQ(0, pd_sync(self->d, DMA_BUF_SYNC_START | DMA_BUF_SYNC_WRITE));
	pd_fill(self->map + 4096, 4096, 99);
	ASSERT_EQ(0, pd_sync(self->d, DMA_BUF_SYNC_END | DMA_BUF_SYNC_WRITE));
	ASSERT_EQ(0, pdti_read(t, 4096, buf, 4096));
	EXPECT_EQ(0, pd_check(buf, 4096, 99));
	free(buf);
	close(t);
}

TEST_HARNESS_MAIN
