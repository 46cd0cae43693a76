/* SPDX-License-Identifier: MIT */
/*
 * Process-wide libfabric settings a tool chooses for itself, before its
 * first libfabric call (libfabric reads them once, at initialisation).  A
 * library must not do this; an application may.
 */
#ifndef PD_TOOLS_TOOL_ENV_H
#define PD_TOOLS_TOOL_ENV_H

#include <stdlib.h>

static inline void tool_env_defaults(void)
{
	/*
	 * ofi_rxm sizes each MSG-provider CQ as (tx + rx) * FI_UNIVERSE_SIZE:
	 * with the default 256 that is 196608 entries over verbs, above rxe's
	 * max_cqe of 32767.  32 peers keep it at 24576.  A user's own value
	 * wins.
	 */
	setenv("FI_UNIVERSE_SIZE", "32", 0);
}

#endif
