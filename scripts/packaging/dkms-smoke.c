// SPDX-License-Identifier: GPL-2.0
/*
 * The DKMS-built module at work, in the VM of scripts/dkms-test.sh: query
 * /dev/peerdirect0, allocate, export a dma-buf, write and read it through a
 * SYNC-bracketed mapping, revoke (SYNC then fails with ENODEV), free.
 * Prints "ok"/"not ok" lines; exit status 1 if any failed.
 *
 *   cc -static -O2 -Wall -Iuapi -o dkms-smoke scripts/packaging/dkms-smoke.c
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>
#include <linux/dma-buf.h>
#include <linux/peerdirect.h>

static int failed;

static void check(int ok, const char *what)
{
	printf("%sok %s\n", ok ? "" : "not ", what);
	if (!ok)
		failed = 1;
}

static int sync_buf(int fd, __u64 flags)
{
	struct dma_buf_sync s = { .flags = flags };

	return ioctl(fd, DMA_BUF_IOCTL_SYNC, &s) ? -errno : 0;
}

int main(void)
{
	struct peerdirect_query q = { .argsz = sizeof(q) };
	struct peerdirect_alloc a = { .argsz = sizeof(a), .size = 1 << 20 };
	struct peerdirect_export e = { .argsz = sizeof(e), .flags = PEERDIRECT_EXPORT_RDWR };
	struct peerdirect_revoke r = { .argsz = sizeof(r), .flags = PEERDIRECT_REVOKE_EXPORT };
	struct peerdirect_free f = { .argsz = sizeof(f) };
	char *map;
	int fd;

	fd = open("/dev/peerdirect0", O_RDWR | O_CLOEXEC);
	check(fd >= 0, "open /dev/peerdirect0");
	if (fd < 0)
		return 1;
	check(!ioctl(fd, PEERDIRECT_IOCTL_QUERY, &q) && q.abi_major == PEERDIRECT_ABI_MAJOR &&
	      q.mem_size > 0, "QUERY: ABI major and device memory");
	printf("# ABI %u.%u, backend %u, %llu bytes, page %llu\n", q.abi_major, q.abi_minor,
	       q.backend, (unsigned long long)q.mem_size, (unsigned long long)q.page_size);
	check(!ioctl(fd, PEERDIRECT_IOCTL_ALLOC, &a) && a.handle && a.alloc_size >= a.size,
	      "ALLOC 1 MiB");
	e.handle = a.handle;
	e.length = a.size;
	check(!ioctl(fd, PEERDIRECT_IOCTL_EXPORT, &e) && e.fd >= 0 && e.export_id,
	      "EXPORT as a dma-buf");
	map = mmap(NULL, a.size, PROT_READ | PROT_WRITE, MAP_SHARED, e.fd, 0);
	check(map != MAP_FAILED, "mmap of the dma-buf");
	if (map != MAP_FAILED) {
		check(!sync_buf(e.fd, DMA_BUF_SYNC_START | DMA_BUF_SYNC_RW), "SYNC START");
		memset(map, 0x5a, a.size);
		check(map[0] == 0x5a && map[a.size - 1] == 0x5a, "write and read back through the mapping");
		check(!sync_buf(e.fd, DMA_BUF_SYNC_END | DMA_BUF_SYNC_RW), "SYNC END");
		munmap(map, a.size);
	}
	r.export_id = e.export_id;
	check(!ioctl(fd, PEERDIRECT_IOCTL_REVOKE, &r) && r.revoked == 1, "REVOKE the export");
	check(sync_buf(e.fd, DMA_BUF_SYNC_START | DMA_BUF_SYNC_READ) == -ENODEV,
	      "SYNC on the revoked dma-buf fails with ENODEV");
	close(e.fd);
	f.handle = a.handle;
	check(!ioctl(fd, PEERDIRECT_IOCTL_FREE, &f), "FREE");
	close(fd);
	return failed;
}
