/* SPDX-License-Identifier: MIT */
/*
 * Naming a peerdirect device, the same in every tool's --device: an index
 * ("0"), a device node or a link to one ("/dev/peerdirect0",
 * "/dev/peerdirect/by-path/pci-0000:03:00.0"), or a PCI function
 * ("pci:0000:03:00.0").  Indices follow probe order; a PCI address does
 * not, so scripts should use it.  Resolved through sysfs: the misc class's
 * peerdirectN, its "dev" (major:minor) and its "device" link to the PCI
 * function.  Also what pdctl list shows of a device's place: PCI address,
 * NUMA node, local CPUs, and whether it is simulated.
 *
 * root is "/sys" but for tests: pdctl passes PDCTL_SYSFS, the other tools
 * PD_SYSFS_ROOT (test-only, documented in testing.md).
 */
#ifndef PD_TOOLS_TOOL_DEVICE_H
#define PD_TOOLS_TOOL_DEVICE_H

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include "tool_args.h"

static inline const char *tool_sysfs_root(void)
{
	const char *r = getenv("PD_SYSFS_ROOT");

	return r && r[0] ? r : "/sys";
}

/* A sysfs attribute of peerdirectN (rel may go through "device/"), its
 * trailing newline dropped: 0, else -1 with buf empty. */
static inline int tool_dev_attr(const char *root, int idx, const char *rel, char *buf, size_t len)
{
	char path[PATH_MAX];
	ssize_t n;
	int f;

	buf[0] = 0;
	snprintf(path, sizeof(path), "%s/class/misc/peerdirect%d/%s", root, idx, rel);
	f = open(path, O_RDONLY | O_CLOEXEC);
	if (f < 0)
		return -1;
	n = read(f, buf, len - 1);
	close(f);
	if (n < 0) {
		buf[0] = 0;
		return -1;
	}
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
		n--;
	buf[n] = 0;
	return 0;
}

static inline bool tool_dev_exists(const char *root, int idx)
{
	char path[PATH_MAX];
	struct stat st;

	snprintf(path, sizeof(path), "%s/class/misc/peerdirect%d", root, idx);
	return !stat(path, &st);
}

/* Simulated (RAM standing in for device memory): the "sim" backend. */
static inline bool tool_dev_simulated(const char *root, int idx)
{
	char be[32];

	return !tool_dev_attr(root, idx, "backend", be, sizeof(be)) && !strcmp(be, "sim");
}

/* "DDDD:BB:DD.F", hex, exactly: 0 and lower-cased into out[13], else -1. */
static inline int tool_pci_addr(const char *s, char out[13])
{
	static const char shape[] = "hhhh:hh:hh.h";
	int i;

	if (strlen(s) != sizeof(shape) - 1)
		return -1;
	for (i = 0; shape[i]; i++) {
		if (shape[i] == 'h' ? !isxdigit((unsigned char)s[i]) : s[i] != shape[i])
			return -1;
		out[i] = (char)tolower((unsigned char)s[i]);
	}
	out[i] = 0;
	return s[11] > '7' ? -1 : 0;	/* a function is 0 to 7 */
}

/* The PCI function under peerdirectN into out[13], or "" (a simulated
 * device, or a parent that is not PCI): 0 if there is one. */
static inline int tool_dev_pci(const char *root, int idx, char out[13])
{
	char path[PATH_MAX], link[PATH_MAX];
	const char *base;
	ssize_t n;

	out[0] = 0;
	snprintf(path, sizeof(path), "%s/class/misc/peerdirect%d/device", root, idx);
	n = readlink(path, link, sizeof(link) - 1);
	if (n <= 0)
		return -1;
	link[n] = 0;
	base = strrchr(link, '/');
	base = base ? base + 1 : link;
	return tool_pci_addr(base, out);
}

/* The devices' indices in sysfs, unsorted: how many (at most max). */
static inline int tool_dev_indices(const char *root, int *out, int max)
{
	char path[PATH_MAX], extra;
	struct dirent *de;
	int n = 0, idx;
	DIR *d;

	snprintf(path, sizeof(path), "%s/class/misc", root);
	d = opendir(path);
	if (!d)
		return 0;
	while ((de = readdir(d)) && n < max)
		if (sscanf(de->d_name, "peerdirect%d%c", &idx, &extra) == 1 && idx >= 0)
			out[n++] = idx;
	closedir(d);
	return n;
}

/* A device node (or a link to one) to its index: its major:minor must be a
 * peerdirect device's "dev". */
static inline int tool_dev_from_path(const char *root, const char *spec, int *index, char *why,
				     size_t wlen)
{
	int idx[256], n, i;
	char want[32], have[32];
	struct stat st;

	if (stat(spec, &st)) {
		snprintf(why, wlen, "%s: %s", spec, strerror(errno));
		return -ENODEV;
	}
	if (!S_ISCHR(st.st_mode)) {
		snprintf(why, wlen, "%s: not a peerdirect device node (not a character device)", spec);
		return -ENODEV;
	}
	snprintf(want, sizeof(want), "%u:%u", major(st.st_rdev), minor(st.st_rdev));
	n = tool_dev_indices(root, idx, 256);
	for (i = 0; i < n; i++)
		if (!tool_dev_attr(root, idx[i], "dev", have, sizeof(have)) && !strcmp(have, want)) {
			*index = idx[i];
			return 0;
		}
	snprintf(why, wlen, "%s: not a peerdirect device node (device %s is not one)", spec, want);
	return -ENODEV;
}

/*
 * spec (index, path or pci:ADDR) to the device's index: 0, else the
 * reason in why and -EINVAL (bad syntax: a usage error) or -ENODEV (no
 * such device, or a path that is not a peerdirect device node).  An
 * index is taken as given (the open names a missing one), so a tool
 * without sysfs still runs on device 0.
 */
static inline int tool_dev_resolve(const char *root, const char *spec, int *index, char *why,
				   size_t wlen)
{
	char addr[13], have[13];
	int idx[256], n, i;

	if (!spec[0]) {
		snprintf(why, wlen, "empty device name");
		return -EINVAL;
	}
	if (spec[0] >= '0' && spec[0] <= '9') {
		if (tool_number(spec, 0, 255, index)) {
			snprintf(why, wlen, "%s: want an index from 0 to 255, a path or pci:DDDD:BB:DD.F",
				 spec);
			return -EINVAL;
		}
		return 0;
	}
	if (!strncmp(spec, "pci:", 4)) {
		if (tool_pci_addr(spec + 4, addr)) {
			snprintf(why, wlen, "%s: bad PCI address (want pci:DDDD:BB:DD.F, hex)", spec);
			return -EINVAL;
		}
		n = tool_dev_indices(root, idx, 256);
		for (i = 0; i < n; i++)
			if (!tool_dev_pci(root, idx[i], have) && !strcmp(have, addr)) {
				*index = idx[i];
				return 0;
			}
		snprintf(why, wlen, "%s: no such device (no peerdirect device on that PCI function)",
			 spec);
		return -ENODEV;
	}
	if (strchr(spec, '/'))
		return tool_dev_from_path(root, spec, index, why, wlen);
	snprintf(why, wlen, "%s: want an index, a path or pci:DDDD:BB:DD.F", spec);
	return -EINVAL;
}

#endif
