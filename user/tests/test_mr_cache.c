// SPDX-License-Identifier: MIT
/* Registration cache unit tests: the cache alone, with a fake registration
 * function whose failures the tests script. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "kselftest_harness.h"
#include "mr_cache.h"
#include "peer_pair.h"
#include "slab.h"

struct fake {
	int regs, deregs;		/* atomics */
	int fail_next;			/* errno to fail the next n calls with */
	int fail_count;
	int live;			/* registered and not deregistered */
	int last_dereg_id;
	/* Runs inside the registration (outside the cache's lock), once. */
	void (*during_reg)(struct fake *f, const struct pd_mr_key *k);
	struct pd_mr_cache *c;
	/* A gate that holds registrations of ino gate_ino until opened. */
	uint64_t gate_ino;
	bool gate_open;
	int in_gate;
	pthread_mutex_t gate_lock;
	pthread_cond_t gate_cond;
};

struct handle {
	int id;
};

static int fake_reg(void *ctx, const struct pd_mr_key *k, int fd, void **out)
{
	struct fake *f = ctx;
	struct handle *h;

	(void)fd;
	if (f->during_reg) {
		void (*hook)(struct fake *, const struct pd_mr_key *) = f->during_reg;

		f->during_reg = NULL;
		hook(f, k);
	}
	if (f->gate_ino && k->ino == f->gate_ino) {
		pthread_mutex_lock(&f->gate_lock);
		f->in_gate++;
		pthread_cond_broadcast(&f->gate_cond);
		while (!f->gate_open)
			pthread_cond_wait(&f->gate_cond, &f->gate_lock);
		pthread_mutex_unlock(&f->gate_lock);
	}
	if (__atomic_load_n(&f->fail_count, __ATOMIC_SEQ_CST) > 0) {
		__atomic_sub_fetch(&f->fail_count, 1, __ATOMIC_SEQ_CST);
		return -f->fail_next;
	}
	h = malloc(sizeof(*h));
	if (!h)
		return -ENOMEM;
	h->id = __atomic_add_fetch(&f->regs, 1, __ATOMIC_SEQ_CST);
	__atomic_add_fetch(&f->live, 1, __ATOMIC_SEQ_CST);
	*out = h;
	return 0;
}

static void fake_dereg(void *ctx, void *handle)
{
	struct fake *f = ctx;
	struct handle *h = handle;

	__atomic_add_fetch(&f->deregs, 1, __ATOMIC_SEQ_CST);
	__atomic_sub_fetch(&f->live, 1, __ATOMIC_SEQ_CST);
	__atomic_store_n(&f->last_dereg_id, h->id, __ATOMIC_SEQ_CST);
	free(h);
}

/* Everything but PD_ACCESS_REMOTE_WRITE, which is never cached idle. */
#define LOCAL_ACCESS (PD_ACCESS_ALL & ~PD_ACCESS_REMOTE_WRITE)

static struct pd_mr_key dmabuf_key(uint64_t ino, uint64_t off, uint64_t len)
{
	return (struct pd_mr_key) {
		.kind = PD_MEM_DMABUF, .access = LOCAL_ACCESS, .domain = (void *)0x1,
		.dev = 7, .ino = ino, .start = off, .len = len,
	};
}

static struct pd_mr_key host_key(uint64_t start, uint64_t len)
{
	return (struct pd_mr_key) {
		.kind = PD_MEM_HOST, .access = LOCAL_ACCESS, .domain = (void *)0x1,
		.start = start, .len = len,
	};
}

static int id_of(struct pd_mr_cache_entry *e)
{
	return ((struct handle *)pd_mr_entry_handle(e))->id;
}

FIXTURE(cache) {
	struct fake f;
	struct pd_mr_cache *c;
};

FIXTURE_SETUP(cache)
{
	struct pd_mr_cache_ops ops = { .reg = fake_reg, .dereg = fake_dereg };

	memset(&self->f, 0, sizeof(self->f));
	pthread_mutex_init(&self->f.gate_lock, NULL);
	pthread_cond_init(&self->f.gate_cond, NULL);
	ops.ctx = &self->f;
	ASSERT_EQ(0, pd_mr_cache_create(&ops, 3, 1 << 30, &self->c));
	self->f.c = self->c;
}

FIXTURE_TEARDOWN(cache)
{
	pd_mr_cache_destroy(self->c);
	/* Every registration was deregistered exactly once. */
	EXPECT_EQ(0, self->f.live);
	EXPECT_EQ(self->f.regs, self->f.deregs);
}

static struct pd_mr_cache_entry *get(struct __test_metadata *_metadata,
				     struct pd_mr_cache *c, struct pd_mr_key k)
{
	struct pd_mr_cache_entry *e = NULL;

	EXPECT_EQ(0, pd_mr_cache_get(c, &k, -1, &e));
	return e;
}

TEST_F(cache, hit_after_miss_registers_once)
{
	struct pd_mr_cache_entry *a = get(_metadata, self->c, dmabuf_key(1, 0, 4096));
	struct pd_mr_cache_entry *b;
	struct pd_cache_stats st;

	pd_mr_cache_put(self->c, a);
	b = get(_metadata, self->c, dmabuf_key(1, 0, 4096));
	EXPECT_EQ(a, b);
	pd_mr_cache_put(self->c, b);
	pd_mr_cache_stats(self->c, &st);
	EXPECT_EQ(1, self->f.regs);
	EXPECT_EQ(2, st.lookups);
	EXPECT_EQ(1, st.hits);
	EXPECT_EQ(1, st.misses);
	EXPECT_EQ(1, st.entries);
	EXPECT_EQ(4096, st.bytes);
	EXPECT_EQ(1, st.reg_count);
}

TEST_F(cache, key_fields_all_distinguish)
{
	struct pd_mr_key base = dmabuf_key(1, 0, 4096), k;
	struct pd_mr_cache_entry *e[6];
	int i;

	ASSERT_EQ(0, pd_mr_cache_set_limits(self->c, 16, 0));
	e[0] = get(_metadata, self->c, base);
	k = base; k.ino = 2; e[1] = get(_metadata, self->c, k);
	k = base; k.start = 4096; e[2] = get(_metadata, self->c, k);
	k = base; k.len = 8192; e[3] = get(_metadata, self->c, k);
	k = base; k.access = PD_ACCESS_SEND; e[4] = get(_metadata, self->c, k);
	k = base; k.domain = (void *)0x2; e[5] = get(_metadata, self->c, k);
	EXPECT_EQ(6, self->f.regs);
	for (i = 0; i < 6; i++)
		pd_mr_cache_put(self->c, e[i]);
}

TEST_F(cache, lru_evicts_least_recently_released)
{
	struct pd_mr_cache_entry *a, *b, *cc, *d;
	int id_b;

	a = get(_metadata, self->c, dmabuf_key(1, 0, 4096));
	b = get(_metadata, self->c, dmabuf_key(2, 0, 4096));
	cc = get(_metadata, self->c, dmabuf_key(3, 0, 4096));
	id_b = id_of(b);
	pd_mr_cache_put(self->c, a);
	pd_mr_cache_put(self->c, b);
	pd_mr_cache_put(self->c, cc);
	/* Touch a: b becomes the oldest idle entry. */
	pd_mr_cache_put(self->c, get(_metadata, self->c, dmabuf_key(1, 0, 4096)));
	d = get(_metadata, self->c, dmabuf_key(4, 0, 4096));
	EXPECT_EQ(1, self->f.deregs);
	EXPECT_EQ(id_b, self->f.last_dereg_id);
	pd_mr_cache_put(self->c, d);
	/* a survived: still a hit. */
	pd_mr_cache_put(self->c, get(_metadata, self->c, dmabuf_key(1, 0, 4096)));
	EXPECT_EQ(4, self->f.regs);
}

TEST_F(cache, entry_cap_hands_out_uncached_when_all_in_use)
{
	struct pd_mr_cache_entry *e[4];
	struct pd_cache_stats st;
	int i;

	for (i = 0; i < 4; i++)
		e[i] = get(_metadata, self->c, dmabuf_key(10 + i, 0, 4096));
	pd_mr_cache_stats(self->c, &st);
	EXPECT_EQ(3, st.entries);
	EXPECT_EQ(1, st.uncached);
	EXPECT_EQ(0, self->f.deregs);	/* in-use entries are never evicted */
	pd_mr_cache_put(self->c, e[3]);	/* uncached: deregistered at release */
	EXPECT_EQ(1, self->f.deregs);
	EXPECT_EQ(id_of(e[0]) + 3, self->f.last_dereg_id);
	for (i = 0; i < 3; i++)
		pd_mr_cache_put(self->c, e[i]);
	EXPECT_EQ(1, self->f.deregs);	/* the others stay cached */
}

TEST_F(cache, byte_cap_evicts_oldest_idle)
{
	struct pd_mr_cache_entry *e;
	struct pd_cache_stats st;
	int i;

	ASSERT_EQ(0, pd_mr_cache_set_limits(self->c, 100, 10 * 4096));
	for (i = 0; i < 4; i++) {
		e = get(_metadata, self->c, dmabuf_key(20 + i, 0, 4 * 4096));
		pd_mr_cache_put(self->c, e);
	}
	pd_mr_cache_stats(self->c, &st);
	EXPECT_EQ(2, st.entries);
	EXPECT_EQ(8 * 4096, st.bytes);
	EXPECT_EQ(2, st.evictions);
	EXPECT_EQ(2, self->f.deregs);
	/* The two newest remain. */
	pd_mr_cache_put(self->c, get(_metadata, self->c, dmabuf_key(23, 0, 4 * 4096)));
	pd_mr_cache_put(self->c, get(_metadata, self->c, dmabuf_key(22, 0, 4 * 4096)));
	EXPECT_EQ(4, self->f.regs);
}

TEST_F(cache, lowering_limits_evicts_idle_only)
{
	struct pd_mr_cache_entry *e[3];
	struct pd_cache_stats st;
	int i;

	for (i = 0; i < 3; i++)
		e[i] = get(_metadata, self->c, dmabuf_key(30 + i, 0, 4096));
	ASSERT_EQ(0, pd_mr_cache_set_limits(self->c, 1, 0));
	EXPECT_EQ(0, self->f.deregs);
	for (i = 0; i < 3; i++)
		pd_mr_cache_put(self->c, e[i]);
	pd_mr_cache_stats(self->c, &st);
	EXPECT_EQ(1, st.entries);
	EXPECT_EQ(2, self->f.deregs);
}

TEST_F(cache, host_subrange_hits_containing_entry)
{
	const uint64_t base = 0x7f0000000000ULL, mib = 1 << 20;
	struct pd_mr_cache_entry *big, *e;
	struct pd_mr_key k;

	big = get(_metadata, self->c, host_key(base, 8 * mib));
	/* Inside, far from the entry's first granule. */
	e = get(_metadata, self->c, host_key(base + 5 * mib + 100, mib));
	EXPECT_EQ(big, e);
	pd_mr_cache_put(self->c, e);
	/* Access subset still hits. */
	k = host_key(base, 4096);
	k.access = PD_ACCESS_SEND;
	e = get(_metadata, self->c, k);
	EXPECT_EQ(big, e);
	pd_mr_cache_put(self->c, e);
	EXPECT_EQ(1, self->f.regs);
	/* Crossing the end misses. */
	e = get(_metadata, self->c, host_key(base + 8 * mib - 4096, 8192));
	EXPECT_NE(big, e);
	EXPECT_EQ(2, self->f.regs);
	pd_mr_cache_put(self->c, e);
	/* Another domain misses. */
	k = host_key(base, 4096);
	k.domain = (void *)0x2;
	e = get(_metadata, self->c, k);
	EXPECT_NE(big, e);
	pd_mr_cache_put(self->c, e);
	pd_mr_cache_put(self->c, big);
	EXPECT_EQ(3, self->f.regs);
}

/* Many adjacent small entries and one big one over them: every lookup
 * finds a containing entry and the small ones are not confused. */
TEST_F(cache, host_levels_keep_small_and_large_apart)
{
	const uint64_t base = 0x7e0000000000ULL;
	struct pd_mr_cache_entry *e[600], *big, *h;
	int i;

	ASSERT_EQ(0, pd_mr_cache_set_limits(self->c, 1000, 0));
	for (i = 0; i < 600; i++)
		e[i] = get(_metadata, self->c, host_key(base + (uint64_t)i * 4096, 4096));
	big = get(_metadata, self->c, host_key(base + (1 << 20), 4 << 20));
	for (i = 0; i < 600; i++) {
		h = get(_metadata, self->c, host_key(base + (uint64_t)i * 4096 + 8, 100));
		EXPECT_EQ(e[i], h);
		pd_mr_cache_put(self->c, h);
	}
	/* Beyond the small ones, inside the big one. */
	h = get(_metadata, self->c, host_key(base + (3 << 20), 65536));
	EXPECT_EQ(big, h);
	pd_mr_cache_put(self->c, h);
	/* Straddling two small entries: only the big one contains it. */
	h = get(_metadata, self->c, host_key(base + (1 << 20) + 4000, 200));
	EXPECT_EQ(big, h);
	pd_mr_cache_put(self->c, h);
	EXPECT_EQ(601, self->f.regs);
	for (i = 0; i < 600; i++)
		pd_mr_cache_put(self->c, e[i]);
	pd_mr_cache_put(self->c, big);
}

TEST_F(cache, revocation_drops_idle_and_fails_in_use)
{
	struct pd_mr_cache_entry *idle, *busy, *other, *again;
	struct pd_cache_stats st;

	ASSERT_EQ(0, pd_mr_cache_set_limits(self->c, 16, 0));
	idle = get(_metadata, self->c, dmabuf_key(5, 0, 4096));
	busy = get(_metadata, self->c, dmabuf_key(5, 4096, 4096));
	other = get(_metadata, self->c, dmabuf_key(6, 0, 4096));
	pd_mr_cache_put(self->c, idle);
	EXPECT_EQ(2, pd_mr_cache_invalidate_dmabuf(self->c, 7, 5, PD_REASON_REVOKE));
	EXPECT_EQ(1, self->f.deregs);		/* idle one dropped at once */
	EXPECT_EQ(-ENODEV, pd_mr_entry_check(busy));
	EXPECT_NE(NULL, strstr(pd_last_error(), "revoked"));
	EXPECT_EQ(0, pd_mr_entry_check(other));
	pd_mr_cache_put(self->c, busy);
	EXPECT_EQ(2, self->f.deregs);		/* in-use one at release */
	/* A new lookup registers afresh. */
	again = get(_metadata, self->c, dmabuf_key(5, 4096, 4096));
	EXPECT_EQ(0, pd_mr_entry_check(again));
	EXPECT_EQ(4, self->f.regs);
	pd_mr_cache_put(self->c, again);
	pd_mr_cache_put(self->c, other);
	pd_mr_cache_stats(self->c, &st);
	EXPECT_EQ(2, st.invalidations);
}

/*
 * An overflowed or removed device invalidates the entries of its own
 * dma-bufs (their origin), not those of other devices nor untracked ones.
 */
TEST_F(cache, origin_invalidation_spares_other_devices)
{
	struct pd_mr_key k1 = dmabuf_key(1, 0, 4096), k2 = dmabuf_key(2, 0, 4096);
	struct pd_mr_key k3 = dmabuf_key(3, 0, 4096);
	struct pd_mr_cache_entry *a, *b, *u, *h;

	ASSERT_EQ(0, pd_mr_cache_set_limits(self->c, 16, 0));
	k1.origin = 1;
	k2.origin = 2;
	a = get(_metadata, self->c, k1);
	b = get(_metadata, self->c, k2);
	u = get(_metadata, self->c, k3);
	h = get(_metadata, self->c, host_key(0x10000, 4096));
	EXPECT_EQ(1, pd_mr_cache_invalidate_origin(self->c, 1, PD_REASON_OVERFLOW));
	EXPECT_EQ(-ENODEV, pd_mr_entry_check(a));
	EXPECT_NE(NULL, strstr(pd_last_error(), "overflow"));
	EXPECT_EQ(0, pd_mr_entry_check(b));
	EXPECT_EQ(0, pd_mr_entry_check(u));
	EXPECT_EQ(0, pd_mr_entry_check(h));
	pd_mr_cache_put(self->c, a);
	pd_mr_cache_put(self->c, b);
	pd_mr_cache_put(self->c, u);
	pd_mr_cache_put(self->c, h);
	EXPECT_EQ(1, self->f.deregs);
}

/* Inode numbers repeat across filesystems: st_dev is part of the match. */
TEST_F(cache, invalidation_matches_st_dev_and_inode)
{
	struct pd_mr_key other_dev = dmabuf_key(5, 0, 4096);
	struct pd_mr_cache_entry *a, *b;

	other_dev.dev = 8;
	a = get(_metadata, self->c, dmabuf_key(5, 0, 4096));
	b = get(_metadata, self->c, other_dev);
	EXPECT_NE(a, b);
	EXPECT_EQ(1, pd_mr_cache_invalidate_dmabuf(self->c, 7, 5, PD_REASON_REVOKE));
	EXPECT_EQ(-ENODEV, pd_mr_entry_check(a));
	EXPECT_EQ(0, pd_mr_entry_check(b));
	pd_mr_cache_put(self->c, a);
	pd_mr_cache_put(self->c, b);
}

TEST_F(cache, host_invalidation_by_range)
{
	struct pd_mr_cache_entry *a, *b;

	a = get(_metadata, self->c, host_key(0x100000, 4096));
	b = get(_metadata, self->c, host_key(0x200000, 4096));
	pd_mr_cache_put(self->c, a);
	pd_mr_cache_put(self->c, b);
	EXPECT_EQ(1, pd_mr_cache_invalidate_host(self->c, (void *)0x1, 0x100800, 16));
	EXPECT_EQ(1, self->f.deregs);
	pd_mr_cache_put(self->c, get(_metadata, self->c, host_key(0x200000, 4096)));
	EXPECT_EQ(2, self->f.regs);
}

TEST_F(cache, resource_failure_evicts_idle_and_retries_once)
{
	struct pd_mr_cache_entry *a, *b, *e = NULL, *e2 = NULL;
	struct pd_mr_key k;
	struct pd_cache_stats st;

	a = get(_metadata, self->c, dmabuf_key(1, 0, 4096));
	b = get(_metadata, self->c, dmabuf_key(2, 0, 4096));
	pd_mr_cache_put(self->c, a);
	self->f.fail_next = ENOMEM;
	self->f.fail_count = 1;
	k = dmabuf_key(3, 0, 4096);
	ASSERT_EQ(0, pd_mr_cache_get(self->c, &k, -1, &e));
	EXPECT_EQ(3, self->f.regs);		/* a, b and the retried one */
	EXPECT_EQ(0, self->f.fail_count);
	EXPECT_EQ(1, self->f.deregs);		/* the idle one, not b */
	EXPECT_EQ(0, pd_mr_entry_check(b));
	pd_mr_cache_stats(self->c, &st);
	EXPECT_EQ(1, st.evictions);
	/* Twice in a row: the error surfaces, nothing leaks. */
	self->f.fail_count = 2;
	k = dmabuf_key(4, 0, 4096);
	EXPECT_EQ(-ENOMEM, pd_mr_cache_get(self->c, &k, -1, &e2));
	pd_mr_cache_stats(self->c, &st);
	EXPECT_EQ(1, st.reg_failures);
	pd_mr_cache_put(self->c, b);
	pd_mr_cache_put(self->c, e);
}

TEST_F(cache, other_failures_are_not_retried)
{
	struct pd_mr_cache_entry *e = NULL;
	struct pd_mr_key k = dmabuf_key(1, 0, 4096);

	self->f.fail_next = EFAULT;
	self->f.fail_count = 1;
	EXPECT_EQ(-EFAULT, pd_mr_cache_get(self->c, &k, -1, &e));
	EXPECT_EQ(0, self->f.fail_count);
	EXPECT_EQ(0, self->f.regs);
	/* And the cache is still usable. */
	pd_mr_cache_put(self->c, get(_metadata, self->c, k));
}

TEST_F(cache, bad_arguments)
{
	struct pd_mr_cache_entry *e = NULL;
	struct pd_mr_key k = dmabuf_key(1, 0, 0);

	EXPECT_EQ(-EINVAL, pd_mr_cache_get(self->c, &k, -1, &e));
	EXPECT_NE(NULL, strstr(pd_last_error(), "length is 0"));
	k = host_key(UINT64_MAX - 10, 4096);
	EXPECT_EQ(-EINVAL, pd_mr_cache_get(self->c, &k, -1, &e));
	EXPECT_EQ(-EINVAL, pd_mr_cache_get(self->c, NULL, -1, &e));
	EXPECT_EQ(0, self->f.regs);
}

struct worker {
	struct pd_mr_cache *c;
	int seed, errors;
};

static void *hammer(void *arg)
{
	struct worker *w = arg;
	unsigned int s = (unsigned int)w->seed;
	int i;

	for (i = 0; i < 20000; i++) {
		struct pd_mr_key k = dmabuf_key(rand_r(&s) % 64, 0, 4096);
		struct pd_mr_cache_entry *e;

		if (pd_mr_cache_get(w->c, &k, -1, &e)) {
			w->errors++;
			continue;
		}
		if (pd_mr_entry_key(e)->ino != k.ino)
			w->errors++;
		if (i % 1000 == 0)
			pd_mr_cache_invalidate_dmabuf(w->c, k.dev, k.ino, PD_REASON_REVOKE);
		pd_mr_cache_put(w->c, e);
	}
	return NULL;
}

TEST_F(cache, concurrent_threads_keep_counts_consistent)
{
	struct worker w[4];
	pthread_t t[4];
	struct pd_cache_stats st;
	int i;

	ASSERT_EQ(0, pd_mr_cache_set_limits(self->c, 16, 0));
	for (i = 0; i < 4; i++) {
		w[i] = (struct worker) { .c = self->c, .seed = i + 1 };
		ASSERT_EQ(0, pthread_create(&t[i], NULL, hammer, &w[i]));
	}
	for (i = 0; i < 4; i++) {
		pthread_join(t[i], NULL);
		EXPECT_EQ(0, w[i].errors);
	}
	pd_mr_cache_stats(self->c, &st);
	EXPECT_EQ(80000, st.lookups);
	EXPECT_EQ(st.lookups, st.hits + st.misses);
	EXPECT_LE(st.entries, 16);
	EXPECT_EQ((int)st.entries, self->f.live);
	EXPECT_GT(st.hits, 0);
}

static void revoke_during(struct fake *f, const struct pd_mr_key *k)
{
	pd_mr_cache_invalidate_dmabuf(f->c, k->dev, k->ino, PD_REASON_REVOKE);
}

/*
 * A revocation that lands while the miss is registering: the entry must not
 * go in marked valid.  The registration fails with -ENODEV and nothing of it
 * stays cached.
 */
TEST_F(cache, revocation_during_registration_is_not_lost)
{
	struct pd_mr_key k = dmabuf_key(9, 0, 4096);
	struct pd_mr_cache_entry *e = NULL;
	struct pd_cache_stats st;

	self->f.during_reg = revoke_during;
	EXPECT_EQ(-ENODEV, pd_mr_cache_get(self->c, &k, -1, &e));
	EXPECT_NE(NULL, strstr(pd_last_error(), "revoked while it was being registered"))
		TH_LOG("%s", pd_last_error());
	pd_mr_cache_stats(self->c, &st);
	EXPECT_EQ(0, st.entries);
	EXPECT_EQ(0, self->f.live);
	/* A later registration is a fresh one. */
	e = get(_metadata, self->c, k);
	EXPECT_EQ(0, pd_mr_entry_check(e));
	EXPECT_EQ(2, self->f.regs);
	pd_mr_cache_put(self->c, e);
}

/* The same before the miss: the caller read the generation, then resolved
 * the key (fstat), and the revocation came in between. */
TEST_F(cache, revocation_before_the_miss_is_caught_by_the_generation)
{
	struct pd_mr_key k = dmabuf_key(9, 0, 4096);
	struct pd_mr_cache_entry *e = NULL;
	uint64_t gen = pd_mr_cache_generation(self->c);

	pd_mr_cache_invalidate_dmabuf(self->c, 7, 9, PD_REASON_REVOKE);
	EXPECT_EQ(-ENODEV, pd_mr_cache_get_since(self->c, &k, -1, gen, &e));
	EXPECT_EQ(0, self->f.regs);
	/* Another inode is not affected. */
	k.ino = 10;
	EXPECT_EQ(0, pd_mr_cache_get_since(self->c, &k, -1, gen, &e));
	pd_mr_cache_put(self->c, e);
}

/*
 * Host invalidations (every munmap a memory hook reports) while a dma-buf
 * miss resolves its key: the revocation log is for dma-bufs, so however
 * many there are, the registration neither fails (-ESTALE, which the
 * library retries and then reports as "revocations keep arriving") nor
 * misses a revocation logged among them.
 */
TEST_F(cache, host_invalidations_do_not_push_revocations_out_of_the_log)
{
	struct pd_mr_key k = dmabuf_key(9, 0, 4096);
	struct pd_mr_cache_entry *e = NULL;
	uint64_t gen = pd_mr_cache_generation(self->c);
	unsigned int i;

	for (i = 0; i < 1000; i++)
		pd_mr_cache_invalidate_host(self->c, (void *)0x1, 0x100000 + i * 4096ULL, 4096);
	EXPECT_EQ(0, pd_mr_cache_get_since(self->c, &k, -1, gen, &e)) TH_LOG("%s", pd_last_error());
	pd_mr_cache_put(self->c, e);
	gen = pd_mr_cache_generation(self->c);
	k.ino = 10;
	pd_mr_cache_invalidate_dmabuf(self->c, 7, 10, PD_REASON_REVOKE);
	for (i = 0; i < 1000; i++)
		pd_mr_cache_invalidate_host(self->c, (void *)0x1, 0x100000 + i * 4096ULL, 4096);
	EXPECT_EQ(-ENODEV, pd_mr_cache_get_since(self->c, &k, -1, gen, &e));
}

static void unmap_during(struct fake *f, const struct pd_mr_key *k)
{
	pd_mr_cache_invalidate_host(f->c, k->domain, k->start, k->len);
}

/* pd_mr_invalidate_host while the range registers: the registration may
 * hold the old pages, so it is made again. */
TEST_F(cache, host_invalidation_during_registration_registers_again)
{
	struct pd_mr_cache_entry *e;

	self->f.during_reg = unmap_during;
	e = get(_metadata, self->c, host_key(0x300000, 4096));
	EXPECT_EQ(2, self->f.regs);
	EXPECT_EQ(2, id_of(e));
	EXPECT_EQ(1, self->f.deregs);
	pd_mr_cache_put(self->c, e);
	/* and it is cached */
	pd_mr_cache_put(self->c, get(_metadata, self->c, host_key(0x300000, 4096)));
	EXPECT_EQ(2, self->f.regs);
}

/* Entries handed out uncached (caps full, or larger than the byte cap) are
 * revoked like cached ones. */
TEST_F(cache, uncached_entries_are_invalidated_too)
{
	struct pd_mr_cache_entry *held, *over_count, *over_bytes;

	ASSERT_EQ(0, pd_mr_cache_set_limits(self->c, 1, 8192));
	held = get(_metadata, self->c, dmabuf_key(1, 0, 4096));
	over_count = get(_metadata, self->c, dmabuf_key(2, 0, 4096));
	over_bytes = get(_metadata, self->c, dmabuf_key(3, 0, 16384));
	EXPECT_EQ(1, pd_mr_cache_invalidate_dmabuf(self->c, 7, 2, PD_REASON_REVOKE));
	EXPECT_EQ(1, pd_mr_cache_invalidate_dmabuf(self->c, 7, 3, PD_REASON_REVOKE));
	EXPECT_EQ(-ENODEV, pd_mr_entry_check(over_count));
	EXPECT_EQ(-ENODEV, pd_mr_entry_check(over_bytes));
	EXPECT_EQ(0, pd_mr_entry_check(held));
	pd_mr_cache_put(self->c, held);
	pd_mr_cache_put(self->c, over_count);
	pd_mr_cache_put(self->c, over_bytes);
}

/* A registration larger than the byte cap can never be cached: it must not
 * flush the idle entries on its way to being handed out uncached. */
TEST_F(cache, oversized_registration_keeps_idle_entries)
{
	struct pd_mr_cache_entry *big;
	struct pd_cache_stats st;
	int i;

	ASSERT_EQ(0, pd_mr_cache_set_limits(self->c, 100, 10 * 4096));
	for (i = 0; i < 3; i++)
		pd_mr_cache_put(self->c, get(_metadata, self->c, dmabuf_key(40 + i, 0, 2 * 4096)));
	big = get(_metadata, self->c, dmabuf_key(50, 0, 20 * 4096));
	pd_mr_cache_stats(self->c, &st);
	EXPECT_EQ(0, self->f.deregs);
	EXPECT_EQ(0, st.evictions);
	EXPECT_EQ(3, st.entries);
	EXPECT_EQ(1, st.uncached);
	pd_mr_cache_put(self->c, big);
	EXPECT_EQ(1, self->f.deregs);
}

/*
 * Held entries fill the byte cap: a registration that cannot fit even with
 * every idle entry gone evicts none of them (the reviewer's N6: 40 KiB cap,
 * 32 KiB held, two idle 4 KiB entries, a 16 KiB get).  The same pattern
 * repeated keeps hitting the idle ones.
 */
TEST_F(cache, held_entries_filling_the_cap_spare_the_idle_ones)
{
	struct pd_mr_cache_entry *held[8], *big, *e;
	struct pd_cache_stats st;
	int i, round;

	ASSERT_EQ(0, pd_mr_cache_set_limits(self->c, 100, 10 * 4096));
	for (i = 0; i < 8; i++)
		held[i] = get(_metadata, self->c, dmabuf_key(60 + i, 0, 4096));
	for (i = 0; i < 2; i++)
		pd_mr_cache_put(self->c, get(_metadata, self->c, dmabuf_key(70 + i, 0, 4096)));
	for (round = 0; round < 4; round++) {
		big = get(_metadata, self->c, dmabuf_key(80, 0, 4 * 4096));
		pd_mr_cache_put(self->c, big);
		for (i = 0; i < 2; i++) {
			e = get(_metadata, self->c, dmabuf_key(70 + i, 0, 4096));
			pd_mr_cache_put(self->c, e);
		}
	}
	pd_mr_cache_stats(self->c, &st);
	EXPECT_EQ(0, st.evictions);
	EXPECT_EQ(4, st.uncached);
	EXPECT_EQ(8, st.hits) TH_LOG("the idle entries were evicted and registered again");
	EXPECT_EQ(10 + 4, self->f.regs);
	/* Room again once held bytes go: the next one evicts to fit. */
	pd_mr_cache_put(self->c, held[0]);
	pd_mr_cache_put(self->c, held[1]);
	big = get(_metadata, self->c, dmabuf_key(80, 0, 4 * 4096));
	pd_mr_cache_put(self->c, big);
	pd_mr_cache_stats(self->c, &st);
	EXPECT_EQ(4, st.evictions);	/* 16 KiB of idle entries made room */
	EXPECT_EQ(4, st.uncached);
	for (i = 2; i < 8; i++)
		pd_mr_cache_put(self->c, held[i]);
}

/*
 * What a peer may write is cached only while held, and serves only the
 * same registration: after the last release nothing keeps it registered,
 * and neither a containing entry nor a local-only one stands in for it.
 */
TEST_F(cache, remote_write_entries_are_exact_and_never_idle)
{
	struct pd_mr_key rw = host_key(0x200000, 8192), sub = host_key(0x200100, 64);
	struct pd_mr_key d = dmabuf_key(90, 0, 4096);
	struct pd_mr_cache_entry *a, *b, *local;
	struct pd_cache_stats st;

	rw.access = sub.access = d.access = PD_ACCESS_REMOTE_WRITE;
	a = get(_metadata, self->c, rw);
	b = get(_metadata, self->c, sub);
	EXPECT_NE(a, b) TH_LOG("a containing entry served a smaller remote-write window");
	local = get(_metadata, self->c, host_key(0x200000, 4096));
	EXPECT_NE(a, local) TH_LOG("a remote-write entry served a local-only registration");
	EXPECT_EQ(a, get(_metadata, self->c, rw));	/* the same one again: a hit */
	pd_mr_cache_put(self->c, a);
	pd_mr_cache_put(self->c, a);
	pd_mr_cache_put(self->c, b);
	EXPECT_EQ(2, self->f.deregs) TH_LOG("a released remote-write entry stayed registered");
	pd_mr_cache_put(self->c, local);
	EXPECT_EQ(2, self->f.deregs);	/* local-only: idle in the cache */
	pd_mr_cache_put(self->c, get(_metadata, self->c, d));
	EXPECT_EQ(3, self->f.deregs);
	pd_mr_cache_stats(self->c, &st);
	EXPECT_EQ(1, st.entries);
}

struct miss_thread {
	struct pd_mr_cache *c;
	struct pd_mr_cache_entry *e;
	int ret;
};

static void *miss_same_key(void *arg)
{
	struct miss_thread *t = arg;
	struct pd_mr_key k = dmabuf_key(42, 0, 4096);

	t->ret = pd_mr_cache_get(t->c, &k, -1, &t->e);
	return NULL;
}

/*
 * Four concurrent misses on one key: one registers, the others wait for it
 * and share the result (single flight).  The first registration is held at
 * a gate until the other three are waiting in the cache.
 */
TEST_F(cache, concurrent_misses_register_once)
{
	struct miss_thread t[4];
	pthread_t th[4];
	int64_t end;
	int i;

	self->f.gate_ino = 42;
	for (i = 0; i < 4; i++) {
		t[i] = (struct miss_thread) { .c = self->c };
		ASSERT_EQ(0, pthread_create(&th[i], NULL, miss_same_key, &t[i]));
	}
	/* Bounded: a cache without single flight never gets 3 waiters. */
	end = mono_ms() + 5000;
	while (pd_mr_cache_waiters(self->c) < 3 && mono_ms() < end)
		sched_yield();
	EXPECT_EQ(3, pd_mr_cache_waiters(self->c));
	pthread_mutex_lock(&self->f.gate_lock);
	self->f.gate_open = true;
	pthread_cond_broadcast(&self->f.gate_cond);
	pthread_mutex_unlock(&self->f.gate_lock);
	for (i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		EXPECT_EQ(0, t[i].ret);
		EXPECT_EQ(t[0].e, t[i].e);
	}
	EXPECT_EQ(1, self->f.regs);
	for (i = 0; i < 4; i++)
		pd_mr_cache_put(self->c, t[i].e);
}

/* A failed registration wakes its waiters, which then try for themselves. */
TEST_F(cache, waiters_of_a_failed_miss_try_again)
{
	struct miss_thread t[2];
	pthread_t th[2];
	int64_t end;
	int i;

	self->f.gate_ino = 42;
	self->f.fail_next = EFAULT;
	self->f.fail_count = 1;
	for (i = 0; i < 2; i++) {
		t[i] = (struct miss_thread) { .c = self->c };
		ASSERT_EQ(0, pthread_create(&th[i], NULL, miss_same_key, &t[i]));
	}
	end = mono_ms() + 5000;
	while (pd_mr_cache_waiters(self->c) < 1 && mono_ms() < end)
		sched_yield();
	pthread_mutex_lock(&self->f.gate_lock);
	self->f.gate_open = true;
	pthread_cond_broadcast(&self->f.gate_cond);
	pthread_mutex_unlock(&self->f.gate_lock);
	for (i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	/* One failed (EFAULT), the other registered on its own. */
	EXPECT_EQ(-EFAULT, t[0].ret ?: t[1].ret);
	EXPECT_TRUE(t[0].ret == 0 || t[1].ret == 0);
	EXPECT_EQ(1, self->f.regs);
	pd_mr_cache_put(self->c, t[0].ret ? t[1].e : t[0].e);
}

/*
 * A provider that pins pages would keep a freed buffer's old pages in an
 * idle registration.  With no memory monitor, such a cache keeps no idle
 * host entry: the last release deregisters.  dma-buf entries are unaffected
 * (revocation events watch them).
 */
TEST_F(cache, no_idle_host_entries_when_the_provider_pins)
{
	struct pd_cache_stats st;

	pd_mr_cache_set_retain_idle_host(self->c, false);
	pd_mr_cache_put(self->c, get(_metadata, self->c, host_key(0x400000, 4096)));
	EXPECT_EQ(1, self->f.deregs);
	pd_mr_cache_put(self->c, get(_metadata, self->c, host_key(0x400000, 4096)));
	EXPECT_EQ(2, self->f.regs);
	pd_mr_cache_put(self->c, get(_metadata, self->c, dmabuf_key(1, 0, 4096)));
	pd_mr_cache_stats(self->c, &st);
	EXPECT_EQ(1, st.entries);
	EXPECT_EQ(2, self->f.deregs);
}

/*
 * What a hit costs at 10,000 entries depends on the entries sharing cache
 * lines and pages (P3): consecutive allocations are neighbours, aligned,
 * and a freed one is the next one handed out (still in the cache).
 */
TEST(entries_are_packed_aligned_and_reused_last_freed_first)
{
	enum { N = 3000 };
	static char *obj[N];
	struct pd_slab s;
	size_t i, neighbours = 0;

	pd_slab_init(&s, 150, 64);
	EXPECT_EQ(192, s.size);
	for (i = 0; i < N; i++) {
		obj[i] = pd_slab_alloc(&s);
		ASSERT_NE(NULL, obj[i]);
		EXPECT_EQ(0, (uintptr_t)obj[i] % 64);
		memset(obj[i], 0xa5, 150);	/* ASan: all of it is ours */
		if (i && obj[i] == obj[i - 1] + s.size)
			neighbours++;
	}
	/* All but the first of each block: blocks of 16, 32, ... 512. */
	EXPECT_GE(neighbours, N - 12);
	pd_slab_free(&s, obj[7]);
	pd_slab_free(&s, obj[1234]);
	EXPECT_EQ(obj[1234], pd_slab_alloc(&s));
	EXPECT_EQ(obj[7], pd_slab_alloc(&s));
	for (i = 0; i < N; i++)
		pd_slab_free(&s, obj[i]);
	pd_slab_destroy(&s);	/* LSan: every block went */
	EXPECT_EQ(NULL, s.blocks);
}

TEST_HARNESS_MAIN
