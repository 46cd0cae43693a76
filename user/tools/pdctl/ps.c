// SPDX-License-Identifier: MIT
/*
 * pdctl ps: which processes hold device memory, with bytes per process and
 * device, as nvidia-smi's process list shows GPU memory.
 *
 * The rows come from a source: the LIST of allocations (uapi 2.2, feature
 * bit PEERDIRECT_FEAT_LIST_ALLOCS), which shows memory nobody exported;
 * on an older module the LIST of exports (2.1), which sees only exported
 * allocations.  The rest of the device's used memory (mem_size - mem_free:
 * freed memory still quarantined, or memory never exported) is a row of
 * its own, "not attributed", and the output says which source was used.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>
#include <linux/peerdirect.h>

#include "pdctl.h"
#include "json.h"

struct ps_row {
	int dev, tgid;
	unsigned int uid, allocs, exports;
	unsigned long long bytes, exported;
	/* exports source: each allocation's bytes are the end of its furthest
	 * export (offset + length), the most that is known of its size */
	unsigned long long handles[64], ends[64];
};

struct ps_table {
	struct ps_row *rows;
	size_t n, cap;
};

static struct ps_row *row_for(struct ps_table *t, int dev, int tgid, unsigned int uid)
{
	struct ps_row *r;
	size_t i;

	/* tgid 0 (outside the caller's pid namespace): one row per uid */
	for (i = 0; i < t->n; i++)
		if (t->rows[i].dev == dev && t->rows[i].tgid == tgid && t->rows[i].uid == uid)
			return &t->rows[i];
	if (t->n == t->cap) {
		size_t cap = t->cap ? 2 * t->cap : 32;
		struct ps_row *nr = realloc(t->rows, cap * sizeof(*nr));

		if (!nr)
			return NULL;
		t->rows = nr;
		t->cap = cap;
	}
	r = &t->rows[t->n++];
	memset(r, 0, sizeof(*r));
	r->dev = dev;
	r->tgid = tgid;
	r->uid = uid;
	return r;
}

/*
 * LIST of exports, or of allocations (uapi 2.2) with PEERDIRECT_LIST_ALLOCATIONS,
 * grown until it fits: 0 or -errno.  *out is an array of elem-byte records.
 */
static int list_grown(int fd, uint32_t flags, size_t elem, void **out, uint32_t *nr)
{
	bool allocs = flags & PEERDIRECT_LIST_ALLOCATIONS;
	uint32_t cap = 64, total;
	int tries;

	*out = NULL;
	for (tries = 0; tries < 8; tries++) {
		struct peerdirect_list l = {
			.argsz = sizeof(l), .flags = flags,
			.export_size = sizeof(struct peerdirect_export_info),
			.allocation_size = allocs ? (uint32_t)elem : 0,
		};

		free(*out);
		*out = calloc(cap, elem);
		if (!*out)
			return -ENOMEM;
		if (allocs) {
			l.allocations = (uintptr_t)*out;
			l.nr_allocations = cap;
		} else {
			l.exports = (uintptr_t)*out;
			l.nr_exports = cap;
		}
		if (ioctl(fd, PEERDIRECT_IOCTL_LIST, &l))
			return -errno;
		*nr = allocs ? l.nr_allocations : l.nr_exports;
		total = allocs ? l.total_allocations : l.total_exports;
		if (total <= cap || cap >= PEERDIRECT_LIST_MAX)
			return 0;
		cap = total + 16 > PEERDIRECT_LIST_MAX ? PEERDIRECT_LIST_MAX : total + 16;
	}
	return 0;
}

/* Exports source: bytes are the exported ranges, once per allocation. */
static int from_exports(int fd, int dev, struct ps_table *t)
{
	void *buf;
	uint32_t n = 0, k;
	unsigned int h;
	int ret = list_grown(fd, 0, sizeof(struct peerdirect_export_info), &buf, &n);
	struct peerdirect_export_info *e = buf;

	for (k = 0; !ret && k < n; k++) {
		struct ps_row *r;

		if (e[k].flags & PEERDIRECT_EXPORT_INFO_REVOKED)
			continue;
		r = row_for(t, dev, e[k].tgid, e[k].uid);
		if (!r) {
			ret = -ENOMEM;
			break;
		}
		r->exports++;
		r->exported += e[k].length;
		for (h = 0; h < r->allocs && h < 64; h++)
			if (r->handles[h] == e[k].handle)
				break;
		if (h == 64) {		/* too many to tell apart: count each */
			r->allocs++;
			r->bytes += e[k].length;
			continue;
		}
		if (h == r->allocs) {
			r->handles[h] = e[k].handle;
			r->ends[h] = 0;
			r->allocs++;
		}
		if (e[k].offset + e[k].length > r->ends[h]) {
			r->bytes += e[k].offset + e[k].length - r->ends[h];
			r->ends[h] = e[k].offset + e[k].length;
		}
	}
	free(e);
	return ret;
}

/*
 * Allocations source: every allocation with its size and owner, exported
 * or not.  Freed ones (quarantined until importers let go) belong to no
 * process any more: they stay in the device's "not attributed" row.
 */
static int from_allocs(int fd, int dev, struct ps_table *t)
{
	void *buf;
	uint32_t n = 0, k;
	int ret = list_grown(fd, PEERDIRECT_LIST_ALLOCATIONS, sizeof(struct peerdirect_alloc_info),
			     &buf, &n);
	struct peerdirect_alloc_info *a = buf;

	for (k = 0; !ret && k < n; k++) {
		struct ps_row *r;

		if (a[k].flags & PEERDIRECT_ALLOC_INFO_FREED)
			continue;
		r = row_for(t, dev, a[k].tgid, a[k].uid);
		if (!r) {
			ret = -ENOMEM;
			break;
		}
		r->allocs++;
		r->exports += a[k].nr_exports;
		r->bytes += a[k].size;
	}
	free(a);
	return ret;
}

/* The module's features, QUERY; 0 when it does not answer. */
static unsigned long long features(int fd)
{
	struct peerdirect_query q = { .argsz = sizeof(q) };

	return ioctl(fd, PEERDIRECT_IOCTL_QUERY, &q) ? 0 : q.features;
}

static void human(unsigned long long v, char *buf, size_t len)
{
	static const char *const u[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	unsigned int i = 0;
	double d = (double)v;

	while (d >= 1024 && i < 4) {
		d /= 1024;
		i++;
	}
	snprintf(buf, len, i ? "%.1f %s" : "%.0f %s", d, u[i]);
}

static int ps_err(int code, const char *msg)
{
	pdctl_err("ps: %s", msg);
	return code;
}

/*
 * The rows of the devices sel[0..nd) into t, from one source for every
 * device (so that the rows compare): *source, "exports" or "allocations";
 * unattr[i] the used memory of sel[i] that no row holds.  0, else the
 * exit code (the reason said).
 */
static int ps_gather(const int *sel, int nd, struct ps_table *t, const char **source,
		     unsigned long long *unattr)
{
	char path[128], msg[256];
	int i, ret = 0;
	size_t r;

	for (i = 0; i < nd && !ret; i++) {
		unsigned long long size = attr_u64(sel[i], "mem_size");
		unsigned long long free_b = attr_u64(sel[i], "mem_free"), sum = 0;
		int fd, e;

		snprintf(path, sizeof(path), "%s/peerdirect%d", devroot, sel[i]);
		fd = open(path, O_RDWR | O_CLOEXEC);
		if (fd < 0) {
			e = errno;
			snprintf(msg, sizeof(msg), "%s: %s%s", path, strerror(e),
				 e == EACCES ? " (root or the peerdirect group needed)" : "");
			ret = ps_err(e == EACCES || e == EPERM ? EX_PERM : EX_NODEV, msg);
			break;
		}
		if (!(features(fd) & PEERDIRECT_FEAT_LIST)) {
			close(fd);
			ret = ps_err(EX_FAIL, "the module predates uapi 2.1 (no LIST): pdctl "
				     "version");
			break;
		}
		/* one source for every device, so the rows compare */
		if (i == 0 && (features(fd) & PEERDIRECT_FEAT_LIST_ALLOCS))
			*source = "allocations";
		e = strcmp(*source, "exports") ? from_allocs(fd, sel[i], t) :
						 from_exports(fd, sel[i], t);
		close(fd);
		if (e) {
			snprintf(msg, sizeof(msg), "peerdirect%d: PEERDIRECT_IOCTL_LIST: %s",
				 sel[i], strerror(-e));
			ret = ps_err(e == -EACCES || e == -EPERM ? EX_PERM : EX_FAIL, msg);
			break;
		}
		for (r = 0; r < t->n; r++)
			if (t->rows[r].dev == sel[i])
				sum += t->rows[r].bytes;
		unattr[i] = size > free_b && size - free_b > sum ? size - free_b - sum : 0;
	}
	return ret;
}

static void ps_json(const struct ps_table *t, const char *source, const int *sel, int nd,
		    const unsigned long long *unattr)
{
	size_t r;
	int i;

	jopen(NULL, '{');
	jstr("source", source);
	jopen("processes", '[');
	for (r = 0; r < t->n; r++) {
		char comm[32];

		proc_comm(t->rows[r].tgid, comm, sizeof(comm));
		jopen_device(t->rows[r].dev);
		ji64("pid", t->rows[r].tgid);
		jstr("comm", comm);
		ju64("uid", t->rows[r].uid);
		ju64("allocations", t->rows[r].allocs);
		ju64("exports", t->rows[r].exports);
		ju64("bytes", t->rows[r].bytes);
		jclose('}');
	}
	jclose(']');
	jopen("not_attributed", '[');
	for (i = 0; i < nd; i++) {
		jopen_device(sel[i]);
		ju64("bytes", unattr[i]);
		jclose('}');
	}
	jclose(']');
	jclose('}');
	putchar('\n');
}

static void ps_text(const struct ps_table *t, const char *source, const int *sel, int nd,
		    const unsigned long long *unattr)
{
	size_t r;
	int i;

	printf("%-12s %7s %-15s %6s %6s %7s %10s\n", "DEVICE", "PID", "COMM", "UID",
	       "ALLOCS", "EXPORTS", "MEMORY");
	for (r = 0; r < t->n; r++) {
		char comm[32], b[24];

		proc_comm(t->rows[r].tgid, comm, sizeof(comm));
		human(t->rows[r].bytes, b, sizeof(b));
		printf("peerdirect%-2d %7d %-15.15s %6u %6u %7u %10s\n", t->rows[r].dev,
		       t->rows[r].tgid, comm, t->rows[r].uid, t->rows[r].allocs,
		       t->rows[r].exports, b);
	}
	for (i = 0; i < nd; i++) {
		char b[24];

		if (!unattr[i])
			continue;
		human(unattr[i], b, sizeof(b));
		printf("peerdirect%-2d %7s %-15s %6s %6s %7s %10s\n", sel[i], "-",
		       !strcmp(source, "exports") ? "(not exported)" :
		       /* LIST shows others only to CAP_SYS_ADMIN */
		       geteuid() ? "(not yours)" : "(quarantined)",
		       "-", "-", "-", b);
	}
	if (strcmp(source, "exports"))
		printf("\nsource: LIST of allocations (uapi 2.2)\n");
	else
		printf("\nsource: LIST of exports (the module lacks uapi 2.2's LIST of "
		       "allocations): memory never exported is not attributed to a "
		       "process\n");
}

int cmd_ps(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 },
	};
	struct ps_table t = { 0 };
	unsigned long long unattr[MAX_DEVS];
	int idx[MAX_DEVS], sel[MAX_DEVS], n, nd = 0, i, c, ret;
	const char *source = "exports";

	optind = 0;	/* glibc: re-initialize, so options may follow operands */
	opterr = 0;
	while ((c = getopt_long(argc, argv, "j", opts, NULL)) != -1) {
		if (c != 'j')
			return ps_err(EX_USAGE, "usage: ps [--json]");
		json = true;
	}
	if (optind < argc)
		return ps_err(EX_USAGE, "usage: ps [--json]");
	if (!module_loaded())
		return ps_err(EX_NODEV, "the peerdirect module is not loaded (modprobe peerdirect)");
	n = list_devices(idx, MAX_DEVS);
	for (i = 0; i < n; i++)
		if (want_dev < 0 || idx[i] == want_dev)
			sel[nd++] = idx[i];
	if (!nd)
		return ps_err(EX_NODEV, "no peerdirect device (pdctl list)");
	ret = ps_gather(sel, nd, &t, &source, unattr);
	if (ret) {
		free(t.rows);
		return ret;
	}
	if (json)
		ps_json(&t, source, sel, nd, unattr);
	else
		ps_text(&t, source, sel, nd, unattr);
	free(t.rows);
	return 0;
}
