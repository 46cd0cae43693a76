// SPDX-License-Identifier: GPL-2.0
/*
 * pdctl against the module: list, info, exports with an importer attached
 * (the test importer, pinned), allocs, revoke (admin), reset, events
 * --follow through its tracefs instance, version; the --json fields and the
 * exit codes pdctl(8) documents.  pdctl is the static build next to this
 * binary (build/selftests/pdctl).
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdarg.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include "kselftest_harness.h"
#include "pd_test.h"

static char pdctl[256];

/* Runs "pdctl ARGS", output into @out; returns its exit status. */
static int run(char *out, size_t len, const char *fmt, ...)
{
	char args[512], cmd[1024];
	va_list ap;
	size_t n;
	FILE *f;
	int st;

	va_start(ap, fmt);
	vsnprintf(args, sizeof(args), fmt, ap);
	va_end(ap);
	snprintf(cmd, sizeof(cmd), "%s %s 2>&1", pdctl, args);
	fflush(NULL);
	f = popen(cmd, "r");
	if (!f)
		return -1;
	n = fread(out, 1, len - 1, f);
	out[n] = 0;
	st = pclose(f);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

FIXTURE(admin) {
	int fd;
	struct peerdirect_query q;
	char importer[64];
	char out[65536];
};

FIXTURE_SETUP(admin)
{
	struct pdti_device d;
	char *slash;
	ssize_t n;

	n = readlink("/proc/self/exe", pdctl, sizeof(pdctl) - 8);
	ASSERT_LT(0, n);
	pdctl[n] = 0;
	slash = strrchr(pdctl, '/');
	strcpy(slash + 1, "pdctl");
	if (access(pdctl, X_OK))
		SKIP(return, "no %s", pdctl);
	self->fd = pd_open(PD_DEV0);
	ASSERT_LE(0, self->fd);
	ASSERT_EQ(0, pd_query(self->fd, &self->q));
	if (pd_pci_function("peerdirect0", &d))
		snprintf(self->importer, sizeof(self->importer), "pd_test_importer");
	else
		snprintf(self->importer, sizeof(self->importer), "%04x:%02x:%02x.%x",
			 d.domain, d.bus, d.devfn >> 3, d.devfn & 7);
}

FIXTURE_TEARDOWN(admin)
{
	close(self->fd);
}

static int has(const char *out, const char *fmt, ...)
{
	char want[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(want, sizeof(want), fmt, ap);
	va_end(ap);
	return strstr(out, want) != NULL;
}

TEST_F(admin, list_info_version)
{
	EXPECT_EQ(0, run(self->out, sizeof(self->out), "--json list"));
	EXPECT_TRUE(has(self->out, "{\"devices\":[{\"device\":\"peerdirect0\",\"index\":0,"
			"\"backend\":\"%s\",\"abi_version\":\"%d.%d\",\"state\":\"live\","
			"\"mem_size\":%llu,", self->q.backend == PEERDIRECT_BACKEND_SIM ? "sim" : "pci-bar",
			PEERDIRECT_ABI_MAJOR, PEERDIRECT_ABI_MINOR,
			(unsigned long long)self->q.mem_size)) TH_LOG("%s", self->out);
	EXPECT_TRUE(has(self->out, "\"page_size\":%llu,\"quota\":%llu,",
			(unsigned long long)self->q.page_size, (unsigned long long)self->q.quota));
	EXPECT_TRUE(has(self->out, "\"features\":%llu,\"feature_names\":[\"export\",\"pin\",",
			(unsigned long long)self->q.features));
	EXPECT_TRUE(has(self->out, "\"revoked\":{\"free\":"));
	EXPECT_EQ(0, run(self->out, sizeof(self->out), "list"));
	EXPECT_TRUE(has(self->out, "DEVICE")) TH_LOG("%s", self->out);
	EXPECT_TRUE(has(self->out, "peerdirect0 "));

	EXPECT_EQ(0, run(self->out, sizeof(self->out), "--json info 0"));
	EXPECT_TRUE(has(self->out, "\"max_exports\":%u,\"max_events\":%u,\"parent\":",
			self->q.max_exports, self->q.max_events)) TH_LOG("%s", self->out);
	EXPECT_EQ(0, run(self->out, sizeof(self->out), "info"));
	EXPECT_TRUE(has(self->out, "  mem_free "));
	EXPECT_EQ(3, run(self->out, sizeof(self->out), "-d 9 info"));
	EXPECT_EQ(2, run(self->out, sizeof(self->out), "info x"));
	/* a simulated device says so; options after the command; the node's
	 * path names the device; a failure under --json is an object */
	EXPECT_EQ(0, run(self->out, sizeof(self->out), "list --json -d /dev/peerdirect0"));
	EXPECT_TRUE(has(self->out, "\"simulated\":%s,",
			self->q.backend == PEERDIRECT_BACKEND_SIM ? "true" : "false")) TH_LOG("%s", self->out);
	EXPECT_EQ(0, run(self->out, sizeof(self->out), "list"));
	EXPECT_EQ(self->q.backend == PEERDIRECT_BACKEND_SIM,
		  has(self->out, "(simulated: not an accelerator)")) TH_LOG("%s", self->out);
	EXPECT_EQ(3, run(self->out, sizeof(self->out), "info --json -d /dev/null"));
	EXPECT_TRUE(has(self->out, "{\"error\":\"/dev/null: not a peerdirect device node")) TH_LOG("%s", self->out);

	EXPECT_EQ(0, run(self->out, sizeof(self->out), "--json version"));
	EXPECT_TRUE(has(self->out, "\"uapi\":\"%d.%d\",\"module\":\"", PEERDIRECT_ABI_MAJOR,
			PEERDIRECT_ABI_MINOR)) TH_LOG("%s", self->out);
	EXPECT_TRUE(has(self->out, "{\"device\":\"peerdirect0\",\"abi_version\":\"%d.%d\"}",
			PEERDIRECT_ABI_MAJOR, PEERDIRECT_ABI_MINOR));
}

/* An export with a pinned importer, as exports/allocs show it; then revoke. */
TEST_F(admin, exports_allocs_and_revoke)
{
	size_t ps = self->q.page_size;
	int64_t h = pd_alloc(self->fd, 2 * ps);
	struct peerdirect_event ev;
	bool revocable;
	__u64 id;
	int d, imp, rc;

	ASSERT_LT(0, h);
	d = pd_export_id(self->fd, h, ps, ps, PEERDIRECT_EXPORT_RDWR, &id);
	ASSERT_LE(0, d);
	imp = pdti_open("peerdirect0");
	ASSERT_LE(0, imp);
	ASSERT_EQ(0, pdti_import(imp, d, pd_pinned_flags(&self->q), 0));

	EXPECT_EQ(0, run(self->out, sizeof(self->out), "--json exports"));
	EXPECT_TRUE(has(self->out, "{\"device\":\"peerdirect0\",\"export_id\":%llu,\"inode\":",
			(unsigned long long)id)) TH_LOG("%s", self->out);
	EXPECT_TRUE(has(self->out, "\"handle\":%lld,\"offset\":%zu,\"length\":%zu,\"tgid\":%d,"
			"\"comm\":\"admin\",\"uid\":0,\"rdonly\":false,\"revoked\":false,"
			"\"reason\":null,\"busy\":false,\"freed\":false,\"attachments\":1,",
			(long long)h, ps, ps, getpid())) TH_LOG("%s", self->out);
	EXPECT_TRUE(has(self->out, "\"maps\":1,\"mapped_bytes\":%zu,\"created_ns\":", ps));
	EXPECT_TRUE(has(self->out, "\"importers\":[{\"device\":\"%s\",\"mode\":\"pinned\","
			"\"pinned\":true,\"dynamic\":true,\"peer2peer\":true,", self->importer))
		TH_LOG("%s", self->out);
	EXPECT_TRUE(has(self->out, "\"maps\":1,\"mapped_bytes\":%zu,\"since_ns\":", ps));
	EXPECT_TRUE(has(self->out, "],\"truncated\":false}"));
	/* uapi 2.2 says whether a revoke makes the importer let go; the revoke
	 * below must then agree: pending (8) exactly when it cannot. */
	revocable = has(self->out, "\"revocable\":true,\"on_revoke\":\"unmaps\",");
	EXPECT_TRUE(revocable ||
		    has(self->out, "\"revocable\":false,\"on_revoke\":\"waits, then quarantines\","))
		TH_LOG("%s", self->out);

	EXPECT_EQ(0, run(self->out, sizeof(self->out), "exports"));
	EXPECT_TRUE(has(self->out, "  importer %s", self->importer)) TH_LOG("%s", self->out);
	EXPECT_TRUE(has(self->out, " revocable=%s (a revoke %s)", revocable ? "yes" : "no",
			revocable ? "unmaps" : "waits, then quarantines")) TH_LOG("%s", self->out);
	/* the doctor says the same of this importer, and what a revoke does */
	run(self->out, sizeof(self->out), "-d 0 --json doctor --allow-sim");
	EXPECT_TRUE(revocable ?
		    has(self->out, "{\"check\":\"revoke\",\"subject\":\"peerdirect0\","
			"\"status\":\"ok\",\"reason\":\"1 importers now, each revocable") :
		    has(self->out, "{\"check\":\"revoke\",\"subject\":\"peerdirect0\","
			"\"status\":\"ok\",\"reason\":\"1 of 1 importers now cannot be revoked "
			"(pinned without the revocable op, as EFA): %s; a revoke of their memory "
			"waits revoke_timeout_ms=", self->importer))
		TH_LOG("%s", self->out);

	EXPECT_EQ(0, run(self->out, sizeof(self->out), "--json allocs"));
	EXPECT_TRUE(has(self->out, "{\"device\":\"peerdirect0\",\"tgid\":%d,\"comm\":\"admin\","
			"\"uid\":0,\"handle\":%lld,\"exports\":1,\"revoked_exports\":0,"
			"\"exported_bytes\":%zu,\"mapped_bytes\":%zu}", getpid(), (long long)h, ps, ps))
		TH_LOG("%s", self->out);

	/* Unknown export: 6.  Bad id, or no -d (ids are per device): 2.  The
	 * export: 0, or 8 if still mapped. */
	EXPECT_EQ(6, run(self->out, sizeof(self->out), "-d 0 revoke 999999"));
	EXPECT_EQ(2, run(self->out, sizeof(self->out), "-d 0 revoke abc"));
	EXPECT_EQ(2, run(self->out, sizeof(self->out), "revoke %llu", (unsigned long long)id));
	rc = run(self->out, sizeof(self->out), "--json -d /dev/peerdirect0 revoke %llu",
		 (unsigned long long)id);
	EXPECT_EQ(revocable ? 0 : 8, rc) TH_LOG("rc %d: %s", rc, self->out);
	EXPECT_TRUE(has(self->out, "{\"device\":\"peerdirect0\",\"export_id\":%llu,\"revoked\":1,"
			"\"pending\":%d}", (unsigned long long)id, rc == 8)) TH_LOG("%s", self->out);
	ASSERT_EQ(sizeof(ev), read(self->fd, &ev, sizeof(ev)));
	EXPECT_EQ(PEERDIRECT_REASON_ADMIN, ev.reason);
	EXPECT_EQ(0, run(self->out, sizeof(self->out), "--json exports"));
	EXPECT_TRUE(has(self->out, "\"revoked\":true,\"reason\":\"admin\"")) TH_LOG("%s", self->out);

	close(imp);
	close(d);
	pd_free(self->fd, h);
}

/*
 * pdctl ps: this process's row.  With the LIST of allocations (uapi 2.2)
 * both allocations count, the unexported one too; on the export list only
 * the exported one does (as far as its export reaches), and the other's
 * bytes are in the device's "not attributed" row.
 */
TEST_F(admin, ps_counts_this_process)
{
	size_t ps = self->q.page_size;
	int64_t h = pd_alloc(self->fd, 2 * ps), h2 = pd_alloc(self->fd, 3 * ps);
	bool allocs = self->q.features & PEERDIRECT_FEAT_LIST_ALLOCS;
	__u64 id;
	int d;

	ASSERT_LT(0, h);
	ASSERT_LT(0, h2);
	d = pd_export_id(self->fd, h, ps, ps, PEERDIRECT_EXPORT_RDWR, &id);
	ASSERT_LE(0, d);
	EXPECT_EQ(0, run(self->out, sizeof(self->out), "-d 0 ps --json"));
	EXPECT_TRUE(has(self->out, "{\"source\":\"%s\",\"processes\":[",
			allocs ? "allocations" : "exports")) TH_LOG("%s", self->out);
	EXPECT_TRUE(has(self->out, "{\"device\":\"peerdirect0\",\"pid\":%d,\"comm\":"
			"\"admin\",\"uid\":0,\"allocations\":%d,\"exports\":1,\"bytes\":%zu}",
			getpid(), allocs ? 2 : 1, allocs ? 5 * ps : 2 * ps)) TH_LOG("%s", self->out);
	EXPECT_TRUE(has(self->out, "\"not_attributed\":[{\"device\":\"peerdirect0\",\"bytes\":"))
		TH_LOG("%s", self->out);
	EXPECT_EQ(0, run(self->out, sizeof(self->out), "ps"));
	EXPECT_TRUE(has(self->out, "%7d admin", getpid())) TH_LOG("%s", self->out);
	EXPECT_EQ(2, run(self->out, sizeof(self->out), "ps extra"));
	close(d);
	pd_free(self->fd, h);
	pd_free(self->fd, h2);
}

/* A process names itself: its name reaches root's terminal escaped. */
TEST_F(admin, process_names_are_terminal_safe)
{
	size_t ps = self->q.page_size;
	int64_t h = pd_alloc(self->fd, ps);
	const char *cmds[] = { "exports", "allocs", "ps" };
	unsigned int i;
	__u64 id;
	int d;

	ASSERT_LT(0, h);
	d = pd_export_id(self->fd, h, 0, ps, PEERDIRECT_EXPORT_RDWR, &id);
	ASSERT_LE(0, d);
	ASSERT_EQ(0, prctl(PR_SET_NAME, "x\033]0;owned\a"));
	for (i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		EXPECT_EQ(0, run(self->out, sizeof(self->out), "%s", cmds[i]));
		EXPECT_EQ(NULL, strchr(self->out, '\033')) TH_LOG("pdctl %s", cmds[i]);
		EXPECT_TRUE(has(self->out, "x?]0;owned?")) TH_LOG("pdctl %s: %s", cmds[i], self->out);
	}
	close(d);
	pd_free(self->fd, h);
}

/*
 * Not root: the device node is 0660 root, so permission denied (4).  pdctl
 * is run from an fd opened as root: the payload directory may be closed to
 * other users.
 */
TEST_F(admin, unprivileged_is_permission_denied)
{
	int exe = open(pdctl, O_RDONLY | O_CLOEXEC), status;
	pid_t pid;

	ASSERT_LE(0, exe);
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		char *const args[] = { "pdctl", "-d", "0", "reset", NULL };
		char *const env[] = { NULL };
		int null = open("/dev/null", O_WRONLY);

		if (null < 0 || dup2(null, 1) < 0 || dup2(null, 2) < 0)
			_exit(11);
		if (setresgid(65534, 65534, 65534) || setresuid(65534, 65534, 65534))
			_exit(10);
		fexecve(exe, args, env);
		_exit(12);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_TRUE(WIFEXITED(status));
	EXPECT_EQ(4, WEXITSTATUS(status));
	close(exe);
}

TEST_F(admin, reset_needs_a_device_and_reports)
{
	int64_t h = pd_alloc(self->fd, self->q.page_size);
	int d, rc;

	ASSERT_LT(0, h);
	d = pd_export(self->fd, h, 0, self->q.page_size);
	ASSERT_LE(0, d);
	EXPECT_EQ(2, run(self->out, sizeof(self->out), "reset"));
	rc = run(self->out, sizeof(self->out), "--json -d 0 reset");
	EXPECT_EQ(0, rc) TH_LOG("%s", self->out);
	EXPECT_TRUE(has(self->out, "{\"device\":\"peerdirect0\",\"revoked\":")) TH_LOG("%s", self->out);
	EXPECT_TRUE(has(self->out, ",\"pending\":0}"));
	close(d);
	pd_free(self->fd, h);
}

/* events --follow: its tracefs instance, a revoke's records, cleanup. */
TEST_F(admin, events_follow_sees_a_revoke)
{
	char line[1024], enable[256], inst[128], want[64];
	int p[2], got = 0, status;
	struct stat st;
	FILE *f;
	int64_t h;
	pid_t pid;
	__u64 id;
	int d, i;

	if (stat("/sys/kernel/tracing/instances", &st) &&
	    stat("/sys/kernel/debug/tracing/instances", &st))
		SKIP(return, "no tracefs instances");
	ASSERT_EQ(0, pipe(p));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		dup2(p[1], 1);
		close(p[0]);
		close(p[1]);
		execl(pdctl, pdctl, "--json", "events", "--follow", (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	snprintf(inst, sizeof(inst), "/sys/kernel/tracing/instances/pdctl-%d", pid);
	if (stat("/sys/kernel/tracing/instances", &st))
		snprintf(inst, sizeof(inst), "/sys/kernel/debug/tracing/instances/pdctl-%d", pid);
	snprintf(enable, sizeof(enable), "%s/events/peerdirect/peerdirect_event/enable", inst);
	for (i = 0; i < 100; i++) {
		char v[8] = "";
		int e = open(enable, O_RDONLY);

		if (e >= 0) {
			if (read(e, v, sizeof(v)) < 0)
				v[0] = 0;
			close(e);
		}
		if (v[0] == '1')
			break;
		usleep(50000);
	}
	ASSERT_GT(100, i) TH_LOG("pdctl never enabled %s", enable);

	h = pd_alloc(self->fd, self->q.page_size);
	ASSERT_LT(0, h);
	d = pd_export_id(self->fd, h, 0, self->q.page_size, PEERDIRECT_EXPORT_RDWR, &id);
	ASSERT_LE(0, d);
	ASSERT_EQ(0, pd_revoke(self->fd, PEERDIRECT_REVOKE_EXPORT, 0, id, NULL));

	f = fdopen(p[0], "r");
	ASSERT_NE(NULL, f);
	snprintf(want, sizeof(want), "\"export\":%llu,", (unsigned long long)id);
	alarm(20);
	while (got != 3 && fgets(line, sizeof(line), f)) {
		if (!strstr(line, want))
			continue;
		if (strstr(line, "{\"event\":\"revoke\",\"ts\":") && strstr(line, "\"reason\":\"revoke\""))
			got |= 1;
		if (strstr(line, "{\"event\":\"event\",") && strstr(line, "\"state\":\"queued\""))
			got |= 2;
	}
	alarm(0);
	EXPECT_EQ(3, got) TH_LOG("last line: %s", line);
	kill(pid, SIGTERM);
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status));
	EXPECT_NE(0, stat(inst, &st)) TH_LOG("%s left behind", inst);
	fclose(f);
	close(d);
	pd_free(self->fd, h);
}

TEST_HARNESS_MAIN
