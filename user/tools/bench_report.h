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

/* The command line, recorded by record_cmdline() (bench_report.c). */
extern char cmdline[1024];
void record_cmdline(int argc, char **argv);

static inline uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

#endif
