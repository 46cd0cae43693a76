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
#include <rdma/fi_endpoint.h>

/*
 * What to ask for beyond tagged + RMA, in the order the library tries it
 * (get_info): nice-to-haves dropped in this order when no provider offers
 * them: FI_HMEM (for FI_MR_DMABUF), then FI_DIRECTED_RECV and FI_SOURCE (a
 * receive naming its peer; multi-chunk receives from any peer), then
 * FI_ORDER_SAS.  fi_getinfo refuses hints whose order a provider lacks, so
 * a provider without SAS is asked again for the others.  The first try a
 * provider answers is what the library gets from it.
 */
struct pd_wants {
	bool hmem, directed, source, sas;
};

static const struct pd_wants pd_tries[] = {
	{ true, true, true, true }, { false, true, true, true },
	{ true, false, false, true }, { false, false, false, true },
	{ true, true, true, false }, { false, true, true, false },
	{ true, false, false, false }, { false, false, false, false },
};

#define PD_NR_TRIES (sizeof(pd_tries) / sizeof(pd_tries[0]))

static inline void pd_hints_for(struct fi_info *h, const struct pd_wants *w)
{
	h->ep_attr->type = FI_EP_RDM;
	h->caps = FI_TAGGED | FI_RMA | (w->hmem ? FI_HMEM : 0) |
		  (w->directed ? FI_DIRECTED_RECV : 0) | (w->source ? FI_SOURCE : 0);
	h->mode = FI_CONTEXT | FI_CONTEXT2;
	h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED |
				  FI_MR_PROV_KEY | (w->hmem ? FI_MR_HMEM : 0);
	/* Registration runs outside the fabric lock, concurrently with the
	 * data path. */
	h->domain_attr->threading = FI_THREAD_SAFE;
	/* Chunks of two messages with one tag to one peer must not pass each
	 * other on the wire. */
	if (w->sas) {
		h->tx_attr->msg_order = FI_ORDER_SAS;
		h->rx_attr->msg_order = FI_ORDER_SAS;
	}
}

#endif
