// SPDX-License-Identifier: GPL-2.0
/*
 * Kernel figures (performance goal P4), printed as tables:
 *   1. EXPORT and importer attach+map cost against buffer size (flat: no
 *      per-page work at export; a map is one sg table);
 *   2. DMA entries of a 256 MiB export against the importer's max segment;
 *   3. REVOKE cost against the number of attachments;
 *   4. live exports one device sustains, and what a RESET, a debugfs read
 *      and closing them cost at that count.
 * Run by selftests/kbench-in-vm.sh (module parameters sized for it).
 *
 *   kbench [DEVICE] [MAX_EXPORTS]
 */
#define _GNU_SOURCE
#include <sys/resource.h>
#include "kselftest.h"
#include "pd_test.h"

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static const char *dev = PD_DEV0;

static int import(int dbuf, uint32_t max_seg, struct pdti_status *st)
{
	int imp = pdti_open(strrchr(dev, '/') + 1);

	if (imp < 0)
		return imp;
	if (pdti_import(imp, dbuf, PDTI_DYNAMIC | PDTI_NO_VERIFY, max_seg) ||
	    (st && pdti_status(imp, st))) {
		close(imp);
		return -1;
	}
	return imp;
}

static void export_and_map_vs_size(int fd, struct peerdirect_query *q)
{
	static const uint64_t sizes[] = { 64 << 10, 1 << 20, 16 << 20, 64 << 20, 256 << 20 };
	const int reps = 20;
	unsigned int i;
	int r;

	printf("# 1. export and map cost against size (mean of %d)\n", reps);
	printf("#   %10s %12s %14s %12s\n", "size", "EXPORT us", "attach+map us", "close us");
	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		double te = 0, tm = 0, tc = 0, t;
		int64_t h;

		if (sizes[i] > q->mem_size || sizes[i] > q->quota)
			continue;
		h = pd_alloc(fd, sizes[i]);
		if (h < 0)
			continue;
		for (r = 0; r < reps; r++) {
			int d, imp;

			t = now_us();
			d = pd_export(fd, h, 0, sizes[i]);
			te += now_us() - t;
			if (d < 0)
				break;
			t = now_us();
			imp = import(d, 0, NULL);
			tm += now_us() - t;
			t = now_us();
			if (imp >= 0)
				close(imp);
			close(d);
			tc += now_us() - t;
		}
		printf("#   %9lluK %12.1f %14.1f %12.1f\n", (unsigned long long)sizes[i] >> 10,
		       te / reps, tm / reps, tc / reps);
		pd_free(fd, h);
	}
}

/* What a table shows that cannot be right (a mapping of no entries). */
static const char *wrong;

static void sg_entries(int fd, struct peerdirect_query *q)
{
	static const uint32_t segs[] = { 4096, 65536, 1 << 20, 4 << 20, 64 << 20, 1u << 31 };
	uint64_t size = 256 << 20;
	struct pdti_status st;
	unsigned int i;
	int64_t h;
	int d;

	if (size > q->mem_size || size > q->quota) {
		printf("# 2. skipped: needs 256 MiB of device memory and quota\n");
		return;
	}
	h = pd_alloc(fd, size);
	d = h < 0 ? -1 : pd_export(fd, h, 0, size);
	if (d < 0)
		return;
	printf("# 2. DMA entries of a 256 MiB export against the importer's max segment\n");
	printf("#   %12s %10s %14s %12s\n", "max segment", "entries", "largest entry", "map us");
	for (i = 0; i < sizeof(segs) / sizeof(segs[0]); i++) {
		double t = now_us();
		int imp = import(d, segs[i], &st);

		t = now_us() - t;
		if (imp < 0) {
			printf("#   %12u   refused\n", segs[i]);
			continue;
		}
		printf("#   %12u %10u %14u %12.1f\n", segs[i], st.nents, st.max_entry, t);
		if (!st.nents || !st.max_entry || st.max_entry > segs[i] ||
		    (uint64_t)st.nents * st.max_entry < size)
			wrong = "section 2: DMA entries that cannot map 256 MiB within the segment";
		close(imp);
	}
	close(d);
	pd_free(fd, h);
}

static void revoke_vs_attachments(int fd, struct peerdirect_query *q)
{
	static const int counts[] = { 0, 1, 4, 16, 64, 256 };
	unsigned int i;
	int k;

	printf("# 3. REVOKE cost against attachments (dynamic importers, each unmaps)\n");
	printf("#   %12s %12s\n", "attachments", "REVOKE us");
	for (i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
		int64_t h = pd_alloc(fd, q->page_size);
		int d = h < 0 ? -1 : pd_export(fd, h, 0, q->page_size), *imps;
		struct peerdirect_revoke r;
		double t;

		if (d < 0)
			return;
		imps = calloc(counts[i] + 1, sizeof(int));
		for (k = 0; k < counts[i]; k++)
			imps[k] = import(d, 0, NULL);
		t = now_us();
		pd_revoke(fd, PEERDIRECT_REVOKE_ALLOC, h, 0, &r);
		t = now_us() - t;
		printf("#   %12d %12.1f%s\n", counts[i], t, r.pending ? " (pending)" : "");
		for (k = 0; k < counts[i]; k++)
			if (imps[k] >= 0)
				close(imps[k]);
		free(imps);
		close(d);
		pd_free(fd, h);
	}
}

static long long meminfo(const char *key)
{
	char line[128];
	long long v = -1;
	FILE *f = fopen("/proc/meminfo", "r");

	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, key, strlen(key)))
			v = atoll(line + strlen(key) + 1);
	if (f)
		fclose(f);
	return v;
}

static void live_exports(int fd, struct peerdirect_query *q, int goal)
{
	struct rlimit rl = { goal + 64, goal + 64 };
	struct peerdirect_reset rs;
	long long avail0, avail1;
	double t0, t, worst = 0;
	int *d, n, i;
	char buf[65536];
	int64_t h;
	FILE *f;

	if (setrlimit(RLIMIT_NOFILE, &rl)) {
		printf("# 4. skipped: RLIMIT_NOFILE %d: %s\n", goal + 64, strerror(errno));
		return;
	}
	h = pd_alloc(fd, q->page_size);
	d = calloc(goal, sizeof(int));
	if (h < 0 || !d)
		return;
	avail0 = meminfo("MemAvailable:");
	t0 = now_us();
	for (n = 0; n < goal; n++) {
		t = now_us();
		d[n] = pd_export(fd, h, 0, q->page_size);
		t = now_us() - t;
		if (d[n] < 0)
			break;
		if (t > worst)
			worst = t;
	}
	t0 = now_us() - t0;
	avail1 = meminfo("MemAvailable:");
	printf("# 4. live exports on one device (goal %d, max_exports %u)\n", goal, q->max_exports);
	printf("#   reached %d%s%s; %.1f us per EXPORT (worst %.0f us); %lld KiB of memory, %.2f KiB each\n",
	       n, n < goal ? ", stopped by: " : "", n < goal ? strerror(-d[n]) : "",
	       n ? t0 / n : 0, worst, avail0 - avail1, n ? (double)(avail0 - avail1) / n : 0);
	t = now_us();
	f = fopen("/sys/kernel/debug/peerdirect/peerdirect0/exports", "r");
	while (f && fread(buf, 1, sizeof(buf), f) > 0)
		;
	if (f)
		fclose(f);
	printf("#   debugfs exports read: %.1f ms\n", (now_us() - t) / 1000);
	t = now_us();
	pd_reset(fd, &rs);
	printf("#   RESET revoking %u: %.1f ms\n", rs.revoked, (now_us() - t) / 1000);
	t = now_us();
	for (i = 0; i < n; i++)
		close(d[i]);
	printf("#   closing them: %.1f ms\n", (now_us() - t) / 1000);
	free(d);
	pd_free(fd, h);
}

int main(int argc, char **argv)
{
	struct peerdirect_query q;
	int fd, goal = 65536;

	if (argc > 1)
		dev = argv[1];
	if (argc > 2)
		goal = pd_arg_ull("kbench: exports", argv[2], 1, 1 << 24);
	ksft_print_header();
	ksft_set_plan(1);
	fd = pd_open(dev);
	if (fd < 0 || pd_query(fd, &q))
		ksft_exit_fail_msg("%s: %s\n", dev, strerror(errno));
	printf("# kbench on %s: backend %s, %llu MiB, %llu KiB pages, quota %llu MiB\n", dev,
	       q.backend == PEERDIRECT_BACKEND_PCI_BAR ? "pci-bar" : "sim",
	       (unsigned long long)q.mem_size >> 20, (unsigned long long)q.page_size >> 10,
	       (unsigned long long)q.quota >> 20);
	export_and_map_vs_size(fd, &q);
	sg_entries(fd, &q);
	revoke_vs_attachments(fd, &q);
	live_exports(fd, &q, goal);
	close(fd);
	if (wrong)
		ksft_test_result_fail("kbench ran: %s\n", wrong);
	else
		ksft_test_result_pass("kbench ran\n");
	ksft_finished();
}
