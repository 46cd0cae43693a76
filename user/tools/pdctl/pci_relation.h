/* SPDX-License-Identifier: MIT */
/*
 * The PCIe relation of two PCI functions, in nvidia-smi topo -m's words,
 * from their sysfs paths alone (a pure function: the unit test feeds it
 * paths, pdctl topo the realpath of each device link):
 *   X     the same function
 *   PIX   at most one bridge or switch between them (a common switch, or
 *         functions of one device)
 *   PXB   several bridges, without the host bridge
 *   PHB   through the host bridge (root complex) they share
 *   NODE  between host bridges of one NUMA node
 *   SYS   between NUMA nodes (the SMP interconnect)
 */
#ifndef PDCTL_PCI_H
#define PDCTL_PCI_H

#include <stdio.h>
#include <string.h>

#include "pci_path.h"

/* PCI address components of path after byte off (bridges and the end). */
static inline int pd_bdf_hops(const char *path, size_t off)
{
	const char *s = path + off, *e;
	int n = 0;

	while (*s) {
		while (*s == '/')
			s++;
		e = strchrnul(s, '/');
		n += pd_is_bdf(s, e - s);
		s = e;
	}
	return n;
}

/*
 * a, b: sysfs paths of two PCI functions (/sys/devices/pci0000:00/...);
 * numa_a, numa_b their numa_node (-1: unknown, counts as one node).
 * NULL when either is not below a host bridge.
 */
static inline const char *pd_pci_relation(const char *a, const char *b, int numa_a, int numa_b)
{
	size_t i, last = 0;
	const char *start, *ha, *hb;
	int hops_a, hops_b;

	ha = strstr(a, "/pci");
	hb = strstr(b, "/pci");
	if (!ha || !hb)
		return NULL;
	if (!strcmp(a, b))
		return "X";
	for (i = 0; a[i] && a[i] == b[i]; i++)
		if (a[i] == '/')
			last = i;
	if ((!a[i] && b[i] == '/') || (!b[i] && a[i] == '/'))
		last = i;
	start = a + last;
	while (start > a && start[-1] != '/')
		start--;
	if (last && pd_is_bdf(start, a + last - start)) {
		/* below a common bridge: the bridges each side adds, not
		 * counting the functions themselves */
		hops_a = pd_bdf_hops(a, last) - 1;
		hops_b = pd_bdf_hops(b, last) - 1;
		if (hops_a < 0)
			hops_a = 0;
		if (hops_b < 0)
			hops_b = 0;
		return hops_a <= 1 && hops_b <= 1 ? "PIX" : "PXB";
	}
	if (last && !strncmp(start, "pci", 3) && a + last > ha)
		return "PHB";
	if (numa_a == numa_b || numa_a < 0 || numa_b < 0)
		return "NODE";
	return "SYS";
}

#endif /* PDCTL_PCI_H */
