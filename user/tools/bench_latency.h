/* SPDX-License-Identifier: MIT */
/*
 * pd-bench latency and msgrate: small-message figures through the public
 * API alone (peerdirect.h), on registered host memory, between two
 * processes that meet over the TCP rendezvous.  latency runs libfabric's
 * own fi_pingpong on the same provider beside it.
 */
#ifndef PD_TOOLS_BENCH_LATENCY_H
#define PD_TOOLS_BENCH_LATENCY_H

#include <stddef.h>
#include <stdint.h>

#define LAT_MAX_ITERS	1000000	/* latency keeps every round trip: 4 B each */
#define LAT_MAX_WINDOW	1024
#define LAT_MAX_REPEATS	31

struct lat_opts {
	const char *cmdline;		/* echoed above the figures */
	const char *provider;		/* NULL: the library's choice */
	const size_t *sizes;
	int nsizes, iters, repeats, window;
	int cpus[2];			/* rank 0's and rank 1's CPU; -1: not pinned */
	uint16_t port;			/* rendezvous; fi_pingpong's is the next one */
};

/* Both return the exit status: 0, or 1 when a transfer failed (the
 * library's message is on stderr).  fi_pingpong failing is not one. */
int bench_latency(const struct lat_opts *o);
int bench_msgrate(const struct lat_opts *o);

#endif
