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
 * pdctl_doctor.c, dlopen()s libibverbs, libfabric and libpeerdirect).
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
 */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <linux/peerdirect.h>

#include "pdctl.h"
#ifndef PDCTL_NO_DLOPEN
#include "peerdirect.h"
#endif
#include "pdctl_ext.h"

#ifndef PD_VERSION
#define PD_VERSION "unknown"
#endif
#include "tool_args.h"
#include "tool_cli.h"
#include "tool_device.h"

bool json;
int want_dev = -1;		/* -d N */
const char *sysroot = "/sys";
const char *devroot = "/dev";

static int errno_exit(int e)
{
	switch (e) {
	case EPERM: case EACCES: return EX_PERM;
	case ENOENT: return EX_NOENT;
	case ENODEV: case ENXIO: return EX_NODEV;
	default: return EX_FAIL;
	}
}

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

/* ---- JSON output ------------------------------------------------------ */

static bool jfirst = true;
static int jdepth;		/* open objects and arrays */
static bool jprinted;		/* a top-level value was closed */

void jsep(void)
{
	if (!jfirst)
		putchar(',');
	jfirst = false;
}

/* The length of the well-formed UTF-8 sequence at s, or 0. */
static size_t utf8_len(const unsigned char *s)
{
	unsigned int n, i, cp;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		n = 2, cp = s[0] & 0x1f;
	else if ((s[0] & 0xf0) == 0xe0)
		n = 3, cp = s[0] & 0x0f;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		n = 4, cp = s[0] & 0x07;
	else
		return 0;
	for (i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if (n == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff)))
		return 0;
	if (n == 4 && (cp < 0x10000 || cp > 0x10ffff))
		return 0;
	return n;
}

/*
 * A JSON string of bytes that come from processes (comm) and files: JSON
 * must be UTF-8, so a byte that starts no well-formed sequence is U+FFFD.
 */
void jstr_raw(const char *s)
{
	size_t n;

	putchar('"');
	for (; s && *s; s++) {
		unsigned char c = *s;

		if (c == '"' || c == '\\') {
			printf("\\%c", c);
		} else if (c < 0x20 || c == 0x7f) {
			printf("\\u%04x", c);
		} else if (c < 0x80) {
			putchar(c);
		} else if ((n = utf8_len((const unsigned char *)s))) {
			fwrite(s, 1, n, stdout);
			s += n - 1;
		} else {
			fputs("\\ufffd", stdout);
		}
	}
	putchar('"');
}

void jkey(const char *k)
{
	jsep();
	jstr_raw(k);
	putchar(':');
}

void jopen(const char *k, char c)
{
	if (k)
		jkey(k);
	else
		jsep();
	putchar(c);
	jfirst = true;
	jdepth++;
}

void jclose(char c)
{
	putchar(c);
	jfirst = false;
	if (jdepth > 0 && !--jdepth)
		jprinted = true;
}

void ju64(const char *k, unsigned long long v)
{
	jkey(k);
	printf("%llu", v);
}

void ji64(const char *k, long long v)
{
	jkey(k);
	printf("%lld", v);
}

void jbool(const char *k, bool v)
{
	jkey(k);
	fputs(v ? "true" : "false", stdout);
}

void jnull(const char *k)
{
	jkey(k);
	fputs("null", stdout);
}

void jstr(const char *k, const char *v)
{
	jkey(k);
	if (v)
		jstr_raw(v);
	else
		fputs("null", stdout);
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
static void jattr(const char *k, int idx, const char *name)
{
	unsigned long long v;

	if (attr_num(idx, name, &v))
		jstr(k, NULL);
	else
		ju64(k, v);
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
static int select_devices(int *out, int *nr)
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

static int open_dev(int idx)
{
	char path[128];
	int fd;

	snprintf(path, sizeof(path), "%s/peerdirect%d", devroot, idx);
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		err("%s: %s%s", path, strerror(errno),
		    errno == EACCES ? " (root or the peerdirect group needed)" : "");
	if (fd < 0)	/* a missing node is a missing device, not a missing export */
		return errno == ENOENT ? -ENODEV : -errno;
	return fd;
}

static const struct {
	unsigned long long bit;
	const char *name;
} feats[] = {
	{ PEERDIRECT_FEAT_EXPORT, "export" },
	{ PEERDIRECT_FEAT_PIN, "pin" },
	{ PEERDIRECT_FEAT_MOVE_NOTIFY, "move_notify" },
	{ PEERDIRECT_FEAT_CPU_MMAP, "cpu_mmap" },
	{ PEERDIRECT_FEAT_EVENTS, "events" },
	{ PEERDIRECT_FEAT_PAGELESS, "pageless" },
	{ PEERDIRECT_FEAT_P2P_REQUIRED, "p2p_required" },
	{ PEERDIRECT_FEAT_P2PDMA, "p2pdma" },
	{ PEERDIRECT_FEAT_REVOCABLE_ONLY, "revocable_only" },
	{ PEERDIRECT_FEAT_SUBSCRIBE, "subscribe" },
	{ PEERDIRECT_FEAT_LIST, "list" },
};

static const char *const reasons[] = {
	NULL, "free", "revoke", "reset", "admin", "unplug", "overflow",
};

static const char *reason_name(unsigned int r)
{
	return r < sizeof(reasons) / sizeof(reasons[0]) && reasons[r] ? reasons[r] : "unknown";
}

static const char *const revoked_attrs[] = {
	"revoked/free", "revoked/revoke", "revoked/reset", "revoked/admin", "revoked/unplug",
};

/* The PCI function the device sits on, or "" (a simulated device). */
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

static void dev_parent(int idx, char *buf, size_t len)
{
	char path[256];

	snprintf(path, sizeof(path), "%s/class/misc/peerdirect%d/device", sysroot, idx);
	link_base(path, buf, len);
}

/* ---- list, info --------------------------------------------------------- */

/* Where a device sits: PCI function, NUMA node, local CPUs ("" each for a
 * simulated device or one whose parent is not PCI). */
struct place {
	char pci[13], numa[16], cpus[256];
	bool sim;
};

static void dev_place(int idx, struct place *pl)
{
	memset(pl, 0, sizeof(*pl));
	pl->sim = tool_dev_simulated(sysroot, idx);
	if (tool_dev_pci(sysroot, idx, pl->pci))
		return;
	tool_dev_attr(sysroot, idx, "device/numa_node", pl->numa, sizeof(pl->numa));
	tool_dev_attr(sysroot, idx, "device/local_cpulist", pl->cpus, sizeof(pl->cpus));
	if (!json) {
		term_safe(pl->numa);
		term_safe(pl->cpus);
	}
}

static void json_place(int idx)
{
	struct place pl;
	long long numa;
	char *end;

	dev_place(idx, &pl);
	jbool("simulated", pl.sim);
	jstr("pci", pl.pci[0] ? pl.pci : NULL);
	numa = strtoll(pl.numa, &end, 10);
	if (pl.numa[0] && !*end)
		ji64("numa_node", numa);
	else
		jstr("numa_node", NULL);
	jstr("local_cpus", pl.cpus[0] ? pl.cpus : NULL);
}

static void json_device(int idx, bool full)
{
	char s[64], name[32];
	unsigned long long f = attr_u64(idx, "features");
	unsigned int i;

	snprintf(name, sizeof(name), "peerdirect%d", idx);
	jopen(NULL, '{');
	jstr("device", name);
	ji64("index", idx);
	jstr("backend", attr_str(idx, "backend", s, sizeof(s)) ? NULL : s);
	jstr("abi_version", attr_str(idx, "abi_version", s, sizeof(s)) ? NULL : s);
	jstr("state", attr_str(idx, "state", s, sizeof(s)) ? NULL : s);
	jattr("mem_size", idx, "mem_size");
	jattr("mem_free", idx, "mem_free");
	jattr("page_size", idx, "page_size");
	jattr("quota", idx, "quota");
	jattr("quarantined", idx, "quarantined");
	jattr("nr_allocs", idx, "nr_allocs");
	jattr("nr_exports", idx, "nr_exports");
	jattr("exports_total", idx, "exports_total");
	jattr("importer_mappings", idx, "importer_mappings");
	jattr("features", idx, "features");
	jopen("feature_names", '[');
	for (i = 0; i < sizeof(feats) / sizeof(feats[0]); i++)
		if (f & feats[i].bit) {
			jsep();
			jstr_raw(feats[i].name);
		}
	jclose(']');
	jbool("p2pdma", attr_u64(idx, "p2pdma"));
	jopen("revoked", '{');
	for (i = 0; i < 5; i++)
		jattr(revoked_attrs[i] + 8, idx, revoked_attrs[i]);
	jclose('}');
	jattr("revoke_timeouts", idx, "revoke_timeouts");
	jattr("resets", idx, "resets");
	if (full) {
		jattr("max_exports", idx, "max_exports");
		jattr("max_events", idx, "max_events");
		dev_parent(idx, s, sizeof(s));
		jstr("parent", s[0] ? s : NULL);
	}
	json_place(idx);
	jclose('}');
}

static void human_size(unsigned long long v, char *buf, size_t len)
{
	if (v >= (1ULL << 30) && !(v % (1ULL << 30)))
		snprintf(buf, len, "%lluG", v >> 30);
	else if (v >= (1ULL << 20) && !(v % (1ULL << 20)))
		snprintf(buf, len, "%lluM", v >> 20);
	else if (v >= (1ULL << 10) && !(v % (1ULL << 10)))
		snprintf(buf, len, "%lluK", v >> 10);
	else if (v >= (1ULL << 20))
		snprintf(buf, len, "%.1fM", v / 1048576.0);
	else
		snprintf(buf, len, "%llu", v);
}

/* {"devices": [...]} for list (summary) and info (every attribute): 0. */
static int json_devices(const int *devs, int n, bool full)
{
	int i;

	jopen(NULL, '{');
	jopen("devices", '[');
	for (i = 0; i < n; i++)
		json_device(devs[i], full);
	jclose(']');
	jclose('}');
	putchar('\n');
	return 0;
}

static int cmd_list(int argc, char **argv)
{
	int devs[MAX_DEVS], n, i, ret;

	(void)argv;
	if (argc > 1) {
		err("list takes no arguments");
		return EX_USAGE;
	}
	ret = select_devices(devs, &n);
	if (ret)
		return ret;
	if (json)
		return json_devices(devs, n, false);
	printf("%-12s %-8s %-9s %8s %8s %6s %8s %6s %7s %-6s %-12s %4s %s\n", "DEVICE", "BACKEND",
	       "STATE", "MEMORY", "FREE", "PAGE", "QUOTA", "ALLOCS", "EXPORTS", "P2PDMA", "PCI",
	       "NUMA", "CPUS");
	for (i = 0; i < n; i++) {
		char be[32], st[32], m[24], fr[24], pg[24], q[24], name[32];
		struct place pl;

		snprintf(name, sizeof(name), "peerdirect%d", devs[i]);
		if (attr_str(devs[i], "backend", be, sizeof(be)))
			strcpy(be, "?");
		if (attr_str(devs[i], "state", st, sizeof(st)))
			strcpy(st, "?");
		human_size(attr_u64(devs[i], "mem_size"), m, sizeof(m));
		human_size(attr_u64(devs[i], "mem_free"), fr, sizeof(fr));
		human_size(attr_u64(devs[i], "page_size"), pg, sizeof(pg));
		human_size(attr_u64(devs[i], "quota"), q, sizeof(q));
		dev_place(devs[i], &pl);
		printf("%-12s %-8s %-9s %8s %8s %6s %8s %6llu %7llu %-6s %-12s %4s %s%s\n", name, be,
		       st, m, fr, pg, q, attr_u64(devs[i], "nr_allocs"),
		       attr_u64(devs[i], "nr_exports"), attr_u64(devs[i], "p2pdma") ? "yes" : "no",
		       pl.pci[0] ? pl.pci : "-", pl.numa[0] ? pl.numa : "-",
		       pl.cpus[0] ? pl.cpus : "-", pl.sim ? "  (simulated: not an accelerator)" : "");
	}
	return 0;
}

static int cmd_info(int argc, char **argv)
{
	static const char *const plain[] = {
		"backend", "abi_version", "state", "mem_size", "mem_free", "page_size",
		"quota", "quarantined", "max_exports", "max_events", "nr_allocs",
		"nr_exports", "exports_total", "importer_mappings", "p2pdma",
		"revoke_timeouts", "resets",
	};
	int devs[MAX_DEVS], n, i, ret;
	unsigned int k;

	if (argc > 2) {
		err("info takes at most one device index");
		return EX_USAGE;
	}
	if (argc == 2) {
		char why[PATH_MAX + 128];

		ret = tool_dev_resolve(sysroot, argv[1], &want_dev, why, sizeof(why));
		if (ret) {
			err("info: %s", why);
			return ret == -EINVAL ? EX_USAGE : EX_NODEV;
		}
	}
	ret = select_devices(devs, &n);
	if (ret)
		return ret;
	if (json)
		return json_devices(devs, n, true);
	for (i = 0; i < n; i++) {
		unsigned long long f = attr_u64(devs[i], "features");
		char s[64];

		struct place pl;

		dev_place(devs[i], &pl);
		printf("%speerdirect%d%s\n", i ? "\n" : "", devs[i],
		       pl.sim ? " (simulated: RAM standing in for device memory)" : "");
		dev_parent(devs[i], s, sizeof(s));
		printf("  %-18s %s\n", "parent", s[0] ? s : "-");
		printf("  %-18s %s\n", "pci", pl.pci[0] ? pl.pci : "-");
		printf("  %-18s %s\n", "numa_node", pl.numa[0] ? pl.numa : "-");
		printf("  %-18s %s\n", "local_cpus", pl.cpus[0] ? pl.cpus : "-");
		for (k = 0; k < sizeof(plain) / sizeof(plain[0]); k++) {
			if (attr_str(devs[i], plain[k], s, sizeof(s)))
				strcpy(s, "?");
			printf("  %-18s %s\n", plain[k], s);
		}
		printf("  %-18s 0x%llx", "features", f);
		for (k = 0; k < sizeof(feats) / sizeof(feats[0]); k++)
			if (f & feats[k].bit)
				printf(" %s", feats[k].name);
		putchar('\n');
		for (k = 0; k < 5; k++)
			printf("  %-18s %llu\n", revoked_attrs[k], attr_u64(devs[i], revoked_attrs[k]));
	}
	return 0;
}

/* ---- exports, allocs (PEERDIRECT_IOCTL_LIST) ----------------------------- */

struct listing {
	int dev;
	bool knows_revocable;	/* uapi 2.2: ATTACH_INFO_REVOCABLE is set when true */
	struct peerdirect_export_info *e;
	struct peerdirect_attach_info *a;
	uint32_t ne, na, total_e, total_a;
};

/*
 * What a revoke does to this importer.  A 2.1 module never sets
 * ATTACH_INFO_REVOCABLE, so there a clear bit means "not known".
 */
static const char *revoke_effect(const struct listing *x, const struct peerdirect_attach_info *a)
{
	if (!x->knows_revocable)
		return "unknown";
	return a->flags & PEERDIRECT_ATTACH_INFO_REVOCABLE ? "unmaps" : "waits, then quarantines";
}

/* Retries with bigger arrays until everything fits (or the uapi's cap). */
static int do_list(int idx, struct listing *x)
{
	uint32_t cap_e = 64, cap_a = 64;
	int fd = open_dev(idx), tries;

	memset(x, 0, sizeof(*x));
	x->dev = idx;
	x->knows_revocable = attr_u64(idx, "features") & PEERDIRECT_FEAT_LIST_ALLOCS;
	if (fd < 0)
		return fd;
	for (tries = 0; tries < 8; tries++) {
		struct peerdirect_list l = {
			.argsz = sizeof(l), .flags = PEERDIRECT_LIST_ATTACHMENTS,
			.export_size = sizeof(*x->e), .attach_size = sizeof(*x->a),
		};

		free(x->e);
		free(x->a);
		x->e = calloc(cap_e, sizeof(*x->e));
		x->a = calloc(cap_a, sizeof(*x->a));
		if (!x->e || !x->a) {
			close(fd);
			return -ENOMEM;
		}
		l.exports = (uintptr_t)x->e;
		l.nr_exports = cap_e;
		l.attachments = (uintptr_t)x->a;
		l.nr_attachments = cap_a;
		if (ioctl(fd, PEERDIRECT_IOCTL_LIST, &l)) {
			int e = errno;

			err("peerdirect%d: PEERDIRECT_IOCTL_LIST: %s%s", idx, strerror(e),
			    e == ENOTTY || e == EINVAL ? " (the module predates uapi 2.1)" : "");
			close(fd);
			return -e;
		}
		x->ne = l.nr_exports;
		x->na = l.nr_attachments;
		x->total_e = l.total_exports;
		x->total_a = l.total_attachments;
		if ((l.total_exports <= cap_e && l.total_attachments <= cap_a) ||
		    (cap_e >= PEERDIRECT_LIST_MAX && cap_a >= PEERDIRECT_LIST_MAX))
			break;
		/* Things change between calls: some headroom. */
		cap_e = l.total_exports + 16 > PEERDIRECT_LIST_MAX ? PEERDIRECT_LIST_MAX
								   : l.total_exports + 16;
		cap_a = l.total_attachments + 16 > PEERDIRECT_LIST_MAX ? PEERDIRECT_LIST_MAX
								       : l.total_attachments + 16;
	}
	close(fd);
	return 0;
}

static void free_listing(struct listing *x)
{
	free(x->e);
	free(x->a);
}

static long long boottime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_BOOTTIME, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
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

static const char *export_state(const struct peerdirect_export_info *e)
{
	if (e->flags & PEERDIRECT_EXPORT_INFO_BUSY)
		return "busy";
	if (e->flags & PEERDIRECT_EXPORT_INFO_REVOKED)
		return reason_name(e->reason);
	return "live";
}

static void age(long long since_ns, char *buf, size_t len)
{
	long long s = (boottime_ns() - since_ns) / 1000000000LL;

	if (s < 0)
		s = 0;
	if (s < 120)
		snprintf(buf, len, "%llds", s);
	else if (s < 7200)
		snprintf(buf, len, "%lldm", s / 60);
	else if (s < 172800)
		snprintf(buf, len, "%lldh", s / 3600);
	else
		snprintf(buf, len, "%lldd", s / 86400);
}

/* Gathers every selected device's listing; exit code on failure. */
static int gather(struct listing *xs, int *nr)
{
	int devs[MAX_DEVS], n, i, ret;

	ret = select_devices(devs, &n);
	if (ret)
		return ret;
	for (i = 0; i < n; i++) {
		ret = do_list(devs[i], &xs[i]);
		if (ret) {
			while (i-- > 0)
				free_listing(&xs[i]);
			return errno_exit(-ret);
		}
	}
	*nr = n;
	return 0;
}

static int cmd_exports(int argc, char **argv)
{
	static struct listing xs[MAX_DEVS];
	long long now = boottime_ns();
	int n, i, ret;
	uint32_t k, j;

	(void)argv;
	if (argc > 1) {
		err("exports takes no arguments");
		return EX_USAGE;
	}
	ret = gather(xs, &n);
	if (ret)
		return ret;
	if (json) {
		bool truncated = false;

		jopen(NULL, '{');
		jopen("exports", '[');
	for (i = 0; i < n; i++) {
		char name[32], comm[32];

		snprintf(name, sizeof(name), "peerdirect%d", xs[i].dev);
		truncated |= xs[i].ne < xs[i].total_e || xs[i].na < xs[i].total_a;
		for (k = 0; k < xs[i].ne; k++) {
			const struct peerdirect_export_info *e = &xs[i].e[k];

			proc_comm(e->tgid, comm, sizeof(comm));
			jopen(NULL, '{');
			jstr("device", name);
			ju64("export_id", e->export_id);
			ju64("inode", e->inode);
			ju64("handle", e->handle);
			ju64("offset", e->offset);
			ju64("length", e->length);
			ji64("tgid", e->tgid);
			jstr("comm", comm);
			ju64("uid", e->uid);
			jbool("rdonly", e->flags & PEERDIRECT_EXPORT_INFO_RDONLY);
			jbool("revoked", e->flags & PEERDIRECT_EXPORT_INFO_REVOKED);
			jstr("reason", e->flags & PEERDIRECT_EXPORT_INFO_REVOKED ?
				       reason_name(e->reason) : NULL);
			jbool("busy", e->flags & PEERDIRECT_EXPORT_INFO_BUSY);
			jbool("freed", e->flags & PEERDIRECT_EXPORT_INFO_OWNER_GONE);
			ju64("attachments", e->nr_attachments);
			ju64("pins", e->nr_pins);
			ju64("maps", e->nr_maps);
			ju64("mapped_bytes", e->mapped_bytes);
			ju64("created_ns", e->created_ns);
			ji64("age_ms", (now - (long long)e->created_ns) / 1000000);
			jopen("importers", '[');
			for (j = 0; j < xs[i].na; j++) {
				const struct peerdirect_attach_info *a = &xs[i].a[j];

				if (a->export_id != e->export_id)
					continue;
				jopen(NULL, '{');
				jstr("device", a->device);
				jstr("mode", a->flags & PEERDIRECT_ATTACH_INFO_PINNED ? "pinned" :
					     a->flags & PEERDIRECT_ATTACH_INFO_DYNAMIC ? "dynamic" :
					     "static");
				jbool("pinned", a->flags & PEERDIRECT_ATTACH_INFO_PINNED);
				jbool("dynamic", a->flags & PEERDIRECT_ATTACH_INFO_DYNAMIC);
				jbool("peer2peer", a->flags & PEERDIRECT_ATTACH_INFO_PEER2PEER);
				if (xs[i].knows_revocable)
					jbool("revocable", a->flags & PEERDIRECT_ATTACH_INFO_REVOCABLE);
				else
					jnull("revocable");
				jstr("on_revoke", revoke_effect(&xs[i], a));
				ju64("pins", a->pins);
				ju64("maps", a->maps);
				ju64("mapped_bytes", a->mapped_bytes);
				ju64("since_ns", a->since_ns);
				ji64("age_ms", (now - (long long)a->since_ns) / 1000000);
				jclose('}');
			}
			jclose(']');
			jclose('}');
		}
	}
		jclose(']');
		jbool("truncated", truncated);
		jclose('}');
		putchar('\n');
	} else {
		printf("%-12s %6s %7s %-15s %6s %8s %5s %-7s %4s %5s %8s %s\n", "DEVICE", "EXPORT",
		       "PID", "COMM", "HANDLE", "LENGTH", "MODE", "STATE", "PINS", "MAPS",
		       "MAPPED", "AGE");
		for (i = 0; i < n; i++) {
			for (k = 0; k < xs[i].ne; k++) {
				const struct peerdirect_export_info *e = &xs[i].e[k];
				char comm[32], len[24], mapped[24], ag[24], name[32];

				snprintf(name, sizeof(name), "peerdirect%d", xs[i].dev);
				proc_comm(e->tgid, comm, sizeof(comm));
				human_size(e->length, len, sizeof(len));
				human_size(e->mapped_bytes, mapped, sizeof(mapped));
				age(e->created_ns, ag, sizeof(ag));
				printf("%-12s %6llu %7d %-15.15s %6llu %8s %5s %-7s %4u %5u %8s %s\n",
				       name, (unsigned long long)e->export_id, e->tgid, comm,
				       (unsigned long long)e->handle, len,
				       e->flags & PEERDIRECT_EXPORT_INFO_RDONLY ? "ro" : "rw",
				       export_state(e), e->nr_pins, e->nr_maps, mapped, ag);
				for (j = 0; j < xs[i].na; j++) {
					const struct peerdirect_attach_info *a = &xs[i].a[j];

					if (a->export_id != e->export_id)
						continue;
					human_size(a->mapped_bytes, mapped, sizeof(mapped));
					age(a->since_ns, ag, sizeof(ag));
					printf("  importer %-20s %-7s p2p=%s pins=%u maps=%u mapped=%s since=%s revocable=%s (a revoke %s)\n",
					       a->device,
					       a->flags & PEERDIRECT_ATTACH_INFO_PINNED ? "pinned" :
					       a->flags & PEERDIRECT_ATTACH_INFO_DYNAMIC ? "dynamic" :
					       "static",
					       a->flags & PEERDIRECT_ATTACH_INFO_PEER2PEER ? "yes" : "no",
					       a->pins, a->maps, mapped, ag,
					       !xs[i].knows_revocable ? "?" :
					       a->flags & PEERDIRECT_ATTACH_INFO_REVOCABLE ? "yes" : "no",
					       revoke_effect(&xs[i], a));
				}
			}
			if (xs[i].ne < xs[i].total_e)
				printf("(peerdirect%d: %u of %u exports shown)\n", xs[i].dev,
				       xs[i].ne, xs[i].total_e);
		}
	}
	for (i = 0; i < n; i++)
		free_listing(&xs[i]);
	return 0;
}

/*
 * Allocations, as the exports show them: one line per (process,
 * handle) with a live or quarantined export.  sysfs nr_allocs counts every
 * allocation, exported or not.
 */
struct alloc_row {
	int dev, tgid;
	unsigned int uid, exports, revoked;
	unsigned long long handle, exported, mapped;
};

static int cmd_allocs(int argc, char **argv)
{
	static struct listing xs[MAX_DEVS];
	struct alloc_row *rows = NULL;
	size_t nrows = 0, cap = 0, r;
	int n, i, ret;
	uint32_t k;

	(void)argv;
	if (argc > 1) {
		err("allocs takes no arguments");
		return EX_USAGE;
	}
	ret = gather(xs, &n);
	if (ret)
		return ret;
	for (i = 0; i < n; i++) {
		for (k = 0; k < xs[i].ne; k++) {
			const struct peerdirect_export_info *e = &xs[i].e[k];

			/* Handles are per open file: with no pid to tell
			 * processes apart (tgid 0), an export is a row of its
			 * own rather than a sum over strangers. */
			for (r = 0; r < nrows && e->tgid > 0; r++)
				if (rows[r].dev == xs[i].dev && rows[r].tgid == e->tgid &&
				    rows[r].handle == e->handle)
					break;
			if (r == nrows || e->tgid <= 0) {
				r = nrows;
				if (nrows == cap) {
					struct alloc_row *nr;

					cap = cap ? 2 * cap : 64;
					nr = realloc(rows, cap * sizeof(*rows));
					if (!nr) {
						ret = EX_FAIL;
						goto out;
					}
					rows = nr;
				}
				memset(&rows[nrows], 0, sizeof(rows[0]));
				rows[nrows].dev = xs[i].dev;
				rows[nrows].tgid = e->tgid;
				rows[nrows].uid = e->uid;
				rows[nrows].handle = e->handle;
				nrows++;
			}
			rows[r].exports++;
			rows[r].revoked += !!(e->flags & PEERDIRECT_EXPORT_INFO_REVOKED);
			rows[r].exported += e->length;
			rows[r].mapped += e->mapped_bytes;
		}
	}
	if (json) {
		jopen(NULL, '{');
		jopen("allocations", '[');
		for (r = 0; r < nrows; r++) {
			char name[32], comm[32];

			snprintf(name, sizeof(name), "peerdirect%d", rows[r].dev);
			proc_comm(rows[r].tgid, comm, sizeof(comm));
			jopen(NULL, '{');
			jstr("device", name);
			ji64("tgid", rows[r].tgid);
			jstr("comm", comm);
			ju64("uid", rows[r].uid);
			ju64("handle", rows[r].handle);
			ju64("exports", rows[r].exports);
			ju64("revoked_exports", rows[r].revoked);
			ju64("exported_bytes", rows[r].exported);
			ju64("mapped_bytes", rows[r].mapped);
			jclose('}');
		}
		jclose(']');
		jclose('}');
		putchar('\n');
	} else {
		printf("%-12s %7s %-15s %6s %6s %7s %7s %9s %9s\n", "DEVICE", "PID", "COMM", "UID",
		       "HANDLE", "EXPORTS", "REVOKED", "EXPORTED", "MAPPED");
		for (r = 0; r < nrows; r++) {
			char comm[32], ex[24], mp[24];

			proc_comm(rows[r].tgid, comm, sizeof(comm));
			human_size(rows[r].exported, ex, sizeof(ex));
			human_size(rows[r].mapped, mp, sizeof(mp));
			printf("peerdirect%-2d %7d %-15.15s %6u %6llu %7u %7u %9s %9s\n", rows[r].dev,
			       rows[r].tgid, comm, rows[r].uid, rows[r].handle, rows[r].exports,
			       rows[r].revoked, ex, mp);
		}
	}
	ret = 0;
out:
	free(rows);
	for (i = 0; i < n; i++)
		free_listing(&xs[i]);
	return ret;
}

/* ---- revoke, reset ---------------------------------------------------- */

/*
 * One administrative ioctl on device dev: 0, or the exit code once the
 * error is said (EPERM names the capability; ENOENT gets enoent_hint).
 */
static int admin_ioctl(int dev, unsigned long req, void *arg, const char *what,
		       const char *enoent_hint)
{
	int fd = open_dev(dev), e;

	if (fd < 0)
		return errno_exit(-fd);
	if (!ioctl(fd, req, arg)) {
		close(fd);
		return 0;
	}
	e = errno;
	err("peerdirect%d: %s: %s%s", dev, what, strerror(e),
	    e == EPERM ? " (CAP_SYS_ADMIN needed)" :
	    e == ENOENT && enoent_hint ? enoent_hint : "");
	close(fd);
	return errno_exit(e);
}

/* A revocation's outcome as one JSON object; export_id 0 for a reset. */
static void print_revoked_json(int dev, uint64_t export_id, uint64_t revoked, uint64_t pending)
{
	char name[32];

	snprintf(name, sizeof(name), "peerdirect%d", dev);
	jopen(NULL, '{');
	jstr("device", name);
	if (export_id)
		ju64("export_id", export_id);
	ju64("revoked", revoked);
	ju64("pending", pending);
	jclose('}');
	putchar('\n');
}

static int cmd_revoke(int argc, char **argv)
{
	struct peerdirect_revoke r = { .argsz = sizeof(r), .flags = PEERDIRECT_REVOKE_EXPORT };
	int devs[MAX_DEVS], n, ret;
	unsigned long long id;
	char what[48];

	if (argc != 2) {
		err("usage: pdctl -d DEVICE revoke EXPORT_ID");
		return EX_USAGE;
	}
	if (want_dev < 0) {
		err("revoke: -d DEVICE required (export ids are per device; see pdctl exports)");
		return EX_USAGE;
	}
	if (tool_ull(argv[1], 1, UINT64_MAX, &id)) {
		err("revoke: bad export id '%s' (a whole number from 1)", argv[1]);
		return EX_USAGE;
	}
	r.export_id = id;
	ret = select_devices(devs, &n);
	if (ret)
		return ret;
	snprintf(what, sizeof(what), "revoke export %llu", (unsigned long long)r.export_id);
	ret = admin_ioctl(devs[0], PEERDIRECT_IOCTL_ADMIN_REVOKE, &r, what,
			  " (no such export on this device; see pdctl exports)");
	if (ret)
		return ret;
	if (json)
		print_revoked_json(devs[0], r.export_id, r.revoked, r.pending);
	else
		printf("peerdirect%d: export %llu: %s%s\n", devs[0],
		       (unsigned long long)r.export_id,
		       r.revoked ? "revoked" : "already revoked",
		       r.pending ? ", still mapped by an importer (memory quarantined)" : "");
	return r.pending ? EX_PENDING : 0;
}

static int cmd_reset(int argc, char **argv)
{
	struct peerdirect_reset r = { .argsz = sizeof(r) };
	int devs[MAX_DEVS], n, ret;

	(void)argv;
	if (argc != 1 || want_dev < 0) {
		err("usage: pdctl -d DEVICE reset (a reset revokes every export of the device)");
		return EX_USAGE;
	}
	ret = select_devices(devs, &n);
	if (ret)
		return ret;
	ret = admin_ioctl(devs[0], PEERDIRECT_IOCTL_RESET, &r, "reset", NULL);
	if (ret)
		return ret;
	if (json)
		print_revoked_json(devs[0], 0, r.revoked, r.pending);
	else
		printf("peerdirect%d: reset revoked %u export(s), %u still mapped by importers\n",
		       devs[0], r.revoked, r.pending);
	return r.pending ? EX_PENDING : 0;
}

/* ---- events ------------------------------------------------------------- */

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static int write_file(const char *path, const char *val)
{
	int f = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC), ret = 0;

	if (f < 0)
		return -errno;
	if (write(f, val, strlen(val)) < 0)
		ret = -errno;
	close(f);
	return ret;
}

/*
 * One trace line, "  comm-pid [cpu] flags  ts: peerdirect_NAME: k=v k=v",
 * as one JSON object: event, ts, and every k=v (numbers as numbers).
 */
static void event_json(const char *line)
{
	const char *p = strstr(line, ": peerdirect_"), *q;
	char ts[32] = "", tok[128];
	size_t n;

	if (!p)
		return;
	/* the timestamp is the token before ": peerdirect_" */
	for (q = p; q > line && q[-1] != ' '; q--)
		;
	n = (size_t)(p - q) < sizeof(ts) - 1 ? (size_t)(p - q) : sizeof(ts) - 1;
	memcpy(ts, q, n);
	ts[n] = 0;
	p += 2 + strlen("peerdirect_");
	jfirst = true;
	jopen(NULL, '{');
	q = strchr(p, ':');
	n = q ? (size_t)(q - p) : strlen(p);
	snprintf(tok, sizeof(tok), "%.*s", (int)n, p);
	jstr("event", tok);
	jkey("ts");
	fputs(ts[0] ? ts : "0", stdout);
	p = q ? q + 1 : p + n;
	while (*p) {
		const char *eq, *end;
		char key[64], val[128];
		bool num = true;
		size_t i;

		while (*p == ' ')
			p++;
		end = p + strcspn(p, " \n");
		eq = memchr(p, '=', end - p);
		if (eq && eq > p) {
			snprintf(key, sizeof(key), "%.*s", (int)(eq - p), p);
			snprintf(val, sizeof(val), "%.*s", (int)(end - eq - 1), eq + 1);
		} else if (end > p) {
			snprintf(key, sizeof(key), "%s", "state");
			snprintf(val, sizeof(val), "%.*s", (int)(end - p), p);
		} else {
			break;
		}
		for (i = 0; val[i]; i++)
			if (!(val[i] >= '0' && val[i] <= '9') && !(i == 0 && val[i] == '-' && val[1]))
				num = false;
		if (!val[0] || !strncmp(val, "0x", 2))
			num = false;
		if (num) {
			jkey(key);
			fputs(val, stdout);
		} else {
			jstr(key, val);
		}
		p = end;
	}
	jclose('}');
	putchar('\n');
	fflush(stdout);
}

/*
 * --follow: the module's trace events in a tracefs instance of our own
 * (instances/pdctl-PID), so whatever else traces is not disturbed; removed
 * on exit.  Without --follow: the revocation counters per device.
 */
static int cmd_events(int argc, char **argv)
{
	static const char *const tdirs[] = { "/sys/kernel/tracing", "/sys/kernel/debug/tracing" };
	bool follow = false, all = false;
	char inst[128], path[256], buf[8192];
	int devs[MAX_DEVS], n, i, ret, f = -1;
	size_t have = 0;
	unsigned int k;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--follow") || !strcmp(argv[i], "-f")) {
			follow = true;
		} else if (!strcmp(argv[i], "--all")) {
			all = true;
		} else {
			err("events: unknown argument '%s'", argv[i]);
			return EX_USAGE;
		}
	}
	if (all && !follow) {
		err("events: --all goes with --follow");
		return EX_USAGE;
	}
	ret = select_devices(devs, &n);
	if (ret)
		return ret;
	if (!follow) {
		if (json) {
			jopen(NULL, '{');
			jopen("devices", '[');
		} else {
			printf("%-12s %8s %8s %8s %8s %8s %9s\n", "DEVICE", "FREE", "REVOKE",
			       "RESET", "ADMIN", "UNPLUG", "TIMEOUTS");
		}
		for (i = 0; i < n; i++) {
			char name[32];

			snprintf(name, sizeof(name), "peerdirect%d", devs[i]);
			if (json) {
				jopen(NULL, '{');
				jstr("device", name);
				jopen("revoked", '{');
				for (k = 0; k < 5; k++)
					jattr(revoked_attrs[k] + 8, devs[i], revoked_attrs[k]);
				jclose('}');
				jattr("revoke_timeouts", devs[i], "revoke_timeouts");
				jclose('}');
				continue;
			}
			printf("%-12s", name);
			for (k = 0; k < 5; k++)
				printf(" %8llu", attr_u64(devs[i], revoked_attrs[k]));
			printf(" %9llu\n", attr_u64(devs[i], "revoke_timeouts"));
		}
		if (json) {
			jclose(']');
			jclose('}');
			putchar('\n');
		}
		return 0;
	}

	inst[0] = 0;
	for (k = 0; k < 2 && !inst[0]; k++) {
		snprintf(path, sizeof(path), "%s/instances", tdirs[k]);
		if (!access(path, W_OK))
			snprintf(inst, sizeof(inst), "%s/instances/pdctl-%d", tdirs[k], (int)getpid());
	}
	if (!inst[0]) {
		err("events --follow: no writable tracefs (root needed; mount -t tracefs nodev /sys/kernel/tracing)");
		return errno == EACCES || errno == EPERM ? EX_PERM : EX_FAIL;
	}
	if (mkdir(inst, 0700)) {
		err("%s: %s", inst, strerror(errno));
		return errno_exit(errno);
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGPIPE, on_signal);
	/* revocations and their delivery by default; every event with --all */
	snprintf(path, sizeof(path), "%s/events/peerdirect/enable", inst);
	if (all) {
		ret = write_file(path, "1");
	} else {
		static const char *const evs[] = {
			"peerdirect_revoke", "peerdirect_revoke_done", "peerdirect_event",
		};

		ret = 0;
		for (k = 0; k < 3 && !ret; k++) {
			snprintf(path, sizeof(path), "%s/events/peerdirect/%s/enable", inst, evs[k]);
			ret = write_file(path, "1");
		}
	}
	if (ret) {
		err("%s: %s (is the module loaded?)", path, strerror(-ret));
		ret = errno_exit(-ret);
		goto out;
	}
	snprintf(path, sizeof(path), "%s/trace_pipe", inst);
	f = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (f < 0) {
		err("%s: %s", path, strerror(errno));
		ret = EX_FAIL;
		goto out;
	}
	if (!json) {
		printf("# following peerdirect trace events (Ctrl-C ends)\n");
		fflush(stdout);
	}
	while (!stop) {
		struct pollfd pfd = { .fd = f, .events = POLLIN };
		ssize_t got;
		char *nl;

		if (poll(&pfd, 1, 200) <= 0)
			continue;
		got = read(f, buf + have, sizeof(buf) - 1 - have);
		if (got <= 0)
			continue;
		have += got;
		buf[have] = 0;
		while ((nl = strchr(buf, '\n'))) {
			*nl = 0;
			if (json) {
				event_json(buf);
			} else {
				term_safe(buf);
				puts(buf);
				fflush(stdout);
			}
			have -= nl + 1 - buf;
			memmove(buf, nl + 1, have + 1);
		}
		if (have == sizeof(buf) - 1)
			have = 0;	/* a line longer than the buffer: drop it */
	}
	ret = 0;
out:
	if (f >= 0)
		close(f);
	snprintf(path, sizeof(path), "%s/events/peerdirect/enable", inst);
	write_file(path, "0");
	if (rmdir(inst))
		err("%s: %s (remove it by hand)", inst, strerror(errno));
	return ret;
}

/* ---- version ------------------------------------------------------------ */

static int cmd_version(int argc, char **argv)
{
	int devs[MAX_DEVS], n, i;
	char mod[64], path[256], s[32];

	(void)argv;
	if (argc > 1) {
		err("version takes no arguments");
		return EX_USAGE;
	}
	snprintf(path, sizeof(path), "%s/module/peerdirect/version", sysroot);
	if (read_file(path, mod, sizeof(mod)))
		mod[0] = 0;
	n = list_devices(devs, MAX_DEVS);
	if (json) {
		char uapi[16];

		snprintf(uapi, sizeof(uapi), "%d.%d", PEERDIRECT_ABI_MAJOR, PEERDIRECT_ABI_MINOR);
		jopen(NULL, '{');
		jstr("pdctl", PD_VERSION);
		jstr("uapi", uapi);
		jstr("module", mod[0] ? mod : NULL);
		jopen("devices", '[');
		for (i = 0; i < n; i++) {
			char name[32];

			snprintf(name, sizeof(name), "peerdirect%d", devs[i]);
			jopen(NULL, '{');
			jstr("device", name);
			jstr("abi_version", attr_str(devs[i], "abi_version", s, sizeof(s)) ? NULL : s);
			jclose('}');
		}
		jclose(']');
		jclose('}');
		putchar('\n');
		return 0;
	}
	printf("pdctl %s (uapi %d.%d)\n", PD_VERSION, PEERDIRECT_ABI_MAJOR, PEERDIRECT_ABI_MINOR);
	printf("module %s\n", mod[0] ? mod : module_loaded() ? "loaded, version unknown" :
								"not loaded");
	for (i = 0; i < n; i++)
		printf("peerdirect%d uapi %s\n", devs[i],
		       attr_str(devs[i], "abi_version", s, sizeof(s)) ? "?" : s);
	return 0;
}

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

/* A library's symbol through dlopen: pdctl links neither library (the
 * static VM build loads none: both "not found"). */
static void *dl_sym(const char *lib, const char *sym, void **h)
{
#ifdef PDCTL_NO_DLOPEN
	(void)lib, (void)sym;
	*h = NULL;
	return NULL;
#else
	*h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
	return *h ? dlsym(*h, sym) : NULL;
#endif
}

/* --version: this build, then the libraries a program would run with. */
static int print_version(void)
{
	char pd[32] = "", fab[32] = "";
	uint32_t (*fiv)(void);
	void *h1, *h2, *get;

	get = dl_sym("libpeerdirect.so.1", "pd_get_api", &h1);
#ifndef PDCTL_NO_DLOPEN
	if (get) {
		const struct pd_api *api = NULL;

		if (!((pd_get_api_fn)get)(PD_ABI_MAJOR, 0, &api) && api)
			snprintf(pd, sizeof(pd), "%u.%u", (unsigned int)api->abi_major,
				 (unsigned int)api->abi_minor);
	}
#endif
	*(void **)&fiv = dl_sym("libfabric.so.1", "fi_version", &h2);
	if (fiv)
		snprintf(fab, sizeof(fab), "%u.%u", fiv() >> 16, fiv() & 0xffff);
	if (json) {
		jopen(NULL, '{');
		jstr("pdctl", PD_VERSION);
		jstr("libpeerdirect_abi", pd[0] ? pd : NULL);
		jstr("libfabric", fab[0] ? fab : NULL);
		jclose('}');
		putchar('\n');
	} else {
		printf("pdctl %s\n", PD_VERSION);
#ifdef PDCTL_NO_DLOPEN
		printf("libpeerdirect not checked (static build)\nlibfabric not checked (static build)\n");
#else
		printf("libpeerdirect %s\n", pd[0] ? pd : "not found (libpeerdirect.so.1)");
		printf("libfabric %s\n", fab[0] ? fab : "not found (libfabric.so.1)");
#endif
	}
	/* not dlclose()d: libfabric keeps what its constructors allocate in
	 * its own globals, which would then leak */
	(void)get, (void)h1, (void)h2;
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
	if (json && ret && !jprinted) {
		if (jdepth)	/* an object cut short: the error on a line of its own */
			putchar('\n');
		jfirst = true;
		jdepth = 0;
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
