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

TEST_HARNESS_MAIN
