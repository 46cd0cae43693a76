// SPDX-License-Identifier: GPL-2.0
/*
 * Device loss, driven from outside the VM (scripts/check.sh, stage unplug):
 * hold an export, a CPU mapping and a pinned importer mapping on a BAR
 * device, plus an export revoked earlier, tell the host we are ready, and
 * once the host has started removing the PCI device through QEMU's
 * monitor, check what every holder sees, and that the removal waits for an
 * importer that cannot be revoked to let go of the BAR.
 *
 *   unplug DEVICE PCI-ADDRESS
 *   unplug hold DEVICE DIR    a pinned importer that cannot be revoked on
 *                             DEVICE: creates DIR/ready, lets go once
 *                             DIR/release exists (unplug-in-vm.sh)
 *   unplug hold-vmap DEVICE DIR   the same with a kernel vmap of the export
 *                                 (a BAR export has none: exits 1, EINVAL)
 *   unplug hold-revoking DEVICE DIR   a revocation REVOKE left to its
 *                             revoke_work: an importer holds the
 *                             reservation, with no mapping of the BAR
 *   unplug memtype RESOURCE   mmap a page of a PCI resource file (sysfs
 *                             resourceN: uncached) and print the PAT
 *                             entries starting at its address while it is
 *                             mapped; exit 0 if there is one and each is
 *                             uncached-minus (unplug-in-vm.sh)
 */
#include <poll.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include "kselftest.h"
#include "pd_test.h"

#define LEN	(64 * 1024)

static void fill_lines(char *p)
{
	char line[17];
	int i;

	/* 16-byte lines the host regenerates with printf to check the BAR file */
	for (i = 0; i < LEN / 16; i++) {
		snprintf(line, sizeof(line), "peerdirect%05d\n", i);
		memcpy(p + i * 16, line, 16);
	}
}

static long long alloc_offset(const char *dev, int64_t h)
{
	char path[128], line[256];
	long long pid, handle, off = -1, o, size;
	FILE *f;

	snprintf(path, sizeof(path), "/sys/kernel/debug/peerdirect/%s/allocations", dev);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%lld %lld %llx %lld", &pid, &handle, &o, &size) == 4 &&
		    handle == h)
			off = o;
	fclose(f);
	return off;
}

/* Says ready in @dir, then waits (at most a minute) for @dir/release. */
static void wait_release(const char *dir)
{
	char path[256];
	int i;

	snprintf(path, sizeof(path), "%s/ready", dir);
	close(open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0644));
	snprintf(path, sizeof(path), "%s/release", dir);
	for (i = 0; i < 1200 && access(path, F_OK); i++)
		usleep(50 * 1000);
}

/*
 * A legacy pinned importer on @devpath (or, with @vmap, a kernel vmap of
 * the export) until @dir/release appears.
 */
static int hold(const char *devpath, const char *dir, bool vmap)
{
	struct peerdirect_query q;
	int fd, d, imp;
	int64_t h;

	fd = pd_open(devpath);
	if (fd < 0 || pd_query(fd, &q))
		return 1;
	if (q.features & PEERDIRECT_FEAT_REVOCABLE_ONLY &&
	    pd_param_write("require_revocable", "0"))
		return 1;
	h = pd_alloc(fd, q.page_size);
	d = h < 0 ? -1 : pd_export(fd, h, 0, q.page_size);
	imp = pdti_open(strrchr(devpath, '/') + 1);
	if (d < 0 || imp < 0 ||
	    (vmap ? ioctl(imp, PDTI_IOCTL_VMAP_HOLD, &d) : pdti_import(imp, d, PDTI_PINNED, 0))) {
		fprintf(stderr, "hold: %s\n", strerror(errno));
		return 1;
	}
	wait_release(dir);
	ioctl(imp, vmap ? PDTI_IOCTL_VMAP_DROP : PDTI_IOCTL_RELEASE);
	close(imp);
	close(d);
	close(fd);
	return 0;
}

/*
 * A revocation another call marked and has not finished, on @devpath,
 * until @dir/release appears: an export mapped by the CPU, attached by a
 * dynamic importer that maps nothing (no importer mapping of the BAR, so
 * nothing else holds the removal), revoked while the importer holds the
 * reservation, so that REVOKE leaves its end (the importers' invalidation,
 * the zap under the reservation) to its revoke_work.  A removal must wait
 * for that work too, not only for importer mappings and vmaps.
 */
static int hold_revoking(const char *devpath, const char *dir)
{
	struct peerdirect_revoke rr = { 0 };
	struct peerdirect_query q;
	char timeout[32] = "300";
	int fd, d, imp, i, status;
	volatile char *p;
	pid_t holder;
	__u64 id = 0;
	int64_t h;

	fd = pd_open(devpath);
	if (fd < 0 || pd_query(fd, &q))
		return 1;
	pd_param_read("revoke_timeout_ms", timeout, sizeof(timeout));
	h = pd_alloc(fd, q.page_size);
	d = h < 0 ? -1 : pd_export_id(fd, h, 0, q.page_size, PEERDIRECT_EXPORT_RDWR, &id);
	imp = pdti_open(strrchr(devpath, '/') + 1);
	if (d < 0 || imp < 0 || pdti_import(imp, d, PDTI_DYNAMIC | PDTI_NO_MAP, 0)) {
		fprintf(stderr, "hold-revoking: %s\n", strerror(errno));
		return 1;
	}
	p = mmap(NULL, q.page_size, PROT_READ | PROT_WRITE, MAP_SHARED, d, 0);
	if (p == MAP_FAILED)
		return 1;
	p[0] = 1;
	pd_param_write("revoke_timeout_ms", "100");
	holder = pdti_fork_holder(imp, 10000);
	for (i = 0; i < 200 && export_busy(fd, id) != 1; i++)
		usleep(10 * 1000);
	if (export_busy(fd, id) != 1 ||
	    pd_revoke(fd, PEERDIRECT_REVOKE_EXPORT, 0, id, &rr) || rr.pending != 1) {
		fprintf(stderr, "hold-revoking: REVOKE left nothing to its work (pending %u)\n",
			rr.pending);
		return 1;
	}
	pd_param_write("revoke_timeout_ms", timeout);
	wait_release(dir);
	kill(holder, SIGKILL);
	waitpid(holder, &status, 0);
	munmap((void *)p, q.page_size);
	close(imp);
	close(d);
	close(fd);
	return 0;
}

static int wait_gone(const char *path, int ms)
{
	for (; ms > 0 && !access(path, F_OK); ms -= 100)
		usleep(100 * 1000);
	return access(path, F_OK) != 0;
}

/*
 * A PCI function's sysfs resource file mapped for userspace asks x86 PAT
 * for uncached-minus; a write-combining reservation left over the range
 * (a driver's ioremap_wc() outliving its remove()) would turn it into
 * write-combining silently.
 */
static int memtype(const char *resource)
{
	char start[32], line[256], want[48], path[256];
	unsigned long long addr = 0;
	int f, n = 0, bad = 0;
	void *p;
	FILE *pat;

	snprintf(path, sizeof(path), "%.*s/resource", (int)(strrchr(resource, '/') - resource),
		 resource);
	pat = fopen(path, "r");
	/* the BAR's line: the file's name ends with its index */
	for (f = atoi(strrchr(resource, 'e') + 1); pat && f >= 0; f--)
		if (!fgets(line, sizeof(line), pat) || sscanf(line, "%llx", &addr) != 1)
			addr = 0;
	if (pat)
		fclose(pat);
	f = open(resource, O_RDWR | O_CLOEXEC);
	if (!addr || f < 0) {
		printf("# %s: %s\n", resource, addr ? strerror(errno) : "no address");
		return 2;
	}
	p = mmap(NULL, 4096, PROT_READ, MAP_SHARED, f, 0);
	if (p == MAP_FAILED) {
		printf("# mmap %s: %s\n", resource, strerror(errno));
		return 2;
	}
	snprintf(start, sizeof(start), "0x%016llx-", addr);
	snprintf(want, sizeof(want), "mem %s", start);
	pat = fopen("/sys/kernel/debug/x86/pat_memtype_list", "r");
	while (pat && fgets(line, sizeof(line), pat)) {
		if (!strstr(line, want))
			continue;
		n++;
		bad += !strstr(line, "uncached-minus");
		printf("# %s", line);
	}
	if (pat)
		fclose(pat);
	munmap(p, 4096);
	close(f);
	return n && !bad ? 0 : 1;
}

int main(int argc, char **argv)
{
	const char *devpath = argc > 2 ? argv[1] : "/dev/peerdirect0";
	const char *pciaddr = argc > 2 ? argv[2] : "";
	struct peerdirect_event ev[4];
	struct peerdirect_query q;
	struct pdti_status st;
	struct pollfd pfd;
	int fd, d, d2, imp, status, unplugs = 0, i;
	char sysfs[128], *p;
	__u64 id = 0, id2 = 0;
	uint32_t pinned;
	int64_t h, pad;
	ssize_t n;
	pid_t pid;

	if (argc == 4 && !strcmp(argv[1], "hold"))
		return hold(argv[2], argv[3], false);
	if (argc == 4 && !strcmp(argv[1], "hold-vmap"))
		return hold(argv[2], argv[3], true);
	if (argc == 4 && !strcmp(argv[1], "hold-revoking"))
		return hold_revoking(argv[2], argv[3]);
	if (argc == 3 && !strcmp(argv[1], "memtype"))
		return memtype(argv[2]);

	ksft_print_header();
	ksft_set_plan(10);
	setvbuf(stdout, NULL, _IOLBF, 0);

	fd = pd_open(devpath);
	if (fd < 0)
		ksft_exit_fail_msg("open %s: %s\n", devpath, strerror(errno));
	if (pd_query(fd, &q) || q.backend != PEERDIRECT_BACKEND_PCI_BAR)
		ksft_exit_fail_msg("%s is not a BAR device\n", devpath);
	/* a first allocation so the checked one sits at a non-zero offset */
	pad = pd_alloc(fd, q.page_size);
	h = pd_alloc(fd, LEN);
	d = pd_export_id(fd, h, 0, LEN, PEERDIRECT_EXPORT_RDWR | PEERDIRECT_EXPORT_CLOEXEC, &id);
	/* an export revoked before the device goes, its dma-buf still open */
	d2 = pad < 0 ? -1 : pd_export_id(fd, pad, 0, q.page_size, PEERDIRECT_EXPORT_RDWR, &id2);
	if (pad < 0 || h < 0 || d < 0 || d2 < 0 ||
	    pd_revoke(fd, PEERDIRECT_REVOKE_EXPORT, 0, id2, NULL) ||
	    read(fd, ev, sizeof(ev)) != sizeof(ev[0]) || ev[0].reason != PEERDIRECT_REASON_REVOKE)
		ksft_exit_fail_msg("alloc/export/revoke failed\n");
	p = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_SHARED, d, 0);
	if (p == MAP_FAILED)
		ksft_exit_fail_msg("mmap: %s\n", strerror(errno));
	pd_sync(d, DMA_BUF_SYNC_START | DMA_BUF_SYNC_WRITE);
	fill_lines(p);
	pd_sync(d, DMA_BUF_SYNC_END | DMA_BUF_SYNC_WRITE);
	imp = pdti_open(strrchr(devpath, '/') + 1);
	pinned = pd_pinned_flags(&q);
	if (imp < 0 || pdti_import(imp, d, pinned, 0))
		ksft_exit_fail_msg("test importer: %s\n", strerror(errno));

	printf("PD_UNPLUG_READY offset=%lld length=%d\n", alloc_offset(strrchr(devpath, '/') + 1, h), LEN);

	/*
	 * The removal has begun once the device fd hangs up (after the UNPLUG
	 * records were queued, which make it readable first).
	 */
	pfd.fd = fd;
	pfd.events = POLLIN;
	for (i = 0; i < 600; i++) {
		if (poll(&pfd, 1, 100) == 1 && (pfd.revents & (POLLHUP | POLLERR)))
			break;
		if (pfd.revents)
			usleep(100 * 1000);
	}
	ksft_test_result(pfd.revents & (POLLHUP | POLLERR),
			 "poll on the device fd reports hang-up\n");
	n = read(fd, ev, sizeof(ev));
	for (i = 0; i < n / (ssize_t)sizeof(ev[0]); i++)
		if (ev[i].reason == PEERDIRECT_REASON_UNPLUG &&
		    (ev[i].export_id == id || ev[i].export_id == id2))
			unplugs |= ev[i].export_id == id ? 1 : 2;
	ksft_test_result(n == 2 * sizeof(ev[0]) && unplugs == 3,
			 "UNPLUG records for the live export and for the one revoked earlier\n");
	ksft_test_result(read(fd, ev, sizeof(ev)) < 0 && errno == ENODEV,
			 "then read gives ENODEV\n");
	ksft_test_result(pd_query(fd, &q) == -ENODEV && pd_alloc(fd, 4096) == -ENODEV,
			 "ioctls on the open fd give ENODEV\n");
	ksft_test_result(pd_sync(d, DMA_BUF_SYNC_START | DMA_BUF_SYNC_READ) == -ENODEV,
			 "SYNC on the held dma-buf gives ENODEV\n");
	pid = fork();
	if (!pid) {
		volatile char c = p[0];
		(void)c;
		_exit(0);
	}
	waitpid(pid, &status, 0);
	ksft_test_result(WIFSIGNALED(status) && WTERMSIG(status) == SIGBUS,
			 "the CPU mapping faults with SIGBUS\n");
	/*
	 * A revocable one (7.1 contract) is invalidated and lets go; a
	 * legacy one is never invalidated (pinned memory does not move).
	 */
	ksft_test_result(!pdti_status(imp, &st) &&
			 st.move_notify == !!(pinned & PDTI_REVOCABLE) &&
			 st.mapped == !(pinned & PDTI_REVOCABLE),
			 "the pinned importer was %s\n",
			 pinned & PDTI_REVOCABLE ? "invalidated and let go" :
			 "left mapped, not invalidated");

	/* the BAR is given back only once no importer can reach it */
	snprintf(sysfs, sizeof(sysfs), "/sys/bus/pci/devices/%s", pciaddr);
	if (pinned & PDTI_REVOCABLE) {
		ksft_test_result_skip("the importer let go: removal has nothing to wait for\n");
	} else {
		usleep(1000 * 1000);
		ksft_test_result(!access(sysfs, F_OK),
				 "removal waits while the pinned importer maps the BAR\n");
		ioctl(imp, PDTI_IOCTL_RELEASE);
	}
	ksft_test_result(wait_gone(sysfs, 30000), "PCI device %s removed\n", pciaddr);

	munmap(p, LEN);
	close(imp);
	close(d);
	close(d2);
	close(fd);
	ksft_test_result(access(devpath, F_OK) != 0, "%s is gone after the last close\n", devpath);
	ksft_finished();
}
