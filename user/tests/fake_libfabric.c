// SPDX-License-Identifier: MIT
/*
 * A libfabric.so.1 for test_pdctl: one provider, "fakeprov", whose MSG
 * endpoints offer FI_HMEM and whose RDM endpoints do not (as a core
 * provider may, with the utility provider above it dropping FI_HMEM), unless
 * FAKE_FI_HMEM_RDM=1, or =alone: only without FI_DIRECTED_RECV and
 * FI_SOURCE.  Like psm2 or opx it requires FI_CONTEXT, and like
 * libfabric it answers no hints that leave a required mode unset.  Only
 * what pdctl's doctor calls: fi_version, fi_dupinfo, fi_getinfo,
 * fi_freeinfo.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/fabric.h>
#include <rdma/fi_errno.h>

uint32_t fi_version(void)
{
	return FI_VERSION(1, 21);
}

void fi_freeinfo(struct fi_info *info)
{
	struct fi_info *next;

	for (; info; info = next) {
		next = info->next;
		if (info->fabric_attr)
			free(info->fabric_attr->prov_name);
		free(info->fabric_attr);
		free(info->domain_attr);
		free(info->ep_attr);
		free(info->tx_attr);
		free(info->rx_attr);
		free(info);
	}
}

struct fi_info *fi_dupinfo(const struct fi_info *src)
{
	struct fi_info *i = calloc(1, sizeof(*i));

	if (!i)
		return NULL;
	i->fabric_attr = calloc(1, sizeof(*i->fabric_attr));
	i->domain_attr = calloc(1, sizeof(*i->domain_attr));
	i->ep_attr = calloc(1, sizeof(*i->ep_attr));
	i->tx_attr = calloc(1, sizeof(*i->tx_attr));
	i->rx_attr = calloc(1, sizeof(*i->rx_attr));
	if (!i->fabric_attr || !i->domain_attr || !i->ep_attr || !i->tx_attr ||
	    !i->rx_attr) {
		fi_freeinfo(i);
		return NULL;
	}
	if (src) {
		i->caps = src->caps;
		i->mode = src->mode;
		if (src->ep_attr)
			i->ep_attr->type = src->ep_attr->type;
	}
	return i;
}

int fi_getinfo(uint32_t version, const char *node, const char *service,
	       uint64_t flags, const struct fi_info *hints, struct fi_info **info)
{
	const char *rdm_env = getenv("FAKE_FI_HMEM_RDM");
	bool rdm_hmem = rdm_env && (!strcmp(rdm_env, "1") || !strcmp(rdm_env, "alone"));
	bool alone = rdm_env && !strcmp(rdm_env, "alone");
	enum fi_ep_type type = hints && hints->ep_attr ? hints->ep_attr->type :
			       FI_EP_UNSPEC;
	struct fi_info *i;

	(void)version;
	(void)node;
	(void)service;
	(void)flags;
	if (hints && (hints->caps & FI_HMEM) && type == FI_EP_RDM &&
	    (!rdm_hmem || (alone && (hints->caps & (FI_DIRECTED_RECV | FI_SOURCE)))))
		return -FI_ENODATA;
	if (hints && !(hints->mode & FI_CONTEXT))
		return -FI_ENODATA;
	i = fi_dupinfo(NULL);
	if (!i)
		return -FI_ENOMEM;
	i->caps = FI_MSG | FI_TAGGED | FI_RMA | FI_HMEM;
	i->mode = FI_CONTEXT;
	i->ep_attr->type = type == FI_EP_RDM ? FI_EP_RDM : FI_EP_MSG;
	i->fabric_attr->prov_name = strdup("fakeprov");
	if (!i->fabric_attr->prov_name) {
		fi_freeinfo(i);
		return -FI_ENOMEM;
	}
	*info = i;
	return 0;
}
