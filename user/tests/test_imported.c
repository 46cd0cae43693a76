// SPDX-License-Identifier: MIT
/*
 * Imported dma-buf handles: a cached registration through one makes no
 * system call, revocation still reaches it, and it checks what
 * pd_mr_reg_dmabuf checks.  Memfds stand in for dma-bufs; a "device" is a
 * socketpair the test writes kernel event records into.
 */
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/peerdirect.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <ucontext.h>

#include "kselftest_harness.h"
#include "loopback.h"
#include "device.h"

#define LEN (1 << 20)

FIXTURE(imp) {
	struct pd_fabric *fab;
	uint64_t me;
	int fd;
};

FIXTURE_SETUP(imp)
{
	struct pd_fabric_attr attr;

	pd_fabric_attr_init(&attr);
	ASSERT_EQ(0, open_loopback(&attr, &self->fab, &self->me)) TH_LOG("%s", pd_last_error());
	self->fd = memfd_of(LEN, 5);
	ASSERT_LE(0, self->fd);
}

FIXTURE_TEARDOWN(imp)
{
	close(self->fd);
	pd_fabric_close(self->fab);
}

#ifdef __x86_64__
/*
 * Every system call of the thread is trapped, counted and answered ENOSYS,
 * except the ones the allocator and an uncontended mutex may make: those
 * are not the library's work.
 */
static volatile int trapped, trapped_nr;

static void on_sigsys(int sig, siginfo_t *si, void *ctx)
{
	(void)sig;
	trapped++;
	trapped_nr = si->si_syscall;
	((ucontext_t *)ctx)->uc_mcontext.gregs[REG_RAX] = -ENOSYS;
}

static int trap_syscalls(void)
{
	static const int allowed[] = {
		__NR_rt_sigreturn, __NR_exit, __NR_exit_group, __NR_futex,
		__NR_mmap, __NR_munmap, __NR_madvise, __NR_brk, __NR_mprotect,
	};
	struct sock_filter f[2 + 2 * 9 + 1];
	struct sock_fprog prog = { .filter = f };
	struct sigaction sa = { .sa_sigaction = on_sigsys, .sa_flags = SA_SIGINFO };
	unsigned int i, n = 0;

	f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
					      offsetof(struct seccomp_data, nr));
	for (i = 0; i < 9; i++) {
		f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K,
						      (unsigned int)allowed[i], 0, 1);
		f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
	}
	f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP);
	prog.len = (unsigned short)n;
	if (sigaction(SIGSYS, &sa, NULL))
		return -errno;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		return -errno;
	return syscall(__NR_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) ? -errno : 0;
}

struct hits {
	struct pd_fabric *fab;
	struct pd_dmabuf *buf;
	int fd;			/* >= 0: go through pd_mr_reg_dmabuf instead */
	int ret, errors, syscalls, nr;
};

/* 100 hits on ranges registered before, in a thread whose syscalls trap. */
static void *hit_thread(void *p)
{
	struct hits *h = p;
	struct pd_mr *mr;
	int i;

	h->ret = trap_syscalls();
	if (h->ret)
		return NULL;
	for (i = 0; i < 100; i++) {
		uint64_t off = (uint64_t)(i % 16) * 4096;
		int ret = h->fd >= 0 ? pd_mr_reg_dmabuf(h->fab, h->fd, off, 4096, 0, &mr) :
			  pd_mr_reg_imported(h->buf, off, 4096, 0, &mr);

		if (ret)
			h->errors++;
		else
			pd_mr_dereg(mr);
	}
	h->syscalls = trapped;
	h->nr = trapped_nr;
	return NULL;
}

/* Imports fd and registers the 16 ranges hit_thread hits, so that each
 * of its hits finds a cached entry. */
static int import_warm(struct pd_fabric *fab, int fd, struct pd_dmabuf **buf)
{
	struct pd_mr *mr;
	int i, ret = pd_dmabuf_import(fab, fd, buf);

	for (i = 0; !ret && i < 16; i++) {
		ret = pd_mr_reg_imported(*buf, (uint64_t)i * 4096, 4096, 0, &mr);
		if (!ret)
			pd_mr_dereg(mr);
	}
	return ret;
}

/* hit_thread in a thread of its own, its seccomp filter with it; counting
 * from 0 (an earlier thread's exit makes trapped calls of its own). */
static void run_trapped(struct hits *h)
{
	pthread_t t;

	trapped = 0;
	if (pthread_create(&t, NULL, hit_thread, h)) {
		h->ret = -EAGAIN;
		return;
	}
	pthread_join(t, NULL);
}

TEST_F(imp, cached_registration_makes_no_system_call)
{
	struct hits by_handle = { .fab = self->fab, .fd = -1 }, by_fd = by_handle;
	struct pd_dmabuf *buf;

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
	/* Their runtimes make system calls of their own on our thread; the
	 * plain build checks the library. */
	SKIP(return, "under a sanitizer");
#endif
	ASSERT_EQ(0, import_warm(self->fab, self->fd, &buf)) TH_LOG("%s", pd_last_error());
	by_handle.buf = buf;
	run_trapped(&by_handle);
	if (by_handle.ret)
		SKIP(goto out, "seccomp unavailable: %s", strerror(-by_handle.ret));
	EXPECT_EQ(0, by_handle.errors);
	EXPECT_EQ(0, by_handle.syscalls) TH_LOG("system call %d on a cached hit", by_handle.nr);
	/* The same hits by fd cannot do without fstat: the trap sees it. */
	by_fd.fd = self->fd;
	run_trapped(&by_fd);
	EXPECT_LT(0, by_fd.syscalls);
out:
	pd_dmabuf_release(buf);
}

/*
 * A dma-buf no attached device can watch (a GPU driver's, udmabuf: here a
 * memfd, which a socketpair "device" cannot subscribe to) keeps the
 * syscall-free hit once the devices said so, and each hit counts once.
 * Attaching another device asks again, once.
 */
TEST_F(imp, a_foreign_dmabuf_hit_stays_syscall_free_with_a_device_attached)
{
	struct hits by_handle = { .fab = self->fab, .fd = -1 };
	struct pd_cache_stats before, after;
	struct pd_device *dev, *dev2;
	struct pd_dmabuf *buf;
	int sv[2], sv2[2];
	struct pd_mr *mr;

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
	SKIP(return, "under a sanitizer");
#endif
	ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv));
	ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv2));
	ASSERT_EQ(0, pd_device_wrap_fd(sv[0], 4, &dev));
	ASSERT_EQ(0, pd_device_wrap_fd(sv2[0], 5, &dev2));
	ASSERT_EQ(0, pd_fabric_attach_device(self->fab, dev));
	ASSERT_EQ(0, import_warm(self->fab, self->fd, &buf)) TH_LOG("%s", pd_last_error());
	ASSERT_EQ(0, pd_fabric_cache_stats(self->fab, &before));
	by_handle.buf = buf;
	run_trapped(&by_handle);
	if (by_handle.ret)
		SKIP(goto out, "seccomp unavailable: %s", strerror(-by_handle.ret));
	ASSERT_EQ(0, pd_fabric_cache_stats(self->fab, &after));
	EXPECT_EQ(0, by_handle.errors);
	EXPECT_EQ(0, by_handle.syscalls) TH_LOG("system call %d on a hit of an unwatchable dma-buf", by_handle.nr);
	EXPECT_EQ(100, after.lookups - before.lookups);
	EXPECT_EQ(100, after.hits - before.hits);
	EXPECT_EQ(0, after.misses - before.misses);
	/* Another device may watch it: asked once, counted once. */
	ASSERT_EQ(0, pd_fabric_attach_device(self->fab, dev2));
	ASSERT_EQ(0, pd_fabric_cache_stats(self->fab, &before));
	ASSERT_EQ(0, pd_mr_reg_imported(buf, 0, 4096, 0, &mr)) TH_LOG("%s", pd_last_error());
	pd_mr_dereg(mr);
	ASSERT_EQ(0, pd_fabric_cache_stats(self->fab, &after));
	EXPECT_EQ(1, after.lookups - before.lookups);
	run_trapped(&by_handle);
	EXPECT_EQ(0, by_handle.syscalls) TH_LOG("system call %d after the re-check", by_handle.nr);
out:
	pd_dmabuf_release(buf);
	pd_device_close(dev2);
	pd_device_close(dev);
	close(sv[1]);
	close(sv2[1]);
}

/* The device's own export, watched by it: the other kind P3 speaks of. */
TEST_F(imp, a_watched_export_hit_makes_no_system_call)
{
	struct hits by_handle = { .fab = self->fab, .fd = -1 };
	struct pd_device *dev;
	struct pd_dmabuf *buf;
	int sv[2];

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
	SKIP(return, "under a sanitizer");
#endif
	ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv));
	ASSERT_EQ(0, pd_device_wrap_fd(sv[0], 4, &dev));
	ASSERT_EQ(0, pd_device_track_export(dev, self->fd, 40));
	ASSERT_EQ(0, pd_fabric_attach_device(self->fab, dev));
	ASSERT_EQ(0, import_warm(self->fab, self->fd, &buf)) TH_LOG("%s", pd_last_error());
	by_handle.buf = buf;
	run_trapped(&by_handle);
	if (by_handle.ret)
		SKIP(goto out, "seccomp unavailable: %s", strerror(-by_handle.ret));
	EXPECT_EQ(0, by_handle.errors);
	EXPECT_EQ(0, by_handle.syscalls) TH_LOG("system call %d on a watched hit", by_handle.nr);
out:
	pd_dmabuf_release(buf);
	pd_device_close(dev);
	close(sv[1]);
}
#endif

/* One page sent to the fabric itself: 0, or the post's error. */
static int usable(struct pd_fabric *fab, uint64_t me, struct pd_mr *mr)
{
	static char page[4096] __attribute__((aligned(4096)));
	struct pd_req *s = NULL, *r = NULL;
	struct pd_mr *h;
	int ret = pd_mr_reg_host(fab, page, sizeof(page), 0, &h);

	if (ret)
		return ret;
	ret = pd_trecv(fab, h, 0, 4096, me, 31, &r) ?: pd_tsend(fab, mr, 0, 4096, me, 31, &s) ?:
	      pd_wait(s, WAIT_MS, NULL) ?: pd_wait(r, WAIT_MS, NULL);
	pd_req_free(s);
	pd_req_free(r);
	pd_mr_dereg(h);
	return ret;
}

TEST_F(imp, revocation_reaches_imported_registrations)
{
	struct peerdirect_event ev = {
		.hdr = { PEERDIRECT_EVENT_REVOKE, sizeof(ev) }, .reason = PEERDIRECT_REASON_REVOKE, .seq = 1, .export_id = 40,
	};
	struct pd_device *dev;
	struct pd_dmabuf *buf;
	struct pd_mr *mr, *again;
	int sv[2];

	ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv));
	ASSERT_EQ(0, pd_device_wrap_fd(sv[0], 4, &dev));
	ASSERT_EQ(0, pd_device_track_export(dev, self->fd, 40));
	ASSERT_EQ(0, pd_fabric_attach_device(self->fab, dev));
	ASSERT_EQ(0, pd_dmabuf_import(self->fab, self->fd, &buf));
	ASSERT_EQ(0, pd_mr_reg_imported(buf, 0, 4096, 0, &mr)) TH_LOG("%s", pd_last_error());
	EXPECT_EQ(0, usable(self->fab, self->me, mr)) TH_LOG("%s", pd_last_error());
	ASSERT_EQ(sizeof(ev), send(sv[1], &ev, sizeof(ev), 0));
	/* not polled: the transfer drains the event itself */
	EXPECT_EQ(-ENODEV, usable(self->fab, self->me, mr));
	EXPECT_NE(NULL, strstr(pd_last_error(), "revoked")) TH_LOG("%s", pd_last_error());
	/* the entry left the cache: the next registration misses and is refused */
	EXPECT_EQ(-ENODEV, pd_mr_reg_imported(buf, 0, 4096, 0, &again));
	pd_mr_dereg(mr);
	pd_dmabuf_release(buf);
	pd_device_close(dev);
	close(sv[1]);
}

/* The handle keeps the dma-buf: the caller's fd may go.  Its range and
 * access are checked as pd_mr_reg_dmabuf checks them. */
TEST_F(imp, handle_checks_and_outlives_the_callers_fd)
{
	char path[64];
	struct pd_dmabuf *buf, *ro;
	struct pd_mr *mr;
	int fd;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", self->fd);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, pd_dmabuf_import(self->fab, self->fd, &buf));
	ASSERT_EQ(0, pd_dmabuf_import(self->fab, fd, &ro));
	close(fd);
	close(self->fd);
	self->fd = memfd_of(4096, 1);	/* takes the old number */
	ASSERT_EQ(0, pd_mr_reg_imported(buf, LEN - 8192, 8192, 0, &mr)) TH_LOG("%s", pd_last_error());
	/* the bytes of the original memfd, not of the fd now under that number */
	EXPECT_EQ(pattern(LEN - 1, 5), ((unsigned char *)pd_mr_cpu_ptr(mr))[8191]);
	pd_mr_dereg(mr);
	EXPECT_EQ(-EINVAL, pd_mr_reg_imported(buf, LEN - 4096, 8192, 0, &mr));
	EXPECT_NE(NULL, strstr(pd_last_error(), "past the end")) TH_LOG("%s", pd_last_error());
	EXPECT_EQ(-EACCES, pd_mr_reg_imported(ro, 0, 4096, PD_ACCESS_RECV, &mr));
	ASSERT_EQ(0, pd_mr_reg_imported(ro, 0, 4096, PD_ACCESS_SEND, &mr)) TH_LOG("%s", pd_last_error());
	pd_mr_dereg(mr);
	EXPECT_EQ(-EBADF, pd_dmabuf_import(self->fab, -1, &buf));
	pd_dmabuf_release(ro);
	pd_dmabuf_release(buf);
}

TEST_HARNESS_MAIN
