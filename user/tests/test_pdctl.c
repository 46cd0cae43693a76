// SPDX-License-Identifier: MIT
/*
 * pdctl on the host, without the module: argument errors and exit codes,
 * and its --json documents field by field against a fake sysfs tree
 * (PDCTL_SYSFS).  What needs the module (exports, revoke, events --follow)
 * runs in the VM: selftests/admin.c.
 */
#include <limits.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kselftest_harness.h"
#include "tool_run.h"

/* "PDCTL_SYSFS=root pdctl ARGS" with stdout (and stderr) in out. */
static int pdctl(const char *root, char *out, size_t len, bool with_err, const char *fmt, ...)
{
	char exe[PATH_MAX], args[256], cmd[PATH_MAX + 512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(args, sizeof(args), fmt, ap);
	va_end(ap);
	tool_path(exe, sizeof(exe), "pdctl");
	snprintf(cmd, sizeof(cmd), "PDCTL_SYSFS=%s PDCTL_DEV=%s %s %s %s", root, root, exe, args,
		 with_err ? "2>&1" : "2>/dev/null");
	return run_capture(cmd, out, len);
}

/* Removes root/rel: 0 or -errno. */
static int unlink_fake(const char *root, const char *rel)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	return unlink(path) ? -errno : 0;
}

/* ROOT/REL holding VAL and a newline, as sysfs attributes read. */
static void put(const char *root, const char *rel, const char *val)
{
	char line[4096];

	snprintf(line, sizeof(line), "%s\n", val);
	fake_write(root, rel, line);
}

FIXTURE(pdctl) {
	char empty[64], fake[64];
	char out[16384];
};

FIXTURE_SETUP(pdctl)
{
	static const char *const attrs[][2] = {
		{ "backend", "sim" }, { "abi_version", "2.1" }, { "state", "live" },
		{ "mem_size", "33554432" }, { "mem_free", "33161216" },
		{ "page_size", "65536" }, { "quota", "25165824" }, { "quarantined", "131072" },
		{ "max_exports", "8" }, { "max_events", "16" }, { "nr_allocs", "2" },
		{ "nr_exports", "3" }, { "exports_total", "41" }, { "importer_mappings", "1" },
		{ "features", "0x61f" }, { "p2pdma", "0" }, { "revoke_timeouts", "4" },
		{ "resets", "5" },
		{ "revoked/free", "10" }, { "revoked/revoke", "11" }, { "revoked/reset", "12" },
		{ "revoked/admin", "13" }, { "revoked/unplug", "0" },
	};
	char rel[128];
	unsigned int i;

	strcpy(self->empty, "/tmp/pdctl-empty.XXXXXX");
	strcpy(self->fake, "/tmp/pdctl-fake.XXXXXX");
	ASSERT_NE(NULL, mkdtemp(self->empty));
	ASSERT_NE(NULL, mkdtemp(self->fake));
	for (i = 0; i < sizeof(attrs) / sizeof(attrs[0]); i++) {
		snprintf(rel, sizeof(rel), "class/misc/peerdirect0/%s", attrs[i][0]);
		put(self->fake, rel, attrs[i][1]);
	}
	put(self->fake, "class/misc/peerdirect1/backend", "pci-bar");
	put(self->fake, "class/misc/peerdirect1/features", "0xfff");
	put(self->fake, "class/misc/peerdirect1/p2pdma", "1");
	put(self->fake, "class/misc/peerdirect1/abi_version", "2.1");
	put(self->fake, "module/peerdirect/version", "1.0.0");
}

FIXTURE_TEARDOWN(pdctl)
{
	char cmd[256];

	snprintf(cmd, sizeof(cmd), "rm -rf %s %s", self->empty, self->fake);
	if (system(cmd))
		TH_LOG("could not remove %s", self->fake);
}

TEST_F(pdctl, usage_errors_exit_2)
{
	static const char *const bad[] = {
		"", "bogus", "-d x list", "-d -1 list", "--nosuch list", "list extra",
		"revoke", "revoke 0", "revoke 12x", "revoke -5", "reset", "events --all",
		"events --bogus", "info x", "info 0 1", "version extra",
		/* numbers whole and plain: no blank, sign or empty string */
		"info ''", "info ' 1'", "info +1", "info 256", "-d ' 1' list", "-d +1 list",
		"-d '' list", "-d 0x1 list", "revoke ' 17'", "revoke +17", "revoke ''",
		"revoke 18446744073709551616",
	};
	unsigned int i;
	int rc;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		rc = pdctl(self->fake, self->out, sizeof(self->out), true, "%s", bad[i]);
		if (rc != 2)
			fprintf(stderr, "# pdctl %s: exit %d: %s\n", bad[i], rc, self->out);
		EXPECT_EQ(2, rc);
	}
	EXPECT_EQ(0, pdctl(self->fake, self->out, sizeof(self->out), false, "--help"));
	EXPECT_NE(NULL, strstr(self->out, "usage: pdctl"));
}

TEST_F(pdctl, no_module_exits_3_and_says_so)
{
	EXPECT_EQ(3, pdctl(self->empty, self->out, sizeof(self->out), true, "list"));
	EXPECT_NE(NULL, strstr(self->out, "module is not loaded")) TH_LOG("%s", self->out);
	EXPECT_EQ(3, pdctl(self->empty, self->out, sizeof(self->out), true, "exports"));
	EXPECT_EQ(3, pdctl(self->empty, self->out, sizeof(self->out), true, "-d 0 revoke 5"));
	EXPECT_EQ(0, pdctl(self->empty, self->out, sizeof(self->out), false, "--json version"));
	EXPECT_STREQ("{\"pdctl\":\"" PD_VERSION "\",\"uapi\":\"2.2\",\"module\":null,\"devices\":[]}\n",
		     self->out);
	EXPECT_EQ(0, pdctl(self->empty, self->out, sizeof(self->out), false, "version"));
	EXPECT_NE(NULL, strstr(self->out, "module not loaded"));
}

TEST_F(pdctl, list_json_field_by_field)
{
	ASSERT_EQ(0, pdctl(self->fake, self->out, sizeof(self->out), false, "--json -d 0 list"));
	EXPECT_STREQ("{\"devices\":[{\"device\":\"peerdirect0\",\"index\":0,\"backend\":\"sim\","
		     "\"abi_version\":\"2.1\",\"state\":\"live\",\"mem_size\":33554432,"
		     "\"mem_free\":33161216,\"page_size\":65536,\"quota\":25165824,"
		     "\"quarantined\":131072,\"nr_allocs\":2,\"nr_exports\":3,"
		     "\"exports_total\":41,\"importer_mappings\":1,\"features\":1567,"
		     "\"feature_names\":[\"export\",\"pin\",\"move_notify\",\"cpu_mmap\","
		     "\"events\",\"subscribe\",\"list\"],\"p2pdma\":false,"
		     "\"revoked\":{\"free\":10,\"revoke\":11,\"reset\":12,\"admin\":13,"
		     "\"unplug\":0},\"revoke_timeouts\":4,\"resets\":5,\"simulated\":true,"
		     "\"pci\":null,\"numa_node\":null,\"local_cpus\":null}]}\n", self->out);
	ASSERT_EQ(0, pdctl(self->fake, self->out, sizeof(self->out), false, "--json list"));
	EXPECT_NE(NULL, strstr(self->out, "},{\"device\":\"peerdirect1\",\"index\":1,"
			       "\"backend\":\"pci-bar\",\"abi_version\":\"2.1\",\"state\":null,"))
		TH_LOG("%s", self->out);
	EXPECT_NE(NULL, strstr(self->out, "\"p2pdma\":true,"));
	/* peerdirect1 (an older module's attributes) has no counters: null,
	 * never a 0 that monitoring would read as "none in use" */
	EXPECT_NE(NULL, strstr(self->out, "\"state\":null,\"mem_size\":null,\"mem_free\":null,"
			       "\"page_size\":null,\"quota\":null,\"quarantined\":null,"
			       "\"nr_allocs\":null,\"nr_exports\":null,\"exports_total\":null,"
			       "\"importer_mappings\":null,\"features\":4095,")) TH_LOG("%s", self->out);
	EXPECT_NE(NULL, strstr(self->out, "\"revoked\":{\"free\":null,\"revoke\":null,"
			       "\"reset\":null,\"admin\":null,\"unplug\":null},"
			       "\"revoke_timeouts\":null,\"resets\":null,\"simulated\":false,"
			       "\"pci\":null,")) TH_LOG("%s", self->out);
	/* nor is a value that is not a number */
	put(self->fake, "class/misc/peerdirect0/nr_allocs", "lots");
	ASSERT_EQ(0, pdctl(self->fake, self->out, sizeof(self->out), false, "--json -d 0 list"));
	EXPECT_NE(NULL, strstr(self->out, "\"nr_allocs\":null,")) TH_LOG("%s", self->out);
	EXPECT_EQ(3, pdctl(self->fake, self->out, sizeof(self->out), false, "-d 7 list"));
}

TEST_F(pdctl, info_and_events_json)
{
	ASSERT_EQ(0, pdctl(self->fake, self->out, sizeof(self->out), false, "--json info 0"));
	EXPECT_NE(NULL, strstr(self->out, "\"revoke_timeouts\":4,\"resets\":5,\"max_exports\":8,"
			       "\"max_events\":16,\"parent\":null,\"simulated\":true,")) TH_LOG("%s", self->out);
	ASSERT_EQ(0, pdctl(self->fake, self->out, sizeof(self->out), false, "--json -d 0 events"));
	EXPECT_STREQ("{\"devices\":[{\"device\":\"peerdirect0\",\"revoked\":{\"free\":10,"
		     "\"revoke\":11,\"reset\":12,\"admin\":13,\"unplug\":0},"
		     "\"revoke_timeouts\":4}]}\n", self->out);
	ASSERT_EQ(0, pdctl(self->fake, self->out, sizeof(self->out), false, "--json version"));
	EXPECT_STREQ("{\"pdctl\":\"" PD_VERSION "\",\"uapi\":\"2.2\",\"module\":\"1.0.0\",\"devices\":"
		     "[{\"device\":\"peerdirect0\",\"abi_version\":\"2.1\"},"
		     "{\"device\":\"peerdirect1\",\"abi_version\":\"2.1\"}]}\n", self->out);
	/* human tables */
	ASSERT_EQ(0, pdctl(self->fake, self->out, sizeof(self->out), false, "list"));
	EXPECT_NE(NULL, strstr(self->out, "peerdirect0  sim      live           32M"))
		TH_LOG("%s", self->out);
	ASSERT_EQ(0, pdctl(self->fake, self->out, sizeof(self->out), false, "info 0"));
	EXPECT_NE(NULL, strstr(self->out, "  revoked/admin      13\n")) TH_LOG("%s", self->out);
}

/* Commands that need the device node fail with 3 when the node is missing. */
TEST_F(pdctl, missing_device_node)
{
	EXPECT_EQ(3, pdctl(self->fake, self->out, sizeof(self->out), true, "-d 0 exports"));
	EXPECT_NE(NULL, strstr(self->out, "peerdirect0: No such file")) TH_LOG("%s", self->out);
}

/*
 * Strings pdctl did not write (comm, sysfs) reach JSON as valid UTF-8 and
 * tables without a byte a terminal would act on.
 */
TEST_F(pdctl, foreign_bytes_are_escaped)
{
	const unsigned char *c;

	put(self->fake, "class/misc/peerdirect0/backend", "a\x1b]0;x\x07\xff\xc3\xa9\xe2\x82\"\\");
	ASSERT_EQ(0, pdctl(self->fake, self->out, sizeof(self->out), false, "--json -d 0 list"));
	EXPECT_NE(NULL, strstr(self->out, "\"backend\":\"a\\u001b]0;x\\u0007\\ufffd\xc3\xa9"
			       "\\ufffd\\ufffd\\\"\\\\\",")) TH_LOG("%s", self->out);
	ASSERT_EQ(0, pdctl(self->fake, self->out, sizeof(self->out), false, "-d 0 list"));
	EXPECT_NE(NULL, strstr(self->out, "a?]0;x???")) TH_LOG("%s", self->out);
	ASSERT_EQ(0, pdctl(self->fake, self->out, sizeof(self->out), false, "info 0"));
	for (c = (const unsigned char *)self->out; *c; c++)
		if (*c != '\n' && (*c < 0x20 || *c >= 0x7f))
			break;
	EXPECT_EQ(0, *c) TH_LOG("byte 0x%02x in the table", *c);
}

/* ---- doctor ------------------------------------------------------------- */

/*
 * "pdctl doctor" against the fixture's tree plus a fake /proc, /boot, NICs
 * and device node.  libs: PDCTL_LIBS value ("none": no dlopen, "" unset).
 * as_nobody: run it as uid/gid 65534 without supplementary groups (we are
 * usually root here, and root opens any node).
 */
static int doctor(const char *root, char *out, size_t len, const char *libs, bool as_nobody,
		  const char *args)
{
	char exe[PATH_MAX], cmd[PATH_MAX + 1024];
	size_t n;
	FILE *f;
	int st;

	tool_path(exe, sizeof(exe), "pdctl");
	snprintf(cmd, sizeof(cmd),
		 "%s env PDCTL_SYSFS=%s/sys PDCTL_DEV=%s/dev PDCTL_PROC=%s/proc "
		 "PDCTL_BOOT=%s/boot %s%s %s %s 2>&1",
		 as_nobody ? "setpriv --reuid=65534 --regid=65534 --clear-groups" : "",
		 root, root, root, root, libs ? "PDCTL_LIBS=" : "", libs ? libs : "", exe, args);
	fflush(NULL);
	f = popen(cmd, "r");
	if (!f)
		return -1;
	n = fread(out, 1, len - 1, f);
	out[n] = '\0';
	st = pclose(f);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* A node: one peerdirect device, an RDMA device, two netdevs, kernel config. */
static void doctor_tree(const char *root)
{
	char rel[PATH_MAX];
	struct utsname u;

	/* a real device: simulated-only nodes fail the doctor (exit 9) */
	put(root, "sys/class/misc/peerdirect0/backend", "pci-bar");
	put(root, "sys/class/misc/peerdirect0/features", "0x61f");	/* cpu_mmap */
	put(root, "sys/class/misc/peerdirect0/page_size", "65536");
	put(root, "sys/module/peerdirect/version", "1.1.0");
	put(root, "sys/module/peerdirect/parameters/sim_devices", "1");
	put(root, "sys/module/peerdirect/parameters/quota_mb", "128");
	put(root, "sys/class/net/eth9/operstate", "up");
	put(root, "sys/class/net/lo/operstate", "unknown");
	put(root, "sys/class/infiniband/fakerdma0/node_type", "1: CA");
	put(root, "sys/class/iommu/.keep", "");
	put(root, "dev/peerdirect0", "");
	put(root, "proc/cmdline", "root=/dev/vda console=ttyS0 iommu=pt");
	if (uname(&u))
		snprintf(u.release, sizeof(u.release), "unknown");
	snprintf(rel, sizeof(rel), "boot/config-%s", u.release);
	put(root, rel, "CONFIG_PCI_P2PDMA=y\nCONFIG_DMABUF_MOVE_NOTIFY=y\n"
		  "# CONFIG_UDMABUF is not set");
	chmod(root, 0755);
}

TEST_F(pdctl, doctor_no_module_exits_3)
{
	EXPECT_EQ(3, doctor(self->empty, self->out, sizeof(self->out), "none", false, "doctor"));
	EXPECT_NE(NULL, strstr(self->out, "module is not loaded")) TH_LOG("%s", self->out);
	EXPECT_NE(NULL, strstr(self->out, "modprobe peerdirect")) TH_LOG("%s", self->out);
}

TEST_F(pdctl, doctor_usage)
{
	doctor_tree(self->fake);
	EXPECT_EQ(2, doctor(self->fake, self->out, sizeof(self->out), "none", false,
			    "doctor --bogus"));
	EXPECT_EQ(2, doctor(self->fake, self->out, sizeof(self->out), "none", false,
			    "doctor --nic"));
	EXPECT_EQ(2, doctor(self->fake, self->out, sizeof(self->out), "none", false,
			    "doctor extra"));
	EXPECT_EQ(3, doctor(self->fake, self->out, sizeof(self->out), "none", false,
			    "doctor --nic nosuch0"));
	EXPECT_NE(NULL, strstr(self->out, "no NIC nosuch0")) TH_LOG("%s", self->out);
	/* class/infiniband/.. exists, and is no NIC */
	EXPECT_EQ(3, doctor(self->fake, self->out, sizeof(self->out), "none", false,
			    "doctor --nic .."));
}

TEST_F(pdctl, doctor_netdev_is_mapped)
{
	doctor_tree(self->fake);
	EXPECT_EQ(0, doctor(self->fake, self->out, sizeof(self->out), "none", false,
			    "doctor --nic eth9"));
	EXPECT_NE(NULL, strstr(self->out, "peerdirect0  eth9")) TH_LOG("%s", self->out);
	EXPECT_NE(NULL, strstr(self->out, "netdev   mapped   tcp over eth9")) TH_LOG("%s", self->out);
	EXPECT_EQ(NULL, strstr(self->out, "bounce   ")) TH_LOG("%s", self->out);
	EXPECT_EQ(NULL, strstr(self->out, "fakerdma0")) TH_LOG("%s", self->out);
	/* the checks: kernel config, module parameters, node, IOMMU */
	EXPECT_NE(NULL, strstr(self->out, "CONFIG_UDMABUF")) TH_LOG("%s", self->out);
	EXPECT_NE(NULL, strstr(self->out, "not set")) TH_LOG("%s", self->out);
	EXPECT_NE(NULL, strstr(self->out, "quota_mb=128 sim_devices=1")) TH_LOG("%s", self->out);
	EXPECT_NE(NULL, strstr(self->out, "iommu=pt")) TH_LOG("%s", self->out);
	/*
	 * Without a CPU mapping a netdev has no path at all: bounce stages
	 * through that mapping too, and pd_mr_reg_dmabuf fails.  It said
	 * "bounce" (exit 7), a run that would work, slower.
	 */
	put(self->fake, "sys/class/misc/peerdirect0/features", "0x3");
	EXPECT_EQ(1, doctor(self->fake, self->out, sizeof(self->out), "none", false,
			    "doctor --nic eth9"));
	EXPECT_NE(NULL, strstr(self->out, "netdev   none     ")) TH_LOG("%s", self->out);
	EXPECT_NE(NULL, strstr(self->out, "cpu_mmap")) TH_LOG("%s", self->out);
	EXPECT_NE(NULL, strstr(self->out, "a pair has no path")) TH_LOG("%s", self->out);
	/* Features that cannot be read say nothing of a CPU mapping: not
	 * "none" (a module without the sysfs file, the node not a device). */
	ASSERT_EQ(0, unlink_fake(self->fake, "sys/class/misc/peerdirect0/features"));
	EXPECT_EQ(1, doctor(self->fake, self->out, sizeof(self->out), "none", false,
			    "doctor --nic eth9"));
	EXPECT_NE(NULL, strstr(self->out, "netdev   unknown  peerdirect0's features could not "
			       "be read")) TH_LOG("%s", self->out);
}

/*
 * An RDMA pair whose dma-buf MR was never tried (no libraries, or a device
 * libibverbs does not list) is "unknown", exit 1: nothing was learned.
 * The host has no RDMA device; rxe's real "bounce" is tested in the VM
 * (selftests/doctor-in-vm.sh).
 */
TEST_F(pdctl, doctor_rdma_not_probed_is_unknown)
{
	doctor_tree(self->fake);
	EXPECT_EQ(1, doctor(self->fake, self->out, sizeof(self->out), "none", false,
			    "doctor --nic fakerdma0"));
	EXPECT_NE(NULL, strstr(self->out, "rdma     unknown  ibv_reg_dmabuf_mr not tried "
			       "(PDCTL_LIBS=none)")) TH_LOG("%s", self->out);
	EXPECT_NE(NULL, strstr(self->out, "fix:")) TH_LOG("%s", self->out);
	/* the whole node, with libibverbs and libfabric loaded */
	EXPECT_EQ(1, doctor(self->fake, self->out, sizeof(self->out), NULL, false, "doctor"));
	EXPECT_NE(NULL, strstr(self->out, "rdma     unknown  ibv_reg_dmabuf_mr not tried: "
			       "libibverbs lists no device fakerdma0")) TH_LOG("%s", self->out);
	EXPECT_NE(NULL, strstr(self->out, "netdev   mapped")) TH_LOG("%s", self->out);
	EXPECT_EQ(NULL, strstr(self->out, "peerdirect0  lo ")) TH_LOG("%s", self->out);
}

/*
 * rdma-core too old for dma-buf MRs (a libibverbs.so.1 without
 * ibv_reg_dmabuf_mr ahead in the search path, with the stand-in
 * libfabric.so.1, since the real one needs the real verbs) bounces, and 7
 * outranks the 1 of a second device's pair, in reset.  Live and without a
 * CPU mapping, that device's bounce has nothing to stage from: "none",
 * exit 1, over the first device's 7.
 */
TEST_F(pdctl, doctor_bounce_outranks_unknown_and_none_outranks_bounce)
{
	char dir[PATH_MAX];

	doctor_tree(self->fake);
	put(self->fake, "sys/class/misc/peerdirect1/backend", "sim");
	put(self->fake, "sys/class/misc/peerdirect1/features", "0x61f");
	put(self->fake, "sys/class/misc/peerdirect1/page_size", "65536");
	put(self->fake, "sys/class/misc/peerdirect1/state", "resetting");
	put(self->fake, "dev/peerdirect1", "");
	tool_path(dir, sizeof(dir), "tests/fakelibs");
	ASSERT_EQ(0, setenv("LD_LIBRARY_PATH", dir, 1));
	EXPECT_EQ(7, doctor(self->fake, self->out, sizeof(self->out), NULL, false,
			    "doctor --nic fakerdma0"));
	EXPECT_NE(NULL, strstr(self->out, "rdma     bounce   ibv_reg_dmabuf_mr not tried: "
			       "libibverbs.so.1 has no ibv_reg_dmabuf_mr")) TH_LOG("%s", self->out);
	EXPECT_NE(NULL, strstr(self->out, "rdma     unknown  not probed: peerdirect1 is resetting"))
		TH_LOG("%s", self->out);
	put(self->fake, "sys/class/misc/peerdirect1/state", "live");
	put(self->fake, "sys/class/misc/peerdirect1/features", "0x3");
	EXPECT_EQ(1, doctor(self->fake, self->out, sizeof(self->out), NULL, false,
			    "doctor --nic fakerdma0"));
	EXPECT_NE(NULL, strstr(self->out, "peerdirect0  fakerdma0        rdma     bounce   "))
		TH_LOG("%s", self->out);
	EXPECT_NE(NULL, strstr(self->out, "peerdirect1  fakerdma0        rdma     none     "))
		TH_LOG("%s", self->out);
	EXPECT_NE(NULL, strstr(self->out, "no CPU mapping")) TH_LOG("%s", self->out);
	EXPECT_EQ(NULL, strstr(self->out, "rdma     unknown")) TH_LOG("%s", self->out);
	unsetenv("LD_LIBRARY_PATH");
}

/*
 * Without a usable libfabric the library cannot run at all, whatever the
 * NIC would take: every pair is "unknown" and the failed check is exit 1,
 * never a verdict and 0.  An empty libfabric.so.1 ahead in the search path
 * stands in for a missing or broken one.
 */
TEST_F(pdctl, doctor_without_libfabric_is_never_a_verdict)
{
	char dir[PATH_MAX];

	doctor_tree(self->fake);
	snprintf(dir, sizeof(dir), "%s/lib", self->fake);
	put(self->fake, "lib/libfabric.so.1", "");
	ASSERT_EQ(0, setenv("LD_LIBRARY_PATH", dir, 1));
	EXPECT_EQ(1, doctor(self->fake, self->out, sizeof(self->out), NULL, false,
			    "doctor --nic fakerdma0"));
	EXPECT_NE(NULL, strstr(self->out, "libfabric      FI_HMEM                    fail"))
		TH_LOG("%s", self->out);
	EXPECT_NE(NULL, strstr(self->out, "rdma     unknown  the library cannot run without "
			       "libfabric")) TH_LOG("%s", self->out);
	EXPECT_EQ(1, doctor(self->fake, self->out, sizeof(self->out), NULL, false,
			    "doctor --nic eth9"));
	EXPECT_NE(NULL, strstr(self->out, "netdev   unknown  the library cannot run without "
			       "libfabric")) TH_LOG("%s", self->out);
	unsetenv("LD_LIBRARY_PATH");
}

/*
 * The library opens RDM endpoints with tagged messages and RMA, so FI_HMEM
 * counts only where a provider offers it there.  The check asked with no
 * endpoint type, and a provider whose MSG endpoints alone offer it (a core
 * provider under a utility one that drops it) was listed: its NIC's pair
 * said "dmabuf" where the library says "lacks FI_HMEM" and stages.  A
 * libfabric.so.1 of one such provider, ahead in the search path, shows it.
 * It also requires FI_CONTEXT, which the library passes: hints without
 * the library's modes would miss a provider it uses.
 */
TEST_F(pdctl, doctor_counts_fi_hmem_on_rdm_endpoints_only)
{
	char dir[PATH_MAX], lib[PATH_MAX];

	doctor_tree(self->fake);
	tool_path(lib, sizeof(lib), "tests/fakelibs/libfabric.so.1");
	snprintf(dir, sizeof(dir), "%s/lib", self->fake);
	put(self->fake, "lib/.keep", "");
	snprintf(self->out, sizeof(self->out), "%s/libfabric.so.1", dir);
	ASSERT_EQ(0, symlink(lib, self->out)) TH_LOG("%s -> %s: %s", self->out, lib, strerror(errno));
	ASSERT_EQ(0, setenv("LD_LIBRARY_PATH", dir, 1));
	doctor(self->fake, self->out, sizeof(self->out), NULL, false, "doctor --nic eth9");
	EXPECT_NE(NULL, strstr(self->out, "libfabric 1.21: no provider offers FI_HMEM"))
		TH_LOG("%s", self->out);
	ASSERT_EQ(0, setenv("FAKE_FI_HMEM_RDM", "1", 1));
	doctor(self->fake, self->out, sizeof(self->out), NULL, false, "doctor --nic eth9");
	EXPECT_NE(NULL, strstr(self->out, "providers offering FI_HMEM: fakeprov;"))
		TH_LOG("%s", self->out);
	/* FI_HMEM only without FI_DIRECTED_RECV and FI_SOURCE: the library's
	 * try without FI_HMEM, which keeps them, comes first and is answered. */
	ASSERT_EQ(0, setenv("FAKE_FI_HMEM_RDM", "alone", 1));
	doctor(self->fake, self->out, sizeof(self->out), NULL, false, "doctor --nic eth9");
	EXPECT_NE(NULL, strstr(self->out, "libfabric 1.21: no provider offers FI_HMEM"))
		TH_LOG("%s", self->out);
	unsetenv("FAKE_FI_HMEM_RDM");
	unsetenv("LD_LIBRARY_PATH");
}

/*
 * A device in reset (or unplugged) is not probed: the test ALLOC would
 * wait for the reset, and what failed would say nothing of the NIC.  Not
 * knowing is "unknown" and exit 1, never "bounce" and 7.
 */
TEST_F(pdctl, doctor_device_not_live_is_unknown)
{
	doctor_tree(self->fake);
	put(self->fake, "sys/class/misc/peerdirect0/state", "resetting");
	EXPECT_EQ(1, doctor(self->fake, self->out, sizeof(self->out), "none", false,
			    "doctor --nic fakerdma0"));
	EXPECT_NE(NULL, strstr(self->out, "rdma     unknown  not probed: peerdirect0 is resetting"))
		TH_LOG("%s", self->out);
	EXPECT_EQ(NULL, strstr(self->out, "bounce   ")) TH_LOG("%s", self->out);
	EXPECT_EQ(1, doctor(self->fake, self->out, sizeof(self->out), "none", false,
			    "--json doctor --nic fakerdma0"));
	EXPECT_NE(NULL, strstr(self->out, "\"verdict\":\"unknown\"")) TH_LOG("%s", self->out);
	/* a netdev pair too: a device in reset maps nothing */
	EXPECT_EQ(1, doctor(self->fake, self->out, sizeof(self->out), "none", false,
			    "doctor --nic eth9"));
	EXPECT_NE(NULL, strstr(self->out, "netdev   unknown  not probed: peerdirect0 is resetting"))
		TH_LOG("%s", self->out);
	put(self->fake, "sys/class/misc/peerdirect0/state", "live");
	EXPECT_EQ(0, doctor(self->fake, self->out, sizeof(self->out), "none", false,
			    "doctor --nic eth9"));
}

/*
 * The NICs a node lists: plain files (bonding_masters) are not NICs, and
 * a device-backed NIC is checked even when many veths come before it.
 */
TEST_F(pdctl, doctor_finds_the_real_nic_among_veths)
{
	char rel[64], target[PATH_MAX], link[PATH_MAX];
	int i;

	doctor_tree(self->fake);
	put(self->fake, "sys/class/net/bonding_masters", "");
	for (i = 0; i < 40; i++) {
		snprintf(rel, sizeof(rel), "sys/class/net/cali%02d/operstate", i);
		put(self->fake, rel, "up");
	}
	put(self->fake, "sys/class/net/zz0/operstate", "up");
	put(self->fake, "sys/devices/pci0000:00/0000:00:03.0/vendor", "0x8086");
	snprintf(target, sizeof(target), "%s/sys/devices/pci0000:00/0000:00:03.0", self->fake);
	snprintf(link, sizeof(link), "%s/sys/class/net/zz0/device", self->fake);
	ASSERT_EQ(0, symlink(target, link));
	EXPECT_EQ(1, doctor(self->fake, self->out, sizeof(self->out), "none", false, "doctor"));
	EXPECT_NE(NULL, strstr(self->out, "peerdirect0  zz0 ")) TH_LOG("%s", self->out);
	EXPECT_EQ(NULL, strstr(self->out, "bonding_masters")) TH_LOG("%s", self->out);
	EXPECT_NE(NULL, strstr(self->out, "NICs not checked")) TH_LOG("%s", self->out);
}

TEST_F(pdctl, doctor_node_not_openable)
{
	char node[PATH_MAX];

	doctor_tree(self->fake);
	snprintf(node, sizeof(node), "%s/dev/peerdirect0", self->fake);
	ASSERT_EQ(0, chmod(node, 0660));
	EXPECT_EQ(4, doctor(self->fake, self->out, sizeof(self->out), "none", geteuid() == 0,
			    "doctor --nic eth9"));
	EXPECT_NE(NULL, strstr(self->out, "Permission denied")) TH_LOG("%s", self->out);
	EXPECT_NE(NULL, strstr(self->out, "peerdirect0  eth9             netdev   denied   "))
		TH_LOG("%s", self->out);
	EXPECT_NE(NULL, strstr(self->out, "group")) TH_LOG("%s", self->out);
	/* no node at all: no device */
	ASSERT_EQ(0, unlink(node));
	EXPECT_EQ(3, doctor(self->fake, self->out, sizeof(self->out), "none", false,
			    "doctor --nic eth9"));
	EXPECT_NE(NULL, strstr(self->out, "60-peerdirect.rules")) TH_LOG("%s", self->out);
}

/*
 * A PCI tree: peerdirect0 and fakerdma0 under one switch (upstream port
 * 0000:01:00.0, downstream ports 02:00.0 and 02:01.0), eth9 under another
 * root port.
 */
static const char *const pci_dirs[] = {
	"devices/pci0000:00/0000:00:01.0",
	"devices/pci0000:00/0000:00:01.0/0000:01:00.0",
	"devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:00.0",
	"devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:00.0/0000:03:00.0",
	"devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:01.0",
	"devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:01.0/0000:04:00.0",
	"devices/pci0000:00/0000:00:02.0",
	"devices/pci0000:00/0000:00:02.0/0000:05:00.0",
};

static int pci_tree(const char *root)
{
	static const char *const links[][2] = {
		{ "sys/class/misc/peerdirect0/device", "0000:03:00.0" },
		{ "sys/class/infiniband/fakerdma0/device", "0000:04:00.0" },
		{ "sys/class/net/eth9/device", "0000:05:00.0" },
	};
	char link[PATH_MAX], target[PATH_MAX];
	unsigned int i, j;

	doctor_tree(root);
	for (i = 0; i < 3; i++)
		for (j = 0; j < sizeof(pci_dirs) / sizeof(pci_dirs[0]); j++) {
			if (strcmp(strrchr(pci_dirs[j], '/') + 1, links[i][1]))
				continue;
			snprintf(target, sizeof(target), "%s/sys/%s/x", root, pci_dirs[j]);
			put(root, target + strlen(root) + 1, "");
			*strrchr(target, '/') = 0;
			snprintf(link, sizeof(link), "%s/%s", root, links[i][0]);
			if (symlink(target, link))
				return -1;
		}
	return 0;
}

/*
 * The PCI path: a switch both sit under, or only the host bridge; a NIC
 * below its PCI function (virtio-net's virtioN) is found on that function.
 */
TEST_F(pdctl, doctor_pci_topology)
{
	char target[PATH_MAX], link[PATH_MAX];
	const char *hit;

	ASSERT_EQ(0, pci_tree(self->fake));
	put(self->fake, "sys/devices/pci0000:00/0000:00:02.0/0000:05:00.0/virtio0/vendor", "0x1af4");
	put(self->fake, "sys/class/net/eth8/operstate", "up");
	snprintf(target, sizeof(target), "%s/sys/devices/pci0000:00/0000:00:02.0/0000:05:00.0/virtio0",
		 self->fake);
	snprintf(link, sizeof(link), "%s/sys/class/net/eth8/device", self->fake);
	ASSERT_EQ(0, symlink(target, link));
	EXPECT_EQ(1, doctor(self->fake, self->out, sizeof(self->out), "none", false, "doctor"));
	EXPECT_NE(NULL, strstr(self->out, "pci: common upstream bridge 0000:01:00.0"))
		TH_LOG("%s", self->out);
	hit = strstr(self->out, "peerdirect0  eth8 ");
	ASSERT_NE(NULL, hit) TH_LOG("%s", self->out);
	EXPECT_NE(NULL, strstr(hit, "pci: warn: only the host bridge pci0000:00 is common"))
		TH_LOG("%s", self->out);
	EXPECT_EQ(NULL, strstr(self->out, "eth8 is on no PCI function")) TH_LOG("%s", self->out);
}

/*
 * The IOMMU mode: translating unless the command line or the device's
 * group (identity: CONFIG_IOMMU_DEFAULT_PASSTHROUGH, or set by hand) says
 * otherwise.
 */
TEST_F(pdctl, doctor_iommu_mode_from_the_groups)
{
	char target[PATH_MAX], link[PATH_MAX];

	ASSERT_EQ(0, pci_tree(self->fake));
	put(self->fake, "sys/class/iommu/dmar0/name", "dmar0");
	put(self->fake, "proc/cmdline", "root=/dev/vda intel_iommu=on");
	put(self->fake, "sys/kernel/iommu_groups/7/type", "DMA-FQ");
	snprintf(target, sizeof(target), "%s/sys/kernel/iommu_groups/7", self->fake);
	snprintf(link, sizeof(link), "%s/sys/%s/iommu_group", self->fake, pci_dirs[3]);
	ASSERT_EQ(0, symlink(target, link));
	EXPECT_EQ(0, doctor(self->fake, self->out, sizeof(self->out), "none", false,
			    "doctor --nic eth9"));
	EXPECT_NE(NULL, strstr(self->out, "iommu          mode                       warn   IOMMU "
			       "dmar0 translating")) TH_LOG("%s", self->out);
	EXPECT_NE(NULL, strstr(self->out, "iommu group 7 (DMA-FQ)")) TH_LOG("%s", self->out);
	put(self->fake, "sys/kernel/iommu_groups/7/type", "identity");
	EXPECT_EQ(0, doctor(self->fake, self->out, sizeof(self->out), "none", false,
			    "doctor --nic eth9"));
	EXPECT_NE(NULL, strstr(self->out, "iommu          mode                       ok     IOMMU "
			       "dmar0 (cmdline: intel_iommu=on), every peerdirect device in an "
			       "identity group")) TH_LOG("%s", self->out);
}

/*
 * Each function's config space: size bytes, an ACS capability with control
 * bits acs (or none when acs < 0) behind a first extended capability
 * (AER), so the list is walked.
 */
static void put_config(const char *root, size_t size, int acs, const char *redirect_at)
{
	unsigned char cfg[4096] = { 0 };
	char path[PATH_MAX];
	unsigned int i, ctrl;
	FILE *f;

	for (i = 0; i < sizeof(pci_dirs) / sizeof(pci_dirs[0]); i++) {
		memset(cfg, 0, sizeof(cfg));
		cfg[0x100] = 0x01;			/* AER, next at 0x140 */
		cfg[0x102] = 0x01 << 4;
		cfg[0x103] = 0x140 >> 4;
		if (acs >= 0) {
			ctrl = acs;
			if (redirect_at && strstr(pci_dirs[i], redirect_at) &&
			    !strcmp(strrchr(pci_dirs[i], '/') + 1, redirect_at))
				ctrl |= 0x04;		/* P2P request redirect */
			cfg[0x140] = 0x0d;		/* ACS, last */
			cfg[0x142] = 0x01;
			cfg[0x146] = ctrl & 0xff;
			cfg[0x147] = ctrl >> 8;
		}
		snprintf(path, sizeof(path), "%s/sys/%s/config", root, pci_dirs[i]);
		f = fopen(path, "w");
		if (f) {
			fwrite(cfg, 1, size, f);
			fclose(f);
		}
	}
}

/* ACS on the way from device to NIC, as the kernel's p2pdma walks it. */
TEST_F(pdctl, doctor_acs_on_the_path)
{
	ASSERT_EQ(0, pci_tree(self->fake));
	/* what a user without CAP_SYS_ADMIN reads */
	put_config(self->fake, 64, 0x11, NULL);
	EXPECT_EQ(1, doctor(self->fake, self->out, sizeof(self->out), "none", false,
			    "doctor --nic fakerdma0"));
	EXPECT_NE(NULL, strstr(self->out, "ACS not read on 5 functions (PCI config space beyond "
			       "64 bytes needs root)")) TH_LOG("%s", self->out);
	/* source validation and upstream forwarding only: peer-to-peer stays below */
	put_config(self->fake, 4096, 0x11, NULL);
	EXPECT_EQ(1, doctor(self->fake, self->out, sizeof(self->out), "none", false,
			    "doctor --nic fakerdma0"));
	EXPECT_NE(NULL, strstr(self->out, "; no ACS redirect on the path, 4 hops"))
		TH_LOG("%s", self->out);
	/* request redirect on the NIC's downstream port */
	put_config(self->fake, 4096, 0x11, "0000:02:01.0");
	EXPECT_EQ(1, doctor(self->fake, self->out, sizeof(self->out), "none", false,
			    "doctor --nic fakerdma0"));
	EXPECT_NE(NULL, strstr(self->out, "; warn: ACS redirects peer-to-peer at 0000:02:01.0: "
			       "the traffic goes up to the root complex")) TH_LOG("%s", self->out);
	/* on the common switch's upstream port, which the kernel checks too */
	put_config(self->fake, 4096, 0x11, "0000:01:00.0");
	EXPECT_EQ(1, doctor(self->fake, self->out, sizeof(self->out), "none", false,
			    "doctor --nic fakerdma0"));
	EXPECT_NE(NULL, strstr(self->out, "ACS redirects peer-to-peer at 0000:01:00.0"))
		TH_LOG("%s", self->out);
	/* on the device's own downstream port */
	put_config(self->fake, 4096, 0x11, "0000:02:00.0");
	EXPECT_EQ(1, doctor(self->fake, self->out, sizeof(self->out), "none", false,
			    "doctor --nic fakerdma0"));
	EXPECT_NE(NULL, strstr(self->out, "ACS redirects peer-to-peer at 0000:02:00.0"))
		TH_LOG("%s", self->out);
	/* above the common switch the kernel does not look */
	put_config(self->fake, 4096, 0x11, "0000:00:01.0");
	EXPECT_EQ(1, doctor(self->fake, self->out, sizeof(self->out), "none", false,
			    "doctor --nic fakerdma0"));
	EXPECT_NE(NULL, strstr(self->out, "; no ACS redirect on the path, 4 hops"))
		TH_LOG("%s", self->out);
	/* egress control alone redirects too */
	put_config(self->fake, 4096, 0x20, NULL);
	EXPECT_EQ(1, doctor(self->fake, self->out, sizeof(self->out), "none", false,
			    "doctor --nic fakerdma0"));
	EXPECT_NE(NULL, strstr(self->out, "ACS redirects peer-to-peer at 0000:03:00.0 0000:02:00.0 "
			       "0000:01:00.0 0000:04:00.0 0000:02:01.0")) TH_LOG("%s", self->out);
	/* conventional PCI: 256 bytes, no extended capabilities */
	put_config(self->fake, 256, -1, NULL);
	EXPECT_EQ(1, doctor(self->fake, self->out, sizeof(self->out), "none", false,
			    "doctor --nic fakerdma0"));
	EXPECT_NE(NULL, strstr(self->out, "; no ACS redirect on the path, 4 hops"))
		TH_LOG("%s", self->out);
}

/*
 * libpeerdirect.so.1 from the build directory: pdctl loads it and asks it
 * per device and provider (here it cannot open the fake device: the
 * library opens /dev itself, so the choice is "not checked" and says why).
 */
TEST_F(pdctl, doctor_loads_libpeerdirect)
{
	char dir[PATH_MAX];

	doctor_tree(self->fake);
	tool_path(dir, sizeof(dir), "");
	ASSERT_EQ(0, setenv("LD_LIBRARY_PATH", dir, 1));
	EXPECT_EQ(0, doctor(self->fake, self->out, sizeof(self->out), NULL, false,
			    "doctor --nic eth9"));
	unsetenv("LD_LIBRARY_PATH");
	EXPECT_NE(NULL, strstr(self->out, "libpeerdirect ABI 1.")) TH_LOG("%s", self->out);
	EXPECT_NE(NULL, strstr(self->out, "peerdirect0/tcp")) TH_LOG("%s", self->out);
	EXPECT_EQ(NULL, strstr(self->out, "peerdirect0/verbs")) TH_LOG("%s", self->out);
}

/*
 * pdctl's doctor needs ABI 1.1 of libpeerdirect (the sized calls) and asked
 * for the header's minor: built against 1.2 it refused a 1.1 library,
 * though nothing it calls is newer, and peerdirect-tools does not depend on
 * the library's version.
 */
TEST_F(pdctl, doctor_takes_a_1_1_libpeerdirect)
{
	char dir[PATH_MAX];

	doctor_tree(self->fake);
	tool_path(dir, sizeof(dir), "tests/fakepd");
	ASSERT_EQ(0, setenv("LD_LIBRARY_PATH", dir, 1));
	doctor(self->fake, self->out, sizeof(self->out), NULL, false, "doctor --nic eth9");
	unsetenv("LD_LIBRARY_PATH");
	EXPECT_NE(NULL, strstr(self->out, "libpeerdirect ABI 1.1 loaded")) TH_LOG("%s", self->out);
	EXPECT_NE(NULL, strstr(self->out, "pd_device_open: ")) TH_LOG("%s", self->out);
}

/* --json is valid JSON with the fields pdctl(8) documents, and only them. */
TEST_F(pdctl, doctor_json_fields)
{
	char path[PATH_MAX], cmd[PATH_MAX + 1024];
	FILE *f;

	doctor_tree(self->fake);
	EXPECT_EQ(1, doctor(self->fake, self->out, sizeof(self->out), "none", false,
			    "--json doctor"));
	snprintf(path, sizeof(path), "%s/doctor.json", self->fake);
	f = fopen(path, "w");
	ASSERT_NE(NULL, f);
	fputs(self->out, f);
	fclose(f);
	snprintf(cmd, sizeof(cmd), "python3 -c '"
		 "import json, sys\n"
		 "d = json.load(open(sys.argv[1]))\n"
		 "assert list(d) == [\"pdctl\", \"kernel\", \"checks\", \"pairs\", \"error\",\n"
		 "    \"exit\"], list(d)\n"
		 "assert d[\"error\"].startswith(\"a check failed\"), d[\"error\"]\n"
		 "assert d[\"exit\"] == 1\n"
		 "for c in d[\"checks\"]:\n"
		 "    assert list(c) == [\"check\", \"subject\", \"status\", \"reason\", \"fix\"], c\n"
		 "    assert c[\"status\"] in (\"ok\", \"warn\", \"fail\", \"skip\"), c\n"
		 "for p in d[\"pairs\"]:\n"
		 "    assert list(p) == [\"device\", \"nic\", \"nic_kind\", \"verdict\", \"reason\",\n"
		 "        \"fix\", \"topology\", \"ibv_errno\"], p\n"
		 "    assert p[\"verdict\"] in (\"dmabuf\", \"mapped\", \"bounce\", \"none\",\n"
		 "        \"denied\", \"unavailable\", \"unknown\"), p\n"
		 "v = {(p[\"nic\"], p[\"verdict\"]) for p in d[\"pairs\"]}\n"
		 "assert v == {(\"eth9\", \"mapped\"), (\"fakerdma0\", \"unknown\")}, v\n"
		 "names = {c[\"check\"] for c in d[\"checks\"]}\n"
		 "assert {\"kernel_config\", \"module\", \"device_node\", \"iommu\", \"libfabric\",\n"
		 "        \"libpeerdirect\"} <= names, names\n"
		 "' %s", path);
	EXPECT_EQ(0, system(cmd)) TH_LOG("%s", self->out);
}

/* stdout of "pdctl ARGS" (stderr apart) is one JSON object with an
 * "error" member and the exit code: python3's json reads it. */
static int json_error_parses(const char *root, const char *args, int want_exit)
{
	char cmd[PATH_MAX * 2 + 1024], exe[PATH_MAX];

	tool_path(exe, sizeof(exe), "pdctl");
	snprintf(cmd, sizeof(cmd), "PDCTL_SYSFS=%s PDCTL_DEV=%s %s %s 2>/dev/null | python3 -c '"
		 "import json, sys\n"
		 "d = json.load(sys.stdin)\n"
		 "assert isinstance(d, dict), d\n"
		 "assert isinstance(d[\"error\"], str) and d[\"error\"], d\n"
		 "assert d[\"exit\"] == %d, d\n"
		 "'", root, root, exe, args, want_exit);
	return system(cmd);
}

/* `pdctl --json X > f` never leaves f empty: usage errors once --json was
 * seen, setup failures, refused arguments all print {"error": ...}. */
TEST_F(pdctl, json_failures_print_an_error_object)
{
	static const struct {
		const char *args;
		int exit;
	} cases[] = {
		{ "--json bogus", 2 }, { "--json", 2 }, { "bogus --json", 2 },
		{ "--json revoke 5", 2 }, { "--json info 0 1", 2 },
		{ "--json doctor --nic ''", 2 }, { "doctor --json --nic=", 2 },
		{ "--json -d pci:0000:zz:00.0 list", 2 }, { "--json -d 9 list", 3 },
		{ "--json info pci:0000:03:00.0", 3 }, { "list --json -d /dev/null", 3 },
		/* the commands of their own files: one object, never two */
		{ "--json ps --bogus", 2 }, { "--json topo --bogus", 2 },
		{ "--json bind 0000:zz:00.0", 2 }, { "--json unbind", 2 },
		{ "--json bind 0000:7f:1f.7", 3 }, { "unbind --json 0000:7f:1f.7", 3 },
	};
	unsigned int i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int rc = json_error_parses(self->fake, cases[i].args, cases[i].exit);

		if (rc)
			fprintf(stderr, "# pdctl %s: no JSON error object with exit %d\n",
				cases[i].args, cases[i].exit);
		EXPECT_EQ(0, rc);
	}
	/* no module at all */
	EXPECT_EQ(0, json_error_parses(self->empty, "--json list", 3));
	EXPECT_EQ(0, json_error_parses(self->empty, "--json doctor", 3));
	EXPECT_EQ(3, pdctl(self->empty, self->out, sizeof(self->out), false, "list --json"));
	EXPECT_EQ(0, strncmp(self->out, "{\"error\":\"the peerdirect module is not loaded", 45))
		TH_LOG("%s", self->out);
}

/* pdctl's own options go before or after the command, to the same effect. */
TEST_F(pdctl, options_after_the_command)
{
	char before[16384];

	ASSERT_EQ(0, pdctl(self->fake, before, sizeof(before), false, "--json -d 0 list"));
	ASSERT_EQ(0, pdctl(self->fake, self->out, sizeof(self->out), false, "list --json -d 0"));
	EXPECT_STREQ(before, self->out);
	ASSERT_EQ(0, pdctl(self->fake, self->out, sizeof(self->out), false, "list -d0 --json"));
	EXPECT_STREQ(before, self->out);
	ASSERT_EQ(0, pdctl(self->fake, self->out, sizeof(self->out), false, "info --device=1 -j"));
	EXPECT_NE(NULL, strstr(self->out, "\"device\":\"peerdirect1\"")) TH_LOG("%s", self->out);
	EXPECT_EQ(NULL, strstr(self->out, "\"device\":\"peerdirect0\"")) TH_LOG("%s", self->out);
	EXPECT_EQ(0, pdctl(self->fake, self->out, sizeof(self->out), false, "list --help"));
	EXPECT_NE(NULL, strstr(self->out, "usage: pdctl"));
	EXPECT_EQ(0, pdctl(self->fake, self->out, sizeof(self->out), false, "list --version"));
	EXPECT_EQ(0, strncmp(self->out, "pdctl " PD_VERSION "\n", strlen("pdctl " PD_VERSION "\n")))
		TH_LOG("%s", self->out);
	EXPECT_EQ(2, pdctl(self->fake, self->out, sizeof(self->out), true, "list --bogus"));
}

/* Export ids are per device: revoke without -d is refused, never device 0. */
TEST_F(pdctl, revoke_requires_a_device)
{
	EXPECT_EQ(2, pdctl(self->fake, self->out, sizeof(self->out), true, "revoke 5"));
	EXPECT_NE(NULL, strstr(self->out, "-d DEVICE required (export ids are per device"))
		TH_LOG("%s", self->out);
	EXPECT_EQ(2, pdctl(self->fake, self->out, sizeof(self->out), true, "--json revoke 5"));
}

/* Empty names and paths are refused, wherever the option is. */
TEST_F(pdctl, empty_names_refused)
{
	static const char *const bad[] = {
		"doctor --nic ''", "doctor --nic=", "--json doctor --nic ''", "-d '' list",
		"--device= list", "info ''",
	};
	unsigned int i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		EXPECT_EQ(2, pdctl(self->fake, self->out, sizeof(self->out), true, "%s", bad[i]))
			TH_LOG("pdctl %s: %s", bad[i], self->out);
		EXPECT_NE(NULL, strstr(self->out, "empty")) TH_LOG("pdctl %s: %s", bad[i], self->out);
	}
}

/* A PCI device's place: address, NUMA node, local CPUs; a simulated one
 * says so and shows "-" (null in JSON). -d and info take pci:ADDR. */
TEST_F(pdctl, list_shows_place_and_simulated)
{
	char target[PATH_MAX], link[PATH_MAX];
	const char *row;

	put(self->fake, "devices/pci0000:00/0000:03:00.0/numa_node", "1");
	put(self->fake, "devices/pci0000:00/0000:03:00.0/local_cpulist", "8-15");
	snprintf(target, sizeof(target), "%s/devices/pci0000:00/0000:03:00.0", self->fake);
	snprintf(link, sizeof(link), "%s/class/misc/peerdirect1/device", self->fake);
	ASSERT_EQ(0, symlink(target, link));
	ASSERT_EQ(0, pdctl(self->fake, self->out, sizeof(self->out), false, "list"));
	EXPECT_NE(NULL, strstr(self->out, " PCI          NUMA CPUS\n")) TH_LOG("%s", self->out);
	row = strstr(self->out, "\npeerdirect0 ");
	ASSERT_NE(NULL, row) TH_LOG("%s", self->out);
	EXPECT_EQ(0, strncmp(strstr(row, " no     ") ?: "", " no     -               - -  "
			     "(simulated: not an accelerator)\n", 52)) TH_LOG("%s", row);
	row = strstr(self->out, "\npeerdirect1 ");
	ASSERT_NE(NULL, row) TH_LOG("%s", self->out);
	EXPECT_NE(NULL, strstr(row, " yes    0000:03:00.0    1 8-15\n")) TH_LOG("%s", row);
	EXPECT_EQ(NULL, strstr(row, "simulated")) TH_LOG("%s", row);

	ASSERT_EQ(0, pdctl(self->fake, self->out, sizeof(self->out), false, "--json list"));
	EXPECT_NE(NULL, strstr(self->out, "\"simulated\":false,\"pci\":\"0000:03:00.0\","
			       "\"numa_node\":1,\"local_cpus\":\"8-15\"}")) TH_LOG("%s", self->out);
	EXPECT_NE(NULL, strstr(self->out, "\"simulated\":true,\"pci\":null,\"numa_node\":null,"
			       "\"local_cpus\":null}")) TH_LOG("%s", self->out);

	/* by PCI address, upper case too; info's own argument the same */
	ASSERT_EQ(0, pdctl(self->fake, self->out, sizeof(self->out), false,
			   "--json -d pci:0000:03:00.0 list"));
	EXPECT_TRUE(self->out == strstr(self->out, "{\"devices\":[{\"device\":\"peerdirect1\""))
		TH_LOG("%s", self->out);
	EXPECT_EQ(NULL, strstr(self->out, "peerdirect0")) TH_LOG("%s", self->out);
	ASSERT_EQ(0, pdctl(self->fake, self->out, sizeof(self->out), false, "info pci:0000:03:00.0"));
	EXPECT_EQ(0, strncmp(self->out, "peerdirect1\n", 12)) TH_LOG("%s", self->out);
	EXPECT_NE(NULL, strstr(self->out, "  numa_node          1\n")) TH_LOG("%s", self->out);
	ASSERT_EQ(0, pdctl(self->fake, self->out, sizeof(self->out), false, "info 0"));
	EXPECT_EQ(0, strncmp(self->out, "peerdirect0 (simulated", 22)) TH_LOG("%s", self->out);
	/* errors: no such device (3), bad syntax (2), not a peerdirect node (3) */
	EXPECT_EQ(3, pdctl(self->fake, self->out, sizeof(self->out), true, "-d pci:0000:04:00.0 list"));
	EXPECT_NE(NULL, strstr(self->out, "no such device")) TH_LOG("%s", self->out);
	EXPECT_EQ(2, pdctl(self->fake, self->out, sizeof(self->out), true, "-d pci:03:00.0 list"));
	EXPECT_NE(NULL, strstr(self->out, "bad PCI address")) TH_LOG("%s", self->out);
	EXPECT_EQ(2, pdctl(self->fake, self->out, sizeof(self->out), true, "-d pci:0000:03:00.8 list"));
	EXPECT_EQ(3, pdctl(self->fake, self->out, sizeof(self->out), true, "-d /dev/null list"));
	EXPECT_NE(NULL, strstr(self->out, "not a peerdirect device node")) TH_LOG("%s", self->out);
}

TEST_HARNESS_MAIN
