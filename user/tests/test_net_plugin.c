// SPDX-License-Identifier: MIT
/*
 * Conformance of libnccl-net-peerdirect.so, driven as NCCL drives a net
 * plugin (net_plugin_driver.h): every exported ABI version, two processes
 * over tcp on the host, host memory and a memfd standing in for a dma-buf.
 * No NCCL and no GPU: the calls NCCL makes, in the order it makes them,
 * with NCCL's documented semantics (NULL comm until connected, NULL
 * request = try again, receives larger than sends, grouped receives).
 */
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kselftest_harness.h"
#include "net_plugin_driver.h"

#define MiB (1024 * 1024)
#define CANARY 0xa5
#define VERSIONS { 8, 9, 10 }

/* tcp on the host (the library's auto choice may differ); short timeouts so
 * that a dead peer or a bad handle fails well inside a test's time. */
__attribute__((constructor)) static void test_env(void)
{
	setenv("PEERDIRECT_PROVIDER", "tcp", 0);
	setenv("PEERDIRECT_PEER_TIMEOUT_MS", "2000", 0);
	setenv("PEERDIRECT_NCCL_CONNECT_TIMEOUT_MS", "3000", 0);
}

/* ---- two processes ---------------------------------------------------- */

struct pair {
	struct net n;
	int sock;
	int rank;		/* 0 receives (listen, accept), 1 sends (connect) */
	void *lcomm, *comm;	/* comm: the recv comm on 0, the send comm on 1 */
};

static int sock_io(int s, void *buf, size_t len, bool out)
{
	char *c = buf;

	while (len) {
		ssize_t k = out ? send(s, c, len, MSG_NOSIGNAL) : recv(s, c, len, 0);

		if (k <= 0)
			return -EPIPE;
		c += k;
		len -= (size_t)k;
	}
	return 0;
}

static int sync_pair(struct pair *p)
{
	char c = 0;

	return sock_io(p->sock, &c, 1, true) ?: sock_io(p->sock, &c, 1, false);
}

static unsigned char pattern(size_t i, uint64_t seed)
{
	uint64_t x = (i + 1) * 0x9e3779b97f4a7c15ULL ^ (seed * 0xff51afd7ed558ccdULL);

	return (unsigned char)(x >> 29 ^ x);
}

static void fill(unsigned char *b, size_t len, uint64_t seed)
{
	for (size_t i = 0; i < len; i++)
		b[i] = pattern(i, seed);
}

/* 0, or the index of the first wrong byte plus one. */
static size_t check(const unsigned char *b, size_t len, uint64_t seed)
{
	for (size_t i = 0; i < len; i++)
		if (b[i] != pattern(i, seed))
			return i + 1;
	return 0;
}

static void *map(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

/* A memfd standing in for a dma-buf (libpeerdirect registers it as one). */
static void *memfd_map(size_t len, int *fd)
{
	void *p;

	*fd = memfd_create("pd-net-test", MFD_CLOEXEC);
	if (*fd < 0 || ftruncate(*fd, (off_t)len))
		return NULL;
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, *fd, 0);
	return p == MAP_FAILED ? NULL : p;
}

#define FAIL(...) do { fprintf(stderr, "# rank %d: ", p->rank); \
	fprintf(stderr, __VA_ARGS__); fprintf(stderr, " (line %d)\n", __LINE__); \
	return -1; } while (0)

static int pair_connect(struct pair *p, int ver)
{
	char handle[NCCL_NET_HANDLE_MAXSIZE];
	int ndev = 0;
	ncclResult_t r;

	if (net_open(&p->n, ver))
		FAIL("no ncclNetPlugin_v%d", ver);
	if ((r = net_init(&p->n)) || (r = NET(&p->n, devices, &ndev)) || ndev < 1)
		FAIL("init: %d, %d devices", r, ndev);
	if (p->rank == 0) {
		if ((r = NET(&p->n, listen, 0, handle, &p->lcomm)) || !p->lcomm)
			FAIL("listen: %d", r);
		if (sock_io(p->sock, handle, sizeof(handle), true))
			FAIL("handing the handle over");
		if ((r = net_accept(&p->n, p->lcomm, &p->comm)))
			FAIL("accept: %d", r);
	} else {
		if (sock_io(p->sock, handle, sizeof(handle), false))
			FAIL("taking the handle");
		if ((r = net_connect(&p->n, handle, &p->comm)))
			FAIL("connect: %d", r);
	}
	return 0;
}

static void pair_close(struct pair *p)
{
	if (p->comm)
		p->rank ? NET(&p->n, closeSend, p->comm) : NET(&p->n, closeRecv, p->comm);
	if (p->lcomm)
		NET(&p->n, closeListen, p->lcomm);
	if (p->n.dl)
		dlclose(p->n.dl);
}

typedef int (*side_fn)(struct pair *p, void *arg);

/*
 * Forks the sender; both dlopen the plugin after the fork (libfabric is
 * never carried across one).  Returns 0 when both sides returned 0.
 * kill_child: the receiver's side kills the sender itself (its pid in
 * arg's first int).
 */
static int run_pair(int ver, side_fn recv_fn, side_fn send_fn, void *arg)
{
	struct pair p = { 0 };
	int sv[2], ret, status = 0;
	long long end;
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		return -errno;
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		return -errno;
	p.rank = pid == 0;
	p.sock = sv[p.rank];
	close(sv[!p.rank]);
	if (arg && !p.rank)
		*(pid_t *)arg = pid;
	ret = pair_connect(&p, ver);
	if (!ret)
		ret = p.rank ? send_fn(&p, arg) : recv_fn(&p, arg);
	pair_close(&p);
	close(p.sock);
	if (pid == 0)
		_exit(ret ? 1 : 0);
	end = now_ms() + LOOP_MS;
	while (waitpid(pid, &status, WNOHANG) == 0) {
		if (now_ms() > end) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			fprintf(stderr, "# the sender did not finish: killed\n");
			return -ETIMEDOUT;
		}
		usleep(5000);
	}
	if (ret)
		return ret;
	if (arg && ((int *)arg)[1])	/* the sender was meant to die */
		return 0;
	return WIFEXITED(status) && !WEXITSTATUS(status) ? 0 : -ECHILD;
}

/* ---- sizes, host and dma-buf ----------------------------------------- */

static const size_t sizes[] = { 0, 1, 7, 4096, 65536, MiB, 4 * MiB - 1, 4 * MiB, 4 * MiB + 1,
				16 * MiB };
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))
#define HOST_CAP (16 * MiB + 4096)	/* every receive larger than its send */
static const size_t dsizes[] = { 0, 1, 4097, MiB };
#define NDSIZES (sizeof(dsizes) / sizeof(dsizes[0]))
#define DMA_CAP (MiB + 8192)

static int sizes_recv(struct pair *p, void *arg)
{
	unsigned char *buf = map(HOST_CAP), *dbuf;
	void *mh, *dmh, *req, *data;
	size_t cap;
	int got, tag, fd, i;
	ncclResult_t r;

	(void)arg;
	if (!buf || (r = NET(&p->n, regMr, p->comm, buf, HOST_CAP, NCCL_PTR_HOST, &mh)))
		FAIL("regMr host");
	for (i = 0; i < (int)NSIZES; i++) {
		memset(buf, CANARY, sizes[i] + 64);
		data = buf;
		cap = HOST_CAP;
		tag = 100 + i;
		if ((r = net_irecv(&p->n, p->comm, 1, &data, &cap, &tag, &mh, &req)))
			FAIL("irecv %zu: %d", sizes[i], r);
		if ((r = net_wait(&p->n, req, &got, LOOP_MS)))
			FAIL("test of the %zu-byte receive: %d", sizes[i], r);
		if ((size_t)got != sizes[i] || check(buf, sizes[i], (uint64_t)i))
			FAIL("%zu bytes: got %d, first wrong byte %zu", sizes[i], got,
			     check(buf, sizes[i], (uint64_t)i));
		for (size_t k = sizes[i]; k < sizes[i] + 64; k++)
			if (buf[k] != CANARY)
				FAIL("%zu bytes: byte %zu past the message was written", sizes[i], k);
	}
	if (!strstr(logbuf, "3 NET/peerdirect regMr host"))
		FAIL("no INFO line for the host registration:\n%s", logbuf);
	NET(&p->n, deregMr, p->comm, mh);
	munmap(buf, HOST_CAP);
	/* A memfd as NCCL would pass a dma-buf: regMrDmaBuf with its fd. */
	if (!(dbuf = memfd_map(DMA_CAP, &fd)))
		FAIL("memfd");
	if ((r = NET(&p->n, regMrDmaBuf, p->comm, dbuf, DMA_CAP, NCCL_PTR_CUDA, 0, fd, &dmh)))
		FAIL("regMrDmaBuf: %d", r);
	for (i = 0; i < (int)NDSIZES; i++) {
		memset(dbuf, CANARY, dsizes[i] + 64);
		data = dbuf + 4096;	/* inside the registration, not at its start */
		cap = DMA_CAP - 4096;
		tag = 200 + i;
		if ((r = net_irecv(&p->n, p->comm, 1, &data, &cap, &tag, &dmh, &req)) ||
		    (r = net_wait(&p->n, req, &got, LOOP_MS)))
			FAIL("dma-buf receive of %zu: %d", dsizes[i], r);
		if ((size_t)got != dsizes[i] || check(dbuf + 4096, dsizes[i], 1000u + (unsigned)i))
			FAIL("dma-buf %zu bytes: got %d", dsizes[i], got);
	}
	if (!strstr(logbuf, "3 NET/peerdirect regMrDmaBuf"))
		FAIL("no INFO line for the dma-buf registration:\n%s", logbuf);
	NET(&p->n, deregMr, p->comm, dmh);
	munmap(dbuf, DMA_CAP);
	close(fd);
	return sync_pair(p);
}

static int sizes_send(struct pair *p, void *arg)
{
	unsigned char *buf = map(16 * MiB), *dbuf;
	void *mh, *dmh, *req;
	int got, fd, i;
	ncclResult_t r;

	(void)arg;
	if (!buf || (r = NET(&p->n, regMr, p->comm, buf, 16 * MiB, NCCL_PTR_HOST, &mh)))
		FAIL("regMr host");
	for (i = 0; i < (int)NSIZES; i++) {
		fill(buf, sizes[i], (uint64_t)i);
		if ((r = net_isend(&p->n, p->comm, buf, sizes[i], 100 + i, mh, &req)) ||
		    (r = net_wait(&p->n, req, &got, LOOP_MS)))
			FAIL("send of %zu: %d", sizes[i], r);
		if ((size_t)got != sizes[i])
			FAIL("send of %zu reported %d", sizes[i], got);
	}
	NET(&p->n, deregMr, p->comm, mh);
	munmap(buf, 16 * MiB);
	if (!(dbuf = memfd_map(DMA_CAP, &fd)))
		FAIL("memfd");
	if ((r = NET(&p->n, regMrDmaBuf, p->comm, dbuf, DMA_CAP, NCCL_PTR_CUDA, 0, fd, &dmh)))
		FAIL("regMrDmaBuf: %d", r);
	for (i = 0; i < (int)NDSIZES; i++) {
		fill(dbuf + 8192, dsizes[i], 1000u + (unsigned)i);
		if ((r = net_isend(&p->n, p->comm, dbuf + 8192, dsizes[i], 200 + i, dmh, &req)) ||
		    (r = net_wait(&p->n, req, &got, LOOP_MS)))
			FAIL("dma-buf send of %zu: %d", dsizes[i], r);
	}
	NET(&p->n, deregMr, p->comm, dmh);
	munmap(dbuf, DMA_CAP);
	close(fd);
	return sync_pair(p);
}

TEST(every_version_moves_0_to_16M_host_and_dmabuf)
{
	int vers[] = VERSIONS;

	for (int v = 0; v < 3; v++) {
		long long t0 = now_ms();

		ASSERT_EQ(0, run_pair(vers[v], sizes_recv, sizes_send, NULL));
		TH_LOG("v%d: %zu host sizes and %zu dma-buf sizes in %lld ms", vers[v], NSIZES,
		       NDSIZES, now_ms() - t0);
	}
}

TEST_HARNESS_MAIN
