/* SPDX-License-Identifier: MIT */
/*
 * Where a device sits on PCI, from sysfs alone: the PCI function a class
 * device's `device` link leads to, or the function above it (a netdev of
 * virtio, an EFA's parent).  pdctl topo draws its matrix from it and the
 * NCCL net plugin reports a NIC's pciPath from it, so that NCCL's topology
 * and the doctor's place a NIC at the same function.
 */
#ifndef PD_COMMON_PCI_PATH_H
#define PD_COMMON_PCI_PATH_H

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Whether the len bytes at s are a PCI address DDDD:BB:DD.F. */
static inline int pd_is_bdf(const char *s, size_t len)
{
	unsigned int a, b, c, d;
	char tmp[32], tail;

	if (len >= sizeof(tmp) || len < 7)
		return 0;
	memcpy(tmp, s, len);
	tmp[len] = 0;
	return sscanf(tmp, "%x:%x:%x.%x%c", &a, &b, &c, &d, &tail) == 4;
}

/*
 * The sysfs path of the PCI function at or above link's target into out
 * (NCCL takes the last component as the bus id, so never a virtio or
 * netdev below it): 0, or -1 when the link leads to none (lo, veth, rxe's
 * own device, a missing link) or out is too short.
 */
static inline int pd_pci_function_path(const char *link, char *out, size_t len)
{
	char buf[PATH_MAX], *base;

	if (!realpath(link, buf))
		return -1;
	while ((base = strrchr(buf, '/')) && base != buf) {
		if (pd_is_bdf(base + 1, strlen(base + 1))) {
			if (strlen(buf) >= len)
				return -1;
			memcpy(out, buf, strlen(buf) + 1);
			return 0;
		}
		*base = 0;
	}
	return -1;
}

#endif
