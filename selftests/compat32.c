// SPDX-License-Identifier: GPL-2.0
/*
 * The 32-bit compat path: the uapi and events as a 32-bit (i386) process
 * reaches them, through the ia32 syscall entry (int $0x80) with pointers
 * below 4 GiB, so the kernel takes its compat ioctl path
 * (compat_ptr_ioctl) exactly as for a binary built with -m32, without an
 * i386 toolchain.  The layout half is checked at build time: every 64-bit
 * field sits at a multiple of 8 and every struct's size is a multiple of
 * 8, which is what makes the i386 layout (4-byte aligned u64) the same.
 * Skips where the kernel has no ia32 emulation (ENOSYS).
 */
#define _GNU_SOURCE
#include <stddef.h>
#include <sys/wait.h>
#include "kselftest_harness.h"
#include "pd_test.h"

#define U64_AT(type, field) \
	_Static_assert(offsetof(struct type, field) % 8 == 0, #type "." #field)
#define SIZE8(type) _Static_assert(sizeof(struct type) % 8 == 0, #type " size")

U64_AT(peerdirect_query, features);
U64_AT(peerdirect_query, mem_size);
U64_AT(peerdirect_query, mem_free);
U64_AT(peerdirect_query, page_size);
U64_AT(peerdirect_query, quota);
U64_AT(peerdirect_query, quota_used);
U64_AT(peerdirect_query, reserved);
SIZE8(peerdirect_query);
U64_AT(peerdirect_alloc, size);
U64_AT(peerdirect_alloc, handle);
U64_AT(peerdirect_alloc, alloc_size);
SIZE8(peerdirect_alloc);
U64_AT(peerdirect_free, handle);
SIZE8(peerdirect_free);
U64_AT(peerdirect_export, handle);
U64_AT(peerdirect_export, offset);
U64_AT(peerdirect_export, length);
U64_AT(peerdirect_export, export_id);
U64_AT(peerdirect_export, inode);
SIZE8(peerdirect_export);
U64_AT(peerdirect_revoke, handle);
U64_AT(peerdirect_revoke, export_id);
SIZE8(peerdirect_revoke);
SIZE8(peerdirect_reset);
U64_AT(peerdirect_event, seq);
U64_AT(peerdirect_event, export_id);
U64_AT(peerdirect_event, handle);
U64_AT(peerdirect_event, inode);
U64_AT(peerdirect_event, offset);
U64_AT(peerdirect_event, length);
U64_AT(peerdirect_event, cookie);
SIZE8(peerdirect_event);
U64_AT(peerdirect_subscribe, cookie);
U64_AT(peerdirect_subscribe, export_id);
U64_AT(peerdirect_subscribe, inode);
SIZE8(peerdirect_subscribe);
/* __aligned_u64: the same layout whatever the compiler's u64 alignment. */
_Static_assert(_Alignof(__aligned_u64) == 8, "__aligned_u64");

#define NR32_READ	3
#define NR32_IOCTL	54

/* An i386 system call from this 64-bit process: the kernel's compat entry. */
static long sys32(long nr, long a, long b, long c)
{
	long ret;

	asm volatile("int $0x80"
		     : "=a"(ret)
		     : "a"(nr), "b"(a), "c"(b), "d"(c)
		     : "memory", "r8", "r9", "r10", "r11");
	return ret;
}

static long ioctl32(int fd, unsigned long cmd, void *arg)
{
	return sys32(NR32_IOCTL, fd, (long)cmd, (long)(uintptr_t)arg);
}

FIXTURE(c32) {
	int fd;
	void *low;	/* a page below 4 GiB for arguments */
	bool ia32;	/* 6.1's harness runs the test after a SKIP in setup */
};

/*
 * Whether int $0x80 works here: without ia32 emulation it is a SIGSEGV,
 * which the kernel logs as a trap (and the VM's log check counts as a
 * problem), so a kernel built without it is recognised first by the sysctl
 * only ia32 emulation registers.
 */
static int have_ia32(void)
{
	int status;
	pid_t pid;

	if (access("/proc/sys/abi/vsyscall32", F_OK))
		return 0;
	pid = fork();

	if (!pid)
		_exit(sys32(20, 0, 0, 0) > 0 ? 0 : 1);	/* getpid */
	if (pid < 0 || waitpid(pid, &status, 0) != pid)
		return 0;
	return WIFEXITED(status) && !WEXITSTATUS(status);
}

FIXTURE_SETUP(c32)
{
	struct peerdirect_query *q;

	self->fd = pd_open(PD_DEV0);
	ASSERT_LE(0, self->fd);
	if (!have_ia32())
		SKIP(return, "no ia32 emulation in this kernel");
	self->low = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_32BIT, -1, 0);
	ASSERT_NE(MAP_FAILED, self->low);
	ASSERT_GT(1ULL << 32, (unsigned long long)(uintptr_t)self->low);
	q = self->low;
	memset(q, 0, sizeof(*q));
	q->argsz = sizeof(*q);
	if (ioctl32(self->fd, PEERDIRECT_IOCTL_QUERY, q) == -ENOSYS)
		SKIP(return, "no ia32 emulation in this kernel");
	self->ia32 = true;
}

FIXTURE_TEARDOWN(c32)
{
	if (self->low && self->low != MAP_FAILED)
		munmap(self->low, 4096);
	close(self->fd);
}

/* QUERY, ALLOC, EXPORT, SYNC, REVOKE and FREE through the compat entry. */
TEST_F(c32, uapi_through_the_32bit_entry)
{
	struct peerdirect_query *q = self->low, q64;
	struct peerdirect_alloc *a = self->low;
	struct peerdirect_export *e = self->low;
	struct peerdirect_revoke *r = self->low;
	struct peerdirect_free *f = self->low;
	struct dma_buf_sync *s = self->low;
	uint64_t handle, id;
	int d;

	if (!self->ia32)
		return;
	ASSERT_EQ(0, pd_query(self->fd, &q64));
	memset(q, 0, sizeof(*q));
	q->argsz = sizeof(*q);
	ASSERT_EQ(0, ioctl32(self->fd, PEERDIRECT_IOCTL_QUERY, q));
	EXPECT_EQ(PEERDIRECT_ABI_MAJOR, q->abi_major);
	EXPECT_EQ(q64.mem_size, q->mem_size);
	EXPECT_EQ(q64.page_size, q->page_size);
	EXPECT_EQ(q64.features, q->features);
	/* a 32-bit caller's argsz is checked the same way */
	q->argsz = 8;
	EXPECT_EQ(-EINVAL, ioctl32(self->fd, PEERDIRECT_IOCTL_QUERY, q));

	memset(a, 0, sizeof(*a));
	a->argsz = sizeof(*a);
	a->size = q64.page_size;
	ASSERT_EQ(0, ioctl32(self->fd, PEERDIRECT_IOCTL_ALLOC, a));
	EXPECT_EQ(q64.page_size, a->alloc_size);
	handle = a->handle;

	memset(e, 0, sizeof(*e));
	e->argsz = sizeof(*e);
	e->flags = PEERDIRECT_EXPORT_RDWR | PEERDIRECT_EXPORT_CLOEXEC;
	e->handle = handle;
	e->length = q64.page_size;
	ASSERT_EQ(0, ioctl32(self->fd, PEERDIRECT_IOCTL_EXPORT, e));
	d = e->fd;
	id = e->export_id;
	ASSERT_LE(0, d);
	EXPECT_NE(0, id);

	s->flags = DMA_BUF_SYNC_START | DMA_BUF_SYNC_RW;
	EXPECT_EQ(0, ioctl32(d, DMA_BUF_IOCTL_SYNC, s));
	s->flags = DMA_BUF_SYNC_END | DMA_BUF_SYNC_RW;
	EXPECT_EQ(0, ioctl32(d, DMA_BUF_IOCTL_SYNC, s));

	memset(r, 0, sizeof(*r));
	r->argsz = sizeof(*r);
	r->flags = PEERDIRECT_REVOKE_EXPORT;
	r->export_id = id;
	ASSERT_EQ(0, ioctl32(self->fd, PEERDIRECT_IOCTL_REVOKE, r));
	EXPECT_EQ(1, r->revoked);
	s->flags = DMA_BUF_SYNC_START | DMA_BUF_SYNC_READ;
	EXPECT_EQ(-ENODEV, ioctl32(d, DMA_BUF_IOCTL_SYNC, s));

	memset(f, 0, sizeof(*f));
	f->argsz = sizeof(*f);
	f->handle = handle;
	EXPECT_EQ(0, ioctl32(self->fd, PEERDIRECT_IOCTL_FREE, f));
	EXPECT_EQ(-ENOENT, ioctl32(self->fd, PEERDIRECT_IOCTL_FREE, f));
	close(d);
}

/* Event records read by a 32-bit reader are the same records. */
TEST_F(c32, events_through_the_32bit_entry)
{
	struct peerdirect_event *ev = self->low;
	struct peerdirect_query q;
	__u64 id = 0;
	int64_t h;
	long n;
	int d;

	if (!self->ia32)
		return;
	ASSERT_EQ(0, pd_query(self->fd, &q));
	h = pd_alloc(self->fd, q.page_size);
	ASSERT_LT(0, h);
	d = pd_export_id(self->fd, h, 0, q.page_size, PEERDIRECT_EXPORT_RDWR, &id);
	ASSERT_LE(0, d);
	ASSERT_EQ(0, pd_revoke(self->fd, PEERDIRECT_REVOKE_EXPORT, 0, id, NULL));
	memset(ev, 0, 2 * sizeof(*ev));
	EXPECT_EQ(-EINVAL, sys32(NR32_READ, self->fd, (long)(uintptr_t)ev, sizeof(*ev) - 1));
	n = sys32(NR32_READ, self->fd, (long)(uintptr_t)ev, 2 * sizeof(*ev));
	ASSERT_EQ((long)sizeof(*ev), n);
	EXPECT_EQ(PEERDIRECT_EVENT_REVOKE, ev->hdr.type);
	EXPECT_EQ(sizeof(*ev), ev->hdr.length);
	EXPECT_EQ(PEERDIRECT_REASON_REVOKE, ev->reason);
	EXPECT_EQ(1, ev->seq);
	EXPECT_EQ(id, ev->export_id);
	EXPECT_EQ((__u64)h, ev->handle);
	EXPECT_EQ(q.page_size, ev->length);
	close(d);
	EXPECT_EQ(0, pd_free(self->fd, h));
}

TEST_HARNESS_MAIN
