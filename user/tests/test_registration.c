// SPDX-License-Identifier: MIT
/*
 * What a registration grants and covers: access 0 grants no remote access,
 * a read-only export registers for sending, a transfer needs the access
 * it uses, and a range must lie inside the dma-buf.  Memfds stand in for dma-bufs, over tcp loopback.
 */
#include <fcntl.h>

#include "kselftest_harness.h"
#include "loopback.h"
#include "fabric.h"

#define LEN (256 << 10)

FIXTURE(reg) {
	struct pd_fabric *fab;
	uint64_t me;
	int fd;
};

FIXTURE_SETUP(reg)
{
	struct pd_fabric_attr attr;

	pd_fabric_attr_init(&attr);
	attr.chunk_size = 64 << 10;
	ASSERT_EQ(0, open_loopback(&attr, &self->fab, &self->me)) TH_LOG("%s", pd_last_error());
	self->fd = memfd_of(LEN, 21);
	ASSERT_LE(0, self->fd);
}

FIXTURE_TEARDOWN(reg)
{
	pd_set_dmabuf_sync(NULL);
	close(self->fd);
	pd_fabric_close(self->fab);
}

/* The same memfd opened again read-only: a read-only export's fd. */
static int reopen_readonly(int fd)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	return open(path, O_RDONLY | O_CLOEXEC);
}

static int send_to_self(struct pd_fabric *fab, uint64_t me, struct pd_mr *src,
			struct pd_mr *dst, size_t len)
{
	struct pd_req *s = NULL, *r = NULL;
	int ret = pd_trecv(fab, dst, 0, len, me, 9, &r);

	if (!ret)
		ret = pd_tsend(fab, src, 0, len, me, 9, &s) ?: pd_wait(s, WAIT_MS, NULL) ?:
		      pd_wait(r, WAIT_MS, NULL);
	pd_req_free(s);
	pd_req_free(r);
	return ret;
}

/* Access 0 must not let peers write: no rkey comes out of it. */
TEST_F(reg, access_zero_grants_no_remote_write)
{
	static char page[4096] __attribute__((aligned(4096)));
	struct pd_rkey rk;
	struct pd_mr *h, *d, *hw;

	ASSERT_EQ(0, pd_mr_reg_host(self->fab, page, sizeof(page), 0, &h));
	EXPECT_EQ(-EACCES, pd_mr_rkey(h, &rk));
	EXPECT_NE(NULL, strstr(pd_last_error(), "PD_ACCESS_REMOTE_WRITE")) TH_LOG("%s", pd_last_error());
	ASSERT_EQ(0, pd_mr_reg_dmabuf(self->fab, self->fd, 0, 4096, 0, &d));
	EXPECT_EQ(-EACCES, pd_mr_rkey(d, &rk));
	ASSERT_EQ(0, pd_mr_reg_host(self->fab, page, sizeof(page), PD_ACCESS_REMOTE_WRITE, &hw));
	EXPECT_EQ(0, pd_mr_rkey(hw, &rk)) TH_LOG("%s", pd_last_error());
	EXPECT_EQ(PD_ACCESS_SEND | PD_ACCESS_RECV | PD_ACCESS_WRITE,
		  pd_mr_entry_key(h->entry)->access);
	pd_mr_dereg(h);
	pd_mr_dereg(d);
	pd_mr_dereg(hw);
}

/* Sending from a read-only export works on the mapped and the bounce
 * path; receiving into it is refused up front, naming why. */
TEST_F(reg, read_only_export_registers_for_sending)
{
	static char dst[LEN] __attribute__((aligned(4096)));
	enum pd_path paths[] = { PD_PATH_MAPPED, PD_PATH_BOUNCE };
	int ro = reopen_readonly(self->fd);
	struct pd_mr *src, *d, *bad;
	unsigned int i;

	ASSERT_LE(0, ro);
	pd_set_dmabuf_sync(counting_sync);
	ASSERT_EQ(0, pd_mr_reg_host(self->fab, dst, sizeof(dst), PD_ACCESS_RECV, &d));
	for (i = 0; i < 2; i++) {
		memset(dst, 0, sizeof(dst));
		ASSERT_EQ(0, pd_fabric_set_path(self->fab, paths[i]));
		ASSERT_EQ(0, pd_mr_reg_dmabuf(self->fab, ro, 0, LEN, PD_ACCESS_SEND, &src))
			TH_LOG("%s: %s", pd_path_name(paths[i]), pd_last_error());
		EXPECT_EQ(paths[i], pd_mr_path(src));
		EXPECT_EQ(0, send_to_self(self->fab, self->me, src, d, LEN)) TH_LOG("%s", pd_last_error());
		EXPECT_EQ(-1, check(dst, LEN, 21));
		pd_mr_dereg(src);
		/* access 0 means what the export allows */
		EXPECT_EQ(0, pd_mr_reg_dmabuf(self->fab, ro, 0, LEN, 0, &src)) TH_LOG("%s", pd_last_error());
		pd_mr_dereg(src);
		EXPECT_EQ(-EACCES, pd_mr_reg_dmabuf(self->fab, ro, 0, LEN, PD_ACCESS_RECV, &bad));
		EXPECT_NE(NULL, strstr(pd_last_error(), "read-only")) TH_LOG("%s", pd_last_error());
	}
	pd_mr_dereg(d);
	close(ro);
}

/*
 * A transfer is held to the access its registration asked for, not only
 * the registration: a read-only export registered with access 0 must not
 * become a receive (the bounce path would memcpy into a PROT_READ mapping
 * and the process would die), and a host registration made for sending
 * only must not receive, even when the cache serves it from a wider entry.
 */
TEST_F(reg, transfers_need_the_access_they_use)
{
	static char page[4096] __attribute__((aligned(4096)));
	static char wide[8192] __attribute__((aligned(4096)));
	enum pd_path paths[] = { PD_PATH_MAPPED, PD_PATH_BOUNCE };
	struct pd_rkey rk = { .len = sizeof(page) };
	struct pd_mr *snd, *rcv, *all, *ro_mr;
	struct pd_req *req = NULL;
	int ro = reopen_readonly(self->fd);
	unsigned int i;

	ASSERT_LE(0, ro);
	ASSERT_EQ(0, pd_mr_reg_host(self->fab, page, sizeof(page), PD_ACCESS_SEND, &snd));
	ASSERT_EQ(0, pd_mr_reg_host(self->fab, page, sizeof(page), PD_ACCESS_RECV, &rcv));
	EXPECT_EQ(-EACCES, pd_trecv(self->fab, snd, 0, 64, self->me, 3, &req));
	EXPECT_NE(NULL, strstr(pd_last_error(), "PD_ACCESS_RECV")) TH_LOG("%s", pd_last_error());
	EXPECT_EQ(NULL, req);
	EXPECT_EQ(-EACCES, pd_tsend(self->fab, rcv, 0, 64, self->me, 3, &req));
	EXPECT_NE(NULL, strstr(pd_last_error(), "PD_ACCESS_SEND")) TH_LOG("%s", pd_last_error());
	EXPECT_EQ(-EACCES, pd_write(self->fab, rcv, 0, 64, self->me, &rk, 0, &req));
	EXPECT_NE(NULL, strstr(pd_last_error(), "PD_ACCESS_WRITE")) TH_LOG("%s", pd_last_error());
	EXPECT_EQ(NULL, req);
	pd_mr_dereg(snd);
	pd_mr_dereg(rcv);
	/* A wider entry serves a narrower request: the request's access holds. */
	ASSERT_EQ(0, pd_mr_reg_host(self->fab, wide, sizeof(wide), PD_ACCESS_ALL, &all));
	ASSERT_EQ(0, pd_mr_reg_host(self->fab, wide, 4096, PD_ACCESS_SEND, &snd));
	EXPECT_EQ(-EACCES, pd_trecv(self->fab, snd, 0, 64, self->me, 3, &req));
	EXPECT_EQ(-EACCES, pd_mr_rkey(snd, &rk));
	EXPECT_EQ(0, pd_mr_rkey(all, &rk)) TH_LOG("%s", pd_last_error());
	pd_mr_dereg(snd);
	pd_mr_dereg(all);
	for (i = 0; i < 2; i++) {
		ASSERT_EQ(0, pd_fabric_set_path(self->fab, paths[i]));
		ASSERT_EQ(0, pd_mr_reg_dmabuf(self->fab, ro, 0, LEN, 0, &ro_mr)) TH_LOG("%s", pd_last_error());
		EXPECT_EQ(-EACCES, pd_trecv(self->fab, ro_mr, 0, 4096, self->me, 4, &req))
			TH_LOG("%s", pd_path_name(paths[i]));
		EXPECT_NE(NULL, strstr(pd_last_error(), "PD_ACCESS_RECV")) TH_LOG("%s", pd_last_error());
		EXPECT_EQ(NULL, req);
		pd_mr_dereg(ro_mr);
	}
	close(ro);
}

/* The range is checked against the dma-buf's size (lseek SEEK_END), which
 * works for every dma-buf, not only for files with an st_size. */
TEST_F(reg, range_must_lie_inside_the_dmabuf)
{
	struct pd_mr *mr;

	EXPECT_EQ(-EINVAL, pd_mr_reg_dmabuf(self->fab, self->fd, LEN - 4096, 8192, 0, &mr));
	EXPECT_NE(NULL, strstr(pd_last_error(), "past the end")) TH_LOG("%s", pd_last_error());
	EXPECT_EQ(-EINVAL, pd_mr_reg_dmabuf(self->fab, self->fd, LEN, 1, 0, &mr));
	ASSERT_EQ(0, pd_mr_reg_dmabuf(self->fab, self->fd, LEN - 4096, 4096, 0, &mr));
	pd_mr_dereg(mr);
	/* the file position the size probe moves is put back */
	EXPECT_EQ(0, lseek(self->fd, 0, SEEK_CUR));
}

/*
 * Stale pages: a provider that pins host pages at registration (verbs, efa,
 * psm3, cxi...) would keep a freed buffer's old pages in an idle cache
 * entry, so the library keeps no idle host entries for it; providers that
 * resolve addresses at transfer time (the CPU movers, shm) keep them.  The
 * classification, and the fabric applying it (tcp here: an entry stays
 * after its last dereg; verbs over rxe is only reachable in the VM).
 */
TEST_F(reg, idle_host_entries_only_where_the_provider_pins_nothing)
{
	static const char *const pinning[] = { "verbs;ofi_rxm", "verbs", "efa", "psm3", "cxi",
					       "opx", "ucx" };
	static const char *const not_pinning[] = { "tcp;ofi_rxm", "tcp", "sockets", "udp;ofi_rxd",
						   "shm" };
	static char page[4096] __attribute__((aligned(4096)));
	const char *prov = pd_fabric_provider(self->fab) ?: "?";
	struct pd_cache_stats st = { 0 };
	struct pd_mr *mr;
	size_t i;

	for (i = 0; i < sizeof(pinning) / sizeof(pinning[0]); i++)
		EXPECT_TRUE(pd_provider_pins_host_pages(pinning[i])) TH_LOG("pinning[%zu]", i);
	for (i = 0; i < sizeof(not_pinning) / sizeof(not_pinning[0]); i++)
		EXPECT_FALSE(pd_provider_pins_host_pages(not_pinning[i])) TH_LOG("not_pinning[%zu]", i);
	ASSERT_FALSE(pd_provider_pins_host_pages(prov));
	ASSERT_EQ(0, pd_mr_reg_host(self->fab, page, sizeof(page), 0, &mr));
	pd_mr_dereg(mr);
	ASSERT_EQ(0, pd_fabric_cache_stats(self->fab, &st));
	EXPECT_EQ(1, st.entries) TH_LOG("%s keeps idle host entries", prov);
}

/*
 * A peer that does not play by the rkey (N7): it widens rkey.len to the
 * page, or writes with an rkey after the registration went.  No byte
 * outside what was registered for PD_ACCESS_REMOTE_WRITE, for as long as
 * it was, may change.  Each forged write comes from a fresh fabric (tcp
 * drops a connection that wrote out of bounds) through pd_write, which
 * trusts the rkey it is handed as a remote library would; the target is
 * progressed meanwhile.  Whether the attacker sees an error is the
 * provider's: the bytes are what is checked.
 */
static void forged_write(struct __test_metadata *_metadata, struct pd_fabric *target,
			 const struct pd_rkey *rk, size_t len)
{
	static unsigned char src[4096] __attribute__((aligned(4096)));
	struct pd_fabric_attr attr;
	struct pd_fabric *bad;
	struct pd_req *w = NULL;
	char addr[512];
	size_t alen = sizeof(addr);
	uint64_t peer;
	struct pd_mr *s;
	int64_t end;
	int ret;

	memset(src, 0xee, sizeof(src));
	pd_fabric_attr_init(&attr);
	attr.provider = "tcp";
	attr.chunk_size = 64 << 10;
	ASSERT_EQ(0, pd_fabric_open(&attr, &bad)) TH_LOG("%s", pd_last_error());
	ASSERT_EQ(0, pd_fabric_addr(target, addr, &alen));
	ASSERT_EQ(0, pd_fabric_insert(bad, addr, alen, &peer));
	ASSERT_EQ(0, pd_mr_reg_host(bad, src, len, PD_ACCESS_WRITE, &s));
	ret = pd_write(bad, s, 0, len, peer, rk, 0, &w);
	for (end = mono_ms() + WAIT_MS; !ret && mono_ms() < end;) {
		pd_progress(target);
		ret = pd_test(w, NULL);
		if (ret)
			break;
	}
	/* the target applies what it accepted before the attacker hears */
	for (end = mono_ms() + 200; mono_ms() < end;)
		pd_progress(target);
	pd_req_free(w);
	pd_mr_dereg(s);
	pd_fabric_close(bad);
}

static size_t first_changed(const unsigned char *b, size_t len, size_t skip_from, size_t skip_to)
{
	size_t i;

	for (i = 0; i < len; i++)
		if ((i < skip_from || i >= skip_to) && b[i] != 0x11)
			return i;
	return len;
}

TEST_F(reg, a_peer_reaches_exactly_the_bytes_registered_while_registered)
{
	static unsigned char target[2 * 4096] __attribute__((aligned(4096)));
	struct pd_rkey rk, wide, inner;
	struct pd_mr *t, *t2, *small;

	memset(target, 0x11, sizeof(target));
	ASSERT_EQ(0, pd_mr_reg_host(self->fab, target + 100, 100, PD_ACCESS_REMOTE_WRITE, &t))
		TH_LOG("%s", pd_last_error());
	ASSERT_EQ(0, pd_mr_rkey(t, &rk));
	EXPECT_EQ(100, rk.len);
	/* the honest write lands */
	forged_write(_metadata, self->fab, &rk, 100);
	EXPECT_EQ(0xee, target[100]);
	EXPECT_EQ(0xee, target[199]);
	EXPECT_EQ(sizeof(target), first_changed(target, sizeof(target), 100, 200));
	/* a widened rkey: from the page's start, and past the end */
	memset(target, 0x11, sizeof(target));
	wide = rk;
	wide.addr = rk.addr - 100;
	wide.len = 4096;
	forged_write(_metadata, self->fab, &wide, 4096);
	EXPECT_EQ(sizeof(target), first_changed(target, sizeof(target), 0, 0))
		TH_LOG("byte %zu outside the 100 registered changed", first_changed(target, sizeof(target), 0, 0));
	wide.addr = rk.addr;
	forged_write(_metadata, self->fab, &wide, 4096);
	EXPECT_EQ(sizeof(target), first_changed(target, sizeof(target), 0, 0));
	/* a smaller registration inside it gets its own window, not this one */
	ASSERT_EQ(0, pd_mr_reg_host(self->fab, target + 120, 10, PD_ACCESS_REMOTE_WRITE, &small));
	ASSERT_EQ(0, pd_mr_rkey(small, &inner));
	EXPECT_EQ(10, inner.len);
	wide = inner;
	wide.addr -= 20;
	wide.len = 100;
	forged_write(_metadata, self->fab, &wide, 100);
	EXPECT_EQ(sizeof(target), first_changed(target, sizeof(target), 0, 0))
		TH_LOG("the small handle reached its container's bytes");
	pd_mr_dereg(small);
	/* after dereg, with a local-only registration of the same page alive */
	ASSERT_EQ(0, pd_mr_reg_host(self->fab, target, 4096, PD_ACCESS_SEND, &t2));
	pd_mr_dereg(t);
	forged_write(_metadata, self->fab, &rk, 100);
	EXPECT_EQ(sizeof(target), first_changed(target, sizeof(target), 0, 0))
		TH_LOG("byte %zu changed after the deregistration", first_changed(target, sizeof(target), 0, 0));
	pd_mr_dereg(t2);
}

/* Requested keys (providers without FI_MR_PROV_KEY) do not follow one
 * another: the next registration's key cannot be named from this one's. */
TEST(requested_keys_are_unique_and_not_sequential)
{
	uint64_t prev = pd_next_mr_key(), k, seen[4096];
	unsigned int i, j, steps_of_one = 0;

	for (i = 0; i < 4096; i++) {
		k = pd_next_mr_key();
		seen[i] = k;
		if (k == prev + 1)
			steps_of_one++;
		prev = k;
		EXPECT_GE(0xffffffffULL, k);
	}
	EXPECT_GT(4, steps_of_one);
	for (i = 0; i < 4096; i++)
		for (j = i + 1; j < 4096; j++)
			ASSERT_NE(seen[i], seen[j]) TH_LOG("key %u and %u are equal", i, j);
}

TEST_HARNESS_MAIN
