/* SPDX-License-Identifier: MIT */
/*
 * What every benchmark figure needs: a monotonic clock, and the exact
 * command that produced it, printed beside the numbers.
 */
#ifndef PD_TOOLS_BENCH_REPORT_H
#define PD_TOOLS_BENCH_REPORT_H

#include <stdint.h>
#include <stdio.h>
#include <time.h>

static char cmdline[1024];

static inline void record_cmdline(int argc, char **argv)
{
	size_t n = 0;
	int i;

	for (i = 0; i < argc; i++)
		n += (size_t)snprintf(cmdline + n, n < sizeof(cmdline) ? sizeof(cmdline) - n : 0,
				      "%s%s", i ? " " : "", argv[i]);
}

static inline uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

#endif
