// SPDX-License-Identifier: MIT
/*
 * The doctor's PCI checks: the NICs to pair the devices with, the IOMMU
 * (mode, and each device's group), and the PCI path of each pair: the
 * common upstream bridge, and ACS on the way.
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
#include <sys/stat.h>
#include <unistd.h>

#include "doctor.h"

/* ---- NICs ----------------------------------------------------------------- */

/*
 * Adds cls's NICs to out[n..MAX_NICS): those backed by a device (a PCI
 * function; physical) or the others (veth, bridges, rxe over them).
 * Plain files (bonding_masters) and lo are not NICs.  *skipped counts
 * those left out for lack of room.
 */
int add_nics(const char *cls, enum nic_kind kind, bool physical, struct nic *out,
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
int find_nic(const char *name, struct nic *out)
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


void check_iommu(struct doctor *dr, const struct dev *devs, int nr)
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
	snprintf(path, sizeof(path), "%s/cmdline", dr->procroot);
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
		add_check(dr, "iommu", "mode", STATUS_OK, NULL, "no IOMMU registered in %s/class/iommu "
			  "(cmdline: %s): bus addresses are physical, peer-to-peer is not translated",
			  sysroot, aused ? args : "no iommu option");
	else if (pt || off)
		add_check(dr, "iommu", "mode", STATUS_OK, NULL, "IOMMU %s, cmdline %s: DMA is not "
			  "translated", units, args);
	else if (identity)
		add_check(dr, "iommu", "mode", STATUS_OK, NULL, "IOMMU %s (cmdline: %s), every peerdirect "
			  "device in an identity group: its DMA is not translated", units,
			  aused ? args : "no iommu option");
	else
		add_check(dr, "iommu", "mode", STATUS_WARN, "boot with iommu=pt (with intel_iommu=on or "
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
		add_check(dr, "iommu", subject, strstr(grp, "(DMA") ? STATUS_WARN : STATUS_OK,
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
void topology(const struct dev *d, const struct nic *nic, struct pair *p)
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
