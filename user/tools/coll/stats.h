/* SPDX-License-Identifier: MIT */
/*
 * pd-coll's statistics over the timed iterations.  Header-only so that
 * test_coll checks the very functions the tool uses.
 */
#ifndef PD_COLL_STATS_H
#define PD_COLL_STATS_H

#include <math.h>
#include <stddef.h>
#include <stdlib.h>

static inline int coll_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* The median of v[0..n) (sorts v); the upper one of an even count, NAN for none. */
static inline double coll_median(double *v, size_t n)
{
	if (!n)
		return NAN;
	qsort(v, n, sizeof(*v), coll_cmp_double);
	return v[n / 2];
}

/* A ratio's median and quartiles over the iterations. */
struct coll_ratio {
	double med, q1, q3;
};

/*
 * Two paths compared side by side: the ratio within each iteration,
 * num[i] / den[i], over the iterations.  The paths take turns in every
 * iteration, so whatever slowed the machine for a while (another tenant,
 * a VM's vCPU) slowed both sides of one pair; the ratio of two separate
 * medians pairs the middle of one path's times with the middle of the
 * other's, taken at different moments, and keeps that spread.  The
 * quartiles say how far one figure can be trusted.  scratch holds n
 * doubles.  NAN for every field when no pair has both times.
 */
static inline struct coll_ratio coll_paired_ratio(const double *num, const double *den,
						  size_t n, double *scratch)
{
	struct coll_ratio r = { NAN, NAN, NAN };
	size_t i, m = 0;

	for (i = 0; i < n; i++)
		if (num[i] > 0 && den[i] > 0)
			scratch[m++] = num[i] / den[i];
	if (!m)
		return r;
	r.med = coll_median(scratch, m);
	r.q1 = scratch[m / 4];
	r.q3 = scratch[3 * m / 4];
	return r;
}

#endif
