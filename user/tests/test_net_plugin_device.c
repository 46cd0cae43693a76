// SPDX-License-Identifier: MIT
/*
 * libnccl-net-peerdirect.so on the node's devices: a device per NIC, each
 * carrying traffic (the host has one NIC; the VM's shim part runs this in
 * a namespace of two), and the module's own dma-bufs, what the memfd
 * stand-in of test_net_plugin cannot show.  Two processes, each exporting
 * its own device memory (/dev/peerdirect0) and handing only the fd to the
 * plugin through regMrDmaBuf, as a runtime hands NCCL a buffer; the
 * plugin's libpeerdirect learns of a revocation through its own device
 * (PEERDIRECT_NCCL_DEVICE, the kernel's SUBSCRIBE), never from the test.
 * The dma-buf tests skip where the module is not loaded (the host); the
 * shim part of `make check` runs them in the VM of every kernel tier.
 */
#include <sys/mman.h>

#include "kselftest_harness.h"
#include "net_plugin_pair.h"
#include "peerdirect.h"

#define CANARY 0xa5

/* tcp: what every VM tier has between two processes (shm's own dma-buf
 * rules are shim-in-vm.sh's, through pd-xfer). */
__attribute__((constructor)) static void test_env(void)
{
	setenv("PEERDIRECT_PROVIDER", "tcp", 0);
	/* the registration lines after the first of a class are TRACE */
	setenv("NCCL_DEBUG", "TRACE", 0);
}

/*
 * Each test starts two processes per pair, each loading libfabric: on the
 * debug kernel under TCG (KASAN, kmemleak) one pair took 25.6 s, and the
 * harness's default 30 s cut off a test of two pairs.
 */
#define PAIR_TEST_S 240

FIXTURE(node) {
	int unused;
};

FIXTURE_SETUP(node)
{
}

FIXTURE_TEARDOWN(node)
{
}

static bool module_present(void)
{
	return !access("/dev/peerdirect0", F_OK);
}

/* The debug kernel (KASAN, kmemleak under TCG) moves a quarter of it. */
static bool debug_kernel(void)
{
	return getenv("PD_DEBUG_KERNEL");
}

/* Device memory of this process: allocated, exported read-write, mapped
 * for the CPU to fill and check; the plugin gets only exp.fd. */
struct devbuf {
	struct pd_device *dev;
	uint64_t handle;
	struct pd_export_info exp;
	unsigned char *p;
	size_t len;
};

static int devbuf_get(struct devbuf *b, size_t len)
{
	uint64_t got;

	memset(b, 0, sizeof(*b));
	b->exp.fd = -1;
	if (pd_device_open(0, &b->dev) || pd_device_alloc(b->dev, len, &b->handle, &got) ||
	    pd_device_export(b->dev, b->handle, 0, len, PD_EXPORT_RDWR | PD_EXPORT_CLOEXEC, &b->exp)) {
		fprintf(stderr, "# device memory: %s\n", pd_last_error());
		return -1;
	}
	b->p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, b->exp.fd, 0);
	if (b->p == MAP_FAILED) {
		b->p = NULL;
		fprintf(stderr, "# mmap of the export: %s\n", strerror(errno));
		return -1;
	}
	b->len = len;
	return 0;
}

/* Freed as a runtime frees it: the module revokes the export, and the
 * plugin's cache (which holds a dup of the fd past deregMr) lets go of it,
 * so the next round finds the device's memory free again. */
static void devbuf_put(struct devbuf *b)
{
	if (b->p)
		munmap(b->p, b->len);
	if (b->exp.fd >= 0)
		close(b->exp.fd);
	if (b->handle && pd_device_free(b->dev, b->handle))
		fprintf(stderr, "# free: %s\n", pd_last_error());
	if (b->dev)
		pd_device_close(b->dev);
}

/* What the runtime's owner does on a device reset or an admin's action:
 * the plugin's process holds the fd and is told by the kernel only. */
static int devbuf_revoke(struct devbuf *b)
{
	uint32_t revoked = 0, pending = 0;

	if (pd_device_revoke(b->dev, PD_REVOKE_EXPORT, b->exp.export_id, &revoked, &pending) ||
	    revoked != 1) {
		fprintf(stderr, "# revoke: %s (%u revoked)\n", pd_last_error(), revoked);
		return -1;
	}
	return 0;
}

/* ---- a device per NIC ------------------------------------------------ */

/* 1 MiB each way between the pair, on the device pair_dev names. */
static int mib_recv(struct pair *p, void *arg)
{
	unsigned char *buf = map(MiB);
	void *mh, *req, *data = buf;
	size_t cap = MiB;
	int got, tag = 7;
	ncclResult_t r;

	(void)arg;
	if (!buf || (r = NET(&p->n, regMr, p->comm, buf, MiB, NCCL_PTR_HOST, &mh)))
		FAIL("regMr");
	if ((r = net_irecv(&p->n, p->comm, 1, &data, &cap, &tag, &mh, &req)) ||
	    (r = net_wait(&p->n, req, &got, LOOP_MS)) || got != MiB || check(buf, MiB, 7))
		FAIL("1 MiB on device %d: %d", pair_dev, r);
	NET(&p->n, deregMr, p->comm, mh);
	munmap(buf, MiB);
	return sync_pair(p);
}

static int mib_send(struct pair *p, void *arg)
{
	unsigned char *buf = map(MiB);
	void *mh, *req;
	ncclResult_t r;
	int got;

	(void)arg;
	if (!buf || (r = NET(&p->n, regMr, p->comm, buf, MiB, NCCL_PTR_HOST, &mh)))
		FAIL("regMr");
	fill(buf, MiB, 7);
	if ((r = net_isend(&p->n, p->comm, buf, MiB, 7, mh, &req)) ||
	    (r = net_wait(&p->n, req, &got, LOOP_MS)))
		FAIL("1 MiB on device %d: %d", pair_dev, r);
	NET(&p->n, deregMr, p->comm, mh);
	munmap(buf, MiB);
	return sync_pair(p);
}

/*
 * A device per NIC (NCCL gives each GPU its nearest): every device listens,
 * connects and moves data on its own NIC.  The host has one NIC; the VM's
 * shim part runs this in a namespace of two (PD_TEST_NET_MIN_DEVS=2) and
 * a docker0 bridge, which is no device (PD_TEST_NET_LEFT_OUT).
 */
TEST_F_TIMEOUT(node, every_device_carries_traffic, PAIR_TEST_S)
{
	const char *min = getenv("PD_TEST_NET_MIN_DEVS"), *out = getenv("PD_TEST_NET_LEFT_OUT");
	char line[96];
	ncclNetProperties_v9_t p;
	struct net n;
	int ndev = 0;

	ASSERT_EQ(0, net_open(&n, 12));
	ASSERT_EQ(ncclSuccess, net_init(&n));
	ASSERT_EQ(ncclSuccess, NET(&n, devices, &ndev));
	EXPECT_LE(min ? atoi(min) : 1, ndev) TH_LOG("%s", logbuf);
	for (pair_dev = 0; pair_dev < ndev; pair_dev++) {
		ASSERT_EQ(ncclSuccess, net_props(&n, pair_dev, &p));
		TH_LOG("device %d: %s at %s", pair_dev, p.name, p.pciPath ? p.pciPath : "(none)");
		if (out)
			EXPECT_STRNE(out, p.name);
	}
	if (out) {
		snprintf(line, sizeof(line), "%s left out: PEERDIRECT_NCCL_NICS", out);
		EXPECT_NE(NULL, strstr(logbuf, line)) TH_LOG("%s", logbuf);
	}
	EXPECT_EQ(0, net_close(&n));
	for (pair_dev = 0; pair_dev < ndev; pair_dev++)
		EXPECT_EQ(0, run_pair(12, mib_recv, mib_send, NULL)) TH_LOG("device %d", pair_dev);
}

/* ---- sizes on module dma-bufs ----------------------------------------- */

static const size_t sizes[] = { 0, 1, 4097, MiB, 4 * MiB + 1, 16 * MiB };
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]) - (debug_kernel() ? 2 : 0))
#define CAP (16 * MiB + 8192)
#define OFF 4096	/* inside the registration, not at its start */

static int sizes_recv(struct pair *p, void *arg)
{
	struct devbuf b;
	void *mh, *req, *data;
	size_t cap;
	int got, tag, i;
	ncclResult_t r;

	(void)arg;
	if (devbuf_get(&b, CAP))
		FAIL("device memory");
	if ((r = NET(&p->n, regMrDmaBuf, p->comm, b.p, CAP, NCCL_PTR_DMABUF, 0, b.exp.fd, &mh)))
		FAIL("regMrDmaBuf of a module dma-buf: %d", r);
	for (i = 0; i < (int)NSIZES; i++) {
		memset(b.p, CANARY, sizes[i] + OFF + 64);
		data = b.p + OFF;
		cap = CAP - OFF;
		tag = 10 + i;
		if ((r = net_irecv(&p->n, p->comm, 1, &data, &cap, &tag, &mh, &req)) ||
		    (r = net_wait(&p->n, req, &got, LOOP_MS)))
			FAIL("receive of %zu: %d", sizes[i], r);
		if ((size_t)got != sizes[i] || check(b.p + OFF, sizes[i], (uint64_t)i))
			FAIL("%zu bytes: got %d, first wrong byte %zu", sizes[i], got,
			     check(b.p + OFF, sizes[i], (uint64_t)i));
		for (size_t k = 0; k < 64; k++)
			if (b.p[k] != CANARY || b.p[OFF + sizes[i] + k] != CANARY)
				FAIL("%zu bytes: a byte outside the message was written", sizes[i]);
	}
	if (!strstr(logbuf, "NET/peerdirect peerdirect device 0 attached") ||
	    !strstr(logbuf, "3 NET/peerdirect regMrDmaBuf") || !strstr(logbuf, ": path "))
		FAIL("no INFO lines for the device and the dma-buf's path:\n%s", logbuf);
	NET(&p->n, deregMr, p->comm, mh);
	devbuf_put(&b);
	return sync_pair(p);
}

static int sizes_send(struct pair *p, void *arg)
{
	struct devbuf b;
	void *mh, *mh2, *req;
	long long hits;
	int got, i;
	ncclResult_t r;

	(void)arg;
	if (devbuf_get(&b, CAP))
		FAIL("device memory");
	if ((r = NET(&p->n, regMrDmaBuf, p->comm, b.p, CAP, NCCL_PTR_DMABUF, 0, b.exp.fd, &mh)))
		FAIL("regMrDmaBuf of a module dma-buf: %d", r);
	hits = logged_hits("regMrDmaBuf");
	/* NCCL registers a buffer again per comm (regIsGlobal): one more
	 * registration of the same dma-buf is a hit of the library's cache
	 * (keyed by the dma-buf, not the fd), and moves the same bytes. */
	if ((r = NET(&p->n, regMrDmaBuf, p->comm, b.p, CAP, NCCL_PTR_DMABUF, 0, b.exp.fd, &mh2)))
		FAIL("second regMrDmaBuf of the same dma-buf: %d", r);
	if (hits < 0 || logged_hits("regMrDmaBuf") != hits + 1)
		FAIL("the second registration was no cache hit (%lld, then %lld):\n%s", hits,
		     logged_hits("regMrDmaBuf"), logbuf);
	for (i = 0; i < (int)NSIZES; i++) {
		fill(b.p + 2 * OFF, sizes[i], (uint64_t)i);
		if ((r = net_isend(&p->n, p->comm, b.p + 2 * OFF, sizes[i], 10 + i, i % 2 ? mh2 : mh,
				   &req)) ||
		    (r = net_wait(&p->n, req, &got, LOOP_MS)))
			FAIL("send of %zu: %d", sizes[i], r);
	}
	NET(&p->n, deregMr, p->comm, mh2);
	NET(&p->n, deregMr, p->comm, mh);
	devbuf_put(&b);
	return sync_pair(p);
}

/*
 * The newest table (test_net_plugin drives every version on the host).
 * One round per process: a freed buffer's memory stays charged to its
 * owner until the plugin's cache lets go of its fd, which it does at its
 * next call after the revocation (NCCL's proxy calls test() constantly);
 * a second round straight after would find the device's 64 MiB still
 * held by the first.
 */
TEST_F_TIMEOUT(node, module_dmabufs_move_0_to_16M_between_processes, PAIR_TEST_S)
{
	long long t0 = now_ms();

	if (!module_present())
		SKIP(return, "no /dev/peerdirect0 (the module is not loaded here)");
	ASSERT_EQ(0, run_pair(12, sizes_recv, sizes_send, NULL));
	TH_LOG("%zu sizes in %lld ms", NSIZES, now_ms() - t0);
}

/* ---- revocation in the middle of a stream ----------------------------- */

/* The receive of tag whose sender or receiver memory was revoked: an
 * error, never success, and nothing written into the buffer. */
static int recv_fails(struct pair *p, struct devbuf *b, void *mh, int tag, ncclResult_t want)
{
	void *data = b->p, *req = NULL;
	size_t cap = MiB;
	ncclResult_t r;
	int got = -1;

	r = net_irecv_once(&p->n, p->comm, 1, &data, &cap, &tag, &mh, &req);
	if (!r && req)
		r = net_wait(&p->n, req, &got, LOOP_MS);
	if (r != want)
		FAIL("receive of tag %d: %d, wanted %d (got %d bytes)", tag, r, want, got);
	return 0;
}

static int revoke_recv(struct pair *p, void *arg)
{
	struct devbuf b;
	void *mh, *req, *data;
	size_t cap = MiB;
	int got, tag;
	ncclResult_t r;

	(void)arg;
	if (devbuf_get(&b, MiB))
		FAIL("device memory");
	if ((r = NET(&p->n, regMrDmaBuf, p->comm, b.p, MiB, NCCL_PTR_DMABUF, 0, b.exp.fd, &mh)))
		FAIL("regMrDmaBuf: %d", r);
	/* 1: before any revocation. */
	data = b.p;
	tag = 1;
	if ((r = net_irecv(&p->n, p->comm, 1, &data, &cap, &tag, &mh, &req)) ||
	    (r = net_wait(&p->n, req, &got, LOOP_MS)) || check(b.p, MiB, 1))
		FAIL("tag 1 before the revocation: %d", r);
	if (sync_pair(p) || sync_pair(p))	/* the sender revokes its memory */
		FAIL("sync");
	/* 2: the sender's memory was revoked: its isend sent nothing and
	 * said so; this receive fails at once, nothing written. */
	memset(b.p, CANARY, MiB);
	if (recv_fails(p, &b, mh, 2, ncclRemoteError))
		return -1;
	for (size_t k = 0; k < MiB; k++)
		if (b.p[k] != CANARY)
			FAIL("byte %zu written by a receive whose send was refused", k);
	/* 3: the comm is still in step: the next message arrives whole. */
	data = b.p;
	tag = 3;
	if ((r = net_irecv(&p->n, p->comm, 1, &data, &cap, &tag, &mh, &req)) ||
	    (r = net_wait(&p->n, req, &got, LOOP_MS)) || (size_t)got != MiB || check(b.p, MiB, 3))
		FAIL("tag 3 after the sender's revocation: %d", r);
	/* 4: this side's memory revoked: the receive into it fails. */
	if (devbuf_revoke(&b))
		FAIL("revoke");
	if (sync_pair(p))
		FAIL("sync");
	if (recv_fails(p, &b, mh, 4, ncclSystemError))
		return -1;
	if (!strstr(logbuf, "was revoked"))
		FAIL("no WARN line saying the receive's dma-buf was revoked:\n%s", logbuf);
	NET(&p->n, deregMr, p->comm, mh);
	devbuf_put(&b);
	return sync_pair(p);
}

static int revoke_send(struct pair *p, void *arg)
{
	unsigned char *host = map(MiB);
	struct devbuf b;
	void *mh, *hmh, *req;
	int got;
	ncclResult_t r;

	(void)arg;
	if (!host || devbuf_get(&b, MiB))
		FAIL("memory");
	if ((r = NET(&p->n, regMrDmaBuf, p->comm, b.p, MiB, NCCL_PTR_DMABUF, 0, b.exp.fd, &mh)) ||
	    (r = NET(&p->n, regMr, p->comm, host, MiB, NCCL_PTR_HOST, &hmh)))
		FAIL("registrations: %d", r);
	fill(b.p, MiB, 1);
	if ((r = net_isend(&p->n, p->comm, b.p, MiB, 1, mh, &req)) ||
	    (r = net_wait(&p->n, req, &got, LOOP_MS)))
		FAIL("tag 1: %d", r);
	if (sync_pair(p) || devbuf_revoke(&b) || sync_pair(p))
		FAIL("revoking between messages");
	req = NULL;
	r = net_isend_once(&p->n, p->comm, b.p, MiB, 2, mh, &req);
	if (r != ncclSystemError || req)
		FAIL("isend from revoked memory: %d, request %p (wanted ncclSystemError)", r, req);
	if (!strstr(logbuf, "was revoked"))
		FAIL("no WARN line saying the send's dma-buf was revoked:\n%s", logbuf);
	fill(host, MiB, 3);
	if ((r = net_isend(&p->n, p->comm, host, MiB, 3, hmh, &req)) ||
	    (r = net_wait(&p->n, req, &got, LOOP_MS)))
		FAIL("tag 3 after the revocation: %d", r);
	if (sync_pair(p))
		FAIL("sync");
	/* 4 goes out; the receiver's memory is gone: whatever its fate here,
	 * the receive must fail. */
	if ((r = net_isend(&p->n, p->comm, host, 4096, 4, hmh, &req)))
		FAIL("tag 4: %d", r);
	net_wait(&p->n, req, &got, 1000);
	NET(&p->n, deregMr, p->comm, hmh);
	NET(&p->n, deregMr, p->comm, mh);
	devbuf_put(&b);
	munmap(host, MiB);
	return sync_pair(p);
}

TEST_F_TIMEOUT(node, a_revocation_mid_stream_fails_the_next_transfer_clearly, PAIR_TEST_S)
{
	if (!module_present())
		SKIP(return, "no /dev/peerdirect0 (the module is not loaded here)");
	ASSERT_EQ(0, run_pair(12, revoke_recv, revoke_send, NULL));
}

TEST_HARNESS_MAIN
