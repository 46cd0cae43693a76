// SPDX-License-Identifier: MIT
/*
 * pdctl exports and allocs: what PEERDIRECT_IOCTL_LIST says of each
 * device's exports and their importers, by export or summed by
 * allocation.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>
#include <linux/peerdirect.h>

#include "pdctl.h"
#include "json.h"

#define err pdctl_err

static const char *const reasons[] = {
	NULL, "free", "revoke", "reset", "admin", "unplug", "overflow",
};

static const char *reason_name(unsigned int r)
{
	return r < sizeof(reasons) / sizeof(reasons[0]) && reasons[r] ? reasons[r] : "unknown";
}

struct listing {
	int dev;
	bool knows_revocable;	/* uapi 2.2: ATTACH_INFO_REVOCABLE is set when true */
	struct peerdirect_export_info *e;
	struct peerdirect_attach_info *a;
	uint32_t ne, na, total_e, total_a;
};

/*
 * What a revoke does to this importer.  A 2.1 module never sets
 * ATTACH_INFO_REVOCABLE, so there a clear bit means "not known".
 */
static const char *revoke_effect(const struct listing *x, const struct peerdirect_attach_info *a)
{
	if (!x->knows_revocable)
		return "unknown";
	return a->flags & PEERDIRECT_ATTACH_INFO_REVOCABLE ? "unmaps" : "waits, then quarantines";
}

/* Retries with bigger arrays until everything fits (or the uapi's cap). */
static int do_list(int idx, struct listing *x)
{
	uint32_t cap_e = 64, cap_a = 64;
	int fd = open_dev(idx, O_RDONLY), tries;

	memset(x, 0, sizeof(*x));
	x->dev = idx;
	x->knows_revocable = attr_u64(idx, "features") & PEERDIRECT_FEAT_LIST_ALLOCS;
	if (fd < 0)
		return fd;
	for (tries = 0; tries < 8; tries++) {
		struct peerdirect_list l = {
			.argsz = sizeof(l), .flags = PEERDIRECT_LIST_ATTACHMENTS,
			.export_size = sizeof(*x->e), .attach_size = sizeof(*x->a),
		};

		free(x->e);
		free(x->a);
		x->e = calloc(cap_e, sizeof(*x->e));
		x->a = calloc(cap_a, sizeof(*x->a));
		if (!x->e || !x->a) {
			close(fd);
			return -ENOMEM;
		}
		l.exports = (uintptr_t)x->e;
		l.nr_exports = cap_e;
		l.attachments = (uintptr_t)x->a;
		l.nr_attachments = cap_a;
		if (ioctl(fd, PEERDIRECT_IOCTL_LIST, &l)) {
			int e = errno;

			err("peerdirect%d: PEERDIRECT_IOCTL_LIST: %s%s", idx, strerror(e),
			    e == ENOTTY || e == EINVAL ? " (the module predates uapi 2.1)" : "");
			close(fd);
			return -e;
		}
		x->ne = l.nr_exports;
		x->na = l.nr_attachments;
		x->total_e = l.total_exports;
		x->total_a = l.total_attachments;
		if ((l.total_exports <= cap_e && l.total_attachments <= cap_a) ||
		    (cap_e >= PEERDIRECT_LIST_MAX && cap_a >= PEERDIRECT_LIST_MAX))
			break;
		/* Things change between calls: some headroom. */
		cap_e = l.total_exports + 16 > PEERDIRECT_LIST_MAX ? PEERDIRECT_LIST_MAX
								   : l.total_exports + 16;
		cap_a = l.total_attachments + 16 > PEERDIRECT_LIST_MAX ? PEERDIRECT_LIST_MAX
								       : l.total_attachments + 16;
	}
	close(fd);
	return 0;
}

static void free_listing(struct listing *x)
{
	free(x->e);
	free(x->a);
}

static long long boottime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_BOOTTIME, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}
static const char *export_state(const struct peerdirect_export_info *e)
{
	if (e->flags & PEERDIRECT_EXPORT_INFO_BUSY)
		return "busy";
	if (e->flags & PEERDIRECT_EXPORT_INFO_REVOKED)
		return reason_name(e->reason);
	return "live";
}

static void age(long long since_ns, char *buf, size_t len)
{
	long long s = (boottime_ns() - since_ns) / 1000000000LL;

	if (s < 0)
		s = 0;
	if (s < 120)
		snprintf(buf, len, "%llds", s);
	else if (s < 7200)
		snprintf(buf, len, "%lldm", s / 60);
	else if (s < 172800)
		snprintf(buf, len, "%lldh", s / 3600);
	else
		snprintf(buf, len, "%lldd", s / 86400);
}

/* Gathers every selected device's listing; exit code on failure. */
static int gather(struct listing *xs, int *nr)
{
	int devs[MAX_DEVS], n, i, ret;

	ret = select_devices(devs, &n);
	if (ret)
		return ret;
	for (i = 0; i < n; i++) {
		ret = do_list(devs[i], &xs[i]);
		if (ret) {
			while (i-- > 0)
				free_listing(&xs[i]);
			return errno_exit(-ret);
		}
	}
	*nr = n;
	return 0;
}

static const char *attach_mode(const struct peerdirect_attach_info *a)
{
	return a->flags & PEERDIRECT_ATTACH_INFO_PINNED ? "pinned" :
	       a->flags & PEERDIRECT_ATTACH_INFO_DYNAMIC ? "dynamic" : "static";
}

static void json_importer(const struct listing *x, const struct peerdirect_attach_info *a,
			  long long now)
{
	jopen(NULL, '{');
	jstr("device", a->device);
	jstr("mode", attach_mode(a));
	jbool("pinned", a->flags & PEERDIRECT_ATTACH_INFO_PINNED);
	jbool("dynamic", a->flags & PEERDIRECT_ATTACH_INFO_DYNAMIC);
	jbool("peer2peer", a->flags & PEERDIRECT_ATTACH_INFO_PEER2PEER);
	if (x->knows_revocable)
		jbool("revocable", a->flags & PEERDIRECT_ATTACH_INFO_REVOCABLE);
	else
		jnull("revocable");
	jstr("on_revoke", revoke_effect(x, a));
	ju64("pins", a->pins);
	ju64("maps", a->maps);
	ju64("mapped_bytes", a->mapped_bytes);
	ju64("since_ns", a->since_ns);
	ji64("age_ms", (now - (long long)a->since_ns) / 1000000);
	jclose('}');
}

static void json_export(const struct listing *x, const struct peerdirect_export_info *e,
			const char *name, long long now)
{
	char comm[32];
	uint32_t j;

	proc_comm(e->tgid, comm, sizeof(comm));
	jopen(NULL, '{');
	jstr("device", name);
	ju64("export_id", e->export_id);
	ju64("inode", e->inode);
	ju64("handle", e->handle);
	ju64("offset", e->offset);
	ju64("length", e->length);
	ji64("tgid", e->tgid);
	jstr("comm", comm);
	ju64("uid", e->uid);
	jbool("rdonly", e->flags & PEERDIRECT_EXPORT_INFO_RDONLY);
	jbool("revoked", e->flags & PEERDIRECT_EXPORT_INFO_REVOKED);
	jstr("reason", e->flags & PEERDIRECT_EXPORT_INFO_REVOKED ? reason_name(e->reason) : NULL);
	jbool("busy", e->flags & PEERDIRECT_EXPORT_INFO_BUSY);
	jbool("freed", e->flags & PEERDIRECT_EXPORT_INFO_OWNER_GONE);
	ju64("attachments", e->nr_attachments);
	ju64("pins", e->nr_pins);
	ju64("maps", e->nr_maps);
	ju64("mapped_bytes", e->mapped_bytes);
	ju64("created_ns", e->created_ns);
	ji64("age_ms", (now - (long long)e->created_ns) / 1000000);
	jopen("importers", '[');
	for (j = 0; j < x->na; j++)
		if (x->a[j].export_id == e->export_id)
			json_importer(x, &x->a[j], now);
	jclose(']');
	jclose('}');
}

static void exports_json(const struct listing *xs, int n, long long now)
{
	bool truncated = false;
	uint32_t k;
	int i;

	jopen(NULL, '{');
	jopen("exports", '[');
	for (i = 0; i < n; i++) {
		char name[32];

		snprintf(name, sizeof(name), "peerdirect%d", xs[i].dev);
		truncated |= xs[i].ne < xs[i].total_e || xs[i].na < xs[i].total_a;
		for (k = 0; k < xs[i].ne; k++)
			json_export(&xs[i], &xs[i].e[k], name, now);
	}
	jclose(']');
	jbool("truncated", truncated);
	jclose('}');
	putchar('\n');
}

static void print_importer(const struct listing *x, const struct peerdirect_attach_info *a)
{
	char mapped[24], ag[24];

	human_size(a->mapped_bytes, mapped, sizeof(mapped));
	age(a->since_ns, ag, sizeof(ag));
	printf("  importer %-20s %-7s p2p=%s pins=%u maps=%u mapped=%s since=%s revocable=%s (a revoke %s)\n",
	       a->device, attach_mode(a),
	       a->flags & PEERDIRECT_ATTACH_INFO_PEER2PEER ? "yes" : "no",
	       a->pins, a->maps, mapped, ag,
	       !x->knows_revocable ? "?" :
	       a->flags & PEERDIRECT_ATTACH_INFO_REVOCABLE ? "yes" : "no",
	       revoke_effect(x, a));
}

static void print_export(const struct listing *x, const struct peerdirect_export_info *e)
{
	char comm[32], len[24], mapped[24], ag[24], name[32];
	uint32_t j;

	snprintf(name, sizeof(name), "peerdirect%d", x->dev);
	proc_comm(e->tgid, comm, sizeof(comm));
	human_size(e->length, len, sizeof(len));
	human_size(e->mapped_bytes, mapped, sizeof(mapped));
	age(e->created_ns, ag, sizeof(ag));
	printf("%-12s %6llu %7d %-15.15s %6llu %8s %5s %-7s %4u %5u %8s %s\n",
	       name, (unsigned long long)e->export_id, e->tgid, comm,
	       (unsigned long long)e->handle, len,
	       e->flags & PEERDIRECT_EXPORT_INFO_RDONLY ? "ro" : "rw",
	       export_state(e), e->nr_pins, e->nr_maps, mapped, ag);
	for (j = 0; j < x->na; j++)
		if (x->a[j].export_id == e->export_id)
			print_importer(x, &x->a[j]);
}

static void exports_text(const struct listing *xs, int n)
{
	uint32_t k;
	int i;

	printf("%-12s %6s %7s %-15s %6s %8s %5s %-7s %4s %5s %8s %s\n", "DEVICE", "EXPORT",
	       "PID", "COMM", "HANDLE", "LENGTH", "MODE", "STATE", "PINS", "MAPS",
	       "MAPPED", "AGE");
	for (i = 0; i < n; i++) {
		for (k = 0; k < xs[i].ne; k++)
			print_export(&xs[i], &xs[i].e[k]);
		if (xs[i].ne < xs[i].total_e)
			printf("(peerdirect%d: %u of %u exports shown)\n", xs[i].dev,
			       xs[i].ne, xs[i].total_e);
	}
}

int cmd_exports(int argc, char **argv)
{
	static struct listing xs[MAX_DEVS];
	long long now = boottime_ns();
	int n, i, ret;

	(void)argv;
	if (no_args("exports", argc))
		return EX_USAGE;
	ret = gather(xs, &n);
	if (ret)
		return ret;
	if (json)
		exports_json(xs, n, now);
	else
		exports_text(xs, n);
	for (i = 0; i < n; i++)
		free_listing(&xs[i]);
	return 0;
}

/*
 * Allocations, as the exports show them: one line per (process,
 * handle) with a live or quarantined export.  sysfs nr_allocs counts every
 * allocation, exported or not.
 */
struct alloc_row {
	int dev, tgid;
	unsigned int uid, exports, revoked;
	unsigned long long handle, exported, mapped;
};

int cmd_allocs(int argc, char **argv)
{
	static struct listing xs[MAX_DEVS];
	struct alloc_row *rows = NULL;
	size_t nrows = 0, cap = 0, r;
	int n, i, ret;
	uint32_t k;

	(void)argv;
	if (no_args("allocs", argc))
		return EX_USAGE;
	ret = gather(xs, &n);
	if (ret)
		return ret;
	for (i = 0; i < n; i++) {
		for (k = 0; k < xs[i].ne; k++) {
			const struct peerdirect_export_info *e = &xs[i].e[k];

			/* Handles are per open file: with no pid to tell
			 * processes apart (tgid 0), an export is a row of its
			 * own rather than a sum over strangers. */
			for (r = 0; r < nrows && e->tgid > 0; r++)
				if (rows[r].dev == xs[i].dev && rows[r].tgid == e->tgid &&
				    rows[r].handle == e->handle)
					break;
			if (r == nrows || e->tgid <= 0) {
				r = nrows;
				if (nrows == cap) {
					struct alloc_row *nr;

					cap = cap ? 2 * cap : 64;
					nr = realloc(rows, cap * sizeof(*rows));
					if (!nr) {
						ret = EX_FAIL;
						goto out;
					}
					rows = nr;
				}
				memset(&rows[nrows], 0, sizeof(rows[0]));
				rows[nrows].dev = xs[i].dev;
				rows[nrows].tgid = e->tgid;
				rows[nrows].uid = e->uid;
				rows[nrows].handle = e->handle;
				nrows++;
			}
			rows[r].exports++;
			rows[r].revoked += !!(e->flags & PEERDIRECT_EXPORT_INFO_REVOKED);
			rows[r].exported += e->length;
			rows[r].mapped += e->mapped_bytes;
		}
	}
	if (json) {
		jopen(NULL, '{');
		jopen("allocations", '[');
		for (r = 0; r < nrows; r++) {
			char comm[32];

			proc_comm(rows[r].tgid, comm, sizeof(comm));
			jopen_device(rows[r].dev);
			ji64("tgid", rows[r].tgid);
			jstr("comm", comm);
			ju64("uid", rows[r].uid);
			ju64("handle", rows[r].handle);
			ju64("exports", rows[r].exports);
			ju64("revoked_exports", rows[r].revoked);
			ju64("exported_bytes", rows[r].exported);
			ju64("mapped_bytes", rows[r].mapped);
			jclose('}');
		}
		jclose(']');
		jclose('}');
		putchar('\n');
	} else {
		printf("%-12s %7s %-15s %6s %6s %7s %7s %9s %9s\n", "DEVICE", "PID", "COMM", "UID",
		       "HANDLE", "EXPORTS", "REVOKED", "EXPORTED", "MAPPED");
		for (r = 0; r < nrows; r++) {
			char comm[32], ex[24], mp[24];

			proc_comm(rows[r].tgid, comm, sizeof(comm));
			human_size(rows[r].exported, ex, sizeof(ex));
			human_size(rows[r].mapped, mp, sizeof(mp));
			printf("peerdirect%-2d %7d %-15.15s %6u %6llu %7u %7u %9s %9s\n", rows[r].dev,
			       rows[r].tgid, comm, rows[r].uid, rows[r].handle, rows[r].exports,
			       rows[r].revoked, ex, mp);
		}
	}
	ret = 0;
out:
	free(rows);
	for (i = 0; i < n; i++)
		free_listing(&xs[i]);
	return ret;
}
