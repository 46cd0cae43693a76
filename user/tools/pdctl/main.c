// SPDX-License-Identifier: MIT
/*
 * pdctl: the administrator's view of peerdirect devices.
 *
 * Data sources, all stable interfaces (never debugfs): the sysfs attributes
 * of /sys/class/misc/peerdirectN, PEERDIRECT_IOCTL_QUERY and _LIST on the
 * device node, tracefs events/peerdirect for `events --follow` (in a
 * tracefs instance of its own, so other tracers are not disturbed), and the
 * module's version in /sys/module/peerdirect.  Only the uapi header: no
 * libfabric, so it runs on a node whatever its fabric stack (the doctor,
 * doctor*.c, dlopen()s libibverbs, libfabric and libpeerdirect).
 *
 * Exit codes (documented in pdctl(8)): the tools' shared ones (tool_cli.h):
 * 0 done; 1 an operation failed; 2 usage; 3 module not loaded or no such
 * device; 4 permission denied (5, data that failed verification, is not
 * pdctl's); then 6 no such export; 7 (doctor) a device/NIC pair would fall
 * back to the bounce path; 8 revoke/reset done but importers still map
 * the memory.  With --json, a failure that printed no object prints
 * {"error": ..., "exit": N}.
 *
 * PDCTL_SYSFS (default /sys) and PDCTL_DEV (default /dev) let the tests
 * point it at a fake tree.
 *
 * This file: the global options, the command table and main(); the JSON
 * writer is json.c, the sysfs and device-node access sysfs.c, and each
 * command group a file of its own (pdctl.h lists them).
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/peerdirect.h>

#include "pdctl.h"
#include "json.h"
#include "../tool_cli.h"
#include "../tool_device.h"

bool json;
int want_dev = -1;		/* -d N */
const char *sysroot = "/sys";
const char *devroot = "/dev";

/* The commands, each in the file of its group (pdctl.h). */
static const struct {
	const char *name;
	int (*fn)(int argc, char **argv);
} cmds[] = {
	{ "list", cmd_list }, { "info", cmd_info }, { "exports", cmd_exports },
	{ "allocs", cmd_allocs }, { "events", cmd_events }, { "revoke", cmd_revoke },
	{ "reset", cmd_reset }, { "version", cmd_version }, { "doctor", cmd_doctor },
	{ "bind", cmd_bind }, { "unbind", cmd_unbind }, { "ps", cmd_ps },
	{ "topo", cmd_topo },
};

/* The first error, for --json's {"error": ...} when nothing else printed. */
static char first_err[512];

void pdctl_err(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	if (!first_err[0]) {
		va_list aq;

		va_copy(aq, ap);
		vsnprintf(first_err, sizeof(first_err), fmt, aq);
		va_end(aq);
	}
	fputs("pdctl: ", stderr);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

#define err pdctl_err

static void usage(FILE *f)
{
	fputs("usage: pdctl [--json] [-d DEVICE] COMMAND [ARGS] (options anywhere)\n"
	      "  list                  devices: backend, memory, free, quota, counts,\n"
	      "                        PCI address, NUMA node, local CPUs\n"
	      "  info [DEVICE]         every attribute of each device (or one)\n"
	      "  exports               live and revoked exports, each with its importers\n"
	      "  allocs                allocations that have exports, by process\n"
	      "  events [--follow [--all]]\n"
	      "                        revocation counters; --follow: trace events as\n"
	      "                        they happen (root), --all: every event\n"
	      "  revoke EXPORT_ID      revoke an export of the device (-d required; root)\n"
	      "  reset                 revoke every export of the device (-d required; root)\n"
	      "  version               pdctl, uapi and module versions\n"
	      "  doctor [--nic NAME]   each device/NIC pair: dmabuf, mapped or bounce,\n"
	      "                        why, and the fix (kernel, module, node, IOMMU,\n"
	      "                        PCI topology, rdma-core, libfabric); exit 9 when\n"
	      "                        every device is simulated, unless --allow-sim\n"
	      "  bind [--force] DEV... hand PCI functions (DDDD:BB:DD.F or VENDOR:DEVICE)\n"
	      "                        to peerdirect through driver_override (root)\n"
	      "  unbind DEV...         release them and clear driver_override (root)\n"
	      "  ps                    processes holding device memory, bytes per device\n"
	      "  topo [--all] [--nic NAME]...\n"
	      "                        device x NIC matrix: PCIe relation (X PIX PXB PHB\n"
	      "                        NODE SYS), NUMA affinity, the doctor's verdict\n"
	      "options: -j/--json machine-readable output (an \"error\" member on failure),\n"
	      "         -d/--device DEVICE: an index, a path (/dev/peerdirect0,\n"
	      "         /dev/peerdirect/by-path/pci-...) or pci:DDDD:BB:DD.F;\n"
	      "         -h/--help, -V/--version\n"
	      "exit: 0 ok, 1 failed, 2 usage, 3 no module/device, 4 permission denied,\n"
	      "      (5 data failed verification: other tools), 6 no such export,\n"
	      "      7 a pair would fall back to bounce (doctor),\n"
	      "      8 importers still map revoked memory, 9 only simulated devices\n"
	      "      (doctor, without --allow-sim); see pdctl(8)\n",
	      f);
}

/* --version: this build, then the libraries a program would run with. */
static int print_version(void)
{
	char pd[32] = "", fab[32] = "";

	lib_versions(pd, sizeof(pd), fab, sizeof(fab));
	if (json) {
		jopen(NULL, '{');
		jstr("pdctl", PD_VERSION);
		jstr("libpeerdirect_abi", pd[0] ? pd : NULL);
		jstr("libfabric", fab[0] ? fab : NULL);
		jclose('}');
		putchar('\n');
	} else {
		printf("pdctl %s\n", PD_VERSION);
		print_lib_versions(pd, fab);
	}
	return 0;
}

/*
 * pdctl's own options, wherever they are ("pdctl list --json" as
 * "pdctl --json list"): taken out of argv, the rest (the command and its
 * arguments) left in order.  Before "--" only.  Exit code, or -1 to go on.
 */
static int global_opts(int *argc, char **argv)
{
	int i, n = 1, ret = -1;
	bool help = false, version = false, rest = false;
	const char *dev = NULL;

	for (i = 1; i < *argc; i++) {
		const char *a = argv[i];

		if (rest || a[0] != '-') {
			argv[n++] = argv[i];
			continue;
		}
		if (!strcmp(a, "--")) {
			rest = true;
			argv[n++] = argv[i];
		} else if (!strcmp(a, "-j") || !strcmp(a, "--json")) {
			json = true;
		} else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			help = true;
		} else if (!strcmp(a, "-V") || !strcmp(a, "--version")) {
			version = true;
		} else if (!strcmp(a, "-d") || !strcmp(a, "--device")) {
			if (i + 1 == *argc) {
				err("%s needs a device", a);
				ret = EX_USAGE;
			} else {
				dev = argv[++i];
			}
		} else if (!strncmp(a, "--device=", 9)) {
			dev = a + 9;
		} else if (a[1] != '-' && a[strspn(a + 1, "jhV") + 1] == 'd') {
			/* "-d0", "-jd 0": getopt's clusters */
			const char *d = a + strspn(a + 1, "jhV") + 1;

			json |= !!memchr(a, 'j', d - a);
			help |= !!memchr(a, 'h', d - a);
			version |= !!memchr(a, 'V', d - a);
			if (d[1])
				dev = d + 1;
			else if (i + 1 < *argc)
				dev = argv[++i];
			else
				ret = EX_USAGE, err("-d needs a device");
		} else if (a[1] != '-' && a[1] && !a[strspn(a + 1, "jhV") + 1]) {
			json |= !!strchr(a, 'j');	/* "-jh" */
			help |= !!strchr(a, 'h');
			version |= !!strchr(a, 'V');
		} else {
			argv[n++] = argv[i];
		}
	}
	*argc = n;
	argv[n] = NULL;
	if (help) {
		usage(stdout);
		return 0;
	}
	if (version)
		return print_version();
	if (ret >= 0)
		return ret;
	if (dev) {
		char why[PATH_MAX + 128];
		int r = tool_dev_resolve(sysroot, dev, &want_dev, why, sizeof(why));

		if (r) {
			err("%s", why);
			return r == -EINVAL ? EX_USAGE : EX_NODEV;
		}
	}
	return -1;
}

static int run(int argc, char **argv)
{
	unsigned int i;
	int ret;

	ret = global_opts(&argc, argv);
	if (ret >= 0)
		return ret;
	if (tool_refuse_empty("pdctl", argc, argv)) {
		snprintf(first_err, sizeof(first_err), "an empty value (a name or path) was given");
		return EX_USAGE;
	}
	if (argc < 2 || argv[1][0] == '-') {
		if (argc >= 2)
			err("unknown option '%s' before the command", argv[1]);
		else
			err("no command");
		usage(stderr);
		return EX_USAGE;
	}
	for (i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (!strcmp(argv[1], cmds[i].name)) {
			optind = 1;
			return cmds[i].fn(argc - 1, argv + 1);
		}
	err("unknown command '%s'", argv[1]);
	usage(stderr);
	return EX_USAGE;
}

int main(int argc, char **argv)
{
	int ret;

	if (getenv("PDCTL_SYSFS"))
		sysroot = getenv("PDCTL_SYSFS");
	if (getenv("PDCTL_DEV"))
		devroot = getenv("PDCTL_DEV");
	ret = run(argc, argv);
	/* --json always answers with an object: `pdctl --json doctor > f`
	 * never leaves f empty, whatever failed */
	if (json && ret && !jdone()) {
		jreset();	/* an object cut short: the error on a line of its own */
		jopen(NULL, '{');
		jstr("error", first_err[0] ? first_err : "failed (see standard error)");
		ji64("exit", ret);
		jclose('}');
		putchar('\n');
	}
	if (fflush(stdout) && !ret)
		ret = EX_FAIL;
	return ret;
}
