// SPDX-License-Identifier: MIT
/*
 * The other side of scripts/coll-vs-mpi.sh: MPI_Allreduce (float32 sum, out
 * of place) timed the way pd-coll times it: a barrier, the collective, the
 * slowest rank's time per iteration, then the mean and the median over the
 * iterations; the result is checked once per size.  Built with mpicc by the
 * script, not by the Makefile (no MPI at build time).
 *
 *   mpirun -np N pd-mpi-allreduce MINBYTES MAXBYTES ITERS WARMUP
 *
 * Prints "size time_mean_us time_median_us busbw_mean_gbs" per size.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "../../tool_args.h"
#include "../stats.h"

/* MAXBYTES up to 4 GiB is a size_t here. */
_Static_assert(sizeof(size_t) >= 8, "pd-mpi-allreduce needs a 64-bit size_t");

int main(int argc, char **argv)
{
	unsigned long long minb, maxb;
	size_t size, i;
	int rank, n, iters, warm, it, bad = 0;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &n);
	if (argc != 5) {
		if (!rank)
			fprintf(stderr, "usage: pd-mpi-allreduce MINBYTES MAXBYTES ITERS WARMUP\n");
		MPI_Finalize();
		return 2;
	}
	/* Decimal bytes in whole floats, counts that fit MPI's int: "4K" read
	 * as 4 would time other sizes than pd-coll's, and 0 never doubles. */
	if (tool_ull(argv[1], 4, 1ULL << 32, &minb) || minb % 4 ||
	    tool_ull(argv[2], minb, 1ULL << 32, &maxb) || tool_number(argv[3], 1, 100000, &iters) ||
	    tool_number(argv[4], 0, 100000, &warm)) {
		if (!rank)
			fprintf(stderr, "pd-mpi-allreduce: want MINBYTES a multiple of 4, MINBYTES <= MAXBYTES <= 4 GiB, ITERS 1 to 100000 and WARMUP 0 to 100000, in decimal; got %s %s %s %s\n",
				argv[1], argv[2], argv[3], argv[4]);
		MPI_Finalize();
		return 2;
	}
	float *in = malloc(maxb), *out = malloc(maxb);
	double *t = calloc((size_t)iters, sizeof(double)), *tmax = calloc((size_t)iters, sizeof(double));

	if (!in || !out || !t || !tmax)
		MPI_Abort(MPI_COMM_WORLD, 3);
	if (!rank)
		printf("# MPI_Allreduce float32 sum, %d ranks, out of place; time = slowest rank per iteration\n"
		       "%12s %14s %14s %12s\n", n, "size", "mean_us", "median_us", "busbw_GB/s");
	for (size = minb; size <= maxb; size *= 2) {
		size_t count = size / 4;
		double mean = 0;

		for (i = 0; i < count; i++)
			in[i] = (float)(1 + (i * 7 + (size_t)rank * 5) % 16);
		for (it = -warm; it < iters; it++) {
			double t0;

			MPI_Barrier(MPI_COMM_WORLD);
			t0 = MPI_Wtime();
			MPI_Allreduce(in, out, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
			if (it >= 0)
				t[it] = MPI_Wtime() - t0;
		}
		for (i = 0; i < count; i++) {
			float want = 0;
			int q;

			for (q = 0; q < n; q++)
				want += (float)(1 + (i * 7 + (size_t)q * 5) % 16);
			bad += out[i] != want;
		}
		MPI_Reduce(t, tmax, iters, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
		if (!rank) {
			for (it = 0; it < iters; it++)
				mean += tmax[it] / iters;
			/* the median as pd-coll's --stat median takes it */
			printf("%12zu %14.2f %14.2f %12.4f\n", size, mean * 1e6,
			       coll_median(tmax, (size_t)iters) * 1e6,
			       (double)size / mean / 1e9 * 2.0 * (n - 1) / n);
			fflush(stdout);
		}
	}
	MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	if (!rank && bad)
		printf("# WRONG: %d elements\n", bad);
	free(in);
	free(out);
	free(t);
	free(tmax);
	MPI_Finalize();
	return bad ? 1 : 0;
}
