// SPDX-License-Identifier: GPL-2.0
/*
 * Limits and identity: the quota's key (per user, not multiplied by fork
 * and SCM_RIGHTS nor by a user namespace's uids, not inherited through a
 * recycled pid, reported for the caller), kernel memory charged to the caller's memory cgroup, read-only
 * exports as importers see them, and user-set names in debugfs.
 */
#define _GNU_SOURCE
#include <sched.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include "kselftest_harness.h"
#include "pd_test.h"

FIXTURE(lim) {
	int fd;
	struct peerdirect_query q;
};

FIXTURE_SETUP(lim)
{
	self->fd = pd_open(PD_DEV0);
	ASSERT_LE(0, self->fd);
	ASSERT_EQ(0, pd_query(self->fd, &self->q));
	ASSERT_EQ(self->q.mem_size, self->q.mem_free)
		TH_LOG("device memory still held by an earlier test");
}

FIXTURE_TEARDOWN(lim)
{
	close(self->fd);
}

static int send_fd(int sock, int fd, int err)
{
	char cbuf[CMSG_SPACE(sizeof(int))] = { 0 };
	struct iovec iov = { .iov_base = &err, .iov_len = sizeof(err) };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
	struct cmsghdr *c;

	if (fd >= 0) {
		msg.msg_control = cbuf;
		msg.msg_controllen = sizeof(cbuf);
		c = CMSG_FIRSTHDR(&msg);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof(int));
	}
	return sendmsg(sock, &msg, 0) < 0 ? -errno : 0;
}

/* Returns the fd passed (or -1) and the sender's result in *err. */
static int recv_fd(int sock, int *err)
{
	char cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { .iov_base = err, .iov_len = sizeof(*err) };
	struct msghdr msg = {
		.msg_iov = &iov, .msg_iovlen = 1,
		.msg_control = cbuf, .msg_controllen = sizeof(cbuf),
	};
	struct cmsghdr *c;
	int fd = -1;

	if (recvmsg(sock, &msg, 0) < 0)
		return -1;
	c = CMSG_FIRSTHDR(&msg);
	if (c && c->cmsg_type == SCM_RIGHTS)
		memcpy(&fd, CMSG_DATA(c), sizeof(int));
	return fd;
}

/*
 * Children that each open the device, allocate and pass their fd back
 * with SCM_RIGHTS get one quota between them, not one each.
 */
TEST_F(lim, quota_is_not_multiplied_by_fork_and_scm_rights)
{
	uint64_t chunk = self->q.quota / 4 / self->q.page_size * self->q.page_size;
	struct peerdirect_query q;
	int sv[2], fds[5], errs[5], i, status;
	pid_t pid;

	if (self->q.quota == self->q.mem_size || self->q.mem_size < 5 * chunk)
		SKIP(return, "needs quota_mb with room for five quarters of it on the device");
	ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_DGRAM, 0, sv));
	for (i = 0; i < 5; i++) {
		pid = fork();
		ASSERT_LE(0, pid);
		if (!pid) {
			int fd = pd_open(PD_DEV0);
			int64_t h = fd < 0 ? -errno : pd_alloc(fd, chunk);

			send_fd(sv[1], h > 0 ? fd : -1, h > 0 ? 0 : (int)-h);
			_exit(0);
		}
		ASSERT_EQ(pid, waitpid(pid, &status, 0));
		fds[i] = recv_fd(sv[0], &errs[i]);
	}
	for (i = 0; i < 4; i++)
		EXPECT_EQ(0, errs[i]) TH_LOG("child %d: %s", i, strerror(errs[i]));
	EXPECT_EQ(EDQUOT, errs[4]) TH_LOG("the fifth child: %s", strerror(errs[4]));
	ASSERT_EQ(0, pd_query(self->fd, &q));
	EXPECT_EQ(4 * chunk, q.quota_used);
	for (i = 0; i < 5; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	ASSERT_EQ(0, pd_query(self->fd, &q));
	EXPECT_EQ(0, q.quota_used);
	close(sv[0]);
	close(sv[1]);
}

static int set_last_pid(pid_t pid)
{
	char buf[16];
	int f = open("/proc/sys/kernel/ns_last_pid", O_WRONLY | O_CLOEXEC), n;

	if (f < 0)
		return -errno;
	n = snprintf(buf, sizeof(buf), "%d", pid);
	n = write(f, buf, n) == n ? 0 : -errno;
	close(f);
	return n;
}

/*
 * A process that gets a dead process's pid inherits nothing of its usage:
 * here the dead one's allocation is still alive (its fd was passed on),
 * and a process of another user reusing its pid sees and gets a whole
 * quota.
 */
TEST_F(lim, recycled_pid_does_not_inherit_usage)
{
	uint64_t half = self->q.quota / 2 / self->q.page_size * self->q.page_size;
	int sv[2], fd, err = 0, status, tries;
	pid_t first, second = 0;

	if (self->q.quota == self->q.mem_size)
		SKIP(return, "module loaded without quota_mb");
	ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_DGRAM, 0, sv));
	first = fork();
	ASSERT_LE(0, first);
	if (!first) {
		int cfd = pd_open(PD_DEV0);
		int64_t h = cfd < 0 ? -errno : pd_alloc(cfd, half);

		send_fd(sv[1], h > 0 ? cfd : -1, h > 0 ? 0 : (int)-h);
		_exit(0);
	}
	ASSERT_EQ(first, waitpid(first, &status, 0));
	fd = recv_fd(sv[0], &err);
	ASSERT_LE(0, fd) TH_LOG("first child: %s", strerror(err));

	for (tries = 0; tries < 10 && second != first; tries++) {
		if (set_last_pid(first - 1))
			SKIP(close(fd); return, "cannot set ns_last_pid");
		second = fork();
		ASSERT_LE(0, second);
		if (!second) {
			struct peerdirect_query q;
			int cfd;

			if (getpid() != first)
				_exit(20);
			/* its own file, opened under the recycled pid */
			cfd = pd_open(PD_DEV0);
			if (cfd < 0 || setresuid(65534, 65534, 65534))
				_exit(10);
			if (pd_query(cfd, &q) || q.quota_used)
				_exit(11);
			if (pd_alloc(cfd, half) <= 0)
				_exit(12);
			_exit(0);
		}
		ASSERT_EQ(second, waitpid(second, &status, 0));
		if (WEXITSTATUS(status) != 20)
			break;
	}
	ASSERT_EQ(first, second) TH_LOG("could not recycle pid %d", first);
	EXPECT_EQ(0, WEXITSTATUS(status)) TH_LOG("step %d", WEXITSTATUS(status));
	close(fd);
	close(sv[0]);
	close(sv[1]);
}

/* Writes "value" to /proc/self/<file>: 0 or -errno. */
static int write_proc_self(const char *file, const char *value)
{
	char path[64];
	int fd, ret = 0;

	snprintf(path, sizeof(path), "/proc/self/%s", file);
	fd = open(path, O_WRONLY);
	if (fd < 0)
		return -errno;
	if (write(fd, value, strlen(value)) != (ssize_t)strlen(value))
		ret = -errno;
	close(fd);
	return ret;
}

/*
 * A user namespace does not make a new user: uid 0 inside it maps to the
 * same kuid as the caller outside, so the quota is the caller's, shared.
 * (Creating namespaces mints no kuids; mapping to another host uid takes
 * privilege over it.)
 */
TEST_F(lim, quota_is_not_multiplied_by_user_namespaces)
{
	uint64_t most = self->q.quota - self->q.page_size;
	char map[64];
	int64_t h;
	int status;
	uid_t uid = getuid();
	pid_t pid;

	if (self->q.quota == self->q.mem_size || self->q.quota < 2 * self->q.page_size)
		SKIP(return, "module loaded without quota_mb");
	h = pd_alloc(self->fd, most);
	ASSERT_LT(0, h);
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		struct peerdirect_query q;
		int fd, ret;

		if (unshare(CLONE_NEWUSER))
			_exit(errno == EINVAL || errno == EPERM || errno == ENOSPC ? 20 : 10);
		snprintf(map, sizeof(map), "0 %u 1", uid);
		ret = write_proc_self("setgroups", "deny");
		if (!ret)
			ret = write_proc_self("uid_map", map);
		if (ret)
			_exit(ret == -EPERM ? 20 : 11);
		if (getuid() != 0)
			_exit(12);
		fd = pd_open(PD_DEV0);
		if (fd < 0)
			_exit(13);
		/* the caller's usage, seen from inside */
		if (pd_query(fd, &q) || q.quota_used != most)
			_exit(14);
		/* two pages over the one left */
		if (pd_alloc(fd, 2 * self->q.page_size) != -EDQUOT)
			_exit(15);
		if (pd_alloc(fd, self->q.page_size) <= 0)
			_exit(16);
		_exit(0);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status));
	if (WEXITSTATUS(status) == 20)
		SKIP(goto out, "user namespaces unavailable or restricted (unshare or uid_map: EPERM)");
	EXPECT_EQ(0, WEXITSTATUS(status)) TH_LOG("step %d", WEXITSTATUS(status));
out:
	EXPECT_EQ(0, pd_free(self->fd, h));
}

/*
 * A namespace that maps a range of subordinate uids does not get one quota
 * per uid it maps: every allocation is charged to its own uid and to the
 * owner of each user namespace up to the initial one, as the kernel's
 * ucounts rlimits are.  Here the namespace's owner is the test (root), its
 * uids 1 and 2 are host uids 100000 and 100001, and the two share the
 * test's one quota.
 */
static int ns_alloc_as(int fd, uid_t uid, uint64_t size, int64_t *h,
		       uint64_t *used)
{
	struct peerdirect_query q;
	int status;
	int p[2];
	pid_t pid;

	if (pipe(p))
		return -errno;
	pid = fork();
	if (pid < 0)
		return -errno;
	if (!pid) {
		int64_t r;

		close(p[0]);
		if (setresuid(uid, uid, uid))
			_exit(1);
		r = pd_alloc(fd, size);
		if (pd_query(fd, &q))
			_exit(1);
		if (write(p[1], &r, sizeof(r)) != sizeof(r) ||
		    write(p[1], &q.quota_used, sizeof(q.quota_used)) != sizeof(q.quota_used))
			_exit(1);
		_exit(0);
	}
	close(p[1]);
	if (read(p[0], h, sizeof(*h)) != sizeof(*h) ||
	    read(p[0], used, sizeof(*used)) != sizeof(*used))
		*h = -EPIPE;
	close(p[0]);
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status))
		return -ECHILD;
	return 0;
}

TEST_F(lim, quota_is_charged_up_to_the_initial_user_namespace)
{
	uint64_t page = self->q.page_size, quota = self->q.quota;
	int64_t h1 = 0, h2 = 0, h3 = 0;
	uint64_t used1 = 0, used2 = 0, used3 = 0;
	int go[2], ready[2];
	char path[64], map[64], c;
	int status, f;
	pid_t pid;

	if (quota == self->q.mem_size || quota < 2 * page)
		SKIP(return, "module loaded without quota_mb");
	if (geteuid())
		SKIP(return, "needs root to map subordinate uids");
	ASSERT_EQ(0, pipe(go));
	ASSERT_EQ(0, pipe(ready));
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		int ret;

		close(go[1]);
		close(ready[0]);
		c = unshare(CLONE_NEWUSER) ? 'n' : 'y';
		if (write(ready[1], &c, 1) != 1 || c != 'y')
			_exit(20);
		if (read(go[0], &c, 1) != 1 || c != 'y')
			_exit(21);
		if (getuid() != 0)
			_exit(12);
		/* uid 1 takes all but a page; uid 2 gets that page, no more */
		ret = ns_alloc_as(self->fd, 1, quota - page, &h1, &used1);
		if (!ret)
			ret = ns_alloc_as(self->fd, 2, page, &h2, &used2);
		if (!ret)
			ret = ns_alloc_as(self->fd, 2, page, &h3, &used3);
		if (ret)
			_exit(13);
		if (write(ready[1], &h1, sizeof(h1)) != sizeof(h1) ||
		    write(ready[1], &h2, sizeof(h2)) != sizeof(h2) ||
		    write(ready[1], &h3, sizeof(h3)) != sizeof(h3) ||
		    write(ready[1], &used3, sizeof(used3)) != sizeof(used3))
			_exit(14);
		_exit(0);
	}
	close(go[0]);
	close(ready[1]);
	ASSERT_EQ(1, read(ready[0], &c, 1));
	if (c != 'y') {
		ASSERT_EQ(pid, waitpid(pid, &status, 0));
		SKIP(return, "user namespaces unavailable");
	}
	snprintf(path, sizeof(path), "/proc/%d/uid_map", pid);
	f = open(path, O_WRONLY | O_CLOEXEC);
	ASSERT_LE(0, f);
	/* 0 is the test itself, 1..1000 are host uids 100000..100999 */
	snprintf(map, sizeof(map), "0 %u 1\n1 100000 1000\n", getuid());
	EXPECT_EQ((ssize_t)strlen(map), write(f, map, strlen(map))) TH_LOG("uid_map: %s", strerror(errno));
	close(f);
	c = 'y';
	ASSERT_EQ(1, write(go[1], &c, 1));
	EXPECT_EQ(sizeof(h1), read(ready[0], &h1, sizeof(h1)));
	EXPECT_EQ(sizeof(h2), read(ready[0], &h2, sizeof(h2)));
	EXPECT_EQ(sizeof(h3), read(ready[0], &h3, sizeof(h3)));
	EXPECT_EQ(sizeof(used3), read(ready[0], &used3, sizeof(used3)));
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status)) TH_LOG("step %d", WEXITSTATUS(status));
	close(go[1]);
	close(ready[0]);

	EXPECT_LT(0, h1) TH_LOG("ns uid 1 could not allocate: %lld", (long long)h1);
	EXPECT_LT(0, h2) TH_LOG("ns uid 2 could not share the page left: %lld", (long long)h2);
	/* two uids of the namespace: one quota, their owner's */
	EXPECT_EQ(-EDQUOT, h3) TH_LOG("ns uid 2 allocated past its owner's quota");
	/* QUERY inside reports the level that binds: the owner's */
	EXPECT_EQ(quota, used3);
	/* and the owner outside has nothing left either */
	EXPECT_EQ(-EDQUOT, pd_alloc(self->fd, page));
	if (h1 > 0)
		EXPECT_EQ(0, pd_free(self->fd, h1));
	if (h2 > 0)
		EXPECT_EQ(0, pd_free(self->fd, h2));
	if (h3 > 0)
		EXPECT_EQ(0, pd_free(self->fd, h3));
}

/* QUERY reports the calling process's usage, whoever opened the file. */
TEST_F(lim, quota_used_is_the_callers)
{
	struct peerdirect_query q;
	int64_t h = pd_alloc(self->fd, self->q.page_size);
	int status;
	pid_t pid;

	ASSERT_LT(0, h);
	ASSERT_EQ(0, pd_query(self->fd, &q));
	EXPECT_EQ(self->q.page_size, q.quota_used);
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		if (setresuid(65534, 65534, 65534))
			_exit(10);
		if (pd_query(self->fd, &q) || q.quota_used)
			_exit(11);
		_exit(0);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_EQ(0, WEXITSTATUS(status)) TH_LOG("step %d", WEXITSTATUS(status));
	EXPECT_EQ(0, pd_free(self->fd, h));
}

/* ---- kernel memory charged to the caller's memory cgroup ---------------- */

#define CG_ROOT "/tmp/pd-cgroup"
#define CG CG_ROOT "/pd-limits"

static int cg_write(const char *path, const char *val)
{
	int f = open(path, O_WRONLY | O_CLOEXEC), ret;

	if (f < 0)
		return -errno;
	ret = write(f, val, strlen(val)) == (ssize_t)strlen(val) ? 0 : -errno;
	close(f);
	return ret;
}

/*
 * memory.stat is flushed lazily: a read flushes only once enough updates
 * are pending (6.1 counts them in bytes, 6.12 and later in pages, so 400
 * opens may stay below the bar), and the periodic flush is a deferrable
 * timer that an idle VM can put off for longer than any sleep we would
 * choose (7.2 returned the same value twice, 2.2 s apart).  Faulting in and
 * freeing 8 MiB of anonymous memory in the cgroup makes thousands of page
 * updates, so the read that follows always flushes; what stays behind is
 * each CPU's cached slab bytes, under a page.
 */
static long long cg_stat(const char *key)
{
	const size_t churn = 8 << 20;
	char line[256], *p;
	size_t klen = strlen(key), i;
	long long v = -1;
	FILE *f;

	p = mmap(NULL, churn, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return -1;
	for (i = 0; i < churn; i += 4096)
		p[i] = 1;
	munmap(p, churn);
	f = fopen(CG "/memory.stat", "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, key, klen) && line[klen] == ' ')
			v = atoll(line + klen + 1);
	fclose(f);
	return v;
}

/* A memory cgroup of our own, with this process in it; 0 or -errno. */
static int cg_enter(void)
{
	mkdir(CG_ROOT, 0755);
	if (access(CG_ROOT "/cgroup.controllers", F_OK) &&
	    mount("none", CG_ROOT, "cgroup2", 0, NULL))
		return -errno;
	if (cg_write(CG_ROOT "/cgroup.subtree_control", "+memory"))
		return -ENOTSUP;
	if (mkdir(CG, 0755) && errno != EEXIST)
		return -errno;
	return cg_write(CG "/cgroup.procs", "0");
}

static void cg_leave(void)
{
	cg_write(CG_ROOT "/cgroup.procs", "0");
	rmdir(CG);
}

/*
 * Open files, allocations, exports and their event rings are charged to
 * the memory cgroup of the process that makes them: a cgroup limit bounds
 * the kernel memory a process can pin through the device.  Compared with
 * opening /dev/null, each open of the device costs at least its file
 * context, but no event ring (that comes with the first export, which
 * costs at least the ring).
 */
TEST_F(lim, kernel_memory_is_charged_to_the_callers_memcg)
{
	const int n = 400, nexp = 100;
	struct rlimit rl = { 4096, 4096 };
	long long s0, s1, s2, s3, ring, per_open, per_export;
	int *nul, *dev, i, ret;

	ret = cg_enter();
	if (ret)
		SKIP(return, "no memory cgroup: %s", strerror(-ret));
	ASSERT_EQ(0, setrlimit(RLIMIT_NOFILE, &rl));
	nul = calloc(n, sizeof(int));
	dev = calloc(n, sizeof(int));
	ASSERT_TRUE(nul && dev);
	ring = (long long)self->q.max_events * sizeof(struct peerdirect_event);

	s0 = cg_stat("slab_unreclaimable");
	for (i = 0; i < n; i++)
		nul[i] = open("/dev/null", O_RDONLY | O_CLOEXEC);
	s1 = cg_stat("slab_unreclaimable");
	for (i = 0; i < n; i++) {
		dev[i] = pd_open(PD_DEV0);
		ASSERT_LE(0, dev[i]);
	}
	s2 = cg_stat("slab_unreclaimable");
	for (i = 0; i < nexp; i++) {
		int64_t h = pd_alloc(dev[i], self->q.page_size);

		ASSERT_LT(0, h);
		ASSERT_LE(0, pd_export(dev[i], h, 0, self->q.page_size));
	}
	s3 = cg_stat("slab_unreclaimable");
	TH_LOG("slab_unreclaimable %lld, %lld after %d opens of /dev/null, %lld after as many of the device, %lld after %d exports",
	       s0, s1, n, s2, s3, nexp);
	/* a stale read would make every difference below meaningless */
	ASSERT_LE(s0 + n * 64, s1) TH_LOG("memory.stat did not move: not flushed");
	per_open = ((s2 - s1) - (s1 - s0)) / n;
	per_export = (s3 - s2) / nexp;
	TH_LOG("charged per open beyond /dev/null: %lld B; per first export: %lld B (ring %lld B)",
	       per_open, per_export, ring);
	EXPECT_LE(64, per_open);
	/* KASAN pads every slab object with redzones: an open then costs more
	 * than a small ring (2056 B against 1152 B at max_events=16), and the
	 * comparison says nothing about when the ring is allocated. */
	if (!pd_kernel_has_symbol("__kasan_kmalloc"))
		EXPECT_GT(ring, per_open);
	EXPECT_LE(ring, per_export);

	for (i = 0; i < n; i++) {
		close(nul[i]);
		close(dev[i]);
	}
	free(nul);
	free(dev);
	cg_leave();
}

static void kmsg(const char *msg)
{
	int f = open("/dev/kmsg", O_WRONLY | O_CLOEXEC);

	/* Best effort: without the markers the log scan fails loudly. */
	if (f >= 0) {
		ssize_t n = write(f, msg, strlen(msg));

		(void)n;
		close(f);
	}
}

/*
 * Under a memory.max a little above what the cgroup already uses, a
 * process that opens the device, allocates and exports again and again is
 * stopped by the limit -- ENOMEM from a call, or the memcg OOM killer (the
 * only task of the group) -- long before the device or its quota would
 * stop it; what it held all comes back when it goes, and the device works.
 * Charges are taken in batches of 64 pages whose surplus a per-CPU cache
 * keeps, already counted in memory.current, and setting memory.max below
 * usage is all that empties it: so the child can use the headroom plus a
 * batch per CPU it ran on, likely why k7.2's BAR tier once made all 192
 * allocations the VM's quota leaves, one export each, unstopped.  The
 * child runs on one CPU, and exports each allocation several times.
 * The OOM report's stack trace is expected: the test brackets it for the
 * VM's log scan (scripts/vm-scan-log.sh).
 */
TEST_F(lim, memcg_limit_stops_opens_and_exports)
{
	const long long headroom = 256 << 10;
	/* exports of each allocation, within max_exports */
	const int per_alloc = self->q.max_exports < 8 ? (int)self->q.max_exports : 8;
	int max_iter = (int)(self->q.mem_free / self->q.page_size / 2);
	volatile int *done;
	long long ooms = -1;
	int status, ret, h, fd;
	char line[64];
	FILE *f;
	pid_t pid;

	if (self->q.quota && self->q.quota / self->q.page_size / 2 < (uint64_t)max_iter)
		max_iter = (int)(self->q.quota / self->q.page_size / 2);
	if (max_iter > 2000)
		max_iter = 2000;
	done = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, done);
	done[0] = 0;	/* exports made */
	done[1] = 0;	/* errno that stopped the child, 0 if killed */
	kmsg("pd-selftest: expected oom-kill begin (limits.memcg_limit_stops_opens_and_exports)\n");
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		/* a device fd and its exports per allocation, and a few more */
		rlim_t fds = (rlim_t)max_iter * (rlim_t)(per_alloc + 1) + 64;
		struct rlimit rl = { fds, fds };
		long long cur = 0;
		cpu_set_t one;
		char max[32];
		int i;

		CPU_ZERO(&one);
		CPU_SET(sched_getcpu() < 0 ? 0 : sched_getcpu(), &one);
		if (sched_setaffinity(0, sizeof(one), &one) || setrlimit(RLIMIT_NOFILE, &rl))
			_exit(7);
		if (cg_enter())
			_exit(3);
		f = fopen(CG "/memory.current", "r");
		if (!f || fscanf(f, "%lld", &cur) != 1)
			_exit(4);
		fclose(f);
		snprintf(max, sizeof(max), "%lld", cur + headroom);
		if (cg_write(CG "/memory.max", max))
			_exit(5);
		for (i = 0; i < max_iter; i++) {
			int d = pd_open(PD_DEV0);
			int64_t a;
			int e = 0, j;

			if (d < 0)
				d = -errno;
			a = d < 0 ? d : pd_alloc(d, self->q.page_size);
			for (j = 0; j < per_alloc && a >= 0 && e >= 0; j++) {
				e = pd_export(d, (uint64_t)a, 0, self->q.page_size);
				done[0] += e >= 0;
			}
			if (d < 0 || a < 0 || e < 0) {
				done[1] = d < 0 ? -d : a < 0 ? (int)-a : -e;
				_exit(0);
			}
		}
		_exit(6);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	kmsg("pd-selftest: expected oom-kill end\n");
	f = fopen(CG "/memory.events", "r");
	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, "oom_kill ", 9))
			ooms = atoll(line + 9);
	if (f)
		fclose(f);
	TH_LOG("%d exports of %d before the limit stopped the child (%s; oom_kill %lld)",
	       done[0], max_iter * per_alloc, WIFSIGNALED(status) ? strsignal(WTERMSIG(status)) :
	       strerror(done[1]), ooms);
	ASSERT_FALSE(WIFEXITED(status) && WEXITSTATUS(status) == 7)
		TH_LOG("the child could not pin itself to a CPU or raise RLIMIT_NOFILE to %d",
		       max_iter * (per_alloc + 1) + 64);
	if (WIFEXITED(status) && WEXITSTATUS(status) >= 3 && WEXITSTATUS(status) <= 5) {
		cg_leave();
		SKIP(return, "no memory cgroup to limit (step %d)", WEXITSTATUS(status));
	}
	if (WIFSIGNALED(status)) {
		EXPECT_EQ(SIGKILL, WTERMSIG(status));
		EXPECT_LE(1, ooms);
	} else {
		EXPECT_EQ(ENOMEM, done[1]) TH_LOG("exit status %d", WEXITSTATUS(status));
	}
	EXPECT_LT(0, done[0]);
	EXPECT_GT(max_iter * per_alloc, done[0]);
	cg_leave();

	/* All of it came back, and the device still works. */
	ASSERT_EQ(0, pd_query(self->fd, &self->q));
	EXPECT_EQ(self->q.mem_size, self->q.mem_free);
	EXPECT_EQ(0, self->q.quota_used);
	fd = pd_open(PD_DEV0);
	ASSERT_LE(0, fd);
	h = (int)pd_alloc(fd, self->q.page_size);
	ASSERT_LT(0, h);
	ret = pd_export(fd, (uint64_t)h, 0, self->q.page_size);
	EXPECT_LE(0, ret);
	if (ret >= 0)
		close(ret);
	close(fd);
	munmap((void *)done, 4096);
}

/* ---- read-only exports and importers ---------------------------------- */

/* The mapping column of the device's debugfs attachments for @id, or NULL. */
static char *attach_mapping(uint64_t id, char *out, size_t len)
{
	char line[256], dev[64], map[32];
	unsigned long long eid;
	unsigned int pins;
	FILE *f = fopen("/sys/kernel/debug/peerdirect/peerdirect0/attachments", "r");
	char *ret = NULL;

	if (!f)
		return NULL;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%llu %63s %u %31s", &eid, dev, &pins, map) == 4 && eid == id) {
			snprintf(out, len, "%s", map);
			ret = out;
		}
	fclose(f);
	return ret;
}

/*
 * A read-only export is mapped for the importer's device to read only,
 * whatever direction it asks for (RDMA importers ask bidirectional): an
 * IOMMU then stops the device from writing it.
 */
TEST_F(lim, read_only_export_is_mapped_to_device_only)
{
	int64_t h = pd_alloc(self->fd, self->q.page_size);
	char map[32];
	__u64 ro = 0, rw = 0;
	int dro, drw, iro, irw;

	ASSERT_LT(0, h);
	dro = pd_export_id(self->fd, h, 0, self->q.page_size, 0, &ro);
	drw = pd_export_id(self->fd, h, 0, self->q.page_size, PEERDIRECT_EXPORT_RDWR, &rw);
	ASSERT_LE(0, dro);
	ASSERT_LE(0, drw);
	iro = pdti_open("peerdirect0");
	irw = pdti_open("peerdirect0");
	ASSERT_LE(0, iro);
	ASSERT_LE(0, irw);
	ASSERT_EQ(0, pdti_import(iro, dro, PDTI_DYNAMIC, 0));
	ASSERT_EQ(0, pdti_import(irw, drw, PDTI_DYNAMIC, 0));
	ASSERT_NE(NULL, attach_mapping(ro, map, sizeof(map)));
	EXPECT_STREQ("to_device", map);
	ASSERT_NE(NULL, attach_mapping(rw, map, sizeof(map)));
	EXPECT_STREQ("bidirectional", map);
	close(iro);
	close(irw);
	close(dro);
	close(drw);
	EXPECT_EQ(0, pd_free(self->fd, h));
}

/* ---- debugfs --------------------------------------------------------- */

/*
 * A name set with DMA_BUF_SET_NAME cannot forge debugfs lines or fields:
 * newlines, tabs and spaces come out escaped.
 */
TEST_F(lim, debugfs_escapes_user_set_names)
{
	static const char evil[] = "x\n999\t1\t2\t3 y";
	int64_t h = pd_alloc(self->fd, self->q.page_size);
	char line[512];
	int d, lines = 0, mine = 0;
	__u64 id = 0;
	FILE *f;

	ASSERT_LT(0, h);
	d = pd_export_id(self->fd, h, 0, self->q.page_size, PEERDIRECT_EXPORT_RDWR, &id);
	ASSERT_LE(0, d);
	ASSERT_EQ(0, ioctl(d, DMA_BUF_SET_NAME_B, evil));
	f = fopen("/sys/kernel/debug/peerdirect/peerdirect0/exports", "r");
	ASSERT_NE(NULL, f);
	while (fgets(line, sizeof(line), f)) {
		lines++;
		if (strstr(line, "x\\012999\\0111\\0112\\0113\\040y"))
			mine++;
		EXPECT_EQ(NULL, strstr(line, "999\t1")) TH_LOG("forged: %s", line);
	}
	fclose(f);
	EXPECT_EQ(2, lines);	/* the header and our export */
	EXPECT_EQ(1, mine);
	close(d);
	EXPECT_EQ(0, pd_free(self->fd, h));
}

TEST_HARNESS_MAIN
