// SPDX-License-Identifier: GPL-2.0
/* The ioctl contract: ABI query and every way a caller can get it wrong. */
#include "kselftest_harness.h"
#include "pd_test.h"

FIXTURE(dev) {
	int fd;
	struct peerdirect_query q;
};

FIXTURE_SETUP(dev)
{
	self->fd = pd_open(PD_DEV0);
	ASSERT_LE(0, self->fd) TH_LOG("open %s: %s", PD_DEV0, strerror(errno));
	ASSERT_EQ(0, pd_query(self->fd, &self->q));
}

FIXTURE_TEARDOWN(dev)
{
	close(self->fd);
}

TEST_F(dev, query_reports_abi_and_limits)
{
	struct peerdirect_query *q = &self->q;

	EXPECT_EQ(PEERDIRECT_ABI_MAJOR, q->abi_major);
	EXPECT_EQ(PEERDIRECT_ABI_MINOR, q->abi_minor);
	EXPECT_TRUE(q->backend == PEERDIRECT_BACKEND_SIM ||
		    q->backend == PEERDIRECT_BACKEND_PCI_BAR);
	/* BAR memory has no struct pages: only peer-to-peer importers */
	if (q->backend == PEERDIRECT_BACKEND_PCI_BAR) {
		EXPECT_EQ(PEERDIRECT_FEAT_PAGELESS | PEERDIRECT_FEAT_P2P_REQUIRED,
			  q->features & (PEERDIRECT_FEAT_PAGELESS | PEERDIRECT_FEAT_P2P_REQUIRED));
	} else {
		EXPECT_EQ(0, q->features & PEERDIRECT_FEAT_PAGELESS);
	}
	EXPECT_EQ(0, q->index);
	EXPECT_TRUE(q->features & PEERDIRECT_FEAT_EXPORT);
	EXPECT_TRUE(q->features & PEERDIRECT_FEAT_PIN);
	EXPECT_TRUE(q->features & PEERDIRECT_FEAT_CPU_MMAP);
	EXPECT_TRUE(q->features & PEERDIRECT_FEAT_EVENTS);
	EXPECT_EQ(0, q->page_size & (q->page_size - 1));
	EXPECT_LE(4096, q->page_size);
	EXPECT_EQ(0, q->mem_size % q->page_size);
	EXPECT_EQ(q->mem_size, q->mem_free);
	EXPECT_LE(q->quota, q->mem_size);
	EXPECT_EQ(0, q->quota_used);
	EXPECT_LE(1, q->max_exports);
	EXPECT_LE(16, q->max_events);
	EXPECT_TRUE(q->features & PEERDIRECT_FEAT_SUBSCRIBE);
	EXPECT_LE(1, q->max_subscriptions);
	EXPECT_EQ(0, q->pad);
	EXPECT_EQ(0, q->reserved[0] | q->reserved[1] | q->reserved[2] | q->reserved[3]);
}

/* nonseekable_open(): no .llseek on any kernel (no_llseek left in 6.12). */
TEST_F(dev, device_is_not_seekable)
{
	EXPECT_EQ(-1, lseek(self->fd, 0, SEEK_SET));
	EXPECT_EQ(ESPIPE, errno);
}

TEST_F(dev, argsz_below_first_version_is_einval)
{
	struct peerdirect_query q = { .argsz = 8 };

	EXPECT_EQ(-1, ioctl(self->fd, PEERDIRECT_IOCTL_QUERY, &q));
	EXPECT_EQ(EINVAL, errno);
}

TEST_F(dev, argsz_above_page_is_einval)
{
	struct peerdirect_query q = { .argsz = 65536 };

	EXPECT_EQ(-1, ioctl(self->fd, PEERDIRECT_IOCTL_QUERY, &q));
	EXPECT_EQ(EINVAL, errno);
}

/* A newer userspace struct: zero tail accepted, non-zero tail is E2BIG. */
TEST_F(dev, larger_struct_needs_zero_tail)
{
	struct {
		struct peerdirect_query q;
		uint64_t future[2];
	} big;
	unsigned long cmd = PEERDIRECT_IOCTL_QUERY;

	memset(&big, 0, sizeof(big));
	big.q.argsz = sizeof(big);
	ASSERT_EQ(0, ioctl(self->fd, cmd, &big));
	EXPECT_EQ(PEERDIRECT_ABI_MAJOR, big.q.abi_major);
	EXPECT_EQ(0, big.future[0]);

	memset(&big, 0, sizeof(big));
	big.q.argsz = sizeof(big);
	big.future[1] = 1;
	EXPECT_EQ(-1, ioctl(self->fd, cmd, &big));
	EXPECT_EQ(E2BIG, errno);
}

TEST_F(dev, query_rejects_flags_and_nonzero_outputs)
{
	struct peerdirect_query q = { .argsz = sizeof(q), .flags = 1 };

	EXPECT_EQ(-1, ioctl(self->fd, PEERDIRECT_IOCTL_QUERY, &q));
	EXPECT_EQ(EINVAL, errno);
	memset(&q, 0, sizeof(q));
	q.argsz = sizeof(q);
	q.reserved[3] = 1;
	EXPECT_EQ(-1, ioctl(self->fd, PEERDIRECT_IOCTL_QUERY, &q));
	EXPECT_EQ(EINVAL, errno);
}

TEST_F(dev, unknown_ioctls_are_enotty)
{
	int arg = 0;

	EXPECT_EQ(-1, ioctl(self->fd, _IOWR(PEERDIRECT_IOCTL_MAGIC, 0x3f, int), &arg));
	EXPECT_EQ(ENOTTY, errno);
	EXPECT_EQ(-1, ioctl(self->fd, _IOWR('x', 0x00, struct peerdirect_query), &arg));
	EXPECT_EQ(ENOTTY, errno);
}

/*
 * Commands match in full, as vfio's and iommufd's: the size lives in argsz,
 * so a command with the right number but a direction or size encoded (ABI 1's
 * _IOWR form) is another command.
 */
TEST_F(dev, commands_match_in_full)
{
	struct peerdirect_query q = { .argsz = sizeof(q) };
	unsigned int nr;

	/* every command of this ABI, and the first number after it */
	for (nr = 0; nr <= _IOC_NR(PEERDIRECT_IOCTL_LAST) + 1; nr++) {
		EXPECT_EQ(-1, ioctl(self->fd, _IOWR(PEERDIRECT_IOCTL_MAGIC, nr,
						    struct peerdirect_query), &q));
		EXPECT_EQ(ENOTTY, errno);
		EXPECT_EQ(-1, ioctl(self->fd, _IOC(_IOC_NONE, PEERDIRECT_IOCTL_MAGIC, nr, 8), &q));
		EXPECT_EQ(ENOTTY, errno);
	}
	EXPECT_EQ(-1, ioctl(self->fd, _IO(PEERDIRECT_IOCTL_MAGIC, _IOC_NR(PEERDIRECT_IOCTL_LAST) + 1), &q));
	EXPECT_EQ(ENOTTY, errno);
	EXPECT_EQ(0, ioctl(self->fd, PEERDIRECT_IOCTL_QUERY, &q));
}

TEST_F(dev, bad_user_pointer_is_efault)
{
	EXPECT_EQ(-1, ioctl(self->fd, PEERDIRECT_IOCTL_QUERY, NULL));
	EXPECT_EQ(EFAULT, errno);
	EXPECT_EQ(-1, ioctl(self->fd, PEERDIRECT_IOCTL_ALLOC, (void *)8));
	EXPECT_EQ(EFAULT, errno);
}

TEST_F(dev, alloc_rejects_flags_and_outputs)
{
	struct peerdirect_alloc a = { .argsz = sizeof(a), .size = 4096, .flags = 1 };

	EXPECT_EQ(-1, ioctl(self->fd, PEERDIRECT_IOCTL_ALLOC, &a));
	EXPECT_EQ(EINVAL, errno);
	a.flags = 0;
	a.handle = 5;
	EXPECT_EQ(-1, ioctl(self->fd, PEERDIRECT_IOCTL_ALLOC, &a));
	EXPECT_EQ(EINVAL, errno);
	a.handle = 0;
	a.alloc_size = 1;
	EXPECT_EQ(-1, ioctl(self->fd, PEERDIRECT_IOCTL_ALLOC, &a));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(-EINVAL, pd_alloc(self->fd, 0));
}

TEST_F(dev, free_rejects_flags_and_unknown_handles)
{
	struct peerdirect_free f = { .argsz = sizeof(f), .flags = 2, .handle = 1 };

	EXPECT_EQ(-1, ioctl(self->fd, PEERDIRECT_IOCTL_FREE, &f));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(-ENOENT, pd_free(self->fd, 0));
	EXPECT_EQ(-ENOENT, pd_free(self->fd, 12345));
	EXPECT_EQ(-ENOENT, pd_free(self->fd, 1ULL << 40));
}

TEST_F(dev, export_rejects_every_bad_field)
{
	uint64_t ps = self->q.page_size;
	int64_t h = pd_alloc(self->fd, 2 * ps);
	struct peerdirect_export e;

	ASSERT_LT(0, h);
	/* flags: only PEERDIRECT_EXPORT_RDWR and _CLOEXEC, not the arch's O_* */
	EXPECT_EQ(-EINVAL, pd_export_id(self->fd, h, 0, ps, PEERDIRECT_EXPORT_RDWR | 0x4, NULL));
	EXPECT_EQ(-EINVAL, pd_export_id(self->fd, h, 0, ps, O_CLOEXEC, NULL));
	EXPECT_EQ(-EINVAL, pd_export_id(self->fd, h, 0, ps, 1U << 31, NULL));
	/* range */
	EXPECT_EQ(-EINVAL, pd_export(self->fd, h, 0, 0));
	EXPECT_EQ(-EINVAL, pd_export(self->fd, h, 100, 4096));
	EXPECT_EQ(-EINVAL, pd_export(self->fd, h, 0, 4097));
	EXPECT_EQ(-EINVAL, pd_export(self->fd, h, 0, 2 * ps + 4096));
	EXPECT_EQ(-EINVAL, pd_export(self->fd, h, 2 * ps, 4096));
	EXPECT_EQ(-EINVAL, pd_export(self->fd, h, ~0ULL & ~4095ULL, 8192));
	/* handle */
	EXPECT_EQ(-ENOENT, pd_export(self->fd, h + 1000, 0, 4096));
	EXPECT_EQ(-ENOENT, pd_export(self->fd, 0, 0, 4096));
	/* outputs and padding must come in as zero */
	memset(&e, 0, sizeof(e));
	e.argsz = sizeof(e);
	e.flags = PEERDIRECT_EXPORT_RDWR;
	e.handle = h;
	e.length = 4096;
	e.pad = 1;
	EXPECT_EQ(-1, ioctl(self->fd, PEERDIRECT_IOCTL_EXPORT, &e));
	EXPECT_EQ(EINVAL, errno);
	e.pad = 0;
	e.fd = 3;
	EXPECT_EQ(-1, ioctl(self->fd, PEERDIRECT_IOCTL_EXPORT, &e));
	EXPECT_EQ(EINVAL, errno);
	e.fd = 0;
	e.export_id = 9;
	EXPECT_EQ(-1, ioctl(self->fd, PEERDIRECT_IOCTL_EXPORT, &e));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(0, pd_free(self->fd, h));
}

TEST_F(dev, revoke_rejects_bad_scope)
{
	int64_t h = pd_alloc(self->fd, 4096);
	struct peerdirect_revoke r = { .argsz = sizeof(r) };
	__u64 id = 0;
	int d;

	ASSERT_LT(0, h);
	d = pd_export_id(self->fd, h, 0, 4096, PEERDIRECT_EXPORT_RDWR, &id);
	ASSERT_LE(0, d);
	EXPECT_EQ(-EINVAL, pd_revoke(self->fd, 0, h, 0, NULL));
	EXPECT_EQ(-EINVAL, pd_revoke(self->fd, PEERDIRECT_REVOKE_ALLOC |
				     PEERDIRECT_REVOKE_EXPORT, h, id, NULL));
	EXPECT_EQ(-EINVAL, pd_revoke(self->fd, 1U << 7, h, 0, NULL));
	EXPECT_EQ(-EINVAL, pd_revoke(self->fd, PEERDIRECT_REVOKE_EXPORT, h, id, NULL));
	EXPECT_EQ(-EINVAL, pd_revoke(self->fd, PEERDIRECT_REVOKE_ALLOC, h, id, NULL));
	EXPECT_EQ(-ENOENT, pd_revoke(self->fd, PEERDIRECT_REVOKE_EXPORT, 0, id + 100, NULL));
	EXPECT_EQ(-ENOENT, pd_revoke(self->fd, PEERDIRECT_REVOKE_ALLOC, h + 100, 0, NULL));
	r.flags = PEERDIRECT_REVOKE_EXPORT;
	r.export_id = id;
	r.revoked = 1;
	EXPECT_EQ(-1, ioctl(self->fd, PEERDIRECT_IOCTL_REVOKE, &r));
	EXPECT_EQ(EINVAL, errno);
	close(d);
	EXPECT_EQ(0, pd_free(self->fd, h));
}

TEST_F(dev, reset_and_admin_revoke_validate)
{
	struct peerdirect_reset rs = { .argsz = sizeof(rs), .flags = 1 };
	struct peerdirect_revoke r = { .argsz = sizeof(r) };

	EXPECT_EQ(-1, ioctl(self->fd, PEERDIRECT_IOCTL_RESET, &rs));
	EXPECT_EQ(EINVAL, errno);
	r.flags = PEERDIRECT_REVOKE_ALLOC;
	r.handle = 1;
	EXPECT_EQ(-1, ioctl(self->fd, PEERDIRECT_IOCTL_ADMIN_REVOKE, &r));
	EXPECT_EQ(EINVAL, errno);
	r.flags = PEERDIRECT_REVOKE_EXPORT;
	r.handle = 0;
	r.export_id = 1ULL << 50;
	EXPECT_EQ(-1, ioctl(self->fd, PEERDIRECT_IOCTL_ADMIN_REVOKE, &r));
	EXPECT_EQ(ENOENT, errno);
}

/* Reset and admin revoke are for CAP_SYS_ADMIN only. */
TEST_F(dev, unprivileged_reset_and_admin_revoke_are_eperm)
{
	struct peerdirect_reset rs = { .argsz = sizeof(rs) };
	struct peerdirect_revoke r = {
		.argsz = sizeof(r), .flags = PEERDIRECT_REVOKE_EXPORT, .export_id = 1,
	};

	ASSERT_EQ(0, setresuid(65534, 65534, 65534));
	EXPECT_EQ(-1, ioctl(self->fd, PEERDIRECT_IOCTL_RESET, &rs));
	EXPECT_EQ(EPERM, errno);
	EXPECT_EQ(-1, ioctl(self->fd, PEERDIRECT_IOCTL_ADMIN_REVOKE, &r));
	EXPECT_EQ(EPERM, errno);
	/* the ordinary calls still work for the owner of the fd */
	EXPECT_EQ(0, pd_query(self->fd, &self->q));
}

/*
 * N16: a file opened O_RDONLY observes (QUERY, LIST, read() of events;
 * SUBSCRIBE in subscribe.c) but cannot change device memory.  Every
 * mutating command is EBADF before its arguments are looked at, for root
 * too, and changes nothing.
 */
TEST_F(dev, rdonly_file_cannot_mutate)
{
	int ro = open(PD_DEV0, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	struct peerdirect_revoke r = {
		.argsz = sizeof(r), .flags = PEERDIRECT_REVOKE_EXPORT,
	};
	struct peerdirect_reset rs = { .argsz = sizeof(rs) };
	struct peerdirect_query q;
	struct peerdirect_event ev;
	__u64 id = 0;
	int64_t h;
	int d;

	ASSERT_LE(0, ro) TH_LOG("open %s O_RDONLY: %s", PD_DEV0, strerror(errno));
	h = pd_alloc(self->fd, 4096);
	ASSERT_LT(0, h);
	d = pd_export_id(self->fd, h, 0, 4096, PEERDIRECT_EXPORT_RDWR, &id);
	ASSERT_LE(0, d);

	EXPECT_EQ(-EBADF, pd_alloc(ro, 4096));
	EXPECT_EQ(-EBADF, pd_free(ro, 1));
	EXPECT_EQ(-EBADF, pd_export(ro, 1, 0, 4096));
	EXPECT_EQ(-EBADF, pd_revoke(ro, PEERDIRECT_REVOKE_EXPORT, 0, id, NULL));
	EXPECT_EQ(-EBADF, pd_revoke(ro, PEERDIRECT_REVOKE_ALLOC, 1, 0, NULL));
	EXPECT_EQ(-1, ioctl(ro, PEERDIRECT_IOCTL_RESET, &rs));
	EXPECT_EQ(EBADF, errno);
	r.export_id = id;
	EXPECT_EQ(-1, ioctl(ro, PEERDIRECT_IOCTL_ADMIN_REVOKE, &r));
	EXPECT_EQ(EBADF, errno);

	/* the queries still work */
	EXPECT_EQ(0, pd_query(ro, &q));
	EXPECT_EQ(self->q.mem_size, q.mem_size);
	EXPECT_EQ(0, export_busy(ro, id));
	EXPECT_EQ(-1, read(ro, &ev, sizeof(ev)));
	EXPECT_EQ(EAGAIN, errno);

	/* nothing was revoked or reset: the owner's revoke finds it live */
	memset(&r, 0, sizeof(r));
	ASSERT_EQ(0, pd_revoke(self->fd, PEERDIRECT_REVOKE_EXPORT, 0, id, &r));
	EXPECT_EQ(1, r.revoked);
	close(d);
	EXPECT_EQ(0, pd_free(self->fd, h));
	close(ro);
}

TEST(event_read_needs_a_whole_record)
{
	char small[sizeof(struct peerdirect_event) - 1];
	int fd = open(PD_DEV0, O_RDWR | O_NONBLOCK);

	ASSERT_LE(0, fd);
	EXPECT_EQ(-1, read(fd, small, sizeof(small)));
	EXPECT_EQ(EINVAL, errno);
	close(fd);
}

TEST_HARNESS_MAIN
