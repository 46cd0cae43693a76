/* SPDX-License-Identifier: MIT */
/*
 * pd-bench lifecycle: the median cost of each step of one dma-buf's life,
 * because registration and teardown must be profiled as carefully as the
 * transfer.  On device:N the steps are the module's; on memfd (a host
 * stand-in) there is no export or revocation, and the library's share of a
 * revocation (invalidating the entry and tearing down its registration) is
 * driven through the cache directly.
 */
#ifndef PD_TOOLS_BENCH_LIFECYCLE_H
#define PD_TOOLS_BENCH_LIFECYCLE_H

#include <sys/stat.h>

#include "bench_report.h"
#include "dmabuf_source.h"
#include "peerdirect_ext.h"

enum lc_step {
	LC_ALLOC, LC_EXPORT, LC_MISS, LC_HIT_FD, LC_IMPORT, LC_HIT_HANDLE, LC_DEREG,
	LC_REVOKE_IMPORTER, LC_TEARDOWN, LC_REVOKE_ALONE, LC_FREE, LC_STEPS,
};

static const char *const lc_names[LC_STEPS] = {
	"alloc", "export", "reg miss", "reg hit", "import", "hit handle", "dereg",
	"revoke+imp", "inval+teardn", "revoke", "free",
};

/* One dma-buf of len bytes: memfd, or an allocation and export of dev. */
struct lc_buf {
	int fd;
	uint64_t handle, export_id;
};

static inline int lc_alloc(struct pd_device *dev, size_t len, struct lc_buf *b,
			   uint64_t *t_alloc, uint64_t *t_export)
{
	struct pd_export_info e;
	uint64_t t0 = now_ns();
	int ret;

	if (!dev) {
		b->fd = memfd_create("pd-bench-lifecycle", MFD_CLOEXEC);
		if (b->fd < 0 || ftruncate(b->fd, (off_t)len))
			return -errno;
		*t_alloc = now_ns() - t0;
		return 0;
	}
	ret = pd_device_alloc(dev, len, &b->handle, NULL);
	*t_alloc = now_ns() - t0;
	if (ret)
		return ret;
	t0 = now_ns();
	ret = pd_device_export(dev, b->handle, 0, len, PD_EXPORT_RDWR | PD_EXPORT_CLOEXEC, &e);
	*t_export = now_ns() - t0;
	b->fd = e.fd;
	b->export_id = e.export_id;
	return ret;
}

static inline uint64_t lc_free(struct pd_device *dev, struct lc_buf *b)
{
	uint64_t t0 = now_ns();

	close(b->fd);
	if (dev)
		pd_device_free(dev, b->handle);
	return now_ns() - t0;
}

/* One pass over every step; t[step] in ns, UINT64_MAX where it has none. */
static inline int lc_once(struct pd_fabric *fab, struct pd_device *dev, size_t len,
			  uint64_t *t)
{
	struct lc_buf b = { .fd = -1 }, alone = { .fd = -1 };
	struct pd_dmabuf *imp;
	struct pd_mr *mr;
	struct stat st;
	uint64_t t0, unused;
	int ret, i;

	for (i = 0; i < LC_STEPS; i++)
		t[i] = UINT64_MAX;
	ret = lc_alloc(dev, len, &b, &t[LC_ALLOC], &t[LC_EXPORT]);
	if (ret)
		return ret;
	t0 = now_ns();
	ret = pd_mr_reg_dmabuf(fab, b.fd, 0, len, 0, &mr);
	t[LC_MISS] = now_ns() - t0;
	if (ret)
		return ret;
	pd_mr_dereg(mr);
	t0 = now_ns();
	ret = pd_mr_reg_dmabuf(fab, b.fd, 0, len, 0, &mr);
	t[LC_HIT_FD] = now_ns() - t0;
	if (ret)
		return ret;
	t0 = now_ns();
	pd_mr_dereg(mr);
	t[LC_DEREG] = now_ns() - t0;
	t0 = now_ns();
	ret = pd_dmabuf_import(fab, b.fd, &imp);
	t[LC_IMPORT] = now_ns() - t0;
	if (ret)
		return ret;
	t0 = now_ns();
	ret = pd_mr_reg_imported(imp, 0, len, 0, &mr);
	t[LC_HIT_HANDLE] = now_ns() - t0;
	pd_dmabuf_release(imp);
	if (ret)
		return ret;
	/* The registration is held (an importer) while the buffer goes. */
	if (dev) {
		t0 = now_ns();
		ret = pd_device_revoke(dev, PD_REVOKE_EXPORT, b.export_id, NULL, NULL);
		t[LC_REVOKE_IMPORTER] = now_ns() - t0;
		t0 = now_ns();
		pd_fabric_poll_events(fab);
	} else {
		fstat(b.fd, &st);
		t0 = now_ns();
		pd_fabric_ext_invalidate_dmabuf(fab, st.st_dev, st.st_ino);
	}
	pd_mr_dereg(mr);
	t[LC_TEARDOWN] = now_ns() - t0;
	if (ret)
		return ret;
	t[LC_FREE] = lc_free(dev, &b);
	if (dev) {
		ret = lc_alloc(dev, len, &alone, &unused, &unused);
		if (ret)
			return ret;
		t0 = now_ns();
		ret = pd_device_revoke(dev, PD_REVOKE_EXPORT, alone.export_id, NULL, NULL);
		t[LC_REVOKE_ALONE] = now_ns() - t0;
		lc_free(dev, &alone);
		pd_fabric_poll_events(fab);
	}
	return ret;
}

static inline int lc_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Medians in µs, one row per size. */
static inline int bench_lifecycle(struct pd_fabric *fab, struct pd_device *dev,
				  const size_t *sizes, int nsizes, int repeats)
{
	uint64_t t[LC_STEPS][64], one[LC_STEPS];
	int i, k, s, ret;

	if (repeats > 64)
		repeats = 64;
	printf("%10s", "size");
	for (i = 0; i < LC_STEPS; i++)
		printf(" %12s", lc_names[i]);
	printf("   (median us of %d)\n", repeats);
	for (s = 0; s < nsizes; s++) {
		for (k = 0; k < repeats; k++) {
			ret = lc_once(fab, dev, sizes[s], one);
			if (ret)
				return ret;
			for (i = 0; i < LC_STEPS; i++)
				t[i][k] = one[i];
		}
		printf("%10zu", sizes[s]);
		for (i = 0; i < LC_STEPS; i++) {
			qsort(t[i], (size_t)repeats, sizeof(t[i][0]), lc_cmp);
			if (t[i][repeats / 2] == UINT64_MAX)
				printf(" %12s", "-");
			else
				printf(" %12.2f", (double)t[i][repeats / 2] / 1000.0);
		}
		printf("\n");
		fflush(stdout);
	}
	return 0;
}

#endif
