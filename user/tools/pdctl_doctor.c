// SPDX-License-Identifier: MIT
/*
 * pdctl doctor: for each pair of a peerdirect device and a NIC, which path
 * the memory would take and why -- dmabuf (the NIC DMAs device memory: an
 * RDMA device accepted a dma-buf MR), mapped (the CPU reads the mapping: tcp
 * over a netdev) or bounce (staged through host memory) -- and what to fix.
 *
 * Checks, each a line with status ok/warn/fail (skip: not checked): the
 * kernel config, the module and its parameters, the device nodes, the
 * IOMMU, the PCI path between device and NIC, rdma-core (an
 * ibv_reg_dmabuf_mr of a real export, per RDMA device), libfabric's FI_HMEM
 * providers and libpeerdirect's own choice (pd_mr_path, pd_mr_reason).  libibverbs, libfabric and libpeerdirect are
 * dlopen()ed, so pdctl needs none of them; PDCTL_NO_DLOPEN (the static
 * build for the VMs) leaves those checks out.
 *
 * Roots for tests: PDCTL_SYSFS, PDCTL_DEV (pdctl.c), PDCTL_PROC (/proc),
 * PDCTL_BOOT (/boot); PDCTL_LIBS=none loads no library.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/peerdirect.h>

#ifndef PDCTL_NO_DLOPEN
#include <dlfcn.h>
#include <infiniband/verbs.h>
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>	/* FI_MR_DMABUF (1.20+) is a registration flag */
#include "peerdirect.h"
#include "../lib/fabric_hints.h"
#include "../lib/fi_compat.h"
#endif

#include "pdctl.h"
#include "tool_device.h"
#include "pdctl_ext.h"
#include "tool_env.h"

#ifndef PD_VERSION
#define PD_VERSION "unknown"
#endif

/*
 * Libraries stay mapped after dlclose: libfabric's and the providers'
 * constructors keep memory that only their globals point to, which an
 * unmapped library would turn into leaks (LeakSanitizer reports them).
 */
#define DL_FLAGS	(RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE)

#define MAX_NICS	32
#define MAX_CHECKS	512
#define MAX_PAIRS	(MAX_DEVS * MAX_NICS)
#define TEXT		640

enum nic_kind { NIC_RDMA, NIC_NETDEV };

struct nic {
	char name[64];
	enum nic_kind kind;
};

struct dev {
	int idx;
	int fd;			/* -1: not opened */
	int open_errno;		/* 0: opened */
	unsigned long long features;
	bool features_known;	/* from sysfs, else QUERY; unknown: no verdict on cpu_mmap */
};

struct check {
	const char *check;
	char subject[64];
	const char *status;	/* "ok", "warn", "fail", "skip" */
	char reason[TEXT];
	char fix[TEXT];
};

struct pair {
	char device[32];
	char nic[64];
	const char *nic_kind;
	const char *verdict;	/* dmabuf, mapped, bounce, none, denied, unavailable, unknown */
	char reason[TEXT];
	char fix[TEXT];
	char topology[TEXT];
	int ibv_errno;		/* -1: no ibv_reg_dmabuf_mr result */
};

static struct check checks[MAX_CHECKS];
static int nr_checks;
static struct pair pairs[MAX_PAIRS];
static int nr_pairs;
static const char *procroot = "/proc";
static const char *bootroot = "/boot";
static bool no_libs;

static void __attribute__((format(printf, 5, 6)))
add_check(const char *check, const char *subject, const char *status, const char *fix,
	  const char *fmt, ...)
{
	struct check *c;
	va_list ap;

	if (nr_checks >= MAX_CHECKS)
		return;
	if (nr_checks == MAX_CHECKS - 1) {
		/* the last slot says that more were left out */
		check = "checks";
		subject = "more";
		status = "warn";
		fix = "pdctl -d N doctor --nic NAME, for fewer at a time";
		fmt = "further checks left out: at most %d";
	}
	c = &checks[nr_checks++];
	c->check = check;
	snprintf(c->subject, sizeof(c->subject), "%s", subject);
	c->status = status;
	snprintf(c->fix, sizeof(c->fix), "%s", fix ? fix : "");
	va_start(ap, fmt);
	if (nr_checks == MAX_CHECKS)
		snprintf(c->reason, sizeof(c->reason), fmt, MAX_CHECKS - 1);
	else
		vsnprintf(c->reason, sizeof(c->reason), fmt, ap);
	va_end(ap);
}

static void __attribute__((format(printf, 2, 3))) set_text(char *buf, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, TEXT, fmt, ap);
	va_end(ap);
}

/* ---- kernel config ------------------------------------------------------ */

/* All of a file (NUL-terminated, malloc'd), or NULL. */
static char *slurp_fd(int fd)
{
	size_t len = 0, cap = 65536;
	char *buf = malloc(cap + 1), *nb;
	ssize_t n;

	if (!buf)
		return NULL;
	while ((n = read(fd, buf + len, cap - len)) > 0) {
		len += n;
		if (len == cap) {
			nb = realloc(buf, cap * 2 + 1);
			if (!nb) {
				free(buf);
				return NULL;
			}
			buf = nb;
			cap *= 2;
		}
	}
	if (n < 0) {
		free(buf);
		return NULL;
	}
	buf[len] = 0;
	return buf;
}

static char *slurp(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	char *s;

	if (fd < 0)
		return NULL;
	s = slurp_fd(fd);
	close(fd);
	return s;
}

/* /proc/config.gz through gzip -dc: no zlib for pdctl. */
static char *slurp_gz(const char *path)
{
	int in, p[2], st;
	char *s;
	pid_t pid;

	in = open(path, O_RDONLY | O_CLOEXEC);
	if (in < 0)
		return NULL;
	if (pipe2(p, O_CLOEXEC)) {
		close(in);
		return NULL;
	}
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		if (dup2(in, 0) < 0 || dup2(p[1], 1) < 0)
			_exit(127);
		execlp("gzip", "gzip", "-dc", (char *)NULL);
		_exit(127);
	}
	close(in);
	close(p[1]);
	s = pid > 0 ? slurp_fd(p[0]) : NULL;
	close(p[0]);
	if (pid > 0 && (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st))) {
		free(s);
		s = NULL;
	}
	return s;
}

/* 'y', 'm', 'n' (is not set), 0 (absent). */
static char config_value(const char *cfg, const char *opt)
{
	char key[80];
	const char *p;
	size_t kl;

	kl = snprintf(key, sizeof(key), "%s=", opt);
	for (p = cfg; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
		if (!strncmp(p, key, kl))
			return p[kl] == 'm' ? 'm' : p[kl] == 'y' ? 'y' : 'n';
		if (!strncmp(p, "# ", 2) && !strncmp(p + 2, opt, kl - 1) &&
		    !strncmp(p + 2 + kl - 1, " is not set", 11))
			return 'n';
	}
	return 0;
}

static void check_kernel_config(const char *release)
{
	static const struct {
		const char *opt, *why, *fix;
		bool optional;	/* not every kernel has it */
	} opts[] = {
		{ "CONFIG_PCI_P2PDMA",
		  "without it a PCI BAR device's exports cannot be mapped peer to peer (p2p_policy 1 "
		  "refuses every importer)",
		  "a kernel built with CONFIG_PCI_P2PDMA=y", false },
		{ "CONFIG_DMABUF_MOVE_NOTIFY",
		  "without it dynamic importers are not told of moves: the core pins once per map",
		  "a kernel with CONFIG_DMABUF_MOVE_NOTIFY=y (or one where it is no longer an "
		  "option)", true },
		{ "CONFIG_UDMABUF",
		  "without it host memory cannot be made a dma-buf (udmabuf): host-side comparisons "
		  "and tests that need it are unavailable",
		  "a kernel with CONFIG_UDMABUF=y or =m", false },
	};
	char path[PATH_MAX], src[PATH_MAX];
	unsigned int i;
	char *cfg, v;

	snprintf(src, sizeof(src), "%s/config-%s", bootroot, release);
	cfg = slurp(src);
	if (!cfg) {
		snprintf(path, sizeof(path), "%s/config.gz", procroot);
		cfg = slurp_gz(path);
		snprintf(src, sizeof(src), "%s", path);
	}
	if (!cfg) {
		add_check("kernel_config", "config", "warn",
			  "install the kernel's config in /boot or build with CONFIG_IKCONFIG_PROC",
			  "neither %s/config-%s nor %s/config.gz is readable", bootroot, release,
			  procroot);
		return;
	}
	for (i = 0; i < sizeof(opts) / sizeof(opts[0]); i++) {
		v = config_value(cfg, opts[i].opt);
		if (v == 'y' || v == 'm')
			add_check("kernel_config", opts[i].opt, "ok", NULL, "=%c in %s", v, src);
		else if (v == 'n')
			add_check("kernel_config", opts[i].opt, "warn", opts[i].fix,
				  "is not set in %s: %s", src, opts[i].why);
		else if (opts[i].optional)
			add_check("kernel_config", opts[i].opt, "ok", NULL,
				  "not an option of this kernel (%s)", src);
		else
			add_check("kernel_config", opts[i].opt, "warn", opts[i].fix,
				  "absent from %s: %s", src, opts[i].why);
	}
	free(cfg);
}

/* ---- module, devices, nodes --------------------------------------------- */

static int check_module(void)
{
	char dir[PATH_MAX], path[PATH_MAX * 2], val[128], params[TEXT] = "";
	struct dirent **names;
	size_t used = 0;
	int n, i, nparams;

	if (!module_loaded()) {
		add_check("module", "peerdirect", "fail", "modprobe peerdirect (or make install, "
			  "then modprobe)", "the peerdirect module is not loaded (no %s/module/"
			  "peerdirect)", sysroot);
		return EX_NODEV;
	}
	snprintf(path, sizeof(path), "%s/module/peerdirect/version", sysroot);
	if (read_file(path, val, sizeof(val)))
		snprintf(val, sizeof(val), "unknown");
	add_check("module", "peerdirect", "ok", NULL, "loaded, version %s", val);
	snprintf(dir, sizeof(dir), "%s/module/peerdirect/parameters", sysroot);
	n = scandir(dir, &names, NULL, alphasort);
	for (i = 0, nparams = 0; i < n; i++) {
		if (names[i]->d_name[0] != '.') {
			nparams++;
			snprintf(path, sizeof(path), "%s/%s", dir, names[i]->d_name);
			if (read_file(path, val, sizeof(val)))
				snprintf(val, sizeof(val), "?");
			if (used < sizeof(params))
				used += snprintf(params + used, sizeof(params) - used, "%s%s=%s",
						 used ? " " : "", names[i]->d_name, val);
		}
		free(names[i]);
	}
	if (n >= 0)
		free(names);
	add_check("module", "parameters", nparams > 0 ? "ok" : "warn",
		  nparams > 0 ? NULL : "a module that exports its parameters in sysfs",
		  "%s", n >= 0 ? params : "no parameters directory");
	return 0;
}

/*
 * What a revoke of this device's memory does to the importers holding it
 * now: those that cannot be revoked (pinned without the revocable op, as
 * EFA's dma-buf MRs) are accepted unless require_revocable=1, and a revoke
 * then waits revoke_timeout_ms, reports the export pending and keeps the
 * memory quarantined until they deregister.  Needs uapi 2.2's
 * ATTACH_INFO_REVOCABLE; says so on an older module.
 */
static void check_revoke(const struct dev *d)
{
	char subject[32], path[PATH_MAX], pol[16] = "?", tmo[16] = "?", names[TEXT] = "";
	struct peerdirect_attach_info a[64];
	struct peerdirect_export_info e[64];
	struct peerdirect_list l = {
		.argsz = sizeof(l), .flags = PEERDIRECT_LIST_ATTACHMENTS,
		.export_size = sizeof(e[0]), .attach_size = sizeof(a[0]),
		.exports = (uintptr_t)e, .nr_exports = 64,
		.attachments = (uintptr_t)a, .nr_attachments = 64,
	};
	unsigned int i, stuck = 0;
	size_t used = 0;

	snprintf(subject, sizeof(subject), "peerdirect%d", d->idx);
	snprintf(path, sizeof(path), "%s/module/peerdirect/parameters/require_revocable", sysroot);
	if (read_file(path, pol, sizeof(pol)))
		snprintf(pol, sizeof(pol), "?");
	snprintf(path, sizeof(path), "%s/module/peerdirect/parameters/revoke_timeout_ms", sysroot);
	if (read_file(path, tmo, sizeof(tmo)))
		snprintf(tmo, sizeof(tmo), "?");
	if (d->fd < 0 || !(d->features & PEERDIRECT_FEAT_LIST_ALLOCS)) {
		add_check("revoke", subject, "skip", NULL, "importers not listed: %s",
			  d->fd < 0 ? "the device could not be opened" :
			  "the module predates uapi 2.2, which says whether an importer can be revoked");
		return;
	}
	if (ioctl(d->fd, PEERDIRECT_IOCTL_LIST, &l)) {
		add_check("revoke", subject, "skip", NULL, "PEERDIRECT_IOCTL_LIST: %s",
			  strerror(errno));
		return;
	}
	for (i = 0; i < l.nr_attachments; i++) {
		if (a[i].flags & PEERDIRECT_ATTACH_INFO_REVOCABLE)
			continue;
		stuck++;
		a[i].device[sizeof(a[i].device) - 1] = '\0';
		term_safe(a[i].device);
		if (used < sizeof(names))
			used += snprintf(names + used, sizeof(names) - used, "%s%s", used ? ", " : "",
					 a[i].device);
	}
	if (!stuck)
		add_check("revoke", subject, "ok", NULL, "%u importers now%s, each revocable: a "
			  "revoke unmaps them (require_revocable=%s)", l.total_attachments,
			  geteuid() ? " of your processes" : "", pol);
	else
		add_check("revoke", subject, "ok", NULL, "%u of %u importers now cannot be revoked "
			  "(pinned without the revocable op, as EFA): %s%s; a revoke of their memory "
			  "waits revoke_timeout_ms=%s, reports the export pending and keeps the memory "
			  "quarantined until they deregister (require_revocable=%s: 1 would refuse "
			  "them)", stuck, l.total_attachments, names,
			  l.total_attachments > l.nr_attachments ? " (first 64 listed)" : "", tmo, pol);
}

static bool in_group(gid_t gid)
{
	bool found = false;
	gid_t *groups;
	int n, i;

	if (getegid() == gid)
		return true;
	n = getgroups(0, NULL);
	groups = n > 0 ? calloc(n, sizeof(*groups)) : NULL;
	if (groups)
		n = getgroups(n, groups);
	for (i = 0; groups && i < n; i++)
		found |= groups[i] == gid;
	free(groups);
	return found;
}

/* Opens the node; exit code of its failure, or 0. */
/* sysfs "features", else QUERY on the node (a module without the file). */
static void read_features(struct dev *d)
{
	struct peerdirect_query q = { .argsz = sizeof(q) };

	d->features_known = !attr_num(d->idx, "features", &d->features);
	if (!d->features_known && d->fd >= 0 && !ioctl(d->fd, PEERDIRECT_IOCTL_QUERY, &q)) {
		d->features = q.features;
		d->features_known = true;
	}
}

/*
 * What each uapi minor added, for a module older than the header the tools
 * were built with: the tools fall back, and say which features are missing.
 */
static const char *const minor_adds[] = {
	[1] = "LIST of exports and the sysfs attributes (pdctl exports, allocs)",
#if PEERDIRECT_ABI_MINOR >= 2
	[2] = "LIST of allocations (pdctl ps: allocations not exported)",
#endif
};

static void check_abi(const struct dev *d)
{
	struct peerdirect_query q = { .argsz = sizeof(q) };
	unsigned int major = 0, minor = 0, m;
	char subject[32], s[32], missing[TEXT] = "";
	size_t used = 0;

	snprintf(subject, sizeof(subject), "peerdirect%d", d->idx);
	if (d->fd >= 0 && !ioctl(d->fd, PEERDIRECT_IOCTL_QUERY, &q)) {
		major = q.abi_major;
		minor = q.abi_minor;
	} else if (attr_str(d->idx, "abi_version", s, sizeof(s)) ||
		   sscanf(s, "%u.%u", &major, &minor) != 2) {
		add_check("uapi", subject, "skip", NULL, "not checked: neither QUERY nor "
			  "sysfs abi_version answered");
		return;
	}
	if (major != PEERDIRECT_ABI_MAJOR) {
		add_check("uapi", subject, "fail", "install the module and tools of one release "
			  "(dkms status; apt policy peerdirect-dkms peerdirect-tools)",
			  "the module speaks uapi %u.%u, the tools %d.%d: another major is "
			  "another interface", major, minor, PEERDIRECT_ABI_MAJOR,
			  PEERDIRECT_ABI_MINOR);
		return;
	}
	if (minor >= PEERDIRECT_ABI_MINOR) {
		add_check("uapi", subject, "ok", NULL, "module uapi %u.%u, tools %d.%d", major,
			  minor, PEERDIRECT_ABI_MAJOR, PEERDIRECT_ABI_MINOR);
		return;
	}
	for (m = minor + 1; m <= PEERDIRECT_ABI_MINOR; m++)
		if (m < sizeof(minor_adds) / sizeof(minor_adds[0]) && minor_adds[m])
			used += snprintf(missing + used, sizeof(missing) - used, "%s%u.%u: %s",
					 used ? "; " : "", major, m, minor_adds[m]);
	add_check("uapi", subject, "warn", "load the module the tools came with (dkms status; "
		  "modprobe -r peerdirect && modprobe peerdirect), or tools of the module's "
		  "release", "the module speaks uapi %u.%u, older than the tools' %d.%d; missing: "
		  "%s", major, minor, PEERDIRECT_ABI_MAJOR, PEERDIRECT_ABI_MINOR,
		  used ? missing : "nothing the tools use");
}

/* Whether device idx is the simulated backend (RAM standing in for HBM). */
static bool dev_simulated(const struct dev *d)
{
	struct peerdirect_query q = { .argsz = sizeof(q) };
	char b[32];

	if (!attr_str(d->idx, "backend", b, sizeof(b)))
		return !strcmp(b, "sim");
	return d->fd >= 0 && !ioctl(d->fd, PEERDIRECT_IOCTL_QUERY, &q) &&
	       q.backend == PEERDIRECT_BACKEND_SIM;
}

static int check_node(struct dev *d)
{
	char path[PATH_MAX], subject[32], gname[64];
	struct group *gr;
	struct stat st;

	snprintf(subject, sizeof(subject), "peerdirect%d", d->idx);
	snprintf(path, sizeof(path), "%s/peerdirect%d", devroot, d->idx);
	d->fd = -1;
	if (stat(path, &st)) {
		d->open_errno = errno;
		add_check("device_node", subject, "fail", "install the udev rule "
			  "kmod/60-peerdirect.rules (make install) and run udevadm trigger",
			  "%s: %s (the module has the device, udev made no node)", path,
			  strerror(errno));
		return EX_NODEV;
	}
	/* static (VM) build: no NSS, which would need the host's glibc at run time */
#ifdef PDCTL_NO_DLOPEN
	gr = NULL;
#else
	gr = getgrgid(st.st_gid);
#endif
	if (gr)
		snprintf(gname, sizeof(gname), "%s", gr->gr_name);
	else
		snprintf(gname, sizeof(gname), "%u", (unsigned int)st.st_gid);
	d->fd = open(path, O_RDWR | O_CLOEXEC);
	if (d->fd >= 0) {
		d->open_errno = 0;
		add_check("device_node", subject, "ok", NULL, "%s: mode %04o group %s, opened "
			  "read-write%s", path, (unsigned int)(st.st_mode & 07777), gname,
			  tool_dev_simulated(sysroot, d->idx) ?
			  "; simulated (RAM standing in for device memory)" : "");
		return 0;
	}
	d->open_errno = errno;
	add_check("device_node", subject, "fail",
		  "add the user to the node's group (usermod -aG peerdirect USER, then log in "
		  "again); the rule kmod/60-peerdirect.rules makes nodes group peerdirect, mode "
		  "0660",
		  "%s: %s (mode %04o group %s; the caller is %sin that group)", path,
		  strerror(errno), (unsigned int)(st.st_mode & 07777), gname,
		  in_group(st.st_gid) ? "" : "not ");
	return errno == EACCES || errno == EPERM ? EX_PERM : EX_FAIL;
}

/* ---- NICs ----------------------------------------------------------------- */

/*
 * Adds cls's NICs to out[n..MAX_NICS): those backed by a device (a PCI
 * function; physical) or the others (veth, bridges, rxe over them).
 * Plain files (bonding_masters) and lo are not NICs.  *skipped counts
 * those left out for lack of room.
 */
static int add_nics(const char *cls, enum nic_kind kind, bool physical, struct nic *out,
		    int n, int *skipped)
{
	char path[PATH_MAX];
	struct dirent **names;
	struct stat st;
	int i, nr;

	snprintf(path, sizeof(path), "%s/class/%s", sysroot, cls);
	nr = scandir(path, &names, NULL, alphasort);
	for (i = 0; i < nr; i++) {
		const char *s = names[i]->d_name;
		bool dir, dev;

		snprintf(path, sizeof(path), "%s/class/%s/%s", sysroot, cls, s);
		dir = !stat(path, &st) && S_ISDIR(st.st_mode);
		snprintf(path, sizeof(path), "%s/class/%s/%s/device", sysroot, cls, s);
		dev = !stat(path, &st);
		if (s[0] != '.' && strcmp(s, "lo") && dir && dev == physical &&
		    strlen(s) < sizeof(out[0].name)) {
			if (n < MAX_NICS) {
				snprintf(out[n].name, sizeof(out[n].name), "%s", s);
				out[n++].kind = kind;
			} else {
				(*skipped)++;
			}
		}
		free(names[i]);
	}
	if (nr >= 0)
		free(names);
	return n;
}

/* The NIC called name: RDMA device first (rxe0 may share a netdev's name). */
static int find_nic(const char *name, struct nic *out)
{
	static const char *const cls[] = { "infiniband", "net" };
	char path[PATH_MAX];
	struct stat st;
	unsigned int i;

	for (i = 0; i < 2; i++) {
		snprintf(path, sizeof(path), "%s/class/%s/%s", sysroot, cls[i], name);
		if (strchr(name, '/') || name[0] == '.' || stat(path, &st) ||
		    strlen(name) >= sizeof(out->name))
			continue;
		snprintf(out->name, sizeof(out->name), "%s", name);
		out->kind = i ? NIC_NETDEV : NIC_RDMA;
		return 0;
	}
	return -ENODEV;
}

static const char *nic_class(const struct nic *n)
{
	return n->kind == NIC_RDMA ? "infiniband" : "net";
}

/* ---- IOMMU and PCI ---------------------------------------------------------- */

/* The iommu group of a sysfs device directory, with its type, or "none". */
static void iommu_group(const char *devdir, char *buf, size_t len)
{
	char path[PATH_MAX], g[64], type[32];

	snprintf(path, sizeof(path), "%s/iommu_group", devdir);
	if (link_base(path, g, sizeof(g))) {
		snprintf(buf, len, "none");
		return;
	}
	snprintf(path, sizeof(path), "%s/kernel/iommu_groups/%.32s/type", sysroot, g);
	if (read_file(path, type, sizeof(type)))
		snprintf(type, sizeof(type), "?");
	snprintf(buf, len, "%.32s (%.24s)", g, type);
}

/* Appends word to a space-separated list of size bytes, *used long; a
 * full list keeps what fits. */
static void list_add(char *list, size_t size, size_t *used, const char *word)
{
	if (*used < size)
		*used += snprintf(list + *used, size - *used, "%s%s", *used ? " " : "", word);
}

static void check_iommu(const struct dev *devs, int nr)
{
	char path[PATH_MAX], units[TEXT] = "", args[TEXT] = "", grp[64], *cmd, *tok, *save;
	bool pt = false, off = false, identity;
	struct dirent **names;
	size_t used = 0, aused = 0;
	int n, i;

	snprintf(path, sizeof(path), "%s/class/iommu", sysroot);
	n = scandir(path, &names, NULL, alphasort);
	for (i = 0; i < n; i++) {
		if (names[i]->d_name[0] != '.')
			list_add(units, sizeof(units), &used, names[i]->d_name);
		free(names[i]);
	}
	if (n >= 0)
		free(names);
	snprintf(path, sizeof(path), "%s/cmdline", procroot);
	cmd = slurp(path);
	for (tok = cmd ? strtok_r(cmd, " \t\n", &save) : NULL; tok;
	     tok = strtok_r(NULL, " \t\n", &save)) {
		if (strncmp(tok, "iommu=", 6) && strncmp(tok, "intel_iommu=", 12) &&
		    strncmp(tok, "amd_iommu=", 10) && strncmp(tok, "iommu.passthrough=", 18))
			continue;
		if (!strcmp(tok, "iommu=pt") || !strcmp(tok, "iommu.passthrough=1"))
			pt = true;
		if (!strcmp(tok, "iommu=off") || !strcmp(tok, "intel_iommu=off") ||
		    !strcmp(tok, "amd_iommu=off"))
			off = true;
		if (aused < sizeof(args))
			aused += snprintf(args + aused, sizeof(args) - aused, "%s%s",
					  aused ? " " : "", tok);
	}
	free(cmd);
	/* Passthrough may be the default domain (CONFIG_IOMMU_DEFAULT_PASSTHROUGH,
	 * or a group set to identity) with nothing on the command line. */
	for (i = 0, identity = nr > 0; i < nr; i++) {
		snprintf(path, sizeof(path), "%s/class/misc/peerdirect%d/device", sysroot,
			 devs[i].idx);
		iommu_group(path, grp, sizeof(grp));
		identity &= strstr(grp, "(identity)") != NULL;
	}
	if (!used)
		add_check("iommu", "mode", "ok", NULL, "no IOMMU registered in %s/class/iommu "
			  "(cmdline: %s): bus addresses are physical, peer-to-peer is not translated",
			  sysroot, aused ? args : "no iommu option");
	else if (pt || off)
		add_check("iommu", "mode", "ok", NULL, "IOMMU %s, cmdline %s: DMA is not "
			  "translated", units, args);
	else if (identity)
		add_check("iommu", "mode", "ok", NULL, "IOMMU %s (cmdline: %s), every peerdirect "
			  "device in an identity group: its DMA is not translated", units,
			  aused ? args : "no iommu option");
	else
		add_check("iommu", "mode", "warn", "boot with iommu=pt (with intel_iommu=on or "
			  "amd_iommu=on as the platform needs) where the site's policy allows",
			  "IOMMU %s translating (cmdline: %s): peer-to-peer requests go up to the root "
			  "complex unless ACS lets them through; check the groups' type", units,
			  aused ? args : "no iommu option");
	for (i = 0; i < nr; i++) {
		char subject[32];

		snprintf(subject, sizeof(subject), "peerdirect%d", devs[i].idx);
		snprintf(path, sizeof(path), "%s/class/misc/peerdirect%d/device", sysroot,
			 devs[i].idx);
		iommu_group(path, grp, sizeof(grp));
		add_check("iommu", subject, strstr(grp, "(DMA") ? "warn" : "ok",
			  strstr(grp, "(DMA") ? "iommu=pt, or echo identity to the group's type "
			  "with the driver unbound" : NULL,
			  "iommu group %s", grp);
	}
}

/*
 * The PCI function a sysfs device is, or sits on (virtio-net's virtioN and
 * auxiliary devices hang below theirs), as the kernel's p2pdma finds a
 * client's: false when there is none.
 */
static bool pci_path(const char *link, char *out)
{
	unsigned int a, b, c, d;
	char *base;

	if (!realpath(link, out))
		return false;
	while ((base = strrchr(out, '/')) && base != out) {
		if (sscanf(base + 1, "%x:%x:%x.%x", &a, &b, &c, &d) == 4)
			return true;
		*base = 0;
	}
	return false;
}

static bool is_bdf(const char *s, size_t len)
{
	unsigned int a, b, c, d;
	char tmp[32];

	if (len >= sizeof(tmp))
		return false;
	memcpy(tmp, s, len);
	tmp[len] = 0;
	return sscanf(tmp, "%x:%x:%x.%x", &a, &b, &c, &d) == 4;
}

#define PCI_EXT_CAP_ACS	0x000d
#define ACS_REDIRECT	(0x0004 | 0x0008 | 0x0020)	/* RR, CR, EC */

/*
 * ACS control of the PCI function at sysfs directory dir: its bits, -1
 * when there is no ACS capability (or no extended config space), -2 when
 * only the first 64 bytes are readable (sysfs hides the rest from users
 * without CAP_SYS_ADMIN).
 */
static int acs_ctrl(const char *dir)
{
	unsigned char cfg[4096];
	char path[PATH_MAX + 8];
	unsigned int pos = 0x100, hops = 0;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "%s/config", dir);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -2;
	n = pread(fd, cfg, sizeof(cfg), 0);
	close(fd);
	if (n <= 64)
		return -2;
	while (pos >= 0x100 && pos + 8 <= (size_t)n && hops++ < 512) {
		uint32_t h = cfg[pos] | cfg[pos + 1] << 8 | cfg[pos + 2] << 16 |
			     (uint32_t)cfg[pos + 3] << 24;

		if (!h || h == 0xffffffff)
			break;
		if ((h & 0xffff) == PCI_EXT_CAP_ACS)
			return cfg[pos + 6] | cfg[pos + 7] << 8;
		pos = (h >> 20) & 0xffc;
	}
	return -1;
}

/*
 * The functions on the way between two PCI functions, as the kernel's
 * p2pdma distance walks them: every function from a up to and including
 * the common upstream bridge (path prefix of length common), and every
 * one from b up to, not including, that bridge.  Those whose ACS redirect
 * peer-to-peer requests (RR, CR or EC on) send the traffic up to the root
 * complex.  Appends the verdict to text; returns the hops between them.
 */
static int acs_on_path(const char *a, const char *b, size_t common, char *text, size_t len)
{
	char dir[PATH_MAX], redirect[TEXT] = "";
	const char *paths[2] = { a, b }, *comp;
	size_t used = 0, k, at = strlen(text);
	int hops = 0, unread = 0, ctrl, i;

	for (i = 0; i < 2; i++) {
		for (k = strlen(paths[i]); k > 0; k--) {
			if (paths[i][k] && paths[i][k] != '/')
				continue;
			if (k < common || (k == common && i == 1))
				break;
			memcpy(dir, paths[i], k);
			dir[k] = 0;
			comp = strrchr(dir, '/');
			comp = comp ? comp + 1 : dir;
			if (!is_bdf(comp, strlen(comp)))
				break;
			if (k > common)
				hops++;
			ctrl = acs_ctrl(dir);
			if (ctrl == -2)
				unread++;
			else if (ctrl >= 0 && (ctrl & ACS_REDIRECT))
				list_add(redirect, sizeof(redirect), &used, comp);
		}
	}
	if (used)
		snprintf(text + at, len - at, "; warn: ACS redirects peer-to-peer at %s: the "
			 "traffic goes up to the root complex (the kernel maps it through the "
			 "host bridge, or refuses it)", redirect);
	else if (unread)
		snprintf(text + at, len - at, "; ACS not read on %d functions (PCI config space "
			 "beyond 64 bytes needs root)", unread);
	else
		snprintf(text + at, len - at, "; no ACS redirect on the path, %d hops", hops);
	return hops;
}

/* Topology text of a pair; a warning when the path crosses the host bridge. */
static void topology(const struct dev *d, const struct nic *nic, struct pair *p)
{
	char link[PATH_MAX], a[PATH_MAX], b[PATH_MAX], ga[64], gb[64];
	size_t i, last = 0;
	const char *start;

	snprintf(link, sizeof(link), "%s/class/misc/peerdirect%d/device", sysroot, d->idx);
	if (!pci_path(link, a)) {
		set_text(p->topology, "not checked: peerdirect%d is on no PCI function "
			 "(simulated backend)", d->idx);
		return;
	}
	iommu_group(link, ga, sizeof(ga));
	snprintf(link, sizeof(link), "%s/class/%s/%s/device", sysroot, nic_class(nic),
		 nic->name);
	if (!pci_path(link, b)) {
		set_text(p->topology, "not checked: %s is on no PCI function (a software "
			 "device such as rxe or veth)", nic->name);
		return;
	}
	iommu_group(link, gb, sizeof(gb));
	/* the longest common run of whole path components */
	for (i = 0; a[i] && a[i] == b[i]; i++)
		if (a[i] == '/')
			last = i;
	if ((!a[i] && (b[i] == '/' || !b[i])) || (!b[i] && a[i] == '/'))
		last = i;
	start = a + last;
	while (start > a && start[-1] != '/')
		start--;
	if (last && is_bdf(start, a + last - start)) {
		set_text(p->topology, "common upstream bridge %.*s (iommu groups %s, %s)",
			 (int)(a + last - start), start, ga, gb);
		acs_on_path(a, b, last, p->topology, sizeof(p->topology));
	}
	else if (last && !strncmp(start, "pci", 3))
		set_text(p->topology, "warn: only the host bridge %.*s is common: peer-to-peer "
			 "crosses the root complex (iommu groups %s, %s)",
			 (int)(a + last - start), start, ga, gb);
	else
		set_text(p->topology, "warn: different host bridges: peer-to-peer between root "
			 "complexes is rarely supported (iommu groups %s, %s)", ga, gb);
}

/* ---- rdma-core -------------------------------------------------------------- */

#ifndef PDCTL_NO_DLOPEN

/* A dma-buf of one page of device memory: its fd, or -errno (what says where). */
static int make_export(const struct dev *d, uint64_t *handle, uint64_t *len,
		       const char **what)
{
	struct peerdirect_alloc a = { .argsz = sizeof(a), .size = 65536 };
	struct peerdirect_export e = { .argsz = sizeof(e) };
	struct peerdirect_free f = { .argsz = sizeof(f) };
	int ret;

	*what = "PEERDIRECT_IOCTL_ALLOC";
	if (ioctl(d->fd, PEERDIRECT_IOCTL_ALLOC, &a) < 0)
		return -errno;
	e.flags = PEERDIRECT_EXPORT_RDWR | PEERDIRECT_EXPORT_CLOEXEC;
	e.handle = a.handle;
	e.length = a.alloc_size;
	if (ioctl(d->fd, PEERDIRECT_IOCTL_EXPORT, &e) < 0) {
		ret = -errno;
		*what = "PEERDIRECT_IOCTL_EXPORT";
		f.handle = a.handle;
		ioctl(d->fd, PEERDIRECT_IOCTL_FREE, &f);
		return ret;
	}
	*handle = a.handle;
	*len = a.alloc_size;
	return e.fd;
}

static void drop_export(const struct dev *d, int fd, uint64_t handle)
{
	struct peerdirect_free f = { .argsz = sizeof(f), .handle = handle };

	close(fd);
	ioctl(d->fd, PEERDIRECT_IOCTL_FREE, &f);
}

static const char *errname(int e)
{
	const char *s = strerrorname_np(e);

	return s ? s : "?";
}

struct verbs {
	void *so;
	struct ibv_device **(*get_device_list)(int *);
	void (*free_device_list)(struct ibv_device **);
	const char *(*get_device_name)(struct ibv_device *);
	struct ibv_context *(*open_device)(struct ibv_device *);
	int (*close_device)(struct ibv_context *);
	struct ibv_pd *(*alloc_pd)(struct ibv_context *);
	int (*dealloc_pd)(struct ibv_pd *);
	struct ibv_mr *(*reg_dmabuf_mr)(struct ibv_pd *, uint64_t, size_t, uint64_t, int, int);
	int (*dereg_mr)(struct ibv_mr *);
};

static struct verbs verbs;
/* What check_libfabric learned, for the pairs' verdicts. */
static struct {
	bool loaded, dmabuf;
	uint32_t version;
	char why[TEXT];		/* why not loaded, or why no dma-buf registrations */
	char hmem[TEXT];	/* the providers offering FI_HMEM, space-separated */
} lf;

/*
 * Whether the space-separated list names name; layered: also as the core
 * of a layered provider ("verbs" in "verbs;ofi_rxm").
 */
static bool list_has(const char *list, const char *name, bool layered)
{
	size_t n = strlen(name);

	while (n && *list) {
		size_t len = strcspn(list, " ");

		if (len >= n && !strncmp(list, name, n) &&
		    (len == n || (layered && list[n] == ';')))
			return true;
		list += len;
		list += strspn(list, " ");
	}
	return false;
}

/*
 * The libfabric provider the library would drive an RDMA NIC with: efa for
 * a device the efa driver runs (named rdmap0s31 and the like, not efa*),
 * else verbs.
 */
static const char *rdma_provider(const struct nic *nic)
{
	char path[PATH_MAX], driver[32];

	snprintf(path, sizeof(path), "%s/class/infiniband/%s/device/driver", sysroot, nic->name);
	return !link_base(path, driver, sizeof(driver)) && !strcmp(driver, "efa") ? "efa" : "verbs";
}

static char verbs_error[TEXT];
static bool verbs_too_old;	/* loaded, but without ibv_reg_dmabuf_mr */

static bool load_verbs(void)
{
	static bool tried;
	static const char *const names[] = {
		"ibv_get_device_list", "ibv_free_device_list", "ibv_get_device_name",
		"ibv_open_device", "ibv_close_device", "ibv_alloc_pd", "ibv_dealloc_pd",
		"ibv_reg_dmabuf_mr", "ibv_dereg_mr",
	};
	void **slots[] = {
		(void **)&verbs.get_device_list, (void **)&verbs.free_device_list,
		(void **)&verbs.get_device_name, (void **)&verbs.open_device,
		(void **)&verbs.close_device, (void **)&verbs.alloc_pd,
		(void **)&verbs.dealloc_pd, (void **)&verbs.reg_dmabuf_mr,
		(void **)&verbs.dereg_mr,
	};
	unsigned int i;

	if (tried)
		return verbs.so;
	tried = true;
	verbs.so = dlopen("libibverbs.so.1", DL_FLAGS);
	if (!verbs.so) {
		set_text(verbs_error, "libibverbs.so.1 not loaded: %s (install libibverbs1 and "
			 "ibverbs-providers)", dlerror());
		return false;
	}
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		*slots[i] = dlsym(verbs.so, names[i]);
		if (!*slots[i]) {
			set_text(verbs_error, "libibverbs.so.1 has no %s (rdma-core too old for "
				 "dma-buf MRs: v34 or newer needed)", names[i]);
			verbs_too_old = true;
			dlclose(verbs.so);
			verbs.so = NULL;
			return false;
		}
	}
	return true;
}

/* ibv_reg_dmabuf_mr of a fresh export on the named device: 0 or errno. */
static void try_dmabuf_mr(const struct dev *d, const struct nic *nic, struct pair *p)
{
	struct ibv_device **list, *ibdev = NULL;
	struct ibv_context *ctx = NULL;
	struct ibv_pd *pd = NULL;
	struct ibv_mr *mr;
	uint64_t handle = 0, len = 0;
	const char *what;
	int n = 0, i, fd, e;

	list = verbs.get_device_list(&n);
	for (i = 0; list && i < n; i++)
		if (!strcmp(verbs.get_device_name(list[i]), nic->name))
			ibdev = list[i];
	if (!ibdev) {
		set_text(p->reason, "ibv_reg_dmabuf_mr not tried: libibverbs lists no device %s "
			 "(%d devices; is its provider in ibverbs-providers?)", nic->name, n);
		set_text(p->fix, "install the provider for %s (ibverbs-providers) and check "
			 "ibv_devices", nic->name);
		goto out;
	}
	ctx = verbs.open_device(ibdev);
	pd = ctx ? verbs.alloc_pd(ctx) : NULL;
	if (!pd) {
		e = errno;
		p->verdict = "unknown";
		set_text(p->reason, "ibv_reg_dmabuf_mr not tried: %s on %s: %s", ctx ?
			 "ibv_alloc_pd" : "ibv_open_device", nic->name, strerror(e));
		set_text(p->fix, "check /dev/infiniband permissions and the locked-memory limit "
			 "(ulimit -l)");
		goto out;
	}
	fd = make_export(d, &handle, &len, &what);
	if (fd < 0) {
		p->verdict = "unknown";
		set_text(p->reason, "ibv_reg_dmabuf_mr not tried: no test export: %s on "
			 "peerdirect%d: %s", what, d->idx, strerror(-fd));
		set_text(p->fix, "free device memory or raise the quota (pdctl list)");
		goto out;
	}
	mr = verbs.reg_dmabuf_mr(pd, 0, len, 0, fd, IBV_ACCESS_LOCAL_WRITE |
				 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE);
	e = errno;
	if (mr) {
		p->ibv_errno = 0;
		p->verdict = "dmabuf";
		set_text(p->reason, "ibv_reg_dmabuf_mr on %s accepted a %llu-byte export of "
			 "peerdirect%d: the NIC DMAs device memory", nic->name,
			 (unsigned long long)len, d->idx);
		p->fix[0] = 0;
		verbs.dereg_mr(mr);
	} else {
		p->ibv_errno = e;
		p->verdict = "bounce";
		set_text(p->reason, "ibv_reg_dmabuf_mr on %s refused a peerdirect%d export: %s "
			 "(errno %d, %s): the library stages through host memory", nic->name,
			 d->idx, strerror(e), e, errname(e));
		if (e == EOPNOTSUPP && (d->features & PEERDIRECT_FEAT_REVOCABLE_ONLY))
			/* the exporter refused a pinned importer, not the NIC */
			set_text(p->fix, "peerdirect%d refuses pinned importers: someone opted "
				 "in to require_revocable=1; NICs that pin (EFA, older mlx5) need the "
				 "default, 0 (echo 0 > /sys/module/peerdirect/parameters/"
				 "require_revocable, and drop it from /etc/modprobe.d)", d->idx);
		else if (e == EOPNOTSUPP && strstr(p->topology, "ACS redirects"))
			set_text(p->fix, "peer-to-peer is redirected by ACS (see pci:): "
				 "pci=disable_acs_redir=<bridges> on the kernel command line, where "
				 "isolation allows");
		else
			set_text(p->fix, "a NIC whose driver registers dma-bufs (mlx5, efa, ...; "
				 "soft-RoCE rxe does not), with rdma-core >= 34 and kernel >= 5.12");
	}
	drop_export(d, fd, handle);
out:
	if (pd)
		verbs.dealloc_pd(pd);
	if (ctx)
		verbs.close_device(ctx);
	if (list)
		verbs.free_device_list(list);
}
#endif

static bool libs_usable(char *why)
{
#ifdef PDCTL_NO_DLOPEN
	set_text(why, "pdctl built without dlopen (static build)");
	return false;
#else
	if (no_libs)
		set_text(why, "PDCTL_LIBS=none");
	return !no_libs;
#endif
}

/* Whether idx can be probed: a device in reset or unplugged would block
 * the test ALLOC (killable only) or fail it, and tell nothing of the NIC. */
static bool dev_live(const struct dev *d, struct pair *p)
{
	char state[32];

	if (attr_str(d->idx, "state", state, sizeof(state)) || !strcmp(state, "live"))
		return true;
	p->verdict = "unknown";
	set_text(p->reason, "not probed: peerdirect%d is %s, not live", d->idx, state);
	set_text(p->fix, "run pdctl doctor again once pdctl info shows the device live");
	return false;
}

#ifndef PDCTL_NO_DLOPEN
/* Without libfabric the library cannot run: no pair has a verdict. */
static bool lf_missing(struct pair *p)
{
	if (no_libs || lf.loaded)
		return false;
	p->verdict = "unknown";
	set_text(p->reason, "the library cannot run without libfabric: %s", lf.why);
	set_text(p->fix, "apt install libfabric1");
	return true;
}
#endif

static void pair_rdma(const struct dev *d, const struct nic *nic, struct pair *p)
{
	char why[TEXT];

	(void)d;
	(void)nic;
	if (!dev_live(d, p))
		return;
	/* Nothing learned is "unknown" (exit 1), never a verdict. */
	p->verdict = "unknown";
	if (!libs_usable(why)) {
		set_text(p->reason, "ibv_reg_dmabuf_mr not tried (%s)", why);
		set_text(p->fix, "run pdctl doctor (the shared build) where libibverbs1 is "
			 "installed to try the dma-buf MR");
		return;
	}
#ifndef PDCTL_NO_DLOPEN
	if (lf_missing(p))
		return;
	if (!load_verbs()) {
		if (verbs_too_old)
			p->verdict = "bounce";
		set_text(p->reason, "ibv_reg_dmabuf_mr not tried: %s", verbs_error);
		set_text(p->fix, verbs_too_old ? "rdma-core 34 or newer (Debian 12 has 44)" :
			 "apt install libibverbs1 ibverbs-providers");
		return;
	}
	try_dmabuf_mr(d, nic, p);
	const char *prov = rdma_provider(nic);

	/* The NIC takes dma-bufs; the library needs libfabric to, too. */
	if (!strcmp(p->verdict, "dmabuf") && !lf.dmabuf) {
		p->verdict = "bounce";
		set_text(p->reason, "ibv_reg_dmabuf_mr on %s accepted a peerdirect%d export, but "
			 "libfabric %u.%u takes no dma-buf registrations (%s): the library stages "
			 "through host memory", nic->name, d->idx, FI_MAJOR(lf.version),
			 FI_MINOR(lf.version), lf.why);
		set_text(p->fix, "libfabric >= 1.20 (Debian 13)");
	} else if (!strcmp(p->verdict, "dmabuf") && !list_has(lf.hmem, prov, true)) {
		/* The library asks the NIC's provider for FI_HMEM; without it,
		 * it opens the provider plain and stages (its "lacks FI_HMEM"). */
		p->verdict = "bounce";
		set_text(p->reason, "ibv_reg_dmabuf_mr on %s accepted a peerdirect%d export, but "
			 "libfabric %u.%u's %s provider does not offer FI_HMEM (providers that do: "
			 "%s): the library stages through host memory", nic->name, d->idx,
			 FI_MAJOR(lf.version), FI_MINOR(lf.version), prov,
			 lf.hmem[0] ? lf.hmem : "none");
		set_text(p->fix, "a libfabric whose %s provider is built with FI_HMEM (dma-buf) "
			 "support", prov);
	}
#endif
}

static void pair_netdev(const struct dev *d, const struct nic *nic, struct pair *p)
{
	if (!dev_live(d, p))
		return;
#ifndef PDCTL_NO_DLOPEN
	if (lf_missing(p))
		return;
#endif
	if (!d->features_known) {
		p->verdict = "unknown";
		set_text(p->reason, "peerdirect%d's features could not be read (sysfs features, "
			 "QUERY): whether tcp over %s can send from its CPU mapping is not known",
			 d->idx, nic->name);
		set_text(p->fix, "pdctl info; a module whose version matches pdctl");
		return;
	}
	if (d->features & PEERDIRECT_FEAT_CPU_MMAP) {
		p->verdict = "mapped";
		set_text(p->reason, "tcp over %s: the provider sends from the CPU mapping of the "
			 "dma-buf (the CPU reads device memory; no host copy)", nic->name);
		return;
	}
	p->verdict = "none";
	set_text(p->reason, "peerdirect%d has no CPU mapping (feature cpu_mmap): tcp over %s "
		 "can neither send from it nor stage it through host memory, so "
		 "pd_mr_reg_dmabuf fails", d->idx, nic->name);
	set_text(p->fix, "a backend or module version that offers cpu_mmap (pdctl info), or "
		 "an RDMA NIC that takes the device's dma-bufs");
}

/*
 * Bounce copies through the device's CPU mapping: without one, a pair the
 * NIC cannot DMA has no path at all.  Appended to the reason the direct
 * path failed for; its fix stays, being the only way left.
 */
static void bounce_needs_cpu_mmap(const struct dev *d, struct pair *p)
{
	size_t n = strlen(p->reason);

	if (strcmp(p->verdict, "bounce") || !d->features_known ||
	    (d->features & PEERDIRECT_FEAT_CPU_MMAP))
		return;
	p->verdict = "none";
	snprintf(p->reason + n, sizeof(p->reason) - n, "; and peerdirect%d has no CPU mapping "
		 "(feature cpu_mmap) to stage from, so pd_mr_reg_dmabuf fails", d->idx);
}

/* ---- libfabric, libpeerdirect ------------------------------------------------ */

static void check_libfabric(void)
{
#ifndef PDCTL_NO_DLOPEN
	uint32_t (*version)(void);
	int (*getinfo)(uint32_t, const char *, const char *, uint64_t,
		       const struct fi_info *, struct fi_info **);
	struct fi_info *(*dupinfo)(const struct fi_info *);
	void (*freeinfo)(struct fi_info *);
	struct fi_info *hints, *info = NULL, *i;
	const char *dmabuf_why = NULL;
	char provs[TEXT] = "", seen[TEXT] = "", lacks[TEXT];
	size_t used = 0, seen_used = 0, t;
	bool dmabuf;
	uint32_t v;
	void *so;
	int ret = 0, tret;
#endif
	char why[TEXT];

	if (!libs_usable(why)) {
		add_check("libfabric", "FI_HMEM", "skip", NULL, "not checked (%s)", why);
		return;
	}
#ifndef PDCTL_NO_DLOPEN
	so = dlopen("libfabric.so.1", DL_FLAGS);
	if (!so) {
		set_text(lf.why, "libfabric.so.1 not loaded: %s", dlerror());
		add_check("libfabric", "FI_HMEM", "fail", "apt install libfabric1", "%s", lf.why);
		return;
	}
	*(void **)&version = dlsym(so, "fi_version");
	*(void **)&getinfo = dlsym(so, "fi_getinfo");
	*(void **)&dupinfo = dlsym(so, "fi_dupinfo");
	*(void **)&freeinfo = dlsym(so, "fi_freeinfo");
	if (!version || !getinfo || !dupinfo || !freeinfo) {
		set_text(lf.why, "libfabric.so.1 lacks fi_version/fi_getinfo/fi_dupinfo/"
			 "fi_freeinfo");
		add_check("libfabric", "FI_HMEM", "fail", "a complete libfabric1", "%s", lf.why);
		dlclose(so);
		return;
	}
	v = version();
	lf.loaded = true;
	lf.version = v;
	/*
	 * The library's tries, in its order, with the API version it asks
	 * for (fi_compat.h): a provider offers FI_HMEM to the library when
	 * the first try it answers asks for it.  One whose MSG endpoints alone
	 * offer FI_HMEM, or that offers it only without FI_DIRECTED_RECV and
	 * FI_SOURCE (asked for first), stages.  Tries with FI_HMEM are asked
	 * even where libfabric has no FI_MR_DMABUF: that is said below.
	 */
	for (t = 0; t < PD_NR_TRIES; t++) {
		hints = dupinfo(NULL);
		if (!hints) {
			add_check("libfabric", "FI_HMEM", "fail", NULL, "fi_dupinfo failed");
			dlclose(so);
			return;
		}
		pd_hints_for(hints, &pd_tries[t]);
		info = NULL;
		tret = getinfo(pd_fi_api_version(v), NULL, NULL, 0, hints, &info);
		if (tret)
			ret = ret ? ret : tret;
		for (i = tret ? NULL : info; i; i = i->next) {
			const char *name = i->fabric_attr && i->fabric_attr->prov_name ?
					   i->fabric_attr->prov_name : "?";

			if (list_has(seen, name, false))
				continue;
			list_add(seen, sizeof(seen), &seen_used, name);
			if (pd_tries[t].hmem)
				list_add(provs, sizeof(provs), &used, name);
		}
		if (info)
			freeinfo(info);
		freeinfo(hints);
	}
	/*
	 * FI_MR_DMABUF is a flag of fi_mr_regattr, not an mr_mode bit: a
	 * provider offering FI_HMEM takes dma-buf registrations when the
	 * libfabric loaded now is 1.20 or newer, whatever headers the library
	 * and pdctl were built against (they ask for 1.20 at run time).
	 */
	dmabuf = pd_fi_has_dmabuf(pd_fi_api_version(v));
	if (!dmabuf) {
		set_text(lacks, "no, libfabric %u.%u lacks it (needs 1.20)", FI_MAJOR(v),
			 FI_MINOR(v));
		dmabuf_why = lacks;
	}
	lf.dmabuf = dmabuf;
	set_text(lf.hmem, "%s", provs);
	if (dmabuf_why)
		set_text(lf.why, "%s", dmabuf_why);
	if (used)
		add_check("libfabric", "FI_HMEM", dmabuf ? "ok" : "warn", dmabuf ? NULL :
			  "libfabric >= 1.20 (Debian 13)",
			  "libfabric %u.%u: providers offering FI_HMEM: %s; dma-buf registrations "
			  "(FI_MR_DMABUF): %s", FI_MAJOR(v), FI_MINOR(v), provs,
			  dmabuf ? "yes" : dmabuf_why);
	else
		add_check("libfabric", "FI_HMEM", "warn", "libfabric >= 1.20 with the NIC's "
			  "provider (verbs, efa) built with dma-buf support",
			  "libfabric %u.%u: no provider offers FI_HMEM (fi_getinfo: %d)%s%s: the "
			  "library registers mappings or bounces", FI_MAJOR(v), FI_MINOR(v), ret,
			  dmabuf ? "" : "; dma-buf registrations (FI_MR_DMABUF): ",
			  dmabuf ? "" : dmabuf_why);
	dlclose(so);
#endif
}

#ifndef PDCTL_NO_DLOPEN
/*
 * What pd_mr_reg_dmabuf (path auto) chooses for a fresh export of device
 * idx on a fabric of provider prov: the library's own verdict and reason.
 * The provider picks its NIC itself (the first it offers).
 */
/* The sized calls below are 1.1's; nothing newer is needed, and the tools
 * do not depend on the library's version (the header's minor may be newer
 * than the installed library). */
#define DOCTOR_ABI_MINOR 1

static void library_choice(const struct pd_api *api, int idx, const char *prov)
{
	struct pd_export_info info = { .fd = -1 };
	struct pd_fabric_attr attr;
	struct pd_fabric *fab = NULL;
	struct pd_device *dev = NULL;
	struct pd_mr *mr = NULL;
	uint64_t handle = 0, len = 0;
	const char *step;
	char subject[64];
	enum pd_path path;
	int ret;

	snprintf(subject, sizeof(subject), "peerdirect%d/%s", idx, prov);
	step = "pd_device_open";
	ret = api->device_open(idx, &dev);
	if (!ret) {
		api->fabric_attr_init_sz(&attr, sizeof(attr));
		attr.provider = prov;
		step = "pd_fabric_open";
		ret = api->fabric_open(&attr, &fab);
	}
	if (!ret) {
		step = "pd_fabric_attach_device";
		ret = api->fabric_attach_device(fab, dev);
	}
	if (!ret) {
		step = "pd_device_alloc";
		ret = api->device_alloc(dev, 65536, &handle, &len);
	}
	if (!ret) {
		step = "pd_device_export";
		ret = api->device_export_sz(dev, handle, 0, len, PD_EXPORT_RDWR | PD_EXPORT_CLOEXEC,
					    &info, sizeof(info), NULL);
	}
	if (!ret) {
		step = "pd_mr_reg_dmabuf";
		ret = api->mr_reg_dmabuf(fab, info.fd, 0, len, PD_ACCESS_ALL, &mr);
	}
	if (ret) {
		add_check("libpeerdirect", subject, "skip", NULL, "not checked: %s: %s (%s)", step,
			  api->strerror(ret), api->last_error());
	} else {
		path = api->mr_path(mr);
		add_check("libpeerdirect", subject, path == PD_PATH_BOUNCE ? "warn" : "ok",
			  path == PD_PATH_BOUNCE ? "see the pairs' fixes" : NULL,
			  "pd_mr_reg_dmabuf chose %s: %s", api->path_name(path), api->mr_reason(mr));
		api->mr_dereg(mr);
	}
	if (info.fd >= 0)
		close(info.fd);
	if (handle)
		api->device_free(dev, handle);
	if (fab)
		api->fabric_close(fab);
	if (dev)
		api->device_close(dev);
}
#endif

static void check_libpeerdirect(const struct dev *devs, int nr_devs, const struct nic *nics,
				int nr_nics)
{
#ifndef PDCTL_NO_DLOPEN
	const struct pd_api *api = NULL;
	bool rdma = false, netdev = false;
	pd_get_api_fn get;
	int i;
	void *so;
#endif
	char why[TEXT];

	if (!libs_usable(why)) {
		add_check("libpeerdirect", "path", "skip", NULL, "not checked (%s)", why);
		return;
	}
#ifndef PDCTL_NO_DLOPEN
	so = dlopen("libpeerdirect.so.1", DL_FLAGS);
	if (!so) {
		add_check("libpeerdirect", "path", "skip", "apt install libpeerdirect1",
			  "not checked: libpeerdirect.so.1 not loaded: %s", dlerror());
		return;
	}
	*(void **)&get = dlsym(so, "pd_get_api");
	if (!get || get(PD_ABI_MAJOR, DOCTOR_ABI_MINOR, &api) || !api) {
		add_check("libpeerdirect", "path", "warn", "a libpeerdirect1 of ABI 1.1 or newer",
			  "libpeerdirect.so.1 refuses ABI %d.%d", PD_ABI_MAJOR, DOCTOR_ABI_MINOR);
		dlclose(so);
		return;
	}
	add_check("libpeerdirect", "path", "ok", NULL, "libpeerdirect ABI %u.%u loaded; its "
		  "choice per device and provider follows (the provider picks its own NIC)",
		  api->abi_major, api->abi_minor);
	for (i = 0; i < nr_nics; i++) {
		rdma |= nics[i].kind == NIC_RDMA;
		netdev |= nics[i].kind == NIC_NETDEV;
	}
	for (i = 0; i < nr_devs; i++) {
		char state[32];

		if (devs[i].open_errno)
			continue;
		if (!attr_str(devs[i].idx, "state", state, sizeof(state)) &&
		    strcmp(state, "live")) {
			add_check("libpeerdirect", "path", "skip", "run pdctl doctor again once the "
				  "device is live", "not checked: peerdirect%d is %s", devs[i].idx,
				  state);
			continue;
		}
		if (rdma)
			library_choice(api, devs[i].idx, "verbs");
		if (netdev)
			library_choice(api, devs[i].idx, "tcp");
		/* Within the node: shm bounces with CMA (the library asks
		 * it no FI_HMEM, which would turn CMA off) and takes the
		 * dma-buf itself with FI_SHM_DISABLE_CMA=1. */
		library_choice(api, devs[i].idx, "shm");
	}
	dlclose(so);
#else
	(void)devs;
	(void)nr_devs;
	(void)nics;
	(void)nr_nics;
#endif
}

/* ---- output --------------------------------------------------------------- */

/* What an exit code of the doctor means, in the human output and JSON. */
static const char *exit_text(int ret)
{
	return ret == EX_OK ? "no pair falls back to bounce" :
	       ret == EX_BOUNCE ? "a pair would fall back to bounce" :
	       ret == EX_PERM ? "permission denied" :
	       ret == EX_NODEV ? "no module, device or node" :
	       ret == EX_SIMONLY ? "only simulated devices (--allow-sim accepts them)" :
	       "a check failed, a pair has no path (verdict none), or a pair could not be "
	       "probed (verdict unknown)";
}

static void print_human(int ret)
{
	int i;

	printf("%-14s %-26s %-6s %s\n", "CHECK", "SUBJECT", "STATUS", "REASON");
	for (i = 0; i < nr_checks; i++) {
		struct check *c = &checks[i];

		term_safe(c->subject);
		term_safe(c->reason);
		term_safe(c->fix);
		printf("%-14s %-26s %-6s %s\n", c->check, c->subject, c->status, c->reason);
		if (c->fix[0])
			printf("%-48s fix: %s\n", "", c->fix);
	}
	if (nr_pairs) {
		printf("\n%-12s %-16s %-8s %-8s %s\n", "DEVICE", "NIC", "KIND", "VERDICT",
		       "REASON");
		for (i = 0; i < nr_pairs; i++) {
			struct pair *p = &pairs[i];

			term_safe(p->nic);
			term_safe(p->reason);
			term_safe(p->fix);
			term_safe(p->topology);
			printf("%-12s %-16s %-8s %-8s %s\n", p->device, p->nic, p->nic_kind,
			       p->verdict, p->reason);
			if (p->fix[0])
				printf("%-47s fix: %s\n", "", p->fix);
			printf("%-47s pci: %s\n", "", p->topology);
		}
	}
	printf("\nexit %d: %s\n", ret, exit_text(ret));
}

/* --json's "error" member: the same words as the human "exit N:" line. */
static void print_json(const char *release, int ret)
{
	int i;

	jopen(NULL, '{');
	jstr("pdctl", PD_VERSION);
	jstr("kernel", release);
	jopen("checks", '[');
	for (i = 0; i < nr_checks; i++) {
		jopen(NULL, '{');
		jstr("check", checks[i].check);
		jstr("subject", checks[i].subject);
		jstr("status", checks[i].status);
		jstr("reason", checks[i].reason);
		jstr("fix", checks[i].fix[0] ? checks[i].fix : NULL);
		jclose('}');
	}
	jclose(']');
	jopen("pairs", '[');
	for (i = 0; i < nr_pairs; i++) {
		jopen(NULL, '{');
		jstr("device", pairs[i].device);
		jstr("nic", pairs[i].nic);
		jstr("nic_kind", pairs[i].nic_kind);
		jstr("verdict", pairs[i].verdict);
		jstr("reason", pairs[i].reason);
		jstr("fix", pairs[i].fix[0] ? pairs[i].fix : NULL);
		jstr("topology", pairs[i].topology);
		jkey("ibv_errno");
		if (pairs[i].ibv_errno >= 0)
			printf("%d", pairs[i].ibv_errno);
		else
			fputs("null", stdout);
		jclose('}');
	}
	jclose(']');
	if (ret)
		jstr("error", exit_text(ret));
	ji64("exit", ret);
	jclose('}');
	putchar('\n');
}

/* The verdict on one device/NIC pair (doctor's table, pdctl topo's cells). */
static void judge_pair(const struct dev *d, const struct nic *nic, struct pair *p)
{
	memset(p, 0, sizeof(*p));
	p->ibv_errno = -1;
	snprintf(p->device, sizeof(p->device), "peerdirect%d", d->idx);
	memcpy(p->nic, nic->name, sizeof(p->nic));
	p->nic_kind = nic->kind == NIC_RDMA ? "rdma" : "netdev";
	topology(d, nic, p);
	if (d->open_errno) {
		p->verdict = d->open_errno == EACCES || d->open_errno == EPERM ? "denied" :
								      "unavailable";
		set_text(p->reason, "%s/peerdirect%d cannot be opened: %s", devroot, d->idx,
			 strerror(d->open_errno));
		set_text(p->fix, "see the device_node check");
		return;
	}
	if (nic->kind == NIC_RDMA)
		pair_rdma(d, nic, p);
	else
		pair_netdev(d, nic, p);
	bounce_needs_cpu_mmap(d, p);
}

/* ---- for pdctl topo ----------------------------------------------------------- */

int doctor_nics(bool all, struct pd_nic_ref *out, int max)
{
	struct nic nics[MAX_NICS];
	int n, i, skipped = 0;

	n = add_nics("infiniband", NIC_RDMA, true, nics, 0, &skipped);
	n = add_nics("net", NIC_NETDEV, true, nics, n, &skipped);
	if (all) {
		n = add_nics("infiniband", NIC_RDMA, false, nics, n, &skipped);
		n = add_nics("net", NIC_NETDEV, false, nics, n, &skipped);
	}
	for (i = 0; i < n && i < max; i++) {
		memcpy(out[i].name, nics[i].name, sizeof(out[i].name));
		out[i].rdma = nics[i].kind == NIC_RDMA;
	}
	return i;
}

int doctor_find_nic(const char *name, struct pd_nic_ref *out)
{
	struct nic n;

	if (find_nic(name, &n))
		return -ENODEV;
	memcpy(out->name, n.name, sizeof(out->name));
	out->rdma = n.kind == NIC_RDMA;
	return 0;
}

void doctor_verdicts(const int *idx, int ndev, const struct pd_nic_ref *refs, int nnic,
		     struct pd_verdict *out)
{
	static struct dev devs[MAX_DEVS];
	struct pair p;
	struct nic nic;
	int i, j, saved = nr_checks;

	no_libs = getenv("PDCTL_LIBS") && !strcmp(getenv("PDCTL_LIBS"), "none");
	tool_env_defaults();
	for (i = 0; i < ndev && i < MAX_DEVS; i++) {
		devs[i].idx = idx[i];
		check_node(&devs[i]);
		read_features(&devs[i]);
	}
	check_libfabric();
	for (i = 0; i < ndev && i < MAX_DEVS; i++)
		for (j = 0; j < nnic; j++) {
			memcpy(nic.name, refs[j].name, sizeof(nic.name));
			nic.kind = refs[j].rdma ? NIC_RDMA : NIC_NETDEV;
			judge_pair(&devs[i], &nic, &p);
			snprintf(out[i * nnic + j].verdict, sizeof(out[0].verdict), "%s",
				 p.verdict ? p.verdict : "unknown");
			snprintf(out[i * nnic + j].reason, sizeof(out[0].reason), "%s", p.reason);
		}
	for (i = 0; i < ndev && i < MAX_DEVS; i++)
		if (devs[i].fd >= 0)
			close(devs[i].fd);
	nr_checks = saved;	/* the doctor's checks are not topo's output */
#ifndef PDCTL_NO_DLOPEN
	if (verbs.so)
		dlclose(verbs.so);
	verbs.so = NULL;
#endif
}

/* The worse of two exit codes: no device, permission, bounce, other. */
static int worse(int a, int b)
{
	/* pdctl.8: 3 and 4 take precedence over 7, and a bounce found is
	 * worth more than a pair that could not be probed (1). */
	static const int rank[] = { [EX_OK] = 0, [EX_FAIL] = 1, [EX_BOUNCE] = 2,
				    [EX_SIMONLY] = 3, [EX_PERM] = 4, [EX_NODEV] = 5 };

	const int n = (int)(sizeof(rank) / sizeof(rank[0]));

	if (a < 0 || a >= n || b < 0 || b >= n)
		return a ? a : b;
	return rank[b] > rank[a] ? b : a;
}

int cmd_doctor(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "nic", required_argument, NULL, 'n' },
		{ "allow-sim", no_argument, NULL, 's' },
		{ NULL, 0, NULL, 0 },
	};
	struct nic nics[MAX_NICS];
	int skipped_nics = 0;
	struct dev devs[MAX_DEVS];
	int idx[MAX_DEVS], nr_nics = 0, nr_devs = 0, n, i, j, c, ret = 0;
	bool want_nic = false, no_path = false, allow_sim = false, real = false;
	struct utsname u;

	if (getenv("PDCTL_PROC"))
		procroot = getenv("PDCTL_PROC");
	if (getenv("PDCTL_BOOT"))
		bootroot = getenv("PDCTL_BOOT");
	no_libs = getenv("PDCTL_LIBS") && !strcmp(getenv("PDCTL_LIBS"), "none");
	/* Before libfabric is loaded: the library's choice over verbs on rxe
	 * needs the queue sizes the tools use (fi_enable fails otherwise). */
	tool_env_defaults();
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+", opts, NULL)) != -1) {
		if (c == 's') {
			allow_sim = true;
			continue;
		}
		if (c != 'n') {
			fprintf(stderr, "pdctl: doctor: bad option (doctor [--allow-sim] "
				"[--nic NAME]...)\n");
			return EX_USAGE;
		}
		want_nic = true;
		if (nr_nics >= MAX_NICS) {
			fprintf(stderr, "pdctl: doctor: at most %d --nic\n", MAX_NICS);
			return EX_USAGE;
		}
		if (find_nic(optarg, &nics[nr_nics])) {
			fprintf(stderr, "pdctl: doctor: no NIC %s in %s/class/infiniband or "
				"%s/class/net\n", optarg, sysroot, sysroot);
			return EX_NODEV;
		}
		nr_nics++;
	}
	if (optind < argc) {
		fprintf(stderr, "pdctl: doctor: unexpected argument '%s'\n", argv[optind]);
		return EX_USAGE;
	}
	if (!want_nic) {
		/* Device-backed NICs first: on a node with hundreds of veths
		 * the real NIC must not be the one left out. */
		nr_nics = add_nics("infiniband", NIC_RDMA, true, nics, 0, &skipped_nics);
		nr_nics = add_nics("net", NIC_NETDEV, true, nics, nr_nics, &skipped_nics);
		nr_nics = add_nics("infiniband", NIC_RDMA, false, nics, nr_nics, &skipped_nics);
		nr_nics = add_nics("net", NIC_NETDEV, false, nics, nr_nics, &skipped_nics);
	}
	if (uname(&u))
		snprintf(u.release, sizeof(u.release), "unknown");

	check_kernel_config(u.release);
	ret = check_module();
	n = list_devices(idx, MAX_DEVS);
	for (i = 0; i < n; i++) {
		if (want_dev >= 0 && idx[i] != want_dev)
			continue;
		devs[nr_devs].idx = idx[i];
		ret = worse(ret, check_node(&devs[nr_devs]));
		read_features(&devs[nr_devs]);
		check_abi(&devs[nr_devs]);
		check_revoke(&devs[nr_devs]);
		real |= !dev_simulated(&devs[nr_devs]);
		nr_devs++;
	}
	/* A node with nothing to accelerate must not pass. */
	if (nr_devs && !real && allow_sim)
		add_check("device", "simulated", "warn", NULL, "every device is simulated (RAM "
			  "standing in for device memory): allowed by --allow-sim");
	else if (nr_devs && !real) {
		add_check("device", "simulated", "fail", "bind the accelerator (pdctl bind "
			  "ADDRESS; /etc/peerdirect/devices.conf), or --allow-sim for a test node",
			  "every device is simulated (sim_devices): this node has no device "
			  "memory to accelerate");
		ret = worse(ret, EX_SIMONLY);
	}
	if (!nr_devs && !ret) {
		if (want_dev >= 0)
			add_check("device", "peerdirect", "fail", "pdctl list shows the devices",
				  "no device peerdirect%d", want_dev);
		else
			add_check("device", "peerdirect", "fail", "the module's parameters "
				  "(sim_devices, or a bound PCI device)",
				  "the module is loaded but has no devices");
		ret = EX_NODEV;
	}
	check_iommu(devs, nr_devs);
	if (skipped_nics)
		add_check("nic", "more", "warn", "name the NIC to check with --nic NAME",
			  "%d NICs not checked: at most %d (those backed by a device first)",
			  skipped_nics, MAX_NICS);
	if (!nr_nics)
		add_check("nic", "none", "warn", "--nic NAME, or load the NIC's driver",
			  "no RDMA device in %s/class/infiniband and no netdev but lo in "
			  "%s/class/net", sysroot, sysroot);
	/* before the pairs: an RDMA NIC that takes dma-bufs is still bounce
	 * when libfabric does not */
	check_libfabric();
	for (i = 0; i < nr_devs; i++)
		for (j = 0; j < nr_nics && nr_pairs < MAX_PAIRS; j++) {
			struct pair *p = &pairs[nr_pairs++];

			judge_pair(&devs[i], &nics[j], p);
			if (devs[i].open_errno)
				continue;
			if (!strcmp(p->verdict, "bounce"))
				ret = worse(ret, EX_BOUNCE);
			else if (!strcmp(p->verdict, "unknown"))
				ret = worse(ret, EX_FAIL);
			else if (!strcmp(p->verdict, "none"))
				no_path = true;
		}
	/* A pair with no path fails a training run: a bounce elsewhere, which
	 * only slows one, must not hide it (3 and 4 still win). */
	if (no_path && (ret == EX_OK || ret == EX_BOUNCE))
		ret = EX_FAIL;
	check_libpeerdirect(devs, nr_devs, nics, nr_nics);
	/* A failed check is exit 1 at least, whatever the pairs said. */
	for (i = 0; i < nr_checks; i++)
		if (!strcmp(checks[i].status, "fail"))
			ret = worse(ret, EX_FAIL);
	for (i = 0; i < nr_devs; i++)
		if (devs[i].fd >= 0)
			close(devs[i].fd);
#ifndef PDCTL_NO_DLOPEN
	if (verbs.so)
		dlclose(verbs.so);
#endif
	if (json)
		print_json(u.release, ret);
	else
		print_human(ret);
	return ret;
}
