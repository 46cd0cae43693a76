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

/*
 * The q-quantile of sorted v[0..n), interpolated between the two nearest
 * values at q * (n - 1) (the definition of R's and numpy's defaults):
 * 0.5 is the median, the mean of the two middle values for even n.
 */
static inline double coll_quantile(const double *v, size_t n, double q)
{
	double pos;
	size_t i;

	if (!n)
		return NAN;
	pos = q * (double)(n - 1);
	i = (size_t)pos;	/* pos >= 0: the floor */
	return i + 1 < n ? v[i] + (pos - (double)i) * (v[i + 1] - v[i]) : v[i];
}

/* The median of v[0..n) (sorts v); NAN for none. */
static inline double coll_median(double *v, size_t n)
{
	if (!n)
		return NAN;
	qsort(v, n, sizeof(*v), coll_cmp_double);
	return coll_quantile(v, n, 0.5);
}

/* A ratio over the iterations: median, quartiles, and of how many. */
struct coll_ratio {
	double med, q1, q3;
	size_t n;
};

/*
 * Two paths compared side by side: the ratio within each iteration,
 * num[i] / den[i], over the iterations.  The paths take turns in every
 * iteration, so a pair's two times are moments apart; the ratio of two
 * separate medians pairs the middle of one path's times with the middle of
 * the other's, which may be far apart.  The quartiles say how far one
 * figure can be trusted.  scratch holds n doubles.  NAN (n 0) when no pair
 * has both times.
 */
static inline struct coll_ratio coll_paired_ratio(const double *num, const double *den,
						  size_t n, double *scratch)
{
	struct coll_ratio r = { NAN, NAN, NAN, 0 };
	size_t i;

	for (i = 0; i < n; i++)
		if (num[i] > 0 && den[i] > 0)
			scratch[r.n++] = num[i] / den[i];
	if (!r.n)
		return r;
	r.med = coll_median(scratch, r.n);
	r.q1 = coll_quantile(scratch, r.n, 0.25);
	r.q3 = coll_quantile(scratch, r.n, 0.75);
	return r;
}

/*
 * Do two paths' average busbw (avg_d for direct, avg_o for the other) and
 * their paired ratios (per size, the median of other's time over direct's:
 * above 1, direct is faster) rank the two the same way?  The ratios' own
 * verdict is their median over the sizes.  1 they agree (or either says
 * "equal"), 0 they point opposite ways, -1 no ratio to compare.  *overall
 * gets that median.  They can disagree: the averages are each path's own
 * mean over sizes and placements, which the largest sizes and a slow
 * iteration weigh on; the ratios pair each iteration's two times.
 */
static inline int coll_direction_agree(double avg_d, double avg_o, const struct coll_ratio *r,
				       size_t nsizes, double *scratch, double *overall)
{
	size_t i, n = 0;
	double med;

	for (i = 0; i < nsizes; i++)
		if (r[i].n && isfinite(r[i].med))
			scratch[n++] = r[i].med;
	*overall = NAN;
	if (!n)
		return -1;
	med = coll_median(scratch, n);
	*overall = med;
	if (avg_d == avg_o || med == 1.0)
		return 1;
	return (avg_d > avg_o) == (med > 1.0);
}

#endif
