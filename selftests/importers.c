// SPDX-License-Identifier: GPL-2.0
/*
 * Real importers: vgem (DRM PRIME, a static importer, third-party code) and
 * the test importer module (dynamic and pinned, as RDMA imports); and a
 * real third-party exporter, udmabuf, next to ours.
 */
#define _GNU_SOURCE		/* memfd_create, file seals */
#include <sys/stat.h>
#include <linux/udmabuf.h>
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
	/* a BAR export has no vmap to check pages against (N9): the DMA read below */
	if (self->q.backend == PEERDIRECT_BACKEND_PCI_BAR) {
		EXPECT_EQ(1, st.unverified);
	} else {
		EXPECT_EQ(self->len / 4096, st.sg_checked);
	}
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

/*
 * udmabuf: a third-party exporter (memfd pages) on the same machine.  The
 * test importer must import it as it imports ours (its checks are only
 * worth something if they hold for someone else's exporter), and nothing
 * the module does by export id, by device or by event may reach it.
 */
#define NO_UDMABUF "no /dev/udmabuf: kernel without CONFIG_UDMABUF (Debian's 6.1 configuration)"

FIXTURE(foreign) {
	int fd;			/* /dev/peerdirect0 */
	int memfd, ubuf;	/* the memfd and its udmabuf */
	unsigned char *mem;
	size_t len;
	struct stat st;		/* of the udmabuf */
};

FIXTURE_SETUP(foreign)
{
	struct udmabuf_create c = { .flags = UDMABUF_FLAGS_CLOEXEC };
	int dev = open("/dev/udmabuf", O_RDWR | O_CLOEXEC);

	self->fd = -1;
	self->ubuf = -1;
	self->memfd = -1;
	self->mem = MAP_FAILED;
	if (dev < 0)
		SKIP(return, NO_UDMABUF);
	self->len = 16 * 4096;
	self->memfd = memfd_create("pd-foreign", MFD_ALLOW_SEALING | MFD_CLOEXEC);
	ASSERT_LE(0, self->memfd);
	ASSERT_EQ(0, ftruncate(self->memfd, self->len));
	ASSERT_EQ(0, fcntl(self->memfd, F_ADD_SEALS, F_SEAL_SHRINK));
	self->mem = mmap(NULL, self->len, PROT_READ | PROT_WRITE, MAP_SHARED, self->memfd, 0);
	ASSERT_NE(MAP_FAILED, self->mem);
	pd_fill(self->mem, self->len, 0xf00d);
	c.memfd = self->memfd;
	c.size = self->len;
	self->ubuf = ioctl(dev, UDMABUF_CREATE, &c);
	close(dev);
	ASSERT_LE(0, self->ubuf) TH_LOG("UDMABUF_CREATE: %s", strerror(errno));
	ASSERT_EQ(0, fstat(self->ubuf, &self->st));
	self->fd = pd_open(PD_DEV0);
	ASSERT_LE(0, self->fd);
}

FIXTURE_TEARDOWN(foreign)
{
	if (self->mem != MAP_FAILED)
		munmap(self->mem, self->len);
	if (self->ubuf >= 0)
		close(self->ubuf);
	if (self->memfd >= 0)
		close(self->memfd);
	if (self->fd >= 0)
		close(self->fd);
}

/* "exp_name" of a dma-buf fd, from fdinfo: what tells exporters apart. */
static int exporter_of(int fd, char *name, size_t len)
{
	char path[64], line[128];
	FILE *f;
	int found = -1;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	f = fopen(path, "r");
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "exp_name: %63s", name) == 1 && strlen(name) < len)
			found = 0;
	if (f)
		fclose(f);
	return found;
}

/* 1 if peerdirect0's debugfs export table has a dma-buf of inode @ino. */
static int debugfs_lists_inode(unsigned long long ino)
{
	FILE *f = fopen("/sys/kernel/debug/peerdirect/peerdirect0/exports", "r");
	unsigned long long id, inode;
	char line[256];
	int pid, found = 0;

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "%llu %d %llu", &id, &pid, &inode) == 3 && inode == ino)
			found = 1;
	if (f)
		fclose(f);
	return f ? found : -1;
}

TEST_F(foreign, test_importer_imports_udmabuf_like_ours)
{
	static const uint32_t kinds[] = { PDTI_DYNAMIC, PDTI_PINNED, PDTI_PINNED | PDTI_REVOCABLE };
	unsigned char *buf = malloc(self->len);
	struct pdti_status st;
	unsigned int i;
	int t;

	if (self->ubuf < 0)	/* 6.1's harness runs the test after a SKIP in setup */
		SKIP(free(buf); return, NO_UDMABUF);
	ASSERT_NE(NULL, buf);
	for (i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		t = pdti_open_as(NULL);
		ASSERT_LE(0, t);
		ASSERT_EQ(0, pdti_import(t, self->ubuf, kinds[i], 0)) TH_LOG("kind %#x", kinds[i]);
		ASSERT_EQ(0, pdti_status(t, &st));
		EXPECT_EQ(0, st.sg_error);
		if (st.unverified)	/* 6.1's udmabuf has no vmap */
			TH_LOG("no exporter vmap: checked through DMA reads only");
		else
			EXPECT_EQ(self->len / 4096, st.sg_checked);
		EXPECT_EQ(self->len, st.size);
		EXPECT_LE(st.max_entry, 65536);
		memset(buf, 0, self->len);
		ASSERT_EQ(0, pdti_read(t, 0, buf, self->len));
		EXPECT_EQ(0, pd_check(buf, self->len, 0xf00d));
		EXPECT_EQ(0, st.move_notify);
		close(t);
	}
	free(buf);
}

/*
 * Export ids, device revocation and events only ever concern our own
 * dma-bufs: a udmabuf's inode used as an export id is unknown, a reset
 * does not notify its importer, and no event names it.
 */
TEST_F(foreign, module_apis_never_reach_a_foreign_dmabuf)
{
	struct peerdirect_revoke r = { .argsz = sizeof(r), .flags = PEERDIRECT_REVOKE_EXPORT };
	unsigned char *buf = malloc(self->len);
	struct peerdirect_event ev;
	struct peerdirect_query q;
	struct pdti_status st;
	struct stat ours;
	char name[64];
	int t, d, events = 0;
	__u64 id = 0;
	int64_t h;

	if (self->ubuf < 0)
		SKIP(free(buf); return, NO_UDMABUF);
	ASSERT_NE(NULL, buf);
	ASSERT_EQ(0, pd_query(self->fd, &q));
	h = pd_alloc(self->fd, q.page_size);
	ASSERT_LT(0, h);
	d = pd_export_id(self->fd, h, 0, q.page_size, PEERDIRECT_EXPORT_RDWR, &id);
	ASSERT_LE(0, d);
	ASSERT_EQ(0, fstat(d, &ours));
	ASSERT_NE(ours.st_ino, self->st.st_ino);

	/* what a library can tell them apart by */
	ASSERT_EQ(0, exporter_of(self->ubuf, name, sizeof(name)));
	EXPECT_STREQ("udmabuf", name);
	ASSERT_EQ(0, exporter_of(d, name, sizeof(name)));
	EXPECT_STREQ("peerdirect", name);
	EXPECT_EQ(1, debugfs_lists_inode(ours.st_ino));
	EXPECT_EQ(0, debugfs_lists_inode(self->st.st_ino));

	t = pdti_open_as(NULL);
	ASSERT_LE(0, t);
	ASSERT_EQ(0, pdti_import(t, self->ubuf, PDTI_PINNED, 0));

	if (self->st.st_ino != id) {
		EXPECT_EQ(-ENOENT, pd_revoke(self->fd, PEERDIRECT_REVOKE_EXPORT, 0,
					     self->st.st_ino, NULL));
		r.export_id = self->st.st_ino;
		EXPECT_EQ(-1, ioctl(self->fd, PEERDIRECT_IOCTL_ADMIN_REVOKE, &r));
		EXPECT_EQ(ENOENT, errno);
	}
	ASSERT_EQ(0, pd_reset(self->fd, NULL));

	/* ours is revoked, the udmabuf and its importer untouched */
	EXPECT_EQ(-ENODEV, pd_sync(d, DMA_BUF_SYNC_START | DMA_BUF_SYNC_READ));
	EXPECT_EQ(0, pd_sync(self->ubuf, DMA_BUF_SYNC_START | DMA_BUF_SYNC_READ));
	EXPECT_EQ(0, pd_sync(self->ubuf, DMA_BUF_SYNC_END | DMA_BUF_SYNC_READ));
	ASSERT_EQ(0, pdti_status(t, &st));
	EXPECT_EQ(0, st.move_notify);
	EXPECT_EQ(1, st.mapped);
	EXPECT_EQ(0, ioctl(t, PDTI_IOCTL_REMAP));
	ASSERT_EQ(0, pdti_read(t, 0, buf, self->len));
	EXPECT_EQ(0, pd_check(buf, self->len, 0xf00d));

	/* every event names one of ours */
	fcntl(self->fd, F_SETFL, O_NONBLOCK);
	while (read(self->fd, &ev, sizeof(ev)) == sizeof(ev)) {
		events++;
		EXPECT_EQ(ours.st_ino, ev.inode);
		EXPECT_EQ(id, ev.export_id);
	}
	EXPECT_EQ(1, events);
	close(t);
	close(d);
	free(buf);
}

TEST_HARNESS_MAIN
