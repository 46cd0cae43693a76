// SPDX-License-Identifier: MIT
/* The tools the VM tests drive: pd-xfer between two processes on the host
 * (memfd stands in for a dma-buf), and the tools' handling of bad input. */
#include <limits.h>

#include "kselftest_harness.h"
#include "peer_pair.h"

static void tool_path(char *out, size_t len, const char *tool)
{
	ssize_t n = readlink("/proc/self/exe", out, len - 64);
	char *slash;

	out[n > 0 ? n : 0] = '\0';
	slash = strrchr(out, '/');
	if (slash)
		*slash = '\0';
	slash = strrchr(out, '/');	/* build/tests/x -> build/tool */
	if (slash)
		strcpy(slash + 1, tool);
}

/* Runs both ranks; returns rank 0's exit status, rank 1's in *other, and
 * rank 0's output in out. */
static int run_xfer(const char *args, int *other, char *out, size_t outlen)
{
	char exe[PATH_MAX], cmd[PATH_MAX + 512];
	int port = 24000 + getpid() % 20000, status;
	size_t n;
	FILE *f;

	tool_path(exe, sizeof(exe), "pd-xfer");
	snprintf(cmd, sizeof(cmd), "%s --rank 1 --rendezvous 127.0.0.1:%d %s >/dev/null 2>&1",
		 exe, port, args);
	fflush(NULL);
	if (fork() == 0) {
		status = system(cmd);
		_exit(WIFEXITED(status) ? WEXITSTATUS(status) : 99);
	}
	snprintf(cmd, sizeof(cmd), "%s --rank 0 --rendezvous 127.0.0.1:%d %s 2>&1", exe, port, args);
	f = popen(cmd, "r");
	if (!f)
		return -1;
	n = fread(out, 1, outlen - 1, f);
	out[n] = '\0';
	status = pclose(f);
	wait(other);
	*other = WIFEXITED(*other) ? WEXITSTATUS(*other) : 99;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 99;
}

FIXTURE(xfer) {
	char out[16384];
	int other;
};

FIXTURE_VARIANT(xfer) {
	const char *args;
	const char *path_seen;
};

FIXTURE_VARIANT_ADD(xfer, memfd_tcp_mapped) {
	.args = "--memory memfd --provider tcp --size 5M --iters 3",
	.path_seen = "path mapped",
};
FIXTURE_VARIANT_ADD(xfer, memfd_tcp_bounce) {
	.args = "--memory memfd --provider tcp --path bounce --size 9M --iters 3",
	.path_seen = "path bounce",
};
FIXTURE_VARIANT_ADD(xfer, host_shm) {
	.args = "--memory host --provider shm --size 1 --iters 2",
	.path_seen = "path host",
};

FIXTURE_SETUP(xfer) {}
FIXTURE_TEARDOWN(xfer) {}

TEST_F(xfer, checksums_match_every_iteration)
{
	EXPECT_EQ(0, run_xfer(variant->args, &self->other, self->out, sizeof(self->out)))
		TH_LOG("%s", self->out);
	EXPECT_EQ(0, self->other);
	EXPECT_NE(NULL, strstr(self->out, variant->path_seen)) TH_LOG("%s", self->out);
	EXPECT_NE(NULL, strstr(self->out, "error 0 mismatch 0"));
	EXPECT_EQ(NULL, strstr(self->out, "MISMATCH"));
}

TEST(xfer_refuses_bad_arguments)
{
	char exe[PATH_MAX], cmd[PATH_MAX + 128];

	tool_path(exe, sizeof(exe), "pd-xfer");
	snprintf(cmd, sizeof(cmd), "%s --rank 2 --rendezvous 127.0.0.1:1 >/dev/null 2>&1", exe);
	EXPECT_EQ(3, WEXITSTATUS(system(cmd)));
	snprintf(cmd, sizeof(cmd), "%s --rank 0 --rendezvous 127.0.0.1:1 --size 0 >/dev/null 2>&1", exe);
	EXPECT_EQ(3, WEXITSTATUS(system(cmd)));
	/* No module on the host: a setup failure, not a hang. */
	snprintf(cmd, sizeof(cmd), "%s --rank 0 --rendezvous 127.0.0.1:1 --memory device:0 --timeout 200 >/dev/null 2>&1",
		 exe);
	EXPECT_EQ(3, WEXITSTATUS(system(cmd)));
	tool_path(exe, sizeof(exe), "pd-bench");
	snprintf(cmd, sizeof(cmd), "%s warp >/dev/null 2>&1", exe);
	EXPECT_EQ(2, WEXITSTATUS(system(cmd)));
	snprintf(cmd, sizeof(cmd), "%s bw --sizes 4Q >/dev/null 2>&1", exe);
	EXPECT_EQ(2, WEXITSTATUS(system(cmd)));
}

TEST_HARNESS_MAIN
