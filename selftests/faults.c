// SPDX-License-Identifier: GPL-2.0
/*
 * Error paths under allocation failure: every slab allocation inside one
 * step (open, alloc with its owner and handle, export with its event ring,
 * import with its mapping record, a second file's subscription to the
 * dma-buf with its ring, LIST's snapshot with attachments and allocations,
 * revoke, debugfs
 * snapshots, free) is failed in turn
 * with fail-nth, and the step must fail with a specific errno or succeed,
 * and leave the pool whole.  A reset with several pinned exports stays
 * within one revoke_timeout_ms whichever allocation fails.  kmemleak and
 * KASAN judge the rest.  Needs a kernel with CONFIG_FAILSLAB (the debug
 * kernel); skips elsewhere.
 */
#include "kselftest_harness.h"
#include "pd_test.h"

/*
 * Not among them: a kernel vmap of a revoked export (its scratch mapping
 * allocates), because every kernel's dma_buf_vmap() WARNs on any exporter
 * failure, an injected one too.
 */
enum step {
	S_OPEN, S_ALLOC, S_EXPORT, S_IMPORT, S_SUBSCRIBE, S_LIST, S_REVOKE, S_DEBUGFS,
	S_FREE, S_NR
};
static const char * const step_name[S_NR] = {
	"open", "alloc", "export", "import", "subscribe", "list", "revoke", "debugfs",
	"free",
};

/* Every debugfs file of the device, whole; 0 or the positive errno. */
static int read_debugfs(void)
{
	static const char * const files[] = { "summary", "allocations", "exports", "attachments" };
	char path[128], buf[4096];
	unsigned int i;
	ssize_t n;
	int f;

	for (i = 0; i < 4; i++) {
		snprintf(path, sizeof(path), "/sys/kernel/debug/peerdirect/peerdirect0/%s", files[i]);
		f = open(path, O_RDONLY);
		if (f < 0)
			return errno;
		while ((n = read(f, buf, sizeof(buf))) > 0)
			;
		close(f);
		if (n < 0)
			return errno;
	}
	return 0;
}

static int write_str(const char *path, const char *s)
{
	int f = open(path, O_WRONLY), ok;

	if (f < 0)
		return -errno;
	ok = write(f, s, strlen(s)) == (ssize_t)strlen(s);
	close(f);
	return ok ? 0 : -EIO;
}

static int arm(int nth)
{
	char buf[16];

	snprintf(buf, sizeof(buf), "%d", nth);
	return write_str("/proc/thread-self/fail-nth", buf);
}

/* Non-zero when the armed failure was never reached. */
static int disarm(void)
{
	char buf[16] = "";
	int f = open("/proc/thread-self/fail-nth", O_RDWR), left;

	if (f < 0)
		return -1;
	if (read(f, buf, sizeof(buf) - 1) < 0)
		buf[0] = 0;
	left = atoi(buf);
	if (write(f, "0", 1) != 1)
		left = -1;
	close(f);
	return left;
}

static int clean_errno(int e)
{
	return e == ENOMEM || e == ENFILE || e == ENOSPC;
}

struct state {
	int fd, d, imp, sub;
	const struct pdti_device *pci;	/* the importer's device, or NULL */
	uint32_t pinned;		/* pd_pinned_flags() */
	int64_t h;
	uint64_t page;
};

/* Runs @s; returns 0 or the positive errno it failed with. */
static int run_step(struct state *st, enum step s)
{
	int ret;

	switch (s) {
	case S_OPEN:
		st->fd = pd_open(PD_DEV0);
		return st->fd < 0 ? errno : 0;
	case S_ALLOC:
		st->h = pd_alloc(st->fd, 2 * st->page);
		return st->h < 0 ? (int)-st->h : 0;
	case S_EXPORT:
		st->d = pd_export(st->fd, st->h, 0, 2 * st->page);
		return st->d < 0 ? -st->d : 0;
	case S_IMPORT:
		st->imp = pdti_open_as(st->pci);
		if (st->imp < 0)
			return -st->imp;
		ret = pdti_import(st->imp, st->d, st->pinned | PDTI_NO_VERIFY, 0);
		return -ret;
	case S_SUBSCRIBE: {
		struct peerdirect_subscribe sb = { .argsz = sizeof(sb), .fd = st->d, .cookie = 7 };

		st->sub = pd_open(PD_DEV0);
		if (st->sub < 0)
			return errno;
		return ioctl(st->sub, PEERDIRECT_IOCTL_SUBSCRIBE, &sb) ? errno : 0;
	}
	case S_LIST: {
		struct peerdirect_export_info ei[4];
		struct peerdirect_attach_info ai[4];
		struct peerdirect_alloc_info mi[4];
		struct peerdirect_list l = {
			.argsz = sizeof(l),
			.flags = PEERDIRECT_LIST_ATTACHMENTS | PEERDIRECT_LIST_ALLOCATIONS,
			.export_size = sizeof(ei[0]), .attach_size = sizeof(ai[0]),
			.exports = (uintptr_t)ei, .attachments = (uintptr_t)ai,
			.nr_exports = 4, .nr_attachments = 4,
			.allocation_size = sizeof(mi[0]), .allocations = (uintptr_t)mi,
			.nr_allocations = 4,
		};

		if (ioctl(st->fd, PEERDIRECT_IOCTL_LIST, &l))
			return errno;
		/* What succeeded is whole: our allocation, export and importer. */
		return l.nr_exports == 1 && l.nr_attachments == 1 &&
		       l.nr_allocations == 1 ? 0 : EPROTO;
	}
	case S_REVOKE:
		return -pd_revoke(st->fd, PEERDIRECT_REVOKE_ALLOC, st->h, 0, NULL);
	case S_DEBUGFS:
		return read_debugfs();
	case S_FREE:
		return -pd_free(st->fd, st->h);
	default:
		return EINVAL;
	}
}

static void teardown_state(struct state *st)
{
	if (st->sub >= 0)
		close(st->sub);
	if (st->imp >= 0)
		close(st->imp);
	if (st->d >= 0)
		close(st->d);
	if (st->fd >= 0)
		close(st->fd);
}

FIXTURE(faults) {
	struct peerdirect_query q;
	struct pdti_device pci;
	bool has_pci;
	bool supported;
};

FIXTURE_SETUP(faults)
{
	int fd;

	/* 6.1's harness still runs the test after a SKIP in setup */
	self->supported = !access("/proc/thread-self/fail-nth", F_OK) &&
			  !access("/sys/kernel/debug/failslab", F_OK);
	if (!self->supported)
		SKIP(return, "kernel without CONFIG_FAILSLAB / fail-nth");
	/* fail GFP_KERNEL allocations too, quietly (no stack dumps) */
	ASSERT_EQ(0, write_str("/sys/kernel/debug/failslab/ignore-gfp-wait", "N"));
	ASSERT_EQ(0, write_str("/sys/kernel/debug/failslab/verbose", "0"));
	fd = pd_open(PD_DEV0);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, pd_query(fd, &self->q));
	close(fd);
	/* resolved here: sysfs lookups would allocate inside the steps */
	self->has_pci = !pd_pci_function("peerdirect0", &self->pci);
}

FIXTURE_TEARDOWN(faults)
{
}

TEST_F(faults, every_allocation_failure_is_clean)
{
	int s, nth, injected = 0;

	if (!self->supported)
		return;
	for (s = 0; s < S_NR; s++) {
		for (nth = 1; nth < 200; nth++) {
			struct state st = { .fd = -1, .d = -1, .imp = -1, .sub = -1, .h = -1,
					    .page = self->q.page_size,
					    .pci = self->has_pci ? &self->pci : NULL,
					    .pinned = pd_pinned_flags(&self->q) };
			struct peerdirect_query q;
			int i, err = 0, left, check;

			for (i = 0; i < s && !err; i++)
				err = run_step(&st, i);
			ASSERT_EQ(0, err) TH_LOG("setup step %s: %s", step_name[i - 1], strerror(err));
			ASSERT_EQ(0, arm(nth));
			err = run_step(&st, s);
			left = disarm();
			if (err)
				EXPECT_TRUE(clean_errno(err))
					TH_LOG("%s with allocation %d failed: %s", step_name[s], nth, strerror(err));
			teardown_state(&st);
			check = pd_open(PD_DEV0);
			ASSERT_LE(0, check);
			ASSERT_EQ(0, pd_query(check, &q));
			close(check);
			EXPECT_EQ(self->q.mem_size, q.mem_free)
				TH_LOG("%s with allocation %d failed leaked device memory", step_name[s], nth);
			if (left != 0)
				break;	/* the step needs fewer than nth allocations */
			injected++;
		}
	}
	TH_LOG("%d allocation failures injected", injected);
	EXPECT_LT(10, injected);
}

/*
 * A reset with several pinned exports waits for them all within one
 * revoke_timeout_ms, whichever allocation fails along the way: the walk
 * allocates nothing, so no failure can turn it into one wait per export.
 */
TEST_F(faults, pinned_exports_revoked_within_one_timeout)
{
	const int nr = 3, timeout = 300;
	char saved[32], restore_rr[8] = "";
	int nth, left = 1;

	if (!self->supported)
		return;
	ASSERT_EQ(0, pd_param_read("revoke_timeout_ms", saved, sizeof(saved)));
	ASSERT_EQ(0, pd_param_write("revoke_timeout_ms", "300"));
	if (self->q.features & PEERDIRECT_FEAT_REVOCABLE_ONLY) {
		strcpy(restore_rr, "1");
		ASSERT_EQ(0, pd_param_write("require_revocable", "0"));
	}
	for (nth = 1; nth < 50 && left; nth++) {
		struct peerdirect_reset rs = { 0 };
		int fd = pd_open(PD_DEV0), d[3], imp[3], i, ret;
		int64_t h;
		long long t0, dt;

		ASSERT_LE(0, fd);
		h = pd_alloc(fd, self->q.page_size);
		ASSERT_LT(0, h);
		for (i = 0; i < nr; i++) {
			d[i] = pd_export(fd, h, 0, self->q.page_size);
			ASSERT_LE(0, d[i]);
			imp[i] = pdti_open_as(self->has_pci ? &self->pci : NULL);
			ASSERT_LE(0, imp[i]);
			ASSERT_EQ(0, pdti_import(imp[i], d[i], PDTI_PINNED | PDTI_NO_VERIFY, 0));
		}
		t0 = pd_now_ms();
		ASSERT_EQ(0, arm(nth));
		ret = pd_reset(fd, &rs);
		left = disarm();
		dt = pd_now_ms() - t0;
		EXPECT_EQ(0, ret) TH_LOG("reset with allocation %d failed: %s", nth, strerror(-ret));
		EXPECT_EQ(nr, rs.revoked);
		EXPECT_EQ(nr, rs.pending);
		EXPECT_GT(2 * timeout, dt) TH_LOG("allocation %d failed: %lld ms for %d pinned exports",
						  nth, dt, nr);
		for (i = 0; i < nr; i++) {
			close(imp[i]);
			close(d[i]);
		}
		close(fd);
	}
	pd_param_write("revoke_timeout_ms", saved);
	if (restore_rr[0])
		pd_param_write("require_revocable", restore_rr);
}

TEST_HARNESS_MAIN
