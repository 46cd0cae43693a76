// SPDX-License-Identifier: GPL-2.0
/*
 * Races, each for a bounded time (PD_STRESS_MS per test, default 2000):
 * CPU faults against REVOKE and RESET, mmap against revoke, importer
 * attach and map against revoke, EXPORT against FREE, dma-buf close
 * against RESET, debugfs reads against release, RESET against EXPORT.
 * Every byte read through a CPU mapping or an importer's DMA addresses is
 * checked against the pattern written, every call must succeed or fail
 * with an errno the uapi names, and afterwards the device is whole: pool,
 * quota, no export, no importer mapping, nothing quarantined.  (Module
 * unload and kmemleak are checked by run-in-vm.sh after all tests.)
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include "kselftest_harness.h"
#include "pd_test.h"

#define NPAGES	4

struct race {
	int fd;
	struct peerdirect_query q;
	int64_t h;
	size_t len;
	long long end;
	int stop;
	/* counters, for the log */
	unsigned long reads, faults, refused, revokes, resets, imports, exports, frees;
	unsigned long checked;		/* RESET vs EXPORT: exports seen revoked */
	unsigned long resets_started;	/* before each RESET; resets: after */
	unsigned long bad;		/* pattern mismatches and unexpected errnos */
	char what[160];			/* the first bad thing seen */
	pthread_mutex_t lock;
	int64_t slot;			/* EXPORT vs FREE: the handle being raced */
	int keepers_done;		/* RESET vs EXPORT */
	uint32_t pinned;
};

static long long budget_ms(void)
{
	const char *s = getenv("PD_STRESS_MS");

	return s ? pd_arg_ull("PD_STRESS_MS", s, 1, 3600 * 1000) : 2000;
}

static void race_bad(struct race *r, const char *fmt, long a, long b)
{
	pthread_mutex_lock(&r->lock);
	if (!r->bad++)
		snprintf(r->what, sizeof(r->what), fmt, a, b);
	pthread_mutex_unlock(&r->lock);
}

static int running(struct race *r)
{
	return !__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE) && pd_now_ms() < r->end;
}

/* ---- SIGBUS from a revoked CPU mapping, per thread -------------------- */

/* volatile: the stores around the reads must not be merged away */
static __thread sigjmp_buf *volatile bus_env;

static void on_sigbus(int sig)
{
	if (bus_env)
		siglongjmp(*bus_env, 1);
	_exit(99);
}

/*
 * Reads every word of @p, which is word @first of the buffer; 0, 1 after
 * SIGBUS, -1 on a pattern mismatch.
 */
static int read_checked(struct race *r, const volatile uint32_t *p, size_t len,
			size_t first)
{
	sigjmp_buf env;
	uint32_t v;
	size_t i;

	if (sigsetjmp(env, 1)) {
		bus_env = NULL;
		return 1;
	}
	bus_env = &env;
	for (i = 0; i < len / 4; i++) {
		v = p[i];
		if (v != (77u ^ (uint32_t)((first + i) * 2654435761u))) {
			bus_env = NULL;
			race_bad(r, "word %ld read %#lx", (long)(first + i), (long)v);
			return -1;
		}
	}
	bus_env = NULL;
	return 0;
}

static void race_setup(struct __test_metadata *_metadata, struct race *r)
{
	struct sigaction sa = { .sa_handler = on_sigbus, .sa_flags = SA_NODEFER };
	void *p;
	int d;

	memset(r, 0, sizeof(*r));
	pthread_mutex_init(&r->lock, NULL);
	ASSERT_EQ(0, sigaction(SIGBUS, &sa, NULL));
	r->fd = pd_open(PD_DEV0);
	ASSERT_LE(0, r->fd);
	ASSERT_EQ(0, pd_query(r->fd, &r->q));
	ASSERT_EQ(r->q.mem_size, r->q.mem_free) TH_LOG("device memory held by an earlier test");
	r->pinned = pd_pinned_flags(&r->q);
	r->len = NPAGES * r->q.page_size;
	r->h = pd_alloc(r->fd, r->len);
	ASSERT_LT(0, r->h);
	d = pd_export(r->fd, r->h, 0, r->len);
	ASSERT_LE(0, d);
	p = mmap(NULL, r->len, PROT_READ | PROT_WRITE, MAP_SHARED, d, 0);
	ASSERT_NE(MAP_FAILED, p);
	pd_fill(p, r->len, 77);
	munmap(p, r->len);
	close(d);
	r->end = pd_now_ms() + budget_ms();
}

/* The device after the race: nothing left, nothing leaked. */
static void race_check(struct __test_metadata *_metadata, struct race *r)
{
	struct peerdirect_query q;

	TH_LOG("reads %lu faults %lu refused %lu revokes %lu resets %lu imports %lu exports %lu frees %lu checked %lu",
	       r->reads, r->faults, r->refused, r->revokes, r->resets, r->imports,
	       r->exports, r->frees, r->checked);
	EXPECT_EQ(0, r->bad) TH_LOG("%lu bad, first: %s", r->bad, r->what);
	if (r->h > 0)
		pd_free(r->fd, r->h);
	close(r->fd);
	/* releases run from task work and RCU: give them a moment */
	usleep(50 * 1000);
	r->fd = pd_open(PD_DEV0);
	ASSERT_LE(0, r->fd);
	ASSERT_EQ(0, pd_query(r->fd, &q));
	EXPECT_EQ(q.mem_size, q.mem_free);
	EXPECT_EQ(0, q.quota_used);
	EXPECT_EQ(0, pd_debugfs_value("peerdirect0", "exports_live"));
	EXPECT_EQ(0, pd_debugfs_value("peerdirect0", "quarantined"));
	EXPECT_EQ(0, pd_debugfs_value("peerdirect0", "importer_mappings"));
	EXPECT_EQ(0, pd_debugfs_value("peerdirect0", "allocations"));
	close(r->fd);
}

static void expect_errno(struct race *r, const char *what, int err, int ok1, int ok2)
{
	if (err && err != ok1 && err != ok2)
		race_bad(r, what, err, 0);
}

/* ---- workers ---------------------------------------------------------- */

static void *cpu_reader(void *arg)
{
	struct race *r = arg;

	while (running(r)) {
		int d = pd_export(r->fd, r->h, 0, r->len), ret;
		void *p;

		if (d < 0) {
			expect_errno(r, "export: %ld", -d, ENOSPC, 0);
			continue;
		}
		p = mmap(NULL, r->len, PROT_READ, MAP_SHARED, d, 0);
		if (p == MAP_FAILED) {
			expect_errno(r, "mmap: %ld", errno, ENODEV, 0);
			__atomic_add_fetch(&r->refused, 1, __ATOMIC_RELAXED);
		} else {
			ret = read_checked(r, p, r->len, 0);
			if (ret == 1)
				__atomic_add_fetch(&r->faults, 1, __ATOMIC_RELAXED);
			else if (!ret)
				__atomic_add_fetch(&r->reads, 1, __ATOMIC_RELAXED);
			munmap(p, r->len);
		}
		close(d);
	}
	return NULL;
}

static void *revoker(void *arg)
{
	struct race *r = arg;
	unsigned int i = 0;

	while (running(r)) {
		int ret;

		if (++i % 3) {
			ret = pd_revoke(r->fd, PEERDIRECT_REVOKE_ALLOC, r->h, 0, NULL);
			expect_errno(r, "revoke: %ld", -ret, 0, 0);
			__atomic_add_fetch(&r->revokes, 1, __ATOMIC_RELAXED);
		} else {
			ret = pd_reset(r->fd, NULL);
			expect_errno(r, "reset: %ld", -ret, 0, 0);
			__atomic_add_fetch(&r->resets, 1, __ATOMIC_RELAXED);
		}
		usleep(i % 7 * 100);
	}
	return NULL;
}

static void *mapper(void *arg)
{
	struct race *r = arg;

	while (running(r)) {
		int d = pd_export(r->fd, r->h, 0, r->len), i;
		void *p[4];

		if (d < 0) {
			expect_errno(r, "export: %ld", -d, ENOSPC, 0);
			continue;
		}
		for (i = 0; i < 4; i++) {
			p[i] = mmap(NULL, r->q.page_size, PROT_READ | PROT_WRITE, MAP_SHARED, d,
				    i * r->q.page_size);
			if (p[i] == MAP_FAILED) {
				expect_errno(r, "mmap: %ld", errno, ENODEV, 0);
				__atomic_add_fetch(&r->refused, 1, __ATOMIC_RELAXED);
				continue;
			}
			/* the first words of page i */
			if (read_checked(r, p[i], 64, i * r->q.page_size / 4) == 1)
				__atomic_add_fetch(&r->faults, 1, __ATOMIC_RELAXED);
			else
				__atomic_add_fetch(&r->reads, 1, __ATOMIC_RELAXED);
		}
		for (i = 0; i < 4; i++)
			if (p[i] != MAP_FAILED)
				munmap(p[i], r->q.page_size);
		close(d);
	}
	return NULL;
}

static void *importer(void *arg)
{
	struct race *r = arg;
	unsigned int i = 0;
	uint32_t *buf = malloc(r->len);

	while (buf && running(r)) {
		int d = pd_export(r->fd, r->h, 0, r->len), imp, ret;
		uint32_t kind = ++i % 2 ? PDTI_DYNAMIC : r->pinned;

		if (d < 0) {
			expect_errno(r, "export: %ld", -d, ENOSPC, 0);
			continue;
		}
		imp = pdti_open("peerdirect0");
		if (imp < 0) {
			race_bad(r, "importer open: %ld", -imp, 0);
			close(d);
			break;
		}
		ret = pdti_import(imp, d, kind | PDTI_NO_VERIFY, 0);
		if (!ret) {
			__atomic_add_fetch(&r->imports, 1, __ATOMIC_RELAXED);
			ret = pdti_read(imp, 0, buf, r->len);
			if (!ret) {
				if (pd_check(buf, r->len, 77))
					race_bad(r, "importer read: byte %ld", (long)pd_check(buf, r->len, 77) - 1, 0);
				__atomic_add_fetch(&r->reads, 1, __ATOMIC_RELAXED);
			} else {
				/* unmapped by a revoke in between */
				expect_errno(r, "importer read: %ld", -ret, ENODEV, 0);
			}
			ret = ioctl(imp, PDTI_IOCTL_REMAP) ? errno : 0;
			expect_errno(r, "remap: %ld", ret, ENODEV, 0);
		} else {
			expect_errno(r, "import: %ld", -ret, ENODEV, 0);
			__atomic_add_fetch(&r->refused, 1, __ATOMIC_RELAXED);
		}
		close(imp);
		close(d);
	}
	free(buf);
	return NULL;
}

static void run(struct race *r, void *(*fn[])(void *), int n)
{
	pthread_t t[8];
	int i;

	for (i = 0; i < n; i++)
		pthread_create(&t[i], NULL, fn[i], r);
	for (i = 0; i < n; i++)
		pthread_join(t[i], NULL);
}

static void set_timeout_ms(const char *ms, char *saved, size_t len)
{
	if (saved)
		pd_param_read("revoke_timeout_ms", saved, len);
	pd_param_write("revoke_timeout_ms", ms);
}

/* 6.1's harness: 30 s per test unless said otherwise. */
#define STRESS_TIMEOUT	600

FIXTURE(stress) {
	struct race r;
	char timeout[32];
};

FIXTURE_SETUP(stress)
{
	/* pinned importers make every revoke wait: keep that short */
	set_timeout_ms("20", self->timeout, sizeof(self->timeout));
	race_setup(_metadata, &self->r);
}

FIXTURE_TEARDOWN(stress)
{
	set_timeout_ms(self->timeout, NULL, 0);
}

TEST_F_TIMEOUT(stress, cpu_faults_vs_revoke_and_reset, STRESS_TIMEOUT)
{
	void *(*fn[])(void *) = { cpu_reader, cpu_reader, revoker };

	run(&self->r, fn, 3);
	EXPECT_LT(0, self->r.reads + self->r.faults);
	race_check(_metadata, &self->r);
}

TEST_F_TIMEOUT(stress, mmap_vs_revoke, STRESS_TIMEOUT)
{
	void *(*fn[])(void *) = { mapper, mapper, revoker };

	run(&self->r, fn, 3);
	race_check(_metadata, &self->r);
}

TEST_F_TIMEOUT(stress, importer_attach_and_map_vs_revoke, STRESS_TIMEOUT)
{
	void *(*fn[])(void *) = { importer, importer, revoker };

	run(&self->r, fn, 3);
	EXPECT_LT(0, self->r.imports);
	race_check(_metadata, &self->r);
}

/* EXPORT against FREE: one handle at a time, allocated, exported, freed. */
static void *allocator(void *arg)
{
	struct race *r = arg;

	while (running(r)) {
		int64_t h;

		if (__atomic_load_n(&r->slot, __ATOMIC_ACQUIRE) > 0) {
			sched_yield();
			continue;
		}
		h = pd_alloc(r->fd, r->q.page_size);
		if (h < 0) {
			expect_errno(r, "alloc: %ld", -h, EDQUOT, ENOMEM);
			continue;
		}
		__atomic_store_n(&r->slot, h, __ATOMIC_RELEASE);
	}
	return NULL;
}

static void *exporter(void *arg)
{
	struct race *r = arg;

	while (running(r)) {
		int64_t h = __atomic_load_n(&r->slot, __ATOMIC_ACQUIRE);
		int d;

		if (h <= 0)
			continue;
		d = pd_export(r->fd, h, 0, r->q.page_size);
		if (d < 0) {
			expect_errno(r, "export: %ld", -d, ENOENT, ENOSPC);
			continue;
		}
		__atomic_add_fetch(&r->exports, 1, __ATOMIC_RELAXED);
		if (pd_sync(d, DMA_BUF_SYNC_START | DMA_BUF_SYNC_READ) == 0)
			pd_sync(d, DMA_BUF_SYNC_END | DMA_BUF_SYNC_READ);
		close(d);
	}
	return NULL;
}

static void *freer(void *arg)
{
	struct race *r = arg;

	while (running(r)) {
		int64_t h = __atomic_exchange_n(&r->slot, 0, __ATOMIC_ACQ_REL);
		int ret;

		if (h <= 0) {
			sched_yield();
			continue;
		}
		usleep(h % 5 * 50);
		ret = pd_free(r->fd, h);
		expect_errno(r, "free: %ld", -ret, 0, 0);
		__atomic_add_fetch(&r->frees, 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

TEST_F_TIMEOUT(stress, export_vs_free, STRESS_TIMEOUT)
{
	void *(*fn[])(void *) = { allocator, exporter, exporter, freer };

	run(&self->r, fn, 4);
	if (self->r.slot > 0)
		pd_free(self->r.fd, self->r.slot);
	EXPECT_LT(0, self->r.frees);
	race_check(_metadata, &self->r);
}

/* Closing dma-bufs (some imported) against RESET. */
static void *closer(void *arg)
{
	struct race *r = arg;
	unsigned int i = 0;

	while (running(r)) {
		int d = pd_export(r->fd, r->h, 0, r->len), imp = -1;

		if (d < 0) {
			expect_errno(r, "export: %ld", -d, ENOSPC, 0);
			continue;
		}
		__atomic_add_fetch(&r->exports, 1, __ATOMIC_RELAXED);
		if (++i % 4 == 0) {
			imp = pdti_open("peerdirect0");
			if (imp >= 0 && !pdti_import(imp, d, PDTI_DYNAMIC | PDTI_NO_VERIFY, 0))
				__atomic_add_fetch(&r->imports, 1, __ATOMIC_RELAXED);
		}
		/* the dma-buf goes first, the importer's reference last */
		close(d);
		if (imp >= 0)
			close(imp);
	}
	return NULL;
}

static void *resetter(void *arg)
{
	struct race *r = arg;

	while (running(r)) {
		int ret;

		__atomic_add_fetch(&r->resets_started, 1, __ATOMIC_ACQ_REL);
		ret = pd_reset(r->fd, NULL);
		expect_errno(r, "reset: %ld", -ret, 0, 0);
		__atomic_add_fetch(&r->resets, 1, __ATOMIC_RELEASE);
	}
	return NULL;
}

TEST_F_TIMEOUT(stress, dmabuf_close_vs_reset, STRESS_TIMEOUT)
{
	void *(*fn[])(void *) = { closer, closer, resetter };

	run(&self->r, fn, 3);
	race_check(_metadata, &self->r);
}

/* debugfs readers against exports, names and releases. */
static void *debugfs_reader(void *arg)
{
	static const char * const files[] = { "summary", "allocations", "exports", "attachments" };
	struct race *r = arg;
	char path[128], buf[4096];
	unsigned int i = 0;

	while (running(r)) {
		int f;

		snprintf(path, sizeof(path), "/sys/kernel/debug/peerdirect/peerdirect0/%s",
			 files[i++ % 4]);
		f = open(path, O_RDONLY | O_CLOEXEC);
		if (f < 0) {
			race_bad(r, "debugfs open: %ld", errno, 0);
			break;
		}
		while (read(f, buf, sizeof(buf)) > 0)
			;
		close(f);
		__atomic_add_fetch(&r->reads, 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

static void *churner(void *arg)
{
	struct race *r = arg;

	while (running(r)) {
		int fd = pd_open(PD_DEV0), d, imp;
		int64_t h;

		if (fd < 0) {
			race_bad(r, "open: %ld", errno, 0);
			break;
		}
		h = pd_alloc(fd, r->q.page_size);
		if (h > 0) {
			d = pd_export(fd, h, 0, r->q.page_size);
			if (d >= 0) {
				ioctl(d, DMA_BUF_SET_NAME_B, "churn\n\tname");
				imp = pdti_open("peerdirect0");
				if (imp >= 0)
					pdti_import(imp, d, PDTI_DYNAMIC | PDTI_NO_VERIFY, 0);
				__atomic_add_fetch(&r->exports, 1, __ATOMIC_RELAXED);
				close(d);
				if (imp >= 0)
					close(imp);
			}
			if (h % 2)
				pd_free(fd, h);
		}
		close(fd);
	}
	return NULL;
}

TEST_F_TIMEOUT(stress, debugfs_reads_vs_release, STRESS_TIMEOUT)
{
	void *(*fn[])(void *) = { debugfs_reader, debugfs_reader, churner, churner };

	run(&self->r, fn, 4);
	EXPECT_LT(0, self->r.reads);
	race_check(_metadata, &self->r);
}

/*
 * RESET against EXPORT.  EXPORT waits while a reset runs, so an export
 * that has returned is revoked by every reset that starts after that.
 * Each keeper notes how many resets had started when its export returned
 * (read after it returned: an export released by the end of reset N may
 * still read N as started, never less); one resetter runs them one at a
 * time, so once N + 1 have completed, reset N + 1 started after the
 * export and must have revoked it (SYNC ENODEV).  An export made while a
 * reset walks the device and left out of it fails that.  The final reset,
 * after the exporters stopped, must revoke every export alive.
 */
struct kept {
	int fd;
	unsigned long started;	/* resets started when the export returned */
};

static void check_kept(struct race *r, struct kept *k)
{
	if (k->fd < 0 || __atomic_load_n(&r->resets, __ATOMIC_ACQUIRE) < k->started + 1)
		return;
	if (pd_sync(k->fd, DMA_BUF_SYNC_START | DMA_BUF_SYNC_READ) != -ENODEV)
		race_bad(r, "export %ld survived reset %ld, which started after it was made",
			 k->fd, (long)k->started + 1);
	else
		__atomic_add_fetch(&r->checked, 1, __ATOMIC_RELAXED);
	close(k->fd);
	k->fd = -1;
}

static void *keeper(void *arg)
{
	struct race *r = arg;
	struct kept held[4] = { { -1 }, { -1 }, { -1 }, { -1 } };
	unsigned int i = 0;

	while (running(r)) {
		struct kept *slot = &held[i++ % 4];
		int d;

		check_kept(r, slot);
		if (slot->fd >= 0)
			close(slot->fd);
		d = pd_export(r->fd, r->h, 0, r->q.page_size);
		slot->started = __atomic_load_n(&r->resets_started, __ATOMIC_ACQUIRE);
		if (d < 0)
			expect_errno(r, "export: %ld", -d, ENOSPC, 0);
		else
			__atomic_add_fetch(&r->exports, 1, __ATOMIC_RELAXED);
		slot->fd = d;
	}
	/* the last reset comes after every export here: it revokes them all */
	__atomic_add_fetch(&r->keepers_done, 1, __ATOMIC_ACQ_REL);
	while (!__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE))
		usleep(1000);
	for (i = 0; i < 4; i++) {
		if (held[i].fd < 0)
			continue;
		if (pd_sync(held[i].fd, DMA_BUF_SYNC_START | DMA_BUF_SYNC_READ) != -ENODEV)
			race_bad(r, "export %ld survived the final reset", held[i].fd, 0);
		close(held[i].fd);
	}
	return NULL;
}

static void *final_resetter(void *arg)
{
	struct race *r = arg;

	resetter(arg);
	while (__atomic_load_n(&r->keepers_done, __ATOMIC_ACQUIRE) < 2)
		usleep(1000);
	pd_reset(r->fd, NULL);
	__atomic_store_n(&r->stop, 1, __ATOMIC_RELEASE);
	return NULL;
}

TEST_F_TIMEOUT(stress, reset_vs_export, STRESS_TIMEOUT)
{
	void *(*fn[])(void *) = { keeper, keeper, final_resetter };

	run(&self->r, fn, 3);
	EXPECT_LT(0, self->r.resets);
	EXPECT_LT(0, self->r.checked) TH_LOG("no export outlived a reset to be checked");
	race_check(_metadata, &self->r);
}

TEST_HARNESS_MAIN
