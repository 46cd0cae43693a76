// SPDX-License-Identifier: GPL-2.0
/* Revocation: what CPU mappings, SYNC, importers and the pool see. */
#include <signal.h>
#include "kselftest_harness.h"
#include "pd_test.h"

FIXTURE(rv) {
	int fd;
	struct peerdirect_query q;
	int64_t h;
	size_t len;
	bool restore_require_revocable;
};

FIXTURE_SETUP(rv)
{
	self->fd = pd_open(PD_DEV0);
	ASSERT_LE(0, self->fd);
	ASSERT_EQ(0, pd_query(self->fd, &self->q));
	self->len = 2 * self->q.page_size;
	self->h = pd_alloc(self->fd, self->len);
	ASSERT_LT(0, self->h);
}

FIXTURE_TEARDOWN(rv)
{
	if (self->restore_require_revocable)
		pd_param_write("require_revocable", "1");
	close(self->fd);
}

/*
 * The administrator accepts importers that cannot be revoked (a BAR under
 * the 7.1 contract refuses them by default); restored in teardown.
 */
static int accept_unrevocable(FIXTURE_DATA(rv) *self)
{
	if (!(self->q.features & PEERDIRECT_FEAT_REVOCABLE_ONLY))
		return 0;
	self->restore_require_revocable = true;
	return pd_param_write("require_revocable", "0");
}

/* A legacy pinned importer hears of a revoke only where it has the op. */
static int legacy_pinned_notified(void)
{
	return !(pdti_kernel_facts() & PDTI_K_REVOCABLE_CONTRACT);
}

static int fixture_import(int dbuf, uint32_t flags)
{
	int imp = pdti_open("peerdirect0");

	if (imp < 0 || pdti_import(imp, dbuf, flags, 0)) {
		if (imp >= 0)
			close(imp);
		return -1;
	}
	return imp;
}

/* A CPU mapping faults with SIGBUS once its export is revoked. */
TEST_SIGNAL(cpu_access_after_revoke_is_sigbus, SIGBUS)
{
	int fd = pd_open(PD_DEV0);
	int64_t h = pd_alloc(fd, 4096);
	__u64 id = 0;
	int d = pd_export_id(fd, h, 0, 4096, PEERDIRECT_EXPORT_RDWR, &id);
	volatile unsigned char *p;

	ASSERT_LE(0, d);
	p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, d, 0);
	ASSERT_NE(MAP_FAILED, p);
	p[0] = 1;
	ASSERT_EQ(0, pd_revoke(fd, PEERDIRECT_REVOKE_EXPORT, 0, id, NULL));
	p[0] = 2;	/* the PTE is gone: this faults */
	TH_LOG("write after revoke did not fault");
}

TEST_F(rv, mmap_and_sync_after_revoke_are_enodev)
{
	int d = pd_export(self->fd, self->h, 0, self->len);
	struct peerdirect_revoke r;
	void *p;

	ASSERT_LE(0, d);
	ASSERT_EQ(0, pd_sync(d, DMA_BUF_SYNC_START | DMA_BUF_SYNC_RW));
	ASSERT_EQ(0, pd_revoke(self->fd, PEERDIRECT_REVOKE_ALLOC, self->h, 0, &r));
	EXPECT_EQ(1, r.revoked);
	EXPECT_EQ(0, r.pending);
	EXPECT_EQ(-ENODEV, pd_sync(d, DMA_BUF_SYNC_END | DMA_BUF_SYNC_RW));
	p = mmap(NULL, 4096, PROT_READ, MAP_SHARED, d, 0);
	EXPECT_EQ(MAP_FAILED, p);
	EXPECT_EQ(ENODEV, errno);
	/* revoking again changes nothing */
	ASSERT_EQ(0, pd_revoke(self->fd, PEERDIRECT_REVOKE_ALLOC, self->h, 0, &r));
	EXPECT_EQ(0, r.revoked);
	close(d);
}

TEST_F(rv, revoking_one_export_leaves_the_others)
{
	__u64 id1 = 0;
	int d1 = pd_export_id(self->fd, self->h, 0, 4096, PEERDIRECT_EXPORT_RDWR, &id1);
	int d2 = pd_export(self->fd, self->h, 0, 4096);
	struct peerdirect_revoke r;

	ASSERT_LE(0, d1);
	ASSERT_LE(0, d2);
	ASSERT_EQ(0, pd_revoke(self->fd, PEERDIRECT_REVOKE_EXPORT, 0, id1, &r));
	EXPECT_EQ(1, r.revoked);
	EXPECT_EQ(-ENODEV, pd_sync(d1, DMA_BUF_SYNC_START | DMA_BUF_SYNC_READ));
	EXPECT_EQ(0, pd_sync(d2, DMA_BUF_SYNC_START | DMA_BUF_SYNC_READ));
	EXPECT_EQ(0, pd_sync(d2, DMA_BUF_SYNC_END | DMA_BUF_SYNC_READ));
	/* the allocation can still be exported */
	close(d1);
	d1 = pd_export(self->fd, self->h, 0, 4096);
	EXPECT_LE(0, d1);
	close(d1);
	close(d2);
}

TEST_F(rv, exports_of_other_files_cannot_be_revoked)
{
	int fd2 = pd_open(PD_DEV0);
	__u64 id = 0;
	int d = pd_export_id(self->fd, self->h, 0, 4096, PEERDIRECT_EXPORT_RDWR, &id);

	ASSERT_LE(0, fd2);
	ASSERT_LE(0, d);
	EXPECT_EQ(-ENOENT, pd_revoke(fd2, PEERDIRECT_REVOKE_EXPORT, 0, id, NULL));
	EXPECT_EQ(0, pd_sync(d, DMA_BUF_SYNC_START | DMA_BUF_SYNC_READ));
	close(d);
	close(fd2);
}

TEST_F(rv, reset_revokes_everything_but_keeps_allocations)
{
	int fd2 = pd_open(PD_DEV0);
	int64_t h2 = pd_alloc(fd2, 4096);
	int d1 = pd_export(self->fd, self->h, 0, 4096);
	int d2 = pd_export(fd2, h2, 0, 4096);
	struct peerdirect_reset rs;

	ASSERT_LE(0, d1);
	ASSERT_LE(0, d2);
	ASSERT_EQ(0, pd_reset(self->fd, &rs));
	EXPECT_EQ(2, rs.revoked);
	EXPECT_EQ(0, rs.pending);
	EXPECT_EQ(-ENODEV, pd_sync(d1, DMA_BUF_SYNC_START | DMA_BUF_SYNC_READ));
	EXPECT_EQ(-ENODEV, pd_sync(d2, DMA_BUF_SYNC_START | DMA_BUF_SYNC_READ));
	close(d1);
	close(d2);
	d1 = pd_export(self->fd, self->h, 0, 4096);
	EXPECT_LE(0, d1);
	close(d1);
	close(fd2);
}

TEST_F(rv, admin_revokes_any_export)
{
	int fd2 = pd_open(PD_DEV0);
	struct peerdirect_revoke r = { .argsz = sizeof(r), .flags = PEERDIRECT_REVOKE_EXPORT };
	int d = pd_export_id(self->fd, self->h, 0, 4096, PEERDIRECT_EXPORT_RDWR, &r.export_id);

	ASSERT_LE(0, fd2);
	ASSERT_LE(0, d);
	ASSERT_EQ(0, ioctl(fd2, PEERDIRECT_IOCTL_ADMIN_REVOKE, &r));
	EXPECT_EQ(1, r.revoked);
	EXPECT_EQ(-ENODEV, pd_sync(d, DMA_BUF_SYNC_START | DMA_BUF_SYNC_READ));
	close(d);
	close(fd2);
}

/* A dynamic importer is told, drops its mapping, and cannot map again. */
TEST_F(rv, dynamic_importer_unmaps_on_move_notify)
{
	int d = pd_export(self->fd, self->h, 0, self->len);
	struct peerdirect_revoke r;
	struct pdti_status st;
	int imp;

	ASSERT_LE(0, d);
	imp = fixture_import(d, PDTI_DYNAMIC);
	ASSERT_LE(0, imp);
	ASSERT_EQ(0, pdti_status(imp, &st));
	EXPECT_EQ(1, st.mapped);
	EXPECT_EQ(0, st.move_notify);

	ASSERT_EQ(0, pd_revoke(self->fd, PEERDIRECT_REVOKE_ALLOC, self->h, 0, &r));
	EXPECT_EQ(1, r.revoked);
	EXPECT_EQ(0, r.pending);
	ASSERT_EQ(0, pdti_status(imp, &st));
	EXPECT_EQ(1, st.move_notify);
	EXPECT_EQ(0, st.mapped);
	EXPECT_EQ(-1, ioctl(imp, PDTI_IOCTL_REMAP));
	EXPECT_EQ(ENODEV, errno);
	close(imp);
	close(d);
}

TEST_F(rv, new_importers_are_refused_after_revoke)
{
	int d = pd_export(self->fd, self->h, 0, 4096);
	int imp = pdti_open("peerdirect0");

	ASSERT_LE(0, d);
	ASSERT_LE(0, imp);
	ASSERT_EQ(0, pd_revoke(self->fd, PEERDIRECT_REVOKE_ALLOC, self->h, 0, NULL));
	EXPECT_EQ(-ENODEV, pdti_import(imp, d, PDTI_PINNED, 0));
	EXPECT_EQ(-ENODEV, pdti_import(imp, d, PDTI_DYNAMIC, 0));
	close(imp);
	close(d);
}

/*
 * A pinned importer (RDMA-style) cannot let go on move_notify: revoke waits
 * boundedly, reports it pending, and the memory stays out of the pool
 * until the importer releases it.
 */
TEST_F(rv, pinned_importer_keeps_memory_quarantined)
{
	size_t len = self->q.quota;
	int64_t h;
	int d, imp;
	struct peerdirect_query q;
	struct pdti_status st;
	unsigned char *p, *back;

	ASSERT_EQ(0, pd_free(self->fd, self->h));
	h = pd_alloc(self->fd, len);
	ASSERT_LT(0, h);
	d = pd_export(self->fd, h, 0, len);
	ASSERT_LE(0, d);
	p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, d, 0);
	ASSERT_NE(MAP_FAILED, p);
	pd_fill(p, 4096, 77);
	munmap(p, 4096);
	ASSERT_EQ(0, accept_unrevocable(self));
	imp = fixture_import(d, PDTI_PINNED);
	ASSERT_LE(0, imp);
	close(d);

	ASSERT_EQ(0, pd_free(self->fd, h));	/* revokes, reason FREE */
	ASSERT_EQ(0, pdti_status(imp, &st));
	EXPECT_EQ(legacy_pinned_notified(), st.move_notify);
	EXPECT_EQ(1, st.mapped);
	EXPECT_EQ(1, st.pinned);
	EXPECT_LE(len, pd_debugfs_value("peerdirect0", "quarantined"));

	/* not back in the pool, still charged, while the importer holds it */
	ASSERT_EQ(0, pd_query(self->fd, &q));
	EXPECT_EQ(self->q.mem_size - len, q.mem_free);
	EXPECT_EQ(len, q.quota_used);
	/* and still the bytes the owner wrote */
	back = malloc(4096);
	ASSERT_EQ(0, pdti_read(imp, 0, back, 4096));
	EXPECT_EQ(0, pd_check(back, 4096, 77));
	free(back);

	ASSERT_EQ(0, ioctl(imp, PDTI_IOCTL_RELEASE));
	close(imp);
	ASSERT_EQ(0, pd_query(self->fd, &q));
	EXPECT_EQ(self->q.mem_size, q.mem_free);
	EXPECT_EQ(0, pd_debugfs_value("peerdirect0", "quarantined"));
	h = pd_alloc(self->fd, len);
	EXPECT_LT(0, h);
}

TEST_F(rv, revoke_reports_pinned_importers_pending)
{
	int d = pd_export(self->fd, self->h, 0, 4096);
	struct peerdirect_revoke r;
	long long before = pd_debugfs_value("peerdirect0", "revoke_timeouts");
	int imp;

	ASSERT_LE(0, d);
	ASSERT_EQ(0, accept_unrevocable(self));
	imp = fixture_import(d, PDTI_PINNED);
	ASSERT_LE(0, imp);
	ASSERT_EQ(0, pd_revoke(self->fd, PEERDIRECT_REVOKE_ALLOC, self->h, 0, &r));
	EXPECT_EQ(1, r.revoked);
	EXPECT_EQ(1, r.pending);
	EXPECT_EQ(before + 1, pd_debugfs_value("peerdirect0", "revoke_timeouts"));
	close(imp);
	close(d);
}

/*
 * A revocable pinned importer (RDMA's revocable registration) unmaps and
 * unpins inside invalidate_mappings, so a revoke completes: nothing
 * pending, nothing counted as a timeout, and the memory back in the pool
 * at free even though the importer still holds the dma-buf.
 */
TEST_F(rv, revocable_pinned_importer_lets_go)
{
	long long before = pd_debugfs_value("peerdirect0", "revoke_timeouts");
	struct peerdirect_revoke r;
	struct peerdirect_query q;
	struct pdti_status st;
	int d, imp, a, p, m;
	char state[32];
	__u64 id = 0;

	d = pd_export_id(self->fd, self->h, 0, self->len, PEERDIRECT_EXPORT_RDWR, &id);
	ASSERT_LE(0, d);
	imp = fixture_import(d, PDTI_PINNED | PDTI_REVOCABLE);
	ASSERT_LE(0, imp);
	ASSERT_EQ(0, pdti_status(imp, &st));
	EXPECT_EQ(1, st.pinned);
	EXPECT_EQ(1, st.mapped);

	ASSERT_EQ(0, pd_revoke(self->fd, PEERDIRECT_REVOKE_ALLOC, self->h, 0, &r));
	EXPECT_EQ(1, r.revoked);
	EXPECT_EQ(0, r.pending);
	EXPECT_EQ(before, pd_debugfs_value("peerdirect0", "revoke_timeouts"));
	ASSERT_EQ(0, pdti_status(imp, &st));
	EXPECT_EQ(1, st.move_notify);
	EXPECT_EQ(0, st.mapped);
	EXPECT_EQ(0, st.pinned);
	EXPECT_EQ(1, st.revoked);
	EXPECT_EQ(-1, ioctl(imp, PDTI_IOCTL_REMAP));
	EXPECT_EQ(ENODEV, errno);
	/* the exporter agrees: still attached, nothing pinned or mapped */
	ASSERT_EQ(1, pd_debugfs_export("peerdirect0", id, &a, &p, &m, state, sizeof(state)));
	EXPECT_EQ(1, a);
	EXPECT_EQ(0, p);
	EXPECT_EQ(0, m);
	EXPECT_STREQ("revoke", state);

	/* the memory returns once the importer drops the dma-buf */
	close(d);
	ASSERT_EQ(0, pd_free(self->fd, self->h));
	ASSERT_EQ(0, pd_query(self->fd, &q));
	EXPECT_EQ(self->q.mem_size - self->len, q.mem_free);
	close(imp);
	ASSERT_EQ(0, pd_query(self->fd, &q));
	EXPECT_EQ(self->q.mem_size, q.mem_free);
}

/*
 * Under the 7.1 contract a BAR refuses, at import, importers that cannot
 * be revoked, unless the administrator accepts them; where the kernel
 * cannot tell (before 7.1) the setting is refused.  Simulated memory is
 * RAM that quarantine keeps safe: every importer is accepted there.
 */
TEST_F(rv, unrevocable_importers_follow_require_revocable)
{
	int contract = !!(pdti_kernel_facts() & PDTI_K_REVOCABLE_CONTRACT);
	int bar = self->q.backend == PEERDIRECT_BACKEND_PCI_BAR;
	int d = pd_export(self->fd, self->h, 0, self->len), imp;
	struct peerdirect_query q;

	ASSERT_LE(0, d);
	EXPECT_EQ(contract && bar, !!(self->q.features & PEERDIRECT_FEAT_REVOCABLE_ONLY));
	if (!contract) {
		EXPECT_EQ(-EINVAL, pd_param_write("require_revocable", "1"));
		EXPECT_EQ(0, pd_param_write("require_revocable", "0"));
	}
	imp = pdti_open("peerdirect0");
	ASSERT_LE(0, imp);
	EXPECT_EQ(contract && bar ? -EOPNOTSUPP : 0, pdti_import(imp, d, PDTI_PINNED, 0));
	close(imp);
	if (contract) {
		self->restore_require_revocable = true;
		ASSERT_EQ(0, pd_param_write("require_revocable", "0"));
		ASSERT_EQ(0, pd_query(self->fd, &q));
		EXPECT_EQ(0, q.features & PEERDIRECT_FEAT_REVOCABLE_ONLY);
		imp = pdti_open("peerdirect0");
		ASSERT_LE(0, imp);
		EXPECT_EQ(0, pdti_import(imp, d, PDTI_PINNED, 0));
		close(imp);
	}
	/* dynamic importers and revocable pinned ones are always welcome */
	imp = pdti_open("peerdirect0");
	ASSERT_LE(0, imp);
	EXPECT_EQ(0, pdti_import(imp, d, PDTI_DYNAMIC, 0));
	close(imp);
	imp = pdti_open("peerdirect0");
	ASSERT_LE(0, imp);
	EXPECT_EQ(0, pdti_import(imp, d, PDTI_PINNED | PDTI_REVOCABLE, 0));
	close(imp);
	close(d);
}

TEST_HARNESS_MAIN
