// SPDX-License-Identifier: GPL-2.0
/*
 * Device loss, driven from outside the VM (scripts/check.sh, stage unplug):
 * hold an export, a CPU mapping and a pinned importer mapping on a BAR
 * device, tell the host we are ready, and once the host has removed the
 * PCI device through QEMU's monitor, check what every holder sees.
 *
 *   unplug DEVICE PCI-ADDRESS
 */
#include <poll.h>
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

int main(int argc, char **argv)
{
	const char *devpath = argc > 2 ? argv[1] : "/dev/peerdirect0";
	const char *pciaddr = argc > 2 ? argv[2] : "";
	char sysfs[128], *p;
	struct peerdirect_event ev;
	struct peerdirect_query q;
	struct pdti_status st;
	struct pollfd pfd;
	int fd, d, imp, i, status;
	uint32_t pinned;
	int64_t h, pad;
	pid_t pid;

	ksft_print_header();
	ksft_set_plan(9);
	setvbuf(stdout, NULL, _IOLBF, 0);

	fd = pd_open(devpath);
	if (fd < 0)
		ksft_exit_fail_msg("open %s: %s\n", devpath, strerror(errno));
	if (pd_query(fd, &q) || q.backend != PEERDIRECT_BACKEND_PCI_BAR)
		ksft_exit_fail_msg("%s is not a BAR device\n", devpath);
	/* a first allocation so the checked one sits at a non-zero offset */
	pad = pd_alloc(fd, q.page_size);
	h = pd_alloc(fd, LEN);
	d = pd_export(fd, h, 0, LEN);
	if (pad < 0 || h < 0 || d < 0)
		ksft_exit_fail_msg("alloc/export failed\n");
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

	snprintf(sysfs, sizeof(sysfs), "/sys/bus/pci/devices/%s", pciaddr);
	for (i = 0; i < 600 && !access(sysfs, F_OK); i++)
		usleep(100 * 1000);
	ksft_test_result(access(sysfs, F_OK) != 0, "PCI device %s removed by the host\n", pciaddr);

	pfd.fd = fd;
	pfd.events = POLLIN;
	ksft_test_result(poll(&pfd, 1, 5000) == 1 && (pfd.revents & (POLLHUP | POLLERR)),
			 "poll on the device fd reports hang-up\n");
	ksft_test_result(read(fd, &ev, sizeof(ev)) == sizeof(ev) &&
			 ev.reason == PEERDIRECT_REASON_UNPLUG,
			 "the owner reads an UNPLUG event\n");
	ksft_test_result(read(fd, &ev, sizeof(ev)) < 0 && errno == ENODEV,
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
	/* a revocable one (7.1 contract) also let go; a legacy one cannot */
	ksft_test_result(!pdti_status(imp, &st) && st.move_notify == 1 &&
			 st.mapped == !(pinned & PDTI_REVOCABLE),
			 "the pinned importer was notified%s\n",
			 pinned & PDTI_REVOCABLE ? " and let go" : "");
	munmap(p, LEN);
	close(imp);
	close(d);
	close(fd);
	ksft_test_result(access(devpath, F_OK) != 0, "%s is gone after the last close\n", devpath);
	ksft_finished();
}
