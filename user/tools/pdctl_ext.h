/* SPDX-License-Identifier: MIT */
/*
 * pdctl's device-facing commands (bind, unbind, ps, topo) and what they
 * take from the doctor: its NIC list and its per-pair verdict, so that
 * `pdctl topo` and `pdctl doctor` never disagree about a pair.
 */
#ifndef PDCTL_EXT_H
#define PDCTL_EXT_H

#include <stdbool.h>
#include <stddef.h>

int cmd_bind(int argc, char **argv);
int cmd_unbind(int argc, char **argv);
int cmd_ps(int argc, char **argv);
int cmd_topo(int argc, char **argv);

int pd_parse_bdf(const char *s, char *out, size_t len);

struct pd_nic_ref {
	char name[64];
	bool rdma;		/* class infiniband, else net */
};

struct pd_verdict {
	char verdict[16];	/* dmabuf, mapped, bounce, none, denied, unavailable, unknown */
	char reason[640];
};

/* The doctor's NIC list: device-backed ones, and with all the others too. */
int doctor_nics(bool all, struct pd_nic_ref *out, int max);
/* One NIC by name (infiniband first): 0 or -ENODEV. */
int doctor_find_nic(const char *name, struct pd_nic_ref *out);
/* The doctor's verdict on every devs[i] x nics[j] pair, into out[i * nnic + j]. */
void doctor_verdicts(const int *devs, int ndev, const struct pd_nic_ref *nics, int nnic,
		     struct pd_verdict *out);

#endif /* PDCTL_EXT_H */
