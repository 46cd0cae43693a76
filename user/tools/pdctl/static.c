// SPDX-License-Identifier: MIT
/*
 * The static build's stand-in for dl.c and doctor_libs.c (pdctl for the
 * VMs, which selftests/admin.c runs).  Static glibc cannot dlopen reliably
 * (the shared libraries must come from the very glibc it was linked with),
 * nor use NSS, so this build loads no library: --version says so, and the
 * doctor reports its libibverbs/libfabric/libpeerdirect checks "skip".
 */
#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>

#include "pdctl.h"
#include "doctor.h"

void lib_versions(char *pd, size_t pd_len, char *fab, size_t fab_len)
{
	(void)pd, (void)pd_len, (void)fab, (void)fab_len;
}

void print_lib_versions(const char *pd, const char *fab)
{
	(void)pd, (void)fab;
	printf("libpeerdirect not checked (static build)\nlibfabric not checked (static build)\n");
}

/* no NSS, which would need the host's glibc at run time */
const char *group_name(gid_t gid)
{
	(void)gid;
	return NULL;
}

bool libs_usable(const struct doctor *dr, char *why)
{
	(void)dr;
	set_text(why, "pdctl built without dlopen (static build)");
	return false;
}

bool libs_fabric_missing(const struct doctor *dr, struct pair *p)
{
	(void)dr, (void)p;
	return false;
}

/* Not reached: libs_usable() said no. */
void libs_pair_rdma(struct doctor *dr, const struct dev *d, const struct nic *nic,
		    struct pair *p)
{
	(void)dr, (void)d, (void)nic, (void)p;
}

void libs_check_fabric(struct doctor *dr)
{
	(void)dr;
}

void libs_check_peerdirect(struct doctor *dr, const struct dev *devs, int nr_devs,
			   const struct nic *nics, int nr_nics)
{
	(void)dr, (void)devs, (void)nr_devs, (void)nics, (void)nr_nics;
}

void libs_close(struct doctor *dr)
{
	(void)dr;
}
