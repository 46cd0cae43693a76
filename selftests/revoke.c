// SPDX-License-Identifier: GPL-2.0
/* Revocation: what CPU mappings, SYNC, importers and the pool see. */
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include "kselftest_harness.h"
#include "pd_test.h"

FIXTURE(rv) {
	int fd;
	struct peerdirect_query q;
	int64_t h;
	size_t len;
	bool restore_require_revocable;
	char timeout_ms[32];
};

FIXTURE_SETUP(rv)
{
	self->fd = pd_open(PD_DEV0);
	ASSERT_LE(0, self->fd);
	ASSERT_EQ(0, pd_query(self->fd, &self->q));
	self->len = 2 * self->q.page_size;
	self->h = pd_alloc(self->fd, self->len);
	ASSERT_LT(0, self->h);
	ASSERT_EQ(0, pd_param_read("revoke_timeout_ms", self->timeout_ms,
				   sizeof(self->timeout_ms)));
}

FIXTURE_TEARDOWN(rv)
{
	if (self->restore_require_revocable)
		pd_param_write("require_revocable", "0");
	pd_param_write("revoke_timeout_ms", self->timeout_ms);
	close(self->fd);
}

/*
 * Whether the kernel tells revocable pinned importers from the others (the
 * 7.1 contract): only then may a pinned importer be invalidated.
 */
static int revocable_contract(void)
{
	return !!(pdti_kernel_facts() & PDTI_K_REVOCABLE_CONTRACT);
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

/* A number from a sysfs file (a "%x:%x:%x.%x" PCI path when @d); -1 on error. */
static long long sysfs_value(const struct pdti_device *d, const char *name)
{
	char path[160], buf[64];
	ssize_t n;
	int f;

	if (d)
		snprintf(path, sizeof(path), "/sys/bus/pci/devices/%04x:%02x:%02x.%x/%s",
			 d->domain, d->bus, d->devfn >> 3, d->devfn & 7, name);
	else
		snprintf(path, sizeof(path), "/sys/class/misc/peerdirect0/%s", name);
	f = open(path, O_RDONLY | O_CLOEXEC);
	if (f < 0)
		return -1;
	n = read(f, buf, sizeof(buf) - 1);
	close(f);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	return strtoll(buf, NULL, 0);
}

TEST_F(rv, reset_revokes_everything_but_keeps_allocations)
{
	int fd2 = pd_open(PD_DEV0);
	int64_t h2 = pd_alloc(fd2, 4096);
	int d1 = pd_export(self->fd, self->h, 0, 4096);
	int d2 = pd_export(fd2, h2, 0, 4096);
	struct peerdirect_reset rs;
	long long resets = sysfs_value(NULL, "resets");

	ASSERT_LE(0, d1);
	ASSERT_LE(0, d2);
	ASSERT_EQ(0, pd_reset(self->fd, &rs));
	/* Every reset is counted, whatever it revoked. */
	EXPECT_LE(0, resets);
	EXPECT_EQ(resets + 1, sysfs_value(NULL, "resets"));
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
	imp = fixture_import(d, PDTI_PINNED);
	ASSERT_LE(0, imp);
	close(d);

	ASSERT_EQ(0, pd_free(self->fd, h));	/* revokes, reason FREE */
	ASSERT_EQ(0, pdti_status(imp, &st));
	/* pinned: never invalidated (RDMA logs an error for each call) */
	EXPECT_EQ(0, st.move_notify);
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

	if (!revocable_contract()) {
		/*
		 * Before 7.1 nothing tells this importer from one that can
		 * only log the call: pinned means quarantined, not invalidated.
		 */
		ASSERT_EQ(0, pd_revoke(self->fd, PEERDIRECT_REVOKE_ALLOC, self->h, 0, &r));
		EXPECT_EQ(1, r.revoked);
		EXPECT_EQ(1, r.pending);
		ASSERT_EQ(0, pdti_status(imp, &st));
		EXPECT_EQ(0, st.move_notify);
		EXPECT_EQ(1, st.mapped);
		EXPECT_EQ(1, st.pinned);
		close(imp);
		close(d);
		return;
	}
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
 * Importers that cannot be revoked (pinned without the revocable op, as
 * EFA) are accepted by default on every kernel and backend.  Refusing them
 * is the administrator's choice (require_revocable=1), which only a kernel
 * that can tell them apart (7.1 contract) allows, and only a BAR enforces:
 * simulated memory is RAM that quarantine keeps safe.
 */
TEST_F(rv, unrevocable_importers_follow_require_revocable)
{
	int contract = !!(pdti_kernel_facts() & PDTI_K_REVOCABLE_CONTRACT);
	int bar = self->q.backend == PEERDIRECT_BACKEND_PCI_BAR;
	int d = pd_export(self->fd, self->h, 0, self->len), imp;
	struct peerdirect_query q;
	char v[8];

	ASSERT_LE(0, d);
	ASSERT_EQ(0, pd_param_read("require_revocable", v, sizeof(v)));
	EXPECT_STREQ("N", v);
	EXPECT_EQ(0, self->q.features & PEERDIRECT_FEAT_REVOCABLE_ONLY);
	imp = pdti_open("peerdirect0");
	ASSERT_LE(0, imp);
	EXPECT_EQ(0, pdti_import(imp, d, PDTI_PINNED, 0));
	close(imp);
	if (!contract) {
		EXPECT_EQ(-EINVAL, pd_param_write("require_revocable", "1"));
		ASSERT_EQ(0, pd_param_read("require_revocable", v, sizeof(v)));
		EXPECT_STREQ("N", v);
	} else {
		self->restore_require_revocable = true;
		ASSERT_EQ(0, pd_param_write("require_revocable", "1"));
		ASSERT_EQ(0, pd_query(self->fd, &q));
		EXPECT_EQ(bar, !!(q.features & PEERDIRECT_FEAT_REVOCABLE_ONLY));
		imp = pdti_open("peerdirect0");
		ASSERT_LE(0, imp);
		EXPECT_EQ(bar ? -EOPNOTSUPP : 0, pdti_import(imp, d, PDTI_PINNED, 0));
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

/*
 * The EFA case with default parameters: a pinned importer without the
 * revocable op (ib_umem_dmabuf_get_pinned()) is accepted, LIST marks it
 * not revocable, a revoke waits revoke_timeout_ms and reports it pending,
 * and after free the memory stays quarantined until the importer lets go.
 */
TEST_F(rv, an_efa_like_importer_is_accepted_and_quarantined)
{
	struct peerdirect_attach_info a[8];
	struct peerdirect_export_info e[8];
	struct peerdirect_list l = {
		.argsz = sizeof(l), .flags = PEERDIRECT_LIST_ATTACHMENTS,
		.export_size = sizeof(e[0]), .attach_size = sizeof(a[0]),
		.exports = (uintptr_t)e, .attachments = (uintptr_t)a,
		.nr_exports = 8, .nr_attachments = 8,
	};
	long long before = pd_debugfs_value("peerdirect0", "revoke_timeouts");
	struct peerdirect_revoke r;
	struct peerdirect_query q;
	__u32 i, mine = 0;
	__u64 id = 0;
	int d, imp;

	d = pd_export_id(self->fd, self->h, 0, self->len, PEERDIRECT_EXPORT_RDWR, &id);
	ASSERT_LE(0, d);
	imp = fixture_import(d, PDTI_PINNED);
	ASSERT_LE(0, imp) TH_LOG("a pinned importer is refused with default parameters");
	ASSERT_EQ(0, ioctl(self->fd, PEERDIRECT_IOCTL_LIST, &l));
	for (i = 0; i < l.nr_attachments; i++) {
		if (a[i].export_id != id)
			continue;
		mine++;
		EXPECT_TRUE(a[i].flags & PEERDIRECT_ATTACH_INFO_PINNED);
		EXPECT_EQ(0, a[i].flags & PEERDIRECT_ATTACH_INFO_REVOCABLE);
	}
	EXPECT_EQ(1, mine);
	ASSERT_EQ(0, pd_revoke(self->fd, PEERDIRECT_REVOKE_EXPORT, 0, id, &r));
	EXPECT_EQ(1, r.revoked);
	EXPECT_EQ(1, r.pending);
	EXPECT_EQ(before + 1, pd_debugfs_value("peerdirect0", "revoke_timeouts"));
	close(d);
	ASSERT_EQ(0, pd_free(self->fd, self->h));
	ASSERT_EQ(0, pd_query(self->fd, &q));
	EXPECT_EQ(self->q.mem_size - self->len, q.mem_free);
	EXPECT_EQ(self->len, pd_debugfs_value("peerdirect0", "quarantined"));
	ASSERT_EQ(0, ioctl(imp, PDTI_IOCTL_RELEASE));
	close(imp);
	ASSERT_EQ(0, pd_query(self->fd, &q));
	EXPECT_EQ(self->q.mem_size, q.mem_free);
	EXPECT_EQ(0, pd_debugfs_value("peerdirect0", "quarantined"));
}

/*
 * A second revoke (or a reset) of an export that is already revoked and
 * still pinned revokes nothing, so it has nothing pending and nothing to
 * wait for: "pending" counts only what this call revoked.
 */
TEST_F(rv, revoke_twice_does_not_wait_again)
{
	long long before, t0;
	struct peerdirect_revoke r;
	struct peerdirect_reset rs;
	__u64 id = 0;
	int d, imp;

	ASSERT_EQ(0, pd_param_write("revoke_timeout_ms", "1000"));
	d = pd_export_id(self->fd, self->h, 0, 4096, PEERDIRECT_EXPORT_RDWR, &id);
	ASSERT_LE(0, d);
	imp = fixture_import(d, PDTI_PINNED);
	ASSERT_LE(0, imp);
	ASSERT_EQ(0, pd_revoke(self->fd, PEERDIRECT_REVOKE_EXPORT, 0, id, &r));
	EXPECT_EQ(1, r.revoked);
	EXPECT_EQ(1, r.pending);

	before = pd_debugfs_value("peerdirect0", "revoke_timeouts");
	t0 = pd_now_ms();
	ASSERT_EQ(0, pd_revoke(self->fd, PEERDIRECT_REVOKE_EXPORT, 0, id, &r));
	EXPECT_EQ(0, r.revoked);
	EXPECT_EQ(0, r.pending);
	ASSERT_EQ(0, pd_revoke(self->fd, PEERDIRECT_REVOKE_ALLOC, self->h, 0, &r));
	EXPECT_EQ(0, r.revoked);
	EXPECT_EQ(0, r.pending);
	ASSERT_EQ(0, pd_reset(self->fd, &rs));
	EXPECT_EQ(0, rs.revoked);
	EXPECT_EQ(0, rs.pending);
	EXPECT_GT(500, pd_now_ms() - t0);
	EXPECT_EQ(before, pd_debugfs_value("peerdirect0", "revoke_timeouts"));
	close(imp);
	close(d);
}

/* The wait is bounded by a bounded parameter. */
TEST_F(rv, revoke_timeout_ms_is_bounded)
{
	char v[32];

	EXPECT_EQ(-EINVAL, pd_param_write("revoke_timeout_ms", "4294967295"));
	EXPECT_EQ(-EINVAL, pd_param_write("revoke_timeout_ms", "60001"));
	EXPECT_EQ(-EINVAL, pd_param_write("revoke_timeout_ms", "-1"));
	EXPECT_EQ(0, pd_param_write("revoke_timeout_ms", "60000"));
	ASSERT_EQ(0, pd_param_read("revoke_timeout_ms", v, sizeof(v)));
	EXPECT_STREQ("60000", v);
	EXPECT_EQ(0, pd_param_write("revoke_timeout_ms", "0"));
}

/* A process killed while its revoke waits for a pinned importer dies now. */
TEST_F(rv, revoke_wait_is_killable)
{
	long long t0;
	int d, imp, status;
	__u64 id = 0;
	pid_t pid;

	ASSERT_EQ(0, pd_param_write("revoke_timeout_ms", "20000"));
	d = pd_export_id(self->fd, self->h, 0, 4096, PEERDIRECT_EXPORT_RDWR, &id);
	ASSERT_LE(0, d);
	imp = fixture_import(d, PDTI_PINNED);
	ASSERT_LE(0, imp);
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		pd_revoke(self->fd, PEERDIRECT_REVOKE_EXPORT, 0, id, NULL);
		_exit(0);
	}
	usleep(300 * 1000);
	t0 = pd_now_ms();
	ASSERT_EQ(0, kill(pid, SIGKILL));
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_TRUE(WIFSIGNALED(status));
	EXPECT_GT(2000, pd_now_ms() - t0);
	close(imp);
	close(d);
}

struct timed_revoke {
	int fd;
	__u64 id;
	struct peerdirect_revoke r;
	int ret;
	long long ms;
};

static void *timed_revoke_thread(void *arg)
{
	struct timed_revoke *tr = arg;
	long long t0 = pd_now_ms();

	tr->ret = pd_revoke(tr->fd, PEERDIRECT_REVOKE_EXPORT, 0, tr->id, &tr->r);
	tr->ms = pd_now_ms() - t0;
	return NULL;
}

struct timed_open {
	const char *path;
	int fd;
	long long ms;
};

static void *timed_open_thread(void *arg)
{
	struct timed_open *to = arg;
	long long t0 = pd_now_ms();

	to->fd = open(to->path, O_RDWR | O_CLOEXEC);
	to->ms = pd_now_ms() - t0;
	return NULL;
}

/*
 * Review N1: an importer that holds its reservation for 5 s (a GPU driver
 * evicting, or hung until its timeout) bounds nothing it should not.
 * REVOKE returns within revoke_timeout_ms and a margin (the revocation
 * completes once the importer lets go: it is then invalidated), and
 * meanwhile an open() of the device, of another misc device (misc_open()
 * holds the global misc_mtx across ->open) and the close() of an export
 * of another allocation of the device return at once.  Before, REVOKE
 * held pd_device.lock while it waited, unbounded, for the reservation,
 * and each of these waited for the importer.
 */
TEST_F(rv, revoke_is_bounded_while_importer_holds_resv)
{
	struct timed_revoke tr = { .fd = self->fd };
	struct timed_open pd0 = { .path = PD_DEV0 }, misc = { .path = PD_IMPORTER };
	long long t0, close_ms;
	struct pdti_status st;
	pthread_t rt, ot;
	int d, d2, imp, i, status;
	int64_t h2;
	pid_t holder;

	ASSERT_EQ(0, pd_param_write("revoke_timeout_ms", "100"));
	d = pd_export_id(self->fd, self->h, 0, 4096, PEERDIRECT_EXPORT_RDWR, &tr.id);
	ASSERT_LE(0, d);
	h2 = pd_alloc(self->fd, self->q.page_size);
	ASSERT_LT(0, h2);
	d2 = pd_export(self->fd, h2, 0, self->q.page_size);
	ASSERT_LE(0, d2);
	imp = fixture_import(d, PDTI_DYNAMIC);
	ASSERT_LE(0, imp);
	holder = pdti_fork_holder(imp, 5000);
	ASSERT_LT(0, holder);
	for (i = 0; i < 200 && export_busy(self->fd, tr.id) != 1; i++)
		usleep(10 * 1000);
	ASSERT_EQ(1, export_busy(self->fd, tr.id)) TH_LOG("the holder never took the reservation");

	ASSERT_EQ(0, pthread_create(&rt, NULL, timed_revoke_thread, &tr));
	usleep(100 * 1000);
	/* the device's open, under misc_mtx */
	ASSERT_EQ(0, pthread_create(&ot, NULL, timed_open_thread, &pd0));
	usleep(100 * 1000);
	/* an export of another allocation released, with pd_device.lock */
	t0 = pd_now_ms();
	close(d2);
	close_ms = pd_now_ms() - t0;
	/* another misc device's open, behind misc_mtx */
	timed_open_thread(&misc);
	pthread_join(ot, NULL);
	pthread_join(rt, NULL);
	TH_LOG("REVOKE %lld ms (revoke_timeout_ms 100), open of %s %lld ms, of %s %lld ms, close of another export %lld ms",
	       tr.ms, PD_DEV0, pd0.ms, PD_IMPORTER, misc.ms, close_ms);
	EXPECT_EQ(0, tr.ret);
	EXPECT_EQ(1, tr.r.revoked);
	EXPECT_EQ(1, tr.r.pending);
	EXPECT_GT(1000, tr.ms);
	EXPECT_LE(0, pd0.fd);
	EXPECT_GT(100, pd0.ms);
	EXPECT_LE(0, misc.fd);
	EXPECT_GT(100, misc.ms);
	EXPECT_GT(100, close_ms);
	/* The holder still holds: nothing waited for it.  Once it lets go,
	 * the revocation completes: the importer is invalidated. */
	EXPECT_EQ(0, waitpid(holder, &status, WNOHANG));
	ASSERT_EQ(0, pdti_release_and_wait_invalidated(imp, holder, &st));
	EXPECT_EQ(1, st.move_notify) TH_LOG("the importer was never invalidated");
	EXPECT_EQ(0, st.mapped);
	EXPECT_EQ(-ENODEV, pd_sync(d, DMA_BUF_SYNC_START | DMA_BUF_SYNC_READ));
	if (pd0.fd >= 0)
		close(pd0.fd);
	if (misc.fd >= 0)
		close(misc.fd);
	close(imp);
	close(d);
	EXPECT_EQ(0, pd_free(self->fd, h2));
}

/*
 * A revocation REVOKE marked and left to its revoke_work (an importer
 * held the reservation past REVOKE's deadline), met by a reset: the reset
 * waits for it within its own revoke_timeout_ms, and counts it pending if
 * the importer still holds on then.  Before, the reset's walk skipped the
 * export as revoked already and returned at once with nothing pending
 * while the revocable importer was still mapped.  @hold_ms: how long the
 * importer holds the reservation; @timeout_ms: revoke_timeout_ms.
 */
static void reset_meets_a_pending_revocation(struct __test_metadata *_metadata,
					     FIXTURE_DATA(rv) *self,
					     const char *timeout_ms,
					     uint32_t hold_ms, bool lets_go)
{
	struct peerdirect_revoke rr;
	struct peerdirect_reset r;
	long long t0, t_revoke, t_reset;
	struct pdti_status st;
	int d, imp, i;
	pid_t holder;
	__u64 id = 0;

	ASSERT_EQ(0, pd_param_write("revoke_timeout_ms", timeout_ms));
	d = pd_export_id(self->fd, self->h, 0, 4096, PEERDIRECT_EXPORT_RDWR, &id);
	ASSERT_LE(0, d);
	imp = fixture_import(d, PDTI_DYNAMIC);
	ASSERT_LE(0, imp);
	holder = pdti_fork_holder(imp, hold_ms);
	ASSERT_LT(0, holder);
	t0 = pd_now_ms();
	for (i = 0; i < 200 && export_busy(self->fd, id) != 1; i++)
		usleep(10 * 1000);
	ASSERT_EQ(1, export_busy(self->fd, id)) TH_LOG("the holder never took the reservation");

	ASSERT_EQ(0, pd_revoke(self->fd, PEERDIRECT_REVOKE_EXPORT, 0, id, &rr));
	t_revoke = pd_now_ms() - t0;
	ASSERT_EQ(1, rr.revoked);
	ASSERT_EQ(1, rr.pending);
	ASSERT_EQ(1, export_busy(self->fd, id)) TH_LOG("the holder let go before the reset");
	ASSERT_EQ(0, pd_reset(self->fd, &r));
	t_reset = pd_now_ms() - t0;
	TH_LOG("holder %u ms, revoke_timeout_ms %s: REVOKE done at %lld ms, RESET at %lld ms: revoked %u, pending %u",
	       hold_ms, timeout_ms, t_revoke, t_reset, r.revoked, r.pending);
	EXPECT_EQ(0, r.revoked);
	if (lets_go) {
		/*
		 * It waited for the holder, then for the revocation's end:
		 * the importer is invalidated (the importer's STATUS takes
		 * the reservation, so it is asked only now).
		 */
		EXPECT_EQ(0, r.pending);
		EXPECT_LE((long long)hold_ms - 100, t_reset);
		ASSERT_EQ(0, pdti_status(imp, &st));
		EXPECT_EQ(1, st.move_notify);
		EXPECT_EQ(0, st.mapped);
	} else {
		/* It gave up at its deadline, saying so. */
		EXPECT_EQ(1, r.pending);
		EXPECT_GT((long long)hold_ms - 500, t_reset);
		EXPECT_EQ(1, export_busy(self->fd, id));
	}
	ASSERT_EQ(0, pdti_release_and_wait_invalidated(imp, holder, &st));
	EXPECT_EQ(0, st.mapped) TH_LOG("the importer was never invalidated");
	close(imp);
	close(d);
}

/* The importer lets go within the reset's deadline: the reset waits for it. */
TEST_F(rv, reset_waits_for_a_revocation_another_call_left_pending)
{
	reset_meets_a_pending_revocation(_metadata, self, "1500", 2000, true);
}

/* It holds on past the reset's deadline: the reset counts it pending. */
TEST_F(rv, reset_counts_another_calls_unfinished_revocation_pending)
{
	reset_meets_a_pending_revocation(_metadata, self, "300", 3000, false);
}

/*
 * A fault that read "not revoked" under the reservation lock and inserts
 * its PTE after the revocation's mark and its first, lock-free zap: the
 * test importer stops the fault just there (PDTI_IOCTL_STALL_ARM: the page
 * table vmf_insert_pfn() allocates for a mapping in a fresh 2 MiB region)
 * while REVOKE marks, zaps and, the fault holding the reservation, leaves
 * its end to revoke_work.  Then the fault goes on: it must take back what
 * it inserted and end in SIGBUS.  Before, its PTE stayed and the access
 * went through after REVOKE had returned, until revoke_work's zap, which
 * an importer holding the reservation, or slow to let go in its
 * invalidation, delays for as long as it likes: here the importer's
 * invalidation waits (PDTI_SLOW_INVALIDATE) until the child has written or
 * died, so that revoke_work's zap cannot hide the PTE (under TCG the child
 * may not run again before revoke_work does).
 */
TEST_F(rv, fault_racing_the_mark_leaves_no_pte)
{
	const size_t two_mb = 2 << 20;
	struct peerdirect_revoke rr;
	int d, imp, go[2], status, ret;
	volatile char *p;
	char *area, *at;
	pid_t child;
	__u64 id = 0;

	ASSERT_EQ(0, pd_param_write("revoke_timeout_ms", "100"));
	d = pd_export_id(self->fd, self->h, 0, self->len, PEERDIRECT_EXPORT_RDWR, &id);
	ASSERT_LE(0, d);
	/* Attached, not mapped: the reservation is all the stall needs. */
	imp = fixture_import(d, PDTI_DYNAMIC | PDTI_NO_MAP | PDTI_SLOW_INVALIDATE);
	ASSERT_LE(0, imp);
	/* No page table under a 2 MiB region nothing touched. */
	area = mmap(NULL, 2 * two_mb, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
		    -1, 0);
	ASSERT_NE(MAP_FAILED, area);
	at = (char *)(((uintptr_t)area + two_mb - 1) & ~(uintptr_t)(two_mb - 1));
	p = mmap(at, self->len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, d, 0);
	ASSERT_EQ((void *)at, (void *)p);
	ASSERT_EQ(0, pipe(go));
	child = pd_fork_child();
	ASSERT_LE(0, child);
	if (child == 0) {
		char c;

		_exit(read(go[0], &c, 1) == 1 ? (p[0] = 1, 0) : 2);
	}
	ret = ioctl(imp, PDTI_IOCTL_STALL_ARM, &child) ? -errno : 0;
	if (ret == -EOPNOTSUPP) {
		ioctl(imp, PDTI_IOCTL_INVALIDATE_GO);
		kill(child, SIGKILL);
		waitpid(child, &status, 0);
		SKIP(return, "no kmem:mm_page_alloc tracepoint to stop the fault at");
	}
	ASSERT_EQ(0, ret);
	ASSERT_EQ(1, write(go[1], "g", 1));
	ret = ioctl(imp, PDTI_IOCTL_STALL_WAIT) ? -errno : 0;
	if (ret) {
		ioctl(imp, PDTI_IOCTL_STALL_RELEASE);
		ioctl(imp, PDTI_IOCTL_INVALIDATE_GO);
		kill(child, SIGKILL);
		waitpid(child, &status, 0);
		SKIP(return, "the fault allocated no page table under the reservation lock (%s)",
		     strerror(-ret));
	}
	/* The child's fault holds the reservation: REVOKE leaves it pending. */
	EXPECT_EQ(0, pd_revoke(self->fd, PEERDIRECT_REVOKE_EXPORT, 0, id, &rr));
	EXPECT_EQ(1, rr.revoked);
	EXPECT_EQ(1, rr.pending);
	ASSERT_EQ(0, ioctl(imp, PDTI_IOCTL_STALL_RELEASE));
	ASSERT_EQ(child, waitpid(child, &status, 0));
	ASSERT_EQ(0, ioctl(imp, PDTI_IOCTL_INVALIDATE_GO));
	TH_LOG("the child %s", WIFSIGNALED(status) ? strsignal(WTERMSIG(status)) :
	       WEXITSTATUS(status) ? "did not get the go" : "wrote through its PTE after REVOKE");
	EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGBUS);
	close(go[0]);
	close(go[1]);
	munmap(area, 2 * two_mb);
	close(imp);
	close(d);
}

struct resetter {
	int fd;
	long long start, end;
};

static void *reset_thread(void *arg)
{
	struct resetter *rs = arg;

	rs->start = pd_now_ms();
	pd_reset(rs->fd, NULL);
	rs->end = pd_now_ms();
	return NULL;
}

/*
 * An export created while a reset walks the device must not survive it:
 * the reset waits here for a pinned importer, and an export asked for in
 * the meantime either waits for the reset to finish or is revoked by it.
 */
TEST_F(rv, export_during_reset_does_not_survive_it)
{
	struct resetter rs = { .fd = self->fd };
	long long asked, done;
	pthread_t t;
	int d, d2, imp;

	ASSERT_EQ(0, pd_param_write("revoke_timeout_ms", "1000"));
	d = pd_export(self->fd, self->h, 0, 4096);
	ASSERT_LE(0, d);
	imp = fixture_import(d, PDTI_PINNED);
	ASSERT_LE(0, imp);
	ASSERT_EQ(0, pthread_create(&t, NULL, reset_thread, &rs));
	usleep(200 * 1000);	/* the reset is waiting for the importer */
	asked = pd_now_ms();
	d2 = pd_export(self->fd, self->h, 0, 4096);
	done = pd_now_ms();
	ASSERT_LE(0, d2);
	pthread_join(t, NULL);
	TH_LOG("reset %lld..%lld ms, export asked at %lld, done at %lld",
	       0LL, rs.end - rs.start, asked - rs.start, done - rs.start);
	if (!pd_sync(d2, DMA_BUF_SYNC_START | DMA_BUF_SYNC_READ)) {
		pd_sync(d2, DMA_BUF_SYNC_END | DMA_BUF_SYNC_READ);
		/* alive: then it was made after the reset's wait */
		EXPECT_LE(800, done - rs.start);
	}
	close(d2);
	close(imp);
	close(d);
}

/*
 * N9: a BAR export offers no kernel vmap, which would be CPU MMIO that no
 * revoke, reset or AER stops: dma_buf_vmap() is EINVAL (no .vmap, so no
 * WARN), for a read and for a held vmap.  Memory with pages (the simulated
 * backend) keeps its vmap.
 */
TEST_F(rv, vmap_only_of_memory_with_pages)
{
	unsigned char *p, buf[4096];
	int d = pd_export(self->fd, self->h, 0, 4096), imp, ret;

	ASSERT_LE(0, d);
	p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, d, 0);
	ASSERT_NE(MAP_FAILED, p);
	pd_fill(p, 4096, 95);
	munmap(p, 4096);
	ret = pdti_vmap_read(d, 0, buf, sizeof(buf));
	if (ret == -ENOENT || ret == -ENOTTY)
		SKIP(close(d); return, "test importer without vmap");
	if (self->q.backend == PEERDIRECT_BACKEND_PCI_BAR) {
		EXPECT_EQ(-EINVAL, ret);
		imp = open(PD_IMPORTER, O_RDWR | O_CLOEXEC);
		ASSERT_LE(0, imp);
		EXPECT_EQ(-1, ioctl(imp, PDTI_IOCTL_VMAP_HOLD, &d));
		EXPECT_EQ(EINVAL, errno);
		close(imp);
	} else {
		ASSERT_EQ(0, ret);
		EXPECT_EQ(0, pd_check(buf, sizeof(buf), 95));
	}
	close(d);
}

/*
 * A kernel importer's vmap after revocation reaches no device memory: it
 * reads zeros, never the owner's bytes, and (6.1's dma_buf_vmap() WARNs on
 * any exporter error) does not fail.
 */
TEST_F(rv, vmap_after_revoke_does_not_reach_memory)
{
	unsigned char *p, buf[4096], zero[4096] = { 0 };
	int d, ret;

	if (self->q.backend == PEERDIRECT_BACKEND_PCI_BAR)
		SKIP(return, "a BAR export has no kernel vmap (vmap_only_of_memory_with_pages)");
	d = pd_export(self->fd, self->h, 0, 4096);
	ASSERT_LE(0, d);
	p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, d, 0);
	ASSERT_NE(MAP_FAILED, p);
	pd_fill(p, 4096, 91);
	munmap(p, 4096);
	ret = pdti_vmap_read(d, 0, buf, sizeof(buf));
	if (ret == -ENOENT || ret == -ENOTTY)
		SKIP(close(d); return, "test importer without vmap");
	ASSERT_EQ(0, ret);
	EXPECT_EQ(0, pd_check(buf, sizeof(buf), 91));
	ASSERT_EQ(0, pd_revoke(self->fd, PEERDIRECT_REVOKE_ALLOC, self->h, 0, NULL));
	ASSERT_EQ(0, pdti_vmap_read(d, 0, buf, sizeof(buf)));
	EXPECT_EQ(0, memcmp(buf, zero, sizeof(buf)));
	close(d);
}

/*
 * A kernel vmap of device memory made before the revoke and still held is
 * an importer still reaching the memory: the revoke reports it pending
 * (an export only held open is not), and the memory, freed, stays out of
 * the pool until the vmap goes.  The core shares that vmap with later
 * callers, so a vmap taken after the revoke still shows the owner's bytes:
 * why the memory must stay quarantined.  (Memory comes back only when
 * every dma-buf over it is released, mapped or not: the control shows
 * that too.)
 */
TEST_F(rv, vmap_held_across_revoke_keeps_memory_quarantined)
{
	struct peerdirect_revoke r;
	struct peerdirect_query q0, q;
	unsigned char *p, buf[4096];
	int d, d2, imp, i;
	int64_t h2;

	if (self->q.backend == PEERDIRECT_BACKEND_PCI_BAR)
		SKIP(return, "a BAR export has no kernel vmap (vmap_only_of_memory_with_pages)");
	d = pd_export(self->fd, self->h, 0, self->len);
	ASSERT_LE(0, d);
	p = mmap(NULL, self->len, PROT_READ | PROT_WRITE, MAP_SHARED, d, 0);
	ASSERT_NE(MAP_FAILED, p);
	pd_fill(p, self->len, 93);
	munmap(p, self->len);
	imp = open(PD_IMPORTER, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, imp);
	if (ioctl(imp, PDTI_IOCTL_VMAP_HOLD, &d) && errno == ENOTTY)
		SKIP(close(imp); close(d); return, "test importer without VMAP_HOLD");
	ASSERT_EQ(0, pd_param_write("revoke_timeout_ms", "200"));

	/* The control: an export only held open is not pending, and its
	 * memory comes back once the dma-buf is released. */
	ASSERT_EQ(0, pd_query(self->fd, &q0));
	h2 = pd_alloc(self->fd, self->q.page_size);
	ASSERT_LT(0, h2);
	d2 = pd_export(self->fd, h2, 0, self->q.page_size);
	ASSERT_LE(0, d2);
	ASSERT_EQ(0, pd_revoke(self->fd, PEERDIRECT_REVOKE_ALLOC, h2, 0, &r));
	EXPECT_EQ(1, r.revoked);
	EXPECT_EQ(0, r.pending);
	ASSERT_EQ(0, pd_free(self->fd, h2));
	close(d2);
	for (i = 0; i < 50; i++) {
		ASSERT_EQ(0, pd_query(self->fd, &q));
		if (q.mem_free == q0.mem_free)
			break;
		usleep(20 * 1000);
	}
	EXPECT_EQ(q0.mem_free, q.mem_free) TH_LOG("the control's memory did not come back");

	/* The vmap: pending, shared, quarantined until it goes. */
	ASSERT_EQ(0, pd_revoke(self->fd, PEERDIRECT_REVOKE_ALLOC, self->h, 0, &r));
	EXPECT_EQ(1, r.revoked);
	EXPECT_EQ(1, r.pending);
	ASSERT_EQ(0, pdti_vmap_read(d, 0, buf, sizeof(buf)));
	EXPECT_EQ(0, pd_check(buf, sizeof(buf), 93)) TH_LOG("a later vmap did not share the held one");
	ASSERT_EQ(0, pd_free(self->fd, self->h));
	close(d);
	usleep(100 * 1000);
	ASSERT_EQ(0, pd_query(self->fd, &q));
	EXPECT_EQ(q0.mem_free, q.mem_free)
		TH_LOG("freed and closed while vmapped: %lld bytes came back to the pool",
		       (long long)(q.mem_free - q0.mem_free));
	ASSERT_EQ(0, ioctl(imp, PDTI_IOCTL_VMAP_DROP));
	for (i = 0; i < 50; i++) {
		ASSERT_EQ(0, pd_query(self->fd, &q));
		if (q.mem_free == q0.mem_free + self->len)
			break;
		usleep(20 * 1000);
	}
	EXPECT_EQ(q0.mem_free + self->len, q.mem_free)
		TH_LOG("the vmap went, the memory did not come back");
	close(imp);
}

static int poll_ready(int fd, short events)
{
	struct pollfd p = { .fd = fd, .events = events };

	return poll(&p, 1, 0) == 1 && (p.revents & events);
}

/*
 * Two exports of one allocation share one reservation object: a fence an
 * importer of the first adds (its pending DMA) is seen through the second,
 * by poll.  A revoke waits for fences only where the export had importers:
 * the second, which has none, is revoked at once (it once sat out the whole
 * revoke_timeout_ms behind its sibling's fence, which any holder of a
 * sibling's fd can add with DMA_BUF_IOCTL_IMPORT_SYNC_FILE); the first
 * waits for its importer's.
 */
TEST_F(rv, fence_seen_across_two_exports)
{
	__u64 id1 = 0, id2 = 0;
	int d1 = pd_export_id(self->fd, self->h, 0, self->len, PEERDIRECT_EXPORT_RDWR, &id1);
	int d2 = pd_export_id(self->fd, self->h, 0, self->len, PEERDIRECT_EXPORT_RDWR, &id2);
	struct peerdirect_revoke r;
	long long t0, dt;
	int imp;

	ASSERT_LE(0, d1);
	ASSERT_LE(0, d2);
	imp = fixture_import(d1, PDTI_DYNAMIC);
	ASSERT_LE(0, imp);
	EXPECT_TRUE(poll_ready(d2, POLLIN));
	ASSERT_EQ(0, ioctl(imp, PDTI_IOCTL_FENCE));
	EXPECT_FALSE(poll_ready(d1, POLLIN));
	EXPECT_FALSE(poll_ready(d2, POLLIN));

	ASSERT_EQ(0, pd_param_write("revoke_timeout_ms", "1000"));
	t0 = pd_now_ms();
	ASSERT_EQ(0, pd_revoke(self->fd, PEERDIRECT_REVOKE_EXPORT, 0, id2, &r));
	dt = pd_now_ms() - t0;
	EXPECT_EQ(1, r.revoked);
	EXPECT_EQ(0, r.pending);
	EXPECT_GT(500, dt) TH_LOG("a revoke without importers waited %lld ms for a sibling's fence", dt);
	ASSERT_EQ(0, pd_param_write("revoke_timeout_ms", "400"));
	t0 = pd_now_ms();
	ASSERT_EQ(0, pd_revoke(self->fd, PEERDIRECT_REVOKE_EXPORT, 0, id1, &r));
	dt = pd_now_ms() - t0;
	EXPECT_EQ(1, r.revoked);
	EXPECT_LE(300, dt) TH_LOG("the revoke waited %lld ms for its importer's fence", dt);

	ASSERT_EQ(0, ioctl(imp, PDTI_IOCTL_SIGNAL));
	EXPECT_TRUE(poll_ready(d2, POLLIN));
	EXPECT_TRUE(poll_ready(d1, POLLIN));
	close(imp);
	close(d1);
	close(d2);
}

struct pci_resetter {
	struct pdti_device dev;
	uint32_t kind;
	uint32_t hold_ms;	/* 0: 500 */
	int ret;
	long long start, end;
};

static void *pci_reset_thread(void *arg)
{
	struct pci_resetter *pr = arg;

	pr->start = pd_now_ms();
	pr->ret = pd_pci_reset(&pr->dev, pr->kind, pr->hold_ms ?: 500);
	pr->end = pd_now_ms();
	return NULL;
}

/*
 * A PCI function reset (sysfs reset, FLR) or AER recovery with live CPU
 * and importer mappings: every export is revoked around it (reason RESET,
 * the CPU mapping faults, a dynamic importer lets go), an export asked for
 * during it waits for its end, and the allocation survives it.
 */
static void pci_reset_with_live_mappings(struct __test_metadata *_metadata,
					 FIXTURE_DATA(rv) *self, uint32_t kind)
{
	struct pci_resetter pr = { .kind = kind };
	struct peerdirect_event ev;
	struct pdti_status st;
	long long before, asked, done, resets, enabled;
	int d, d2, imp, status;
	unsigned char *p, *q;
	pthread_t t;
	pid_t pid;

	if (self->q.backend != PEERDIRECT_BACKEND_PCI_BAR ||
	    pd_pci_function("peerdirect0", &pr.dev))
		SKIP(return, "not a PCI device");
	if (kind == PD_RESET_SYSFS) {
		char path[128];

		pd_pci_path(&pr.dev, "reset", path, sizeof(path));
		if (access(path, W_OK))
			SKIP(return, "%s: no reset method (scripts/vm-run.sh --ivshmem-bridged gives one)",
			     path);
	}
	before = pd_debugfs_value("peerdirect0", "revoked_reset");
	resets = sysfs_value(NULL, "resets");
	enabled = sysfs_value(&pr.dev, "enable");
	d = pd_export(self->fd, self->h, 0, self->len);
	ASSERT_LE(0, d);
	p = mmap(NULL, self->len, PROT_READ | PROT_WRITE, MAP_SHARED, d, 0);
	ASSERT_NE(MAP_FAILED, p);
	pd_fill(p, self->len, 55);
	imp = fixture_import(d, PDTI_DYNAMIC);
	ASSERT_LE(0, imp);

	ASSERT_EQ(0, pthread_create(&t, NULL, pci_reset_thread, &pr));
	/* Once the reset has revoked (its prepare half ran), it is under way:
	 * a slow kernel may take longer than any fixed sleep to get there. */
	for (asked = pd_now_ms(); pd_now_ms() - asked < 10000; usleep(5 * 1000))
		if (pd_debugfs_value("peerdirect0", "revoked_reset") > before)
			break;
	asked = pd_now_ms();
	d2 = pd_export(self->fd, self->h, 0, 4096);
	done = pd_now_ms();
	pthread_join(t, NULL);
	ASSERT_EQ(0, pr.ret) TH_LOG("reset: %s", strerror(-pr.ret));
	TH_LOG("reset %lld ms; export asked at %lld, done at %lld", pr.end - pr.start,
	       asked - pr.start, done - pr.start);
	ASSERT_LE(0, d2);
	/* made after the reset: alive */
	EXPECT_LE(pr.end - pr.start - 100, done - pr.start);
	EXPECT_EQ(0, pd_sync(d2, DMA_BUF_SYNC_START | DMA_BUF_SYNC_READ));
	EXPECT_EQ(0, pd_sync(d2, DMA_BUF_SYNC_END | DMA_BUF_SYNC_READ));

	EXPECT_EQ(-ENODEV, pd_sync(d, DMA_BUF_SYNC_START | DMA_BUF_SYNC_READ));
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		volatile unsigned char c = p[0];
		(void)c;
		_exit(0);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGBUS);
	ASSERT_EQ(0, pdti_status(imp, &st));
	EXPECT_EQ(1, st.move_notify);
	EXPECT_EQ(0, st.mapped);
	EXPECT_EQ(before + 1, pd_debugfs_value("peerdirect0", "revoked_reset"));
	EXPECT_LE(0, resets);
	EXPECT_EQ(resets + 1, sysfs_value(NULL, "resets"));
	/* The PCI core's enable count: ours once, before and after. */
	EXPECT_EQ(1, enabled);
	EXPECT_EQ(enabled, sysfs_value(&pr.dev, "enable"));
	/* The bytes survive the reset (nothing resets them under QEMU). */
	q = mmap(NULL, 4096, PROT_READ, MAP_SHARED, d2, 0);
	ASSERT_NE(MAP_FAILED, q);
	EXPECT_EQ(0, pd_check(q, 4096, 55));
	munmap(q, 4096);
	ASSERT_EQ(0, fcntl(self->fd, F_SETFL, O_NONBLOCK));
	while (read(self->fd, &ev, sizeof(ev)) == sizeof(ev) &&
	       ev.reason != PEERDIRECT_REASON_RESET)
		;
	EXPECT_EQ(PEERDIRECT_REASON_RESET, ev.reason);
	munmap(p, self->len);
	close(imp);
	close(d);
	close(d2);
}

TEST_F(rv, pci_function_reset_with_live_mappings)
{
	pci_reset_with_live_mappings(_metadata, self, PDTI_RESET_FUNCTION);
}

/* The same through the PCI core: a secondary bus reset from sysfs. */
TEST_F(rv, pci_sysfs_reset_with_live_mappings)
{
	pci_reset_with_live_mappings(_metadata, self, PD_RESET_SYSFS);
}

TEST_F(rv, pci_aer_recovery_with_live_mappings)
{
	pci_reset_with_live_mappings(_metadata, self, PDTI_RESET_AER);
}

/*
 * error_detected() on a normal channel answers CAN_RECOVER; when another
 * function below the link voted NEED_RESET the core still calls
 * slot_reset() and resume() on this one, but resets nothing (it resets the
 * link for frozen channels only, whose error_detected() begins our reset).
 * The exports, the importer's mapping and the counts stay; the enable
 * count stays balanced.  (An earlier change revoked here, for a reset
 * that does not happen.)
 */
TEST_F(rv, pci_slot_reset_after_can_recover_keeps_exports)
{
	struct pdti_status st;
	struct pdti_device dev;
	long long before, resets;
	int d, imp;

	if (self->q.backend != PEERDIRECT_BACKEND_PCI_BAR || pd_pci_function("peerdirect0", &dev))
		SKIP(return, "not a PCI device");
	before = pd_debugfs_value("peerdirect0", "revoked_reset");
	resets = sysfs_value(NULL, "resets");
	d = pd_export(self->fd, self->h, 0, self->len);
	ASSERT_LE(0, d);
	imp = fixture_import(d, PDTI_DYNAMIC);
	ASSERT_LE(0, imp);
	ASSERT_EQ(0, pd_pci_reset(&dev, PDTI_RESET_AER_CAN_RECOVER, 0));
	EXPECT_EQ(0, pd_sync(d, DMA_BUF_SYNC_START | DMA_BUF_SYNC_READ));
	EXPECT_EQ(0, pd_sync(d, DMA_BUF_SYNC_END | DMA_BUF_SYNC_READ));
	ASSERT_EQ(0, pdti_status(imp, &st));
	EXPECT_EQ(0, st.move_notify);
	EXPECT_EQ(1, st.mapped);
	EXPECT_EQ(before, pd_debugfs_value("peerdirect0", "revoked_reset"));
	EXPECT_EQ(resets, sysfs_value(NULL, "resets"));
	EXPECT_EQ(1, sysfs_value(&dev, "enable"));
	close(imp);
	close(d);
}

/*
 * An AER recovery that fails after error_detected() calls no handler of
 * ours again: the device stays in reset, its function disabled.  A
 * function reset (sysfs reset) afterwards ends that reset rather than
 * nesting a second one: the function is enabled (once) again, and EXPORT,
 * which waits for the end of a reset, returns at once.
 */
TEST_F(rv, function_reset_after_a_failed_recovery_ends_it)
{
	struct pdti_device dev;
	long long done;
	int status;
	pid_t pid;

	if (self->q.backend != PEERDIRECT_BACKEND_PCI_BAR || pd_pci_function("peerdirect0", &dev))
		SKIP(return, "not a PCI device");
	ASSERT_EQ(1, sysfs_value(&dev, "enable"));
	ASSERT_EQ(0, pd_pci_reset(&dev, PDTI_RESET_AER_FAILED, 0));
	EXPECT_EQ(0, sysfs_value(&dev, "enable"));
	ASSERT_EQ(0, pd_pci_reset(&dev, PDTI_RESET_FUNCTION, 0));
	EXPECT_EQ(1, sysfs_value(&dev, "enable"));
	/* In a child: on a device left resetting, EXPORT waits (killably). */
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid)
		_exit(pd_export(self->fd, self->h, 0, 4096) >= 0 ? 0 : 1);
	done = pd_reap_within(pid, &status, 3000);
	if (done < 0) {
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
	}
	ASSERT_LE(0, done) TH_LOG("EXPORT still waited 3 s after the function reset");
	EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/*
 * ALLOC on a PCI device waits for a reset to end before it zeroes the
 * memory; a reset may never end (a recovery that fails elsewhere calls no
 * handler of ours again), so the wait must be killable: a SIGKILLed
 * allocator is gone long before the reset ends, and nothing leaks.
 */
TEST_F(rv, alloc_waiting_for_a_reset_is_killable)
{
	struct pci_resetter pr = { .kind = PDTI_RESET_FUNCTION, .hold_ms = 3000 };
	long long free0, killed, reaped = -1;
	int status;
	pthread_t t;
	pid_t pid;

	if (self->q.backend != PEERDIRECT_BACKEND_PCI_BAR ||
	    pd_pci_function("peerdirect0", &pr.dev))
		SKIP(return, "not a PCI device");
	free0 = sysfs_value(NULL, "mem_free");
	ASSERT_EQ(0, pthread_create(&t, NULL, pci_reset_thread, &pr));
	usleep(200 * 1000);
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid)
		_exit(pd_alloc(self->fd, self->q.page_size) > 0 ? 0 : 1);
	usleep(300 * 1000);
	/* Still waiting for the reset: not returned. */
	EXPECT_EQ(0, waitpid(pid, &status, WNOHANG));
	ASSERT_EQ(0, kill(pid, SIGKILL));
	killed = pd_now_ms();
	reaped = pd_reap_within(pid, &status, 5000);
	pthread_join(t, NULL);
	ASSERT_EQ(0, pr.ret) TH_LOG("reset: %s", strerror(-pr.ret));
	ASSERT_LT(0, reaped);
	EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	/* Dead within a second of the signal, and before the reset ended. */
	EXPECT_GT(1000, reaped - killed);
	EXPECT_GT(pr.end, reaped) TH_LOG("reaped %lld ms after the reset ended",
					 reaped - pr.end);
	EXPECT_EQ(free0, sysfs_value(NULL, "mem_free"));
}

/*
 * AER on a frozen channel (review N3): the link is down and writes to the
 * BAR are dropped.  The hardware is blocked before the revoke waits for
 * importers, not after: an ALLOC asked for while the recovery's revoke
 * waits (here for an importer's fence, up to revoke_timeout_ms) zeroes
 * nothing until resume(), so it cannot hand out memory whose zeroing the
 * dead link dropped.
 */
TEST_F(rv, alloc_during_a_frozen_recovery_waits_for_resume)
{
	struct pci_resetter pr = { .kind = PDTI_RESET_AER, .hold_ms = 300 };
	long long before, t0, asked, done;
	int64_t h2;
	pthread_t t;
	int d, imp;

	if (self->q.backend != PEERDIRECT_BACKEND_PCI_BAR ||
	    pd_pci_function("peerdirect0", &pr.dev))
		SKIP(return, "not a PCI device");
	before = pd_debugfs_value("peerdirect0", "revoked_reset");
	d = pd_export(self->fd, self->h, 0, self->len);
	ASSERT_LE(0, d);
	imp = fixture_import(d, PDTI_DYNAMIC);
	ASSERT_LE(0, imp);
	/* pending DMA: the recovery's revoke waits for it */
	ASSERT_EQ(0, ioctl(imp, PDTI_IOCTL_FENCE));
	ASSERT_EQ(0, pd_param_write("revoke_timeout_ms", "3000"));

	ASSERT_EQ(0, pthread_create(&t, NULL, pci_reset_thread, &pr));
	for (t0 = pd_now_ms(); pd_now_ms() - t0 < 10000; usleep(5 * 1000))
		if (pd_debugfs_value("peerdirect0", "revoked_reset") > before)
			break;
	usleep(100 * 1000);
	asked = pd_now_ms();
	h2 = pd_alloc(self->fd, 4 * self->q.page_size);
	done = pd_now_ms();
	pthread_join(t, NULL);
	ASSERT_EQ(0, pr.ret) TH_LOG("recovery: %s", strerror(-pr.ret));
	TH_LOG("recovery %lld ms; ALLOC asked at %lld, done at %lld", pr.end - pr.start,
	       asked - pr.start, done - pr.start);
	EXPECT_LE(2000, pr.end - pr.start) TH_LOG("the revoke did not wait for the fence");
	EXPECT_LT(0, h2);
	/* resume() comes hold_ms after slot_reset(), just before the end */
	EXPECT_LE(pr.end - pr.start - 250, done - pr.start)
		TH_LOG("ALLOC zeroed a frozen device %lld ms before resume()",
		       pr.end - done);
	ASSERT_EQ(0, ioctl(imp, PDTI_IOCTL_SIGNAL));
	close(imp);
	close(d);
	if (h2 > 0)
		EXPECT_EQ(0, pd_free(self->fd, h2));
}

/*
 * Between a physical freeze and the AER interrupt the driver is told
 * nothing; only pci_channel_offline() shows it (on real hardware the
 * writes are dropped and a read-back gives all-ones).  A zeroing that ends
 * then fails with EIO instead of handing out memory it may not have
 * zeroed; once the channel is back, ALLOC works.
 */
TEST_F(rv, alloc_on_a_frozen_link_fails_with_eio)
{
	struct pci_resetter pr = { .kind = PDTI_RESET_FREEZE, .hold_ms = 1500 };
	long long free0;
	int64_t h2;
	pthread_t t;

	if (self->q.backend != PEERDIRECT_BACKEND_PCI_BAR ||
	    pd_pci_function("peerdirect0", &pr.dev))
		SKIP(return, "not a PCI device");
	free0 = sysfs_value(NULL, "mem_free");
	ASSERT_EQ(0, pthread_create(&t, NULL, pci_reset_thread, &pr));
	usleep(300 * 1000);
	h2 = pd_alloc(self->fd, 4 * self->q.page_size);
	pthread_join(t, NULL);
	ASSERT_EQ(0, pr.ret) TH_LOG("freeze: %s", strerror(-pr.ret));
	EXPECT_EQ(-EIO, h2) TH_LOG("ALLOC on a frozen link: %lld", (long long)h2);
	if (h2 > 0)
		EXPECT_EQ(0, pd_free(self->fd, h2));
	EXPECT_EQ(free0, sysfs_value(NULL, "mem_free"));
	h2 = pd_alloc(self->fd, 4 * self->q.page_size);
	EXPECT_LT(0, h2);
	if (h2 > 0)
		EXPECT_EQ(0, pd_free(self->fd, h2));
}

static int write_str(const char *path, const char *s)
{
	int f = open(path, O_WRONLY | O_CLOEXEC);
	int ret;

	if (f < 0)
		return -errno;
	ret = write(f, s, strlen(s)) == (ssize_t)strlen(s) ? 0 : -errno;
	close(f);
	return ret;
}

/*
 * A permanent channel failure (error_detected(perm_failure); the PCI core
 * then calls nothing more) gives the device up: exports revoked, every
 * call on open files ENODEV at once (none waits for a reset that will not
 * end), the device node gone; unbinding and binding the function brings
 * a working peerdirect0 back, with the function enabled once.
 */
TEST(pci_permanent_failure_gives_the_device_up)
{
	struct pci_resetter pr = { .kind = PDTI_RESET_PERM_FAILURE };
	struct peerdirect_query q;
	long long done;
	int fd, d, status;
	char bdf[32];
	int64_t h;
	pid_t pid;

	fd = pd_open(PD_DEV0);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, pd_query(fd, &q));
	if (q.backend != PEERDIRECT_BACKEND_PCI_BAR || pd_pci_function("peerdirect0", &pr.dev)) {
		close(fd);
		SKIP(return, "not a PCI device");
	}
	snprintf(bdf, sizeof(bdf), "%04x:%02x:%02x.%x", pr.dev.domain, pr.dev.bus,
		 pr.dev.devfn >> 3, pr.dev.devfn & 7);
	h = pd_alloc(fd, q.page_size);
	ASSERT_LT(0, h);
	d = pd_export(fd, h, 0, q.page_size);
	ASSERT_LE(0, d);

	ASSERT_EQ(0, pd_pci_reset(&pr.dev, pr.kind, 0));
	/* In a child: on a device that was not given up these would wait. */
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		if (pd_alloc(fd, q.page_size) != -ENODEV)
			_exit(10);
		if (pd_export(fd, h, 0, q.page_size) != -ENODEV)
			_exit(11);
		if (pd_sync(d, DMA_BUF_SYNC_START | DMA_BUF_SYNC_READ) != -ENODEV)
			_exit(12);
		if (pd_query(fd, &q) != -ENODEV)
			_exit(13);
		_exit(0);
	}
	done = pd_reap_within(pid, &status, 5000);
	if (done < 0) {
		kill(pid, SIGKILL);
		EXPECT_LE(0, done) TH_LOG("calls still waiting 5 s after the failure");
	} else {
		EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
			TH_LOG("child status 0x%x", status);
	}
	EXPECT_NE(0, access(PD_DEV0, F_OK));
	close(d);
	close(fd);
	/*
	 * What the removal that follows a permanent failure does; it also
	 * wakes a child left waiting (killed above) on a device not given up.
	 */
	ASSERT_EQ(0, write_str("/sys/bus/pci/drivers/peerdirect/unbind", bdf));
	if (done < 0)
		waitpid(pid, &status, 0);
	EXPECT_EQ(0, sysfs_value(&pr.dev, "enable"));
	ASSERT_EQ(0, write_str("/sys/bus/pci/drivers/peerdirect/bind", bdf));
	EXPECT_EQ(1, sysfs_value(&pr.dev, "enable"));
	fd = pd_open(PD_DEV0);
	ASSERT_LE(0, fd) TH_LOG("no %s after binding %s again", PD_DEV0, bdf);
	EXPECT_EQ(0, pd_pci_function("peerdirect0", &pr.dev));
	h = pd_alloc(fd, q.page_size);
	EXPECT_LT(0, h);
	EXPECT_EQ(0, pd_free(fd, h));
	close(fd);
}

TEST_HARNESS_MAIN
