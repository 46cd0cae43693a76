// SPDX-License-Identifier: MIT
/*
 * The NIC under a device's fabric, from sysfs: its PCI function (pciPath,
 * found as pdctl topo finds it: common/pci_path.h) and its link speed, so
 * that NCCL's topology places the NIC where the doctor does.  The
 * provider's domain names the NIC: an RDMA device ("mlx5_0"; EFA's
 * "rdmap0s31-rdm" carries its endpoint type), a netdev (tcp's "eth0"), or
 * nothing on PCI ("shm", "lo", a veth, rxe).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pci_path.h"
#include "plugin.h"

static int read_text(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "r");
	int ok;

	if (!f)
		return -1;
	ok = fgets(buf, (int)len, f) != NULL;
	fclose(f);
	return ok ? 0 : -1;
}

/* An RDMA port's rate ("100 Gb/sec (4X EDR)") or a netdev's speed (Mb/s,
 * -1 when the driver does not know, as virtio's): Mb/s, or 0. */
static int sysfs_speed(const char *nic, bool rdma)
{
	char path[PATH_MAX], buf[64];
	double v;

	snprintf(path, sizeof(path), rdma ? "/sys/class/infiniband/%s/ports/1/rate" :
		 "/sys/class/net/%s/speed", nic);
	if (read_text(path, buf, sizeof(buf)) || sscanf(buf, "%lf", &v) != 1 || v <= 0)
		return 0;
	return rdma ? (int)(v * 1000) : (int)v;
}

/*
 * NCCL_SOCKET_IFNAME's syntax: names by prefix, comma-separated; a
 * leading '^' excludes them instead, a leading '=' (after the '^') asks
 * for exact names.
 */
bool pdn_nic_wanted(const char *spec, const char *name)
{
	bool exclude = *spec == '^', exact;
	const char *s = spec + exclude, *e;
	size_t len;

	exact = *s == '=';
	s += exact;
	for (; *s; s = *e ? e + 1 : e) {
		e = strchrnul(s, ',');
		len = (size_t)(e - s);
		if (len && !strncmp(name, s, len) && (!exact || !name[len]))
			return !exclude;
	}
	return exclude;
}

/* A netdev with IFF_LOOPBACK (lo): reaches no other node. */
bool pdn_nic_loopback(const char *domain)
{
	char path[PATH_MAX], buf[32];

	snprintf(path, sizeof(path), "/sys/class/net/%s/flags", domain);
	return !read_text(path, buf, sizeof(buf)) && (strtoul(buf, NULL, 0) & 0x8);
}

void pdn_nic_locate(struct pdn_dev *d)
{
	const char *dom = pd_fabric_domain(d->fab);
	char link[PATH_MAX], path[PATH_MAX], parent[64], *dash;

	snprintf(d->nic, sizeof(d->nic), "%s", dom);
	dash = strrchr(d->nic, '-');
	if (dash && (!strcmp(dash, "-rdm") || !strcmp(dash, "-dgrm")))
		*dash = 0;
	snprintf(link, sizeof(link), "/sys/class/infiniband/%s", d->nic);
	d->nic_rdma = !access(link, F_OK);
	if (d->nic_rdma) {
		/* soft-RoCE (rxe, siw) has no device link: its netdev's */
		snprintf(path, sizeof(path), "/sys/class/infiniband/%s/parent", d->nic);
		snprintf(link, sizeof(link), "/sys/class/infiniband/%s/device", d->nic);
		if (access(link, F_OK) && !read_text(path, parent, sizeof(parent))) {
			parent[strcspn(parent, "\n")] = 0;
			snprintf(link, sizeof(link), "/sys/class/net/%s/device", parent);
		}
	} else {
		snprintf(d->nic, sizeof(d->nic), "%s", dom);
		snprintf(link, sizeof(link), "/sys/class/net/%s/device", d->nic);
	}
	if (!d->nic[0] || pd_pci_function_path(link, d->pci_path, sizeof(d->pci_path)))
		d->pci_path[0] = 0;
	d->nic_speed_mbps = d->nic[0] ? sysfs_speed(d->nic, d->nic_rdma) : 0;
}
