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
	int t = pdti_open("peerdirect0");
	struct pdti_status st;
	unsigned char *buf = malloc(self->len);

	ASSERT_LE(0, t);
	ASSERT_EQ(0, pdti_import(t, self->d, pd_pinned_flags(&self->q), 0));
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
	int t = pdti_open("peerdirect0");
	struct pdti_status st;

	ASSERT_LE(0, t);
	ASSERT_EQ(0, pdti_import(t, self->d, PDTI_DYNAMIC, 8192));
	ASSERT_EQ(0, pdti_status(t, &st));
	EXPECT_EQ(0, st.sg_error);
	EXPECT_GE(8192, st.max_entry);
	EXPECT_LE(self->len / 8192, st.nents);
	close(t);

	t = pdti_open("peerdirect0");
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
	int t = pdti_open("peerdirect0");
	struct pdti_status st;
	unsigned char *buf = malloc(2 * ps);

	ASSERT_LE(0, sub);
	ASSERT_LE(0, t);
	ASSERT_EQ(0, pdti_import(t, sub, pd_pinned_flags(&self->q), 0));
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
	int t = pdti_open("peerdirect0");

	ASSERT_LE(0, t);
	if (self->q.backend == PEERDIRECT_BACKEND_SIM) {
		EXPECT_EQ(0, pdti_import(t, self->d, PDTI_PINNED | PDTI_NO_P2P, 0));
	} else {
		EXPECT_EQ(-EOPNOTSUPP, pdti_import(t, self->d,
						   pd_pinned_flags(&self->q) | PDTI_NO_P2P, 0));
		EXPECT_EQ(0, pdti_import(t, self->d, pd_pinned_flags(&self->q), 0));
	}
	close(t);
}

static int set_p2p_policy(int v)
{
	return pd_param_write("p2p_policy", v ? "1" : "0");
}

/*
 * Imports the fixture's export attaching as @dev (NULL: the importer's misc
 * device, no PCI function) and returns the import's result; when accepted,
 * the importer must read the exporter's bytes through its DMA addresses.
 */
static int import_as(struct __test_metadata *_metadata, FIXTURE_DATA(imp) *self,
		     const struct pdti_device *dev)
{
	struct pdti_status st;
	unsigned char *buf = malloc(self->len);
	int t = pdti_open_as(dev), ret;

	if (t < 0 || !buf) {
		free(buf);
		return t < 0 ? t : -ENOMEM;
	}
	ret = pdti_import(t, self->d, PDTI_DYNAMIC, 0);
	if (!ret) {
		EXPECT_EQ(0, pdti_status(t, &st));
		EXPECT_EQ(0, st.sg_error);
		EXPECT_EQ(0, pdti_read(t, 0, buf, self->len));
		EXPECT_EQ(0, pd_check(buf, self->len, 0xbeef));
	}
	free(buf);
	close(t);
	return ret;
}

/*
 * Peer-to-peer policy on a BAR.  Where the kernel has P2PDMA (QUERY says
 * P2PDMA) its routing decides under either policy: the BAR's own PCI
 * function always has a path (bus addresses), the importer's misc device,
 * being no PCI function, never.  Without P2PDMA the kernel cannot tell:
 * p2p_policy=0 trusts every importer that asked for peer-to-peer,
 * p2p_policy=1 refuses them all.
 */
TEST_F(imp, p2p_policy_own_function_and_non_pci_importer)
{
	int routed = !!(self->q.features & PEERDIRECT_FEAT_P2PDMA), policy;
	struct pdti_device own;

	if (self->q.backend != PEERDIRECT_BACKEND_PCI_BAR)
		SKIP(return, "the simulated backend has no peer-to-peer policy");
	EXPECT_EQ(routed, !!(pdti_kernel_facts() & PDTI_K_P2PDMA));
	ASSERT_EQ(0, pd_pci_function("peerdirect0", &own));
	for (policy = 0; policy <= 1; policy++) {
		ASSERT_EQ(0, set_p2p_policy(policy));
		EXPECT_EQ(routed || !policy ? 0 : -EOPNOTSUPP, import_as(_metadata, self, &own))
			TH_LOG("own function, p2p_policy=%d", policy);
		EXPECT_EQ(!routed && !policy ? 0 : -EOPNOTSUPP, import_as(_metadata, self, NULL))
			TH_LOG("misc device, p2p_policy=%d", policy);
	}
	ASSERT_EQ(0, set_p2p_policy(0));
}

/*
 * What the kernel's p2pdma walk says of two functions on the root bus: the
 * path crosses the host bridge, allowed on AMD Zen or later CPUs and on a
 * few listed Intel root complexes, not on QEMU's i440FX or Q35.
 * 1 allowed, 0 refused, -1 unknown here.
 */
static int host_bridge_allows_p2p(void)
{
	char line[256], vendor[32] = "";
	unsigned int family = 0, ven = 0, dev = 0;
	FILE *f = fopen("/proc/cpuinfo", "r");

	while (f && fgets(line, sizeof(line), f)) {
		sscanf(line, "vendor_id : %31s", vendor);
		if (!family)
			sscanf(line, "cpu family : %u", &family);
	}
	if (f)
		fclose(f);
	if (!strcmp(vendor, "AuthenticAMD") && family >= 0x17)
		return 1;
	f = fopen("/sys/bus/pci/devices/0000:00:00.0/vendor", "r");
	if (f) {
		if (fscanf(f, "%x", &ven) != 1)
			ven = 0;
		fclose(f);
	}
	f = fopen("/sys/bus/pci/devices/0000:00:00.0/device", "r");
	if (f) {
		if (fscanf(f, "%x", &dev) != 1)
			dev = 0;
		fclose(f);
	}
	if (ven == 0x8086 && (dev == 0x1237 || dev == 0x29c0))
		return 0;
	return -1;
}

/*
 * A real PCI peer: the other BAR device's function imports through the
 * host bridge.  With P2PDMA the kernel's verdict on that bridge is the
 * outcome (refused in QEMU unless the CPU model is AMD Zen); without it,
 * the policy alone.
 */
TEST_F(imp, p2p_policy_peer_function_across_the_host_bridge)
{
	int routed = !!(self->q.features & PEERDIRECT_FEAT_P2PDMA), allowed, ret;
	struct pdti_device peer;

	if (self->q.backend != PEERDIRECT_BACKEND_PCI_BAR)
		SKIP(return, "the simulated backend has no peer-to-peer policy");
	if (pd_pci_function("peerdirect1", &peer))
		SKIP(return, "no second BAR device to import with");
	allowed = peer.bus == 0 ? host_bridge_allows_p2p() : -1;
	ASSERT_EQ(0, set_p2p_policy(0));
	ret = import_as(_metadata, self, &peer);
	if (!routed) {
		EXPECT_EQ(0, ret);
	} else if (allowed >= 0) {
		EXPECT_EQ(allowed ? 0 : -EOPNOTSUPP, ret);
	} else {
		EXPECT_TRUE(ret == 0 || ret == -EOPNOTSUPP) TH_LOG("%s", strerror(-ret));
	}
	TH_LOG("P2PDMA %s, peer %02x:%02x.%x: %s", routed ? "routes" : "absent", peer.bus,
	       peer.devfn >> 3, peer.devfn & 7, ret ? strerror(-ret) : "mapped");
	ASSERT_EQ(0, set_p2p_policy(1));
	ret = import_as(_metadata, self, &peer);
	if (!routed) {
		EXPECT_EQ(-EOPNOTSUPP, ret);
	} else if (allowed >= 0) {
		EXPECT_EQ(allowed ? 0 : -EOPNOTSUPP, ret);
	}
	ASSERT_EQ(0, set_p2p_policy(0));
}

TEST_F(imp, importer_writes_are_seen_by_cpu_after_sync)
{
	int t = pdti_open("peerdirect0");
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
