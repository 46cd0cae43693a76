// SPDX-License-Identifier: GPL-2.0
/*
 * Subscribing to the revocation of a dma-buf one holds but did not export
 * (PEERDIRECT_IOCTL_SUBSCRIBE): the record reaches the subscriber's own
 * device file, once; every error a caller can reach.
 */
#include <poll.h>
#include <sys/stat.h>
#include "kselftest_harness.h"
#include "pd_test.h"

static int pd_subscribe(int fd, int dbuf, uint32_t flags, uint64_t cookie,
			struct peerdirect_subscribe *out)
{
	struct peerdirect_subscribe s = {
		.argsz = sizeof(s), .flags = flags, .fd = dbuf, .cookie = cookie,
	};
	int ret = ioctl(fd, PEERDIRECT_IOCTL_SUBSCRIBE, &s) ? -errno : 0;

	if (out)
		*out = s;
	return ret;
}

/* Records queued on fd now, at most max. */
static int read_events(int fd, struct peerdirect_event *ev, int max)
{
	ssize_t got = read(fd, ev, max * sizeof(*ev));

	if (got < 0)
		return errno == EAGAIN ? 0 : -errno;
	return got / sizeof(*ev);
}

FIXTURE(sub) {
	int owner;		/* exports */
	int sub;		/* subscribes: another open file */
	struct peerdirect_query q;
	int64_t h;
	int dbuf;
	__u64 id;
};

FIXTURE_SETUP(sub)
{
	self->owner = open(PD_DEV0, O_RDWR | O_NONBLOCK);
	ASSERT_LE(0, self->owner);
	self->sub = open(PD_DEV0, O_RDWR | O_NONBLOCK);
	ASSERT_LE(0, self->sub);
	ASSERT_EQ(0, pd_query(self->owner, &self->q));
	if (!(self->q.features & PEERDIRECT_FEAT_SUBSCRIBE))
		SKIP(return, "no PEERDIRECT_FEAT_SUBSCRIBE");
	self->h = pd_alloc(self->owner, 2 * self->q.page_size);
	ASSERT_LT(0, self->h);
	self->dbuf = pd_export_id(self->owner, self->h, 0, self->q.page_size,
				  PEERDIRECT_EXPORT_RDWR, &self->id);
	ASSERT_LE(0, self->dbuf);
}

FIXTURE_TEARDOWN(sub)
{
	close(self->dbuf);
	close(self->sub);
	close(self->owner);
}

TEST_F(sub, subscriber_gets_one_record_with_its_cookie)
{
	struct peerdirect_subscribe s;
	struct peerdirect_event ev[4];
	struct stat st;

	ASSERT_EQ(0, pd_subscribe(self->sub, self->dbuf, 0, 0xc0ffee, &s));
	ASSERT_EQ(0, fstat(self->dbuf, &st));
	EXPECT_EQ(self->id, s.export_id);
	EXPECT_EQ(st.st_ino, s.inode);
	ASSERT_EQ(0, pd_revoke(self->owner, PEERDIRECT_REVOKE_EXPORT, 0, self->id, NULL));

	ASSERT_EQ(1, read_events(self->sub, ev, 4));
	EXPECT_EQ(PEERDIRECT_EVENT_REVOKE, ev[0].hdr.type);
	EXPECT_EQ(sizeof(ev[0]), ev[0].hdr.length);
	EXPECT_EQ(PEERDIRECT_EVENT_SUBSCRIBED, ev[0].flags);
	EXPECT_EQ(PEERDIRECT_REASON_REVOKE, ev[0].reason);
	EXPECT_EQ(1, ev[0].seq);
	EXPECT_EQ(self->id, ev[0].export_id);
	EXPECT_EQ(0, ev[0].handle);	/* the owner's handle is not the subscriber's */
	EXPECT_EQ(st.st_ino, ev[0].inode);
	EXPECT_EQ(0, ev[0].offset);
	EXPECT_EQ(self->q.page_size, ev[0].length);
	EXPECT_EQ(0xc0ffee, ev[0].cookie);

	/* The owner still gets its own record. */
	ASSERT_EQ(1, read_events(self->owner, ev, 4));
	EXPECT_EQ(0, ev[0].flags);
	EXPECT_EQ((__u64)self->h, ev[0].handle);

	/* One record: the subscription ended with it. */
	ASSERT_EQ(0, pd_reset(self->owner, NULL));
	EXPECT_EQ(0, read_events(self->sub, ev, 4));
	EXPECT_EQ(-ENOENT, pd_subscribe(self->sub, self->dbuf, PEERDIRECT_SUBSCRIBE_CANCEL, 0, NULL));
}

/* A process that holds only the fd: the subscriber may be another device. */
/* N16: SUBSCRIBE and the event queue are an observer's, open to O_RDONLY. */
TEST_F(sub, rdonly_file_can_subscribe)
{
	int ro = open(PD_DEV0, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	struct peerdirect_event ev[2];

	ASSERT_LE(0, ro);
	ASSERT_EQ(0, pd_subscribe(ro, self->dbuf, 0, 7, NULL));
	ASSERT_EQ(0, pd_revoke(self->owner, PEERDIRECT_REVOKE_EXPORT, 0, self->id, NULL));
	ASSERT_EQ(1, read_events(ro, ev, 2));
	EXPECT_EQ(PEERDIRECT_EVENT_SUBSCRIBED, ev[0].flags);
	EXPECT_EQ(self->id, ev[0].export_id);
	EXPECT_EQ(7, ev[0].cookie);
	close(ro);
}

TEST_F(sub, subscriber_on_another_device)
{
	struct peerdirect_event ev[2];
	int other = open(PD_DEV1, O_RDWR | O_NONBLOCK);

	if (other < 0)
		SKIP(return, "no second device");
	ASSERT_EQ(0, pd_subscribe(other, self->dbuf, 0, 7, NULL));
	ASSERT_EQ(0, pd_free(self->owner, self->h));
	ASSERT_EQ(1, read_events(other, ev, 2));
	EXPECT_EQ(PEERDIRECT_REASON_FREE, ev[0].reason);
	EXPECT_EQ(7, ev[0].cookie);
	close(other);
}

TEST_F(sub, reset_and_admin_revoke_reach_subscribers)
{
	struct peerdirect_event ev[2];

	ASSERT_EQ(0, pd_subscribe(self->sub, self->dbuf, 0, 1, NULL));
	ASSERT_EQ(0, pd_reset(self->owner, NULL));
	ASSERT_EQ(1, read_events(self->sub, ev, 2));
	EXPECT_EQ(PEERDIRECT_REASON_RESET, ev[0].reason);
}

TEST_F(sub, cancel_stops_the_record)
{
	struct peerdirect_event ev[2];

	ASSERT_EQ(0, pd_subscribe(self->sub, self->dbuf, 0, 1, NULL));
	EXPECT_EQ(-EEXIST, pd_subscribe(self->sub, self->dbuf, 0, 2, NULL));
	ASSERT_EQ(0, pd_subscribe(self->sub, self->dbuf, PEERDIRECT_SUBSCRIBE_CANCEL, 0, NULL));
	EXPECT_EQ(-ENOENT, pd_subscribe(self->sub, self->dbuf, PEERDIRECT_SUBSCRIBE_CANCEL, 0, NULL));
	ASSERT_EQ(0, pd_revoke(self->owner, PEERDIRECT_REVOKE_EXPORT, 0, self->id, NULL));
	EXPECT_EQ(0, read_events(self->sub, ev, 2));
}

TEST_F(sub, revoked_dmabuf_is_enodev)
{
	ASSERT_EQ(0, pd_revoke(self->owner, PEERDIRECT_REVOKE_EXPORT, 0, self->id, NULL));
	EXPECT_EQ(-ENODEV, pd_subscribe(self->sub, self->dbuf, 0, 0, NULL));
}

TEST_F(sub, bad_arguments)
{
	struct peerdirect_subscribe s = { .argsz = sizeof(s), .fd = self->dbuf };
	int pipefd[2];

	EXPECT_EQ(-EBADF, pd_subscribe(self->sub, -1, 0, 0, NULL));
	EXPECT_EQ(-EBADF, pd_subscribe(self->sub, 1000, 0, 0, NULL));
	ASSERT_EQ(0, pipe(pipefd));
	EXPECT_EQ(-EINVAL, pd_subscribe(self->sub, pipefd[0], 0, 0, NULL));
	close(pipefd[0]);
	close(pipefd[1]);
	EXPECT_EQ(-EINVAL, pd_subscribe(self->sub, self->dbuf, 0x2, 0, NULL));
	/* A cancel carries no cookie. */
	EXPECT_EQ(-EINVAL, pd_subscribe(self->sub, self->dbuf, PEERDIRECT_SUBSCRIBE_CANCEL, 1, NULL));

	s.pad = 1;
	EXPECT_EQ(-1, ioctl(self->sub, PEERDIRECT_IOCTL_SUBSCRIBE, &s));
	EXPECT_EQ(EINVAL, errno);
	s.pad = 0;
	s.export_id = 1;	/* an output */
	EXPECT_EQ(-1, ioctl(self->sub, PEERDIRECT_IOCTL_SUBSCRIBE, &s));
	EXPECT_EQ(EINVAL, errno);
	s.export_id = 0;
	s.argsz = 8;
	EXPECT_EQ(-1, ioctl(self->sub, PEERDIRECT_IOCTL_SUBSCRIBE, &s));
	EXPECT_EQ(EINVAL, errno);
}

/* Another exporter's dma-buf is not ours to report on. */
TEST_F(sub, foreign_dmabuf_is_einval)
{
	int vgem = pd_open_vgem(), dbuf;
	struct drm_mode_create_dumb c = { .width = 1024, .height = 1, .bpp = 32 };
	struct drm_prime_handle p = { .flags = DRM_CLOEXEC };

	if (vgem < 0)
		SKIP(return, "no vgem");
	ASSERT_EQ(0, ioctl(vgem, DRM_IOCTL_MODE_CREATE_DUMB, &c));
	p.handle = c.handle;
	ASSERT_EQ(0, ioctl(vgem, DRM_IOCTL_PRIME_HANDLE_TO_FD, &p));
	dbuf = p.fd;
	EXPECT_EQ(-EINVAL, pd_subscribe(self->sub, dbuf, 0, 0, NULL));
	close(dbuf);
	close(vgem);
}

TEST_F(sub, limit_is_enospc)
{
	int i, n = self->q.max_subscriptions, got = 0, d[65];

	if (n > 64)
		SKIP(return, "max_subscriptions=%d: the VM runs set 8", n);
	/* The dma-bufs stay open (a released one ends its subscription), one
	 * allocation each (max_exports is per allocation). */
	for (i = 0; i <= n; i++) {
		int64_t h = pd_alloc(self->owner, self->q.page_size);

		ASSERT_LT(0, h);
		d[i] = pd_export(self->owner, h, 0, self->q.page_size);
		ASSERT_LE(0, d[i]);
		got = pd_subscribe(self->sub, d[i], 0, i, NULL);
		if (i < n)
			ASSERT_EQ(0, got);
	}
	EXPECT_EQ(-ENOSPC, got);
	/* Cancelling one makes room. */
	EXPECT_EQ(0, pd_subscribe(self->sub, d[0], PEERDIRECT_SUBSCRIBE_CANCEL, 0, NULL));
	EXPECT_EQ(0, pd_subscribe(self->sub, d[n], 0, n, NULL));
	for (i = 0; i <= n; i++)
		close(d[i]);
}

/* Subscribed files and dma-bufs may go in either order. */
TEST_F(sub, subscriber_closes_first_then_revoke)
{
	int other = open(PD_DEV0, O_RDWR);

	ASSERT_LE(0, other);
	ASSERT_EQ(0, pd_subscribe(other, self->dbuf, 0, 1, NULL));
	close(other);
	EXPECT_EQ(0, pd_revoke(self->owner, PEERDIRECT_REVOKE_EXPORT, 0, self->id, NULL));
}

TEST_F(sub, dmabuf_released_while_subscribed)
{
	struct peerdirect_event ev[2];

	ASSERT_EQ(0, pd_subscribe(self->sub, self->dbuf, 0, 1, NULL));
	close(self->dbuf);
	self->dbuf = -1;
	/* The export is gone with its last fd: nothing to report. */
	ASSERT_EQ(0, pd_free(self->owner, self->h));
	EXPECT_EQ(0, read_events(self->sub, ev, 2));
}

TEST_HARNESS_MAIN
