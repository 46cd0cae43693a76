// SPDX-License-Identifier: MIT
/*
 * Matching and ordering of chunked messages: wire parameters agreed at
 * address exchange, the provider's tag width, receives naming a peer, two
 * same-tag messages in flight, and multi-chunk receives from any peer.
 * Fabrics live in one process and talk over tcp loopback.
 */
#include <dlfcn.h>

#include "kselftest_harness.h"
#include "loopback.h"
#include "fabric.h"

#define CHUNK 4096

/*
 * libfabric's fi_getinfo, interposed: the executable's definition binds
 * every call, the library's and libfabric's own nested ones (rxm asking for
 * its core provider).  The first call is the library's: its hints are
 * kept.  With strip_sas every answer offers no FI_ORDER_SAS; with
 * refuse_sas RDM hints that ask for it find nothing, as from a provider
 * without it.  Each test runs in a process of its own, so the state
 * starts clean.
 */
static bool strip_sas, refuse_sas;
static bool hints_seen;
static uint64_t hint_tx_order, hint_rx_order;

int fi_getinfo(uint32_t version, const char *node, const char *service, uint64_t flags,
	       const struct fi_info *hints, struct fi_info **info)
{
	static int (*real)(uint32_t, const char *, const char *, uint64_t,
			   const struct fi_info *, struct fi_info **);
	struct fi_info *i;
	int ret;

	if (!real) {
		void *sym = dlsym(RTLD_NEXT, "fi_getinfo");

		memcpy(&real, &sym, sizeof(real));
	}
	if (!real)
		return -FI_ENOSYS;
	if (hints && !hints_seen) {
		hints_seen = true;
		hint_tx_order = hints->tx_attr ? hints->tx_attr->msg_order : 0;
		hint_rx_order = hints->rx_attr ? hints->rx_attr->msg_order : 0;
	}
	/* The library's RDM asks only: rxm asks its core MSG provider for SAS. */
	if (refuse_sas && hints && hints->ep_attr && hints->ep_attr->type == FI_EP_RDM &&
	    hints->tx_attr && hints->rx_attr &&
	    ((hints->tx_attr->msg_order | hints->rx_attr->msg_order) & FI_ORDER_SAS))
		return -FI_ENODATA;
	ret = real(version, node, service, flags, hints, info);
	for (i = !ret && strip_sas ? *info : NULL; i; i = i->next) {
		i->tx_attr->msg_order &= ~(uint64_t)FI_ORDER_SAS;
		i->rx_attr->msg_order &= ~(uint64_t)FI_ORDER_SAS;
	}
	return ret;
}

static int open_chunked(size_t chunk, struct pd_fabric **fab)
{
	struct pd_fabric_attr attr;

	pd_fabric_attr_init(&attr);
	attr.provider = "tcp";
	attr.chunk_size = chunk;
	attr.bounce_slots = 2;
	return pd_fabric_open(&attr, fab);
}

/* a's address inserted into b, returning b's handle for a. */
static int introduce(struct pd_fabric *a, struct pd_fabric *b, uint64_t *a_in_b)
{
	char addr[512];
	size_t len = sizeof(addr);

	return pd_fabric_addr(a, addr, &len) ?: pd_fabric_insert(b, addr, len, a_in_b);
}

/* Peers that disagree on the chunk size would hang on a multi-chunk
 * message: the address carries it and insert refuses the mismatch. */
TEST(mismatched_chunk_sizes_are_refused_at_insert)
{
	struct pd_fabric *a, *b, *c;
	uint64_t peer;

	ASSERT_EQ(0, open_chunked(65536, &a));
	ASSERT_EQ(0, open_chunked(131072, &b));
	ASSERT_EQ(0, open_chunked(65536, &c));
	EXPECT_EQ(-EPROTO, introduce(a, b, &peer));
	EXPECT_NE(NULL, strstr(pd_last_error(), "chunk size 65536")) TH_LOG("%s", pd_last_error());
	EXPECT_NE(NULL, strstr(pd_last_error(), "131072"));
	EXPECT_EQ(0, introduce(a, c, &peer)) TH_LOG("%s", pd_last_error());
	/* Not an address of ours at all. */
	EXPECT_EQ(-EPROTO, pd_fabric_insert(c, "garbage-garbage-garbage", 23, &peer));
	pd_fabric_close(a);
	pd_fabric_close(b);
	pd_fabric_close(c);
}

/* Without FI_DIRECTED_RECV a receive's peer would be ignored: refused. */
TEST(receive_naming_a_peer_needs_directed_receive)
{
	struct pd_fabric_attr attr;
	struct pd_fabric *fab;
	struct pd_req *r;
	struct pd_mr *mr;
	static char buf[4096];
	uint64_t me;

	pd_fabric_attr_init(&attr);
	ASSERT_EQ(0, open_loopback(&attr, &fab, &me));
	ASSERT_EQ(0, pd_mr_reg_host(fab, buf, sizeof(buf), 0, &mr));
	fab->directed_recv = false;	/* as on a provider without it */
	EXPECT_EQ(-EOPNOTSUPP, pd_trecv(fab, mr, 0, 64, me, 1, &r));
	EXPECT_NE(NULL, strstr(pd_last_error(), "FI_DIRECTED_RECV")) TH_LOG("%s", pd_last_error());
	ASSERT_EQ(0, pd_trecv(fab, mr, 0, 64, PD_ANY_PEER, 1, &r));
	pd_req_free(r);
	pd_mr_dereg(mr);
	pd_fabric_close(fab);
}

/* The user's share of the tag is what the provider's mem_tag_format leaves
 * after the chunk index. */
TEST(tag_width_follows_the_provider)
{
	struct pd_fabric_attr attr;
	struct pd_fabric *fab;
	struct pd_req *r;
	struct pd_mr *mr;
	static char buf[4096];
	unsigned int bits;
	uint64_t me;

	EXPECT_EQ(0, pd_tag_bits_for(0xaaaaaaaaaaaaaaaaULL, &bits));
	EXPECT_EQ(48, bits);
	EXPECT_EQ(0, pd_tag_bits_for(0x5555555555555555ULL, &bits));
	EXPECT_EQ(47, bits);
	EXPECT_EQ(0, pd_tag_bits_for(0x0000ffffffffffffULL, &bits));
	EXPECT_EQ(32, bits);
	EXPECT_EQ(0, pd_tag_bits_for(0, &bits));	/* no format given: all 64 */
	EXPECT_EQ(48, bits);
	EXPECT_EQ(-EOPNOTSUPP, pd_tag_bits_for(0xffffULL, &bits));
	EXPECT_NE(NULL, strstr(pd_last_error(), "16 tag bits")) TH_LOG("%s", pd_last_error());

	pd_fabric_attr_init(&attr);
	ASSERT_EQ(0, open_loopback(&attr, &fab, &me));
	EXPECT_EQ(48, fab->tag_bits);
	ASSERT_EQ(0, pd_mr_reg_host(fab, buf, sizeof(buf), 0, &mr));
	fab->tag_bits = 40;		/* as on a narrower provider */
	EXPECT_EQ(-EINVAL, pd_tsend(fab, mr, 0, 64, me, 1ULL << 40, &r));
	EXPECT_NE(NULL, strstr(pd_last_error(), "40 bits")) TH_LOG("%s", pd_last_error());
	pd_mr_dereg(mr);
	pd_fabric_close(fab);
}

/*
 * Two 3-chunk messages with one tag to one peer.  The first sends from a
 * bounce registration with a single send slot, so its chunks 1 and 2 wait;
 * the second sends from host memory and could post all its chunks at once,
 * passing the first's: its chunk 1 would then meet the first receive's
 * chunk-1 receive.  Each receive must get exactly one message.
 */
static void two_same_tag_messages(struct __test_metadata *_metadata, bool no_sas)
{
	const size_t len = 3 * CHUNK;
	static char x[3 * CHUNK], y[3 * CHUNK], src2[3 * CHUNK];
	struct pd_mr *mx, *my, *msrc2, *dev;
	struct pd_req *r1, *r2, *s1, *s2;
	struct pd_fabric *fab;
	uint64_t me;
	int fd = memfd_of(len, 31);

	ASSERT_LE(0, fd);
	pd_set_dmabuf_sync(counting_sync);
	strip_sas = no_sas;
	ASSERT_EQ(0, open_chunked(CHUNK, &fab));
	if (no_sas)
		ASSERT_FALSE(fab->sas);
	ASSERT_EQ(0, introduce(fab, fab, &me));
	ASSERT_EQ(0, pd_fabric_set_path(fab, PD_PATH_BOUNCE));
	ASSERT_EQ(0, pd_mr_reg_dmabuf(fab, fd, 0, len, 0, &dev));
	ASSERT_EQ(0, pd_mr_reg_host(fab, x, len, 0, &mx));
	ASSERT_EQ(0, pd_mr_reg_host(fab, y, len, 0, &my));
	ASSERT_EQ(0, pd_mr_reg_host(fab, src2, len, 0, &msrc2));
	fill(src2, len, 32);
	ASSERT_EQ(0, pd_trecv(fab, mx, 0, len, me, 5, &r1));
	ASSERT_EQ(0, pd_trecv(fab, my, 0, len, me, 5, &r2));
	ASSERT_EQ(0, pd_tsend(fab, dev, 0, len, me, 5, &s1));
	ASSERT_EQ(0, pd_tsend(fab, msrc2, 0, len, me, 5, &s2));
	EXPECT_EQ(0, pd_wait(s1, WAIT_MS, NULL)) TH_LOG("%s", pd_last_error());
	EXPECT_EQ(0, pd_wait(s2, WAIT_MS, NULL)) TH_LOG("%s", pd_last_error());
	EXPECT_EQ(0, pd_wait(r1, WAIT_MS, NULL)) TH_LOG("%s", pd_last_error());
	EXPECT_EQ(0, pd_wait(r2, WAIT_MS, NULL)) TH_LOG("%s", pd_last_error());
	EXPECT_EQ(-1, check(x, len, 31)) TH_LOG("first receive got chunks of the second message");
	EXPECT_EQ(-1, check(y, len, 32)) TH_LOG("second receive got chunks of the first message");
	pd_req_free(s1);
	pd_req_free(s2);
	pd_req_free(r1);
	pd_req_free(r2);
	pd_mr_dereg(dev);
	pd_mr_dereg(mx);
	pd_mr_dereg(my);
	pd_mr_dereg(msrc2);
	pd_fabric_close(fab);
	pd_set_dmabuf_sync(NULL);
	close(fd);
}

TEST(same_tag_messages_never_swap_chunks)
{
	two_same_tag_messages(_metadata, false);
}

/* Chunks of two same-tag messages must not pass each other on the wire:
 * the library asks the provider for send-after-send order. */
TEST(fabric_asks_for_send_after_send_order)
{
	struct pd_fabric *fab;

	ASSERT_EQ(0, open_chunked(CHUNK, &fab));
	ASSERT_TRUE(hints_seen);
	EXPECT_TRUE(hint_tx_order & FI_ORDER_SAS);
	EXPECT_TRUE(hint_rx_order & FI_ORDER_SAS);
	TH_LOG("%s %s FI_ORDER_SAS", pd_fabric_provider(fab) ?: "?", fab->sas ? "offers" : "does not offer");
	pd_fabric_close(fab);
}

/* A provider without FI_ORDER_SAS: the fabric knows it, and sends same-tag
 * messages to one peer one at a time; they still complete, whole and in
 * order.  (tcp orders them anyway, so this catches the fallback stalling or
 * losing a message, not a missing fallback.) */
TEST(without_sas_same_tag_messages_still_never_swap)
{
	two_same_tag_messages(_metadata, true);
}

/*
 * A provider that has FI_DIRECTED_RECV and FI_SOURCE but not FI_ORDER_SAS
 * (its fi_getinfo refuses hints asking for it): the fabric keeps the first
 * two, so a receive may name its peer.
 */
TEST(a_provider_without_sas_keeps_directed_receives)
{
	static char sbuf[64], rbuf[64];
	struct pd_mr *sm, *rm;
	struct pd_req *s, *r;
	struct pd_fabric *fab;
	uint64_t me;

	refuse_sas = strip_sas = true;
	ASSERT_EQ(0, open_chunked(CHUNK, &fab)) TH_LOG("%s", pd_last_error());
	EXPECT_FALSE(fab->sas);
	EXPECT_TRUE(fab->directed_recv);
	EXPECT_TRUE(fab->source);
	ASSERT_EQ(0, introduce(fab, fab, &me));
	ASSERT_EQ(0, pd_mr_reg_host(fab, sbuf, sizeof(sbuf), 0, &sm));
	ASSERT_EQ(0, pd_mr_reg_host(fab, rbuf, sizeof(rbuf), 0, &rm));
	memset(sbuf, 0x5a, sizeof(sbuf));
	ASSERT_EQ(0, pd_trecv(fab, rm, 0, sizeof(rbuf), me, 7, &r)) TH_LOG("%s", pd_last_error());
	ASSERT_EQ(0, pd_tsend(fab, sm, 0, sizeof(sbuf), me, 7, &s));
	EXPECT_EQ(0, pd_wait(s, WAIT_MS, NULL)) TH_LOG("%s", pd_last_error());
	EXPECT_EQ(0, pd_wait(r, WAIT_MS, NULL)) TH_LOG("%s", pd_last_error());
	EXPECT_EQ(0, memcmp(sbuf, rbuf, sizeof(sbuf)));
	pd_req_free(s);
	pd_req_free(r);
	pd_mr_dereg(sm);
	pd_mr_dereg(rm);
	pd_fabric_close(fab);
}

/* A small message from `from` (tag) that `to` receives: on one connection
 * it arrives after everything `from` sent before. */
static int marker(struct pd_fabric *from, struct pd_mr *fm, uint64_t to_addr,
		  struct pd_fabric *to, struct pd_mr *tm, uint64_t tag)
{
	struct pd_req *s, *r;
	int ret = pd_trecv(to, tm, 0, 8, PD_ANY_PEER, tag, &r);

	if (ret)
		return ret;
	ret = pd_tsend(from, fm, 0, 8, to_addr, tag, &s);
	if (!ret) {
		/* both ends progress: one thread drives both */
		int64_t end = mono_ms() + WAIT_MS;
		int a = 0, b = 0;

		while ((!a || !b) && mono_ms() < end) {
			if (!a)
				a = pd_test(s, NULL);
			if (!b)
				b = pd_test(r, NULL);
			if (a < 0 || b < 0)
				break;
		}
		ret = a == 1 && b == 1 ? 0 : -ETIMEDOUT;
		pd_req_free(s);
	}
	pd_req_free(r);
	return ret;
}

/*
 * Two senders, one tag, two-chunk messages, receives from PD_ANY_PEER.  The
 * receiver's unexpected queue holds A's chunk 0, B's chunks 0 and 1, then
 * A's chunk 1 (markers on each connection fix that order).  The first
 * receive matches A's chunk 0; its chunk 1 must come from A too, not from
 * B (whose chunk 1 arrived first).
 */
TEST(any_peer_multi_chunk_receive_takes_one_sender)
{
	const uint64_t tag = 0x77;
	static char abuf[2 * CHUNK], bbuf[2 * CHUNK], r1buf[2 * CHUNK], r2buf[2 * CHUNK], mk[3][8];
	struct pd_fabric *r, *a, *b;
	struct pd_mr *ma, *mb, *m1, *m2, *mka, *mkb, *mkr;
	struct pd_req *q1, *q2, *sb;
	struct pd_mr half;
	uint64_t r_in_a, r_in_b, a_in_r, b_in_r;
	long bad1, bad2;

	ASSERT_EQ(0, open_chunked(CHUNK, &r));
	ASSERT_EQ(0, open_chunked(CHUNK, &a));
	ASSERT_EQ(0, open_chunked(CHUNK, &b));
	ASSERT_EQ(0, introduce(r, a, &r_in_a));
	ASSERT_EQ(0, introduce(r, b, &r_in_b));
	ASSERT_EQ(0, introduce(a, r, &a_in_r));
	ASSERT_EQ(0, introduce(b, r, &b_in_r));
	fill(abuf, sizeof(abuf), 1);
	fill(bbuf, sizeof(bbuf), 2);
	ASSERT_EQ(0, pd_mr_reg_host(a, abuf, sizeof(abuf), 0, &ma));
	ASSERT_EQ(0, pd_mr_reg_host(b, bbuf, sizeof(bbuf), 0, &mb));
	ASSERT_EQ(0, pd_mr_reg_host(r, r1buf, sizeof(r1buf), 0, &m1));
	ASSERT_EQ(0, pd_mr_reg_host(r, r2buf, sizeof(r2buf), 0, &m2));
	ASSERT_EQ(0, pd_mr_reg_host(a, mk[0], 8, 0, &mka));
	ASSERT_EQ(0, pd_mr_reg_host(b, mk[1], 8, 0, &mkb));
	ASSERT_EQ(0, pd_mr_reg_host(r, mk[2], 8, 0, &mkr));

	/* A's chunk 0 (bytes [0, CHUNK) of A's message) */
	ASSERT_EQ(0, raw_chunk(a, ma, CHUNK, r_in_a, tag, 0, r));
	ASSERT_EQ(0, marker(a, mka, r_in_a, r, mkr, 900));
	/* B's whole message */
	ASSERT_EQ(0, pd_tsend(b, mb, 0, sizeof(bbuf), r_in_b, tag, &sb));
	ASSERT_TRUE(PROGRESS_UNTIL(r, WAIT_MS, pd_test(sb, NULL) == 1));
	pd_req_free(sb);
	ASSERT_EQ(0, marker(b, mkb, r_in_b, r, mkr, 901));
	/* A's chunk 1: the second half of A's buffer */
	half = *ma;
	half.delta += CHUNK;
	ASSERT_EQ(0, raw_chunk(a, &half, CHUNK, r_in_a, tag, 1, r));
	ASSERT_EQ(0, marker(a, mka, r_in_a, r, mkr, 902));

	ASSERT_EQ(0, pd_trecv(r, m1, 0, sizeof(r1buf), PD_ANY_PEER, tag, &q1)) TH_LOG("%s", pd_last_error());
	ASSERT_EQ(0, pd_trecv(r, m2, 0, sizeof(r2buf), PD_ANY_PEER, tag, &q2));
	EXPECT_EQ(0, pd_wait(q1, WAIT_MS, NULL)) TH_LOG("%s", pd_last_error());
	EXPECT_EQ(0, pd_wait(q2, WAIT_MS, NULL)) TH_LOG("%s", pd_last_error());
	bad1 = check(r1buf, sizeof(r1buf), 1);
	bad2 = check(r2buf, sizeof(r2buf), 2);
	EXPECT_EQ(-1, bad1) TH_LOG("first receive is not A's message (byte %ld differs)", bad1);
	EXPECT_EQ(-1, bad2) TH_LOG("second receive is not B's message (byte %ld differs)", bad2);
	pd_req_free(q1);
	pd_req_free(q2);
	pd_mr_dereg(ma);
	pd_mr_dereg(mb);
	pd_mr_dereg(m1);
	pd_mr_dereg(m2);
	pd_mr_dereg(mka);
	pd_mr_dereg(mkb);
	pd_mr_dereg(mkr);
	pd_fabric_close(r);
	pd_fabric_close(a);
	pd_fabric_close(b);
}

TEST_HARNESS_MAIN
