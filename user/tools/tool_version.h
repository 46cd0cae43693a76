/* SPDX-License-Identifier: MIT */
/*
 * --version of the tools linked with libpeerdirect and libfabric: the
 * tool's build, then what it runs with (the library's ABI from its own
 * table, libfabric's version from fi_version(), not from the headers).
 */
#ifndef PD_TOOLS_TOOL_VERSION_H
#define PD_TOOLS_TOOL_VERSION_H

#include <stdio.h>
#include <rdma/fabric.h>
#include "peerdirect.h"
#include "tool_cli.h"

static inline void tool_print_version(const char *tool)
{
	const struct pd_api *api = NULL;
	uint32_t fv = fi_version();

	printf("%s %s\n", tool, PD_VERSION);
	/* minor 0: any library of our major answers with its own minor */
	if (!pd_get_api(PD_ABI_MAJOR, 0, &api) && api)
		printf("libpeerdirect %s (ABI %u.%u, linked in)\n", PD_VERSION,
		       (unsigned int)api->abi_major, (unsigned int)api->abi_minor);
	printf("libfabric %u.%u (run time)\n", FI_MAJOR(fv), FI_MINOR(fv));
}

#endif
