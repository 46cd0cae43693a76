// SPDX-License-Identifier: MIT
/*
 * pdctl's device-facing commands on the host, without the module: the PCIe
 * relation of two functions from their sysfs paths (every class of
 * nvidia-smi topo -m's vocabulary), bind/unbind against a fake sysfs tree
 * (PDCTL_SYSFS: what is written where, refusal, --force, the errors), the
 * doctor's exit 9 on a node of simulated devices and its uapi check.
 * bind, topo and ps against the module run in the VM
 * (selftests/bind-in-vm.sh).
 */
#include <limits.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <linux/peerdirect.h>

#include "kselftest_harness.h"
#include "../tools/pdctl/pci_relation.h"
#include "tool_run.h"

#define SW "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0"

TEST(relation_every_class)
{
	/* X: the function itself */
	EXPECT_STREQ("X", pd_pci_relation(SW "/0000:02:00.0/0000:03:00.0",
					  SW "/0000:02:00.0/0000:03:00.0", 0, 0));
	/* PIX: two downstream ports of one switch */
	EXPECT_STREQ("PIX", pd_pci_relation(SW "/0000:02:00.0/0000:03:00.0",
					    SW "/0000:02:01.0/0000:04:00.0", 0, 0));
	/* PIX: two functions of one device */
	EXPECT_STREQ("PIX", pd_pci_relation(SW "/0000:02:00.0/0000:03:00.0",
					    SW "/0000:02:00.0/0000:03:00.1", 0, 0));
	/* PXB: a switch below the common switch */
	EXPECT_STREQ("PXB", pd_pci_relation(SW "/0000:02:00.0/0000:03:00.0",
					    SW "/0000:02:01.0/0000:05:00.0/0000:06:00.0/0000:07:00.0",
					    0, 0));
	/* PHB: two root ports of one host bridge */
	EXPECT_STREQ("PHB", pd_pci_relation(SW "/0000:02:00.0/0000:03:00.0",
					    "/sys/devices/pci0000:00/0000:00:02.0/0000:08:00.0",
					    0, 0));
	/* NODE: two host bridges, one NUMA node (or unknown) */
	EXPECT_STREQ("NODE", pd_pci_relation(SW "/0000:02:00.0/0000:03:00.0",
					     "/sys/devices/pci0000:40/0000:40:01.0/0000:41:00.0",
					     0, 0));
	EXPECT_STREQ("NODE", pd_pci_relation(SW "/0000:02:00.0/0000:03:00.0",
					     "/sys/devices/pci0000:40/0000:40:01.0/0000:41:00.0",
					     -1, 1));
	/* SYS: host bridges on two NUMA nodes */
	EXPECT_STREQ("SYS", pd_pci_relation(SW "/0000:02:00.0/0000:03:00.0",
					    "/sys/devices/pci0000:80/0000:80:01.0/0000:81:00.0",
					    0, 1));
	/* not PCI (a virtual NIC): no relation */
	EXPECT_EQ(NULL, pd_pci_relation(SW "/0000:02:00.0/0000:03:00.0",
					"/sys/devices/virtual/net/va", 0, 0));
	/* a host bridge whose name is a prefix of another's is not common */
	EXPECT_STREQ("NODE", pd_pci_relation("/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0",
					     "/sys/devices/pci0000:0a/0000:0a:01.0/0000:0b:00.0",
					     0, 0));
}


/* "PDCTL_SYSFS=root/sys PDCTL_DEV=root/dev pdctl ARGS 2>&1" into out. */
static int pdctl(const char *root, char *out, size_t len, const char *fmt, ...)
{
	char exe[PATH_MAX], args[512], cmd[PATH_MAX * 3 + 512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(args, sizeof(args), fmt, ap);
	va_end(ap);
	tool_path(exe, sizeof(exe), "pdctl");
	snprintf(cmd, sizeof(cmd), "PDCTL_SYSFS=%s/sys PDCTL_DEV=%s/dev PDCTL_PROC=%s/proc "
		 "PDCTL_BOOT=%s/boot PDCTL_LIBS=none %s %s 2>&1", root, root, root, root, exe,
		 args);
	return run_capture(cmd, out, len);
}

#define put fake_write

static int get(const char *root, const char *rel, char *buf, size_t len)
{
	char path[PATH_MAX];
	size_t n;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	f = fopen(path, "r");
	if (!f)
		return -1;
	n = fread(buf, 1, len - 1, f);
	buf[n] = 0;
	fclose(f);
	return 0;
}

FIXTURE(fake) {
	char root[64];
	char out[16384];
};

/*
 * Two ivshmem functions: 00:04.0 unbound, 00:05.0 held by "other"; the
 * peerdirect driver registered.  Writes land in plain files.
 */
FIXTURE_SETUP(fake)
{
	static const char *const fns[] = { "0000:00:04.0", "0000:00:05.0" };
	char rel[256], target[PATH_MAX], link[PATH_MAX];
	unsigned int i;

	strcpy(self->root, "/tmp/pdctl-topo.XXXXXX");
	ASSERT_NE(NULL, mkdtemp(self->root));
	for (i = 0; i < 2; i++) {
		snprintf(rel, sizeof(rel), "sys/bus/pci/devices/%s/vendor", fns[i]);
		put(self->root, rel, "0x1af4\n");
		snprintf(rel, sizeof(rel), "sys/bus/pci/devices/%s/device", fns[i]);
		put(self->root, rel, "0x1110\n");
		snprintf(rel, sizeof(rel), "sys/bus/pci/devices/%s/driver_override", fns[i]);
		put(self->root, rel, "(null)\n");
	}
	put(self->root, "sys/bus/pci/drivers_probe", "");
	put(self->root, "sys/bus/pci/drivers/peerdirect/bind", "");
	put(self->root, "sys/bus/pci/drivers/other/unbind", "");
	put(self->root, "sys/module/peerdirect/version", "1.2.1");
	snprintf(target, sizeof(target), "%s/sys/bus/pci/drivers/other", self->root);
	snprintf(link, sizeof(link), "%s/sys/bus/pci/devices/0000:00:05.0/driver", self->root);
	ASSERT_EQ(0, symlink(target, link));
}

FIXTURE_TEARDOWN(fake)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", self->root);
	if (system(cmd))
		TH_LOG("could not remove %s", self->root);
}

/*
 * An unbound function: driver_override names peerdirect and drivers_probe
 * gets the address; the fake core binds nothing, so the command says the
 * driver did not take it (exit 1) rather than claiming success.
 */
TEST_F(fake, bind_writes_override_then_probe)
{
	char buf[64];

	EXPECT_EQ(1, pdctl(self->root, self->out, sizeof(self->out), "bind 00:04.0"));
	EXPECT_NE(NULL, strstr(self->out, "did not take it")) TH_LOG("%s", self->out);
	ASSERT_EQ(0, get(self->root, "sys/bus/pci/devices/0000:00:04.0/driver_override", buf,
			 sizeof(buf)));
	EXPECT_STREQ("peerdirect", buf);
	ASSERT_EQ(0, get(self->root, "sys/bus/pci/drivers_probe", buf, sizeof(buf)));
	EXPECT_STREQ("0000:00:04.0", buf);
}

TEST_F(fake, bind_refuses_a_held_function_and_force_unbinds_it)
{
	char buf[64];

	EXPECT_EQ(1, pdctl(self->root, self->out, sizeof(self->out), "bind 0000:00:05.0"));
	EXPECT_NE(NULL, strstr(self->out, "held by driver other")) TH_LOG("%s", self->out);
	ASSERT_EQ(0, get(self->root, "sys/bus/pci/drivers/other/unbind", buf, sizeof(buf)));
	EXPECT_STREQ("", buf);
	ASSERT_EQ(0, get(self->root, "sys/bus/pci/devices/0000:00:05.0/driver_override", buf,
			 sizeof(buf)));
	EXPECT_STREQ("(null)\n", buf);
	/* --force after the address: unbinds from "other" first, says so */
	pdctl(self->root, self->out, sizeof(self->out), "bind 0000:00:05.0 --force");
	EXPECT_NE(NULL, strstr(self->out, "unbound from other (--force)")) TH_LOG("%s", self->out);
	ASSERT_EQ(0, get(self->root, "sys/bus/pci/drivers/other/unbind", buf, sizeof(buf)));
	EXPECT_STREQ("0000:00:05.0", buf);
}

TEST_F(fake, bind_errors_and_json)
{
	char cmd[256];

	EXPECT_EQ(3, pdctl(self->root, self->out, sizeof(self->out), "bind 0000:00:09.0"));
	EXPECT_NE(NULL, strstr(self->out, "no PCI device 0000:00:09.0")) TH_LOG("%s", self->out);
	EXPECT_EQ(3, pdctl(self->root, self->out, sizeof(self->out), "bind 8086:1234"));
	EXPECT_EQ(2, pdctl(self->root, self->out, sizeof(self->out), "bind 0000:00:04.9"));
	EXPECT_EQ(2, pdctl(self->root, self->out, sizeof(self->out), "bind"));
	EXPECT_EQ(2, pdctl(self->root, self->out, sizeof(self->out), "unbind --force 00:04.0"));
	EXPECT_EQ(2, pdctl(self->root, self->out, sizeof(self->out), "bind --json nonsense"));
	EXPECT_NE(NULL, strstr(self->out, "{\"error\":")) TH_LOG("%s", self->out);
	/* vendor:device covers both functions: one refused, the object says so */
	EXPECT_EQ(1, pdctl(self->root, self->out, sizeof(self->out), "bind --json 1af4:1110"));
	EXPECT_NE(NULL, strstr(self->out, "\"address\":\"0000:00:05.0\",\"error\":\"held by"))
		TH_LOG("%s", self->out);
	EXPECT_NE(NULL, strstr(self->out, "\"error\":\"one or more devices failed"))
		TH_LOG("%s", self->out);
	/* unbind of a function another driver holds: left alone */
	EXPECT_EQ(1, pdctl(self->root, self->out, sizeof(self->out), "unbind 0000:00:05.0"));
	EXPECT_NE(NULL, strstr(self->out, "bound to other, not peerdirect")) TH_LOG("%s", self->out);
	/* the module gone: bind says so, exit 3 */
	snprintf(cmd, sizeof(cmd), "rm -rf %s/sys/bus/pci/drivers/peerdirect", self->root);
	ASSERT_EQ(0, system(cmd));
	EXPECT_EQ(3, pdctl(self->root, self->out, sizeof(self->out), "bind 00:04.0"));
	EXPECT_NE(NULL, strstr(self->out, "module is not loaded")) TH_LOG("%s", self->out);
}

/* Bound already (bind_ivshmem, new_id): bind pins it with driver_override. */
TEST_F(fake, bind_of_a_bound_function_pins_it)
{
	char target[PATH_MAX], link[PATH_MAX], buf[64];

	snprintf(target, sizeof(target), "%s/sys/bus/pci/drivers/peerdirect", self->root);
	snprintf(link, sizeof(link), "%s/sys/bus/pci/devices/0000:00:04.0/driver", self->root);
	ASSERT_EQ(0, symlink(target, link));
	EXPECT_EQ(0, pdctl(self->root, self->out, sizeof(self->out), "bind 0000:00:04.0"));
	EXPECT_NE(NULL, strstr(self->out, "already bound to peerdirect")) TH_LOG("%s", self->out);
	ASSERT_EQ(0, get(self->root, "sys/bus/pci/devices/0000:00:04.0/driver_override", buf,
			 sizeof(buf)));
	EXPECT_STREQ("peerdirect", buf);
}

TEST_F(fake, unbind_clears_the_override)
{
	char buf[64];

	put(self->root, "sys/bus/pci/devices/0000:00:04.0/driver_override", "peerdirect\n");
	EXPECT_EQ(0, pdctl(self->root, self->out, sizeof(self->out), "unbind 0000:00:04.0"));
	ASSERT_EQ(0, get(self->root, "sys/bus/pci/devices/0000:00:04.0/driver_override", buf,
			 sizeof(buf)));
	EXPECT_STREQ("\n", buf);
	EXPECT_NE(NULL, strstr(self->out, "was not bound; driver_override cleared"))
		TH_LOG("%s", self->out);
}

/*
 * topo on a fake PCI tree: peerdirect0 and eth9 under one switch, both on
 * NUMA node 0 (PIX, same), eth8 under another host bridge on node 1 (SYS),
 * and a veth (no PCI: "-", left out without --all).
 */
TEST_F(fake, topo_matrix_from_sysfs)
{
	static const char *const links[][2] = {
		{ "sys/class/misc/peerdirect0/device", SW "/0000:02:00.0/0000:03:00.0" },
		{ "sys/class/net/eth9/device", SW "/0000:02:01.0/0000:04:00.0" },
		{ "sys/class/net/eth8/device", "/sys/devices/pci0000:80/0000:80:01.0/0000:81:00.0" },
	};
	static const char *const numa[] = { "0\n", "0\n", "1\n" };
	char rel[PATH_MAX], target[PATH_MAX], link[PATH_MAX];
	unsigned int i;

	put(self->root, "sys/class/misc/peerdirect0/backend", "pci-bar\n");
	put(self->root, "sys/class/misc/peerdirect0/features", "0x61f\n");
	put(self->root, "sys/class/net/va/operstate", "up\n");
	put(self->root, "sys/class/net/eth9/operstate", "up\n");
	put(self->root, "sys/class/net/eth8/operstate", "up\n");
	put(self->root, "dev/peerdirect0", "");
	for (i = 0; i < 3; i++) {
		snprintf(rel, sizeof(rel), "%s/numa_node", links[i][1] + 1);
		put(self->root, rel, numa[i]);
		snprintf(target, sizeof(target), "%s%s", self->root, links[i][1]);
		snprintf(link, sizeof(link), "%s/%s", self->root, links[i][0]);
		ASSERT_EQ(0, symlink(target, link));
	}
	EXPECT_EQ(0, pdctl(self->root, self->out, sizeof(self->out), "topo --json"));
	EXPECT_NE(NULL, strstr(self->out, "{\"device\":\"peerdirect0\",\"nic\":\"eth9\","
			       "\"relation\":\"PIX\",\"numa_affinity\":\"same\",\"verdict\":"))
		TH_LOG("%s", self->out);
	EXPECT_NE(NULL, strstr(self->out, "{\"device\":\"peerdirect0\",\"nic\":\"eth8\","
			       "\"relation\":\"SYS\",\"numa_affinity\":\"cross\","))
		TH_LOG("%s", self->out);
	EXPECT_NE(NULL, strstr(self->out, "{\"name\":\"peerdirect0\",\"pci\":\"0000:03:00.0\","
			       "\"numa_node\":0}")) TH_LOG("%s", self->out);
	EXPECT_EQ(NULL, strstr(self->out, "\"va\"")) TH_LOG("%s", self->out);
	EXPECT_EQ(0, pdctl(self->root, self->out, sizeof(self->out), "topo --all"));
	EXPECT_NE(NULL, strstr(self->out, "PIX = mapped")) TH_LOG("%s", self->out);
	EXPECT_NE(NULL, strstr(self->out, "SYS x mapped")) TH_LOG("%s", self->out);
	EXPECT_NE(NULL, strstr(self->out, "- ? mapped")) TH_LOG("%s", self->out);
	EXPECT_EQ(2, pdctl(self->root, self->out, sizeof(self->out), "topo --nic ''"));
	EXPECT_EQ(3, pdctl(self->root, self->out, sizeof(self->out), "topo --json --nic nope"));
	EXPECT_NE(NULL, strstr(self->out, "{\"error\":")) TH_LOG("%s", self->out);
}

/*
 * The PCI function a class device hangs from (common/pci_path.h: pdctl
 * topo's and the NCCL net plugin's): a netdev of virtio below its
 * function, an RDMA device's link straight to one, a veth without a
 * function, a link to nowhere, and a buffer too short.
 */
TEST_F(fake, pci_function_path_of_class_devices)
{
	static const char *const fn = "/sys/devices/pci0000:00/0000:00:03.0";
	char target[PATH_MAX], link[PATH_MAX], want[PATH_MAX], got[PATH_MAX], tiny[8];

	put(self->root, "sys/devices/pci0000:00/0000:00:03.0/virtio2/net/eth0/speed", "-1\n");
	put(self->root, "sys/class/net/eth0/operstate", "up\n");
	snprintf(target, sizeof(target), "%s%s/virtio2", self->root, fn);
	snprintf(link, sizeof(link), "%s/sys/class/net/eth0/device", self->root);
	ASSERT_EQ(0, symlink(target, link));
	ASSERT_NE(NULL, realpath(self->root, want));
	strcat(want, fn);
	ASSERT_EQ(0, pd_pci_function_path(link, got, sizeof(got)));
	EXPECT_STREQ(want, got);
	EXPECT_EQ(-1, pd_pci_function_path(link, tiny, sizeof(tiny)));

	put(self->root, "sys/devices/pci0000:00/0000:00:04.0/infiniband/mlx5_0/ibdev", "");
	snprintf(target, sizeof(target), "%s/sys/devices/pci0000:00/0000:00:04.0", self->root);
	put(self->root, "sys/class/infiniband/mlx5_0/node_type", "1: CA\n");
	snprintf(link, sizeof(link), "%s/sys/class/infiniband/mlx5_0/device", self->root);
	ASSERT_EQ(0, symlink(target, link));
	ASSERT_EQ(0, pd_pci_function_path(link, got, sizeof(got)));
	EXPECT_STREQ("0000:00:04.0", strrchr(got, '/') + 1);

	put(self->root, "sys/devices/virtual/net/veth0/speed", "10000\n");
	snprintf(target, sizeof(target), "%s/sys/devices/virtual/net/veth0", self->root);
	snprintf(link, sizeof(link), "%s/sys/class/net/veth0", self->root);
	ASSERT_EQ(0, symlink(target, link));
	strcat(link, "/device");
	EXPECT_EQ(-1, pd_pci_function_path(link, got, sizeof(got)));
	snprintf(link, sizeof(link), "%s/sys/class/net/nowhere/device", self->root);
	EXPECT_EQ(-1, pd_pci_function_path(link, got, sizeof(got)));
}

/* A node whose only device is simulated: doctor exit 9 unless --allow-sim. */
TEST_F(fake, doctor_simulated_only_exits_9)
{
	put(self->root, "sys/class/misc/peerdirect0/backend", "sim\n");
	put(self->root, "sys/class/misc/peerdirect0/features", "0x61f\n");
	put(self->root, "sys/class/misc/peerdirect0/abi_version", "2.1\n");
	put(self->root, "sys/module/peerdirect/parameters/sim_devices", "1\n");
	put(self->root, "dev/peerdirect0", "");
	EXPECT_EQ(9, pdctl(self->root, self->out, sizeof(self->out), "doctor"));
	EXPECT_NE(NULL, strstr(self->out, "every device is simulated")) TH_LOG("%s", self->out);
	EXPECT_NE(NULL, strstr(self->out, "exit 9: only simulated devices")) TH_LOG("%s", self->out);
	EXPECT_EQ(9, pdctl(self->root, self->out, sizeof(self->out), "--json doctor"));
	EXPECT_NE(NULL, strstr(self->out, "\"exit\":9")) TH_LOG("%s", self->out);
	EXPECT_NE(9, pdctl(self->root, self->out, sizeof(self->out), "doctor --allow-sim"));
	EXPECT_NE(NULL, strstr(self->out, "allowed by --allow-sim")) TH_LOG("%s", self->out);
	/* one real device beside it: no exit 9 */
	put(self->root, "sys/class/misc/peerdirect1/backend", "pci-bar\n");
	put(self->root, "sys/class/misc/peerdirect1/features", "0x61f\n");
	put(self->root, "dev/peerdirect1", "");
	EXPECT_NE(9, pdctl(self->root, self->out, sizeof(self->out), "doctor"));
	EXPECT_EQ(NULL, strstr(self->out, "every device is simulated")) TH_LOG("%s", self->out);
}

/* A module older than the tools' uapi: flagged, with the missing features. */
TEST_F(fake, doctor_flags_an_older_uapi_minor)
{
	char want[128];

	put(self->root, "sys/class/misc/peerdirect0/backend", "pci-bar\n");
	put(self->root, "sys/class/misc/peerdirect0/features", "0x1ff\n");
	put(self->root, "sys/class/misc/peerdirect0/abi_version", "2.0\n");
	put(self->root, "dev/peerdirect0", "");
	pdctl(self->root, self->out, sizeof(self->out), "doctor");
	snprintf(want, sizeof(want), "the module speaks uapi 2.0, older than the tools' 2.%d",
		 PEERDIRECT_ABI_MINOR);
	EXPECT_NE(NULL, strstr(self->out, want)) TH_LOG("%s", self->out);
	EXPECT_NE(NULL, strstr(self->out, "2.1: LIST of exports")) TH_LOG("%s", self->out);
	put(self->root, "sys/class/misc/peerdirect0/abi_version", "1.9\n");
	pdctl(self->root, self->out, sizeof(self->out), "doctor");
	EXPECT_NE(NULL, strstr(self->out, "another major is another interface"))
		TH_LOG("%s", self->out);
}

TEST_HARNESS_MAIN
