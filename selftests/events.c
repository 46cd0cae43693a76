// SPDX-License-Identifier: GPL-2.0
/* Revocation events: read()/poll() on the device fd. */
#include <poll.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <linux/userfaultfd.h>
#include "kselftest_harness.h"
#include "pd_test.h"

FIXTURE(ev) {
	int fd;
	struct peerdirect_query q;
	int64_t h;
};

FIXTURE_SETUP(ev)
{
	self->fd = open(PD_DEV0, O_RDWR | O_NONBLOCK);
	ASSERT_LE(0, self->fd);
	ASSERT_EQ(0, pd_query(self->fd, &self->q));
	self->h = pd_alloc(self->fd, 2 * self->q.page_size);
	ASSERT_LT(0, self->h);
}

FIXTURE_TEARDOWN(ev)
{
	close(self->fd);
}

static int poll_in(int fd, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	return poll(&p, 1, ms) == 1 && (p.revents & POLLIN);
}

TEST_F(ev, empty_queue_is_eagain_and_not_readable)
{
	struct peerdirect_event e;

	EXPECT_EQ(-1, read(self->fd, &e, sizeof(e)));
	EXPECT_EQ(EAGAIN, errno);
	EXPECT_FALSE(poll_in(self->fd, 0));
}

TEST_F(ev, revoke_event_describes_the_export)
{
	struct peerdirect_export e = {
		.argsz = sizeof(e), .flags = PEERDIRECT_EXPORT_RDWR, .handle = self->h,
		.offset = self->q.page_size, .length = self->q.page_size,
	};
	struct peerdirect_event ev[2];

	ASSERT_EQ(0, ioctl(self->fd, PEERDIRECT_IOCTL_EXPORT, &e));
	ASSERT_EQ(0, pd_revoke(self->fd, PEERDIRECT_REVOKE_EXPORT, 0, e.export_id, NULL));
	EXPECT_TRUE(poll_in(self->fd, 1000));
	ASSERT_EQ(sizeof(ev[0]), read(self->fd, ev, sizeof(ev)));
	EXPECT_EQ(PEERDIRECT_EVENT_REVOKE, ev[0].hdr.type);
	EXPECT_EQ(sizeof(ev[0]), ev[0].hdr.length);
	EXPECT_EQ(0, ev[0].flags);
	EXPECT_EQ(0, ev[0].cookie);
	EXPECT_EQ(PEERDIRECT_REASON_REVOKE, ev[0].reason);
	EXPECT_EQ(1, ev[0].seq);
	EXPECT_EQ(e.export_id, ev[0].export_id);
	EXPECT_EQ(self->h, ev[0].handle);
	EXPECT_EQ(e.inode, ev[0].inode);
	EXPECT_EQ(self->q.page_size, ev[0].offset);
	EXPECT_EQ(self->q.page_size, ev[0].length);
	EXPECT_FALSE(poll_in(self->fd, 0));
	close(e.fd);
}

TEST_F(ev, reasons_follow_the_cause)
{
	struct peerdirect_revoke r = { .argsz = sizeof(r), .flags = PEERDIRECT_REVOKE_EXPORT };
	struct peerdirect_event ev[4];
	int d1, d2, d3;

	d1 = pd_export_id(self->fd, self->h, 0, 4096, PEERDIRECT_EXPORT_RDWR, &r.export_id);
	ASSERT_LE(0, d1);
	ASSERT_EQ(0, ioctl(self->fd, PEERDIRECT_IOCTL_ADMIN_REVOKE, &r));
	d2 = pd_export(self->fd, self->h, 0, 4096);
	ASSERT_LE(0, d2);
	ASSERT_EQ(0, pd_reset(self->fd, NULL));
	d3 = pd_export(self->fd, self->h, 0, 4096);
	ASSERT_LE(0, d3);
	ASSERT_EQ(0, pd_free(self->fd, self->h));

	ASSERT_EQ(3 * sizeof(ev[0]), read(self->fd, ev, sizeof(ev)));
	EXPECT_EQ(PEERDIRECT_REASON_ADMIN, ev[0].reason);
	EXPECT_EQ(PEERDIRECT_REASON_RESET, ev[1].reason);
	EXPECT_EQ(PEERDIRECT_REASON_FREE, ev[2].reason);
	EXPECT_EQ(ev[0].seq + 1, ev[1].seq);
	EXPECT_EQ(ev[1].seq + 1, ev[2].seq);
	close(d1);
	close(d2);
	close(d3);
}

TEST_F(ev, events_go_to_the_owning_file_only)
{
	int other = open(PD_DEV0, O_RDWR | O_NONBLOCK);
	struct peerdirect_event e;
	int d = pd_export(self->fd, self->h, 0, 4096);

	ASSERT_LE(0, other);
	ASSERT_LE(0, d);
	ASSERT_EQ(0, pd_revoke(self->fd, PEERDIRECT_REVOKE_ALLOC, self->h, 0, NULL));
	EXPECT_EQ(-1, read(other, &e, sizeof(e)));
	EXPECT_EQ(EAGAIN, errno);
	EXPECT_EQ(sizeof(e), read(self->fd, &e, sizeof(e)));
	close(d);
	close(other);
}

/* Past max_events the queue keeps what it has and ends with OVERFLOW. */
TEST_F(ev, overflow_is_reported_once)
{
	unsigned int i, n = self->q.max_events + 3, got = 0, overflow = 0;
	struct peerdirect_event e;
	__u64 id = 0;
	int d;

	for (i = 0; i < n; i++) {
		d = pd_export_id(self->fd, self->h, 0, 4096, PEERDIRECT_EXPORT_RDWR, &id);
		ASSERT_LE(0, d);
		ASSERT_EQ(0, pd_revoke(self->fd, PEERDIRECT_REVOKE_EXPORT, 0, id, NULL));
		close(d);
	}
	while (read(self->fd, &e, sizeof(e)) == sizeof(e)) {
		if (e.reason == PEERDIRECT_REASON_OVERFLOW)
			overflow++;
		else
			got++;
	}
	EXPECT_EQ(EAGAIN, errno);
	EXPECT_EQ(self->q.max_events, got);
	EXPECT_EQ(1, overflow);
}

/* A read whose copy faults returns EFAULT and loses nothing. */
TEST_F(ev, faulting_read_keeps_the_events)
{
	struct peerdirect_event e;
	__u64 id = 0;
	void *bad;
	int d = pd_export_id(self->fd, self->h, 0, 4096, PEERDIRECT_EXPORT_RDWR, &id);

	ASSERT_LE(0, d);
	ASSERT_EQ(0, pd_revoke(self->fd, PEERDIRECT_REVOKE_EXPORT, 0, id, NULL));
	bad = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, bad);
	EXPECT_EQ(-1, read(self->fd, bad, sizeof(e)));
	EXPECT_EQ(EFAULT, errno);
	ASSERT_EQ(sizeof(e), read(self->fd, &e, sizeof(e)));
	EXPECT_EQ(id, e.export_id);
	EXPECT_EQ(1, e.seq);
	munmap(bad, 4096);
	close(d);
}

struct revoker {
	int fd;
	__u64 id;
};

static void *revoke_later(void *arg)
{
	struct revoker *rv = arg;

	usleep(200 * 1000);
	pd_revoke(rv->fd, PEERDIRECT_REVOKE_EXPORT, 0, rv->id, NULL);
	return NULL;
}

TEST_F(ev, blocking_read_wakes_on_revoke)
{
	int blocking = pd_open(PD_DEV0);
	struct peerdirect_event e;
	struct revoker rv;
	pthread_t t;
	int64_t h;
	int d;

	ASSERT_LE(0, blocking);
	h = pd_alloc(blocking, 4096);
	ASSERT_LT(0, h);
	d = pd_export_id(blocking, h, 0, 4096, PEERDIRECT_EXPORT_RDWR, &rv.id);
	ASSERT_LE(0, d);
	rv.fd = blocking;
	ASSERT_EQ(0, pthread_create(&t, NULL, revoke_later, &rv));
	EXPECT_EQ(sizeof(e), read(blocking, &e, sizeof(e))) TH_LOG("read: %s", strerror(errno));
	EXPECT_EQ(rv.id, e.export_id);
	pthread_join(t, NULL);
	close(d);
	close(blocking);
}

struct uffd_reader {
	int fd;
	void *buf;
	size_t len;
	ssize_t got;
};

static void *read_into(void *arg)
{
	struct uffd_reader *r = arg;

	r->got = read(r->fd, r->buf, r->len);
	return NULL;
}

/* Export and revoke one page of @h: one event on @fd. */
static int revoke_one(int fd, int64_t h)
{
	__u64 id = 0;
	int d = pd_export_id(fd, h, 0, 4096, PEERDIRECT_EXPORT_RDWR, &id), ret;

	if (d < 0)
		return d;
	ret = pd_revoke(fd, PEERDIRECT_REVOKE_EXPORT, 0, id, NULL);
	close(d);
	return ret;
}

/*
 * Sequence numbers stay unique and increasing when a revoke lands while a
 * reader is copying the OVERFLOW record out: the reader's buffer is a
 * userfaultfd page, so the copy stops in the fault until this thread has
 * revoked one more export.
 */
TEST_F(ev, overflow_seq_is_unique_under_a_racing_reader)
{
	struct uffdio_api api = { .api = UFFD_API };
	struct uffdio_register reg = { .mode = UFFDIO_REGISTER_MODE_MISSING };
	struct uffdio_zeropage zp = { 0 };
	struct peerdirect_event ev[64], *rec;
	struct uffd_reader rd = { .fd = self->fd };
	unsigned int i, n = 0, max = self->q.max_events;
	struct uffd_msg msg;
	struct pollfd pfd;
	long page = sysconf(_SC_PAGESIZE);
	__u64 last = 0;
	pthread_t t;
	int uffd;
	void *area;

	ASSERT_GE(64, max + 8);
	uffd = syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	if (uffd < 0)
		SKIP(return, "no userfaultfd: %s", strerror(errno));
	ASSERT_EQ(0, ioctl(uffd, UFFDIO_API, &api));
	area = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, area);
	reg.range.start = (uintptr_t)area;
	reg.range.len = page;
	ASSERT_EQ(0, ioctl(uffd, UFFDIO_REGISTER, &reg));

	/* a full queue with the overflow pending, then room for more */
	for (i = 0; i < max + 2; i++)
		ASSERT_EQ(0, revoke_one(self->fd, self->h));
	ASSERT_EQ((max - 2) * sizeof(ev[0]), read(self->fd, ev, (max - 2) * sizeof(ev[0])));
	for (i = 0; i < max - 2; i++) {
		EXPECT_LT(last, ev[i].seq);
		last = ev[i].seq;
	}

	/* the last two records and OVERFLOW, copied into the trapped page */
	rd.buf = area;
	rd.len = 8 * sizeof(ev[0]);
	ASSERT_EQ(0, pthread_create(&t, NULL, read_into, &rd));
	pfd.fd = uffd;
	pfd.events = POLLIN;
	ASSERT_EQ(1, poll(&pfd, 1, 5000));
	ASSERT_EQ(sizeof(msg), read(uffd, &msg, sizeof(msg)));
	ASSERT_EQ(UFFD_EVENT_PAGEFAULT, msg.event);
	/* the reader is inside its copy: a revoke now */
	ASSERT_EQ(0, revoke_one(self->fd, self->h));
	zp.range.start = (uintptr_t)area;
	zp.range.len = page;
	ASSERT_EQ(0, ioctl(uffd, UFFDIO_ZEROPAGE, &zp));
	pthread_join(t, NULL);
	ASSERT_LE(3 * sizeof(ev[0]), rd.got);
	rec = area;
	EXPECT_EQ(PEERDIRECT_REASON_OVERFLOW, rec[2].reason);
	for (i = 0; i < rd.got / sizeof(ev[0]); i++) {
		EXPECT_LT(last, rec[i].seq) TH_LOG("record %u: seq %llu after %llu", i,
						   (unsigned long long)rec[i].seq,
						   (unsigned long long)last);
		last = rec[i].seq;
	}
	/* whatever follows comes after it */
	while (read(self->fd, &ev[n], sizeof(ev[0])) == sizeof(ev[0]) && n < 63)
		n++;
	for (i = 0; i < n; i++) {
		EXPECT_LT(last, ev[i].seq) TH_LOG("later record %u: seq %llu after %llu", i,
						  (unsigned long long)ev[i].seq,
						  (unsigned long long)last);
		last = ev[i].seq;
	}
	munmap(area, page);
	close(uffd);
}

TEST_HARNESS_MAIN
