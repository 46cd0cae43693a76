// SPDX-License-Identifier: MIT
/*
 * pdctl list, info and version: each device's sysfs attributes, where it
 * sits (PCI function, NUMA node, local CPUs), and the versions of pdctl,
 * the uapi and the module.
 */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/peerdirect.h>

#include "pdctl.h"
#include "json.h"
#include "../tool_device.h"

#define err pdctl_err

static const struct {
	unsigned long long bit;
	const char *name;
} feats[] = {
	{ PEERDIRECT_FEAT_EXPORT, "export" },
	{ PEERDIRECT_FEAT_PIN, "pin" },
	{ PEERDIRECT_FEAT_MOVE_NOTIFY, "move_notify" },
	{ PEERDIRECT_FEAT_CPU_MMAP, "cpu_mmap" },
	{ PEERDIRECT_FEAT_EVENTS, "events" },
	{ PEERDIRECT_FEAT_PAGELESS, "pageless" },
	{ PEERDIRECT_FEAT_P2P_REQUIRED, "p2p_required" },
	{ PEERDIRECT_FEAT_P2PDMA, "p2pdma" },
	{ PEERDIRECT_FEAT_REVOCABLE_ONLY, "revocable_only" },
	{ PEERDIRECT_FEAT_SUBSCRIBE, "subscribe" },
	{ PEERDIRECT_FEAT_LIST, "list" },
};

/* Where a device sits: PCI function, NUMA node, local CPUs ("" each for a
 * simulated device or one whose parent is not PCI). */
struct place {
	char pci[13], numa[16], cpus[256];
	bool sim;
};

static void dev_place(int idx, struct place *pl)
{
	memset(pl, 0, sizeof(*pl));
	pl->sim = tool_dev_simulated(sysroot, idx);
	if (tool_dev_pci(sysroot, idx, pl->pci))
		return;
	tool_dev_attr(sysroot, idx, "device/numa_node", pl->numa, sizeof(pl->numa));
	tool_dev_attr(sysroot, idx, "device/local_cpulist", pl->cpus, sizeof(pl->cpus));
	if (!json) {
		term_safe(pl->numa);
		term_safe(pl->cpus);
	}
}

static void json_place(int idx)
{
	struct place pl;
	long long numa;
	char *end;

	dev_place(idx, &pl);
	jbool("simulated", pl.sim);
	jstr("pci", pl.pci[0] ? pl.pci : NULL);
	numa = strtoll(pl.numa, &end, 10);
	if (pl.numa[0] && !*end)
		ji64("numa_node", numa);
	else
		jstr("numa_node", NULL);
	jstr("local_cpus", pl.cpus[0] ? pl.cpus : NULL);
}

static void json_device(int idx, bool full)
{
	unsigned long long f = attr_u64(idx, "features");
	unsigned int i;
	char s[64];

	jopen_device(idx);
	ji64("index", idx);
	jstr("backend", attr_str(idx, "backend", s, sizeof(s)) ? NULL : s);
	jstr("abi_version", attr_str(idx, "abi_version", s, sizeof(s)) ? NULL : s);
	jstr("state", attr_str(idx, "state", s, sizeof(s)) ? NULL : s);
	jattr("mem_size", idx, "mem_size");
	jattr("mem_free", idx, "mem_free");
	jattr("page_size", idx, "page_size");
	jattr("quota", idx, "quota");
	jattr("quarantined", idx, "quarantined");
	jattr("nr_allocs", idx, "nr_allocs");
	jattr("nr_exports", idx, "nr_exports");
	jattr("exports_total", idx, "exports_total");
	jattr("importer_mappings", idx, "importer_mappings");
	jattr("features", idx, "features");
	jopen("feature_names", '[');
	for (i = 0; i < sizeof(feats) / sizeof(feats[0]); i++)
		if (f & feats[i].bit) {
			jsep();
			jstr_raw(feats[i].name);
		}
	jclose(']');
	jbool("p2pdma", attr_u64(idx, "p2pdma"));
	jopen("revoked", '{');
	for (i = 0; i < 5; i++)
		jattr(revoked_attrs[i] + 8, idx, revoked_attrs[i]);
	jclose('}');
	jattr("revoke_timeouts", idx, "revoke_timeouts");
	jattr("resets", idx, "resets");
	if (full) {
		jattr("max_exports", idx, "max_exports");
		jattr("max_events", idx, "max_events");
		dev_parent(idx, s, sizeof(s));
		jstr("parent", s[0] ? s : NULL);
	}
	json_place(idx);
	jclose('}');
}

void human_size(unsigned long long v, char *buf, size_t len)
{
	if (v >= (1ULL << 30) && !(v % (1ULL << 30)))
		snprintf(buf, len, "%lluG", v >> 30);
	else if (v >= (1ULL << 20) && !(v % (1ULL << 20)))
		snprintf(buf, len, "%lluM", v >> 20);
	else if (v >= (1ULL << 10) && !(v % (1ULL << 10)))
		snprintf(buf, len, "%lluK", v >> 10);
	else if (v >= (1ULL << 20))
		snprintf(buf, len, "%.1fM", v / 1048576.0);
	else
		snprintf(buf, len, "%llu", v);
}

/* {"devices": [...]} for list (summary) and info (every attribute): 0. */
static int json_devices(const int *devs, int n, bool full)
{
	int i;

	jopen(NULL, '{');
	jopen("devices", '[');
	for (i = 0; i < n; i++)
		json_device(devs[i], full);
	jclose(']');
	jclose('}');
	putchar('\n');
	return 0;
}

int cmd_list(int argc, char **argv)
{
	int devs[MAX_DEVS], n, i, ret;

	(void)argv;
	if (no_args("list", argc))
		return EX_USAGE;
	ret = select_devices(devs, &n);
	if (ret)
		return ret;
	if (json)
		return json_devices(devs, n, false);
	printf("%-12s %-8s %-9s %8s %8s %6s %8s %6s %7s %-6s %-12s %4s %s\n", "DEVICE", "BACKEND",
	       "STATE", "MEMORY", "FREE", "PAGE", "QUOTA", "ALLOCS", "EXPORTS", "P2PDMA", "PCI",
	       "NUMA", "CPUS");
	for (i = 0; i < n; i++) {
		char be[32], st[32], m[24], fr[24], pg[24], q[24], name[32];
		struct place pl;

		snprintf(name, sizeof(name), "peerdirect%d", devs[i]);
		if (attr_str(devs[i], "backend", be, sizeof(be)))
			strcpy(be, "?");
		if (attr_str(devs[i], "state", st, sizeof(st)))
			strcpy(st, "?");
		human_size(attr_u64(devs[i], "mem_size"), m, sizeof(m));
		human_size(attr_u64(devs[i], "mem_free"), fr, sizeof(fr));
		human_size(attr_u64(devs[i], "page_size"), pg, sizeof(pg));
		human_size(attr_u64(devs[i], "quota"), q, sizeof(q));
		dev_place(devs[i], &pl);
		printf("%-12s %-8s %-9s %8s %8s %6s %8s %6llu %7llu %-6s %-12s %4s %s%s\n", name, be,
		       st, m, fr, pg, q, attr_u64(devs[i], "nr_allocs"),
		       attr_u64(devs[i], "nr_exports"), attr_u64(devs[i], "p2pdma") ? "yes" : "no",
		       pl.pci[0] ? pl.pci : "-", pl.numa[0] ? pl.numa : "-",
		       pl.cpus[0] ? pl.cpus : "-", pl.sim ? "  (simulated: not an accelerator)" : "");
	}
	return 0;
}

int cmd_info(int argc, char **argv)
{
	static const char *const plain[] = {
		"backend", "abi_version", "state", "mem_size", "mem_free", "page_size",
		"quota", "quarantined", "max_exports", "max_events", "nr_allocs",
		"nr_exports", "exports_total", "importer_mappings", "p2pdma",
		"revoke_timeouts", "resets",
	};
	int devs[MAX_DEVS], n, i, ret;
	unsigned int k;

	if (argc > 2) {
		err("info takes at most one device index");
		return EX_USAGE;
	}
	if (argc == 2) {
		char why[PATH_MAX + 128];

		ret = tool_dev_resolve(sysroot, argv[1], &want_dev, why, sizeof(why));
		if (ret) {
			err("info: %s", why);
			return ret == -EINVAL ? EX_USAGE : EX_NODEV;
		}
	}
	ret = select_devices(devs, &n);
	if (ret)
		return ret;
	if (json)
		return json_devices(devs, n, true);
	for (i = 0; i < n; i++) {
		unsigned long long f = attr_u64(devs[i], "features");
		char s[64];

		struct place pl;

		dev_place(devs[i], &pl);
		printf("%speerdirect%d%s\n", i ? "\n" : "", devs[i],
		       pl.sim ? " (simulated: RAM standing in for device memory)" : "");
		dev_parent(devs[i], s, sizeof(s));
		printf("  %-18s %s\n", "parent", s[0] ? s : "-");
		printf("  %-18s %s\n", "pci", pl.pci[0] ? pl.pci : "-");
		printf("  %-18s %s\n", "numa_node", pl.numa[0] ? pl.numa : "-");
		printf("  %-18s %s\n", "local_cpus", pl.cpus[0] ? pl.cpus : "-");
		for (k = 0; k < sizeof(plain) / sizeof(plain[0]); k++) {
			if (attr_str(devs[i], plain[k], s, sizeof(s)))
				strcpy(s, "?");
			printf("  %-18s %s\n", plain[k], s);
		}
		printf("  %-18s 0x%llx", "features", f);
		for (k = 0; k < sizeof(feats) / sizeof(feats[0]); k++)
			if (f & feats[k].bit)
				printf(" %s", feats[k].name);
		putchar('\n');
		for (k = 0; k < 5; k++)
			printf("  %-18s %llu\n", revoked_attrs[k], attr_u64(devs[i], revoked_attrs[k]));
	}
	return 0;
}

int cmd_version(int argc, char **argv)
{
	int devs[MAX_DEVS], n, i;
	char mod[64], path[256], s[32];

	(void)argv;
	if (no_args("version", argc))
		return EX_USAGE;
	snprintf(path, sizeof(path), "%s/module/peerdirect/version", sysroot);
	if (read_file(path, mod, sizeof(mod)))
		mod[0] = 0;
	n = list_devices(devs, MAX_DEVS);
	if (json) {
		char uapi[16];

		snprintf(uapi, sizeof(uapi), "%d.%d", PEERDIRECT_ABI_MAJOR, PEERDIRECT_ABI_MINOR);
		jopen(NULL, '{');
		jstr("pdctl", PD_VERSION);
		jstr("uapi", uapi);
		jstr("module", mod[0] ? mod : NULL);
		jopen("devices", '[');
		for (i = 0; i < n; i++) {
			jopen_device(devs[i]);
			jstr("abi_version", attr_str(devs[i], "abi_version", s, sizeof(s)) ? NULL : s);
			jclose('}');
		}
		jclose(']');
		jclose('}');
		putchar('\n');
		return 0;
	}
	printf("pdctl %s (uapi %d.%d)\n", PD_VERSION, PEERDIRECT_ABI_MAJOR, PEERDIRECT_ABI_MINOR);
	printf("module %s\n", mod[0] ? mod : module_loaded() ? "loaded, version unknown" :
								"not loaded");
	for (i = 0; i < n; i++)
		printf("peerdirect%d uapi %s\n", devs[i],
		       attr_str(devs[i], "abi_version", s, sizeof(s)) ? "?" : s);
	return 0;
}
