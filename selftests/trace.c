// SPDX-License-Identifier: GPL-2.0
/*
 * Trace events (kmod/trace.h) through tracefs, as perf, trace-cmd and
 * bpftrace use them: enable events/peerdirect/, walk one export through
 * its lifecycle (allocate, export, a pinned importer attaches, pins and
 * maps, revoke with its owner's event, release, free), and check that the
 * records name it, in order, with the fields they promise.
 */
#include <sys/mount.h>
#include <sys/stat.h>
#include "kselftest_harness.h"
#include "pd_test.h"

static char tdir[64];

static int tracefs(void)
{
	static const char * const dirs[] = {
		"/sys/kernel/tracing", "/sys/kernel/debug/tracing",
	};
	char path[128];
	unsigned int i;

	for (i = 0; i < 2; i++) {
		snprintf(path, sizeof(path), "%s/events", dirs[i]);
		if (!access(path, F_OK)) {
			snprintf(tdir, sizeof(tdir), "%s", dirs[i]);
			return 0;
		}
	}
	if (mount("nodev", "/sys/kernel/tracing", "tracefs", 0, NULL))
		return -errno;
	snprintf(tdir, sizeof(tdir), "/sys/kernel/tracing");
	return 0;
}

static int twrite(const char *file, const char *val)
{
	char path[160];
	int f, ret = 0;

	snprintf(path, sizeof(path), "%s/%s", tdir, file);
	f = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
	if (f < 0)
		return -errno;
	if (write(f, val, strlen(val)) < 0)
		ret = -errno;
	close(f);
	return ret;
}

/* The whole of a tracefs file, NUL-terminated (caller frees); NULL on error. */
static char *tread(const char *file)
{
	size_t cap = 1 << 16, len = 0;
	char path[160], *buf = malloc(cap);
	ssize_t n;
	int f;

	snprintf(path, sizeof(path), "%s/%s", tdir, file);
	f = open(path, O_RDONLY | O_CLOEXEC);
	if (f < 0 || !buf) {
		free(buf);
		if (f >= 0)
			close(f);
		return NULL;
	}
	while ((n = read(f, buf + len, cap - len - 1)) > 0) {
		len += n;
		if (cap - len < 4096) {
			char *nb = realloc(buf, cap *= 2);

			if (!nb)
				break;
			buf = nb;
		}
	}
	close(f);
	buf[len] = 0;
	return buf;
}

/* The first line at or after @from that has event @ev and text @with. */
static const char *find_line(const char *from, const char *ev, const char *with)
{
	char pat[64];
	const char *p = from;

	snprintf(pat, sizeof(pat), " %s: ", ev);
	while ((p = strstr(p, pat))) {
		const char *eol = strchr(p, '\n'), *w = strstr(p, with);

		if (w && (!eol || w < eol)) {
			while (p > from && p[-1] != '\n')
				p--;
			return p;
		}
		p += strlen(pat);
	}
	return NULL;
}

FIXTURE(trace) {
	int fd;
	struct peerdirect_query q;
};

FIXTURE_SETUP(trace)
{
	int ret;

	self->fd = pd_open(PD_DEV0);
	ASSERT_LE(0, self->fd);
	ASSERT_EQ(0, pd_query(self->fd, &self->q));
	ret = tracefs();
	if (ret)
		SKIP(return, "no tracefs (%s)", strerror(-ret));
	{
		char path[160];

		snprintf(path, sizeof(path), "%s/events/peerdirect", tdir);
		ASSERT_EQ(0, access(path, F_OK));
	}
	ASSERT_EQ(0, twrite("tracing_on", "0"));
	ASSERT_EQ(0, twrite("trace", ""));
	ASSERT_EQ(0, twrite("events/peerdirect/enable", "1"));
	ASSERT_EQ(0, twrite("tracing_on", "1"));
}

FIXTURE_TEARDOWN(trace)
{
	twrite("events/peerdirect/enable", "0");
	close(self->fd);
}

TEST_F(trace, every_event_has_a_format)
{
	static const char * const evs[] = {
		"peerdirect_alloc", "peerdirect_free", "peerdirect_export",
		"peerdirect_export_release", "peerdirect_attach", "peerdirect_detach",
		"peerdirect_pin", "peerdirect_unpin", "peerdirect_map",
		"peerdirect_unmap", "peerdirect_revoke", "peerdirect_revoke_done",
		"peerdirect_event",
	};
	char file[96], *fmt;
	unsigned int i;

	for (i = 0; i < sizeof(evs) / sizeof(evs[0]); i++) {
		snprintf(file, sizeof(file), "events/peerdirect/%s/format", evs[i]);
		fmt = tread(file);
		ASSERT_NE(NULL, fmt) TH_LOG("%s", file);
		EXPECT_NE(NULL, strstr(fmt, "field:int dev;")) TH_LOG("%s", evs[i]);
		free(fmt);
	}
	fmt = tread("events/peerdirect/peerdirect_revoke_done/format");
	ASSERT_NE(NULL, fmt);
	EXPECT_NE(NULL, strstr(fmt, "field:u64 wait_us;"));
	free(fmt);
}

TEST_F(trace, one_exports_lifecycle)
{
	size_t ps = self->q.page_size;
	char id_s[40], h_s[40], timeout[16], *t;
	const char *p, *lrevoke, *ldone, *lmap;
	unsigned long long wait_us = 0;
	int pending = -1, waited = -1;
	struct peerdirect_event ev;
	int64_t h;
	__u64 id;
	int d, imp;

	ASSERT_EQ(0, pd_param_read("revoke_timeout_ms", timeout, sizeof(timeout)));
	h = pd_alloc(self->fd, 2 * ps);
	ASSERT_LT(0, h);
	d = pd_export_id(self->fd, h, ps, ps, PEERDIRECT_EXPORT_RDWR, &id);
	ASSERT_LE(0, d);
	imp = pdti_open("peerdirect0");
	ASSERT_LE(0, imp);
	ASSERT_EQ(0, pdti_import(imp, d, pd_pinned_flags(&self->q), 0));
	ASSERT_EQ(0, pd_revoke(self->fd, PEERDIRECT_REVOKE_EXPORT, 0, id, NULL));
	ASSERT_EQ(sizeof(ev), read(self->fd, &ev, sizeof(ev)));
	EXPECT_EQ(id, ev.export_id);
	close(imp);
	close(d);
	ASSERT_EQ(0, pd_free(self->fd, h));
	ASSERT_EQ(0, twrite("tracing_on", "0"));

	t = tread("trace");
	ASSERT_NE(NULL, t);
	snprintf(id_s, sizeof(id_s), "export=%llu ", (unsigned long long)id);
	snprintf(h_s, sizeof(h_s), "handle=%lld ", (long long)h);

	p = find_line(t, "peerdirect_alloc", h_s);
	ASSERT_NE(NULL, p) TH_LOG("no alloc record in:\n%.4000s", t);
	p = find_line(p, "peerdirect_export", id_s);
	ASSERT_NE(NULL, p) TH_LOG("no export record");
	EXPECT_NE(NULL, strstr(p, "rw\n"));
	p = find_line(p, "peerdirect_attach", id_s);
	ASSERT_NE(NULL, p) TH_LOG("no attach record");
	EXPECT_NE(NULL, find_line(p, "peerdirect_attach", "ret=0"));
	EXPECT_NE(NULL, find_line(p, "peerdirect_pin", id_s));
	lmap = find_line(p, "peerdirect_map", id_s);
	ASSERT_NE(NULL, lmap) TH_LOG("no map record");
	lrevoke = find_line(lmap, "peerdirect_revoke", id_s);
	ASSERT_NE(NULL, lrevoke) TH_LOG("no revoke record after the map");
	EXPECT_NE(NULL, strstr(lrevoke, "reason=revoke"));
	p = find_line(lrevoke, "peerdirect_event", id_s);
	ASSERT_NE(NULL, p) TH_LOG("no event record after the revoke");
	EXPECT_NE(NULL, strstr(p, "queued"));
	ldone = find_line(lrevoke, "peerdirect_revoke_done", id_s);
	ASSERT_NE(NULL, ldone) TH_LOG("no revoke_done record");
	p = strstr(ldone, "waited=");
	ASSERT_NE(NULL, p);
	ASSERT_EQ(3, sscanf(p, "waited=%d wait_us=%llu pending=%d", &waited,
			    &wait_us, &pending));
	EXPECT_EQ(1, waited);
	/*
	 * A pinned importer that cannot be revoked holds on: the wait ran to
	 * revoke_timeout_ms.  A revocable one let go inside it.
	 */
	if (pending) {
		EXPECT_LE((unsigned long long)(atoi(timeout) - 20) * 1000, wait_us);
	} else {
		EXPECT_GT((unsigned long long)atoi(timeout) * 1000, wait_us);
	}
	EXPECT_NE(NULL, find_line(lmap, "peerdirect_unmap", id_s));
	EXPECT_NE(NULL, find_line(lmap, "peerdirect_unpin", id_s));
	p = find_line(lmap, "peerdirect_detach", id_s);
	ASSERT_NE(NULL, p) TH_LOG("no detach record");
	snprintf(id_s, sizeof(id_s), "export=%llu\n", (unsigned long long)id);
	p = find_line(p, "peerdirect_export_release", id_s);
	ASSERT_NE(NULL, p) TH_LOG("no release record after the detach");
	EXPECT_NE(NULL, find_line(p, "peerdirect_free", h_s));
	free(t);
}

TEST_HARNESS_MAIN
