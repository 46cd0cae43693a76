/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Helpers shared by the peerdirect selftests: thin wrappers over the uapi
 * so each test reads as the behaviour it asserts.
 */
#ifndef _PD_TEST_H
#define _PD_TEST_H

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <linux/dma-buf.h>
#include <libdrm/drm.h>
#include "../uapi/linux/peerdirect.h"
#include "importer/pd_test_importer.h"

/* The newest command of the uapi: tests walk every command up to it and the
 * number after it.  Move it with every command added. */
#define PEERDIRECT_IOCTL_LAST	PEERDIRECT_IOCTL_LIST

#define PD_DEV0 "/dev/peerdirect0"
#define PD_DEV1 "/dev/peerdirect1"
#define PD_IMPORTER "/dev/pd_test_importer"

static inline int pd_open(const char *path)
{
	return open(path, O_RDWR | O_CLOEXEC);
}

static inline int pd_query(int fd, struct peerdirect_query *q)
{
	memset(q, 0, sizeof(*q));
	q->argsz = sizeof(*q);
	return ioctl(fd, PEERDIRECT_IOCTL_QUERY, q) ? -errno : 0;
}

/* Returns the handle (> 0) or -errno. */
static inline int64_t pd_alloc(int fd, uint64_t size)
{
	struct peerdirect_alloc a = { .argsz = sizeof(a), .size = size };

	if (ioctl(fd, PEERDIRECT_IOCTL_ALLOC, &a))
		return -errno;
	return (int64_t)a.handle;
}

static inline int pd_free(int fd, uint64_t handle)
{
	struct peerdirect_free f = { .argsz = sizeof(f), .handle = handle };

	return ioctl(fd, PEERDIRECT_IOCTL_FREE, &f) ? -errno : 0;
}

/* Returns the dma-buf fd or -errno; *id gets the export id when non-NULL. */
static inline int pd_export_id(int fd, uint64_t handle, uint64_t off,
			       uint64_t len, uint32_t flags, __u64 *id)
{
	struct peerdirect_export e = {
		.argsz = sizeof(e), .flags = flags, .handle = handle,
		.offset = off, .length = len,
	};

	if (ioctl(fd, PEERDIRECT_IOCTL_EXPORT, &e))
		return -errno;
	if (id)
		*id = e.export_id;
	return e.fd;
}

static inline int pd_export(int fd, uint64_t handle, uint64_t off, uint64_t len)
{
	return pd_export_id(fd, handle, off, len,
			    PEERDIRECT_EXPORT_RDWR | PEERDIRECT_EXPORT_CLOEXEC, NULL);
}

static inline int pd_revoke(int fd, uint32_t flags, uint64_t handle,
			    uint64_t id, struct peerdirect_revoke *out)
{
	struct peerdirect_revoke r = {
		.argsz = sizeof(r), .flags = flags, .handle = handle, .export_id = id,
	};
	int ret = ioctl(fd, PEERDIRECT_IOCTL_REVOKE, &r) ? -errno : 0;

	if (out)
		*out = r;
	return ret;
}

static inline int pd_reset(int fd, struct peerdirect_reset *out)
{
	struct peerdirect_reset r = { .argsz = sizeof(r) };
	int ret = ioctl(fd, PEERDIRECT_IOCTL_RESET, &r) ? -errno : 0;

	if (out)
		*out = r;
	return ret;
}

static inline int pd_sync(int dbuf, uint64_t flags)
{
	struct dma_buf_sync s = { .flags = flags };

	return ioctl(dbuf, DMA_BUF_IOCTL_SYNC, &s) ? -errno : 0;
}

static inline void pd_fill(void *p, size_t len, uint32_t seed)
{
	uint32_t *w = p;
	size_t i;

	for (i = 0; i < len / 4; i++)
		w[i] = seed ^ (uint32_t)(i * 2654435761u);
}

static inline size_t pd_check(const void *p, size_t len, uint32_t seed)
{
	const uint32_t *w = p;
	size_t i;

	for (i = 0; i < len / 4; i++)
		if (w[i] != (seed ^ (uint32_t)(i * 2654435761u)))
			return i * 4 + 1;
	return 0;
}

static inline int pdti_import(int imp, int dbuf, uint32_t flags, uint32_t max_seg)
{
	struct pdti_import a = { .fd = dbuf, .flags = flags, .max_seg = max_seg };

	return ioctl(imp, PDTI_IOCTL_IMPORT, &a) ? -errno : 0;
}

/* Writes a peerdirect module parameter; 0 or -errno. */
static inline int pd_param_write(const char *name, const char *val)
{
	char path[96];
	int f, ret = 0;

	snprintf(path, sizeof(path), "/sys/module/peerdirect/parameters/%s", name);
	f = open(path, O_WRONLY | O_CLOEXEC);
	if (f < 0)
		return -errno;
	if (write(f, val, strlen(val)) < 0)
		ret = -errno;
	close(f);
	return ret;
}

/* Reads a peerdirect module parameter into @buf; 0 or -errno. */
static inline int pd_param_read(const char *name, char *buf, size_t len)
{
	char path[96];
	ssize_t n;
	int f;

	snprintf(path, sizeof(path), "/sys/module/peerdirect/parameters/%s", name);
	f = open(path, O_RDONLY | O_CLOEXEC);
	if (f < 0)
		return -errno;
	n = read(f, buf, len - 1);
	close(f);
	if (n < 0)
		return -errno;
	while (n > 0 && buf[n - 1] == '\n')
		n--;
	buf[n] = 0;
	return 0;
}

/*
 * A test program's numeric argument: whole, decimal or 0x hex, in
 * [lo, hi], or the program stops with exit 2 and says which argument.  A
 * mistyped "-t 5s" must not run a 5 ms test that passes.
 */
static inline unsigned long long pd_arg_ull(const char *what, const char *s,
					    unsigned long long lo,
					    unsigned long long hi)
{
	unsigned long long v;
	char *end;

	errno = 0;
	v = s && *s >= '0' && *s <= '9' ? strtoull(s, &end, 0) : 0;
	if (!s || *s < '0' || *s > '9' || errno || *end || v < lo || v > hi) {
		fprintf(stderr, "%s '%s': want a number from %llu to %llu\n",
			what, s ? s : "", lo, hi);
		exit(2);
	}
	return v;
}

/* Monotonic milliseconds. */
static inline long long pd_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

/*
 * The flags of "a pinned importer" that the device accepts: where it
 * refuses importers that cannot be revoked (7.1 contract on a BAR), the
 * revocable pinned kind, as RDMA's revocable registration imports.
 */
static inline uint32_t pd_pinned_flags(const struct peerdirect_query *q)
{
	if (q->features & PEERDIRECT_FEAT_REVOCABLE_ONLY)
		return PDTI_PINNED | PDTI_REVOCABLE;
	return PDTI_PINNED;
}

/* PDTI_K_* facts of the running kernel, from the test importer; or -errno. */
static inline int pdti_kernel_facts(void)
{
	struct pdti_kernel k = { 0 };
	int t = open(PD_IMPORTER, O_RDWR | O_CLOEXEC), ret;

	if (t < 0)
		return -errno;
	ret = ioctl(t, PDTI_IOCTL_KERNEL, &k) ? -errno : (int)k.facts;
	close(t);
	return ret;
}

/*
 * The PCI function a device node sits on (a BAR device), for the test
 * importer to attach with: 0, or -1 for a device with no PCI parent.
 */
static inline int pd_pci_function(const char *pdname, struct pdti_device *d)
{
	char path[96], link[256];
	unsigned int dom, bus, slot, fn;
	const char *base;
	ssize_t n;

	snprintf(path, sizeof(path), "/sys/class/misc/%s/device", pdname);
	n = readlink(path, link, sizeof(link) - 1);
	if (n < 0)
		return -1;
	link[n] = 0;
	base = strrchr(link, '/');
	base = base ? base + 1 : link;
	if (sscanf(base, "%x:%x:%x.%x", &dom, &bus, &slot, &fn) != 4)
		return -1;
	memset(d, 0, sizeof(*d));
	d->domain = (int)dom;
	d->bus = bus;
	d->devfn = (slot << 3) | fn;
	return 0;
}

/* The test importer, attaching as @d (NULL: its own misc device); or -errno. */
static inline int pdti_open_as(const struct pdti_device *d)
{
	int t = open(PD_IMPORTER, O_RDWR | O_CLOEXEC);

	if (t < 0)
		return -errno;
	if (d && ioctl(t, PDTI_IOCTL_DEVICE, d)) {
		int err = errno;

		close(t);
		return -err;
	}
	return t;
}

/*
 * The test importer for exports of @pdname: a BAR device's exports are
 * imported by the BAR's own PCI function, the one client every P2PDMA
 * kernel gives a path (bus addresses, not leaving the device); other
 * devices' by the importer's misc device.
 */
static inline int pdti_open(const char *pdname)
{
	struct pdti_device d;

	return pdti_open_as(pd_pci_function(pdname, &d) ? NULL : &d);
}

/*
 * fork() for a child that dies with the test (PR_SET_PDEATHSIG): a failed
 * ASSERT must not leave a holder holding, or a victim waiting, into the
 * tests that come after.
 */
static inline pid_t pd_fork_child(void)
{
	pid_t parent = getpid(), pid = fork();

	if (pid == 0 && (prctl(PR_SET_PDEATHSIG, SIGKILL) || getppid() != parent))
		_exit(1);
	return pid;
}

/*
 * Waits up to @ms for child @pid: the time it was reaped (pd_now_ms), or
 * -1 if it was still running (it is left running).
 */
static inline long long pd_reap_within(pid_t pid, int *status, long long ms)
{
	long long t0 = pd_now_ms();

	while (pd_now_ms() - t0 < ms) {
		if (waitpid(pid, status, WNOHANG) == pid)
			return pd_now_ms();
		usleep(10 * 1000);
	}
	return -1;
}

/*
 * A child that takes the reservation of test importer @imp's import and
 * holds it for @ms (at most 10000): it waits for the lock uninterruptibly
 * (state D) and holds it asleep (S); a signal ends the hold.  It exits 0
 * when it held.
 */
static inline pid_t pdti_fork_holder(int imp, uint32_t ms)
{
	pid_t pid = pd_fork_child();

	if (pid == 0)
		_exit(ioctl(imp, PDTI_IOCTL_HOLD_RESV, &ms) ? 1 : 0);
	return pid;
}

/* A kernel vmap of @dbuf read through the test importer; 0 or -errno. */
static inline int pdti_vmap_read(int dbuf, uint64_t off, void *buf, uint64_t len)
{
	struct pdti_vmap_read r = {
		.fd = dbuf, .offset = off, .length = len, .buf = (uintptr_t)buf,
	};
	int t = open(PD_IMPORTER, O_RDWR | O_CLOEXEC), ret;

	if (t < 0)
		return -errno;
	ret = ioctl(t, PDTI_IOCTL_VMAP_READ, &r) ? -errno : 0;
	close(t);
	return ret;
}

/* Not a PDTI_RESET_*: the PCI core's own reset, through sysfs. */
#define PD_RESET_SYSFS	100

static inline void pd_pci_path(const struct pdti_device *d, const char *file,
			       char *buf, size_t len)
{
	snprintf(buf, len, "/sys/bus/pci/devices/%04x:%02x:%02x.%x/%s", d->domain,
		 d->bus, d->devfn >> 3, d->devfn & 7, file);
}

/*
 * Resets the PCI function @d (a BAR device's).  PD_RESET_SYSFS: echo 1 >
 * /sys/bus/pci/devices/X/reset, the PCI core's reset (-ENOENT where the
 * function has no reset method).  A PDTI_RESET_* kind: the test importer
 * runs the driver's reset handlers as the PCI core would
 * (PDTI_IOCTL_PCI_RESET), holding the reset for @hold_ms, so tests can
 * act while it lasts.  0 or -errno.
 */
static inline int pd_pci_reset(const struct pdti_device *d, uint32_t kind,
			       uint32_t hold_ms)
{
	struct pdti_pci_reset r = { .dev = *d, .kind = kind, .hold_ms = hold_ms };
	const char *file = kind == PD_RESET_SYSFS ? NULL : PD_IMPORTER;
	char path[96];
	int t, ret;

	if (!file) {
		pd_pci_path(d, "reset", path, sizeof(path));
		file = path;
	}
	t = open(file, (file == path ? O_WRONLY : O_RDWR) | O_CLOEXEC);
	if (t < 0)
		return -errno;
	if (file == path)
		ret = write(t, "1", 1) == 1 ? 0 : -errno;
	else
		ret = ioctl(t, PDTI_IOCTL_PCI_RESET, &r) ? -errno : 0;
	close(t);
	return ret;
}

static inline int pdti_status(int imp, struct pdti_status *st)
{
	return ioctl(imp, PDTI_IOCTL_STATUS, st) ? -errno : 0;
}

/* Kills a process holding a reservation, then polls the importer's
 * status until its invalidation comes (2 s at most): 0, or the error. */
static inline int pdti_release_and_wait_invalidated(int imp, pid_t holder,
						    struct pdti_status *st)
{
	int i, ret = 0, status;

	kill(holder, SIGKILL);
	waitpid(holder, &status, 0);
	for (i = 0; i < 200; i++) {
		ret = pdti_status(imp, st);
		if (ret || st->move_notify)
			break;
		usleep(10 * 1000);
	}
	return ret;
}

static inline int pdti_read(int imp, uint64_t off, void *buf, uint64_t len)
{
	struct pdti_read r = { .offset = off, .length = len, .buf = (uintptr_t)buf };

	return ioctl(imp, PDTI_IOCTL_READ, &r) ? -errno : 0;
}

/* Reads a "key: value" line from the device's debugfs summary. */
static inline long long pd_debugfs_value(const char *dev, const char *key)
{
	char path[128], line[160];
	long long v = -1;
	size_t klen = strlen(key);
	FILE *f;

	snprintf(path, sizeof(path), "/sys/kernel/debug/peerdirect/%s/summary", dev);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, key, klen) && line[klen] == ':')
			v = atoll(line + klen + 1);
	fclose(f);
	return v;
}

/* Whether the running kernel has @sym (a function) in /proc/kallsyms. */
static inline bool pd_kernel_has_symbol(const char *sym)
{
	char line[256], name[128];
	bool found = false;
	FILE *f = fopen("/proc/kallsyms", "r");

	while (f && !found && fgets(line, sizeof(line), f))
		found = sscanf(line, "%*s %*s %127s", name) == 1 && !strcmp(name, sym);
	if (f)
		fclose(f);
	return found;
}

/* The vgem DRM device (a third-party dma-buf importer), or -1. */
static inline int pd_open_vgem(void)
{
	struct drm_version v;
	char path[32], name[16];
	int i, fd;

	for (i = 0; i < 16; i++) {
		snprintf(path, sizeof(path), "/dev/dri/card%d", i);
		fd = open(path, O_RDWR | O_CLOEXEC);
		if (fd < 0)
			continue;
		memset(&v, 0, sizeof(v));
		memset(name, 0, sizeof(name));
		v.name = name;
		v.name_len = sizeof(name) - 1;
		if (!ioctl(fd, DRM_IOCTL_VERSION, &v) && !strcmp(name, "vgem"))
			return fd;
		close(fd);
	}
	return -1;
}

/*
 * Finds export @id in the device's debugfs export table.  Returns 1 and
 * fills the counters if listed, 0 if not (released), -1 on error.
 */
static inline int pd_debugfs_export(const char *dev, uint64_t id, int *attach,
				    int *pins, int *maps, char *state, size_t slen)
{
	char path[128], line[256], name[64], st[32];
	unsigned long long eid, ino, size;
	int pid, a, p, m, found = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/sys/kernel/debug/peerdirect/%s/exports", dev);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%llu %d %llu %llu %63s %d %d %d %31s", &eid, &pid,
			   &ino, &size, name, &a, &p, &m, st) != 9 || eid != id)
			continue;
		*attach = a;
		*pins = p;
		*maps = m;
		snprintf(state, slen, "%s", st);
		found = 1;
	}
	fclose(f);
	return found;
}

/* Whether LIST reports export @id's reservation taken (1), not (0), or -errno. */
static inline int export_busy(int fd, __u64 id)
{
	struct peerdirect_export_info e[64];
	struct peerdirect_list l = {
		.argsz = sizeof(l), .export_size = sizeof(e[0]),
		.exports = (uintptr_t)e, .nr_exports = sizeof(e) / sizeof(e[0]),
	};
	__u32 i;

	if (ioctl(fd, PEERDIRECT_IOCTL_LIST, &l))
		return -errno;
	for (i = 0; i < l.nr_exports && i < sizeof(e) / sizeof(e[0]); i++)
		if (e[i].export_id == id)
			return !!(e[i].flags & PEERDIRECT_EXPORT_INFO_BUSY);
	return -ENOENT;
}

#endif
