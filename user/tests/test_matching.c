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
#include "xfer_wire.h"

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

/* pd_test on each request until every one is done or ms pass; ret[i] is
 * its last answer (1 done, <0 failed, 0 still pending).  Testing drives
 * the progress of each request's own fabric. */
static void test_all(struct pd_req **q, int *ret, size_t n, int ms)
{
	int64_t end = mono_ms() + ms;
	size_t i, left = n;

	for (i = 0; i < n; i++)
		ret[i] = 0;
	while (left && mono_ms() < end) {
		for (i = 0, left = 0; i < n; i++) {
			if (!ret[i])
				ret[i] = pd_test(q[i], NULL);
			left += !ret[i];
		}
	}
}

/*
 * The review's reproducer: two 2-chunk receives on one tag; the sender
 * sends 100 bytes, then 2 chunks.  The first receive fails with -EMSGSIZE
 * naming the tag, the peer and both lengths (before, it reported success
 * with 100 bytes of one message and chunk 1 of the next), and the second
 * gets the 2-chunk message whole (before, it waited for a chunk 1 that the
 * first had taken).
 */
static void short_then_whole(struct __test_metadata *_metadata, bool any)
{
	const size_t len = 2 * CHUNK;
	static char r1[2 * CHUNK], r2[2 * CHUNK], s1[100], s2[2 * CHUNK];
	struct pd_mr *m1, *m2, *ms1, *ms2;
	struct pd_req *q[4];
	struct pd_fabric *fab;
	size_t bytes = 0;
	uint64_t me, from;
	int ret[4];

	ASSERT_EQ(0, open_chunked(CHUNK, &fab));
	ASSERT_EQ(0, introduce(fab, fab, &me));
	from = any ? PD_ANY_PEER : me;
	ASSERT_EQ(0, pd_mr_reg_host(fab, r1, len, 0, &m1));
	ASSERT_EQ(0, pd_mr_reg_host(fab, r2, len, 0, &m2));
	ASSERT_EQ(0, pd_mr_reg_host(fab, s1, sizeof(s1), 0, &ms1));
	ASSERT_EQ(0, pd_mr_reg_host(fab, s2, len, 0, &ms2));
	memset(r1, 0, len);
	memset(r2, 0, len);
	fill(s1, sizeof(s1), 41);
	fill(s2, len, 42);
	ASSERT_EQ(0, pd_trecv(fab, m1, 0, len, from, 5, &q[0]));
	ASSERT_EQ(0, pd_trecv(fab, m2, 0, len, from, 5, &q[1]));
	ASSERT_EQ(0, pd_tsend(fab, ms1, 0, sizeof(s1), me, 5, &q[2]));
	ASSERT_EQ(0, pd_tsend(fab, ms2, 0, len, me, 5, &q[3]));
	test_all(q, ret, 4, WAIT_MS);
	EXPECT_EQ(1, ret[2]);
	EXPECT_EQ(1, ret[3]);
	EXPECT_EQ(-EMSGSIZE, ret[0]);
	EXPECT_EQ(-EMSGSIZE, pd_test(q[0], NULL));
	TH_LOG("first receive: %s", pd_last_error());
	EXPECT_NE(NULL, strstr(pd_last_error(), "tag 0x5"));
	EXPECT_NE(NULL, strstr(pd_last_error(), "peer 0"));
	EXPECT_NE(NULL, strstr(pd_last_error(), "100 bytes"));
	EXPECT_NE(NULL, strstr(pd_last_error(), "8192"));
	EXPECT_EQ(1, ret[1]) TH_LOG("second receive: %s", ret[1] < 0 ? pd_last_error() : "pending");
	EXPECT_EQ(1, pd_test(q[1], &bytes));
	EXPECT_EQ(len, bytes);
	EXPECT_EQ(-1, check(r2, len, 42)) TH_LOG("the second receive is not the second message");
	for (int i = 0; i < 4; i++)
		pd_req_free(q[i]);
	pd_mr_dereg(m1);
	pd_mr_dereg(m2);
	pd_mr_dereg(ms1);
	pd_mr_dereg(ms2);
	pd_fabric_close(fab);
}

TEST(a_shorter_message_fails_a_multi_chunk_receive_and_spares_the_next)
{
	short_then_whole(_metadata, false);
}

TEST(a_shorter_message_fails_a_multi_chunk_receive_from_any_peer_and_spares_the_next)
{
	short_then_whole(_metadata, true);
}

/*
 * Longer messages, which chunk 0 alone cannot show (it is full): three
 * chunks into a 2-chunk receive, and into a one-chunk receive of exactly a
 * chunk.  Each fails with -EMSGSIZE naming both lengths, and the sender's
 * chunks it cannot hold are taken off the wire: the 3-chunk receive after
 * each gets its own message, not the longer one's stale last chunk (before,
 * the short receives reported success with a truncated message, and the
 * next receives took its leftover chunks).
 */
static void longer_messages(struct __test_metadata *_metadata, bool any)
{
	const size_t three = 3 * CHUNK;
	static const size_t rlen[4] = { 2 * CHUNK, 3 * CHUNK, CHUNK, 3 * CHUNK };
	static char rbuf[4][3 * CHUNK], sbuf[4][3 * CHUNK];
	struct pd_mr *rm[4], *sm[4];
	struct pd_req *q[8];
	struct pd_fabric *fab;
	uint64_t me, from;
	int ret[8], i;

	ASSERT_EQ(0, open_chunked(CHUNK, &fab));
	ASSERT_EQ(0, introduce(fab, fab, &me));
	from = any ? PD_ANY_PEER : me;
	for (i = 0; i < 4; i++) {
		ASSERT_EQ(0, pd_mr_reg_host(fab, rbuf[i], three, 0, &rm[i]));
		ASSERT_EQ(0, pd_mr_reg_host(fab, sbuf[i], three, 0, &sm[i]));
		memset(rbuf[i], 0, three);
		fill(sbuf[i], three, 60 + i);
	}
	for (i = 0; i < 4; i++)
		ASSERT_EQ(0, pd_trecv(fab, rm[i], 0, rlen[i], from, 6, &q[i])) TH_LOG("%s", pd_last_error());
	for (i = 0; i < 4; i++)
		ASSERT_EQ(0, pd_tsend(fab, sm[i], 0, three, me, 6, &q[4 + i]));
	test_all(q, ret, 8, WAIT_MS);
	for (i = 4; i < 8; i++) {
		int v = ret[i];

		EXPECT_EQ(1, v) TH_LOG("send %d: %d", i - 4, v);
	}
	EXPECT_EQ(-EMSGSIZE, ret[0]);
	EXPECT_EQ(-EMSGSIZE, pd_test(q[0], NULL));
	TH_LOG("2-chunk receive: %s", pd_last_error());
	EXPECT_NE(NULL, strstr(pd_last_error(), "12288 bytes"));
	EXPECT_NE(NULL, strstr(pd_last_error(), "8192"));
	EXPECT_NE(NULL, strstr(pd_last_error(), "tag 0x6"));
	EXPECT_EQ(-EMSGSIZE, ret[2]);
	EXPECT_EQ(-EMSGSIZE, pd_test(q[2], NULL));
	TH_LOG("1-chunk receive: %s", pd_last_error());
	EXPECT_NE(NULL, strstr(pd_last_error(), "12288 bytes"));
	EXPECT_NE(NULL, strstr(pd_last_error(), "4096"));
	EXPECT_EQ(1, ret[1]);
	EXPECT_EQ(-1, check(rbuf[1], three, 61)) TH_LOG("receive 1 is not message 1");
	EXPECT_EQ(1, ret[3]);
	EXPECT_EQ(-1, check(rbuf[3], three, 63)) TH_LOG("receive 3 is not message 3");
	for (i = 0; i < 8; i++)
		pd_req_free(q[i]);
	for (i = 0; i < 4; i++) {
		pd_mr_dereg(rm[i]);
		pd_mr_dereg(sm[i]);
	}
	pd_fabric_close(fab);
}

TEST(a_longer_message_fails_the_receive_and_leaves_no_stale_chunks)
{
	longer_messages(_metadata, false);
}

TEST(a_longer_message_from_any_peer_fails_the_receive_and_leaves_no_stale_chunks)
{
	longer_messages(_metadata, true);
}

/* The length word chunk 0 carries, at lengths no test can send. */
TEST(the_length_word_carries_every_message_length)
{
	const size_t mib4 = 4u << 20, gib = 1u << 30;
	uint64_t len;
	uint32_t n;

	EXPECT_LE(PD_WIRE_DATA_BYTES, 4u);	/* efa and verbs offer 4 bytes */
	ASSERT_TRUE(pd_wire_parse_len(pd_wire_len_word(100, mib4), mib4, &len, &n));
	EXPECT_EQ(100, len);
	EXPECT_EQ(1, n);
	ASSERT_TRUE(pd_wire_parse_len(pd_wire_len_word(mib4, mib4), mib4, &len, &n));
	EXPECT_EQ(mib4, len);
	EXPECT_EQ(1, n);
	ASSERT_TRUE(pd_wire_parse_len(pd_wire_len_word(mib4 + 1, mib4), mib4, &len, &n));
	EXPECT_EQ(mib4 + 1, len);
	EXPECT_EQ(2, n);
	ASSERT_TRUE(pd_wire_parse_len(pd_wire_len_word(gib - 1, mib4), mib4, &len, &n));
	EXPECT_EQ(gib - 1, len);
	EXPECT_EQ(256, n);
	/* From 1 GiB on, the chunk count: the length itself is then checked
	 * by the chunks' own lengths. */
	ASSERT_TRUE(pd_wire_parse_len(pd_wire_len_word(gib, mib4), mib4, &len, &n));
	EXPECT_EQ(0, len);
	EXPECT_EQ(256, n);
	ASSERT_TRUE(pd_wire_parse_len(pd_wire_len_word(gib, gib), gib, &len, &n));
	EXPECT_EQ(0, len);
	EXPECT_EQ(1, n);
	ASSERT_TRUE(pd_wire_parse_len(pd_wire_len_word(65535ULL * gib, gib), gib, &len, &n));
	EXPECT_EQ(0, len);
	EXPECT_EQ(65535, n);
	ASSERT_TRUE(pd_wire_parse_len(pd_wire_len_word(65534ULL * gib + 1, gib), gib, &len, &n));
	EXPECT_EQ(65535, n);
	/* No word: what a provider without CQ data, or a sender that sent
	 * none, reports. */
	EXPECT_FALSE(pd_wire_parse_len(0, mib4, &len, &n));
	EXPECT_FALSE(pd_wire_parse_len(0x12345678, mib4, &len, &n));
	/* An abort stand-in says why its sender gave up. */
	EXPECT_EQ(-ENODEV, pd_wire_abort_errno(pd_wire_abort_word(-ENODEV)));
	EXPECT_EQ(-ECANCELED, pd_wire_abort_errno(pd_wire_abort_word(-ECANCELED)));
	EXPECT_EQ(0, pd_wire_abort_errno(0));
}

/* Pattern of message k of tag t from sender a (0 or 1). */
static uint64_t seed_of(int a, int t, int k)
{
	return 1000 + a * 100 + t * 10 + k;
}

/*
 * Many requests at once across tags and peers (N13: the order is kept by
 * per-(kind, tag, peer) state, no longer by scanning every waiting
 * request): a receiver posts, round by round, a 3-chunk receive per tag
 * from each of two senders.  The first sender alternates between a bounce
 * dma-buf (with 2 staging slots its later chunks wait) and host memory, so
 * its messages could pass each other; the second sends from host memory.
 * Every receive gets the message of its own round.
 */
static void many_in_flight(struct __test_metadata *_metadata, bool no_sas)
{
	enum { TAGS = 4, ROUNDS = 6, N = TAGS * ROUNDS };
	const size_t len = 3 * CHUNK;
	static char rbuf[2][N][3 * CHUNK], abuf[N][3 * CHUNK], bbuf[N][3 * CHUNK];
	struct pd_mr *rm[2][N], *am[N], *bm[N], *dev;
	struct pd_req *q[4 * N];
	struct pd_fabric *r, *a, *b;
	uint64_t r_in_a, r_in_b, a_in_r, b_in_r;
	unsigned char *map;
	int ret[4 * N], i, t, k, n = 0, fd;

	strip_sas = no_sas;
	ASSERT_EQ(0, open_chunked(CHUNK, &r));
	ASSERT_EQ(0, open_chunked(CHUNK, &a));
	ASSERT_EQ(0, open_chunked(CHUNK, &b));
	ASSERT_EQ(no_sas, !a->sas);
	ASSERT_EQ(0, introduce(r, a, &r_in_a));
	ASSERT_EQ(0, introduce(r, b, &r_in_b));
	ASSERT_EQ(0, introduce(a, r, &a_in_r));
	ASSERT_EQ(0, introduce(b, r, &b_in_r));
	fd = memfd_of(N * len, 0);
	ASSERT_LE(0, fd);
	map = mmap(NULL, N * len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	ASSERT_NE(MAP_FAILED, map);
	pd_set_dmabuf_sync(counting_sync);
	ASSERT_EQ(0, pd_fabric_set_path(a, PD_PATH_BOUNCE));
	ASSERT_EQ(0, pd_mr_reg_dmabuf(a, fd, 0, N * len, 0, &dev));
	for (i = 0; i < N; i++) {
		t = i % TAGS;
		k = i / TAGS;
		ASSERT_EQ(0, pd_mr_reg_host(r, rbuf[0][i], len, 0, &rm[0][i]));
		ASSERT_EQ(0, pd_mr_reg_host(r, rbuf[1][i], len, 0, &rm[1][i]));
		ASSERT_EQ(0, pd_mr_reg_host(a, abuf[i], len, 0, &am[i]));
		ASSERT_EQ(0, pd_mr_reg_host(b, bbuf[i], len, 0, &bm[i]));
		memset(rbuf[0][i], 0, len);
		memset(rbuf[1][i], 0, len);
		fill(map + i * len, len, seed_of(0, t, k));
		fill(abuf[i], len, seed_of(0, t, k));
		fill(bbuf[i], len, seed_of(1, t, k));
	}
	for (i = 0; i < N; i++) {
		ASSERT_EQ(0, pd_trecv(r, rm[0][i], 0, len, a_in_r, 20 + i % TAGS, &q[n++]))
			TH_LOG("%s", pd_last_error());
		ASSERT_EQ(0, pd_trecv(r, rm[1][i], 0, len, b_in_r, 20 + i % TAGS, &q[n++]))
			TH_LOG("%s", pd_last_error());
	}
	for (i = 0; i < N; i++) {
		/* even rounds from the dma-buf (bounce), odd ones from host */
		struct pd_mr *src = (i / TAGS) % 2 ? am[i] : dev;
		size_t off = (i / TAGS) % 2 ? 0 : i * len;

		ASSERT_EQ(0, pd_tsend(a, src, off, len, r_in_a, 20 + i % TAGS, &q[n++]))
			TH_LOG("%s", pd_last_error());
		ASSERT_EQ(0, pd_tsend(b, bm[i], 0, len, r_in_b, 20 + i % TAGS, &q[n++]))
			TH_LOG("%s", pd_last_error());
	}
	test_all(q, ret, n, 2 * WAIT_MS);
	for (i = 0; i < n; i++) {
		int v = ret[i];

		EXPECT_EQ(1, v) TH_LOG("request %d: %d", i, v);
	}
	for (i = 0; i < N; i++) {
		t = i % TAGS;
		k = i / TAGS;
		EXPECT_EQ(-1, check(rbuf[0][i], len, seed_of(0, t, k)))
			TH_LOG("tag %d round %d from a got another message", t, k);
		EXPECT_EQ(-1, check(rbuf[1][i], len, seed_of(1, t, k)))
			TH_LOG("tag %d round %d from b got another message", t, k);
	}
	for (i = 0; i < n; i++)
		pd_req_free(q[i]);
	for (i = 0; i < N; i++) {
		pd_mr_dereg(rm[0][i]);
		pd_mr_dereg(rm[1][i]);
		pd_mr_dereg(am[i]);
		pd_mr_dereg(bm[i]);
	}
	pd_mr_dereg(dev);
	pd_fabric_close(r);
	pd_fabric_close(a);
	pd_fabric_close(b);
	pd_set_dmabuf_sync(NULL);
	munmap(map, N * len);
	close(fd);
}

TEST(many_requests_across_tags_and_peers_keep_their_order)
{
	many_in_flight(_metadata, false);
}

TEST(many_requests_across_tags_and_peers_keep_their_order_without_sas)
{
	many_in_flight(_metadata, true);
}

/*
 * Receives from any peer and from a named peer, mixed on one tag, of 1, 2
 * and 3 chunks: with one sender each must get the message of its own
 * rank, whether the messages come before the receives (unexpected) or
 * after.
 */
static void any_and_named_mixed(struct __test_metadata *_metadata, bool sends_first)
{
	enum { N = 6 };
	static const size_t slen[N] = { 3 * CHUNK, 2 * CHUNK, 100, 3 * CHUNK, 2 * CHUNK, 50 };
	static const bool from_any[N] = { true, false, true, false, true, false };
	static char rbuf[N][3 * CHUNK], sbuf[N][3 * CHUNK];
	struct pd_mr *rm[N], *sm[N];
	struct pd_req *q[2 * N];
	struct pd_fabric *fab;
	uint64_t me;
	int ret[2 * N], i, n = 0;

	ASSERT_EQ(0, open_chunked(CHUNK, &fab));
	ASSERT_EQ(0, introduce(fab, fab, &me));
	for (i = 0; i < N; i++) {
		ASSERT_EQ(0, pd_mr_reg_host(fab, rbuf[i], slen[i], 0, &rm[i]));
		ASSERT_EQ(0, pd_mr_reg_host(fab, sbuf[i], slen[i], 0, &sm[i]));
		memset(rbuf[i], 0, slen[i]);
		fill(sbuf[i], slen[i], 90 + i);
	}
	for (int pass = 0; pass < 2; pass++) {
		for (i = 0; i < N; i++) {
			if (pass == sends_first) {
				ASSERT_EQ(0, pd_trecv(fab, rm[i], 0, slen[i],
						      from_any[i] ? PD_ANY_PEER : me, 9, &q[n++]))
					TH_LOG("%s", pd_last_error());
			} else {
				ASSERT_EQ(0, pd_tsend(fab, sm[i], 0, slen[i], me, 9, &q[n++]));
			}
		}
		/* the first batch reaches the provider before the second */
		for (int j = 0; j < 50; j++)
			pd_progress(fab);
	}
	test_all(q, ret, n, WAIT_MS);
	for (i = 0; i < n; i++) {
		int v = ret[i];

		EXPECT_EQ(1, v) TH_LOG("request %d: %d", i, v);
	}
	for (i = 0; i < N; i++)
		EXPECT_EQ(-1, check(rbuf[i], slen[i], 90 + i)) TH_LOG("receive %d got another message", i);
	for (i = 0; i < n; i++)
		pd_req_free(q[i]);
	for (i = 0; i < N; i++) {
		pd_mr_dereg(rm[i]);
		pd_mr_dereg(sm[i]);
	}
	pd_fabric_close(fab);
}

TEST(any_peer_and_named_receives_on_one_tag_keep_their_order)
{
	any_and_named_mixed(_metadata, false);
}

TEST(any_peer_and_named_receives_on_one_tag_keep_their_order_for_unexpected_messages)
{
	any_and_named_mixed(_metadata, true);
}

TEST_HARNESS_MAIN
