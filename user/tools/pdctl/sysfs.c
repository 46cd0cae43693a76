// SPDX-License-Identifier: MIT
/*
 * pdctl's access to the devices: the sysfs attributes of
 * /sys/class/misc/peerdirectN (under PDCTL_SYSFS), the device nodes (under
 * PDCTL_DEV), /proc/PID/comm, and the exit code an errno makes.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pdctl.h"
#include "json.h"
#include "../tool_device.h"

#define err pdctl_err

int errno_exit(int e)
{
	switch (e) {
	case EPERM: case EACCES: return EX_PERM;
	case ENOENT: return EX_NOENT;
	case ENODEV: case ENXIO: return EX_NODEV;
	default: return EX_FAIL;
	}
}

/* ---- sysfs -------------------------------------------------------------- */

/*
 * Tables go to terminals: a process names itself (comm) with whatever bytes
 * it likes, escape sequences included.  Controls and every non-ASCII byte
 * (which may start a C1 control) print as '?'.
 */
void term_safe(char *s)
{
	for (; *s; s++)
		if ((*s != '\t' && (unsigned char)*s < 0x20) || (unsigned char)*s >= 0x7f)
			*s = '?';
}

int read_file(const char *path, char *buf, size_t len)
{
	ssize_t n;
	int f = open(path, O_RDONLY | O_CLOEXEC);

	if (f < 0)
		return -errno;
	n = read(f, buf, len - 1);
	close(f);
	if (n < 0)
		return -errno;
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
		n--;
	buf[n] = 0;
	if (!json)
		term_safe(buf);
	return 0;
}

int attr_str(int idx, const char *name, char *buf, size_t len)
{
	char path[256];

	snprintf(path, sizeof(path), "%s/class/misc/peerdirect%d/%s", sysroot, idx, name);
	return read_file(path, buf, len);
}

unsigned long long attr_u64(int idx, const char *name)
{
	unsigned long long v;

	return attr_num(idx, name, &v) ? 0 : v;
}

/* An attribute that is a number (decimal, or 0x for features): 0, else -1
 * (absent, an older module, or not a number). */
int attr_num(int idx, const char *name, unsigned long long *out)
{
	char buf[64], *end;

	if (attr_str(idx, name, buf, sizeof(buf)) || buf[0] < '0' || buf[0] > '9')
		return -1;
	errno = 0;
	*out = strtoull(buf, &end, 0);
	return errno || *end ? -1 : 0;
}

/* A counter in JSON: its value, or null when the module does not have it. */
void jattr(const char *k, int idx, const char *name)
{
	unsigned long long v;

	if (attr_num(idx, name, &v))
		jstr(k, NULL);
	else
		ju64(k, v);
}

void jopen_device(int idx)
{
	char name[32];

	snprintf(name, sizeof(name), "peerdirect%d", idx);
	jopen(NULL, '{');
	jstr("device", name);
}

bool no_args(const char *cmd, int argc)
{
	if (argc > 1)
		err("%s takes no arguments", cmd);
	return argc > 1;
}

bool module_loaded(void)
{
	char path[256];
	struct stat st;

	snprintf(path, sizeof(path), "%s/module/peerdirect", sysroot);
	return !stat(path, &st);
}

static int cmp_int(const void *a, const void *b)
{
	return *(const int *)a - *(const int *)b;
}

/* The indices of the peerdirect devices, sorted; -1 with errno-like code. */
int list_devices(int *out, int max)
{
	int n = tool_dev_indices(sysroot, out, max);

	qsort(out, n, sizeof(*out), cmp_int);
	return n;
}

/*
 * The devices a command covers: -d N, or all.  Exit code on failure (with
 * the reason printed): module not loaded, no device, no such device.
 */
int select_devices(int *out, int *nr)
{
	int all[MAX_DEVS], n, i;

	n = list_devices(all, MAX_DEVS);
	if (!n) {
		err(module_loaded() ? "no peerdirect device (the module is loaded but has no devices)"
				    : "the peerdirect module is not loaded (modprobe peerdirect)");
		return EX_NODEV;
	}
	if (want_dev < 0) {
		memcpy(out, all, n * sizeof(*out));
		*nr = n;
		return 0;
	}
	for (i = 0; i < n; i++)
		if (all[i] == want_dev) {
			out[0] = want_dev;
			*nr = 1;
			return 0;
		}
	err("no device peerdirect%d", want_dev);
	return EX_NODEV;
}

int open_dev(int idx, int mode)
{
	char path[128];
	int fd;

	snprintf(path, sizeof(path), "%s/peerdirect%d", devroot, idx);
	fd = open(path, mode | O_CLOEXEC);
	if (fd < 0)
		err("%s: %s%s", path, strerror(errno),
		    errno == EACCES ? " (root or the peerdirect group needed)" : "");
	if (fd < 0)	/* a missing node is a missing device, not a missing export */
		return errno == ENOENT ? -ENODEV : -errno;
	return fd;
}

const char *const revoked_attrs[NR_REVOKED_ATTRS] = {
	"revoked/free", "revoked/revoke", "revoked/reset", "revoked/admin", "revoked/unplug",
};

/* The last component of the symlink at path into buf (truncated to fit):
 * 0, else -1 with buf empty (no link). */
int link_base(const char *path, char *buf, size_t len)
{
	char link[PATH_MAX];
	const char *base;
	ssize_t n = readlink(path, link, sizeof(link) - 1);

	buf[0] = 0;
	if (n <= 0)
		return -1;
	link[n] = 0;
	base = strrchr(link, '/');
	snprintf(buf, len, "%s", base ? base + 1 : link);
	return 0;
}

/* The PCI function the device sits on, or "" (a simulated device). */
void dev_parent(int idx, char *buf, size_t len)
{
	char path[256];

	snprintf(path, sizeof(path), "%s/class/misc/peerdirect%d/device", sysroot, idx);
	link_base(path, buf, len);
}

/* tgid 0: the exporter is outside the reader's pid namespace (LIST gives
 * pids as the caller's namespace sees them). */
void proc_comm(int tgid, char *buf, size_t len)
{
	char path[64];

	if (tgid <= 0) {
		snprintf(buf, len, "-");
		return;
	}
	snprintf(path, sizeof(path), "/proc/%d/comm", tgid);
	if (read_file(path, buf, len))
		snprintf(buf, len, "?");
	/* Any user names its own process: no escape sequences on root's
	 * terminal (JSON escapes them itself). */
	if (!json)
		term_safe(buf);
}
