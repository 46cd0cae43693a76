/* SPDX-License-Identifier: MIT */
/*
 * pd-bench's parts: the options every mode reads, and what the modes
 * share (medians, the exit on failure, a fabric sized for --entries).
 *   pd-bench.c     options and the mode table
 *   bench_cache.c  cache: hits and misses at N live entries
 *   bench_bw.c     bw (shim against raw libfabric) and paths (direct
 *                  against bounce), two processes
 *   bench_lifecycle.h, bench_latency.c: lifecycle, latency and msgrate
 */
#ifndef PD_TOOLS_BENCH_H
#define PD_TOOLS_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "peerdirect.h"

#define TOOL_NAME "pd-bench"
#define MAX_SIZES 16
#define RAW_WINDOW 64
#define MAX_REPEATS 31

struct opts {
	const char *mode, *provider, *memory;
	size_t sizes[MAX_SIZES];
	int nsizes, entries, repeats, iters, window, cpus[2];
	bool sizes_given, repeats_given;
	uint16_t port;
};

/* Bytes one timed run of bw and paths moves (--total). */
extern size_t bench_run_total;

uint64_t bench_median(uint64_t *v, size_t n);
double bench_median_d(double *v, size_t n);
/* Say why and exit: code, or 4 for a permission refused. */
_Noreturn void bench_die_code(const char *what, int ret, int code);
_Noreturn void bench_die(const char *what, int ret);
struct pd_fabric *bench_open_fabric(const struct opts *o, enum pd_path path);

void mode_cache(const struct opts *o);
int mode_bw(const struct opts *o);
int mode_paths(const struct opts *o);

#endif
