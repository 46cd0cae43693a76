// SPDX-License-Identifier: MIT
/*
 * pdctl bind / unbind: hand PCI functions to the peerdirect driver, or take
 * them back, through the kernel's own per-device switch: driver_override
 * names the only driver that may bind the function, and it stays set until
 * cleared, so the binding survives a module reload (the driver core matches
 * the override when the module registers).  /sys/bus/pci/drivers_probe then
 * asks the core to probe the function now.
 *
 * A function held by another driver is refused unless --force, which first
 * writes its address to that driver's unbind file (and says so).
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pdctl.h"
#include "json.h"

#define DRIVER "peerdirect"
#define MAX_FUNCS 256

struct target {
	char addr[16];		/* DDDD:BB:DD.F */
};

static int wr(const char *path, const char *val)
{
	ssize_t n;
	int fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	n = write(fd, val, strlen(val));
	if (n < 0) {
		int e = errno;

		close(fd);
		return -e;
	}
	return close(fd) ? -errno : 0;
}

/* DDDD:BB:DD.F (or BB:DD.F, domain 0), "pci:" prefix allowed, into out. */
int pd_parse_bdf(const char *s, char *out, size_t len)
{
	unsigned int dom = 0, bus, dev, fn;
	char tail;

	if (!strncmp(s, "pci:", 4))
		s += 4;
	if (sscanf(s, "%4x:%2x:%2x.%1x%c", &dom, &bus, &dev, &fn, &tail) != 4) {
		dom = 0;
		if (sscanf(s, "%2x:%2x.%1x%c", &bus, &dev, &fn, &tail) != 3)
			return -EINVAL;
	}
	if (dev > 0x1f || fn > 7 || strchr(s, ' ') || strchr(s, '+') || strchr(s, '-'))
		return -EINVAL;
	snprintf(out, len, "%04x:%02x:%02x.%x", dom, bus, dev, fn);
	return 0;
}

/* VVVV:DDDD, hex: 0 and the two ids, else -EINVAL. */
static int parse_ids(const char *s, unsigned int *ven, unsigned int *dev)
{
	size_t i;

	if (strlen(s) != 9 || s[4] != ':')
		return -EINVAL;
	for (i = 0; i < 9; i++)
		if (i != 4 && !isxdigit((unsigned char)s[i]))
			return -EINVAL;
	return sscanf(s, "%4x:%4x", ven, dev) == 2 ? 0 : -EINVAL;
}

static unsigned int hex_attr(const char *addr, const char *name)
{
	char path[PATH_MAX], buf[32];

	snprintf(path, sizeof(path), "%s/bus/pci/devices/%.15s/%s", sysroot, addr, name);
	if (read_file(path, buf, sizeof(buf)))
		return ~0u;
	return (unsigned int)strtoul(buf, NULL, 16);
}

/*
 * The functions a target names, appended to t[*n]: 0, -ENODEV when there
 * are none, -EINVAL when it is neither an address nor vendor:device.
 */
static int resolve(const char *s, struct target *t, int *n)
{
	char addr[16], path[PATH_MAX];
	unsigned int ven, dev;
	struct dirent **names;
	struct stat st;
	int i, nr, found = 0;

	if (!pd_parse_bdf(s, addr, sizeof(addr))) {
		snprintf(path, sizeof(path), "%s/bus/pci/devices/%.15s", sysroot, addr);
		if (stat(path, &st))
			return -ENODEV;
		if (*n < MAX_FUNCS)
			memcpy(t[(*n)++].addr, addr, sizeof(addr));
		return 0;
	}
	if (parse_ids(s, &ven, &dev))
		return -EINVAL;
	snprintf(path, sizeof(path), "%s/bus/pci/devices", sysroot);
	nr = scandir(path, &names, NULL, alphasort);
	for (i = 0; i < nr; i++) {
		const char *a = names[i]->d_name;

		if (a[0] != '.' && strlen(a) < sizeof(addr) && hex_attr(a, "vendor") == ven &&
		    hex_attr(a, "device") == dev && *n < MAX_FUNCS) {
			memcpy(t[(*n)++].addr, a, strlen(a) + 1);
			found++;
		}
		free(names[i]);
	}
	if (nr >= 0)
		free(names);
	return found ? 0 : -ENODEV;
}

/* The driver bound to addr, "" when none. */
static void bound_driver(const char *addr, char *buf, size_t len)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/bus/pci/devices/%.15s/driver", sysroot, addr);
	if (link_base(path, buf, len))
		buf[0] = 0;
}

/*
 * Why the probe left addr unbound: the kernel log's last lines naming it
 * (/dev/kmsg, root only), else what sysfs shows.
 */
static void why_unbound(const char *addr, char *why, size_t len)
{
	char line[1024], last[3][512] = { "", "", "" };
	int fd, k = 0, i, used = 0;
	ssize_t n;

	/* a fake sysfs (the tests) has no kernel log of its own */
	fd = strcmp(sysroot, "/sys") ? -1 : open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	while (fd >= 0) {
		char *msg;

		n = read(fd, line, sizeof(line) - 1);
		if (n < 0 && errno == EPIPE)	/* records overwritten under us */
			continue;
		if (n <= 0)
			break;
		line[n] = 0;
		msg = strchr(line, ';');
		if (!msg || !strstr(msg, addr))
			continue;
		msg[strcspn(msg, "\n")] = 0;
		snprintf(last[k++ % 3], sizeof(last[0]), "%s", msg + 1);
	}
	if (fd >= 0)
		close(fd);
	why[0] = 0;
	for (i = k > 3 ? k - 3 : 0; i < k; i++)
		used += snprintf(why + used, len - used, "%s\"%s\"", used ? "; " : "",
				 last[i % 3]);
	if (!used)
		snprintf(why, len, "the kernel log names no reason (dmesg | grep %.15s)", addr);
}

static void result(const char *addr, const char *action, const char *driver, const char *msg)
{
	if (json) {
		jopen(NULL, '{');
		jstr("address", addr);
		jstr("action", action);
		jstr("driver", driver);
		if (msg)
			jstr("message", msg);
		jclose('}');
	} else {
		printf("%s: %s%s%s\n", addr, action, msg ? ": " : "", msg ? msg : "");
	}
}

/* Error for one function: the message on stderr (and in JSON), the exit code. */
static int fail(const char *addr, int code, const char *fmt, const char *arg, const char *arg2)
{
	static char msg[PATH_MAX * 2 + 2048];

	snprintf(msg, sizeof(msg), fmt, arg, arg2);
	fprintf(stderr, "pdctl: %s: %s\n", addr, msg);
	if (json) {
		jopen(NULL, '{');
		jstr("address", addr);
		jstr("error", msg);
		jclose('}');
	}
	return code;
}

static int code_of(int e)
{
	return e == -EACCES || e == -EPERM ? EX_PERM : EX_FAIL;
}

static int bind_one(const char *addr, bool force)
{
	char dir[PATH_MAX], path[PATH_MAX + 32], drv[64], why[1600];
	int ret;

	snprintf(dir, sizeof(dir), "%s/bus/pci/devices/%.15s", sysroot, addr);
	bound_driver(addr, drv, sizeof(drv));
	if (!strcmp(drv, DRIVER)) {
		/* bound by bind_ivshmem or new_id: pin it, so a reload keeps it */
		snprintf(path, sizeof(path), "%s/driver_override", dir);
		ret = wr(path, DRIVER);
		if (ret)
			return fail(addr, code_of(ret), "writing %s: %s", path, strerror(-ret));
		result(addr, "bound", DRIVER, "already bound to " DRIVER);
		return 0;
	}
	if (drv[0] && !force)
		return fail(addr, EX_FAIL, "held by driver %s; pdctl bind --force unbinds it "
			    "first (its users lose the device)%s", drv, "");
	/*
	 * driver_override first: from then on no other driver can take the
	 * function, so a vendor module loaded or a rescan between the unbind
	 * and our probe cannot grab it back; and a failed write leaves the
	 * holder bound.
	 */
	snprintf(path, sizeof(path), "%s/driver_override", dir);
	ret = wr(path, DRIVER);
	if (ret)
		return fail(addr, code_of(ret), "writing %s: %s", path, strerror(-ret));
	if (drv[0]) {
		snprintf(path, sizeof(path), "%s/driver/unbind", dir);
		ret = wr(path, addr);
		if (ret)
			return fail(addr, code_of(ret), "unbinding from %s: %s", drv,
				    strerror(-ret));
		/* stderr under --json: stdout holds one document */
		fprintf(json ? stderr : stdout, "%s: unbound from %s (--force)\n", addr, drv);
	}
	snprintf(path, sizeof(path), "%s/bus/pci/drivers_probe", sysroot);
	ret = wr(path, addr);
	/* The core reports no probe failure here: the driver link says. */
	bound_driver(addr, drv, sizeof(drv));
	if (strcmp(drv, DRIVER)) {
		why_unbound(addr, why, sizeof(why));
		return fail(addr, EX_FAIL, "driver_override is " DRIVER " but the driver did "
			    "not take it: %s%s", why, ret ? " (drivers_probe failed)" : "");
	}
	result(addr, "bound", DRIVER, NULL);
	return 0;
}

static int unbind_one(const char *addr)
{
	char dir[PATH_MAX], path[PATH_MAX + 32], drv[64];
	int ret;

	snprintf(dir, sizeof(dir), "%s/bus/pci/devices/%.15s", sysroot, addr);
	bound_driver(addr, drv, sizeof(drv));
	if (drv[0] && strcmp(drv, DRIVER))
		return fail(addr, EX_FAIL, "bound to %s, not " DRIVER ": left alone%s", drv, "");
	/* The override first: nothing may rebind it between the two. */
	snprintf(path, sizeof(path), "%s/driver_override", dir);
	ret = wr(path, "\n");
	if (ret)
		return fail(addr, code_of(ret), "clearing %s: %s", path, strerror(-ret));
	if (drv[0]) {
		snprintf(path, sizeof(path), "%s/driver/unbind", dir);
		ret = wr(path, addr);
		if (ret)
			return fail(addr, code_of(ret), "writing %s: %s", path, strerror(-ret));
	}
	result(addr, "unbound", "", drv[0] ? NULL : "was not bound; driver_override cleared");
	return 0;
}

static int usage_err(const char *cmd, const char *msg, const char *arg)
{
	char m[256];

	snprintf(m, sizeof(m), msg, arg);
	pdctl_err("%s: %s (%s [--force] ADDRESS|VENDOR:DEVICE...)", cmd, m, cmd);
	return EX_USAGE;
}

static int bind_cmd(int argc, char **argv, bool bind)
{
	static const struct option opts[] = {
		{ "force", no_argument, NULL, 'f' },
		{ "json", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 },
	};
	static struct target t[MAX_FUNCS];
	const char *cmd = argv[0];
	char path[PATH_MAX];
	struct stat st;
	bool force = false;
	int c, i, n = 0, ret = 0, r;

	optind = 0;	/* glibc: re-initialize, so options may follow operands */
	opterr = 0;
	while ((c = getopt_long(argc, argv, "fj", opts, NULL)) != -1) {
		if (c == 'f' && bind)
			force = true;
		else if (c == 'j')
			json = true;
		else
			return usage_err(cmd, "bad option '%s'", argv[optind - 1]);
	}
	if (optind >= argc)
		return usage_err(cmd, "%s", "no device named");
	for (i = optind; i < argc; i++) {
		r = resolve(argv[i], t, &n);
		if (r == -EINVAL)
			return usage_err(cmd, "'%s' is neither a PCI address (DDDD:BB:DD.F) "
					 "nor VENDOR:DEVICE", argv[i]);
		if (r) {
			pdctl_err("%s: no PCI device %s in %s/bus/pci/devices", cmd, argv[i],
				  sysroot);
			return EX_NODEV;
		}
	}
	snprintf(path, sizeof(path), "%s/bus/pci/drivers/" DRIVER, sysroot);
	if (bind && stat(path, &st)) {
		pdctl_err("bind: the peerdirect module is not loaded (no %s): modprobe peerdirect",
			  path);
		return EX_NODEV;
	}
	if (!strcmp(sysroot, "/sys") && geteuid()) {
		pdctl_err("%s: needs root (writes driver_override and drivers_probe)", cmd);
		return EX_PERM;
	}
	if (json) {
		jopen(NULL, '{');
		jopen("devices", '[');
	}
	for (i = 0; i < n; i++) {
		r = bind ? bind_one(t[i].addr, force) : unbind_one(t[i].addr);
		if (r && (!ret || r == EX_PERM))
			ret = r;
	}
	if (json) {
		jclose(']');
		if (ret)
			jstr("error", "one or more devices failed (see each device's error)");
		jclose('}');
		putchar('\n');
	}
	return ret;
}

int cmd_bind(int argc, char **argv)
{
	return bind_cmd(argc, argv, true);
}

int cmd_unbind(int argc, char **argv)
{
	return bind_cmd(argc, argv, false);
}
