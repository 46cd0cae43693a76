// SPDX-License-Identifier: MIT
/*
 * pdctl topo: the device x NIC matrix, as nvidia-smi topo -m draws GPUs
 * and NICs.  Each cell: the PCIe relation (pci_relation.h), the NUMA affinity
 * (same node, another, unknown) and the doctor's verdict for that pair
 * (doctor_verdicts: the same code as `pdctl doctor`'s table).
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pdctl.h"
#include "json.h"
#include "doctor.h"
#include "pci_relation.h"

#define MAX_TOPO_NICS 32

struct end {
	char name[64];
	char path[PATH_MAX];	/* sysfs path of its PCI function, "" if none */
	char addr[16];
	int numa;
};

/* The PCI function at or above link's target (a NIC may hang below it). */
static void locate(const char *link, struct end *e)
{
	char buf[PATH_MAX + 16], num[16];

	e->path[0] = e->addr[0] = 0;
	e->numa = -1;
	if (pd_pci_function_path(link, e->path, sizeof(e->path))) {
		e->path[0] = 0;
		return;
	}
	snprintf(e->addr, sizeof(e->addr), "%s", strrchr(e->path, '/') + 1);
	snprintf(buf, sizeof(buf), "%s/numa_node", e->path);
	if (!read_file(buf, num, sizeof(num)))
		e->numa = atoi(num);
}

static const char *affinity(const struct end *a, const struct end *b)
{
	if (a->numa < 0 || b->numa < 0)
		return "unknown";
	return a->numa == b->numa ? "same" : "cross";
}

static const char *aff_mark(const char *aff)
{
	return !strcmp(aff, "same") ? "=" : !strcmp(aff, "cross") ? "x" : "?";
}

static void topo_usage(void)
{
	pdctl_err("usage: topo [--all] [--nic NAME]... [--json]");
}

static int err_json(int code, const char *msg, const char *arg)
{
	char m[256];

	snprintf(m, sizeof(m), msg, arg);
	pdctl_err("topo: %s", m);
	return code;
}

static void print_json(struct end *devs, int nd, struct end *nics, struct pd_nic_ref *refs,
		       int nn, struct pd_verdict *v)
{
	int i, j;

	jopen(NULL, '{');
	jopen("devices", '[');
	for (i = 0; i < nd; i++) {
		jopen(NULL, '{');
		jstr("name", devs[i].name);
		jstr("pci", devs[i].addr[0] ? devs[i].addr : NULL);
		ji64("numa_node", devs[i].numa);
		jclose('}');
	}
	jclose(']');
	jopen("nics", '[');
	for (j = 0; j < nn; j++) {
		jopen(NULL, '{');
		jstr("name", nics[j].name);
		jstr("kind", refs[j].rdma ? "rdma" : "netdev");
		jstr("pci", nics[j].addr[0] ? nics[j].addr : NULL);
		ji64("numa_node", nics[j].numa);
		jclose('}');
	}
	jclose(']');
	jopen("pairs", '[');
	for (i = 0; i < nd; i++)
		for (j = 0; j < nn; j++) {
			const char *rel = devs[i].path[0] && nics[j].path[0] ?
				pd_pci_relation(devs[i].path, nics[j].path, devs[i].numa,
						nics[j].numa) : NULL;

			jopen(NULL, '{');
			jstr("device", devs[i].name);
			jstr("nic", nics[j].name);
			jstr("relation", rel);
			jstr("numa_affinity", affinity(&devs[i], &nics[j]));
			jstr("verdict", verdict_name(v[i * nn + j].verdict));
			jstr("reason", v[i * nn + j].reason);
			jclose('}');
		}
	jclose(']');
	jclose('}');
	putchar('\n');
}

static void print_matrix(struct end *devs, int nd, struct end *nics, int nn,
			 struct pd_verdict *v)
{
	int i, j;

	printf("%-14s", "");
	for (j = 0; j < nn; j++)
		printf(" %-18.18s", nics[j].name);
	printf(" %-5s %s\n", "NUMA", "PCI");
	for (i = 0; i < nd; i++) {
		printf("%-14s", devs[i].name);
		for (j = 0; j < nn; j++) {
			const char *rel = devs[i].path[0] && nics[j].path[0] ?
				pd_pci_relation(devs[i].path, nics[j].path, devs[i].numa,
						nics[j].numa) : NULL;
			char cell[48];

			snprintf(cell, sizeof(cell), "%s %s %s", rel ? rel : "-",
				 aff_mark(affinity(&devs[i], &nics[j])),
				 verdict_name(v[i * nn + j].verdict));
			printf(" %-18s", cell);
		}
		if (devs[i].numa >= 0)
			printf(" %-5d %s\n", devs[i].numa, devs[i].addr[0] ? devs[i].addr : "-");
		else
			printf(" %-5s %s\n", "-", devs[i].addr[0] ? devs[i].addr : "-");
	}
	printf("\nNIC NUMA:");
	for (j = 0; j < nn; j++)
		if (nics[j].numa >= 0)
			printf(" %s=%d", nics[j].name, nics[j].numa);
		else
			printf(" %s=-", nics[j].name);
	printf("\n\nLegend: RELATION NUMA VERDICT\n"
	       "  X    the same PCI function\n"
	       "  PIX  at most one PCIe bridge or switch between them\n"
	       "  PXB  several PCIe bridges, not the host bridge\n"
	       "  PHB  through a PCIe host bridge (the root complex)\n"
	       "  NODE between host bridges of one NUMA node\n"
	       "  SYS  between NUMA nodes (the SMP interconnect)\n"
	       "  -    not both on PCI (a simulated device, rxe, veth)\n"
	       "  NUMA: = same node, x different nodes, ? unknown\n"
	       "  VERDICT: pdctl doctor's path for the pair (dmabuf, mapped, bounce, none,\n"
	       "           denied, unavailable, unknown); pdctl doctor says why\n");
}

int cmd_topo(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "nic", required_argument, NULL, 'n' },
		{ "all", no_argument, NULL, 'a' },
		{ "json", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 },
	};
	static struct end devs[MAX_DEVS], nics[MAX_TOPO_NICS];
	static struct pd_nic_ref refs[MAX_TOPO_NICS];
	struct pd_verdict *v;
	char link[PATH_MAX];
	int idx[MAX_DEVS], sel[MAX_DEVS], n, nd = 0, nn = 0, i, c;
	bool all = false, named = false;

	optind = 0;	/* glibc: re-initialize, so options may follow operands */
	opterr = 0;
	while ((c = getopt_long(argc, argv, "aj", opts, NULL)) != -1) {
		switch (c) {
		case 'a':
			all = true;
			break;
		case 'j':
			json = true;
			break;
		case 'n':
			named = true;
			if (!optarg[0] || nn >= MAX_TOPO_NICS) {
				topo_usage();
				return EX_USAGE;
			}
			if (doctor_find_nic(optarg, &refs[nn]))
				return err_json(EX_NODEV, "no NIC %s in class/infiniband or "
						"class/net", optarg);
			nn++;
			break;
		default:
			topo_usage();
			return EX_USAGE;
		}
	}
	if (optind < argc) {
		topo_usage();
		return EX_USAGE;
	}
	if (!module_loaded())
		return err_json(EX_NODEV, "%s", "the peerdirect module is not loaded "
				"(modprobe peerdirect)");
	n = list_devices(idx, MAX_DEVS);
	for (i = 0; i < n; i++) {
		if (want_dev >= 0 && idx[i] != want_dev)
			continue;
		sel[nd] = idx[i];
		snprintf(devs[nd].name, sizeof(devs[nd].name), "peerdirect%d", idx[i]);
		snprintf(link, sizeof(link), "%s/class/misc/peerdirect%d/device", sysroot, idx[i]);
		locate(link, &devs[nd]);
		nd++;
	}
	if (!nd)
		return err_json(EX_NODEV, "%s", "no peerdirect device (pdctl list)");
	if (!named)
		nn = doctor_nics(all, refs, MAX_TOPO_NICS);
	for (i = 0; i < nn; i++) {
		memcpy(nics[i].name, refs[i].name, sizeof(nics[i].name));
		snprintf(link, sizeof(link), "%s/class/%s/%s/device", sysroot,
			 refs[i].rdma ? "infiniband" : "net", refs[i].name);
		locate(link, &nics[i]);
	}
	v = calloc((size_t)nd * (nn ? nn : 1), sizeof(*v));
	if (!v)
		return err_json(EX_FAIL, "%s", "out of memory");
	doctor_verdicts(sel, nd, refs, nn, v);
	if (json)
		print_json(devs, nd, nics, refs, nn, v);
	else
		print_matrix(devs, nd, nics, nn, v);
	if (!nn && !json)
		printf("\nno NIC with a PCI function (--all adds rxe, veth and the other "
		       "virtual ones; --nic NAME names one)\n");
	free(v);
	return 0;
}
