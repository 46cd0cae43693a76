// SPDX-License-Identifier: MIT
/* The command a benchmark's figures came from, printed beside them. */
#include "bench_report.h"

char cmdline[1024];

void record_cmdline(int argc, char **argv)
{
	size_t n = 0;
	int i;

	for (i = 0; i < argc; i++)
		n += (size_t)snprintf(cmdline + n, n < sizeof(cmdline) ? sizeof(cmdline) - n : 0,
				      "%s%s", i ? " " : "", argv[i]);
}
