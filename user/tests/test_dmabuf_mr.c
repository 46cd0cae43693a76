// SPDX-License-Identifier: MIT
/*
 * The dmabuf path (FI_MR_DMABUF) on every host provider, with a memfd
 * standing in for the dma-buf.  Where libfabric (>= 1.20) and the provider
 * accept it, bytes move through it at sizes a provider copies with the CPU
 * (inline, inject: 1 B, 64 B, 4 KiB) and a large multi-chunk one, in both
 * directions and by RMA write, from a registration at an unaligned offset:
 * a wrong base_addr shows as wrong bytes, a fault, or a write outside the
 * range.  Where it is refused, the fallback path and its reason are what is
 * asserted, and the bytes move through the fallback instead.  Built against
 * libfabric without FI_MR_DMABUF (1.17), every variant asserts that refusal.
 * Transfers loop back to the fabric's own address.
 */
#include <sys/mman.h>

#include "kselftest_harness.h"
#include "peer_pair.h"
#include "bounce_pool.h"
#include "fabric.h"

#define BUF_LEN		(8u << 20)
#define REG_OFF		(3 * 4096 + 100)	/* not page-aligned on purpose */
#define REG_LEN		((4u << 20) + 3 + 4096)
#define CHUNK		(1u << 20)

static const size_t sizes[] = { 1, 64, 4096, 65536, (4u << 20) + 3 };

/* The memfd has no DMA_BUF_IOCTL_SYNC: the bounce fallback needs a stand-in. */
static int no_sync(int fd, uint64_t flags)
{
	(void)fd;
	(void)flags;
	return 0;
}

FIXTURE(dmabuf) {
	struct pd_fabric *fab;
	uint64_t me;
	int fd[2];
	unsigned char *view[2];		/* the test's own view of each memfd */
	unsigned char *host;
	struct pd_mr *host_mr;
};

/*
 * What libfabric 2.1.0 was measured to do with FI_HMEM requested: only shm
 * offers it (tcp, tcp;ofi_rxm, udp;ofi_rxd and sockets answer ENODATA), and
 * shm accepts FI_MR_DMABUF.  But an shm endpoint with FI_HMEM has no CMA,
 * host memory included, so the library asks it of shm only where CMA is
 * off anyway (FI_SHM_DISABLE_CMA=1): then shm copies from the mapping with
 * the CPU and auto takes the dmabuf path.  With CMA auto bounces.
 */
FIXTURE_VARIANT(dmabuf) {
	const char *provider;
	bool nocma;			/* FI_SHM_DISABLE_CMA=1 for the test */
	bool asks_hmem;			/* the library asks FI_HMEM (auto) */
	bool offers_hmem;		/* FI_HMEM offered, FI_MR_DMABUF accepted */
	const char *forced_refusal;	/* why a forced dmabuf is refused */
	enum pd_path auto_path;		/* where auto lands with FI_MR_DMABUF built in */
	const char *auto_dmabuf_step;	/* the dmabuf step auto records then */
	enum pd_path auto_path_without;	/* ... and without it (libfabric < 1.20) */
};

FIXTURE_VARIANT_ADD(dmabuf, shm) {
	.provider = "shm", .asks_hmem = false, .offers_hmem = true,
	.forced_refusal = "FI_HMEM not asked of shm: it would turn off shm's CMA",
	.auto_path = PD_PATH_BOUNCE, .auto_dmabuf_step = "FI_HMEM not asked of shm",
	.auto_path_without = PD_PATH_BOUNCE,
};
FIXTURE_VARIANT_ADD(dmabuf, shm_nocma) {
	.provider = "shm", .nocma = true, .asks_hmem = true, .offers_hmem = true,
	.forced_refusal = "lacks FI_HMEM",
	.auto_path = PD_PATH_DMABUF, .auto_dmabuf_step = "FI_MR_DMABUF on shm",
	.auto_path_without = PD_PATH_MAPPED,
};
FIXTURE_VARIANT_ADD(dmabuf, tcp) {
	.provider = "tcp", .asks_hmem = true, .offers_hmem = false, .forced_refusal = "lacks FI_HMEM",
	.auto_path = PD_PATH_MAPPED, .auto_dmabuf_step = "lacks FI_HMEM",
	.auto_path_without = PD_PATH_MAPPED,
};
FIXTURE_VARIANT_ADD(dmabuf, tcp_rxm) {
	.provider = "tcp;ofi_rxm", .asks_hmem = true, .offers_hmem = false, .forced_refusal = "lacks FI_HMEM",
	.auto_path = PD_PATH_MAPPED, .auto_dmabuf_step = "lacks FI_HMEM",
	.auto_path_without = PD_PATH_MAPPED,
};

static int memfd_view(size_t len, uint64_t seed, unsigned char **view)
{
	int fd = memfd_create("pd-test-dmabuf", MFD_CLOEXEC);
	void *p;

	if (fd < 0 || ftruncate(fd, (off_t)len))
		return -1;
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		return -1;
	*view = p;
	fill(*view, len, seed);
	return fd;
}

FIXTURE_SETUP(dmabuf)
{
	struct pd_fabric_attr attr;
	char addr[256];
	size_t alen = sizeof(addr);
	int i;

	/* Each test runs in a child of its own, where libfabric starts. */
	unsetenv("PEERDIRECT_PATH");
	unsetenv("PEERDIRECT_PROVIDER");
	if (variant->nocma)
		setenv("FI_SHM_DISABLE_CMA", "1", 1);
	else
		unsetenv("FI_SHM_DISABLE_CMA");
	pd_set_dmabuf_sync(no_sync);
	pd_fabric_attr_init(&attr);
	attr.provider = variant->provider;
	attr.chunk_size = CHUNK;
	ASSERT_EQ(0, pd_fabric_open(&attr, &self->fab)) TH_LOG("%s", pd_last_error());
	ASSERT_EQ(0, pd_fabric_addr(self->fab, addr, &alen));
	ASSERT_EQ(0, pd_fabric_insert(self->fab, addr, alen, &self->me));
	for (i = 0; i < 2; i++) {
		self->fd[i] = memfd_view(BUF_LEN, 20 + (uint64_t)i, &self->view[i]);
		ASSERT_LE(0, self->fd[i]);
	}
	self->host = mmap(NULL, BUF_LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, self->host);
	ASSERT_EQ(0, pd_mr_reg_host(self->fab, self->host, BUF_LEN, PD_ACCESS_ALL, &self->host_mr));
}

FIXTURE_TEARDOWN(dmabuf)
{
	int i;

	pd_mr_dereg(self->host_mr);
	pd_fabric_close(self->fab);
	pd_set_dmabuf_sync(NULL);
	munmap(self->host, BUF_LEN);
	for (i = 0; i < 2; i++) {
		munmap(self->view[i], BUF_LEN);
		close(self->fd[i]);
	}
}

static bool dmabuf_accepted(const FIXTURE_VARIANT(dmabuf) *variant)
{
	return pd_have_fi_mr_dmabuf() && variant->offers_hmem && variant->asks_hmem;
}

/* The refusal the reason must name when the dmabuf path is not taken. */
static const char *refusal(const FIXTURE_VARIANT(dmabuf) *variant, bool forced)
{
	if (!pd_have_fi_mr_dmabuf())
		return "without FI_MR_DMABUF (needs 1.20)";
	return forced ? variant->forced_refusal : variant->auto_dmabuf_step;
}

/* Tagged send of len bytes from src to dst over loopback. */
static int loop_xfer(struct pd_fabric *fab, uint64_t me, struct pd_mr *src,
		     struct pd_mr *dst, size_t len, uint64_t tag)
{
	struct pd_req *s = NULL, *r = NULL;
	int ret = pd_trecv(fab, dst, 0, len, me, tag, &r), ret2;

	if (ret)
		return ret;
	ret = pd_tsend(fab, src, 0, len, me, tag, &s);
	if (!ret)
		ret = pd_wait(s, WAIT_MS, NULL);
	ret2 = ret ? 0 : pd_wait(r, WAIT_MS, NULL);
	pd_req_free(s);
	pd_req_free(r);
	return ret ?: ret2;
}

/* Guard bytes on both sides of [REG_OFF, REG_OFF + len) still hold seed's. */
static bool guards_intact(const unsigned char *view, size_t len, uint64_t seed)
{
	return view[REG_OFF - 1] == pattern(REG_OFF - 1, seed) &&
	       view[REG_OFF + len] == pattern(REG_OFF + len, seed);
}

/*
 * Both directions at every size, through whatever path mr ended on:
 * "device" -> host, host -> "device", "device" -> "device".
 */
static void move_bytes(struct __test_metadata *_metadata, FIXTURE_DATA(dmabuf) *self,
		       struct pd_mr *a, struct pd_mr *b)
{
	unsigned int i;

	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t len = sizes[i];
		uint64_t seed = 100 + i;

		/* a -> host */
		fill(self->view[0] + REG_OFF, len, seed);
		memset(self->host, 0, len + 1);
		ASSERT_EQ(0, loop_xfer(self->fab, self->me, a, self->host_mr, len, 2 * i))
			TH_LOG("%zu bytes a->host: %s", len, pd_last_error());
		EXPECT_EQ(-1, check(self->host, len, seed)) TH_LOG("%zu bytes a->host", len);
		EXPECT_EQ(0, self->host[len]);

		/* host -> b, whose neighbours must stay as they were */
		fill(self->host, len, seed + 50);
		fill(self->view[1], BUF_LEN, 21);
		ASSERT_EQ(0, loop_xfer(self->fab, self->me, self->host_mr, b, len, 2 * i + 1))
			TH_LOG("%zu bytes host->b: %s", len, pd_last_error());
		EXPECT_EQ(-1, check(self->view[1] + REG_OFF, len, seed + 50)) TH_LOG("%zu bytes host->b", len);
		EXPECT_TRUE(guards_intact(self->view[1], len, 21));

		/* a -> b */
		ASSERT_EQ(0, loop_xfer(self->fab, self->me, a, b, len, 1000 + i))
			TH_LOG("%zu bytes a->b: %s", len, pd_last_error());
		EXPECT_EQ(-1, check(self->view[1] + REG_OFF, len, seed)) TH_LOG("%zu bytes a->b", len);
	}
}

static void reg_pair(struct __test_metadata *_metadata, FIXTURE_DATA(dmabuf) *self,
		     struct pd_mr **a, struct pd_mr **b)
{
	ASSERT_EQ(0, pd_mr_reg_dmabuf(self->fab, self->fd[0], REG_OFF, REG_LEN, 0, a))
		TH_LOG("%s", pd_last_error());
	ASSERT_EQ(0, pd_mr_reg_dmabuf(self->fab, self->fd[1], REG_OFF, REG_LEN, 0, b))
		TH_LOG("%s", pd_last_error());
	/* The CPU view is the registered offset of the "dma-buf". */
	ASSERT_EQ(self->view[0][REG_OFF], *(unsigned char *)pd_mr_cpu_ptr(*a));
	ASSERT_EQ(self->view[1][REG_OFF + REG_LEN - 1],
		  ((unsigned char *)pd_mr_cpu_ptr(*b))[REG_LEN - 1]);
}

TEST_F_TIMEOUT(dmabuf, forced_dmabuf_moves_bytes_or_names_the_refusal, 120)
{
	struct pd_mr *a, *b;

	ASSERT_EQ(0, pd_fabric_set_path(self->fab, PD_PATH_DMABUF));
	if (!dmabuf_accepted(variant)) {
		EXPECT_EQ(-EOPNOTSUPP, pd_mr_reg_dmabuf(self->fab, self->fd[0], REG_OFF, REG_LEN, 0, &a));
		EXPECT_NE(NULL, strstr(pd_last_error(), "forced path dmabuf is impossible"));
		EXPECT_NE(NULL, strstr(pd_last_error(), refusal(variant, true)))
			TH_LOG("%s", pd_last_error());
		return;
	}
	reg_pair(_metadata, self, &a, &b);
	EXPECT_EQ(PD_PATH_DMABUF, pd_mr_path(a));
	EXPECT_EQ(PD_PATH_DMABUF, pd_mr_path(b));
	EXPECT_NE(NULL, strstr(pd_mr_reason(a), "FI_MR_DMABUF on ")) TH_LOG("%s", pd_mr_reason(a));
	move_bytes(_metadata, self, a, b);
	pd_mr_dereg(a);
	pd_mr_dereg(b);
}

TEST_F_TIMEOUT(dmabuf, auto_path_and_reason_then_bytes, 120)
{
	enum pd_path want = pd_have_fi_mr_dmabuf() ? variant->auto_path : variant->auto_path_without;
	struct pd_mr *a, *b;

	reg_pair(_metadata, self, &a, &b);
	EXPECT_EQ(want, pd_mr_path(a)) TH_LOG("%s", pd_mr_reason(a));
	EXPECT_NE(NULL, strstr(pd_mr_reason(a), refusal(variant, false))) TH_LOG("%s", pd_mr_reason(a));
	/* Every step's reason, the last one's included. */
	if (want == PD_PATH_BOUNCE)
		EXPECT_NE(NULL, strstr(pd_mr_reason(a), "bounce: staged through"))
			TH_LOG("%s", pd_mr_reason(a));
	move_bytes(_metadata, self, a, b);
	pd_mr_dereg(a);
	pd_mr_dereg(b);
}

/*
 * FI_HMEM costs shm its single copy (CMA) for host memory too, so the
 * library does not ask it of shm with CMA, whatever the caller's spelling
 * of the name and on a bounce fabric as on an auto one; forcing dmabuf
 * later is refused with the reason.  Other providers are asked on every
 * path: a bounce fabric must get the provider an auto one gets.
 */
TEST_F(dmabuf, fi_hmem_is_asked_only_where_it_costs_nothing)
{
	bool cma = !strcmp(variant->provider, "shm") && !variant->nocma;
	struct pd_fabric_attr attr;
	struct pd_fabric *fab;
	struct pd_mr *mr;

	/* The fixture's fabric (auto). */
	EXPECT_EQ(!(pd_have_fi_mr_dmabuf() && variant->asks_hmem), !!self->fab->hmem_unasked);
	EXPECT_EQ(dmabuf_accepted(variant), self->fab->hmem);
	EXPECT_EQ(!!(self->fab->info->caps & FI_HMEM), self->fab->hmem);
	EXPECT_EQ(cma, self->fab->pins_cpu_maps);

	pd_fabric_attr_init(&attr);
	attr.provider = variant->provider;
	attr.chunk_size = CHUNK;
	attr.path = PD_PATH_BOUNCE;
	ASSERT_EQ(0, pd_fabric_open(&attr, &fab)) TH_LOG("%s", pd_last_error());
	EXPECT_EQ(!!self->fab->hmem_unasked, !!fab->hmem_unasked);
	EXPECT_EQ(self->fab->hmem, fab->hmem);
	EXPECT_EQ(cma, fab->pins_cpu_maps);
	ASSERT_EQ(0, pd_fabric_set_path(fab, PD_PATH_DMABUF));
	if (dmabuf_accepted(variant)) {
		ASSERT_EQ(0, pd_mr_reg_dmabuf(fab, self->fd[0], REG_OFF, REG_LEN, 0, &mr))
			TH_LOG("%s", pd_last_error());
		EXPECT_EQ(PD_PATH_DMABUF, pd_mr_path(mr));
		pd_mr_dereg(mr);
	} else {
		EXPECT_EQ(-EOPNOTSUPP, pd_mr_reg_dmabuf(fab, self->fd[0], REG_OFF, REG_LEN, 0, &mr));
		EXPECT_NE(NULL, strstr(pd_last_error(), refusal(variant, true)))
			TH_LOG("%s", pd_last_error());
	}
	pd_fabric_close(fab);

	/* No provider named: bounce and auto fabrics ask alike, so they get
	 * the same provider. */
	if (!strcmp(variant->provider, "tcp")) {
		struct pd_fabric *fa;

		attr.provider = NULL;
		ASSERT_EQ(0, pd_fabric_open(&attr, &fab)) TH_LOG("%s", pd_last_error());
		attr.path = PD_PATH_AUTO;
		ASSERT_EQ(0, pd_fabric_open(&attr, &fa)) TH_LOG("%s", pd_last_error());
		EXPECT_STREQ(pd_fabric_provider(fa), pd_fabric_provider(fab));
		EXPECT_EQ(fa->hmem, fab->hmem);
		EXPECT_EQ(!!fa->hmem_unasked, !!fab->hmem_unasked);
		pd_fabric_close(fa);
		pd_fabric_close(fab);
	}

	if (!cma)
		return;
	attr.provider = "SHM";
	attr.path = PD_PATH_AUTO;
	ASSERT_EQ(0, pd_fabric_open(&attr, &fab)) TH_LOG("%s", pd_last_error());
	EXPECT_STREQ("shm", pd_fabric_provider(fab));
	EXPECT_FALSE(fab->hmem);
	EXPECT_TRUE(fab->pins_cpu_maps);
	pd_fabric_close(fab);
}

/*
 * Opened with path dmabuf, the fabric asks FI_HMEM even of shm with CMA:
 * the caller wants the dma-buf given to the provider, and shm then copies
 * it from the mapping with the CPU (no CMA, nothing to pin).
 */
TEST_F_TIMEOUT(dmabuf, a_dmabuf_fabric_asks_fi_hmem, 120)
{
	bool cma = !strcmp(variant->provider, "shm") && !variant->nocma;
	const size_t len = (4u << 20) + 3;
	struct pd_fabric_attr attr;
	struct pd_fabric *fab;
	struct pd_mr *dev, *host;
	char addr[256];
	size_t alen = sizeof(addr);
	uint64_t me;

	pd_fabric_attr_init(&attr);
	attr.provider = variant->provider;
	attr.chunk_size = CHUNK;
	attr.path = PD_PATH_DMABUF;
	ASSERT_EQ(0, pd_fabric_open(&attr, &fab)) TH_LOG("%s", pd_last_error());
	EXPECT_EQ(!pd_have_fi_mr_dmabuf(), !!fab->hmem_unasked);
	EXPECT_EQ(pd_have_fi_mr_dmabuf() && variant->offers_hmem, fab->hmem);
	EXPECT_EQ(cma && !fab->hmem, fab->pins_cpu_maps);
	if (fab->hmem) {
		ASSERT_EQ(0, pd_fabric_addr(fab, addr, &alen));
		ASSERT_EQ(0, pd_fabric_insert(fab, addr, alen, &me));
		ASSERT_EQ(0, pd_mr_reg_dmabuf(fab, self->fd[0], REG_OFF, REG_LEN, 0, &dev))
			TH_LOG("%s", pd_last_error());
		EXPECT_EQ(PD_PATH_DMABUF, pd_mr_path(dev));
		ASSERT_EQ(0, pd_mr_reg_host(fab, self->host, BUF_LEN, 0, &host));
		fill(self->view[0] + REG_OFF, len, 61);
		memset(self->host, 0, len);
		ASSERT_EQ(0, loop_xfer(fab, me, dev, host, len, 7)) TH_LOG("%s", pd_last_error());
		EXPECT_EQ(-1, check(self->host, len, 61));
		pd_mr_dereg(dev);
		pd_mr_dereg(host);
	}
	pd_fabric_close(fab);
}

/*
 * RMA write into a dmabuf registration and out of one.  The peer addresses
 * the target by the rkey's addr: with FI_MR_VIRT_ADDR that is base_addr +
 * offset, and the provider writes through it with the CPU.  Where the
 * dmabuf path is refused, the auto fallback is held to its own rule: mapped
 * registrations are RMA targets, bounce ones are not.
 */
TEST_F(dmabuf, rma_write_into_and_out_of_dmabuf)
{
	const size_t len = 65536 + 5, roff = 4096 + 7;
	struct pd_mr *dev;
	struct pd_req *req;
	struct pd_rkey rk;

	if (dmabuf_accepted(variant))
		ASSERT_EQ(0, pd_fabric_set_path(self->fab, PD_PATH_DMABUF));
	ASSERT_EQ(0, pd_mr_reg_dmabuf(self->fab, self->fd[1], REG_OFF, REG_LEN, PD_ACCESS_ALL, &dev))
		TH_LOG("%s", pd_last_error());
	if (pd_mr_path(dev) == PD_PATH_BOUNCE) {
		EXPECT_FALSE(dmabuf_accepted(variant));
		EXPECT_EQ(-EOPNOTSUPP, pd_mr_rkey(dev, &rk));
		pd_mr_dereg(dev);
		return;
	}
	EXPECT_EQ(dmabuf_accepted(variant) ? PD_PATH_DMABUF : PD_PATH_MAPPED, pd_mr_path(dev));
	ASSERT_EQ(0, pd_mr_rkey(dev, &rk));
	EXPECT_EQ(REG_LEN, rk.len);
	if (self->fab->virt_addr)
		EXPECT_EQ((uintptr_t)pd_mr_cpu_ptr(dev), rk.addr);

	/* host -> dma-buf at roff inside the registration */
	fill(self->host, len, 77);
	ASSERT_EQ(0, pd_write(self->fab, self->host_mr, 0, len, self->me, &rk, roff, &req));
	ASSERT_EQ(0, pd_wait(req, WAIT_MS, NULL)) TH_LOG("%s", pd_last_error());
	pd_req_free(req);
	EXPECT_EQ(-1, check(self->view[1] + REG_OFF + roff, len, 77));
	EXPECT_EQ(pattern(REG_OFF + roff - 1, 21), self->view[1][REG_OFF + roff - 1]);
	EXPECT_EQ(pattern(REG_OFF + roff + len, 21), self->view[1][REG_OFF + roff + len]);

	/* dma-buf -> host, the source read at base_addr + offset */
	memset(self->host, 0, BUF_LEN);
	ASSERT_EQ(0, pd_mr_rkey(self->host_mr, &rk));
	ASSERT_EQ(0, pd_write(self->fab, dev, roff, len, self->me, &rk, 4096, &req));
	ASSERT_EQ(0, pd_wait(req, WAIT_MS, NULL)) TH_LOG("%s", pd_last_error());
	pd_req_free(req);
	EXPECT_EQ(-1, check(self->host + 4096, len, 77));
	EXPECT_EQ(0, self->host[4095]);
	EXPECT_EQ(0, self->host[4096 + len]);
	pd_mr_dereg(dev);
}

/* Without a CPU mapping base_addr would be NULL and providers would copy
 * from the address 'offset': the dmabuf path is refused, never tried. */
TEST_F(dmabuf, unmappable_fd_is_refused_for_dmabuf)
{
	struct pd_mr *mr;
	int p[2];

	ASSERT_EQ(0, pipe(p));
	ASSERT_EQ(0, pd_fabric_set_path(self->fab, PD_PATH_DMABUF));
	EXPECT_EQ(-EOPNOTSUPP, pd_mr_reg_dmabuf(self->fab, p[0], 0, 4096, 0, &mr));
	EXPECT_NE(NULL, strstr(pd_last_error(), "forced path dmabuf is impossible"));
	EXPECT_NE(NULL, strstr(pd_last_error(), dmabuf_accepted(variant) ?
			       "the dma-buf cannot be mmapped" : refusal(variant, true)))
		TH_LOG("%s", pd_last_error());
	/* auto: no path is left, and the error keeps every step's reason */
	ASSERT_EQ(0, pd_fabric_set_path(self->fab, PD_PATH_AUTO));
	EXPECT_GT(0, pd_mr_reg_dmabuf(self->fab, p[0], 0, 4096, 0, &mr));
	EXPECT_NE(NULL, strstr(pd_last_error(), "mmap of dma-buf")) TH_LOG("%s", pd_last_error());
	EXPECT_NE(NULL, strstr(pd_last_error(), dmabuf_accepted(variant) ?
			       "the dma-buf cannot be mmapped" : refusal(variant, true)))
		TH_LOG("%s", pd_last_error());
	close(p[0]);
	close(p[1]);
}

TEST_HARNESS_MAIN
