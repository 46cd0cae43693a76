// SPDX-License-Identifier: MIT
/*
 * What the shared pdctl loads at run time: libpeerdirect's and libfabric's
 * versions for --version (dlopen: pdctl links neither library), and a
 * group's name through NSS.  The static build (for the VMs) links
 * static.c in place of this file and of doctor_libs.c.
 */
#include <dlfcn.h>
#include <grp.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "pdctl.h"
#include "doctor.h"
#include "peerdirect.h"

/* A library's symbol through dlopen. */
static void *dl_sym(const char *lib, const char *sym, void **h)
{
	*h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
	return *h ? dlsym(*h, sym) : NULL;
}

void lib_versions(char *pd, size_t pd_len, char *fab, size_t fab_len)
{
	uint32_t (*fiv)(void);
	void *h1, *h2, *get;

	get = dl_sym("libpeerdirect.so.1", "pd_get_api", &h1);
	if (get) {
		const struct pd_api *api = NULL;

		if (!((pd_get_api_fn)get)(PD_ABI_MAJOR, 0, &api) && api)
			snprintf(pd, pd_len, "%u.%u", (unsigned int)api->abi_major,
				 (unsigned int)api->abi_minor);
	}
	*(void **)&fiv = dl_sym("libfabric.so.1", "fi_version", &h2);
	if (fiv)
		snprintf(fab, fab_len, "%u.%u", fiv() >> 16, fiv() & 0xffff);
	/* not dlclose()d: libfabric keeps what its constructors allocate in
	 * its own globals, which would then leak */
	(void)h1, (void)h2;
}

void print_lib_versions(const char *pd, const char *fab)
{
	printf("libpeerdirect %s\n", pd[0] ? pd : "not found (libpeerdirect.so.1)");
	printf("libfabric %s\n", fab[0] ? fab : "not found (libfabric.so.1)");
}

const char *group_name(gid_t gid)
{
	struct group *gr = getgrgid(gid);

	return gr ? gr->gr_name : NULL;
}
