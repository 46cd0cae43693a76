// SPDX-License-Identifier: MIT
/*
 * The bounce pipeline: staging slots must not let an MPI-legal pattern
 * deadlock, and the CPU copies (with their DMA_BUF_IOCTL_SYNC brackets) must
 * not hold up other threads' progress.  Memfds stand in for dma-bufs, with
 * a SYNC stand-in; fabrics in one process over tcp loopback.
 */
#include <pthread.h>

#include "kselftest_harness.h"
#include "loopback.h"

#define CHUNK 4096

/* max_staging 0: the environment's cap, else the default. */
static int open_capped(struct pd_fabric **fab, size_t slots, size_t max_staging)
{
	struct pd_fabric_attr attr;

	pd_fabric_attr_init(&attr);
	attr.provider = "tcp";
	attr.chunk_size = CHUNK;
	attr.bounce_slots = slots;
	attr.path = PD_PATH_BOUNCE;
	attr.max_staging_bytes = max_staging;
	return pd_fabric_open(&attr, fab);
}

static int open_fab(struct pd_fabric **fab, size_t slots)
{
	return open_capped(fab, slots, 0);
}

static int introduce(struct pd_fabric *a, struct pd_fabric *b, uint64_t *a_in_b)
{
	char addr[512];
	size_t len = sizeof(addr);

	return pd_fabric_addr(a, addr, &len) ?: pd_fabric_insert(b, addr, len, a_in_b);
}

/*
 * A posts a 3-chunk receive from B, then a receive from C, and waits for C;
 * only then does it send to B, and B sends its message only after it has
 * heard from A.  Legal in MPI.  With staging slots held by unmatched
 * receives (A has two slots, one per direction), C's receive never got a
 * slot and A waited forever.
 */
TEST(unmatched_receives_do_not_starve_others)
{
	const size_t big = 3 * CHUNK;
	static char cbuf[64], bbuf[3 * CHUNK], abuf[64], bnote[64];
	struct pd_fabric *a, *b, *c;
	struct pd_mr *a_from_b, *a_from_c, *a_note, *cm, *bm, *bn;
	struct pd_req *rb, *rc, *sc, *sa, *rn, *sb;
	uint64_t b_in_a, c_in_a, a_in_b, a_in_c;
	int fd1 = memfd_of(big, 0), fd2 = memfd_of(64, 0);

	ASSERT_LE(0, fd1);
	ASSERT_LE(0, fd2);
	pd_set_dmabuf_sync(counting_sync);
	ASSERT_EQ(0, open_fab(&a, 2));
	ASSERT_EQ(0, open_fab(&b, 2));
	ASSERT_EQ(0, open_fab(&c, 2));
	ASSERT_EQ(0, introduce(b, a, &b_in_a));
	ASSERT_EQ(0, introduce(c, a, &c_in_a));
	ASSERT_EQ(0, introduce(a, b, &a_in_b));
	ASSERT_EQ(0, introduce(a, c, &a_in_c));
	/* A's receive targets are "device memory" on the bounce path. */
	ASSERT_EQ(0, pd_mr_reg_dmabuf(a, fd1, 0, big, 0, &a_from_b));
	ASSERT_EQ(0, pd_mr_reg_dmabuf(a, fd2, 0, 64, 0, &a_from_c));
	ASSERT_EQ(PD_PATH_BOUNCE, pd_mr_path(a_from_b));
	ASSERT_EQ(0, pd_mr_reg_host(a, abuf, sizeof(abuf), 0, &a_note));
	ASSERT_EQ(0, pd_mr_reg_host(c, cbuf, sizeof(cbuf), 0, &cm));
	ASSERT_EQ(0, pd_mr_reg_host(b, bbuf, sizeof(bbuf), 0, &bm));
	ASSERT_EQ(0, pd_mr_reg_host(b, bnote, sizeof(bnote), 0, &bn));
	fill(cbuf, sizeof(cbuf), 3);
	fill(bbuf, sizeof(bbuf), 2);

	ASSERT_EQ(0, pd_trecv(a, a_from_b, 0, big, b_in_a, 1, &rb));
	ASSERT_EQ(0, pd_trecv(a, a_from_c, 0, 64, c_in_a, 2, &rc));
	ASSERT_EQ(0, pd_tsend(c, cm, 0, 64, a_in_c, 2, &sc));
	/* A waits for C (C and B progress meanwhile, as other processes would). */
	EXPECT_TRUE(PROGRESS_UNTIL(c, 3000, (pd_progress(b), pd_test(rc, NULL) == 1)))
		TH_LOG("the receive from C never completed: %s", pd_last_error());
	EXPECT_EQ(-1, check(pd_mr_cpu_ptr(a_from_c), 64, 3));
	/* Then A tells B, and B sends. */
	ASSERT_EQ(0, pd_trecv(b, bn, 0, 64, a_in_b, 3, &rn));
	ASSERT_EQ(0, pd_tsend(a, a_note, 0, 64, b_in_a, 3, &sa));
	EXPECT_TRUE(PROGRESS_UNTIL(b, 3000, (pd_progress(a), pd_test(rn, NULL) == 1)));
	ASSERT_EQ(0, pd_tsend(b, bm, 0, big, a_in_b, 1, &sb));
	EXPECT_TRUE(PROGRESS_UNTIL(b, 3000, (pd_progress(c), pd_test(rb, NULL) == 1 && pd_test(sb, NULL) == 1)))
		TH_LOG("%s", pd_last_error());
	EXPECT_EQ(-1, check(pd_mr_cpu_ptr(a_from_b), big, 2));
	pd_req_free(rb);
	pd_req_free(rc);
	pd_req_free(sc);
	pd_req_free(sa);
	pd_req_free(rn);
	pd_req_free(sb);
	pd_mr_dereg(a_from_b);
	pd_mr_dereg(a_from_c);
	pd_mr_dereg(a_note);
	pd_mr_dereg(cm);
	pd_mr_dereg(bm);
	pd_mr_dereg(bn);
	pd_fabric_close(a);
	pd_fabric_close(b);
	pd_fabric_close(c);
	pd_set_dmabuf_sync(NULL);
	close(fd1);
	close(fd2);
}

/* A SYNC that holds the first START until the test lets it go. */
static pthread_mutex_t gate_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cond = PTHREAD_COND_INITIALIZER;
static bool gate_entered, gate_open, host_done;

static int gated_sync(int fd, uint64_t flags)
{
	(void)fd;
	if (flags & DMA_BUF_SYNC_END)
		return 0;
	pthread_mutex_lock(&gate_lock);
	gate_entered = true;
	pthread_cond_broadcast(&gate_cond);
	while (!gate_open)
		pthread_cond_wait(&gate_cond, &gate_lock);
	pthread_mutex_unlock(&gate_lock);
	return 0;
}

struct shared {
	struct pd_fabric *fab;
	uint64_t me;
	struct pd_mr *dev, *host;
	int ret;
};

/* Thread 1: a bounce send, whose staging copy blocks in SYNC. */
static void *bounce_sender(void *arg)
{
	struct shared *t = arg;
	struct pd_req *s;

	t->ret = pd_tsend(t->fab, t->dev, 0, CHUNK, t->me, 9, &s);
	if (!t->ret) {
		t->ret = pd_wait(s, WAIT_MS, NULL);
		pd_req_free(s);
	}
	return NULL;
}

/* Thread 2: a host-memory loopback transfer on the same fabric. */
static void *host_transfer(void *arg)
{
	struct shared *t = arg;
	struct pd_req *s, *r;
	int ret;

	ret = pd_trecv(t->fab, t->host, 0, 64, t->me, 10, &r);
	if (!ret) {
		ret = pd_tsend(t->fab, t->host, 64, 64, t->me, 10, &s);
		if (!ret) {
			ret = pd_wait(s, WAIT_MS, NULL) ?: pd_wait(r, WAIT_MS, NULL);
			pd_req_free(s);
		}
		pd_req_free(r);
	}
	pthread_mutex_lock(&gate_lock);
	host_done = true;
	pthread_cond_broadcast(&gate_cond);
	pthread_mutex_unlock(&gate_lock);
	return (void *)(intptr_t)ret;
}

/*
 * While one thread's staging copy sits in DMA_BUF_IOCTL_SYNC, another
 * thread's unrelated transfer on the same fabric must go ahead: the copy
 * and its SYNCs run outside the fabric lock.
 */
TEST(staging_copies_do_not_stall_other_threads)
{
	static char host[128], dst[CHUNK];
	struct shared t = { 0 };
	struct pd_mr *dstm;
	struct pd_req *r;
	pthread_t th1, th2;
	struct timespec until;
	void *ret2;
	bool done;
	int fd = memfd_of(CHUNK, 6);

	ASSERT_LE(0, fd);
	ASSERT_EQ(0, open_fab(&t.fab, 8));
	ASSERT_EQ(0, introduce(t.fab, t.fab, &t.me));
	ASSERT_EQ(0, pd_mr_reg_dmabuf(t.fab, fd, 0, CHUNK, 0, &t.dev));
	ASSERT_EQ(0, pd_mr_reg_host(t.fab, host, sizeof(host), 0, &t.host));
	ASSERT_EQ(0, pd_mr_reg_host(t.fab, dst, sizeof(dst), 0, &dstm));
	ASSERT_EQ(0, pd_trecv(t.fab, dstm, 0, CHUNK, t.me, 9, &r));
	pd_set_dmabuf_sync(gated_sync);
	ASSERT_EQ(0, pthread_create(&th1, NULL, bounce_sender, &t));
	pthread_mutex_lock(&gate_lock);
	while (!gate_entered)
		pthread_cond_wait(&gate_cond, &gate_lock);
	pthread_mutex_unlock(&gate_lock);
	ASSERT_EQ(0, pthread_create(&th2, NULL, host_transfer, &t));
	/* Bounded: with the copy under the fabric lock it never finishes. */
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 3;
	pthread_mutex_lock(&gate_lock);
	while (!host_done && pthread_cond_timedwait(&gate_cond, &gate_lock, &until) == 0)
		;
	done = host_done;
	gate_open = true;
	pthread_cond_broadcast(&gate_cond);
	pthread_mutex_unlock(&gate_lock);
	EXPECT_TRUE(done) TH_LOG("the host transfer waited for another thread's staging copy");
	pthread_join(th1, NULL);
	pthread_join(th2, &ret2);
	EXPECT_EQ(0, t.ret);
	EXPECT_EQ(0, (int)(intptr_t)ret2);
	EXPECT_EQ(0, pd_wait(r, WAIT_MS, NULL));
	EXPECT_EQ(-1, check(dst, CHUNK, 6));
	pd_req_free(r);
	pd_mr_dereg(dstm);
	pd_mr_dereg(t.dev);
	pd_mr_dereg(t.host);
	pd_fabric_close(t.fab);
	pd_set_dmabuf_sync(NULL);
	close(fd);
}

/* Thread: sends CHUNK host bytes to itself, then drives progress (and so
 * runs the receive's staging copy) until told to stop. */
struct copier {
	struct pd_fabric *fab;
	struct pd_mr *src;
	uint64_t me;
	bool stop;
	int ret;
};

static void *send_and_progress(void *arg)
{
	struct copier *c = arg;
	struct pd_req *s;

	c->ret = pd_tsend(c->fab, c->src, 0, CHUNK, c->me, 11, &s);
	if (c->ret)
		return NULL;
	while (!__atomic_load_n(&c->stop, __ATOMIC_ACQUIRE))
		pd_progress(c->fab);
	c->ret = pd_wait(s, WAIT_MS, NULL);
	pd_req_free(s);
	return NULL;
}

static void *free_req(void *arg)
{
	pd_req_free(arg);
	return NULL;
}

/*
 * pd_req_free while another thread's staging copy of that request runs:
 * it waits for the copy, and the request is destroyed once, by whichever
 * comes last.  The copying thread destroyed it while pd_req_free still
 * waited on it (a use-after-free when pd_req_free woke).
 */
TEST(freeing_during_a_copy_waits_and_destroys_once)
{
	static char host[CHUNK];
	struct copier c = { 0 };
	struct pd_mr *dev;
	struct pd_req *r;
	pthread_t th, fr;
	struct timespec until;
	bool entered;
	int fd = memfd_of(CHUNK, 0);

	ASSERT_LE(0, fd);
	gate_entered = gate_open = false;
	ASSERT_EQ(0, open_fab(&c.fab, 8));
	ASSERT_EQ(0, introduce(c.fab, c.fab, &c.me));
	ASSERT_EQ(0, pd_mr_reg_dmabuf(c.fab, fd, 0, CHUNK, 0, &dev));
	ASSERT_EQ(PD_PATH_BOUNCE, pd_mr_path(dev));
	ASSERT_EQ(0, pd_mr_reg_host(c.fab, host, sizeof(host), 0, &c.src));
	fill(host, sizeof(host), 4);
	ASSERT_EQ(0, pd_trecv(c.fab, dev, 0, CHUNK, c.me, 11, &r));
	pd_set_dmabuf_sync(gated_sync);
	ASSERT_EQ(0, pthread_create(&th, NULL, send_and_progress, &c));
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 5;
	pthread_mutex_lock(&gate_lock);
	while (!gate_entered && pthread_cond_timedwait(&gate_cond, &gate_lock, &until) == 0)
		;
	entered = gate_entered;
	pthread_mutex_unlock(&gate_lock);
	EXPECT_TRUE(entered) TH_LOG("the receive's staging copy never started");
	/* The free waits for the copy stuck in SYNC; then the copy ends. */
	ASSERT_EQ(0, pthread_create(&fr, NULL, free_req, r));
	usleep(200 * 1000);
	pthread_mutex_lock(&gate_lock);
	gate_open = true;
	pthread_cond_broadcast(&gate_cond);
	pthread_mutex_unlock(&gate_lock);
	pthread_join(fr, NULL);
	__atomic_store_n(&c.stop, true, __ATOMIC_RELEASE);
	pthread_join(th, NULL);
	EXPECT_EQ(0, c.ret) TH_LOG("%s", pd_last_error());
	pd_mr_dereg(dev);
	pd_mr_dereg(c.src);
	pd_fabric_close(c.fab);
	pd_set_dmabuf_sync(NULL);
	close(fd);
}

/* VmSize in kB, from /proc/self/status. */
static long vm_size_kb(void)
{
	char line[256];
	long kb = -1;
	FILE *f = fopen("/proc/self/status", "r");

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "VmSize: %ld kB", &kb) == 1)
			break;
	if (f)
		fclose(f);
	return kb;
}

/*
 * A bounce fabric whose two pool slots are held by receives nobody sends
 * to, so that every bounce request after them stages on its own; a memfd
 * dma-buf of one chunk (dev) and nhost chunks of host memory (hm).
 */
struct own_rig {
	struct pd_fabric *fab;
	struct pd_mr *dev, *hm;
	struct pd_req *held[2];
	uint64_t me;
	int fd;
};

static int own_rig_open(struct own_rig *g, void *host, size_t hostlen,
			size_t max_staging)
{
	int ret;

	*g = (struct own_rig) { .fd = memfd_of(CHUNK, 0) };
	if (g->fd < 0)
		return -errno;
	pd_set_dmabuf_sync(counting_sync);
	ret = open_capped(&g->fab, 2, max_staging) ?: introduce(g->fab, g->fab, &g->me) ?:
	      pd_mr_reg_dmabuf(g->fab, g->fd, 0, CHUNK, 0, &g->dev) ?:
	      pd_mr_reg_host(g->fab, host, hostlen, 0, &g->hm) ?:
	      pd_trecv(g->fab, g->dev, 0, CHUNK, g->me, 98, &g->held[0]) ?:
	      pd_trecv(g->fab, g->dev, 0, CHUNK, g->me, 99, &g->held[1]);
	return ret;
}

static void own_rig_close(struct own_rig *g)
{
	pd_req_free(g->held[0]);
	pd_req_free(g->held[1]);
	pd_mr_dereg(g->dev);
	pd_mr_dereg(g->hm);
	pd_fabric_close(g->fab);
	pd_set_dmabuf_sync(NULL);
	close(g->fd);
}

/* n host receives and n bounce sends of one chunk each, all waited for. */
static int own_round(struct own_rig *g, int n)
{
	struct pd_req *r[4], *s[4];
	int k, ret = 0;

	for (k = 0; k < n && !ret; k++)
		ret = pd_trecv(g->fab, g->hm, (uint64_t)k * CHUNK, CHUNK, g->me, 12, &r[k]) ?:
		      pd_tsend(g->fab, g->dev, 0, CHUNK, g->me, 12, &s[k]);
	if (ret)
		return ret;
	for (k = 0; k < n; k++) {
		ret = ret ?: pd_wait(s[k], WAIT_MS, NULL) ?: pd_wait(r[k], WAIT_MS, NULL);
		pd_req_free(s[k]);
		pd_req_free(r[k]);
	}
	return ret;
}

/*
 * With every pool slot taken, a request gets a staging buffer of its own;
 * past the spares kept (the pool's size again: two here) it is freed when
 * the request finishes.  Its mapping was never unmapped (the free list
 * reused the pointer to the memory as its link): 64 KiB leaked per
 * request.  Four sends in flight: two own buffers beyond the spares are
 * freed every round.
 */
TEST(own_staging_buffers_are_unmapped)
{
	static char host[4][CHUNK];
	struct own_rig g;
	unsigned long unmaps = 0;
	long before = 0;
	int i;

	ASSERT_EQ(0, own_rig_open(&g, host, sizeof(host), 0)) TH_LOG("%s", pd_last_error());
	for (i = 0; i < 200; i++) {
		if (i == 50) {
			before = vm_size_kb();
			unmaps = pd_stage_unmaps;
		}
		ASSERT_EQ(0, own_round(&g, 4)) TH_LOG("%s", pd_last_error());
	}
	unmaps = pd_stage_unmaps - unmaps;
	/* The free path ran (two per round), and nothing stayed mapped:
	 * 150 rounds leaking two pages each would be 1200 kB. */
	EXPECT_LE(2 * 150, unmaps) TH_LOG("%lu own buffers unmapped in 150 rounds", unmaps);
	EXPECT_GT(before + 600, vm_size_kb()) TH_LOG("VmSize %ld kB -> %ld kB", before, vm_size_kb());
	own_rig_close(&g);
}

/*
 * Own staging buffers are kept for the requests that follow (up to the
 * pool's size again): a window beyond the pool mapped and registered a
 * buffer for every request, which made bounce 30x slower than direct at
 * 64 KiB with pd-bench's window of 64.
 */
TEST(own_staging_buffers_are_reused)
{
	static char host[CHUNK];
	struct own_rig g;
	unsigned long maps = 0;
	int i;

	ASSERT_EQ(0, own_rig_open(&g, host, sizeof(host), 0)) TH_LOG("%s", pd_last_error());
	for (i = 0; i < 200; i++) {
		if (i == 10)
			maps = pd_stage_maps;
		ASSERT_EQ(0, own_round(&g, 1)) TH_LOG("%s", pd_last_error());
	}
	maps = pd_stage_maps - maps;
	EXPECT_EQ(0, maps) TH_LOG("%lu staging buffers mapped for 190 requests", maps);
	own_rig_close(&g);
}

/* A bounce receive of one chunk into the rig's dma-buf, nobody sending. */
static int own_recv(struct own_rig *g, uint64_t tag, struct pd_req **r)
{
	return pd_trecv(g->fab, g->dev, 0, CHUNK, g->me, tag, r);
}

/* A host send of one chunk of value v to the receive of tag, waited for,
 * and that receive's data checked. */
static int feed(struct own_rig *g, char *host, uint64_t tag, int v, struct pd_req *r)
{
	struct pd_req *s;
	int ret;

	fill(host, CHUNK, v);
	ret = pd_tsend(g->fab, g->hm, 0, CHUNK, g->me, tag, &s);
	if (ret)
		return ret;
	ret = pd_wait(s, WAIT_MS, NULL) ?: pd_wait(r, WAIT_MS, NULL);
	pd_req_free(s);
	if (!ret && check(pd_mr_cpu_ptr(g->dev), CHUNK, v) != -1)
		ret = -EIO;
	return ret;
}

/*
 * Own staging buffers are registered host memory, one per outstanding
 * bounce request beyond the pool, and nothing bounded them: 10,000
 * outstanding 4 MiB receives held 40 GiB.  Past max_staging_bytes a post
 * fails with -EAGAIN, names the setting and loses nothing: the requests
 * already posted complete with their data, and once one has finished its
 * bytes are free for the next.
 */
/* An own staging buffer of one CHUNK: page-rounded. */
static size_t own_bytes(void)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);

	return (CHUNK + pg - 1) / pg * pg;
}

TEST(own_staging_is_capped_and_a_refused_post_loses_nothing)
{
	static char host[CHUNK];
	struct pd_req *r[3] = { NULL };
	char cap[32];
	struct own_rig g;

	ASSERT_EQ(0, own_rig_open(&g, host, sizeof(host), 2 * own_bytes())) TH_LOG("%s", pd_last_error());
	snprintf(cap, sizeof(cap), "%zu", 2 * own_bytes());
	ASSERT_EQ(0, own_recv(&g, 50, &r[0])) TH_LOG("%s", pd_last_error());
	ASSERT_EQ(0, own_recv(&g, 51, &r[1])) TH_LOG("%s", pd_last_error());
	EXPECT_EQ(-EAGAIN, own_recv(&g, 52, &r[2]));
	EXPECT_NE(NULL, strstr(pd_last_error(), "PEERDIRECT_MAX_STAGING_BYTES")) TH_LOG("%s", pd_last_error());
	EXPECT_NE(NULL, strstr(pd_last_error(), cap)) TH_LOG("%s", pd_last_error());
	EXPECT_EQ(0, feed(&g, host, 50, 5, r[0])) TH_LOG("%s", pd_last_error());
	ASSERT_EQ(0, own_recv(&g, 52, &r[2])) TH_LOG("a finished request kept its staging bytes: %s",
						     pd_last_error());
	EXPECT_EQ(0, feed(&g, host, 51, 6, r[1])) TH_LOG("%s", pd_last_error());
	EXPECT_EQ(0, feed(&g, host, 52, 7, r[2])) TH_LOG("%s", pd_last_error());
	pd_req_free(r[0]);
	pd_req_free(r[1]);
	pd_req_free(r[2]);
	EXPECT_EQ(0, g.fab->staging_bytes);
	own_rig_close(&g);
}

/*
 * A chunk that is not a page multiple stages in page-rounded buffers, and
 * the cap counts what they hold: every byte counted at the post comes
 * back when the request finishes, spares reused or not.
 */
TEST(staging_counts_page_rounded_buffers_and_returns_to_zero)
{
	const size_t chunk = 6000, pg = (size_t)sysconf(_SC_PAGESIZE);
	const size_t own = (chunk + pg - 1) / pg * pg;
	static char host[6000];
	struct pd_fabric_attr attr;
	struct pd_req *r[3] = { NULL }, *s;
	struct pd_mr *dev, *hm;
	struct pd_fabric *fab;
	uint64_t me;
	int fd = memfd_of(chunk, 0), k, round;

	ASSERT_LE(0, fd);
	pd_set_dmabuf_sync(counting_sync);
	pd_fabric_attr_init(&attr);
	attr.chunk_size = chunk;
	attr.bounce_slots = 2;
	attr.path = PD_PATH_BOUNCE;
	attr.max_staging_bytes = 2 * own;
	ASSERT_EQ(0, open_loopback(&attr, &fab, &me)) TH_LOG("%s", pd_last_error());
	ASSERT_EQ(0, pd_mr_reg_dmabuf(fab, fd, 0, chunk, 0, &dev));
	ASSERT_EQ(0, pd_mr_reg_host(fab, host, sizeof(host), 0, &hm));
	for (round = 0; round < 3; round++) {
		/* two on the pool's slots, two on own buffers, one refused */
		struct pd_req *pool[2];

		ASSERT_EQ(0, pd_trecv(fab, dev, 0, chunk, me, 90, &pool[0]));
		ASSERT_EQ(0, pd_trecv(fab, dev, 0, chunk, me, 91, &pool[1]));
		for (k = 0; k < 2; k++)
			ASSERT_EQ(0, pd_trecv(fab, dev, 0, chunk, me, 92 + k, &r[k]))
				TH_LOG("round %d: %s", round, pd_last_error());
		EXPECT_EQ(2 * own, fab->staging_bytes);
		EXPECT_EQ(-EAGAIN, pd_trecv(fab, dev, 0, chunk, me, 94, &r[2]));
		for (k = 0; k < 4; k++) {
			struct pd_req *rq = k < 2 ? pool[k] : r[k - 2];

			ASSERT_EQ(0, pd_tsend(fab, hm, 0, chunk, me, 90 + k, &s));
			EXPECT_EQ(0, pd_wait(s, WAIT_MS, NULL) ?: pd_wait(rq, WAIT_MS, NULL))
				TH_LOG("%s", pd_last_error());
			pd_req_free(s);
			pd_req_free(rq);
		}
		EXPECT_EQ(0, fab->staging_bytes) TH_LOG("round %d", round);
	}
	pd_mr_dereg(dev);
	pd_mr_dereg(hm);
	pd_fabric_close(fab);
	pd_set_dmabuf_sync(NULL);
	close(fd);
}

/*
 * The cap comes from the attr, else PEERDIRECT_MAX_STAGING_BYTES, else
 * the default; 0 in the environment means no staging beyond the pool.
 */
TEST(staging_cap_from_the_environment_and_the_attr)
{
	static char host[CHUNK];
	struct pd_req *r[3] = { NULL };
	struct own_rig g;
	char cap[32];

	setenv("PEERDIRECT_MAX_STAGING_BYTES", "0", 1);
	ASSERT_EQ(0, own_rig_open(&g, host, sizeof(host), 0)) TH_LOG("%s", pd_last_error());
	EXPECT_EQ(-EAGAIN, own_recv(&g, 50, &r[0]));
	EXPECT_NE(NULL, strstr(pd_last_error(), "PEERDIRECT_MAX_STAGING_BYTES")) TH_LOG("%s", pd_last_error());
	own_rig_close(&g);

	ASSERT_EQ(0, own_rig_open(&g, host, sizeof(host), own_bytes())) TH_LOG("%s", pd_last_error());
	ASSERT_EQ(0, own_recv(&g, 50, &r[0])) TH_LOG("the attr did not win: %s", pd_last_error());
	EXPECT_EQ(-EAGAIN, own_recv(&g, 51, &r[1]));
	EXPECT_EQ(0, feed(&g, host, 50, 8, r[0])) TH_LOG("%s", pd_last_error());
	pd_req_free(r[0]);
	own_rig_close(&g);

	snprintf(cap, sizeof(cap), "%zu", 2 * own_bytes());
	setenv("PEERDIRECT_MAX_STAGING_BYTES", cap, 1);
	ASSERT_EQ(0, own_rig_open(&g, host, sizeof(host), 0)) TH_LOG("%s", pd_last_error());
	ASSERT_EQ(0, own_recv(&g, 50, &r[0])) TH_LOG("%s", pd_last_error());
	ASSERT_EQ(0, own_recv(&g, 51, &r[1])) TH_LOG("%s", pd_last_error());
	EXPECT_EQ(-EAGAIN, own_recv(&g, 52, &r[2]));
	EXPECT_EQ(0, feed(&g, host, 50, 9, r[0])) TH_LOG("%s", pd_last_error());
	EXPECT_EQ(0, feed(&g, host, 51, 10, r[1])) TH_LOG("%s", pd_last_error());
	pd_req_free(r[0]);
	pd_req_free(r[1]);
	own_rig_close(&g);
	unsetenv("PEERDIRECT_MAX_STAGING_BYTES");
}

TEST_HARNESS_MAIN
