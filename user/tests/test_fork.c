// SPDX-License-Identifier: MIT
/*
 * fork() without exec (PyTorch's DataLoader workers): the child gets none
 * of the library's fds -- the device file, whose events it would steal,
 * and the dups of dma-bufs, which would keep exported memory alive -- nor
 * the dma-buf mappings; objects made before the fork refuse every call
 * with -ECHILD, and dropping them in the child touches nothing shared.  A
 * "device" is a socketpair; memfds stand in for dma-bufs.
 */
#include <fcntl.h>
#include <linux/peerdirect.h>
#include <sys/wait.h>

#include "kselftest_harness.h"
#include "loopback.h"
#include "device.h"

FIXTURE(frk) {
	struct pd_fabric *fab;
	uint64_t me;
	int sock[2], memfd;
	struct pd_device *dev;
};

FIXTURE_SETUP(frk)
{
	struct pd_fabric_attr attr;

	pd_fabric_attr_init(&attr);
	ASSERT_EQ(0, open_loopback(&attr, &self->fab, &self->me)) TH_LOG("%s", pd_last_error());
	ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, self->sock));
	ASSERT_EQ(0, pd_device_wrap_fd(self->sock[0], 3, &self->dev));
	self->memfd = memfd_of(1 << 20, 9);
	ASSERT_LE(0, self->memfd);
	ASSERT_EQ(0, pd_device_track_export(self->dev, self->memfd, 100));
	ASSERT_EQ(0, pd_fabric_attach_device(self->fab, self->dev));
}

FIXTURE_TEARDOWN(frk)
{
	pd_fabric_close(self->fab);
	pd_device_close(self->dev);
	close(self->sock[1]);
	close(self->memfd);
}

/* What the kernel writes to the owner's device file. */
static int send_event_for_test(int sock, uint64_t export_id)
{
	struct peerdirect_event ev = {
		.hdr = { .type = PEERDIRECT_EVENT_REVOKE, .length = sizeof(ev) },
		.reason = PEERDIRECT_REASON_FREE, .seq = 1, .export_id = export_id,
	};

	return send(sock, &ev, sizeof(ev), 0) == sizeof(ev) ? 0 : -errno;
}

static bool fd_open(int fd)
{
	return fd >= 0 && fcntl(fd, F_GETFD) >= 0;
}

/* Bits of the child's exit status: each names a failed check. */
enum {
	CHILD_DEVICE_FD = 1, CHILD_POLL_FD = 2, CHILD_DUP_FD = 4, CHILD_HANDLE_FD = 8,
	CHILD_MAPPING = 16, CHILD_CALLS = 32, CHILD_NEW_FABRIC = 64,
};

TEST_F(frk, a_child_gets_no_library_fd_and_refuses_old_objects)
{
	int poll_fd = pd_device_fd(self->dev), dup_fd, handle_fd, status;
	struct pd_event ev[2];
	struct pd_dmabuf *b;
	struct pd_mr *m, *h;
	struct pd_req *rq, *rq2;
	unsigned char *map;
	pid_t pid;

	ASSERT_EQ(0, pd_mr_reg_dmabuf(self->fab, self->memfd, 0, 4096, 0, &m)) TH_LOG("%s", pd_last_error());
	ASSERT_EQ(0, pd_dmabuf_import(self->fab, self->memfd, &b));
	ASSERT_EQ(0, pd_mr_reg_imported(b, 8192, 4096, 0, &h));
	dup_fd = m->reg->fd;
	handle_fd = h->reg->fd;
	map = pd_mr_cpu_ptr(m);
	ASSERT_TRUE(fd_open(dup_fd));
	ASSERT_NE(NULL, map);
	/* a receive pending across the fork */
	ASSERT_EQ(0, pd_trecv(self->fab, m, 0, 4096, self->me, 7, &rq)) TH_LOG("%s", pd_last_error());
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		int bad = 0;
		struct pd_fabric_attr attr;
		struct pd_fabric *fresh;
		uint64_t me;

		if (fd_open(self->sock[0]))
			bad |= CHILD_DEVICE_FD;
		if (fd_open(poll_fd))
			bad |= CHILD_POLL_FD;
		if (fd_open(dup_fd))
			bad |= CHILD_DUP_FD;
		if (fd_open(handle_fd))
			bad |= CHILD_HANDLE_FD;
		/* the mapping is not inherited: mincore fails on it */
		if (!mincore((void *)((uintptr_t)map & ~4095UL), 4096, (unsigned char[1]){ 0 }))
			bad |= CHILD_MAPPING;
		if (pd_device_read_events(self->dev, ev, 2, 0) != -ECHILD ||
		    pd_mr_reg_dmabuf(self->fab, self->memfd, 0, 4096, 0, &m) != -ECHILD ||
		    pd_mr_reg_imported(b, 0, 4096, 0, &h) != -ECHILD ||
		    pd_fabric_poll_events(self->fab) != -ECHILD ||
		    pd_tsend(self->fab, m, 0, 4096, self->me, 7, &rq2) != -ECHILD ||
		    pd_test(rq, NULL) != -ECHILD || pd_progress(self->fab) != -ECHILD ||
		    !strstr(pd_last_error(), "fork"))
			bad |= CHILD_CALLS;
		/* dropping them is harmless; a fabric of its own works */
		pd_req_free(rq);
		pd_mr_dereg(m);
		pd_mr_dereg(h);
		pd_dmabuf_release(b);
		pd_device_close(self->dev);
		pd_fabric_close(self->fab);
		pd_fabric_attr_init(&attr);
		if (open_loopback(&attr, &fresh, &me))
			bad |= CHILD_NEW_FABRIC;
		else
			pd_fabric_close(fresh);
		_exit(bad);
	}
	/* Meanwhile the parent's events stay the parent's. */
	ASSERT_EQ(0, send_event_for_test(self->sock[1], 100));
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status)) TH_LOG("child's failed checks: 0x%x", WEXITSTATUS(status));
	ASSERT_EQ(1, pd_device_read_events(self->dev, ev, 2, 1000)) TH_LOG("%s", pd_last_error());
	EXPECT_EQ(100, ev[0].export_id);
	EXPECT_TRUE(fd_open(dup_fd)) TH_LOG("the child's close reached the parent");
	EXPECT_EQ(0, map[0] - pattern(0, 9));
	/* the child's free cancelled nothing of the parent's */
	EXPECT_EQ(0, pd_test(rq, NULL)) TH_LOG("%s", pd_last_error());
	pd_req_free(rq);
	pd_mr_dereg(h);
	pd_mr_dereg(m);
	pd_dmabuf_release(b);
}

TEST_HARNESS_MAIN
