/* SPDX-License-Identifier: MIT */
/*
 * What every fi_getinfo of the library asks for, shared with pdctl's
 * doctor: a provider counts as offering FI_HMEM only where the library
 * would open it (an RDM endpoint, tagged messages and RMA, the modes and
 * threading the library passes; a provider that requires a mode the
 * caller did not set is left out by libfabric).
 */
#ifndef PD_FABRIC_HINTS_H
#define PD_FABRIC_HINTS_H

#include <stdbool.h>

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>

static inline void pd_hints_base(struct fi_info *h, bool hmem)
{
	h->ep_attr->type = FI_EP_RDM;
	h->caps = FI_TAGGED | FI_RMA | (hmem ? FI_HMEM : 0);
	h->mode = FI_CONTEXT | FI_CONTEXT2;
	h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED |
				  FI_MR_PROV_KEY | (hmem ? FI_MR_HMEM : 0);
	/* Registration runs outside the fabric lock, concurrently with the
	 * data path. */
	h->domain_attr->threading = FI_THREAD_SAFE;
}

#endif
