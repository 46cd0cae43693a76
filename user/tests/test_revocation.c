// SPDX-License-Identifier: MIT
/*
 * Revocation tracking across devices and fabrics.  No module on the host:
 * a "device" here is a pd_device over one end of a SOCK_SEQPACKET
 * socketpair, and the test writes peerdirect_event records into the other
 * end as the kernel would.  Memfds stand in for the dma-bufs the device
 * exported (tracked as its exports, as pd_device_export does).
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <linux/peerdirect.h>
#include <stdarg.h>
#include <poll.h>
#include <pthread.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>

#include "kselftest_harness.h"
#include "loopback.h"
#include "device.h"

#define NDEV 2

/*
 * PEERDIRECT_IOCTL_SUBSCRIBE as the module answers it, for the socketpair
 * device whose fd is in fake.dev (a socket answers ENOTTY): at most
 * fake.max live subscriptions of that file, EEXIST for a second one of the
 * same dma-buf, ENOENT for cancelling one it does not have.  Every other
 * ioctl goes to the kernel.
 */
static struct {
	int dev;
	unsigned int max, live, calls;
	uint64_t ino[8];
	/* PEERDIRECT_IOCTL_LIST on fake.dev lists the exports with ids in
	 * [list_lo, list_hi), and export 100, when list_hi is set. */
	uint64_t list_lo, list_hi;
	unsigned int lists;
	int read_errno;		/* the next read of fake.dev fails with it */
	uint64_t list_revoked;	/* listed, flagged PEERDIRECT_EXPORT_INFO_REVOKED */
	/* A detach landing at the second F_DUPFD_CLOEXEC from now: the one
	 * the registration makes, while its entry is pending in the cache. */
	struct pd_fabric *detach_fab;
	struct pd_device *detach_dev;
	int dups_to_detach;
	bool close_instead;	/* close detach_dev rather than detach it */
	int slow_poll_ms;	/* every poll() waits this long first */
	uint64_t revoked_ino;	/* SUBSCRIBE of it: ENODEV, its subscription ended */
	uint64_t fail_ino;	/* SUBSCRIBE of it fails with fail_errno */
	int fail_errno;
} fake = { .dev = -1 };

static int fake_list(struct peerdirect_list *l)
{
	struct peerdirect_export_info *out = (void *)(uintptr_t)l->exports;
	uint32_t n = 0, total = 0;
	uint64_t id;

	fake.lists++;
	for (id = fake.list_lo; id < fake.list_hi + 1; id++) {
		uint64_t listed = id == fake.list_hi ? 100 : id;

		total++;
		if (n < l->nr_exports)
			out[n++] = (struct peerdirect_export_info) {
				.export_id = listed,
				.flags = listed == fake.list_revoked ? PEERDIRECT_EXPORT_INFO_REVOKED : 0,
			};
	}
	l->nr_exports = n;
	l->total_exports = total;
	return 0;
}

int ioctl(int fd, unsigned long req, ...)
{
	struct peerdirect_subscribe *s;
	struct stat st;
	unsigned int i;
	va_list ap;
	void *arg;

	va_start(ap, req);
	arg = va_arg(ap, void *);
	va_end(ap);
	if (fd >= 0 && fd == fake.dev && req == PEERDIRECT_IOCTL_LIST && fake.list_hi)
		return fake_list(arg);
	if (fd < 0 || fd != fake.dev || req != PEERDIRECT_IOCTL_SUBSCRIBE)
		return (int)syscall(SYS_ioctl, fd, req, arg);
	s = arg;
	fake.calls++;
	if (fstat(s->fd, &st))
		return -1;
	for (i = 0; i < fake.live && fake.ino[i] != st.st_ino; i++)
		;
	if (s->flags & PEERDIRECT_SUBSCRIBE_CANCEL) {
		if (i == fake.live) {
			errno = ENOENT;
			return -1;
		}
		fake.ino[i] = fake.ino[--fake.live];
		return 0;
	}
	if (fake.fail_ino && st.st_ino == fake.fail_ino && !(s->flags & PEERDIRECT_SUBSCRIBE_CANCEL)) {
		errno = fake.fail_errno;
		return -1;
	}
	if (fake.revoked_ino && st.st_ino == fake.revoked_ino) {
		if (i < fake.live)
			fake.ino[i] = fake.ino[--fake.live];
		errno = ENODEV;
		return -1;
	}
	if (i < fake.live || fake.live >= fake.max || fake.live == 8) {
		errno = i < fake.live ? EEXIST : ENOSPC;
		return -1;
	}
	fake.ino[fake.live++] = st.st_ino;
	s->export_id = 5000 + st.st_ino;
	s->inode = st.st_ino;
	return 0;
}

FIXTURE(rev) {
	struct pd_fabric *f1, *f2;
	uint64_t me1, me2;
	int sock[NDEV][2];
	struct pd_device *dev[NDEV];
	int memfd[NDEV];
	struct stat st[NDEV];
};

FIXTURE_SETUP(rev)
{
	struct pd_fabric_attr attr;
	int i;

	pd_fabric_attr_init(&attr);
	ASSERT_EQ(0, open_loopback(&attr, &self->f1, &self->me1)) TH_LOG("%s", pd_last_error());
	pd_fabric_attr_init(&attr);
	ASSERT_EQ(0, open_loopback(&attr, &self->f2, &self->me2)) TH_LOG("%s", pd_last_error());
	for (i = 0; i < NDEV; i++) {
		ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, self->sock[i]));
		ASSERT_EQ(0, pd_device_wrap_fd(self->sock[i][0], 10 + (unsigned int)i, &self->dev[i]));
		self->memfd[i] = memfd_of(1 << 20, (uint64_t)i);
		ASSERT_LE(0, self->memfd[i]);
		ASSERT_EQ(0, fstat(self->memfd[i], &self->st[i]));
		ASSERT_EQ(0, pd_device_track_export(self->dev[i], self->memfd[i], 100 + (uint64_t)i));
	}
}

FIXTURE_TEARDOWN(rev)
{
	int i;

	memset(&fake, 0, sizeof(fake));
	fake.dev = -1;
	pd_fabric_close(self->f1);
	pd_fabric_close(self->f2);
	for (i = 0; i < NDEV; i++) {
		pd_device_close(self->dev[i]);	/* closes sock[i][0] */
		if (self->sock[i][1] >= 0)
			close(self->sock[i][1]);
		close(self->memfd[i]);
	}
}

/* What the kernel writes to the owner's device file. */
static int send_event(int sock, uint32_t reason, uint64_t export_id, uint64_t inode)
{
	static uint64_t seq;
	struct peerdirect_event ev = {
		.hdr = { .type = PEERDIRECT_EVENT_REVOKE, .length = sizeof(ev) },
		.reason = reason, .seq = ++seq,
		.export_id = export_id, .inode = inode,
	};

	return send(sock, &ev, sizeof(ev), 0) == sizeof(ev) ? 0 : -errno;
}

/*
 * Another thread's poll, landing while pd_mr_reg_dmabuf resolves the fd:
 * once armed (fab set), the first fstat of inode ino queues the revocation
 * of export_id on the device and has fab dispatch it.
 */
static struct {
	struct pd_fabric *fab;
	int sock, fired;
	uint64_t export_id;
	dev_t dev;
	ino_t ino;
} mid_fstat;

/* An fd number dup2'ed over by "another thread" at the first fstat of ino. */
static struct {
	int armed, user_fd, other_fd;
	ino_t ino;
} swap_fd;

/* Every fstat of the process comes here (the library is linked in
 * statically, libfabric's calls resolve to the executable's symbol) and
 * goes on to libc's. */
int fstat(int fd, struct stat *st)
{
	static int (*real)(int, struct stat *);
	int ret;

	if (!real)
		real = (int (*)(int, struct stat *))dlsym(RTLD_NEXT, "fstat");
	if (!real)
		abort();
	ret = real(fd, st);
	if (!ret && swap_fd.armed == 1 && st->st_ino == swap_fd.ino) {
		/* the application's other thread, between fstat and dup */
		swap_fd.armed = 2;
		dup2(swap_fd.other_fd, swap_fd.user_fd);
	}
	if (!ret && mid_fstat.fab && !mid_fstat.fired && st->st_dev == mid_fstat.dev &&
	    st->st_ino == mid_fstat.ino) {
		mid_fstat.fired = 1;
		if (send_event(mid_fstat.sock, PEERDIRECT_REASON_REVOKE, mid_fstat.export_id,
			       mid_fstat.ino) || pd_fabric_poll_events(mid_fstat.fab) < 0)
			mid_fstat.fired = -1;
	}
	return ret;
}

int fcntl(int fd, int cmd, ...)
{
	va_list ap;
	long arg;

	va_start(ap, cmd);
	arg = va_arg(ap, long);
	va_end(ap);
	if (cmd == F_DUPFD_CLOEXEC && fake.detach_fab && !--fake.dups_to_detach) {
		struct pd_fabric *fab = fake.detach_fab;

		fake.detach_fab = NULL;
		if (fake.close_instead)
			pd_device_close(fake.detach_dev);
		else
			pd_fabric_detach_device(fab, fake.detach_dev);
	}
	return (int)syscall(SYS_fcntl, fd, cmd, arg);
}

ssize_t read(int fd, void *buf, size_t len)
{
	if (fd >= 0 && fd == fake.dev && fake.read_errno) {
		errno = fake.read_errno;
		fake.read_errno = 0;
		return -1;
	}
	return syscall(SYS_read, fd, buf, len);
}

/* Widens the window between a reader's last look and its wait, as another
 * thread's drain landing there would. */
int poll(struct pollfd *fds, nfds_t n, int timeout)
{
	static int (*real)(struct pollfd *, nfds_t, int);

	if (!real)
		real = (int (*)(struct pollfd *, nfds_t, int))dlsym(RTLD_NEXT, "poll");
	if (!real)
		abort();
	if (fake.slow_poll_ms)
		usleep((useconds_t)fake.slow_poll_ms * 1000);
	return real(fds, n, timeout);
}

/* A one-page send to the fabric itself: 0, or the post's error. */
static int usable(struct pd_fabric *fab, uint64_t me, struct pd_mr *mr)
{
	static char page[4096] __attribute__((aligned(4096)));
	struct pd_req *s, *r;
	struct pd_mr *h;
	int ret;

	ret = pd_mr_reg_host(fab, page, sizeof(page), 0, &h);
	if (ret)
		return ret;
	ret = pd_trecv(fab, h, 0, 4096, me, 77, &r);
	if (!ret) {
		ret = pd_tsend(fab, mr, 0, 4096, me, 77, &s);
		if (!ret) {
			ret = pd_wait(s, WAIT_MS, NULL) ?: pd_wait(r, WAIT_MS, NULL);
			pd_req_free(s);
		}
		pd_req_free(r);
	}
	pd_mr_dereg(h);
	return ret;
}

/*
 * Two lanes of one process attach one device to two fabrics.  Whichever polls first
 * reads the event; both caches must see it.
 */
TEST_F(rev, two_fabrics_on_one_device_both_see_the_event)
{
	struct pd_mr *m1, *m2;

	ASSERT_EQ(0, pd_fabric_attach_device(self->f1, self->dev[0]));
	ASSERT_EQ(0, pd_fabric_attach_device(self->f2, self->dev[0]));
	ASSERT_EQ(0, pd_mr_reg_dmabuf(self->f1, self->memfd[0], 0, 4096, 0, &m1));
	ASSERT_EQ(0, pd_mr_reg_dmabuf(self->f2, self->memfd[0], 0, 4096, 0, &m2));
	EXPECT_EQ(0, usable(self->f2, self->me2, m2)) TH_LOG("%s", pd_last_error());
	ASSERT_EQ(0, send_event(self->sock[0][1], PEERDIRECT_REASON_REVOKE, 100, self->st[0].st_ino));
	EXPECT_EQ(1, pd_fabric_poll_events(self->f1));
	EXPECT_EQ(-ENODEV, usable(self->f1, self->me1, m1));
	EXPECT_EQ(-ENODEV, usable(self->f2, self->me2, m2)) TH_LOG("the second fabric missed the event");
	EXPECT_NE(NULL, strstr(pd_last_error(), "revoked")) TH_LOG("%s", pd_last_error());
	pd_mr_dereg(m1);
	pd_mr_dereg(m2);
}

/*
 * Uapi 2's records grow and gain types: a reader walks by hdr.length.  One
 * read holds a record of a type the library does not know, then a REVOKE
 * record longer than the library's struct; the revoke must still land.
 */
TEST_F(rev, unknown_types_and_grown_records_are_walked_by_length)
{
	struct {
		struct peerdirect_event_header other;
		uint64_t other_payload;
		struct peerdirect_event ev;
		uint64_t future[2];
	} __attribute__((packed)) pkt;
	struct pd_mr *m;

	_Static_assert(sizeof(pkt) == 16 + sizeof(struct peerdirect_event) + 16, "packed");
	ASSERT_EQ(0, pd_fabric_attach_device(self->f1, self->dev[0]));
	ASSERT_EQ(0, pd_mr_reg_dmabuf(self->f1, self->memfd[0], 0, 4096, 0, &m));
	memset(&pkt, 0, sizeof(pkt));
	pkt.other = (struct peerdirect_event_header) { .type = 0x7777, .length = 16 };
	pkt.other_payload = ~0ULL;
	pkt.ev.hdr = (struct peerdirect_event_header) {
		.type = PEERDIRECT_EVENT_REVOKE, .length = sizeof(pkt.ev) + sizeof(pkt.future),
	};
	pkt.ev.reason = PEERDIRECT_REASON_REVOKE;
	pkt.ev.seq = 1000;
	pkt.ev.export_id = 100;
	pkt.ev.inode = self->st[0].st_ino;
	pkt.future[0] = pkt.future[1] = ~0ULL;
	ASSERT_EQ((ssize_t)sizeof(pkt), send(self->sock[0][1], &pkt, sizeof(pkt), 0));
	EXPECT_EQ(1, pd_fabric_poll_events(self->f1)) TH_LOG("%s", pd_last_error());
	EXPECT_EQ(-ENODEV, usable(self->f1, self->me1, m));
	pd_mr_dereg(m);
}

/* An application reading the device through the library sees every event,
 * and takes none away from the fabrics. */
TEST_F(rev, the_application_reading_events_steals_nothing)
{
	struct pd_event ev[4];
	struct pd_mr *m;

	ASSERT_EQ(0, pd_fabric_attach_device(self->f1, self->dev[0]));
	ASSERT_EQ(0, pd_mr_reg_dmabuf(self->f1, self->memfd[0], 0, 4096, 0, &m));
	ASSERT_EQ(0, send_event(self->sock[0][1], PEERDIRECT_REASON_REVOKE, 100, self->st[0].st_ino));
	memset(ev, 0, sizeof(ev));
	ASSERT_EQ(1, pd_device_read_events(self->dev[0], ev, 4, 1000)) TH_LOG("%s", pd_last_error());
	EXPECT_EQ(100, ev[0].export_id);
	EXPECT_EQ(PD_REASON_REVOKE, ev[0].reason);
	EXPECT_EQ(-ENODEV, usable(self->f1, self->me1, m)) TH_LOG("the application's read stole the event");
	/* and the other way round: what a fabric read, the application gets */
	ASSERT_EQ(0, send_event(self->sock[0][1], PEERDIRECT_REASON_FREE, 555, 1234));
	pd_fabric_poll_events(self->f1);
	ASSERT_EQ(1, pd_device_read_events(self->dev[0], ev, 4, 0));
	EXPECT_EQ(555, ev[0].export_id);
	pd_mr_dereg(m);
}

/* OVERFLOW means "treat everything of this device as revoked": of this
 * device only. */
TEST_F(rev, overflow_on_one_device_spares_the_other)
{
	struct pd_mr *m0, *m1;

	ASSERT_EQ(0, pd_fabric_attach_device(self->f1, self->dev[0]));
	ASSERT_EQ(0, pd_fabric_attach_device(self->f1, self->dev[1]));
	ASSERT_EQ(0, pd_mr_reg_dmabuf(self->f1, self->memfd[0], 0, 4096, 0, &m0));
	ASSERT_EQ(0, pd_mr_reg_dmabuf(self->f1, self->memfd[1], 0, 4096, 0, &m1));
	ASSERT_EQ(0, send_event(self->sock[0][1], PEERDIRECT_REASON_OVERFLOW, 0, 0));
	pd_fabric_poll_events(self->f1);
	EXPECT_EQ(-ENODEV, usable(self->f1, self->me1, m0));
	EXPECT_NE(NULL, strstr(pd_last_error(), "overflow")) TH_LOG("%s", pd_last_error());
	EXPECT_EQ(0, usable(self->f1, self->me1, m1)) TH_LOG("%s", pd_last_error());
	pd_mr_dereg(m0);
	pd_mr_dereg(m1);
}

/* A removed device (its file hangs up) invalidates its own dma-bufs only. */
TEST_F(rev, removed_device_spares_the_other)
{
	struct pd_mr *m0, *m1;

	ASSERT_EQ(0, pd_fabric_attach_device(self->f1, self->dev[0]));
	ASSERT_EQ(0, pd_fabric_attach_device(self->f1, self->dev[1]));
	ASSERT_EQ(0, pd_mr_reg_dmabuf(self->f1, self->memfd[0], 0, 4096, 0, &m0));
	ASSERT_EQ(0, pd_mr_reg_dmabuf(self->f1, self->memfd[1], 0, 4096, 0, &m1));
	close(self->sock[0][1]);
	self->sock[0][1] = -1;
	pd_fabric_poll_events(self->f1);
	EXPECT_EQ(-ENODEV, usable(self->f1, self->me1, m0));
	EXPECT_NE(NULL, strstr(pd_last_error(), "device removed")) TH_LOG("%s", pd_last_error());
	EXPECT_EQ(0, usable(self->f1, self->me1, m1)) TH_LOG("%s", pd_last_error());
	pd_mr_dereg(m0);
	pd_mr_dereg(m1);
}

/*
 * Closing a device that a fabric watches: the kernel frees what the file
 * owned, so its dma-bufs are gone; the fabric forgets the device (no
 * dangling pointer for the next poll).
 */
TEST_F(rev, closing_an_attached_device_detaches_it)
{
	struct pd_mr *m0, *m1;

	ASSERT_EQ(0, pd_fabric_attach_device(self->f1, self->dev[0]));
	ASSERT_EQ(0, pd_fabric_attach_device(self->f1, self->dev[1]));
	ASSERT_EQ(0, pd_mr_reg_dmabuf(self->f1, self->memfd[0], 0, 4096, 0, &m0));
	ASSERT_EQ(0, pd_mr_reg_dmabuf(self->f1, self->memfd[1], 0, 4096, 0, &m1));
	pd_device_close(self->dev[0]);
	self->dev[0] = NULL;
	EXPECT_EQ(0, pd_fabric_poll_events(self->f1));
	EXPECT_EQ(-ENODEV, usable(self->f1, self->me1, m0));
	EXPECT_EQ(0, usable(self->f1, self->me1, m1)) TH_LOG("%s", pd_last_error());
	pd_mr_dereg(m0);
	pd_mr_dereg(m1);
}

TEST_F(rev, detach_stops_tracking)
{
	struct pd_event ev[2];
	struct pd_mr *m;

	ASSERT_EQ(0, pd_fabric_attach_device(self->f1, self->dev[0]));
	EXPECT_EQ(-EEXIST, pd_fabric_attach_device(self->f1, self->dev[0]));
	ASSERT_EQ(0, pd_mr_reg_dmabuf(self->f1, self->memfd[0], 0, 4096, 0, &m));
	ASSERT_EQ(0, pd_fabric_detach_device(self->f1, self->dev[0]));
	EXPECT_EQ(-ENOENT, pd_fabric_detach_device(self->f1, self->dev[0]));
	/* Nothing watches its revocation any more: it is not trusted. */
	EXPECT_EQ(-ENODEV, usable(self->f1, self->me1, m));
	EXPECT_NE(NULL, strstr(pd_last_error(), "detached")) TH_LOG("%s", pd_last_error());
	/* The fabric no longer reads the device. */
	ASSERT_EQ(0, send_event(self->sock[0][1], PEERDIRECT_REASON_FREE, 9, 9));
	EXPECT_EQ(0, pd_fabric_poll_events(self->f1));
	EXPECT_EQ(1, pd_device_read_events(self->dev[0], ev, 2, 1000));
	pd_mr_dereg(m);
}

/* The event came (and was dispatched) before the dma-buf was registered:
 * the registration is refused, not made of a revoked buffer. */
TEST_F(rev, revoked_before_registration_is_refused)
{
	struct pd_mr *m;

	ASSERT_EQ(0, pd_fabric_attach_device(self->f1, self->dev[0]));
	ASSERT_EQ(0, send_event(self->sock[0][1], PEERDIRECT_REASON_REVOKE, 100, self->st[0].st_ino));
	EXPECT_EQ(-ENODEV, pd_mr_reg_dmabuf(self->f1, self->memfd[0], 0, 4096, 0, &m));
	EXPECT_NE(NULL, strstr(pd_last_error(), "export 100")) TH_LOG("%s", pd_last_error());
	/* the other device's export is fine */
	ASSERT_EQ(0, pd_fabric_attach_device(self->f1, self->dev[1]));
	ASSERT_EQ(0, pd_mr_reg_dmabuf(self->f1, self->memfd[1], 0, 4096, 0, &m));
	pd_mr_dereg(m);
}

/*
 * A revocation dispatched while f1's registration resolves the fd (by f2,
 * as another thread would, inside f1's fstat) must fail the registration,
 * not leave one of a revoked export marked valid.  Two guards answer here:
 * the device's record of the export (read after fstat) and the cache's
 * generation (read before it); moving the generation read after the
 * lookup alone still passes, because the record catches it first.  The
 * generation's own window, between the lookup and the insert, has no call
 * to hook from outside; test_mr_cache drives it through get_since.
 */
TEST_F(rev, a_revocation_while_the_fd_is_resolved_fails_the_registration)
{
	struct pd_mr *m = NULL;
	int ret;

	ASSERT_EQ(0, pd_fabric_attach_device(self->f1, self->dev[0]));
	ASSERT_EQ(0, pd_fabric_attach_device(self->f2, self->dev[0]));
	mid_fstat.sock = self->sock[0][1];
	mid_fstat.export_id = 100;
	mid_fstat.dev = self->st[0].st_dev;
	mid_fstat.ino = self->st[0].st_ino;
	mid_fstat.fired = 0;
	mid_fstat.fab = self->f2;
	ret = pd_mr_reg_dmabuf(self->f1, self->memfd[0], 0, 4096, 0, &m);
	mid_fstat.fab = NULL;
	ASSERT_EQ(1, mid_fstat.fired) TH_LOG("the revocation was not injected inside fstat");
	EXPECT_EQ(-ENODEV, ret) TH_LOG("registered a revoked export: %s", pd_last_error());
	EXPECT_NE(NULL, strstr(pd_last_error(), "export 100")) TH_LOG("%s", pd_last_error());
	if (!ret)
		pd_mr_dereg(m);
	/* nothing of the refused registration stays behind, and it stays refused */
	EXPECT_EQ(0, cache_stats(self->f1).entries);
	EXPECT_EQ(-ENODEV, pd_mr_reg_dmabuf(self->f1, self->memfd[0], 0, 4096, 0, &m));
	/* the other device's export is untouched */
	ASSERT_EQ(0, pd_fabric_attach_device(self->f1, self->dev[1]));
	ASSERT_EQ(0, pd_mr_reg_dmabuf(self->f1, self->memfd[1], 0, 4096, 0, &m));
	pd_mr_dereg(m);
}

/* export 100 (the fixture's) and 200 (@other) registered on f1, then @len
 * bytes of records from the device, read by the fabric.  0 or -errno. */
static int register_two_and_send(FIXTURE_DATA(rev) *self, int other, const void *buf,
				 size_t len, struct pd_mr **m, struct pd_mr **m2)
{
	int ret;

	if (other < 0)
		return -EBADF;
	ret = pd_device_track_export(self->dev[0], other, 200) ?:
	      pd_fabric_attach_device(self->f1, self->dev[0]) ?:
	      pd_mr_reg_dmabuf(self->f1, self->memfd[0], 0, 4096, 0, m) ?:
	      pd_mr_reg_dmabuf(self->f1, other, 0, 4096, 0, m2);
	if (!ret && send(self->sock[0][1], buf, len, 0) != (ssize_t)len)
		ret = -errno;
	if (!ret)
		pd_fabric_poll_events(self->f1);
	return ret;
}

/*
 * One read() may carry several records.  A REVOKE framed (its length fits
 * the read) but too short to name what it revoked may have hidden any
 * revoke: it counts as an overflow.  The records after it are still
 * parsed, from where its length says it ends: the application gets export
 * 100, the overflow, then export 200.
 */
TEST_F(rev, a_short_record_loses_none_that_follow)
{
	struct peerdirect_event first = {
		.hdr = { PEERDIRECT_EVENT_REVOKE, sizeof(first) }, .reason = PEERDIRECT_REASON_REVOKE,
		.seq = 1, .export_id = 100, .inode = self->st[0].st_ino,
	};
	struct peerdirect_event_header bad = { PEERDIRECT_EVENT_REVOKE, sizeof(bad) };
	struct peerdirect_event after = {
		.hdr = { PEERDIRECT_EVENT_REVOKE, sizeof(after) }, .reason = PEERDIRECT_REASON_REVOKE,
		.seq = 3, .export_id = 200,
	};
	unsigned char buf[2 * sizeof(first) + sizeof(bad)];
	int other = memfd_of(1 << 20, 7);
	struct pd_event ev[4];
	struct pd_mr *m, *m2;
	int n;

	memcpy(buf, &first, sizeof(first));
	memcpy(buf + sizeof(first), &bad, sizeof(bad));
	memcpy(buf + sizeof(first) + sizeof(bad), &after, sizeof(after));
	ASSERT_EQ(0, register_two_and_send(self, other, buf, sizeof(buf), &m, &m2));
	EXPECT_EQ(-ENODEV, usable(self->f1, self->me1, m));
	EXPECT_EQ(-ENODEV, usable(self->f1, self->me1, m2));
	memset(ev, 0, sizeof(ev));
	n = pd_device_read_events(self->dev[0], ev, 4, 0);
	ASSERT_EQ(3, n) TH_LOG("%d: %s", n, pd_last_error());
	EXPECT_EQ(100, ev[0].export_id);
	EXPECT_EQ(PD_REASON_OVERFLOW, ev[1].reason);
	EXPECT_EQ(200, ev[2].export_id) TH_LOG("the record after the short one was lost or misread");
	EXPECT_EQ(3, ev[2].seq);
	pd_mr_dereg(m);
	pd_mr_dereg(m2);
	close(other);
}

/*
 * A record of a type this library does not know (a newer kernel's) is
 * skipped by its length: no overflow, so a registration no record names
 * stays valid, and the revoke after it is read and applied.
 */
TEST_F(rev, an_unknown_record_type_is_skipped)
{
	struct {
		struct peerdirect_event_header hdr;
		uint64_t body[5];
	} unknown = { { 0x7777, sizeof(unknown) }, { 1, 2, 3, 4, 5 } };
	struct peerdirect_event after = {
		.hdr = { PEERDIRECT_EVENT_REVOKE, sizeof(after) }, .reason = PEERDIRECT_REASON_REVOKE,
		.seq = 4, .export_id = 200,
	};
	unsigned char buf[sizeof(unknown) + sizeof(after)];
	int other = memfd_of(1 << 20, 7);
	struct pd_event ev[4];
	struct pd_mr *m, *m2;
	int n;

	memcpy(buf, &unknown, sizeof(unknown));
	memcpy(buf + sizeof(unknown), &after, sizeof(after));
	ASSERT_EQ(0, register_two_and_send(self, other, buf, sizeof(buf), &m, &m2));
	EXPECT_EQ(0, usable(self->f1, self->me1, m)) TH_LOG("an unknown record was taken for an overflow");
	EXPECT_EQ(-ENODEV, usable(self->f1, self->me1, m2));
	memset(ev, 0, sizeof(ev));
	n = pd_device_read_events(self->dev[0], ev, 4, 0);
	ASSERT_EQ(1, n) TH_LOG("%d: %s", n, pd_last_error());
	EXPECT_EQ(200, ev[0].export_id);
	pd_mr_dereg(m);
	pd_mr_dereg(m2);
	close(other);
}

/* A newer kernel's records are longer: reading them one at a time works,
 * and each still reaches the fabric. */
TEST_F(rev, longer_records_read_one_at_a_time)
{
	struct grown {
		struct peerdirect_event ev;
		uint64_t added[3];
	} rec[3];
	struct pd_event ev;
	struct pd_mr *m;
	int i;

	memset(rec, 0xa5, sizeof(rec));
	for (i = 0; i < 3; i++)
		rec[i].ev = (struct peerdirect_event) {
			.hdr = { PEERDIRECT_EVENT_REVOKE, sizeof(rec[i]) }, .reason = PEERDIRECT_REASON_REVOKE,
			.seq = 10 + (uint64_t)i, .export_id = i == 1 ? 100 : 300 + (uint64_t)i,
		};
	ASSERT_EQ(0, pd_fabric_attach_device(self->f1, self->dev[0]));
	ASSERT_EQ(0, pd_mr_reg_dmabuf(self->f1, self->memfd[0], 0, 4096, 0, &m));
	ASSERT_EQ(sizeof(rec), send(self->sock[0][1], rec, sizeof(rec), 0));
	for (i = 0; i < 3; i++) {
		memset(&ev, 0, sizeof(ev));
		ASSERT_EQ(1, pd_device_read_events(self->dev[0], &ev, 1, 1000)) TH_LOG("%s", pd_last_error());
		EXPECT_EQ(10 + i, ev.seq);
		EXPECT_EQ(i == 1 ? 100 : 300 + i, ev.export_id);
	}
	EXPECT_EQ(-ENODEV, usable(self->f1, self->me1, m));
	pd_mr_dereg(m);
}

/*
 * A dma-buf handed to us (an fd, exported elsewhere) is watched through a
 * subscription, which lives as long as a registration of it does: the
 * kernel's max_subscriptions counts live ones, and a record nothing uses
 * must not stay.  One subscription for two ranges of one dma-buf; evicting
 * the last entry cancels it.
 */
TEST_F(rev, a_subscription_lives_as_long_as_its_registrations)
{
	int a = memfd_of(1 << 20, 21), b = memfd_of(1 << 20, 22);
	struct peerdirect_event ev = {
		.hdr = { .type = PEERDIRECT_EVENT_REVOKE, .length = sizeof(ev) },
		.reason = PEERDIRECT_REASON_REVOKE, .flags = PEERDIRECT_EVENT_SUBSCRIBED,
		.seq = 1,
	};
	struct pd_mr *m1, *m2, *mb;
	struct stat st;

	ASSERT_LE(0, a);
	ASSERT_LE(0, b);
	fake.dev = self->sock[0][0];
	fake.max = 8;
	ASSERT_EQ(0, pd_fabric_attach_device(self->f1, self->dev[0]));
	ASSERT_EQ(0, pd_fabric_set_cache_limits(self->f1, 2, 0));
	ASSERT_EQ(0, pd_mr_reg_dmabuf(self->f1, a, 0, 4096, 0, &m1)) TH_LOG("%s", pd_last_error());
	ASSERT_EQ(0, pd_mr_reg_dmabuf(self->f1, a, 8192, 4096, 0, &m2)) TH_LOG("%s", pd_last_error());
	EXPECT_EQ(1, fake.live);
	EXPECT_EQ(2, pd_device_nr_recs(self->dev[0]));	/* export 100, and a */
	EXPECT_EQ(0, usable(self->f1, self->me1, m2)) TH_LOG("%s", pd_last_error());
	pd_mr_dereg(m1);
	pd_mr_dereg(m2);
	/* idle and cached: still watched */
	EXPECT_EQ(1, fake.live);
	/* b's two entries push both of a's out of the 2-entry cache */
	ASSERT_EQ(0, pd_mr_reg_dmabuf(self->f1, b, 0, 4096, 0, &mb)) TH_LOG("%s", pd_last_error());
	pd_mr_dereg(mb);
	ASSERT_EQ(0, pd_mr_reg_dmabuf(self->f1, b, 4096, 4096, 0, &mb)) TH_LOG("%s", pd_last_error());
	EXPECT_EQ(1, fake.live) TH_LOG("a's subscription outlived its registrations");
	EXPECT_EQ(2, pd_device_nr_recs(self->dev[0]));	/* export 100, and b */
	/* Revoked, b's subscription ends in the kernel (it sends the record
	 * once): the library invalidates b and drops its record when the
	 * entry goes (its cancel, answered ENOENT, is harmless). */
	ASSERT_EQ(0, fstat(b, &st));
	ev.inode = st.st_ino;
	ev.cookie = st.st_ino;
	fake.live = 0;
	ASSERT_EQ(sizeof(ev), send(self->sock[0][1], &ev, sizeof(ev), 0));
	EXPECT_EQ(2, pd_fabric_poll_events(self->f1));	/* b's two entries */
	EXPECT_EQ(-ENODEV, usable(self->f1, self->me1, mb));
	pd_mr_dereg(mb);
	EXPECT_EQ(0, fake.live);
	EXPECT_EQ(1, pd_device_nr_recs(self->dev[0]));	/* export 100 */
	close(a);
	close(b);
}

/*
 * At the module's max_subscriptions the registration is refused with
 * ENOSPC, saying which limit: made anyway, its revocation would go
 * unreported.  What is registered keeps working, and an idle cached
 * registration gives its subscription up to a new one.
 */
TEST_F(rev, max_subscriptions_refuses_clearly_and_loses_nothing)
{
	int a = memfd_of(1 << 20, 23), b = memfd_of(1 << 20, 24);
	struct pd_mr *ma, *mb;

	ASSERT_LE(0, a);
	ASSERT_LE(0, b);
	fake.dev = self->sock[0][0];
	fake.max = 1;
	ASSERT_EQ(0, pd_fabric_attach_device(self->f1, self->dev[0]));
	ASSERT_EQ(0, pd_mr_reg_dmabuf(self->f1, a, 0, 4096, 0, &ma)) TH_LOG("%s", pd_last_error());
	EXPECT_EQ(-ENOSPC, pd_mr_reg_dmabuf(self->f1, b, 0, 4096, 0, &mb));
	EXPECT_NE(NULL, strstr(pd_last_error(), "max_subscriptions")) TH_LOG("%s", pd_last_error());
	EXPECT_EQ(1, fake.live);
	EXPECT_EQ(2, pd_device_nr_recs(self->dev[0])) TH_LOG("the refused one left a record");
	EXPECT_EQ(0, usable(self->f1, self->me1, ma)) TH_LOG("%s", pd_last_error());
	/* a is idle in the cache now: it yields its subscription to b */
	pd_mr_dereg(ma);
	ASSERT_EQ(0, pd_mr_reg_dmabuf(self->f1, b, 0, 4096, 0, &mb)) TH_LOG("%s", pd_last_error());
	EXPECT_EQ(1, fake.live);
	EXPECT_EQ(0, usable(self->f1, self->me1, mb)) TH_LOG("%s", pd_last_error());
	pd_mr_dereg(mb);
	close(a);
	close(b);
}

/* A process that exports and frees for weeks keeps records only of what it
 * still uses: revoked ones nothing uses go before the array grows. */
TEST_F(rev, revoked_export_records_do_not_pile_up)
{
	int other = memfd_of(4096, 25);
	uint64_t id;

	ASSERT_LE(0, other);
	ASSERT_EQ(0, pd_fabric_attach_device(self->f1, self->dev[0]));
	for (id = 1000; id < 1200; id++) {
		ASSERT_EQ(0, pd_device_track_export(self->dev[0], other, id));
		ASSERT_EQ(0, send_event(self->sock[0][1], PEERDIRECT_REASON_FREE, id, 1));
		pd_fabric_poll_events(self->f1);
	}
	EXPECT_GE(48, pd_device_nr_recs(self->dev[0]));
	close(other);
}

/*
 * An overflow marks every record suspect, subscribed ones too, but ends no
 * live subscription in the kernel: releasing the registration must still
 * cancel it, or the dma-buf could never be registered again (EEXIST) and
 * the subscription would count against max_subscriptions for ever.
 */
TEST_F(rev, an_overflow_does_not_leak_subscriptions)
{
	int a = memfd_of(1 << 20, 26);
	struct pd_mr *m;

	ASSERT_LE(0, a);
	fake.dev = self->sock[0][0];
	fake.max = 8;
	ASSERT_EQ(0, pd_fabric_attach_device(self->f1, self->dev[0]));
	ASSERT_EQ(0, pd_fabric_set_cache_limits(self->f1, 1, 0));
	ASSERT_EQ(0, pd_mr_reg_dmabuf(self->f1, a, 0, 4096, 0, &m)) TH_LOG("%s", pd_last_error());
	EXPECT_EQ(1, fake.live);
	ASSERT_EQ(0, send_event(self->sock[0][1], PEERDIRECT_REASON_OVERFLOW, 0, 0));
	pd_fabric_poll_events(self->f1);
	EXPECT_EQ(-ENODEV, usable(self->f1, self->me1, m));
	pd_mr_dereg(m);
	EXPECT_EQ(0, fake.live) TH_LOG("the overflow leaked the subscription");
	/* registered again: watched again */
	ASSERT_EQ(0, pd_mr_reg_dmabuf(self->f1, a, 0, 4096, 0, &m)) TH_LOG("%s", pd_last_error());
	EXPECT_EQ(1, fake.live);
	EXPECT_EQ(0, usable(self->f1, self->me1, m)) TH_LOG("%s", pd_last_error());
	pd_mr_dereg(m);
	close(a);
}

/*
 * An overflow marks a subscription suspect, and the registrations then held
 * keep its record.  A new registration of the dma-buf meanwhile asks the
 * kernel again instead of being refused until they go: EEXIST (the
 * subscription the kernel would have ended at a revocation is still there)
 * means live, ENODEV means revoked.
 */
TEST_F(rev, a_held_subscription_is_revalidated_after_an_overflow)
{
	int a = memfd_of(1 << 20, 27), b = memfd_of(1 << 20, 28), c = memfd_of(1 << 20, 29);
	struct pd_mr *old_a, *old_b, *old_c, *m;
	struct stat st;
	unsigned int i;

	ASSERT_LE(0, a);
	ASSERT_LE(0, b);
	ASSERT_LE(0, c);
	fake.dev = self->sock[0][0];
	fake.max = 8;
	ASSERT_EQ(0, pd_fabric_attach_device(self->f1, self->dev[0]));
	ASSERT_EQ(0, pd_mr_reg_dmabuf(self->f1, a, 0, 4096, 0, &old_a)) TH_LOG("%s", pd_last_error());
	ASSERT_EQ(0, pd_mr_reg_dmabuf(self->f1, b, 0, 4096, 0, &old_b)) TH_LOG("%s", pd_last_error());
	ASSERT_EQ(0, pd_mr_reg_dmabuf(self->f1, c, 0, 4096, 0, &old_c)) TH_LOG("%s", pd_last_error());
	EXPECT_EQ(3, fake.live);
	ASSERT_EQ(0, send_event(self->sock[0][1], PEERDIRECT_REASON_OVERFLOW, 0, 0));
	pd_fabric_poll_events(self->f1);
	EXPECT_EQ(-ENODEV, usable(self->f1, self->me1, old_a)) TH_LOG("the overflow spared a registration");
	/* An answer that settles nothing is that error, not "revoked", and
	 * the next registration asks again. */
	ASSERT_EQ(0, fstat(a, &st));
	fake.fail_ino = st.st_ino;
	fake.fail_errno = ENOMEM;
	EXPECT_EQ(-ENOMEM, pd_mr_reg_dmabuf(self->f1, a, 4096, 4096, 0, &m));
	EXPECT_NE(NULL, strstr(pd_last_error(), "try again")) TH_LOG("%s", pd_last_error());
	fake.fail_ino = 0;
	/* c's subscription ended without a revocation: made again, live */
	ASSERT_EQ(0, fstat(c, &st));
	for (i = 0; i < fake.live && fake.ino[i] != st.st_ino; i++)
		;
	ASSERT_GT(fake.live, i);
	fake.ino[i] = fake.ino[--fake.live];
	ASSERT_EQ(0, pd_mr_reg_dmabuf(self->f1, c, 4096, 4096, 0, &m)) TH_LOG("%s", pd_last_error());
	EXPECT_EQ(0, usable(self->f1, self->me1, m)) TH_LOG("%s", pd_last_error());
	pd_mr_dereg(m);
	pd_mr_dereg(old_c);
	/* a is live: registered again while the old one is held */
	ASSERT_EQ(0, pd_mr_reg_dmabuf(self->f1, a, 4096, 4096, 0, &m))
		TH_LOG("a live subscription refused after an overflow: %s", pd_last_error());
	EXPECT_EQ(0, usable(self->f1, self->me1, m)) TH_LOG("%s", pd_last_error());
	pd_mr_dereg(m);
	/* b was revoked during the overflow: refused, and it says so */
	ASSERT_EQ(0, fstat(b, &st));
	fake.revoked_ino = st.st_ino;
	EXPECT_EQ(-ENODEV, pd_mr_reg_dmabuf(self->f1, b, 4096, 4096, 0, &m));
	EXPECT_NE(NULL, strstr(pd_last_error(), "revoked")) TH_LOG("%s", pd_last_error());
	fake.revoked_ino = 0;
	/* ... and stays refused: the revocation is now known, not suspected */
	EXPECT_EQ(-ENODEV, pd_mr_reg_dmabuf(self->f1, b, 4096, 4096, 0, &m));
	pd_mr_dereg(old_a);
	pd_mr_dereg(old_b);
	/* a's and c's new entries, idle in the cache, are watched; b left nothing */
	EXPECT_EQ(2, fake.live) TH_LOG("a subscription outlived its registrations");
	EXPECT_EQ(3, pd_device_nr_recs(self->dev[0]));	/* export 100, a and c */
	close(a);
	close(b);
	close(c);
}

/*
 * A registration held across a detach still releases its record on the
 * device it was made with (not whatever the fabric has attached then):
 * the subscription ends, and nothing is left behind.
 */
TEST_F(rev, a_registration_held_across_detach_releases_its_subscription)
{
	int a = memfd_of(1 << 20, 27);
	struct pd_mr *m;

	ASSERT_LE(0, a);
	fake.dev = self->sock[0][0];
	fake.max = 8;
	ASSERT_EQ(0, pd_fabric_attach_device(self->f1, self->dev[0]));
	ASSERT_EQ(0, pd_mr_reg_dmabuf(self->f1, a, 0, 4096, 0, &m)) TH_LOG("%s", pd_last_error());
	EXPECT_EQ(1, fake.live);
	ASSERT_EQ(0, pd_fabric_detach_device(self->f1, self->dev[0]));
	pd_mr_dereg(m);
	EXPECT_EQ(0, fake.live) TH_LOG("the subscription outlived its registration");
	EXPECT_EQ(1, pd_device_nr_recs(self->dev[0]));	/* export 100 */
	close(a);
}

/*
 * An entry made while no device watched the dma-buf does not serve it once
 * one does: the registration is made again, watched, and a revocation
 * reaches it.
 */
TEST_F(rev, an_unwatched_entry_is_not_reused_once_watched)
{
	int a = memfd_of(1 << 20, 28);
	struct peerdirect_event ev = {
		.hdr = { .type = PEERDIRECT_EVENT_REVOKE, .length = sizeof(ev) },
		.reason = PEERDIRECT_REASON_REVOKE, .flags = PEERDIRECT_EVENT_SUBSCRIBED,
		.seq = 1,
	};
	struct pd_dmabuf *b;
	struct pd_mr *m, *mh;
	struct stat st;

	ASSERT_LE(0, a);
	ASSERT_EQ(0, fstat(a, &st));
	fake.dev = self->sock[0][0];
	fake.max = 8;
	ASSERT_EQ(0, pd_mr_reg_dmabuf(self->f1, a, 0, 4096, 0, &m)) TH_LOG("%s", pd_last_error());
	pd_mr_dereg(m);			/* idle, unwatched */
	ASSERT_EQ(0, pd_fabric_attach_device(self->f1, self->dev[0]));
	ASSERT_EQ(0, pd_mr_reg_dmabuf(self->f1, a, 0, 4096, 0, &m)) TH_LOG("%s", pd_last_error());
	EXPECT_EQ(1, fake.live);
	/* through an imported handle too */
	ASSERT_EQ(0, pd_dmabuf_import(self->f1, a, &b)) TH_LOG("%s", pd_last_error());
	ASSERT_EQ(0, pd_mr_reg_imported(b, 0, 4096, 0, &mh)) TH_LOG("%s", pd_last_error());
	EXPECT_EQ(1, fake.live);
	ev.inode = st.st_ino;
	ev.cookie = st.st_ino;
	ASSERT_EQ(sizeof(ev), send(self->sock[0][1], &ev, sizeof(ev), 0));
	pd_fabric_poll_events(self->f1);
	EXPECT_EQ(-ENODEV, usable(self->f1, self->me1, m)) TH_LOG("served by the unwatched entry");
	EXPECT_EQ(-ENODEV, usable(self->f1, self->me1, mh)) TH_LOG("the handle's hit was unwatched");
	pd_mr_dereg(mh);
	pd_mr_dereg(m);
	pd_dmabuf_release(b);
	close(a);
}

static int64_t ms_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

struct reader {
	struct pd_device *dev;
	int timeout_ms, ret;
	int64_t took_ms;
	struct pd_event ev[4];
};

static void *read_events_thread(void *p)
{
	struct reader *r = p;
	int64_t t0 = ms_now();

	r->ret = pd_device_read_events(r->dev, r->ev, 4, r->timeout_ms);
	r->took_ms = ms_now() - t0;
	return NULL;
}

/*
 * An application waiting in pd_device_read_events while a transfer thread
 * drains the device (every registration and transfer does) is woken by
 * what that thread queued, not at its timeout: the wait polls the eventfd
 * the drain signals.  The window between the waiter's look and its wait is
 * widened to 300 ms, and the drain lands in it.
 */
TEST_F(rev, an_event_another_thread_drained_wakes_the_waiting_reader)
{
	struct reader r = { .dev = self->dev[0], .timeout_ms = 20000 };
	pthread_t t;

	ASSERT_EQ(0, pd_fabric_attach_device(self->f1, self->dev[0]));
	fake.slow_poll_ms = 300;
	ASSERT_EQ(0, pthread_create(&t, NULL, read_events_thread, &r));
	usleep(100 * 1000);
	ASSERT_EQ(0, send_event(self->sock[0][1], PEERDIRECT_REASON_REVOKE, 100, self->st[0].st_ino));
	pd_fabric_poll_events(self->f1);	/* the transfer thread's drain */
	pthread_join(t, NULL);
	fake.slow_poll_ms = 0;
	ASSERT_EQ(1, r.ret) TH_LOG("%s", pd_last_error());
	EXPECT_EQ(100, r.ev[0].export_id);
	/* 300 ms of widened window, against a 20 s timeout */
	EXPECT_GT(10000, r.took_ms) TH_LOG("woken after %lld ms", (long long)r.took_ms);
	/* and with no timeout at all */
	r.timeout_ms = -1;
	fake.slow_poll_ms = 300;
	ASSERT_EQ(0, pthread_create(&t, NULL, read_events_thread, &r));
	usleep(100 * 1000);
	ASSERT_EQ(0, send_event(self->sock[0][1], PEERDIRECT_REASON_FREE, 101, 1));
	pd_fabric_poll_events(self->f1);
	pthread_join(t, NULL);
	fake.slow_poll_ms = 0;
	ASSERT_EQ(1, r.ret) TH_LOG("%s", pd_last_error());
	EXPECT_EQ(101, r.ev[0].export_id);
}

/*
 * pd_device_fd() is what an event loop polls: readable while events wait,
 * whether still in the kernel or already read by a transfer thread, and
 * not once they were all taken.
 */
TEST_F(rev, the_device_fd_polls_readable_while_events_wait)
{
	struct pollfd p = { .fd = pd_device_fd(self->dev[0]), .events = POLLIN };
	struct pd_event ev[4];

	ASSERT_LE(0, p.fd);
	ASSERT_EQ(0, pd_fabric_attach_device(self->f1, self->dev[0]));
	EXPECT_EQ(0, poll(&p, 1, 0));
	ASSERT_EQ(0, send_event(self->sock[0][1], PEERDIRECT_REASON_FREE, 555, 1234));
	EXPECT_EQ(1, poll(&p, 1, 1000)) TH_LOG("an event in the kernel's queue");
	pd_fabric_poll_events(self->f1);	/* drained by another thread */
	EXPECT_EQ(1, poll(&p, 1, 1000)) TH_LOG("an event a drain queued");
	ASSERT_EQ(1, pd_device_read_events(self->dev[0], ev, 4, 0));
	EXPECT_EQ(0, poll(&p, 1, 0)) TH_LOG("readable with nothing left");
}

/*
 * A read of the device that fails (not EAGAIN, not removal) may have hidden
 * a revocation: it counts as an overflow -- the device's registrations are
 * dropped and the application is told -- instead of failing open.
 */
TEST_F(rev, a_failed_event_read_counts_as_an_overflow)
{
	struct pd_event ev[4];
	struct pd_mr *m;

	ASSERT_EQ(0, pd_fabric_attach_device(self->f1, self->dev[0]));
	ASSERT_EQ(0, pd_mr_reg_dmabuf(self->f1, self->memfd[0], 0, 4096, 0, &m)) TH_LOG("%s", pd_last_error());
	EXPECT_EQ(0, usable(self->f1, self->me1, m)) TH_LOG("%s", pd_last_error());
	fake.dev = self->sock[0][0];
	fake.read_errno = EIO;
	EXPECT_EQ(1, pd_fabric_poll_events(self->f1));
	EXPECT_EQ(-ENODEV, usable(self->f1, self->me1, m)) TH_LOG("the failed read lost a revocation");
	ASSERT_EQ(1, pd_device_read_events(self->dev[0], ev, 4, 0));
	EXPECT_EQ(PD_REASON_OVERFLOW, ev[0].reason);
	pd_mr_dereg(m);
}

/* n exports of distinct dma-bufs, ids from first, each closed at once. */
static int track_closed_exports(struct pd_device *dev, uint64_t first, unsigned int n)
{
	unsigned int i;
	int fd, ret;

	for (i = 0; i < n; i++) {
		fd = memfd_of(4096, i);
		if (fd < 0)
			return -errno;
		ret = pd_device_track_export(dev, fd, first + i);
		close(fd);
		if (ret)
			return ret;
	}
	return 0;
}

/*
 * A process that exports and closes for weeks keeps records only of what
 * the kernel still has: exports absent from PEERDIRECT_IOCTL_LIST go once
 * the records double, the live ones stay and are still tracked.
 */
TEST_F(rev, records_of_released_exports_go)
{
	struct pd_mr *m;

	fake.dev = self->sock[0][0];
	fake.list_lo = 2990;		/* the last ten of 1000..2999 live on */
	fake.list_hi = 3000;
	ASSERT_EQ(0, pd_fabric_attach_device(self->f1, self->dev[0]));
	ASSERT_EQ(0, track_closed_exports(self->dev[0], 1000, 2000));
	EXPECT_LT(0, fake.lists);
	EXPECT_GT(300, pd_device_nr_recs(self->dev[0]))
		TH_LOG("%zu records of 2001 exports, 11 live", pd_device_nr_recs(self->dev[0]));
	/* export 100 was listed all along: still its device's */
	ASSERT_EQ(0, pd_mr_reg_dmabuf(self->f1, self->memfd[0], 0, 4096, 0, &m)) TH_LOG("%s", pd_last_error());
	ASSERT_EQ(0, send_event(self->sock[0][1], PEERDIRECT_REASON_REVOKE, 100, self->st[0].st_ino));
	EXPECT_EQ(-ENODEV, usable(self->f1, self->me1, m)) TH_LOG("export 100's record was swept");
	pd_mr_dereg(m);
}

/* A module that cannot list (before uapi 2.1; here a socket): the records
 * of revoked exports still go, the others stay. */
TEST_F(rev, without_a_listing_only_revoked_records_go)
{
	uint64_t id;

	ASSERT_EQ(0, pd_fabric_attach_device(self->f1, self->dev[0]));
	ASSERT_EQ(0, track_closed_exports(self->dev[0], 1000, 200));
	for (id = 1000; id < 1200; id++)
		ASSERT_EQ(0, send_event(self->sock[0][1], PEERDIRECT_REASON_FREE, id, 1));
	pd_fabric_poll_events(self->f1);
	ASSERT_EQ(0, track_closed_exports(self->dev[0], 2000, 100));
	EXPECT_GT(150, pd_device_nr_recs(self->dev[0]))
		TH_LOG("%zu records", pd_device_nr_recs(self->dev[0]));
	EXPECT_LE(101, pd_device_nr_recs(self->dev[0]));
}

/*
 * Another thread of the application closes the fd number and opens another
 * dma-buf under it while the registration resolves it: what is registered
 * is the dma-buf whose identity was read, never the newcomer under its key.
 */
TEST_F(rev, an_fd_swapped_during_registration_registers_what_was_checked)
{
	struct pd_mr *m;
	unsigned char *p;

	swap_fd.user_fd = dup(self->memfd[0]);
	swap_fd.other_fd = self->memfd[1];
	swap_fd.ino = self->st[0].st_ino;
	ASSERT_LE(0, swap_fd.user_fd);
	swap_fd.armed = 1;
	ASSERT_EQ(0, pd_mr_reg_dmabuf(self->f1, swap_fd.user_fd, 0, 4096, 0, &m)) TH_LOG("%s", pd_last_error());
	EXPECT_EQ(2, swap_fd.armed) TH_LOG("the swap did not happen");
	swap_fd.armed = 0;
	p = pd_mr_cpu_ptr(m);
	ASSERT_NE(NULL, p);
	EXPECT_EQ(pattern(7, 0), p[7]) TH_LOG("registered the dma-buf swapped in under the number");
	pd_mr_dereg(m);
	close(swap_fd.user_fd);
}

/*
 * After an overflow every export of the device is suspect, but the kernel
 * lists which still live unrevoked: those register again, instead of
 * being refused for good; one listed revoked, or gone, stays refused.
 */
TEST_F(rev, an_overflow_is_revalidated_by_the_listing)
{
	int a = memfd_of(4096, 31), b = memfd_of(4096, 32);
	struct pd_mr *m;

	ASSERT_LE(0, a);
	ASSERT_LE(0, b);
	fake.dev = self->sock[0][0];
	fake.list_lo = 2990;
	fake.list_hi = 3000;
	fake.list_revoked = 2991;
	ASSERT_EQ(0, pd_device_track_export(self->dev[0], a, 2000));	/* not listed: gone */
	ASSERT_EQ(0, pd_device_track_export(self->dev[0], b, 2991));	/* listed revoked */
	ASSERT_EQ(0, pd_fabric_attach_device(self->f1, self->dev[0]));
	ASSERT_EQ(0, pd_mr_reg_dmabuf(self->f1, self->memfd[0], 0, 4096, 0, &m)) TH_LOG("%s", pd_last_error());
	ASSERT_EQ(0, send_event(self->sock[0][1], PEERDIRECT_REASON_OVERFLOW, 0, 0));
	pd_fabric_poll_events(self->f1);
	EXPECT_EQ(-ENODEV, usable(self->f1, self->me1, m)) TH_LOG("the overflow spared a registration");
	pd_mr_dereg(m);
	EXPECT_EQ(0, pd_mr_reg_dmabuf(self->f1, self->memfd[0], 0, 4096, 0, &m))
		TH_LOG("a live export refused for good after an overflow: %s", pd_last_error());
	EXPECT_EQ(0, usable(self->f1, self->me1, m)) TH_LOG("%s", pd_last_error());
	pd_mr_dereg(m);
	EXPECT_EQ(-ENODEV, pd_mr_reg_dmabuf(self->f1, a, 0, 4096, 0, &m));
	EXPECT_EQ(-ENODEV, pd_mr_reg_dmabuf(self->f1, b, 0, 4096, 0, &m));
	close(a);
	close(b);
}

/*
 * A detach that lands while a registration is being made revoked nothing:
 * the registration is made again (unwatched, no device being left), not
 * refused as revoked.
 */
TEST_F(rev, a_detach_during_registration_is_not_a_revocation)
{
	int a = memfd_of(1 << 20, 33);
	struct pd_mr *m = NULL;
	int ret;

	ASSERT_LE(0, a);
	fake.dev = self->sock[0][0];
	fake.max = 8;
	ASSERT_EQ(0, pd_fabric_attach_device(self->f1, self->dev[0]));
	fake.detach_fab = self->f1;
	fake.detach_dev = self->dev[0];
	fake.dups_to_detach = 2;	/* the caller's fd's, then the entry's */
	ret = pd_mr_reg_dmabuf(self->f1, a, 0, 4096, 0, &m);
	EXPECT_EQ(NULL, fake.detach_fab) TH_LOG("the detach was not injected");
	EXPECT_EQ(0, ret) TH_LOG("%s", pd_last_error());
	if (!ret) {
		EXPECT_EQ(0, usable(self->f1, self->me1, m)) TH_LOG("%s", pd_last_error());
		pd_mr_dereg(m);
	}
	EXPECT_EQ(0, fake.live) TH_LOG("the subscription outlived the detach");
	close(a);
}

/*
 * A close of the exporting device file while its export is being
 * registered is not a mere detach: the file's exports may go with it, so
 * the registration is refused as revoked, never made unwatched.
 */
TEST_F(rev, a_close_during_registration_refuses_it)
{
	struct pd_mr *m = NULL;
	int ret;

	ASSERT_EQ(0, pd_fabric_attach_device(self->f1, self->dev[0]));
	fake.detach_fab = self->f1;
	fake.detach_dev = self->dev[0];
	fake.close_instead = true;
	fake.dups_to_detach = 2;	/* the caller's fd's, then the entry's */
	ret = pd_mr_reg_dmabuf(self->f1, self->memfd[0], 0, 4096, 0, &m);
	self->dev[0] = NULL;		/* closed, with its socket */
	self->sock[0][0] = -1;
	EXPECT_EQ(NULL, fake.detach_fab) TH_LOG("the close was not injected");
	EXPECT_EQ(-ENODEV, ret) TH_LOG("registered an export of a closed device");
	if (!ret)
		pd_mr_dereg(m);
}

TEST_HARNESS_MAIN
