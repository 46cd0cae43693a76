// SPDX-License-Identifier: MIT
/*
 * The doctor's host checks: the kernel's config, the module and its
 * parameters, each device's node, uapi version and importers (what a
 * revoke does to them), and whether the devices are simulated.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/peerdirect.h>

#include "doctor.h"
#include "../tool_device.h"

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

char *slurp(const char *path)
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

void check_kernel_config(struct doctor *dr, const char *release)
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

	snprintf(src, sizeof(src), "%s/config-%s", dr->bootroot, release);
	cfg = slurp(src);
	if (!cfg) {
		snprintf(path, sizeof(path), "%s/config.gz", dr->procroot);
		cfg = slurp_gz(path);
		snprintf(src, sizeof(src), "%s", path);
	}
	if (!cfg) {
		add_check(dr, "kernel_config", "config", STATUS_WARN,
			  "install the kernel's config in /boot or build with CONFIG_IKCONFIG_PROC",
			  "neither %s/config-%s nor %s/config.gz is readable", dr->bootroot, release,
			  dr->procroot);
		return;
	}
	for (i = 0; i < sizeof(opts) / sizeof(opts[0]); i++) {
		v = config_value(cfg, opts[i].opt);
		if (v == 'y' || v == 'm')
			add_check(dr, "kernel_config", opts[i].opt, STATUS_OK, NULL, "=%c in %s", v, src);
		else if (v == 'n')
			add_check(dr, "kernel_config", opts[i].opt, STATUS_WARN, opts[i].fix,
				  "is not set in %s: %s", src, opts[i].why);
		else if (opts[i].optional)
			add_check(dr, "kernel_config", opts[i].opt, STATUS_OK, NULL,
				  "not an option of this kernel (%s)", src);
		else
			add_check(dr, "kernel_config", opts[i].opt, STATUS_WARN, opts[i].fix,
				  "absent from %s: %s", src, opts[i].why);
	}
	free(cfg);
}

/* ---- module, devices, nodes --------------------------------------------- */

int check_module(struct doctor *dr)
{
	char dir[PATH_MAX], path[PATH_MAX * 2], val[128], params[TEXT] = "";
	struct dirent **names;
	size_t used = 0;
	int n, i, nparams;

	if (!module_loaded()) {
		add_check(dr, "module", "peerdirect", STATUS_FAIL, "modprobe peerdirect (or make install, "
			  "then modprobe)", "the peerdirect module is not loaded (no %s/module/"
			  "peerdirect)", sysroot);
		return EX_NODEV;
	}
	snprintf(path, sizeof(path), "%s/module/peerdirect/version", sysroot);
	if (read_file(path, val, sizeof(val)))
		snprintf(val, sizeof(val), "unknown");
	add_check(dr, "module", "peerdirect", STATUS_OK, NULL, "loaded, version %s", val);
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
	add_check(dr, "module", "parameters", nparams > 0 ? STATUS_OK : STATUS_WARN,
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
void check_revoke(struct doctor *dr, const struct dev *d)
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
		add_check(dr, "revoke", subject, STATUS_SKIP, NULL, "importers not listed: %s",
			  d->fd < 0 ? "the device could not be opened" :
			  "the module predates uapi 2.2, which says whether an importer can be revoked");
		return;
	}
	if (ioctl(d->fd, PEERDIRECT_IOCTL_LIST, &l)) {
		add_check(dr, "revoke", subject, STATUS_SKIP, NULL, "PEERDIRECT_IOCTL_LIST: %s",
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
		add_check(dr, "revoke", subject, STATUS_OK, NULL, "%u importers now%s, each revocable: a "
			  "revoke unmaps them (require_revocable=%s)", l.total_attachments,
			  geteuid() ? " of your processes" : "", pol);
	else
		add_check(dr, "revoke", subject, STATUS_OK, NULL, "%u of %u importers now cannot be revoked "
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

/* sysfs "features", else QUERY on the node (a module without the file). */
void read_features(struct dev *d)
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

void check_abi(struct doctor *dr, const struct dev *d)
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
		add_check(dr, "uapi", subject, STATUS_SKIP, NULL, "not checked: neither QUERY nor "
			  "sysfs abi_version answered");
		return;
	}
	if (major != PEERDIRECT_ABI_MAJOR) {
		add_check(dr, "uapi", subject, STATUS_FAIL, "install the module and tools of one release "
			  "(dkms status; apt policy peerdirect-dkms peerdirect-tools)",
			  "the module speaks uapi %u.%u, the tools %d.%d: another major is "
			  "another interface", major, minor, PEERDIRECT_ABI_MAJOR,
			  PEERDIRECT_ABI_MINOR);
		return;
	}
	if (minor >= PEERDIRECT_ABI_MINOR) {
		add_check(dr, "uapi", subject, STATUS_OK, NULL, "module uapi %u.%u, tools %d.%d", major,
			  minor, PEERDIRECT_ABI_MAJOR, PEERDIRECT_ABI_MINOR);
		return;
	}
	for (m = minor + 1; m <= PEERDIRECT_ABI_MINOR; m++)
		if (m < sizeof(minor_adds) / sizeof(minor_adds[0]) && minor_adds[m])
			used += snprintf(missing + used, sizeof(missing) - used, "%s%u.%u: %s",
					 used ? "; " : "", major, m, minor_adds[m]);
	add_check(dr, "uapi", subject, STATUS_WARN, "load the module the tools came with (dkms status; "
		  "modprobe -r peerdirect && modprobe peerdirect), or tools of the module's "
		  "release", "the module speaks uapi %u.%u, older than the tools' %d.%d; missing: "
		  "%s", major, minor, PEERDIRECT_ABI_MAJOR, PEERDIRECT_ABI_MINOR,
		  used ? missing : "nothing the tools use");
}

/* Whether device idx is the simulated backend (RAM standing in for HBM). */
bool dev_simulated(const struct dev *d)
{
	struct peerdirect_query q = { .argsz = sizeof(q) };
	char b[32];

	if (!attr_str(d->idx, "backend", b, sizeof(b)))
		return !strcmp(b, "sim");
	return d->fd >= 0 && !ioctl(d->fd, PEERDIRECT_IOCTL_QUERY, &q) &&
	       q.backend == PEERDIRECT_BACKEND_SIM;
}

/* Opens the node; exit code of its failure, or 0. */
int check_node(struct doctor *dr, struct dev *d)
{
	char path[PATH_MAX], subject[32], gname[64];
	const char *group;
	struct stat st;

	snprintf(subject, sizeof(subject), "peerdirect%d", d->idx);
	snprintf(path, sizeof(path), "%s/peerdirect%d", devroot, d->idx);
	d->fd = -1;
	if (stat(path, &st)) {
		d->open_errno = errno;
		add_check(dr, "device_node", subject, STATUS_FAIL, "install the udev rule "
			  "kmod/60-peerdirect.rules (make install) and run udevadm trigger",
			  "%s: %s (the module has the device, udev made no node)", path,
			  strerror(errno));
		return EX_NODEV;
	}
	group = group_name(st.st_gid);
	if (group)
		snprintf(gname, sizeof(gname), "%s", group);
	else
		snprintf(gname, sizeof(gname), "%u", (unsigned int)st.st_gid);
	d->fd = open(path, O_RDWR | O_CLOEXEC);
	if (d->fd >= 0) {
		d->open_errno = 0;
		add_check(dr, "device_node", subject, STATUS_OK, NULL, "%s: mode %04o group %s, opened "
			  "read-write%s", path, (unsigned int)(st.st_mode & 07777), gname,
			  tool_dev_simulated(sysroot, d->idx) ?
			  "; simulated (RAM standing in for device memory)" : "");
		return 0;
	}
	d->open_errno = errno;
	add_check(dr, "device_node", subject, STATUS_FAIL,
		  "add the user to the node's group (usermod -aG peerdirect USER, then log in "
		  "again); the rule kmod/60-peerdirect.rules makes nodes group peerdirect, mode "
		  "0660",
		  "%s: %s (mode %04o group %s; the caller is %sin that group)", path,
		  strerror(errno), (unsigned int)(st.st_mode & 07777), gname,
		  in_group(st.st_gid) ? "" : "not ");
	return errno == EACCES || errno == EPERM ? EX_PERM : EX_FAIL;
}
