// SPDX-License-Identifier: MIT
/*
 * The model of direct against bounce (Documentation/performance.md, "A
 * model of direct against bounce"), fed with what this run measured: the
 * link, as the direct path's busbw at each size (the bytes each rank puts
 * on the wire per second), and the CPU copies the bounce path adds (the
 * header's copy bandwidths, device to host at the sender and host to
 * device at the receiver).  The bound is that of copies that do not
 * overlap the wire, without the reduction (common to both paths, so it
 * only lowers the ratio): a measured ratio sits at or below it, and
 * measured/bound says how much of the copies' cost the run paid.
 */
#include <math.h>
#include <stdio.h>

#include "coll.h"

static double copy_to_dev, copy_from_dev;	/* GB/s, 0: not measured */

void model_set_copies(double to_dev, double from_dev)
{
	copy_to_dev = to_dev;
	copy_from_dev = from_dev;
}

static double bound(double link, double dh, double hd)
{
	return 1 + link * (1 / dh + 1 / hd);
}

double model_direct_over_bounce(double link_gbps)
{
	if (copy_to_dev <= 0 || copy_from_dev <= 0 || !(link_gbps > 0))
		return NAN;
	return bound(link_gbps, copy_from_dev, copy_to_dev);
}

/*
 * The article's setting through the same formula, every input named: a
 * DL1-like node, 8 devices on PCIe Gen3 x16 (15.75 GB/s raw per
 * direction, about 80% of it in DMA), 4 x 100 Gb/s EFA for the 8.
 */
void model_print_article(void)
{
	const double link = 4 * 100 / 8.0 / 8, pcie = 15.75 * 0.8;

	printf("# model, the article's setting (assumed, none of it measured here): B_L = 4 x 100 Gb/s EFA / 8 devices = %.2f GB/s per device, B_dh = B_hd = PCIe Gen3 x16 15.75 GB/s x 0.8 = %.1f GB/s: 1 + B_L (1/B_dh + 1/B_hd) = %.2fx; the article measured 1.5-2x at 32 MB and 1.76x at 256 MB\n",
	       link, pcie, bound(link, pcie, pcie));
}
