// SPDX-License-Identifier: GPL-2.0
/*
 * The administrator's view (uapi 2.1, 2.2): PEERDIRECT_IOCTL_LIST's export,
 * attachment and allocation records, its argument rules and who sees what,
 * and the sysfs attributes of /sys/class/misc/peerdirectN against QUERY and
 * the counts.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sched.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include "kselftest_harness.h"
#include "pd_test.h"

#define MAXREC 64

FIXTURE(list) {
	int fd;
	struct peerdirect_query q;
	size_t len;
	char importer[PEERDIRECT_DEVNAME_LEN];
};

FIXTURE_SETUP(list)
{
	struct pdti_device d;

	self->fd = pd_open(PD_DEV0);
	ASSERT_LE(0, self->fd);
	ASSERT_EQ(0, pd_query(self->fd, &self->q));
	if (!(self->q.features & PEERDIRECT_FEAT_LIST))
		SKIP(return, "no PEERDIRECT_FEAT_LIST");
	self->len = 2 * self->q.page_size;
	/* The name the test importer attaches with (pdti_open()). */
	if (pd_pci_function("peerdirect0", &d))
		snprintf(self->importer, sizeof(self->importer), "pd_test_importer");
	else
		snprintf(self->importer, sizeof(self->importer), "%04x:%02x:%02x.%x",
			 d.domain, d.bus, d.devfn >> 3, d.devfn & 7);
}

FIXTURE_TEARDOWN(list)
{
	close(self->fd);
}

struct listing {
	struct peerdirect_list l;
	struct peerdirect_export_info e[MAXREC];
	struct peerdirect_attach_info a[MAXREC];
	struct peerdirect_alloc_info m[MAXREC];
};

/* LIST with every kind of record: exports, attachments and allocations. */
static int do_list_all(int fd, struct listing *x)
{
	memset(x, 0, sizeof(*x));
	x->l.argsz = sizeof(x->l);
	x->l.flags = PEERDIRECT_LIST_ATTACHMENTS | PEERDIRECT_LIST_ALLOCATIONS;
	x->l.export_size = sizeof(x->e[0]);
	x->l.exports = (uintptr_t)x->e;
	x->l.nr_exports = MAXREC;
	x->l.attach_size = sizeof(x->a[0]);
	x->l.attachments = (uintptr_t)x->a;
	x->l.nr_attachments = MAXREC;
	x->l.allocation_size = sizeof(x->m[0]);
	x->l.allocations = (uintptr_t)x->m;
	x->l.nr_allocations = MAXREC;
	return ioctl(fd, PEERDIRECT_IOCTL_LIST, &x->l) ? -errno : 0;
}

/* The allocation record of handle @h made by process @tgid. */
static struct peerdirect_alloc_info *find_alloc(struct listing *x, __u64 h,
						pid_t tgid)
{
	__u32 i;

	for (i = 0; i < x->l.nr_allocations; i++)
		if (x->m[i].handle == h && x->m[i].tgid == tgid)
			return &x->m[i];
	return NULL;
}

static int do_list(int fd, struct listing *x, int attachments)
{
	memset(x, 0, sizeof(*x));
	x->l.argsz = sizeof(x->l);
	x->l.export_size = sizeof(x->e[0]);
	x->l.exports = (uintptr_t)x->e;
	x->l.nr_exports = MAXREC;
	if (attachments) {
		x->l.flags = PEERDIRECT_LIST_ATTACHMENTS;
		x->l.attach_size = sizeof(x->a[0]);
		x->l.attachments = (uintptr_t)x->a;
		x->l.nr_attachments = MAXREC;
	}
	return ioctl(fd, PEERDIRECT_IOCTL_LIST, &x->l) ? -errno : 0;
}

/* LIST with capacities of 0, attachments asked for: the counts only. */
static int count_only(int fd, struct peerdirect_list *c)
{
	memset(c, 0, sizeof(*c));
	c->argsz = sizeof(*c);
	c->flags = PEERDIRECT_LIST_ATTACHMENTS;
	c->export_size = sizeof(struct peerdirect_export_info);
	c->attach_size = sizeof(struct peerdirect_attach_info);
	return ioctl(fd, PEERDIRECT_IOCTL_LIST, c) ? -errno : 0;
}

static struct peerdirect_export_info *find(struct listing *x, __u64 id)
{
	__u32 i;

	for (i = 0; i < x->l.nr_exports; i++)
		if (x->e[i].export_id == id)
			return &x->e[i];
	return NULL;
}

static long long boottime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_BOOTTIME, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* One export, a pinned importer on it: every field of both records. */
TEST_F(list, export_and_attachment_records)
{
	static struct listing x;
	struct peerdirect_export_info *e;
	struct peerdirect_list c;
	long long t0 = boottime_ns();
	__u64 id = 0, ro_id = 0;
	int64_t h = pd_alloc(self->fd, self->len);
	struct stat st;
	int d, ro, imp;
	__u32 i, mine = 0;

	ASSERT_LT(0, h);
	d = pd_export_id(self->fd, h, self->q.page_size, self->q.page_size,
			 PEERDIRECT_EXPORT_RDWR | PEERDIRECT_EXPORT_CLOEXEC, &id);
	ASSERT_LE(0, d);
	ro = pd_export_id(self->fd, h, 0, self->len, PEERDIRECT_EXPORT_CLOEXEC, &ro_id);
	ASSERT_LE(0, ro);
	imp = pdti_open("peerdirect0");
	ASSERT_LE(0, imp);
	ASSERT_EQ(0, pdti_import(imp, d, pd_pinned_flags(&self->q), 0));

	ASSERT_EQ(0, do_list(self->fd, &x, 1));
	EXPECT_LE(2, x.l.total_exports);
	EXPECT_EQ(x.l.total_exports, x.l.nr_exports);
	e = find(&x, id);
	ASSERT_NE(NULL, e);
	ASSERT_EQ(0, fstat(d, &st));
	EXPECT_EQ(st.st_ino, e->inode);
	EXPECT_EQ((__u64)h, e->handle);
	EXPECT_EQ(self->q.page_size, e->offset);
	EXPECT_EQ(self->q.page_size, e->length);
	EXPECT_EQ(getpid(), e->tgid);
	EXPECT_EQ(getuid(), e->uid);
	EXPECT_EQ(0, e->flags);
	EXPECT_EQ(0, e->reason);
	EXPECT_EQ(1, e->nr_attachments);
	EXPECT_LE(1, e->nr_pins);
	EXPECT_EQ(1, e->nr_maps);
	EXPECT_EQ(self->q.page_size, e->mapped_bytes);
	EXPECT_LE(t0, (long long)e->created_ns);
	EXPECT_GE(boottime_ns(), (long long)e->created_ns);

	e = find(&x, ro_id);
	ASSERT_NE(NULL, e);
	EXPECT_EQ(PEERDIRECT_EXPORT_INFO_RDONLY, e->flags);
	EXPECT_EQ(0, e->nr_attachments);
	EXPECT_EQ(0, e->mapped_bytes);

	for (i = 0; i < x.l.nr_attachments; i++) {
		if (x.a[i].export_id != id)
			continue;
		mine++;
		EXPECT_STREQ(self->importer, x.a[i].device);
		EXPECT_TRUE(x.a[i].flags & PEERDIRECT_ATTACH_INFO_PINNED);
		EXPECT_TRUE(x.a[i].flags & PEERDIRECT_ATTACH_INFO_DYNAMIC);
		EXPECT_TRUE(x.a[i].flags & PEERDIRECT_ATTACH_INFO_PEER2PEER);
		/* Pinned for good (as EFA) unless the revocable kind where the
		 * kernel can tell it (7.1): then a revoke makes it let go. */
		EXPECT_EQ(!!(pd_pinned_flags(&self->q) & PDTI_REVOCABLE) &&
			  !!(pdti_kernel_facts() & PDTI_K_REVOCABLE_CONTRACT),
			  !!(x.a[i].flags & PEERDIRECT_ATTACH_INFO_REVOCABLE));
		EXPECT_EQ(1, x.a[i].maps);
		EXPECT_LE(1, x.a[i].pins);
		EXPECT_EQ(self->q.page_size, x.a[i].mapped_bytes);
		EXPECT_LE(t0, (long long)x.a[i].since_ns);
		EXPECT_EQ(0, x.a[i].pad);
	}
	EXPECT_EQ(1, mine);
	EXPECT_EQ(x.l.total_attachments, x.l.nr_attachments);
	/* Capacities of 0 count every visible export and its attachments,
	 * though no record is written: the sizes for the next call. */
	ASSERT_EQ(0, count_only(self->fd, &c));
	EXPECT_EQ(0, c.nr_exports);
	EXPECT_EQ(0, c.nr_attachments);
	EXPECT_EQ(x.l.total_exports, c.total_exports);
	EXPECT_EQ(x.l.total_attachments, c.total_attachments);
	EXPECT_LE(1, c.total_attachments);

	/* Revoked: the reason shows, the importer still holds it. */
	ASSERT_EQ(0, pd_revoke(self->fd, PEERDIRECT_REVOKE_EXPORT, 0, id, NULL));
	ASSERT_EQ(0, do_list(self->fd, &x, 0));
	e = find(&x, id);
	ASSERT_NE(NULL, e);
	EXPECT_TRUE(e->flags & PEERDIRECT_EXPORT_INFO_REVOKED);
	EXPECT_EQ(PEERDIRECT_REASON_REVOKE, e->reason);
	EXPECT_EQ(0, x.l.nr_attachments);
	EXPECT_EQ(0, x.l.total_attachments);

	close(imp);
	close(d);
	close(ro);
	/* Gone once released. */
	ASSERT_EQ(0, do_list(self->fd, &x, 0));
	EXPECT_EQ(NULL, find(&x, id));
	EXPECT_EQ(NULL, find(&x, ro_id));
	pd_free(self->fd, h);
}

/*
 * An importer holding the reservation lock (mapping, fencing): the walk
 * does not wait for it; the export is listed BUSY with its attachment
 * count, no attachment records, and the totals still count them.
 */
TEST_F(list, an_export_whose_lock_is_held_is_busy)
{
	static struct listing x;
	struct peerdirect_export_info *e = NULL;
	__u64 id = 0;
	int64_t h = pd_alloc(self->fd, self->len);
	int d, imp, i, status;
	pid_t pid;

	ASSERT_LT(0, h);
	d = pd_export_id(self->fd, h, 0, self->len, PEERDIRECT_EXPORT_RDWR | PEERDIRECT_EXPORT_CLOEXEC, &id);
	ASSERT_LE(0, d);
	imp = pdti_open("peerdirect0");
	ASSERT_LE(0, imp);
	ASSERT_EQ(0, pdti_import(imp, d, pd_pinned_flags(&self->q), 0));
	pid = pdti_fork_holder(imp, 3000);
	ASSERT_LE(0, pid);
	/* Until the child holds it; each LIST returns at once. */
	for (i = 0; i < 200; i++) {
		ASSERT_EQ(0, do_list(self->fd, &x, 1));
		e = find(&x, id);
		ASSERT_NE(NULL, e);
		if (e->flags & PEERDIRECT_EXPORT_INFO_BUSY)
			break;
		usleep(10000);
	}
	ASSERT_TRUE(e->flags & PEERDIRECT_EXPORT_INFO_BUSY) TH_LOG("never BUSY in 2 s");
	EXPECT_EQ(1, e->nr_attachments);
	EXPECT_EQ(0, e->nr_maps);
	for (i = 0; i < (int)x.l.nr_attachments; i++)
		EXPECT_NE(id, x.a[i].export_id);
	EXPECT_LE(1, x.l.total_attachments);
	EXPECT_LT(x.l.nr_attachments, x.l.total_attachments);
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_EQ(0, WEXITSTATUS(status));
	/* Released: the full record again. */
	ASSERT_EQ(0, do_list(self->fd, &x, 1));
	e = find(&x, id);
	ASSERT_NE(NULL, e);
	EXPECT_EQ(0, e->flags & PEERDIRECT_EXPORT_INFO_BUSY);
	EXPECT_EQ(1, e->nr_maps);
	EXPECT_EQ(x.l.total_attachments, x.l.nr_attachments);
	close(imp);
	close(d);
	pd_free(self->fd, h);
}

/* Capacity 0 counts; a short array gets what fits and the total. */
TEST_F(list, totals_tell_the_caller_to_retry)
{
	struct peerdirect_export_info one[2];
	struct peerdirect_list l = {
		.argsz = sizeof(l), .export_size = sizeof(one[0]),
	};
	int64_t h = pd_alloc(self->fd, self->len);
	int d[3], i;

	ASSERT_LT(0, h);
	for (i = 0; i < 3; i++) {
		d[i] = pd_export(self->fd, h, 0, self->q.page_size);
		ASSERT_LE(0, d[i]);
	}
	ASSERT_EQ(0, ioctl(self->fd, PEERDIRECT_IOCTL_LIST, &l));
	EXPECT_EQ(0, l.nr_exports);
	EXPECT_LE(3, l.total_exports);

	memset(one, 0xa5, sizeof(one));
	l.total_exports = 0;
	l.exports = (uintptr_t)one;
	l.nr_exports = 1;
	ASSERT_EQ(0, ioctl(self->fd, PEERDIRECT_IOCTL_LIST, &l));
	EXPECT_EQ(1, l.nr_exports);
	EXPECT_LE(3, l.total_exports);
	EXPECT_NE(0, one[0].export_id);
	EXPECT_EQ(0, one[0].pad);
	/* nothing past the capacity was written */
	EXPECT_EQ(0xa5a5a5a5a5a5a5a5ULL, one[1].export_id);
	for (i = 0; i < 3; i++)
		close(d[i]);
	pd_free(self->fd, h);
}

/* Records bigger than the kernel's get a zeroed tail, as argsz does. */
TEST_F(list, record_size_grows_and_shrinks_like_argsz)
{
	struct {
		struct peerdirect_export_info e;
		__u64 future[3];
	} big[2];
	struct peerdirect_list l = {
		.argsz = sizeof(l), .export_size = sizeof(big[0]),
		.exports = (uintptr_t)big, .nr_exports = 2,
	};
	int64_t h = pd_alloc(self->fd, self->len);
	__u64 id;
	int d;

	ASSERT_LT(0, h);
	d = pd_export_id(self->fd, h, 0, self->len, PEERDIRECT_EXPORT_RDWR, &id);
	ASSERT_LE(0, d);
	memset(big, 0xff, sizeof(big));
	ASSERT_EQ(0, ioctl(self->fd, PEERDIRECT_IOCTL_LIST, &l));
	ASSERT_LE(1, l.nr_exports);
	EXPECT_EQ(0, big[0].future[0]);
	EXPECT_EQ(0, big[0].future[2]);
	EXPECT_NE(0, big[0].e.export_id);
	/* not 8-byte aligned, or below the first published size */
	l.export_size = sizeof(struct peerdirect_export_info) - 8;
	l.total_exports = 0;
	l.nr_exports = 2;
	EXPECT_EQ(-1, ioctl(self->fd, PEERDIRECT_IOCTL_LIST, &l));
	EXPECT_EQ(EINVAL, errno);
	l.export_size = sizeof(struct peerdirect_export_info) + 4;
	EXPECT_EQ(-1, ioctl(self->fd, PEERDIRECT_IOCTL_LIST, &l));
	EXPECT_EQ(EINVAL, errno);
	close(d);
	pd_free(self->fd, h);
}

TEST_F(list, bad_arguments)
{
	struct peerdirect_export_info e[1];
	struct peerdirect_list l;

#define RESET_L() do { memset(&l, 0, sizeof(l)); l.argsz = sizeof(l); \
	l.export_size = sizeof(e[0]); l.exports = (uintptr_t)e; l.nr_exports = 1; } while (0)
	RESET_L();
	l.flags = 0x4;			/* the first unknown flag */
	EXPECT_EQ(-1, ioctl(self->fd, PEERDIRECT_IOCTL_LIST, &l));
	EXPECT_EQ(EINVAL, errno);
	RESET_L();
	l.total_exports = 1;		/* an output on input */
	EXPECT_EQ(-1, ioctl(self->fd, PEERDIRECT_IOCTL_LIST, &l));
	EXPECT_EQ(EINVAL, errno);
	RESET_L();
	l.attachments = (uintptr_t)e;	/* without LIST_ATTACHMENTS */
	EXPECT_EQ(-1, ioctl(self->fd, PEERDIRECT_IOCTL_LIST, &l));
	EXPECT_EQ(EINVAL, errno);
	RESET_L();
	l.flags = PEERDIRECT_LIST_ATTACHMENTS;	/* attach_size 0 */
	EXPECT_EQ(-1, ioctl(self->fd, PEERDIRECT_IOCTL_LIST, &l));
	EXPECT_EQ(EINVAL, errno);
	RESET_L();
	l.argsz = offsetof(struct peerdirect_list, total_attachments);
	EXPECT_EQ(-1, ioctl(self->fd, PEERDIRECT_IOCTL_LIST, &l));
	EXPECT_EQ(EINVAL, errno);
	RESET_L();
	l.exports = 0;
	EXPECT_EQ(-1, ioctl(self->fd, PEERDIRECT_IOCTL_LIST, &l));
	EXPECT_EQ(EFAULT, errno);
	RESET_L();
	l.exports = (uintptr_t)8;
	{
		int64_t h = pd_alloc(self->fd, self->q.page_size);
		int d;

		ASSERT_LT(0, h);
		d = pd_export(self->fd, h, 0, self->q.page_size);
		ASSERT_LE(0, d);
		EXPECT_EQ(-1, ioctl(self->fd, PEERDIRECT_IOCTL_LIST, &l));
		EXPECT_EQ(EFAULT, errno);
		close(d);
		pd_free(self->fd, h);
	}
	/* a larger argsz with zeroes is fine, with a non-zero byte E2BIG */
	{
		struct { struct peerdirect_list l; __u64 more; } big = { .l = {
			.argsz = sizeof(big), .export_size = sizeof(e[0]),
		} };

		EXPECT_EQ(0, ioctl(self->fd, PEERDIRECT_IOCTL_LIST, &big));
		big.l.total_exports = 0;
		big.more = 1;
		EXPECT_EQ(-1, ioctl(self->fd, PEERDIRECT_IOCTL_LIST, &big));
		EXPECT_EQ(E2BIG, errno);
	}
#undef RESET_L
}

/* A dynamic importer is invalidated by a revoke and lets go: REVOCABLE. */
TEST_F(list, a_dynamic_importer_is_revocable)
{
	static struct listing x;
	int64_t h = pd_alloc(self->fd, self->len);
	__u64 id = 0;
	int d, imp;
	__u32 i, mine = 0;

	ASSERT_LT(0, h);
	d = pd_export_id(self->fd, h, 0, self->len, PEERDIRECT_EXPORT_RDWR, &id);
	ASSERT_LE(0, d);
	imp = pdti_open("peerdirect0");
	ASSERT_LE(0, imp);
	ASSERT_EQ(0, pdti_import(imp, d, PDTI_DYNAMIC, 0));
	ASSERT_EQ(0, do_list(self->fd, &x, 1));
	for (i = 0; i < x.l.nr_attachments; i++) {
		if (x.a[i].export_id != id)
			continue;
		mine++;
		EXPECT_TRUE(x.a[i].flags & PEERDIRECT_ATTACH_INFO_DYNAMIC);
		EXPECT_EQ(0, x.a[i].flags & PEERDIRECT_ATTACH_INFO_PINNED);
		EXPECT_TRUE(x.a[i].flags & PEERDIRECT_ATTACH_INFO_REVOCABLE);
	}
	EXPECT_EQ(1, mine);
	close(imp);
	close(d);
	pd_free(self->fd, h);
}

/*
 * Allocation records (uapi 2.2): one per allocation, exported or not, with
 * its size, owner, live exports and creation time; a freed one that an
 * export still holds is FREED (quarantined); gone once nothing holds it.
 */
TEST_F(list, allocation_records)
{
	static struct listing x;
	struct peerdirect_alloc_info *m;
	long long t0 = boottime_ns();
	int64_t bare, exported;
	struct peerdirect_list c;
	int d[2];

	if (!(self->q.features & PEERDIRECT_FEAT_LIST_ALLOCS))
		SKIP(return, "no PEERDIRECT_FEAT_LIST_ALLOCS");
	bare = pd_alloc(self->fd, self->q.page_size);
	ASSERT_LT(0, bare);
	exported = pd_alloc(self->fd, self->len);
	ASSERT_LT(0, exported);
	d[0] = pd_export(self->fd, exported, 0, self->q.page_size);
	ASSERT_LE(0, d[0]);
	d[1] = pd_export(self->fd, exported, 0, self->len);
	ASSERT_LE(0, d[1]);

	ASSERT_EQ(0, do_list_all(self->fd, &x));
	EXPECT_LE(2, x.l.total_allocations);
	EXPECT_EQ(x.l.total_allocations, x.l.nr_allocations);
	m = find_alloc(&x, bare, getpid());
	ASSERT_NE(NULL, m);
	EXPECT_EQ(self->q.page_size, m->size);
	EXPECT_EQ(getuid(), m->uid);
	EXPECT_EQ(0, m->flags);
	EXPECT_EQ(0, m->nr_exports);
	EXPECT_LE(t0, (long long)m->created_ns);
	EXPECT_GE(boottime_ns(), (long long)m->created_ns);
	m = find_alloc(&x, exported, getpid());
	ASSERT_NE(NULL, m);
	EXPECT_EQ(self->len, m->size);
	EXPECT_EQ(2, m->nr_exports);
	EXPECT_EQ(0, m->flags);
	/* The export records are the same as without the flag. */
	EXPECT_LE(2, x.l.total_exports);

	/* Capacity 0 counts them; the sizes for the next call. */
	memset(&c, 0, sizeof(c));
	c.argsz = sizeof(c);
	c.flags = PEERDIRECT_LIST_ALLOCATIONS;
	c.export_size = sizeof(struct peerdirect_export_info);
	c.allocation_size = sizeof(struct peerdirect_alloc_info);
	ASSERT_EQ(0, ioctl(self->fd, PEERDIRECT_IOCTL_LIST, &c));
	EXPECT_EQ(0, c.nr_allocations);
	EXPECT_EQ(x.l.total_allocations, c.total_allocations);

	close(d[0]);
	ASSERT_EQ(0, pd_free(self->fd, exported));
	ASSERT_EQ(0, do_list_all(self->fd, &x));
	m = find_alloc(&x, exported, getpid());
	ASSERT_NE(NULL, m);
	EXPECT_EQ(PEERDIRECT_ALLOC_INFO_FREED, m->flags);
	EXPECT_EQ(1, m->nr_exports);
	close(d[1]);
	ASSERT_EQ(0, pd_free(self->fd, bare));
	ASSERT_EQ(0, do_list_all(self->fd, &x));
	EXPECT_EQ(NULL, find_alloc(&x, exported, getpid()));
	EXPECT_EQ(NULL, find_alloc(&x, bare, getpid()));
}

/*
 * A process that holds device memory without exporting it is listed, by
 * the pid the caller knows it by; the export listing shows nothing of it.
 */
TEST_F(list, a_process_that_only_allocates_is_listed)
{
	int go[2], ready[2], status;
	static struct listing x;
	struct peerdirect_alloc_info *m;
	int64_t ch = 0;
	__u32 i;
	pid_t pid;
	char c = 0;

	if (!(self->q.features & PEERDIRECT_FEAT_LIST_ALLOCS))
		SKIP(return, "no PEERDIRECT_FEAT_LIST_ALLOCS");
	ASSERT_EQ(0, pipe2(go, O_CLOEXEC));
	ASSERT_EQ(0, pipe2(ready, O_CLOEXEC));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		int fd = pd_open(PD_DEV0);

		close(go[1]);
		close(ready[0]);
		ch = fd < 0 ? -1 : pd_alloc(fd, 3 * self->q.page_size);
		if (write(ready[1], &ch, sizeof(ch)) != sizeof(ch))
			_exit(10);
		if (read(go[0], &c, 1) != 1)
			_exit(11);
		_exit(ch > 0 ? 0 : 12);
	}
	close(go[0]);
	close(ready[1]);
	ASSERT_EQ(sizeof(ch), read(ready[0], &ch, sizeof(ch)));
	ASSERT_LT(0, ch);
	ASSERT_EQ(0, do_list_all(self->fd, &x));
	m = find_alloc(&x, ch, pid);
	ASSERT_NE(NULL, m) TH_LOG("pid %d's allocation %lld not listed", pid, (long long)ch);
	EXPECT_EQ(3 * self->q.page_size, m->size);
	EXPECT_EQ(0, m->nr_exports);
	EXPECT_EQ(getuid(), m->uid);
	for (i = 0; i < x.l.nr_exports; i++)
		EXPECT_NE(pid, x.e[i].tgid);
	ASSERT_EQ(1, write(go[1], &c, 1));
	close(go[1]);
	close(ready[0]);
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_EQ(0, WEXITSTATUS(status));
	/* Its file closed: the memory went back with it. */
	ASSERT_EQ(0, do_list_all(self->fd, &x));
	EXPECT_EQ(NULL, find_alloc(&x, ch, pid));
}

/*
 * Without CAP_SYS_ADMIN a process sees its user's allocations only, as
 * with exports: another user sees none of root's, then its own.
 */
TEST_F(list, unprivileged_callers_see_their_users_allocations)
{
	int64_t h = pd_alloc(self->fd, self->q.page_size);
	int status;
	pid_t pid;

	if (!(self->q.features & PEERDIRECT_FEAT_LIST_ALLOCS))
		SKIP(return, "no PEERDIRECT_FEAT_LIST_ALLOCS");
	ASSERT_LT(0, h);
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		static struct listing x;
		int64_t ch;

		if (setresgid(65534, 65534, 65534) || setresuid(65534, 65534, 65534))
			_exit(10);
		if (do_list_all(self->fd, &x) || x.l.total_allocations)
			_exit(11);
		ch = pd_alloc(self->fd, self->q.page_size);
		if (ch <= 0)
			_exit(12);
		if (do_list_all(self->fd, &x) || x.l.total_allocations != 1 ||
		    x.l.nr_allocations != 1)
			_exit(13);
		if (x.m[0].uid != 65534 || x.m[0].tgid != getpid() ||
		    x.m[0].handle != (__u64)ch)
			_exit(14);
		pd_free(self->fd, ch);
		_exit(0);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status));
	pd_free(self->fd, h);
}

/* Allocation records grow and shrink as export records do. */
TEST_F(list, allocation_record_size_grows_like_argsz)
{
	struct {
		struct peerdirect_alloc_info m;
		__u64 future[2];
	} big[2];
	struct peerdirect_list l = {
		.argsz = sizeof(l), .flags = PEERDIRECT_LIST_ALLOCATIONS,
		.export_size = sizeof(struct peerdirect_export_info),
		.allocation_size = sizeof(big[0]), .allocations = (uintptr_t)big,
		.nr_allocations = 2,
	};
	int64_t h = pd_alloc(self->fd, self->q.page_size);

	if (!(self->q.features & PEERDIRECT_FEAT_LIST_ALLOCS))
		SKIP(return, "no PEERDIRECT_FEAT_LIST_ALLOCS");
	ASSERT_LT(0, h);
	memset(big, 0xff, sizeof(big));
	ASSERT_EQ(0, ioctl(self->fd, PEERDIRECT_IOCTL_LIST, &l));
	ASSERT_LE(1, l.nr_allocations);
	EXPECT_EQ(0, big[0].future[0]);
	EXPECT_EQ(0, big[0].future[1]);
	EXPECT_NE(0, big[0].m.size);
	pd_free(self->fd, h);
}

/* Every argument error of LIST_ALLOCATIONS a caller can make. */
TEST_F(list, bad_allocation_arguments)
{
	struct peerdirect_alloc_info m[1];
	struct peerdirect_list l;

	if (!(self->q.features & PEERDIRECT_FEAT_LIST_ALLOCS))
		SKIP(return, "no PEERDIRECT_FEAT_LIST_ALLOCS");
#define RESET_M() do { memset(&l, 0, sizeof(l)); l.argsz = sizeof(l); \
	l.flags = PEERDIRECT_LIST_ALLOCATIONS; \
	l.export_size = sizeof(struct peerdirect_export_info); \
	l.allocation_size = sizeof(m[0]); l.allocations = (uintptr_t)m; \
	l.nr_allocations = 1; } while (0)
#define LIST_FAILS(err) do { \
	EXPECT_EQ(-1, ioctl(self->fd, PEERDIRECT_IOCTL_LIST, &l)); \
	EXPECT_EQ(err, errno); } while (0)
	RESET_M();
	EXPECT_EQ(0, ioctl(self->fd, PEERDIRECT_IOCTL_LIST, &l));
	RESET_M();
	l.allocation_size = 0;
	LIST_FAILS(EINVAL);
	RESET_M();
	l.allocation_size = sizeof(m[0]) - 8;	/* below the first published size */
	LIST_FAILS(EINVAL);
	RESET_M();
	l.allocation_size = sizeof(m[0]) + 4;	/* not 8-byte aligned */
	LIST_FAILS(EINVAL);
	RESET_M();
	l.allocation_size = 8192;		/* beyond PAGE_SIZE */
	LIST_FAILS(EINVAL);
	RESET_M();
	l.total_allocations = 1;		/* an output on input */
	LIST_FAILS(EINVAL);
	RESET_M();
	l.pad = 1;
	LIST_FAILS(EINVAL);
	RESET_M();
	/* the flag with a struct cut before total_allocations: no way to tell
	 * the caller its records were cut */
	l.argsz = offsetof(struct peerdirect_list, total_allocations);
	LIST_FAILS(EINVAL);
	/* Without the flag, each of its fields must be zero. */
	RESET_M();
	l.flags = 0;
	LIST_FAILS(EINVAL);
	RESET_M();
	l.flags = 0;
	l.allocation_size = 0;
	l.nr_allocations = 0;
	LIST_FAILS(EINVAL);			/* the pointer */
	RESET_M();
	l.flags = 0;
	l.allocation_size = 0;
	l.allocations = 0;
	LIST_FAILS(EINVAL);			/* the capacity */
	RESET_M();
	l.flags = 0;
	l.allocations = 0;
	l.nr_allocations = 0;
	LIST_FAILS(EINVAL);			/* the record size */
	/* No array, or one the kernel cannot write. */
	RESET_M();
	l.allocations = 0;
	LIST_FAILS(EFAULT);
	RESET_M();
	l.allocations = (uintptr_t)8;
	{
		int64_t h = pd_alloc(self->fd, self->q.page_size);

		ASSERT_LT(0, h);
		LIST_FAILS(EFAULT);
		pd_free(self->fd, h);
	}
	/* A 2.1 caller's argsz cannot carry the allocation fields. */
	RESET_M();
	l.argsz = offsetof(struct peerdirect_list, allocation_size);
	LIST_FAILS(EINVAL);
#undef LIST_FAILS
#undef RESET_M
}

/*
 * A 2.1 caller (argsz 48) keeps working, and the kernel writes nothing
 * past its argsz.
 */
TEST_F(list, a_21_caller_gets_its_layout)
{
	struct {
		struct peerdirect_list l;
		char canary[32];
	} old;
	size_t n = offsetof(struct peerdirect_list, allocation_size);

	memset(&old, 0xa5, sizeof(old));
	memset(&old.l, 0, n);
	old.l.argsz = n;
	old.l.export_size = sizeof(struct peerdirect_export_info);
	ASSERT_EQ(0, ioctl(self->fd, PEERDIRECT_IOCTL_LIST, &old.l));
	EXPECT_EQ(0xa5a5a5a5U, old.l.allocation_size);
	EXPECT_EQ(0xa5a5a5a5U, old.l.total_allocations);
}

/*
 * Without CAP_SYS_ADMIN a process sees its user's exports only: a child
 * that became another user sees none of root's, then its own.
 */
TEST_F(list, unprivileged_callers_see_their_users_exports)
{
	int64_t h = pd_alloc(self->fd, self->q.page_size);
	int d, status;
	pid_t pid;

	ASSERT_LT(0, h);
	d = pd_export(self->fd, h, 0, self->q.page_size);
	ASSERT_LE(0, d);
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		static struct listing x;
		int64_t ch;
		int cd, rc = 0;
		__u32 i;

		if (setresgid(65534, 65534, 65534) || setresuid(65534, 65534, 65534))
			_exit(10);
		if (do_list(self->fd, &x, 1) || x.l.total_exports || x.l.total_attachments)
			_exit(11);
		ch = pd_alloc(self->fd, self->q.page_size);
		if (ch <= 0)
			_exit(12);
		cd = pd_export(self->fd, ch, 0, self->q.page_size);
		if (cd < 0)
			_exit(13);
		if (do_list(self->fd, &x, 1) || x.l.total_exports != 1 || x.l.nr_exports != 1)
			_exit(14);
		if (x.e[0].uid != 65534 || x.e[0].tgid != getpid())
			_exit(15);
		for (i = 0; i < x.l.nr_exports; i++)
			rc |= x.e[i].uid != 65534;
		close(cd);
		pd_free(self->fd, ch);
		_exit(rc ? 16 : 0);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status));
	close(d);
	pd_free(self->fd, h);
}

/*
 * tgid is the exporter's pid in the caller's pid namespace: a process in a
 * new pid namespace (pid 1 there) sees 0 for an export made outside it,
 * which it has no number for, and its own pid for its own export; the
 * parent, outside, sees the child's export under the pid it knows it by.
 */
TEST_F(list, tgid_is_in_the_callers_pid_namespace)
{
	int64_t h = pd_alloc(self->fd, self->q.page_size);
	int d, status, to_parent[2], to_child[2], pids[2];
	struct peerdirect_export_info *e;
	static struct listing x;
	__u64 id, child_id = 0;
	pid_t pid, inner = 0;
	char c = 0;

	ASSERT_LT(0, h);
	d = pd_export_id(self->fd, h, 0, self->q.page_size, PEERDIRECT_EXPORT_CLOEXEC, &id);
	ASSERT_LE(0, d);
	ASSERT_EQ(0, pipe2(to_parent, O_CLOEXEC));
	ASSERT_EQ(0, pipe2(to_child, O_CLOEXEC));
	ASSERT_EQ(0, pipe2(pids, O_CLOEXEC));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		pid_t g;

		close(to_parent[0]);
		close(to_child[1]);
		close(pids[0]);
		if (unshare(CLONE_NEWPID))
			_exit(errno == EPERM ? 4 : 20);
		g = fork();
		if (g < 0)
			_exit(21);
		if (g == 0) {
			int64_t ch;
			__u64 cid;
			int cd;

			if (getpid() != 1)
				_exit(22);
			if (do_list(self->fd, &x, 0))
				_exit(23);
			e = find(&x, id);
			if (!e)
				_exit(24);
			/* The parent has no pid in this namespace. */
			if (e->tgid != 0)
				_exit(25);
			ch = pd_alloc(self->fd, self->q.page_size);
			if (ch <= 0)
				_exit(26);
			cd = pd_export_id(self->fd, ch, 0, self->q.page_size, 0, &cid);
			if (cd < 0)
				_exit(27);
			if (do_list(self->fd, &x, 0))
				_exit(28);
			e = find(&x, cid);
			if (!e || e->tgid != getpid())
				_exit(29);
			if (write(to_parent[1], &cid, sizeof(cid)) != sizeof(cid))
				_exit(30);
			/* Keep the export until the parent has listed it. */
			if (read(to_child[0], &c, 1) != 1)
				_exit(31);
			close(cd);
			pd_free(self->fd, ch);
			_exit(0);
		}
		/* Its pid in our (the parent's) namespace. */
		if (write(pids[1], &g, sizeof(g)) != sizeof(g))
			_exit(32);
		if (waitpid(g, &status, 0) != g || !WIFEXITED(status))
			_exit(33);
		_exit(WEXITSTATUS(status));
	}
	close(to_parent[1]);
	close(to_child[0]);
	close(pids[1]);
	EXPECT_EQ(sizeof(inner), read(pids[0], &inner, sizeof(inner)));
	EXPECT_EQ(sizeof(child_id), read(to_parent[0], &child_id, sizeof(child_id)));
	if (child_id) {
		ASSERT_EQ(0, do_list(self->fd, &x, 0));
		e = find(&x, child_id);
		ASSERT_NE(NULL, e);
		EXPECT_EQ(inner, e->tgid);
		e = find(&x, id);
		ASSERT_NE(NULL, e);
		EXPECT_EQ(getpid(), e->tgid);
	}
	/* A child that failed is gone: no reader, and a write would be SIGPIPE. */
	if (child_id)
		EXPECT_EQ(1, write(to_child[1], &c, 1));
	close(to_child[1]);
	close(to_parent[0]);
	close(pids[0]);
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status));
	if (WEXITSTATUS(status) == 4)
		SKIP(goto out, "unshare(CLONE_NEWPID) needs CAP_SYS_ADMIN");
	EXPECT_EQ(0, WEXITSTATUS(status));
out:
	close(d);
	pd_free(self->fd, h);
}

/*
 * An exporter that has exited reads as tgid 0: its struct pid outlives it
 * (the export holds it) and keeps its number, which the kernel hands to
 * the next process, so a number would name a stranger.  The child exports,
 * passes the dma-buf over SCM_RIGHTS and is reaped before the listing.
 */
TEST_F(list, an_exited_exporter_reads_as_zero)
{
	int64_t h = pd_alloc(self->fd, self->q.page_size);
	char cbuf[CMSG_SPACE(sizeof(int))] = { 0 };
	struct peerdirect_export_info *e;
	static struct listing x;
	struct msghdr m = { 0 };
	int sv[2], status, d = -1;
	struct cmsghdr *c;
	struct iovec iov;
	__u64 id = 0;
	pid_t pid;

	ASSERT_LT(0, h);
	ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sv));
	iov = (struct iovec) { .iov_base = &id, .iov_len = sizeof(id) };
	m.msg_iov = &iov;
	m.msg_iovlen = 1;
	m.msg_control = cbuf;
	m.msg_controllen = sizeof(cbuf);
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		int cd = pd_export_id(self->fd, h, 0, self->q.page_size, 0, &id);

		if (cd < 0)
			_exit(10);
		c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &cd, sizeof(int));
		_exit(sendmsg(sv[1], &m, 0) == sizeof(id) ? 0 : 11);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status));
	ASSERT_EQ(0, WEXITSTATUS(status));
	ASSERT_EQ(sizeof(id), recvmsg(sv[0], &m, 0));
	c = CMSG_FIRSTHDR(&m);
	ASSERT_NE(NULL, c);
	ASSERT_EQ(SCM_RIGHTS, c->cmsg_type);
	memcpy(&d, CMSG_DATA(c), sizeof(int));
	ASSERT_LE(0, d);
	ASSERT_EQ(0, do_list(self->fd, &x, 0));
	e = find(&x, id);
	ASSERT_NE(NULL, e);
	EXPECT_EQ(0, e->tgid) TH_LOG("export %llu of reaped pid %d lists tgid %d",
				     (unsigned long long)id, pid, e->tgid);
	close(d);
	close(sv[0]);
	close(sv[1]);
	pd_free(self->fd, h);
}

/* Reads /sys/class/misc/peerdirect0/NAME as a number; -1 on error. */
static long long sysfs_num(const char *name)
{
	char path[128], buf[64];
	ssize_t n;
	int f;

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

static int sysfs_str(const char *name, char *buf, size_t len)
{
	char path[128];
	ssize_t n;
	int f;

	snprintf(path, sizeof(path), "/sys/class/misc/peerdirect0/%s", name);
	f = open(path, O_RDONLY | O_CLOEXEC);
	if (f < 0)
		return -errno;
	n = read(f, buf, len - 1);
	close(f);
	if (n < 0)
		return -errno;
	while (n > 0 && buf[n - 1] == '\n')
		n--;
	buf[n] = 0;
	return 0;
}

/*
 * /sys/class/misc/peerdirect0/device: 1 if it names a PCI function
 * (DDDD:BB:DD.F), 0 if there is none, -1 if it names something else.
 */
static int device_link(void)
{
	unsigned int dom, bus, dev, fn;
	char link[256], tail;
	const char *base;
	ssize_t n;

	n = readlink("/sys/class/misc/peerdirect0/device", link, sizeof(link) - 1);
	if (n < 0)
		return errno == ENOENT ? 0 : -1;
	link[n] = 0;
	base = strrchr(link, '/') ? strrchr(link, '/') + 1 : link;
	return sscanf(base, "%x:%x:%x.%x%c", &dom, &bus, &dev, &fn, &tail) == 4 ? 1 : -1;
}

TEST_F(list, sysfs_attributes_match_query_and_counts)
{
	long long allocs, exports, total, revoked, free0;
	char s[64], want[16];
	int64_t h;
	int d;
	__u64 id;

	EXPECT_EQ((long long)self->q.mem_size, sysfs_num("mem_size"));
	EXPECT_EQ((long long)self->q.page_size, sysfs_num("page_size"));
	EXPECT_EQ((long long)self->q.quota, sysfs_num("quota"));
	EXPECT_EQ((long long)self->q.mem_free, sysfs_num("mem_free"));
	EXPECT_EQ((long long)self->q.features, sysfs_num("features"));
	EXPECT_EQ(self->q.max_exports, sysfs_num("max_exports"));
	EXPECT_EQ(self->q.max_events, sysfs_num("max_events"));
	EXPECT_EQ(!!(self->q.features & PEERDIRECT_FEAT_P2PDMA), sysfs_num("p2pdma"));
	ASSERT_EQ(0, sysfs_str("backend", s, sizeof(s)));
	EXPECT_STREQ(self->q.backend == PEERDIRECT_BACKEND_SIM ? "sim" : "pci-bar", s);
	EXPECT_EQ(self->q.backend == PEERDIRECT_BACKEND_SIM, sysfs_num("simulated"));
	/* A BAR device's PCI function, for stable names; none for sim. */
	EXPECT_EQ(self->q.backend == PEERDIRECT_BACKEND_SIM ? 0 : 1, device_link());
	ASSERT_EQ(0, sysfs_str("abi_version", s, sizeof(s)));
	snprintf(want, sizeof(want), "%u.%u", PEERDIRECT_ABI_MAJOR, PEERDIRECT_ABI_MINOR);
	EXPECT_STREQ(want, s);
	ASSERT_EQ(0, sysfs_str("state", s, sizeof(s)));
	EXPECT_STREQ("live", s);
	EXPECT_LE(0, sysfs_num("revoke_timeouts"));
	EXPECT_LE(0, sysfs_num("quarantined"));
	EXPECT_LE(0, sysfs_num("importer_mappings"));

	allocs = sysfs_num("nr_allocs");
	exports = sysfs_num("nr_exports");
	total = sysfs_num("exports_total");
	revoked = sysfs_num("revoked/revoke");
	free0 = sysfs_num("mem_free");
	EXPECT_LE(0, sysfs_num("revoked/free"));
	EXPECT_LE(0, sysfs_num("revoked/reset"));
	EXPECT_LE(0, sysfs_num("revoked/admin"));
	EXPECT_LE(0, sysfs_num("revoked/unplug"));

	h = pd_alloc(self->fd, self->q.page_size);
	ASSERT_LT(0, h);
	d = pd_export_id(self->fd, h, 0, self->q.page_size, PEERDIRECT_EXPORT_RDWR, &id);
	ASSERT_LE(0, d);
	EXPECT_EQ(allocs + 1, sysfs_num("nr_allocs"));
	EXPECT_EQ(exports + 1, sysfs_num("nr_exports"));
	EXPECT_EQ(total + 1, sysfs_num("exports_total"));
	EXPECT_EQ(free0 - (long long)self->q.page_size, sysfs_num("mem_free"));
	ASSERT_EQ(0, pd_revoke(self->fd, PEERDIRECT_REVOKE_EXPORT, 0, id, NULL));
	EXPECT_EQ(revoked + 1, sysfs_num("revoked/revoke"));
	close(d);
	EXPECT_EQ(exports, sysfs_num("nr_exports"));
	pd_free(self->fd, h);
	EXPECT_EQ(allocs, sysfs_num("nr_allocs"));
	EXPECT_EQ(free0, sysfs_num("mem_free"));
}

TEST_HARNESS_MAIN
