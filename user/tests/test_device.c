// SPDX-License-Identifier: MIT
/*
 * The library on the module's own dma-bufs (/dev/peerdirect0): what the
 * memfd stand-in of the other tests cannot show.  A dma-buf is no regular
 * file, so its length comes from lseek(SEEK_END); a read-only export is a
 * read-only fd; revocation arrives as the device's events, and reaches a
 * process that holds only the dma-buf fd through the kernel's SUBSCRIBE.
 * Skipped where the module is not loaded (the host); the shim part of
 * `make check` runs it in the VM of every kernel tier.
 */
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include "kselftest_harness.h"
#include "loopback.h"

FIXTURE(dev) {
	struct pd_device *dev;
	struct pd_fabric *fab;
	uint64_t me, handle, size, page;
	struct pd_export_info exp;
	bool present;
};

FIXTURE_SETUP(dev)
{
	struct pd_fabric_attr attr;
	struct pd_device_info info;
	uint64_t got;

	self->exp.fd = -1;
	self->present = !access("/dev/peerdirect0", F_OK);
	if (!self->present)
		SKIP(return, "no /dev/peerdirect0 (the module is not loaded here)");
	ASSERT_EQ(0, pd_device_open(0, &self->dev)) TH_LOG("%s", pd_last_error());
	ASSERT_EQ(0, pd_device_query(self->dev, &info));
	self->page = info.page_size;
	self->size = 2 * info.page_size;
	ASSERT_EQ(0, pd_device_alloc(self->dev, self->size, &self->handle, &got));
	ASSERT_EQ(0, pd_device_export(self->dev, self->handle, 0, self->size,
				      PD_EXPORT_RDWR | PD_EXPORT_CLOEXEC, &self->exp));
	pd_fabric_attr_init(&attr);
	attr.chunk_size = 64 << 10;
	ASSERT_EQ(0, open_loopback(&attr, &self->fab, &self->me)) TH_LOG("%s", pd_last_error());
}

FIXTURE_TEARDOWN(dev)
{
	if (!self->present)
		return;
	pd_fabric_close(self->fab);
	if (self->exp.fd >= 0)
		close(self->exp.fd);
	pd_device_close(self->dev);
}

/* src's first len bytes sent to a host buffer of the fabric itself; the
 * received bytes must match seed's pattern.  0, or the error. */
static int deliver(struct pd_fabric *fab, uint64_t me, struct pd_mr *src, size_t len,
		   uint64_t seed)
{
	char *buf = calloc(1, len);
	struct pd_req *s = NULL, *r = NULL;
	struct pd_mr *dst;
	int ret;

	if (!buf)
		return -ENOMEM;
	ret = pd_mr_reg_host(fab, buf, len, 0, &dst);
	if (!ret) {
		ret = pd_trecv(fab, dst, 0, len, me, 3, &r) ?: pd_tsend(fab, src, 0, len, me, 3, &s) ?:
		      pd_wait(s, WAIT_MS, NULL) ?: pd_wait(r, WAIT_MS, NULL);
		if (!ret && check(buf, len, seed) != -1)
			ret = -EIO;
		pd_req_free(s);
		pd_req_free(r);
		pd_mr_dereg(dst);
	}
	free(buf);
	return ret;
}

static int fill_dmabuf(int fd, size_t len, uint64_t seed)
{
	char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);

	if (p == MAP_FAILED)
		return -errno;
	fill(p, len, seed);
	munmap(p, len);
	return 0;
}

/* The range is checked against the dma-buf's own size (lseek: a dma-buf
 * has no st_size), by fd and through an imported handle. */
TEST_F(dev, registration_past_the_end_is_refused)
{
	struct pd_dmabuf *b;
	struct pd_mr *mr;

	if (!self->present)
		return;
	EXPECT_EQ(-EINVAL, pd_mr_reg_dmabuf(self->fab, self->exp.fd, 0, self->size + 4096, 0, &mr));
	EXPECT_NE(NULL, strstr(pd_last_error(), "past the end")) TH_LOG("%s", pd_last_error());
	EXPECT_EQ(-EINVAL, pd_mr_reg_dmabuf(self->fab, self->exp.fd, self->page, self->size, 0, &mr));
	ASSERT_EQ(0, pd_mr_reg_dmabuf(self->fab, self->exp.fd, self->page, self->page, 0, &mr));
	pd_mr_dereg(mr);
	ASSERT_EQ(0, pd_dmabuf_import(self->fab, self->exp.fd, &b));
	EXPECT_EQ(-EINVAL, pd_mr_reg_imported(b, self->page, self->size, 0, &mr));
	ASSERT_EQ(0, pd_mr_reg_imported(b, 0, self->size, 0, &mr));
	pd_mr_dereg(mr);
	pd_dmabuf_release(b);
}

/* A read-only export is a read-only fd: it registers as a source (and
 * delivers its bytes), never as a receive buffer. */
TEST_F(dev, read_only_export_registers_for_sending_only)
{
	struct pd_export_info ro;
	struct pd_mr *mr;

	if (!self->present)
		return;
	ASSERT_EQ(0, fill_dmabuf(self->exp.fd, self->size, 61));
	ASSERT_EQ(0, pd_device_export(self->dev, self->handle, 0, self->size, PD_EXPORT_CLOEXEC, &ro));
	ASSERT_EQ(O_RDONLY, fcntl(ro.fd, F_GETFL) & O_ACCMODE);
	EXPECT_EQ(-EACCES, pd_mr_reg_dmabuf(self->fab, ro.fd, 0, self->size, PD_ACCESS_RECV, &mr));
	ASSERT_EQ(0, pd_mr_reg_dmabuf(self->fab, ro.fd, 0, self->size, PD_ACCESS_SEND, &mr))
		TH_LOG("%s", pd_last_error());
	EXPECT_EQ(0, deliver(self->fab, self->me, mr, self->size, 61)) TH_LOG("%s", pd_last_error());
	pd_mr_dereg(mr);
	close(ro.fd);
}

/* A revoke reaches the fabric through the device's events: the cached
 * registration, by fd and by handle, stops moving bytes. */
TEST_F(dev, revocation_invalidates_registrations)
{
	struct pd_mr *mr, *mr2;
	struct pd_dmabuf *b;
	uint32_t revoked = 0, pending = 0;

	if (!self->present)
		return;
	ASSERT_EQ(0, fill_dmabuf(self->exp.fd, self->size, 62));
	ASSERT_EQ(0, pd_fabric_attach_device(self->fab, self->dev));
	ASSERT_EQ(0, pd_mr_reg_dmabuf(self->fab, self->exp.fd, 0, self->size, 0, &mr));
	ASSERT_EQ(0, pd_dmabuf_import(self->fab, self->exp.fd, &b));
	ASSERT_EQ(0, pd_mr_reg_imported(b, 0, self->page, 0, &mr2));
	ASSERT_EQ(0, deliver(self->fab, self->me, mr, self->size, 62)) TH_LOG("%s", pd_last_error());
	ASSERT_EQ(0, pd_device_revoke(self->dev, PD_REVOKE_EXPORT, self->exp.export_id,
				      &revoked, &pending));
	EXPECT_EQ(1, revoked);
	EXPECT_EQ(-ENODEV, deliver(self->fab, self->me, mr, self->size, 62)) TH_LOG("%s", pd_last_error());
	EXPECT_EQ(-ENODEV, deliver(self->fab, self->me, mr2, self->page, 62)) TH_LOG("%s", pd_last_error());
	pd_mr_dereg(mr2);
	pd_mr_dereg(mr);
	pd_dmabuf_release(b);
	pd_fabric_detach_device(self->fab, self->dev);
}

/*
 * A process handed only the dma-buf fd (a runtime's network plugin) opens
 * its own device file; the library subscribes to the fd's revocation
 * there (PEERDIRECT_IOCTL_SUBSCRIBE), so the owner's revoke reaches it.
 */
TEST_F(dev, a_holder_of_only_the_fd_learns_of_the_revoke)
{
	int go[2], done[2], status;
	uint32_t revoked = 0, pending = 0;
	char c = 0;
	pid_t pid;

	if (!self->present)
		return;
	ASSERT_EQ(0, fill_dmabuf(self->exp.fd, self->size, 63));
	ASSERT_EQ(0, pipe(go));
	ASSERT_EQ(0, pipe(done));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		struct pd_fabric_attr attr;
		struct pd_fabric *fab;
		struct pd_device *mine;
		struct pd_mr *mr;
		uint64_t me;
		int ret;

		/* Never outlives the test; sees EOF if the parent gives up. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(go[1]);
		close(done[0]);
		pd_fabric_attr_init(&attr);
		attr.chunk_size = 64 << 10;
		if (pd_device_open(0, &mine) || open_loopback(&attr, &fab, &me) ||
		    pd_fabric_attach_device(fab, mine) ||
		    pd_mr_reg_dmabuf(fab, self->exp.fd, 0, self->size, 0, &mr) ||
		    deliver(fab, me, mr, self->size, 63))
			_exit(10);
		if (write(done[1], &c, 1) != 1 || read(go[0], &c, 1) != 1)
			_exit(11);
		ret = deliver(fab, me, mr, self->size, 63);
		pd_mr_dereg(mr);
		pd_fabric_close(fab);
		pd_device_close(mine);
		_exit(ret == -ENODEV ? 0 : 12);
	}
	close(go[0]);
	close(done[1]);
	/* EOF here: the child stopped in its setup. */
	if (read(done[0], &c, 1) == 1) {
		EXPECT_EQ(0, pd_device_revoke(self->dev, PD_REVOKE_EXPORT, self->exp.export_id,
					      &revoked, &pending));
		EXPECT_EQ(1, revoked);
		EXPECT_EQ(1, write(go[1], &c, 1));
	}
	close(go[1]);
	close(done[0]);
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
		TH_LOG("child: status %d (10 setup, 11 pipe, 12 revoke not seen)", WEXITSTATUS(status));
}

TEST_HARNESS_MAIN
