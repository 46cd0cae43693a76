// SPDX-License-Identifier: MIT
/* The tools the VM tests drive: pd-xfer between two processes on the host
 * (memfd stands in for a dma-buf), pd-bench's latency and msgrate modes,
 * and the tools' handling of bad input. */
#include <limits.h>

#include "kselftest_harness.h"
#include "peer_pair.h"
#include "../tools/listen_port.h"
#include "../tools/tool_args.h"
#include "../tools/tool_device.h"
#include "tool_run.h"

/* Runs both ranks; returns rank 0's exit status, rank 1's in *other, and
 * rank 0's output in out. */
static int run_xfer(const char *args, int *other, char *out, size_t outlen)
{
	char exe[PATH_MAX], cmd[PATH_MAX + 512];
	int port = listen_port(), status;

	if (port <= 0) {
		snprintf(out, outlen, "no free port for the rendezvous");
		*other = 99;
		return 99;
	}
	tool_path(exe, sizeof(exe), "pd-xfer");
	snprintf(cmd, sizeof(cmd), "%s --rank 1 --rendezvous 127.0.0.1:%d %s >/dev/null 2>&1",
		 exe, port, args);
	fflush(NULL);
	if (fork() == 0) {
		status = system(cmd);
		_exit(WIFEXITED(status) ? WEXITSTATUS(status) : 99);
	}
	snprintf(cmd, sizeof(cmd), "%s --rank 0 --rendezvous 127.0.0.1:%d %s 2>&1", exe, port, args);
	status = run_capture(cmd, out, outlen);
	wait(other);
	*other = WIFEXITED(*other) ? WEXITSTATUS(*other) : 99;
	return status;
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

/*
 * --remap: new pages at the buffer's address between iterations, the
 * buffer registered again each time.  tcp copies by address, so the bytes
 * cannot show a stale registration here; what this checks is the policy:
 * tcp pins nothing, so its idle host entry is kept and hit (the VM's verbs
 * run checks the opposite, and the bytes).
 */
TEST(xfer_remap_on_tcp_keeps_and_hits_the_idle_host_entry)
{
	char out[16384];
	int other;

	EXPECT_EQ(0, run_xfer("--memory host --provider tcp --size 1M --iters 3 --remap", &other,
			      out, sizeof(out))) TH_LOG("%s", out);
	EXPECT_EQ(0, other);
	EXPECT_NE(NULL, strstr(out, "summary: ok 3 error 0 mismatch 0; cache lookups 3 hits 2 misses 1"))
		TH_LOG("%s", out);
}

/* tool's exit status for args, if its output holds want; 98 if not. */
static int tool_says(const char *tool, const char *args, const char *want)
{
	char exe[PATH_MAX], cmd[PATH_MAX + 256], out[4096];
	int st;

	tool_path(exe, sizeof(exe), tool);
	snprintf(cmd, sizeof(cmd), "%s %s 2>&1", exe, args);
	st = run_capture(cmd, out, sizeof(out));
	if (strstr(out, want))
		return st;
	fprintf(stderr, "# %s %s: no \"%s\" in:\n%s", tool, args, want, out);
	return 98;
}

TEST(hostport_takes_names_ipv4_and_bracketed_ipv6)
{
	static const struct { const char *spec, *host; int port; } good[] = {
		{ "node1:29500", "node1", 29500 }, { "10.9.0.1:1", "10.9.0.1", 1 },
		{ "[::1]:65535", "::1", 65535 }, { "[fe80::1%eth0]:80", "fe80::1%eth0", 80 },
	};
	static const char *const bad[] = { "node1", "node1:", ":80", "node1:0", "node1:65536",
					   "node1:80x", "node1:-1", "[]:80", "node1: 80", "fe80::1", "::1:80" };
	static char host[16];	/* static: the harness longjmps */
	static uint16_t port;

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		EXPECT_EQ(0, tool_hostport("t", "--rendezvous", good[i].spec, host, sizeof(host), &port))
			TH_LOG("%s", good[i].spec);
		EXPECT_STREQ(good[i].host, host);
		EXPECT_EQ(good[i].port, port);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		EXPECT_EQ(-1, tool_hostport("t", "--rendezvous", bad[i], host, sizeof(host), &port))
			TH_LOG("%s", bad[i]);
	}
	/* a host longer than the buffer is refused, not cut */
	EXPECT_EQ(-1, tool_hostport("t", "--rendezvous", "a-very-long-host-name:1", host, sizeof(host), &port));
}

TEST(numbers_are_whole_decimal_and_in_range)
{
	static const char *const bad[] = { "", "x", "5x", " 5", "+5", "-0", "-1", "0x10", "65536",
					   "99999999999999999999" };
	static int v;	/* static: the harness longjmps */

	EXPECT_EQ(0, tool_number("0", 0, 65535, &v));
	EXPECT_EQ(0, v);
	EXPECT_EQ(0, tool_number("065535", 0, 65535, &v));	/* decimal, not octal */
	EXPECT_EQ(65535, v);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		EXPECT_EQ(-1, tool_number(bad[i], 0, 65535, &v)) TH_LOG("'%s'", bad[i]);
	}
	EXPECT_EQ(-1, tool_number("5", 6, 9, &v));	/* below lo */
	EXPECT_EQ(-1, tool_number("0", -1, 9, &v));	/* lo < 0 is not for these */
}

TEST(xfer_refuses_bad_arguments)
{
	char exe[PATH_MAX], cmd[PATH_MAX + 128];

	tool_path(exe, sizeof(exe), "pd-xfer");
	snprintf(cmd, sizeof(cmd), "%s --rank 2 --rendezvous 127.0.0.1:1 >/dev/null 2>&1", exe);
	EXPECT_EQ(2, WEXITSTATUS(system(cmd)));
	snprintf(cmd, sizeof(cmd), "%s --rank 0 --rendezvous 127.0.0.1:1 --size 0 >/dev/null 2>&1", exe);
	EXPECT_EQ(2, WEXITSTATUS(system(cmd)));
	snprintf(cmd, sizeof(cmd), "%s --rank 0 --rendezvous 127.0.0.1:1 --memory memfd --remap >/dev/null 2>&1",
		 exe);
	EXPECT_EQ(2, WEXITSTATUS(system(cmd)));
	/* Numbers whole and in range, ports too: each refused (exit 2, pd-xfer's
	 * usage), named. */
	static const char *const bad[][3] = {
		{ "pd-xfer", "--rank 0 --rendezvous 127.0.0.1:99999",
		  "pd-xfer: --rendezvous 127.0.0.1:99999: want HOST:PORT with a port from 1 to 65535" },
		{ "pd-xfer", "--rank 0 --rendezvous 127.0.0.1:x", "want HOST:PORT with a port" },
		{ "pd-xfer", "--rank 0 --rendezvous :5000", "pd-xfer: --rendezvous :5000: want HOST:PORT" },
		{ "pd-xfer", "--rank 1x --rendezvous 127.0.0.1:1", "pd-xfer: --rank 1x: want a whole number from 0 to 1" },
		{ "pd-xfer", "--rank 0 --rendezvous 127.0.0.1:1 --iters 0", "pd-xfer: --iters 0: want a whole number from 1" },
		{ "pd-xfer", "--rank 0 --rendezvous 127.0.0.1:1 --timeout 5s",
		  "pd-xfer: --timeout 5s: want a whole number from 1" },
		{ "pd-xfer", "--rank 0 --rendezvous 127.0.0.1:1 --memory device:zero --timeout 200",
		  "memory 'device:zero': zero: want an index, a path or pci:DDDD:BB:DD.F" },
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		EXPECT_EQ(strcmp(bad[i][0], "pd-xfer") ? 3 : 2, tool_says(bad[i][0], bad[i][1], bad[i][2]))
			TH_LOG("%s %s", bad[i][0], bad[i][1]);
	}
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

/* pd-bench with args (and an environment prefix); its exit status, and
 * stdout and stderr together in out. */
static int run_bench(const char *env, const char *args, char *out, size_t outlen)
{
	char exe[PATH_MAX], cmd[PATH_MAX + 512];

	tool_path(exe, sizeof(exe), "pd-bench");
	snprintf(cmd, sizeof(cmd), "%s %s %s 2>&1", env, exe, args);
	return run_capture(cmd, out, outlen);
}

/* The figure in column col (0: the size) of the row for size, -1 if there
 * is no such row, -2 if the cell is no number ('-').  Figures are checked
 * for shape (a number, not negative), never for speed: on a loaded machine
 * a bandwidth may print as 0.0. */
static double bench_cell(const char *out, size_t size, int col)
{
	const char *line;
	char *end;
	double v;
	int i;

	for (line = out; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
		const char *p = line;

		if (*line == '#' || strtoull(line, &end, 10) != size || end == line || (*end != ' ' && *end != '\t'))
			continue;
		for (i = 0; i < col; i++) {
			p += strspn(p, " \t");
			p += strcspn(p, " \t\n");
		}
		p += strspn(p, " \t");
		v = strtod(p, &end);
		return end == p ? -2 : v;
	}
	return -1;
}

/* The command line, echoed as the first line of the figures. */
static bool echoes(const char *out, const char *args)
{
	const char *l = strstr(out, args);

	while (l && l > out && l[-1] != '\n')
		l--;
	return l && l[0] == '#' && l[1] == ' ' && strstr(l, "pd-bench ") &&
	       strstr(l, args) < strchr(l, '\n');
}

static bool have_fi_pingpong(void)
{
	return system("command -v fi_pingpong >/dev/null 2>&1") == 0;
}

FIXTURE(bench) {
	char out[16384];
};

FIXTURE_VARIANT(bench) {
	const char *provider;
};

FIXTURE_VARIANT_ADD(bench, tcp) { .provider = "tcp" };
FIXTURE_VARIANT_ADD(bench, shm) { .provider = "shm" };

FIXTURE_SETUP(bench) {}
FIXTURE_TEARDOWN(bench) {}

/* A row per size with a figure, and fi_pingpong's beside it on the same
 * provider where it is installed.  No timing is asserted. */
TEST_F(bench, latency_rows_beside_fi_pingpong)
{
	char args[256];
	size_t sizes[2] = { 8, 4096 };
	int i;

	snprintf(args, sizeof(args), "latency --provider %s --sizes 8,4K --iters 50 --repeats 3",
		 variant->provider);
	ASSERT_EQ(0, run_bench("", args, self->out, sizeof(self->out))) TH_LOG("%s", self->out);
	EXPECT_TRUE(echoes(self->out, args)) TH_LOG("%s", self->out);
	EXPECT_NE(NULL, strstr(self->out, "# fi_pingpong client: ")) TH_LOG("%s", self->out);
	for (i = 0; i < 2; i++) {
		EXPECT_LE(0, bench_cell(self->out, sizes[i], 1)) TH_LOG("%zu: %s", sizes[i], self->out);
		EXPECT_LE(0, bench_cell(self->out, sizes[i], 2));
		EXPECT_LE(0, bench_cell(self->out, sizes[i], 4));
		if (have_fi_pingpong()) {
			EXPECT_LE(0, bench_cell(self->out, sizes[i], 5)) TH_LOG("%s", self->out);
			EXPECT_LE(0, bench_cell(self->out, sizes[i], 6));
		}
	}
	if (have_fi_pingpong())
		EXPECT_EQ(NULL, strstr(self->out, "not available")) TH_LOG("%s", self->out);
}

/* Without fi_pingpong the mode says so and still gives its own figures. */
TEST_F(bench, latency_without_fi_pingpong)
{
	char args[256];

	snprintf(args, sizeof(args), "latency --provider %s --sizes 64 --iters 20 --repeats 1",
		 variant->provider);
	ASSERT_EQ(0, run_bench("PD_BENCH_FI_PINGPONG=/nonexistent/fi_pingpong", args, self->out,
			       sizeof(self->out))) TH_LOG("%s", self->out);
	EXPECT_NE(NULL, strstr(self->out, "# fi_pingpong: not available (")) TH_LOG("%s", self->out);
	EXPECT_NE(NULL, strstr(self->out, "No such file")) TH_LOG("%s", self->out);
	EXPECT_LE(0, bench_cell(self->out, 64, 1)) TH_LOG("%s", self->out);
	EXPECT_EQ(-2, bench_cell(self->out, 64, 5));	/* "-" */
}

TEST_F(bench, msgrate_rows)
{
	char args[256];

	snprintf(args, sizeof(args), "msgrate --provider %s --sizes 8 --window 16 --iters 20",
		 variant->provider);
	ASSERT_EQ(0, run_bench("", args, self->out, sizeof(self->out))) TH_LOG("%s", self->out);
	EXPECT_TRUE(echoes(self->out, args)) TH_LOG("%s", self->out);
	EXPECT_EQ(16, bench_cell(self->out, 8, 1)) TH_LOG("%s", self->out);
	EXPECT_EQ(20, bench_cell(self->out, 8, 2));
	EXPECT_LE(0, bench_cell(self->out, 8, 3)) TH_LOG("%s", self->out);
	EXPECT_NE(NULL, strstr(self->out, "# no libfabric reference for message rate"));
}

/* Direct against bounce on a memfd dma-buf: both paths named, a row per
 * size with both figures, and one checked message per path with 0 wrong
 * bytes (each path has its own buffers, so a receive that wrote nothing
 * would count them all). */
TEST_F_TIMEOUT(bench, paths_rows_checked, 120)
{
	char args[256];

	/* --total 8M: 512 MiB per run by default, too slow under TSan. */
	snprintf(args, sizeof(args), "paths --memory memfd --provider %s --sizes 4K,256K --repeats 3 --total 8M",
		 variant->provider);
	ASSERT_EQ(0, run_bench("", args, self->out, sizeof(self->out))) TH_LOG("%s", self->out);
	EXPECT_TRUE(echoes(self->out, args)) TH_LOG("%s", self->out);
	EXPECT_NE(NULL, strstr(self->out, "# direct: provider ")) TH_LOG("%s", self->out);
	EXPECT_NE(NULL, strstr(self->out, "path bounce: ")) TH_LOG("%s", self->out);
	EXPECT_LE(0, bench_cell(self->out, 4096, 1)) TH_LOG("%s", self->out);
	EXPECT_LE(0, bench_cell(self->out, 4096, 2));
	EXPECT_EQ(0, bench_cell(self->out, 262144, 4)) TH_LOG("%s", self->out);
	EXPECT_EQ(0, bench_cell(self->out, 262144, 5));
}

TEST(bench_latency_modes_refuse_bad_arguments)
{
	char out[4096];

	EXPECT_EQ(2, run_bench("", "latency --sizes 0", out, sizeof(out)));
	EXPECT_NE(NULL, strstr(out, "pd-bench: --sizes 0: not a size above 0")) TH_LOG("%s", out);
	EXPECT_EQ(2, run_bench("", "msgrate --window 0", out, sizeof(out)));
	EXPECT_NE(NULL, strstr(out, "pd-bench: --window 0: want 1 to 1024")) TH_LOG("%s", out);
	EXPECT_EQ(2, run_bench("", "msgrate --window 1025", out, sizeof(out)));
	EXPECT_EQ(2, run_bench("", "latency --iters 0", out, sizeof(out)));
	EXPECT_NE(NULL, strstr(out, "pd-bench: --iters 0:")) TH_LOG("%s", out);
	EXPECT_EQ(2, run_bench("", "cache --entries 200", out, sizeof(out)));
	EXPECT_NE(NULL, strstr(out, "pd-bench: --entries 200: want 201 to 1000000")) TH_LOG("%s", out);
	EXPECT_EQ(2, run_bench("", "latency --port 65536", out, sizeof(out)));
	EXPECT_NE(NULL, strstr(out, "pd-bench: --port 65536: want 1 to 65535")) TH_LOG("%s", out);
	EXPECT_EQ(2, run_bench("", "lifecycle --memory device:x", out, sizeof(out)));
	EXPECT_NE(NULL, strstr(out, "memory 'device:x': x: want an index, a path or pci:")) TH_LOG("%s", out);
	EXPECT_EQ(2, run_bench("", "latency --cpus 0", out, sizeof(out)));
	EXPECT_NE(NULL, strstr(out, "pd-bench: --cpus 0:")) TH_LOG("%s", out);
	/* Both ranks fail to open the fabric: exit 3 (setup), the library's reason. */
	EXPECT_EQ(3, run_bench("", "latency --provider no-such-provider --sizes 8 --iters 5 --repeats 1",
			       out, sizeof(out)));
	EXPECT_NE(NULL, strstr(out, "pd-bench: fabric: ")) TH_LOG("%s", out);
	EXPECT_NE(NULL, strstr(out, "no-such-provider")) TH_LOG("%s", out);
	EXPECT_EQ(3, run_bench("", "msgrate --provider no-such-provider --sizes 8 --iters 5",
			       out, sizeof(out)));
	EXPECT_NE(NULL, strstr(out, "no-such-provider")) TH_LOG("%s", out);
}

/* The CLI convention, the same in every tool (tool_cli.h). */
static const char *const tools[] = { "pdctl", "pd-xfer", "pd-bench", "pd-coll" };

static int tool_run(const char *tool, const char *env, const char *args, char *out, size_t len)
{
	char exe[PATH_MAX], cmd[3 * PATH_MAX + 512];

	tool_path(exe, sizeof(exe), tool);
	snprintf(cmd, sizeof(cmd), "%s %s %s 2>&1", env, exe, args);
	return run_capture(cmd, out, len);
}

TEST(every_tool_help_and_version_exit_0)
{
	char out[8192], want[128];

	for (size_t i = 0; i < sizeof(tools) / sizeof(tools[0]); i++) {
		EXPECT_EQ(0, tool_run(tools[i], "", "--help", out, sizeof(out))) TH_LOG("%s", tools[i]);
		EXPECT_NE(NULL, strstr(out, "usage: ")) TH_LOG("%s --help: %s", tools[i], out);
		EXPECT_NE(NULL, strstr(out, "5 data failed verification")) TH_LOG("%s: %s", tools[i], out);
		EXPECT_EQ(0, tool_run(tools[i], "", "--version", out, sizeof(out))) TH_LOG("%s", tools[i]);
		snprintf(want, sizeof(want), "%s %s\n", tools[i], PD_VERSION);
		EXPECT_EQ(0, strncmp(out, want, strlen(want))) TH_LOG("%s --version: %s", tools[i], out);
		EXPECT_NE(NULL, strstr(out, "\nlibpeerdirect ")) TH_LOG("%s --version: %s", tools[i], out);
		EXPECT_NE(NULL, strstr(out, "\nlibfabric ")) TH_LOG("%s --version: %s", tools[i], out);
	}
}

TEST(every_tool_usage_error_exits_2)
{
	char out[8192];

	for (size_t i = 0; i < sizeof(tools) / sizeof(tools[0]); i++) {
		EXPECT_EQ(2, tool_run(tools[i], "", "--no-such-option", out, sizeof(out)))
			TH_LOG("%s: %s", tools[i], out);
	}
	EXPECT_EQ(2, tool_run("pd-bench", "", "", out, sizeof(out))) TH_LOG("%s", out);
	EXPECT_EQ(2, tool_run("pd-coll", "", "--np 2 -b 0", out, sizeof(out))) TH_LOG("%s", out);
	EXPECT_EQ(2, tool_run("pd-coll", "", "--np 2 extra", out, sizeof(out))) TH_LOG("%s", out);
	EXPECT_EQ(2, tool_run("pdctl", "", "", out, sizeof(out))) TH_LOG("%s", out);
}

/* pd-bench's options go before or after its mode, as pdctl's do. */
TEST(bench_options_before_or_after_the_mode)
{
	char out[8192];

	EXPECT_EQ(2, tool_run("pd-bench", "", "--entries 200 cache", out, sizeof(out)));
	EXPECT_NE(NULL, strstr(out, "pd-bench: --entries 200: want 201 to 1000000")) TH_LOG("%s", out);
	EXPECT_EQ(2, tool_run("pd-bench", "", "cache --entries 200", out, sizeof(out)));
	EXPECT_NE(NULL, strstr(out, "pd-bench: --entries 200: want 201 to 1000000")) TH_LOG("%s", out);
	EXPECT_EQ(0, tool_run("pd-bench", "", "cache --help", out, sizeof(out)));
	EXPECT_EQ(0, tool_run("pd-bench", "", "--version cache", out, sizeof(out)));
}

TEST(every_tool_refuses_empty_names)
{
	static const char *const bad[][2] = {
		{ "pd-xfer", "--rank 0 --rendezvous 127.0.0.1:1 --provider ''" },
		{ "pd-xfer", "--rank 0 --rendezvous 127.0.0.1:1 --memory=" },
		{ "pd-xfer", "--rank 0 --rendezvous 127.0.0.1:1 --device ''" },
		{ "pd-bench", "paths --memory ''" },
		{ "pd-bench", "lifecycle --device=" },
		{ "pd-coll", "--np 2 --csv ''" },
		{ "pd-coll", "--np 2 --provider=" },
		{ "pdctl", "doctor --nic ''" },
		{ "pdctl", "list --device ''" },
	};
	char out[8192];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		EXPECT_EQ(2, tool_run(bad[i][0], "", bad[i][1], out, sizeof(out)))
			TH_LOG("%s %s: %s", bad[i][0], bad[i][1], out);
		EXPECT_NE(NULL, strstr(out, "empty")) TH_LOG("%s %s: %s", bad[i][0], bad[i][1], out);
	}
}

/* A rank alone says what it waits for, and where, before it gives up. */
TEST(xfer_says_where_it_waits)
{
	char out[8192], args[256], want[128];
	int port = listen_port();

	ASSERT_LT(0, port);
	snprintf(args, sizeof(args), "--rank 0 --rendezvous 127.0.0.1:%d --memory host --provider tcp "
		 "--timeout 100", port);
	EXPECT_EQ(3, tool_run("pd-xfer", "", args, out, sizeof(out))) TH_LOG("%s", out);
	snprintf(want, sizeof(want), "pd-xfer rank 0: waiting for its peer (rank 1) at 127.0.0.1:%d ",
		 port);
	EXPECT_NE(NULL, strstr(out, want)) TH_LOG("%s", out);
}

/* A fake sysfs: peerdirect0 simulated (no PCI parent), peerdirect2 on
 * 0000:03:00.0; their "dev" numbers 10:120 and 10:122. */
static int fake_sysfs(const char *root)
{
	char cmd[PATH_MAX * 2];

	snprintf(cmd, sizeof(cmd),
		 "set -e; cd %s; mkdir -p class/misc/peerdirect0 class/misc/peerdirect2 "
		 "devices/pci0000:00/0000:03:00.0 dev/peerdirect/by-path; "
		 "echo sim > class/misc/peerdirect0/backend; echo 10:120 > class/misc/peerdirect0/dev; "
		 "echo pci-bar > class/misc/peerdirect2/backend; echo 10:122 > class/misc/peerdirect2/dev; "
		 "echo 1 > devices/pci0000:00/0000:03:00.0/numa_node; "
		 "ln -s ../../../devices/pci0000:00/0000:03:00.0 class/misc/peerdirect2/device; "
		 "echo x > dev/plainfile", root);
	return system(cmd);
}

/* tool_device.h, the one resolver every tool's --device goes through. */
TEST(device_names_resolve_through_sysfs)
{
	char root[] = "/tmp/pd-sysfs.XXXXXX", path[PATH_MAX], link[PATH_MAX], why[PATH_MAX + 128];
	char pci[13], out[8192], env[PATH_MAX + 32];
	int idx = -1;

	ASSERT_NE(NULL, mkdtemp(root));
	ASSERT_EQ(0, fake_sysfs(root));
	EXPECT_EQ(0, tool_dev_resolve(root, "0", &idx, why, sizeof(why)));
	EXPECT_EQ(0, idx);
	EXPECT_EQ(0, tool_dev_resolve(root, "2", &idx, why, sizeof(why)));
	EXPECT_EQ(2, idx);
	EXPECT_EQ(-EINVAL, tool_dev_resolve(root, "256", &idx, why, sizeof(why)));
	EXPECT_EQ(-EINVAL, tool_dev_resolve(root, "", &idx, why, sizeof(why)));
	EXPECT_EQ(-EINVAL, tool_dev_resolve(root, "peerdirect0", &idx, why, sizeof(why)));
	idx = -1;
	EXPECT_EQ(0, tool_dev_resolve(root, "pci:0000:03:00.0", &idx, why, sizeof(why))) TH_LOG("%s", why);
	EXPECT_EQ(2, idx);
	EXPECT_EQ(0, tool_dev_resolve(root, "pci:0000:03:00.0", &idx, why, sizeof(why)));
	EXPECT_EQ(-ENODEV, tool_dev_resolve(root, "pci:0000:04:00.0", &idx, why, sizeof(why)));
	EXPECT_NE(NULL, strstr(why, "no such device")) TH_LOG("%s", why);
	static const char *const bad_pci[] = {
		"pci:03:00.0", "pci:0000:03:00", "pci:0000:03:00.8", "pci:0000:3:00.0", "pci:000g:03:00.0",
		"pci:0000:03:00.0 ", "pci:",
	};
	for (size_t i = 0; i < sizeof(bad_pci) / sizeof(bad_pci[0]); i++) {
		EXPECT_EQ(-EINVAL, tool_dev_resolve(root, bad_pci[i], &idx, why, sizeof(why)))
			TH_LOG("%s", bad_pci[i]);
		EXPECT_NE(NULL, strstr(why, "bad PCI address")) TH_LOG("%s: %s", bad_pci[i], why);
	}
	EXPECT_TRUE(tool_dev_simulated(root, 0));
	EXPECT_FALSE(tool_dev_simulated(root, 2));
	EXPECT_NE(0, tool_dev_pci(root, 0, pci));
	EXPECT_EQ(0, tool_dev_pci(root, 2, pci));
	EXPECT_STREQ("0000:03:00.0", pci);

	/* paths: not a device node, a device that is not ours, missing */
	snprintf(path, sizeof(path), "%s/dev/plainfile", root);
	EXPECT_EQ(-ENODEV, tool_dev_resolve(root, path, &idx, why, sizeof(why)));
	EXPECT_NE(NULL, strstr(why, "not a peerdirect device node")) TH_LOG("%s", why);
	EXPECT_EQ(-ENODEV, tool_dev_resolve(root, "/dev/null", &idx, why, sizeof(why)));
	EXPECT_NE(NULL, strstr(why, "not a peerdirect device node")) TH_LOG("%s", why);
	snprintf(path, sizeof(path), "%s/dev/peerdirect9", root);
	EXPECT_EQ(-ENODEV, tool_dev_resolve(root, path, &idx, why, sizeof(why)));
	/* a node with peerdirect2's numbers, and udev's by-path link to it */
	snprintf(path, sizeof(path), "%s/dev/peerdirect2", root);
	if (mknod(path, S_IFCHR | 0600, makedev(10, 122))) {
		TH_LOG("mknod %s: %s: the node part is not checked", path, strerror(errno));
	} else {
		snprintf(link, sizeof(link), "%s/dev/peerdirect/by-path/pci-0000:03:00.0", root);
		ASSERT_EQ(0, symlink("../../peerdirect2", link));
		idx = -1;
		EXPECT_EQ(0, tool_dev_resolve(root, path, &idx, why, sizeof(why))) TH_LOG("%s", why);
		EXPECT_EQ(2, idx);
		idx = -1;
		EXPECT_EQ(0, tool_dev_resolve(root, link, &idx, why, sizeof(why))) TH_LOG("%s", why);
		EXPECT_EQ(2, idx);
	}

	/* the tools reach it through PD_SYSFS_ROOT (test-only) */
	snprintf(env, sizeof(env), "PD_SYSFS_ROOT=%s", root);
	EXPECT_EQ(3, tool_run("pd-bench", env, "lifecycle --device pci:0000:04:00.0", out, sizeof(out)));
	EXPECT_NE(NULL, strstr(out, "no such device")) TH_LOG("%s", out);
	EXPECT_EQ(2, tool_run("pd-bench", env, "lifecycle --device pci:4:00.0", out, sizeof(out)));
	EXPECT_EQ(2, tool_run("pd-xfer", env, "--rank 0 --rendezvous 127.0.0.1:1 --device pci:x",
			      out, sizeof(out))) TH_LOG("%s", out);
	EXPECT_EQ(3, tool_run("pd-coll", env, "--np 2 --paths direct --device /dev/null -b 4K -e 4K",
			      out, sizeof(out))) TH_LOG("%s", out);
	EXPECT_NE(NULL, strstr(out, "not a peerdirect device node")) TH_LOG("%s", out);
	snprintf(path, sizeof(path), "rm -rf %s", root);
	EXPECT_EQ(0, system(path));
}

TEST_HARNESS_MAIN
