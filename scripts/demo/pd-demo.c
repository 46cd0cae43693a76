// SPDX-License-Identifier: GPL-2.0
/*
 * The peerdirect story in one run (make demo): allocate device memory,
 * export it as a dma-buf, let importers map it, move bytes, revoke, and
 * show what each party sees.  Runs inside the demo VM.
 */
#include <signal.h>
#include <setjmp.h>
#include <sys/wait.h>
#include "../../selftests/pd_test.h"

#define MiB (1024 * 1024)

static void step(const char *fmt, const char *arg)
{
	printf("\n==> ");
	printf(fmt, arg);
	printf("\n");
}

static void show(const char *path)
{
	char line[256];
	FILE *f = fopen(path, "r");

	if (!f)
		return;
	while (fgets(line, sizeof(line), f))
		printf("    %s", line);
	fclose(f);
}

static int die(const char *what, int err)
{
	fprintf(stderr, "pd-demo: %s: %s\n", what, strerror(err < 0 ? -err : err));
	exit(1);
}

int main(void)
{
	struct peerdirect_query q;
	struct peerdirect_export e = { .argsz = sizeof(e), .flags = PEERDIRECT_EXPORT_RDWR | PEERDIRECT_EXPORT_CLOEXEC };
	struct peerdirect_revoke r;
	struct peerdirect_event ev;
	struct pdti_status st;
	struct drm_prime_handle prime = { .fd = -1 };
	char *p, back[64];
	int fd, imp, vgem, ret;
	int64_t h;
	pid_t pid;
	int status;

	setvbuf(stdout, NULL, _IOLBF, 0);
	step("open %s and ask what it is", PD_DEV0);
	fd = pd_open(PD_DEV0);
	if (fd < 0)
		die("open", errno);
	ret = pd_query(fd, &q);
	if (ret)
		die("query", ret);
	printf("    ABI %u.%u, backend %s, %llu MiB of device memory in %llu KiB pages, quota %llu MiB\n",
	       q.abi_major, q.abi_minor, q.backend == PEERDIRECT_BACKEND_SIM ? "sim" : "pci-bar",
	       q.mem_size >> 20, q.page_size >> 10, q.quota >> 20);

	step("allocate %s of device memory (zeroed before it is handed out)", "4 MiB");
	h = pd_alloc(fd, 4 * MiB);
	if (h < 0)
		die("alloc", (int)h);
	printf("    handle %lld\n", (long long)h);

	step("export it as a dma-buf fd%s", "");
	e.handle = h;
	e.length = 4 * MiB;
	if (ioctl(fd, PEERDIRECT_IOCTL_EXPORT, &e))
		die("export", errno);
	ioctl(e.fd, DMA_BUF_SET_NAME_B, "demo-gradients");
	printf("    dma-buf fd %d, export id %llu, inode %llu\n", e.fd,
	       (unsigned long long)e.export_id, (unsigned long long)e.inode);

	step("the runtime writes through a CPU mapping, bracketed by %s", "DMA_BUF_IOCTL_SYNC");
	p = mmap(NULL, 4 * MiB, PROT_READ | PROT_WRITE, MAP_SHARED, e.fd, 0);
	if (p == MAP_FAILED)
		die("mmap", errno);
	pd_sync(e.fd, DMA_BUF_SYNC_START | DMA_BUF_SYNC_WRITE);
	strcpy(p + MiB, "hello from device memory");
	pd_sync(e.fd, DMA_BUF_SYNC_END | DMA_BUF_SYNC_WRITE);
	printf("    wrote \"%s\" at offset 1 MiB\n", p + MiB);

	step("a NIC-like importer attaches pinned, as RDMA's %s does", "ib_umem_dmabuf_get_pinned");
	imp = open(PD_IMPORTER, O_RDWR);
	if (imp < 0 || pdti_import(imp, e.fd, PDTI_PINNED, 0))
		die("test importer", errno);
	pdti_status(imp, &st);
	printf("    mapped %u DMA entries (largest %u KiB), %u pages checked against the exporter: %s\n",
	       st.nents, st.max_entry >> 10, st.sg_checked, st.sg_error ? "MISMATCH" : "all match");
	pdti_read(imp, MiB, back, sizeof(back));
	back[sizeof(back) - 1] = 0;
	printf("    the importer reads through its DMA addresses: \"%s\"\n", back);

	step("a third-party importer, vgem, imports it through DRM %s", "PRIME");
	vgem = pd_open_vgem();
	prime.fd = e.fd;
	if (vgem >= 0 && !ioctl(vgem, DRM_IOCTL_PRIME_FD_TO_HANDLE, &prime))
		printf("    vgem GEM handle %u: a static importer, pinned and mapped at attach\n",
		       prime.handle);
	else
		printf("    vgem not available: %s\n", strerror(errno));

	step("debugfs shows who holds what: %s", "/sys/kernel/debug/peerdirect/peerdirect0/exports");
	show("/sys/kernel/debug/peerdirect/peerdirect0/exports");

	step("revoke the export (as on free, reset, hot-unplug or admin action)%s", "");
	pd_revoke(fd, PEERDIRECT_REVOKE_EXPORT, 0, e.export_id, &r);
	printf("    revoked %u export(s), %u of them still mapped by importers that cannot let go\n",
	       r.revoked, r.pending);
	pdti_status(imp, &st);
	printf("    the importer got move_notify %u time(s); it still holds its pinned mapping: %s\n",
	       st.move_notify, st.mapped ? "yes (memory quarantined, never reused)" : "no");
	if (read(fd, &ev, sizeof(ev)) == sizeof(ev))
		printf("    the owner reads an event: export %llu, reason %u (%s), inode %llu\n",
		       (unsigned long long)ev.export_id, ev.reason,
		       ev.reason == PEERDIRECT_REASON_REVOKE ? "revoke" : "other",
		       (unsigned long long)ev.inode);
	ret = pd_sync(e.fd, DMA_BUF_SYNC_START | DMA_BUF_SYNC_READ);
	printf("    DMA_BUF_IOCTL_SYNC now fails: %s\n", strerror(-ret));
	pid = fork();
	if (!pid) {
		volatile char c = p[MiB];
		(void)c;
		_exit(0);
	}
	waitpid(pid, &status, 0);
	printf("    a CPU read of the old mapping: %s\n",
	       WIFSIGNALED(status) ? strsignal(WTERMSIG(status)) : "no fault (BUG)");
	if (pdti_import(open(PD_IMPORTER, O_RDWR), e.fd, PDTI_DYNAMIC, 0) == -ENODEV)
		printf("    a new importer is refused: %s\n", strerror(ENODEV));

	step("the importer lets go; the memory returns to the pool once the %s", "dma-buf is gone");
	munmap(p, 4 * MiB);
	close(imp);
	if (vgem >= 0) {
		struct drm_gem_close gc = { .handle = prime.handle };

		ioctl(vgem, DRM_IOCTL_GEM_CLOSE, &gc);
		close(vgem);
	}
	close(e.fd);
	pd_free(fd, h);
	pd_query(fd, &q);
	printf("    free device memory: %llu of %llu MiB\n", q.mem_free >> 20, q.mem_size >> 20);
	show("/sys/kernel/debug/peerdirect/peerdirect0/summary");
	close(fd);
	return 0;
}
