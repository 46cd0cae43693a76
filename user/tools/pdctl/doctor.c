// SPDX-License-Identifier: MIT
/*
 * pdctl doctor: for each pair of a peerdirect device and a NIC, which path
 * the memory would take and why -- dmabuf (the NIC DMAs device memory: an
 * RDMA device accepted a dma-buf MR), mapped (the CPU reads the mapping: tcp
 * over a netdev) or bounce (staged through host memory) -- and what to fix.
 *
 * Checks, each a line with status ok/warn/fail (skip: not checked): the
 * kernel config, the module and its parameters, the device nodes
 * (doctor_host.c), the IOMMU, the PCI path between device and NIC
 * (doctor_pci.c), rdma-core (an ibv_reg_dmabuf_mr of a real export, per
 * RDMA device), libfabric's FI_HMEM providers and libpeerdirect's own
 * choice (pd_mr_path, pd_mr_reason) (doctor_libs.c).  libibverbs,
 * libfabric and libpeerdirect are dlopen()ed, so pdctl needs none of them;
 * the static build for the VMs links static.c instead, which leaves those
 * checks out.  This file runs them in order on one struct doctor and
 * judges the pairs.
 *
 * Roots for tests: PDCTL_SYSFS, PDCTL_DEV (main.c), PDCTL_PROC (/proc),
 * PDCTL_BOOT (/boot); PDCTL_LIBS=none loads no library.
 */
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>
#include <linux/peerdirect.h>

#include "doctor.h"
#include "../tool_env.h"

/* The roots and PDCTL_LIBS; env: PDCTL_PROC and PDCTL_BOOT too. */
static void doctor_init(struct doctor *dr, bool env)
{
	dr->procroot = "/proc";
	dr->bootroot = "/boot";
	if (env && getenv("PDCTL_PROC"))
		dr->procroot = getenv("PDCTL_PROC");
	if (env && getenv("PDCTL_BOOT"))
		dr->bootroot = getenv("PDCTL_BOOT");
	dr->no_libs = getenv("PDCTL_LIBS") && !strcmp(getenv("PDCTL_LIBS"), "none");
	/* Before libfabric is loaded: the library's choice over verbs on rxe
	 * needs the queue sizes the tools use (fi_enable fails otherwise). */
	tool_env_defaults();
}

/* Whether idx can be probed: a device in reset or unplugged would block
 * the test ALLOC (killable only) or fail it, and tell nothing of the NIC. */
static bool dev_live(const struct dev *d, struct pair *p)
{
	char state[32];

	if (attr_str(d->idx, "state", state, sizeof(state)) || !strcmp(state, "live"))
		return true;
	p->verdict = VERDICT_UNKNOWN;
	set_text(p->reason, "not probed: peerdirect%d is %s, not live", d->idx, state);
	set_text(p->fix, "run pdctl doctor again once pdctl info shows the device live");
	return false;
}

static void pair_rdma(struct doctor *dr, const struct dev *d, const struct nic *nic,
		      struct pair *p)
{
	char why[TEXT];

	if (!dev_live(d, p))
		return;
	/* Nothing learned is "unknown" (exit 1), never a verdict. */
	p->verdict = VERDICT_UNKNOWN;
	if (!libs_usable(dr, why)) {
		set_text(p->reason, "ibv_reg_dmabuf_mr not tried (%s)", why);
		set_text(p->fix, "run pdctl doctor (the shared build) where libibverbs1 is "
			 "installed to try the dma-buf MR");
		return;
	}
	libs_pair_rdma(dr, d, nic, p);
}

static void pair_netdev(struct doctor *dr, const struct dev *d, const struct nic *nic,
			struct pair *p)
{
	if (!dev_live(d, p))
		return;
	if (libs_fabric_missing(dr, p))
		return;
	if (!d->features_known) {
		p->verdict = VERDICT_UNKNOWN;
		set_text(p->reason, "peerdirect%d's features could not be read (sysfs features, "
			 "QUERY): whether tcp over %s can send from its CPU mapping is not known",
			 d->idx, nic->name);
		set_text(p->fix, "pdctl info; a module whose version matches pdctl");
		return;
	}
	if (d->features & PEERDIRECT_FEAT_CPU_MMAP) {
		p->verdict = VERDICT_MAPPED;
		set_text(p->reason, "tcp over %s: the provider sends from the CPU mapping of the "
			 "dma-buf (the CPU reads device memory; no host copy)", nic->name);
		return;
	}
	p->verdict = VERDICT_NONE;
	set_text(p->reason, "peerdirect%d has no CPU mapping (feature cpu_mmap): tcp over %s "
		 "can neither send from it nor stage it through host memory, so "
		 "pd_mr_reg_dmabuf fails", d->idx, nic->name);
	set_text(p->fix, "a backend or module version that offers cpu_mmap (pdctl info), or "
		 "an RDMA NIC that takes the device's dma-bufs");
}

/*
 * Bounce copies through the device's CPU mapping: without one, a pair the
 * NIC cannot DMA has no path at all.  Appended to the reason the direct
 * path failed for; its fix stays, being the only way left.
 */
static void bounce_needs_cpu_mmap(const struct dev *d, struct pair *p)
{
	size_t n = strlen(p->reason);

	if (p->verdict != VERDICT_BOUNCE || !d->features_known ||
	    (d->features & PEERDIRECT_FEAT_CPU_MMAP))
		return;
	p->verdict = VERDICT_NONE;
	snprintf(p->reason + n, sizeof(p->reason) - n, "; and peerdirect%d has no CPU mapping "
		 "(feature cpu_mmap) to stage from, so pd_mr_reg_dmabuf fails", d->idx);
}

/* libfabric's FI_HMEM providers: before the pairs, whose verdicts use them. */
static void check_libfabric(struct doctor *dr)
{
	char why[TEXT];

	if (!libs_usable(dr, why)) {
		add_check(dr, "libfabric", "FI_HMEM", STATUS_SKIP, NULL, "not checked (%s)", why);
		return;
	}
	libs_check_fabric(dr);
}

static void check_libpeerdirect(struct doctor *dr, const struct dev *devs, int nr_devs,
				const struct nic *nics, int nr_nics)
{
	char why[TEXT];

	if (!libs_usable(dr, why)) {
		add_check(dr, "libpeerdirect", "path", STATUS_SKIP, NULL, "not checked (%s)", why);
		return;
	}
	libs_check_peerdirect(dr, devs, nr_devs, nics, nr_nics);
}

/* The verdict on one device/NIC pair (doctor's table, pdctl topo's cells). */
static void judge_pair(struct doctor *dr, const struct dev *d, const struct nic *nic, struct pair *p)
{
	memset(p, 0, sizeof(*p));
	p->ibv_errno = -1;
	snprintf(p->device, sizeof(p->device), "peerdirect%d", d->idx);
	memcpy(p->nic, nic->name, sizeof(p->nic));
	p->nic_kind = nic->kind == NIC_RDMA ? "rdma" : "netdev";
	topology(d, nic, p);
	if (d->open_errno) {
		p->verdict = d->open_errno == EACCES || d->open_errno == EPERM ? VERDICT_DENIED :
								      VERDICT_UNAVAILABLE;
		set_text(p->reason, "%s/peerdirect%d cannot be opened: %s", devroot, d->idx,
			 strerror(d->open_errno));
		set_text(p->fix, "see the device_node check");
		return;
	}
	if (nic->kind == NIC_RDMA)
		pair_rdma(dr, d, nic, p);
	else
		pair_netdev(dr, d, nic, p);
	bounce_needs_cpu_mmap(d, p);
}

/* ---- for pdctl topo ----------------------------------------------------------- */

int doctor_nics(bool all, struct pd_nic_ref *out, int max)
{
	struct nic nics[MAX_NICS];
	int n, i, skipped = 0;

	n = add_nics("infiniband", NIC_RDMA, true, nics, 0, &skipped);
	n = add_nics("net", NIC_NETDEV, true, nics, n, &skipped);
	if (all) {
		n = add_nics("infiniband", NIC_RDMA, false, nics, n, &skipped);
		n = add_nics("net", NIC_NETDEV, false, nics, n, &skipped);
	}
	for (i = 0; i < n && i < max; i++) {
		memcpy(out[i].name, nics[i].name, sizeof(out[i].name));
		out[i].rdma = nics[i].kind == NIC_RDMA;
	}
	return i;
}

int doctor_find_nic(const char *name, struct pd_nic_ref *out)
{
	struct nic n;

	if (find_nic(name, &n))
		return -ENODEV;
	memcpy(out->name, n.name, sizeof(out->name));
	out->rdma = n.kind == NIC_RDMA;
	return 0;
}

void doctor_verdicts(const int *idx, int ndev, const struct pd_nic_ref *refs, int nnic,
		     struct pd_verdict *out)
{
	/* the doctor's checks are not topo's output: only its pairs */
	static struct doctor dr;
	static struct dev devs[MAX_DEVS];
	struct pair p;
	struct nic nic;
	int i, j;

	doctor_init(&dr, false);
	for (i = 0; i < ndev && i < MAX_DEVS; i++) {
		devs[i].idx = idx[i];
		check_node(&dr, &devs[i]);
		read_features(&devs[i]);
	}
	check_libfabric(&dr);
	for (i = 0; i < ndev && i < MAX_DEVS; i++)
		for (j = 0; j < nnic; j++) {
			memcpy(nic.name, refs[j].name, sizeof(nic.name));
			nic.kind = refs[j].rdma ? NIC_RDMA : NIC_NETDEV;
			judge_pair(&dr, &devs[i], &nic, &p);
			out[i * nnic + j].verdict = p.verdict;
			snprintf(out[i * nnic + j].reason, sizeof(out[0].reason), "%s", p.reason);
		}
	for (i = 0; i < ndev && i < MAX_DEVS; i++)
		if (devs[i].fd >= 0)
			close(devs[i].fd);
	libs_close(&dr);
}

/* What the command line asks for: the NICs named, --allow-sim. */
struct doctor_args {
	struct nic nics[MAX_NICS];
	int nr_nics;
	bool want_nic, allow_sim;
};

/* -1 to go on, else the exit code (the reason said). */
static int parse_args(int argc, char **argv, struct doctor_args *a)
{
	static const struct option opts[] = {
		{ "nic", required_argument, NULL, 'n' },
		{ "allow-sim", no_argument, NULL, 's' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+", opts, NULL)) != -1) {
		if (c == 's') {
			a->allow_sim = true;
			continue;
		}
		if (c != 'n') {
			fprintf(stderr, "pdctl: doctor: bad option (doctor [--allow-sim] "
				"[--nic NAME]...)\n");
			return EX_USAGE;
		}
		a->want_nic = true;
		if (a->nr_nics >= MAX_NICS) {
			fprintf(stderr, "pdctl: doctor: at most %d --nic\n", MAX_NICS);
			return EX_USAGE;
		}
		if (find_nic(optarg, &a->nics[a->nr_nics])) {
			fprintf(stderr, "pdctl: doctor: no NIC %s in %s/class/infiniband or "
				"%s/class/net\n", optarg, sysroot, sysroot);
			return EX_NODEV;
		}
		a->nr_nics++;
	}
	if (optind < argc) {
		fprintf(stderr, "pdctl: doctor: unexpected argument '%s'\n", argv[optind]);
		return EX_USAGE;
	}
	return -1;
}

/*
 * Each device (-d: the one): its node, features, uapi and importers, into
 * devs; *real when one is not simulated.  ret: the exit code so far.
 */
static int check_devices(struct doctor *dr, struct dev *devs, int *nr_devs, bool *real,
			 int ret)
{
	int idx[MAX_DEVS], n, i;

	n = list_devices(idx, MAX_DEVS);
	for (i = 0; i < n; i++) {
		struct dev *d = &devs[*nr_devs];

		if (want_dev >= 0 && idx[i] != want_dev)
			continue;
		d->idx = idx[i];
		ret = worse(ret, check_node(dr, d));
		read_features(d);
		check_abi(dr, d);
		check_revoke(dr, d);
		*real |= !dev_simulated(d);
		(*nr_devs)++;
	}
	return ret;
}

/* A node with nothing to accelerate must not pass; nor one without devices. */
static int check_any_device(struct doctor *dr, int nr_devs, bool real, bool allow_sim, int ret)
{
	if (nr_devs && !real && allow_sim)
		add_check(dr, "device", "simulated", STATUS_WARN, NULL, "every device is simulated "
			  "(RAM standing in for device memory): allowed by --allow-sim");
	else if (nr_devs && !real) {
		add_check(dr, "device", "simulated", STATUS_FAIL, "bind the accelerator (pdctl bind "
			  "ADDRESS; /etc/peerdirect/devices.conf), or --allow-sim for a test node",
			  "every device is simulated (sim_devices): this node has no device "
			  "memory to accelerate");
		ret = worse(ret, EX_SIMONLY);
	}
	if (!nr_devs && !ret) {
		if (want_dev >= 0)
			add_check(dr, "device", "peerdirect", STATUS_FAIL, "pdctl list shows the devices",
				  "no device peerdirect%d", want_dev);
		else
			add_check(dr, "device", "peerdirect", STATUS_FAIL, "the module's parameters "
				  "(sim_devices, or a bound PCI device)",
				  "the module is loaded but has no devices");
		ret = EX_NODEV;
	}
	return ret;
}

/* Every device x NIC pair into the report; the exit code they make. */
static int judge_pairs(struct doctor *dr, const struct dev *devs, int nr_devs,
		       const struct nic *nics, int nr_nics, int ret)
{
	bool no_path = false;
	int i, j;

	for (i = 0; i < nr_devs; i++)
		for (j = 0; j < nr_nics && dr->nr_pairs < MAX_PAIRS; j++) {
			struct pair *p = &dr->pairs[dr->nr_pairs++];

			judge_pair(dr, &devs[i], &nics[j], p);
			if (devs[i].open_errno)
				continue;
			if (p->verdict == VERDICT_BOUNCE)
				ret = worse(ret, EX_BOUNCE);
			else if (p->verdict == VERDICT_UNKNOWN)
				ret = worse(ret, EX_FAIL);
			else if (p->verdict == VERDICT_NONE)
				no_path = true;
		}
	/* A pair with no path fails a training run: a bounce elsewhere, which
	 * only slows one, must not hide it (3 and 4 still win). */
	if (no_path && (ret == EX_OK || ret == EX_BOUNCE))
		ret = EX_FAIL;
	return ret;
}

int cmd_doctor(int argc, char **argv)
{
	static struct doctor dr;
	static struct doctor_args a;
	int skipped_nics = 0, nr_devs = 0, i, ret;
	struct dev devs[MAX_DEVS];
	bool real = false;
	struct utsname u;

	doctor_init(&dr, true);
	ret = parse_args(argc, argv, &a);
	if (ret >= 0)
		return ret;
	if (!a.want_nic) {
		/* Device-backed NICs first: on a node with hundreds of veths
		 * the real NIC must not be the one left out. */
		a.nr_nics = add_nics("infiniband", NIC_RDMA, true, a.nics, 0, &skipped_nics);
		a.nr_nics = add_nics("net", NIC_NETDEV, true, a.nics, a.nr_nics, &skipped_nics);
		a.nr_nics = add_nics("infiniband", NIC_RDMA, false, a.nics, a.nr_nics, &skipped_nics);
		a.nr_nics = add_nics("net", NIC_NETDEV, false, a.nics, a.nr_nics, &skipped_nics);
	}
	if (uname(&u))
		snprintf(u.release, sizeof(u.release), "unknown");

	check_kernel_config(&dr, u.release);
	ret = check_module(&dr);
	ret = check_devices(&dr, devs, &nr_devs, &real, ret);
	ret = check_any_device(&dr, nr_devs, real, a.allow_sim, ret);
	check_iommu(&dr, devs, nr_devs);
	if (skipped_nics)
		add_check(&dr, "nic", "more", STATUS_WARN, "name the NIC to check with --nic NAME",
			  "%d NICs not checked: at most %d (those backed by a device first)",
			  skipped_nics, MAX_NICS);
	if (!a.nr_nics)
		add_check(&dr, "nic", "none", STATUS_WARN, "--nic NAME, or load the NIC's driver",
			  "no RDMA device in %s/class/infiniband and no netdev but lo in "
			  "%s/class/net", sysroot, sysroot);
	/* before the pairs: an RDMA NIC that takes dma-bufs is still bounce
	 * when libfabric does not */
	check_libfabric(&dr);
	ret = judge_pairs(&dr, devs, nr_devs, a.nics, a.nr_nics, ret);
	check_libpeerdirect(&dr, devs, nr_devs, a.nics, a.nr_nics);
	/* A failed check is exit 1 at least, whatever the pairs said. */
	for (i = 0; i < dr.nr_checks; i++)
		if (dr.checks[i].status == STATUS_FAIL)
			ret = worse(ret, EX_FAIL);
	for (i = 0; i < nr_devs; i++)
		if (devs[i].fd >= 0)
			close(devs[i].fd);
	libs_close(&dr);
	if (json)
		doctor_print_json(&dr, u.release, ret);
	else
		doctor_print_human(&dr, ret);
	return ret;
}
