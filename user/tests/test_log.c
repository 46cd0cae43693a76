// SPDX-License-Identifier: MIT
/*
 * PEERDIRECT_LOG and PEERDIRECT_LOG_FILE: levels, the line's prefix, the
 * file name's %h and %p, rate limiting, lines intact across threads, and
 * what the library says on its own: the fabric-open line (provider, the
 * run-time libfabric, each kind of memory's path and why), a dma-buf
 * falling back to bounce, a revocation seen, an eviction forced by a cap,
 * and nothing at all (no file, no byte on stderr) when PEERDIRECT_LOG is
 * unset.  Each test runs in its own process (the harness forks), so the
 * level read by pd_log_init does not leak from one to the next.
 */
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sys/stat.h>

#include "kselftest_harness.h"
#include "loopback.h"
#include "device.h"
#include "log.h"

FIXTURE(log) {
	char dir[64];
	char file[128];
	char out[65536];
};

FIXTURE_SETUP(log)
{
	snprintf(self->dir, sizeof(self->dir), "/tmp/pd-test-log.XXXXXX");
	ASSERT_NE(NULL, mkdtemp(self->dir));
	snprintf(self->file, sizeof(self->file), "%s/log", self->dir);
	unsetenv("PEERDIRECT_LOG");
	unsetenv("PEERDIRECT_LOG_FILE");
}

FIXTURE_TEARDOWN(log)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", self->dir);
	if (system(cmd))
		TH_LOG("could not remove %s", self->dir);
}

static void log_to(const char *level, const char *file)
{
	setenv("PEERDIRECT_LOG", level, 1);
	if (file)
		setenv("PEERDIRECT_LOG_FILE", file, 1);
	else
		unsetenv("PEERDIRECT_LOG_FILE");
	pd_log_init();
}

/* The whole file, NUL-terminated ("" if it does not exist). */
static const char *slurp(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "r");
	size_t n = 0;

	if (f) {
		n = fread(buf, 1, len - 1, f);
		fclose(f);
	}
	buf[n] = '\0';
	return buf;
}

static int count(const char *s, const char *needle)
{
	int n = 0;

	for (; (s = strstr(s, needle)); s += strlen(needle))
		n++;
	return n;
}

TEST_F(log, levels_filter_and_lines_carry_host_pid_tid)
{
	char host[64], prefix[128];

	log_to("WARN", self->file);
	EXPECT_EQ(PD_LOG_WARN, pd_log_level);
	pd_log(PD_LOG_ERROR, "an error %d", 1);
	pd_log(PD_LOG_WARN, "a warning %d", 2);
	pd_log(PD_LOG_INFO, "an info %d", 3);
	pd_log(PD_LOG_DEBUG, "a debug %d", 4);
	slurp(self->file, self->out, sizeof(self->out));
	ASSERT_EQ(0, gethostname(host, sizeof(host)));
	host[strcspn(host, ".")] = '\0';
	snprintf(prefix, sizeof(prefix), "%s:%d:%d peerdirect ", host, (int)getpid(), gettid());
	EXPECT_NE(NULL, strstr(self->out, prefix)) TH_LOG("%s", self->out);
	EXPECT_NE(NULL, strstr(self->out, "peerdirect ERROR an error 1\n")) TH_LOG("%s", self->out);
	EXPECT_NE(NULL, strstr(self->out, "peerdirect WARN a warning 2\n")) TH_LOG("%s", self->out);
	EXPECT_EQ(NULL, strstr(self->out, "an info")) TH_LOG("%s", self->out);
	EXPECT_EQ(NULL, strstr(self->out, "a debug")) TH_LOG("%s", self->out);
	EXPECT_EQ(2, count(self->out, "\n"));

	log_to("debug", self->file);
	pd_log(PD_LOG_INFO, "an info %d", 3);
	pd_log(PD_LOG_DEBUG, "a debug %d", 4);
	slurp(self->file, self->out, sizeof(self->out));
	EXPECT_NE(NULL, strstr(self->out, "peerdirect INFO an info 3\n")) TH_LOG("%s", self->out);
	EXPECT_NE(NULL, strstr(self->out, "peerdirect DEBUG a debug 4\n")) TH_LOG("%s", self->out);

	log_to("error", self->file);
	EXPECT_EQ(PD_LOG_ERROR, pd_log_level);
	log_to("info", self->file);
	EXPECT_EQ(PD_LOG_INFO, pd_log_level);
	log_to("none", self->file);
	EXPECT_EQ(PD_LOG_OFF, pd_log_level);
}

TEST_F(log, unknown_level_is_said_once_and_logging_stays_off)
{
	int err[2], saved = dup(2);
	ssize_t n;

	ASSERT_EQ(0, pipe(err));
	ASSERT_EQ(2, dup2(err[1], 2));
	log_to("verbose", self->file);
	pd_log(PD_LOG_ERROR, "not written");
	dup2(saved, 2);
	close(err[1]);
	n = read(err[0], self->out, sizeof(self->out) - 1);
	self->out[n > 0 ? n : 0] = '\0';
	EXPECT_EQ(PD_LOG_OFF, pd_log_level);
	EXPECT_NE(NULL, strstr(self->out, "PEERDIRECT_LOG='verbose' is not one of error|warn|info|debug"))
		TH_LOG("%s", self->out);
	EXPECT_EQ(1, count(self->out, "\n"));
	EXPECT_NE(0, access(self->file, F_OK)) TH_LOG("no file while logging is off");
}

TEST_F(log, file_name_expands_host_and_pid)
{
	char pat[160], want[256], host[64];

	ASSERT_EQ(0, gethostname(host, sizeof(host)));
	host[strcspn(host, ".")] = '\0';
	snprintf(pat, sizeof(pat), "%s/pd.%%h.%%p.%%%%", self->dir);
	snprintf(want, sizeof(want), "%s/pd.%s.%d.%%", self->dir, host, (int)getpid());
	log_to("warn", pat);
	pd_log(PD_LOG_WARN, "to the expanded name");
	EXPECT_NE(NULL, strstr(slurp(want, self->out, sizeof(self->out)), "to the expanded name"))
		TH_LOG("%s", want);
}

TEST_F(log, unwritable_file_falls_back_to_stderr_and_says_so)
{
	int err[2], saved = dup(2);
	char bad[160];
	ssize_t n;

	snprintf(bad, sizeof(bad), "%s/no/such/dir/log", self->dir);
	ASSERT_EQ(0, pipe(err));
	ASSERT_EQ(2, dup2(err[1], 2));
	log_to("warn", bad);
	pd_log(PD_LOG_WARN, "still said");
	dup2(saved, 2);
	close(err[1]);
	n = read(err[0], self->out, sizeof(self->out) - 1);
	self->out[n > 0 ? n : 0] = '\0';
	EXPECT_NE(NULL, strstr(self->out, "No such file or directory: logging to stderr"))
		TH_LOG("%s", self->out);
	EXPECT_NE(NULL, strstr(self->out, "peerdirect WARN still said\n")) TH_LOG("%s", self->out);
}

static void burst_of(int n)
{
	int i;

	for (i = 0; i < n; i++)
		pd_log_rl(PD_LOG_WARN, "rate-limited %d", i);
}

TEST_F(log, rate_limit_drops_a_burst_and_counts_it_next_window)
{
	log_to("warn", self->file);
	pd_log_set_ratelimit(300, 3);
	burst_of(10);
	slurp(self->file, self->out, sizeof(self->out));
	EXPECT_EQ(3, count(self->out, "rate-limited")) TH_LOG("%s", self->out);
	EXPECT_NE(NULL, strstr(self->out, "rate-limited 2\n")) TH_LOG("%s", self->out);
	usleep(400 * 1000);
	burst_of(1);
	slurp(self->file, self->out, sizeof(self->out));
	EXPECT_EQ(4, count(self->out, "rate-limited")) TH_LOG("%s", self->out);
	EXPECT_NE(NULL, strstr(self->out, "rate-limited 0 (7 similar messages suppressed)\n"))
		TH_LOG("%s", self->out);
	/* Another call site has its own budget. */
	pd_log_rl(PD_LOG_WARN, "another site");
	EXPECT_NE(NULL, strstr(slurp(self->file, self->out, sizeof(self->out)), "another site"));
}

#define THREADS 4
#define LINES	200

static void *writer(void *arg)
{
	int i;

	(void)arg;
	for (i = 0; i < LINES; i++)
		pd_log(PD_LOG_INFO, "line %d of a thread, padded to be long enough to tear if split: %0100d",
		       i, i);
	return NULL;
}

TEST_F(log, lines_from_threads_stay_whole)
{
	static char big[THREADS * LINES * 300];
	pthread_t t[THREADS];
	const char *p;
	int i, lines = 0;

	log_to("info", self->file);
	for (i = 0; i < THREADS; i++)
		ASSERT_EQ(0, pthread_create(&t[i], NULL, writer, NULL));
	for (i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	slurp(self->file, big, sizeof(big));
	for (p = big; *p; p = strchr(p, '\n') + 1, lines++) {
		ASSERT_NE(NULL, strchr(p, '\n'));
		ASSERT_NE(NULL, strstr(p, " peerdirect INFO line "));
		ASSERT_TRUE(strstr(p, " peerdirect INFO line ") < strchr(p, '\n'));
	}
	EXPECT_EQ(THREADS * LINES, lines);
}

/* The fabric-open line names the provider, the run-time libfabric and the
 * path of each kind of memory with its reason. */
static void expect_open_line(struct __test_metadata *_metadata, const char *out,
			     const char *prov, const char *dmabuf_path)
{
	uint32_t v = fi_version();
	char want[256];

	snprintf(want, sizeof(want), "peerdirect INFO fabric open: provider %s, libfabric %u.%u (API ",
		 prov, FI_MAJOR(v), FI_MINOR(v));
	EXPECT_NE(NULL, strstr(out, want)) TH_LOG("want '%s' in: %s", want, out);
	EXPECT_NE(NULL, strstr(out, "; host memory: path host (fi_mr_reg); dma-buf: path ")) TH_LOG("%s", out);
	snprintf(want, sizeof(want), "dma-buf: path %s: ", dmabuf_path);
	EXPECT_NE(NULL, strstr(out, want)) TH_LOG("want '%s' in: %s", want, out);
}

TEST_F(log, fabric_open_says_provider_version_and_paths_on_tcp)
{
	struct pd_fabric_attr attr;
	struct pd_fabric *fab;
	uint64_t me;

	log_to("info", self->file);
	pd_fabric_attr_init(&attr);
	ASSERT_EQ(0, open_loopback(&attr, &fab, &me)) TH_LOG("%s", pd_last_error());
	slurp(self->file, self->out, sizeof(self->out));
	/* tcp copies with the CPU: mapped, with why not dmabuf (no
	 * FI_MR_DMABUF in 1.17, no FI_HMEM on tcp in 2.x). */
	expect_open_line(_metadata, self->out, pd_fabric_provider(fab), "mapped");
	EXPECT_NE(NULL, strstr(self->out, pd_have_fi_mr_dmabuf() ? "lacks FI_HMEM" :
			       "without FI_MR_DMABUF (needs 1.20)")) TH_LOG("%s", self->out);
	EXPECT_NE(NULL, strstr(self->out, "copies with the CPU\n")) TH_LOG("%s", self->out);
	/* tcp has a CQ wait fd: waits sleep on it after the default budget */
	EXPECT_NE(NULL, strstr(self->out, "; waits: poll 50 us, then sleep on the CQ's wait fd; "))
		TH_LOG("%s", self->out);
	EXPECT_EQ(1, count(self->out, "fabric open"));
	pd_fabric_close(fab);
}

/* shm with CMA: the library bounces dma-bufs, logs that plan at open and
 * each fallback at warn. */
TEST_F(log, shm_open_plans_bounce_and_the_fallback_is_a_warning)
{
	struct pd_fabric_attr attr;
	struct pd_fabric *fab;
	struct pd_mr *mr;
	uint64_t me;
	int fd = memfd_of(1 << 20, 1);

	ASSERT_LE(0, fd);
	log_to("info", self->file);
	pd_fabric_attr_init(&attr);
	attr.provider = "shm";
	ASSERT_EQ(0, open_loopback(&attr, &fab, &me)) TH_LOG("%s", pd_last_error());
	ASSERT_EQ(0, pd_mr_reg_dmabuf(fab, fd, 4096, 8192, 0, &mr)) TH_LOG("%s", pd_last_error());
	ASSERT_EQ(PD_PATH_BOUNCE, pd_mr_path(mr));
	slurp(self->file, self->out, sizeof(self->out));
	expect_open_line(_metadata, self->out, "shm", "bounce");
	/* shm has no CQ wait fd: waits nap instead, and the line says why */
	EXPECT_NE(NULL, strstr(self->out, "; waits: poll 50 us, then nap 20-160 us at a time: shm has no CQ wait fd (FI_WAIT_FD: "))
		TH_LOG("%s", self->out);
	EXPECT_NE(NULL, strstr(self->out, "peerdirect WARN dma-buf fd ")) TH_LOG("%s", self->out);
	EXPECT_NE(NULL, strstr(self->out, " [4096, +8192) on shm falls back to bounce: ")) TH_LOG("%s", self->out);
	EXPECT_NE(NULL, strstr(self->out, pd_mr_reason(mr))) TH_LOG("%s", self->out);
	pd_mr_dereg(mr);
	pd_fabric_close(fab);
	close(fd);
}

/* A forced bounce is the caller's choice, not a fallback: no warning. */
TEST_F(log, forced_bounce_is_not_a_warning)
{
	struct pd_fabric_attr attr;
	struct pd_fabric *fab;
	struct pd_mr *mr;
	uint64_t me;
	int fd = memfd_of(1 << 20, 1);

	ASSERT_LE(0, fd);
	log_to("warn", self->file);
	pd_fabric_attr_init(&attr);
	attr.path = PD_PATH_BOUNCE;
	ASSERT_EQ(0, open_loopback(&attr, &fab, &me)) TH_LOG("%s", pd_last_error());
	ASSERT_EQ(0, pd_mr_reg_dmabuf(fab, fd, 0, 8192, 0, &mr)) TH_LOG("%s", pd_last_error());
	EXPECT_STREQ("", slurp(self->file, self->out, sizeof(self->out)));
	pd_mr_dereg(mr);
	pd_fabric_close(fab);
	close(fd);
}

TEST_F(log, revocation_and_cap_eviction_are_warnings)
{
	struct pd_fabric_attr attr;
	struct pd_fabric *fab;
	struct pd_mr *a, *b;
	struct stat st;
	uint64_t me;
	int fa = memfd_of(1 << 16, 1), fb = memfd_of(1 << 16, 2);

	ASSERT_LE(0, fa);
	ASSERT_LE(0, fb);
	log_to("warn", self->file);
	pd_fabric_attr_init(&attr);
	ASSERT_EQ(0, open_loopback(&attr, &fab, &me)) TH_LOG("%s", pd_last_error());
	ASSERT_EQ(0, pd_mr_reg_dmabuf(fab, fa, 0, 4096, 0, &a));
	ASSERT_EQ(0, pd_mr_reg_dmabuf(fab, fb, 0, 4096, 0, &b));
	pd_mr_dereg(a);
	pd_mr_dereg(b);
	EXPECT_STREQ("", slurp(self->file, self->out, sizeof(self->out)));

	/* Two idle entries, a cap of one. */
	ASSERT_EQ(0, pd_fabric_set_cache_limits(fab, 1, 0));
	slurp(self->file, self->out, sizeof(self->out));
	EXPECT_NE(NULL, strstr(self->out, "peerdirect WARN registration cache: 1 idle registrations (4096 bytes) evicted to stay within its caps (1 entries, "))
		TH_LOG("%s", self->out);

	/* What a device's event reader calls on a revocation. */
	ASSERT_EQ(0, fstat(fb, &st));
	pd_fabric_revoked(fab, 7, st.st_dev, st.st_ino, PD_REASON_REVOKE);
	slurp(self->file, self->out, sizeof(self->out));
	EXPECT_NE(NULL, strstr(self->out, "peerdirect WARN revocation seen on ")) TH_LOG("%s", self->out);
	EXPECT_NE(NULL, strstr(self->out, "of device origin 0x7 (reason revoked): 1 registrations invalidated"))
		TH_LOG("%s", self->out);
	pd_fabric_origin_gone(fab, 7, PD_REASON_UNPLUG);
	slurp(self->file, self->out, sizeof(self->out));
	EXPECT_NE(NULL, strstr(self->out, "every dma-buf of device origin 0x7 (reason device removed)"))
		TH_LOG("%s", self->out);
	pd_fabric_close(fab);
	close(fa);
	close(fb);
}

/* Unset: not a byte anywhere, and the file named is never created, through
 * a fabric's whole life including a bounce fallback and an error. */
TEST_F(log, nothing_at_all_when_unset)
{
	struct pd_fabric_attr attr;
	struct pd_fabric *fab;
	struct pd_mr *mr, *none = NULL;
	int err[2], saved = dup(2), fd = memfd_of(1 << 20, 1);
	uint64_t me;
	ssize_t n;

	ASSERT_LE(0, fd);
	unsetenv("PEERDIRECT_LOG");
	setenv("PEERDIRECT_LOG_FILE", self->file, 1);
	pd_log_init();
	EXPECT_EQ(PD_LOG_OFF, pd_log_level);
	ASSERT_EQ(0, pipe(err));
	ASSERT_EQ(0, fcntl(err[0], F_SETFL, O_NONBLOCK));
	ASSERT_EQ(2, dup2(err[1], 2));
	pd_fabric_attr_init(&attr);
	attr.provider = "shm";
	ASSERT_EQ(0, open_loopback(&attr, &fab, &me));
	ASSERT_EQ(0, pd_mr_reg_dmabuf(fab, fd, 0, 8192, 0, &mr));
	EXPECT_EQ(PD_PATH_BOUNCE, pd_mr_path(mr));
	EXPECT_GT(0, pd_mr_reg_dmabuf(fab, -1, 0, 8192, 0, &none));
	pd_log(PD_LOG_ERROR, "not written");
	pd_mr_dereg(mr);
	pd_fabric_close(fab);
	dup2(saved, 2);
	close(err[1]);
	n = read(err[0], self->out, sizeof(self->out) - 1);
	EXPECT_GE(0, n) TH_LOG("stderr got %zd bytes", n);
	EXPECT_NE(0, access(self->file, F_OK));
	close(fd);
}

/* The waits clause says the budget in effect: the attr's over the
 * environment's, "always" never sleeping, 0 sleeping at once. */
TEST_F(log, the_open_line_says_the_wait_budget_in_effect)
{
	static const struct {
		int32_t attr;
		const char *env, *want;
	} cases[] = {
		{ 10, "300", "; waits: poll 10 us, then sleep on the CQ's wait fd; " },
		{ 0, "300", "; waits: poll 300 us, then sleep on the CQ's wait fd; " },
		{ 0, "always", "; waits: poll, never sleep; " },
		{ 0, "0", "; waits: poll 0 us, then sleep on the CQ's wait fd; " },
		{ PD_WAIT_SPIN_NONE, "300", "; waits: poll 0 us, then sleep on the CQ's wait fd; " },
		{ PD_WAIT_SPIN_ALWAYS, "0", "; waits: poll, never sleep; " },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct pd_fabric_attr attr;
		struct pd_fabric *fab;

		truncate(self->file, 0);
		log_to("info", self->file);
		setenv("PEERDIRECT_WAIT_SPIN_US", cases[i].env, 1);
		pd_fabric_attr_init_sz(&attr, sizeof(attr));
		attr.provider = "tcp";
		attr.wait_spin_us = cases[i].attr;
		ASSERT_EQ(0, pd_fabric_open(&attr, &fab)) TH_LOG("%s", pd_last_error());
		pd_fabric_close(fab);
		slurp(self->file, self->out, sizeof(self->out));
		EXPECT_NE(NULL, strstr(self->out, cases[i].want))
			TH_LOG("attr %d, env %s: %s", (int)cases[i].attr, cases[i].env, self->out);
	}
	unsetenv("PEERDIRECT_WAIT_SPIN_US");
}

TEST_HARNESS_MAIN
