// SPDX-License-Identifier: GPL-2.0
/*
 * ALLOC zeroes device memory before handing it out, and on a large BAR
 * that takes seconds.  A process killed meanwhile must die at once and
 * give the memory back, not finish zeroing memory nobody will get.
 *
 * Nor may a removal or a reset wait for it.
 *
 * Needs a device whose zeroing outlasts a kill: PD_ZERO_DEV names it
 * (scripts/check.sh's unplug stage adds a 1 GiB BAR for it).  The 32 MiB
 * devices of the other stages zero in tens of milliseconds: skipped.
 */
#define _GNU_SOURCE
#include <limits.h>
#include "kselftest_harness.h"
#include "pd_test.h"

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Whether pid has not exited yet, without reaping it. */
static bool still_running(pid_t pid)
{
	siginfo_t si = { 0 };

	return !waitid(P_PID, pid, &si, WEXITED | WNOHANG | WNOWAIT) && !si.si_pid;
}

TEST(a_killed_alloc_stops_zeroing_and_gives_the_memory_back)
{
	const char *dev = getenv("PD_ZERO_DEV");
	struct peerdirect_query q, after;
	int64_t h, t0, full, died;
	uint64_t size;
	int fd, go[2], st, i;
	pid_t pid;
	char c;

	if (!dev || !*dev)
		SKIP(return, "PD_ZERO_DEV names no device whose zeroing outlasts a kill");
	fd = pd_open(dev);
	ASSERT_LE(0, fd) TH_LOG("%s: %s", dev, strerror(errno));
	ASSERT_EQ(0, pd_query(fd, &q));
	size = q.mem_free;
	if (q.quota && q.quota - q.quota_used < size)
		size = q.quota - q.quota_used;
	size -= size % q.page_size;

	/*
	 * How long zeroing all of it takes, unkilled: the second time, since
	 * the first also faults the host's backing pages in (7 s against
	 * about 2 for 1 GiB under TCG).
	 */
	for (i = 0; i < 2; i++) {
		t0 = now_ms();
		h = pd_alloc(fd, size);
		full = now_ms() - t0;
		ASSERT_LT(0, h) TH_LOG("ALLOC of %llu bytes: %s", (unsigned long long)size,
				       strerror((int)-h));
		ASSERT_EQ(0, pd_free(fd, h));
		TH_LOG("ALLOC of %llu MiB zeroed in %lld ms", (unsigned long long)(size >> 20),
		       (long long)full);
	}
	if (full < 400)
		SKIP(goto out, "zeroing %s takes %lld ms: too short for a kill to land in",
		     dev, (long long)full);

	ASSERT_EQ(0, pipe(go));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		int cfd = pd_open(dev);

		close(go[0]);
		if (cfd < 0 || write(go[1], "r", 1) != 1)
			_exit(2);
		_exit(pd_alloc(cfd, size) > 0 ? 0 : 3);
	}
	close(go[1]);
	ASSERT_EQ(1, read(go[0], &c, 1));
	close(go[0]);
	usleep((useconds_t)(full / 4) * 1000);
	ASSERT_TRUE(still_running(pid)) TH_LOG("the ALLOC ended before the kill");
	t0 = now_ms();
	ASSERT_EQ(0, kill(pid, SIGKILL));
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	died = now_ms() - t0;
	TH_LOG("killed %lld ms into the zeroing, died %lld ms later", (long long)(full / 4),
	       (long long)died);
	EXPECT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL) TH_LOG("status 0x%x", st);
	/* Before, the killed ALLOC went on zeroing the other three quarters. */
	EXPECT_GT(full / 4, died) TH_LOG("killed %lld ms into a %lld ms zeroing, died %lld ms later",
					 (long long)(full / 4), (long long)full, (long long)died);
	ASSERT_EQ(0, pd_query(fd, &after));
	EXPECT_EQ(q.mem_free, after.mem_free) TH_LOG("the killed ALLOC's memory did not come back");
out:
	close(fd);
}

/* The sysfs remove file of the PCI function behind /dev/NAME. */
static int remove_path(const char *dev, char *out, size_t len)
{
	char link[512], target[512];
	const char *name = strrchr(dev, '/');
	ssize_t n;

	snprintf(link, sizeof(link), "/sys/class/misc/%s/device", name ? name + 1 : dev);
	n = readlink(link, target, sizeof(target) - 1);
	if (n < 0)
		return -errno;
	target[n] = '\0';
	name = strrchr(target, '/');
	snprintf(out, len, "/sys/bus/pci/devices/%s/remove", name ? name + 1 : target);
	return 0;
}

/*
 * The zeroing held the hardware lock from start to end, so a removal (and
 * a reset, which takes the same lock) waited for all of it.  Now it waits
 * for one chunk, and the ALLOC fails with ENODEV.  Removes the device:
 * selftests/unplug-in-vm.sh rescans it back.
 */
TEST(a_removal_does_not_wait_for_the_zeroing)
{
	const char *dev = getenv("PD_ZERO_DEV");
	struct peerdirect_query q;
	char rm[PATH_MAX];
	int64_t h, t0, full, took;
	int fd, rfd, go[2], st;
	pid_t pid;
	char c;

	if (!dev || !*dev)
		SKIP(return, "PD_ZERO_DEV names no device whose zeroing outlasts a kill");
	fd = pd_open(dev);
	ASSERT_LE(0, fd) TH_LOG("%s: %s", dev, strerror(errno));
	ASSERT_EQ(0, remove_path(dev, rm, sizeof(rm))) TH_LOG("%s is not a PCI device", dev);
	ASSERT_EQ(0, pd_query(fd, &q));
	t0 = now_ms();
	h = pd_alloc(fd, q.mem_free);
	full = now_ms() - t0;
	ASSERT_LT(0, h);
	ASSERT_EQ(0, pd_free(fd, h));
	if (full < 400)
		SKIP(goto out, "zeroing %s takes %lld ms: too short", dev, (long long)full);

	ASSERT_EQ(0, pipe(go));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		close(go[0]);
		if (write(go[1], "r", 1) != 1)
			_exit(2);
		h = pd_alloc(fd, q.mem_free);
		_exit(h == -ENODEV ? 0 : h > 0 ? 3 : 4);
	}
	close(go[1]);
	ASSERT_EQ(1, read(go[0], &c, 1));
	close(go[0]);
	usleep((useconds_t)(full / 4) * 1000);
	ASSERT_TRUE(still_running(pid)) TH_LOG("the ALLOC ended before the removal");
	rfd = open(rm, O_WRONLY | O_CLOEXEC);
	ASSERT_LE(0, rfd) TH_LOG("%s: %s", rm, strerror(errno));
	t0 = now_ms();
	EXPECT_EQ(1, write(rfd, "1", 1)) TH_LOG("%s: %s", rm, strerror(errno));
	took = now_ms() - t0;
	close(rfd);
	TH_LOG("removed %lld ms into a %lld ms zeroing, in %lld ms", (long long)(full / 4),
	       (long long)full, (long long)took);
	EXPECT_GT(full / 4, took);
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0)
		TH_LOG("the ALLOC did not fail with ENODEV (status 0x%x)", st);
out:
	close(fd);
}

TEST_HARNESS_MAIN
