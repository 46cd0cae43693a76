// SPDX-License-Identifier: GPL-2.0
/*
 * A seeded, bounded random-ioctl fuzzer: several threads on shared device
 * and dma-buf fds run every ioctl with boundary values (argsz, flags,
 * padding, handles, offsets, lengths, bad pointers), read and poll events,
 * mmap, touch, SYNC, SET_NAME, dup, fstat, close and reopen dma-bufs,
 * import them with the test importer and vgem, fork children that poke
 * inherited fds, and pass fds to themselves with SCM_RIGHTS.  Every call
 * must succeed or fail with an errno from the uapi's list; afterwards the
 * device must be whole.  The kernel log is checked by the VM runner.
 *
 *   fuzz [-s SEED] [-n OPS] [-t MS] [-j THREADS] [DEVICE]
 *
 * It stops at OPS operations (default 1000000) or after MS milliseconds
 * (default 20000), whichever comes first, and prints both and the seed:
 * "fuzz -s SEED -n OPS" replays the same choices (thread timing aside).
 */
#define _GNU_SOURCE
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include "kselftest.h"
#include "pd_test.h"

#define MAX_FDS		8	/* device fds */
#define MAX_BUFS	32	/* dma-buf fds */
#define MAX_IDS		64
#define MAX_HANDLES	64
#define MAX_THREADS	8

static const char *devpath = PD_DEV0;
static struct peerdirect_query q0;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int devs[MAX_FDS], bufs[MAX_BUFS], vgem = -1;
static uint64_t ids[MAX_IDS], handles[MAX_HANDLES];
static unsigned long long max_ops = 1000000, ops_done, bad;
static long long deadline;
static char first_bad[256];
static void *unmapped;

/* The errnos the uapi, dma-buf core and VFS may answer with. */
static int allowed(int e)
{
	switch (e) {
	case 0: case EINVAL: case E2BIG: case EFAULT: case ENOTTY: case ENOENT:
	case ENOMEM: case EDQUOT: case ENOSPC: case EBADF: case ENODEV: case EPERM:
	case EACCES: case EOPNOTSUPP: case EAGAIN: case EINTR: case EBUSY:
	case EMFILE: case ENFILE: case EOVERFLOW: case ESPIPE: case ENXIO: case EEXIST:
		return 1;
	default:
		return 0;
	}
}

static void check(const char *what, long ret)
{
	int e = ret < 0 ? errno : 0;

	if (allowed(e))
		return;
	pthread_mutex_lock(&lock);
	if (!bad++)
		snprintf(first_bad, sizeof(first_bad), "%s: %s (%d)", what, strerror(e), e);
	pthread_mutex_unlock(&lock);
}

/* xorshift64*, one per thread */
struct rng {
	uint64_t s;
};

static uint64_t rnd(struct rng *r)
{
	r->s ^= r->s >> 12;
	r->s ^= r->s << 25;
	r->s ^= r->s >> 27;
	return r->s * 2685821657736338717ULL;
}

static unsigned int pick(struct rng *r, unsigned int n)
{
	return rnd(r) % n;
}

/* Boundary values of a 64-bit size, offset or id on this device. */
static uint64_t edge(struct rng *r)
{
	uint64_t page = q0.page_size;
	const uint64_t v[] = {
		0, 1, 4095, 4096, page - 1, page, page + 1, 2 * page, 3 * page,
		q0.quota, q0.quota + page, q0.mem_size, q0.mem_size + page,
		0xffffffffULL, 0x100000000ULL, INT64_MAX, UINT64_MAX,
		UINT64_MAX - page + 1, 1ULL << 63,
	};

	switch (pick(r, 4)) {
	case 0:
		return rnd(r);
	case 1:
		return pick(r, 8) * page;
	default:
		return v[pick(r, sizeof(v) / sizeof(v[0]))];
	}
}

static uint32_t argsz(struct rng *r, uint32_t size)
{
	const uint32_t v[] = { 0, 4, 8, size - 8, size - 1, size, size, size, size + 8,
			       size + 1, 4096, 4097, 0xffffffff };

	return v[pick(r, sizeof(v) / sizeof(v[0]))];
}

static uint32_t flags(struct rng *r)
{
	switch (pick(r, 4)) {
	case 0:
		return rnd(r);
	case 1:
		return 1u << pick(r, 32);
	default:
		return pick(r, 4);
	}
}

/* The argument pointer: usually a good buffer, sometimes not. */
static void *argp(struct rng *r, void *good)
{
	switch (pick(r, 40)) {
	case 0:
		return NULL;
	case 1:
		return unmapped;
	case 2:
		return (void *)0xffff888000000000ULL;	/* kernel memory */
	case 3:
		return (char *)unmapped - 4;	/* straddles an unmapped page */
	default:
		return good;
	}
}

static int any_dev(struct rng *r)
{
	return devs[pick(r, MAX_FDS)];
}

/* Mostly a live dma-buf, sometimes an empty slot (-1: EBADF). */
static int any_buf(struct rng *r)
{
	int i, fd = -1;

	for (i = 0; i < 4 && fd < 0; i++)
		fd = bufs[pick(r, MAX_BUFS)];
	return fd;
}

static uint64_t any_handle(struct rng *r)
{
	uint64_t h = 0;
	int i;

	for (i = 0; i < 4 && !h; i++)
		h = handles[pick(r, MAX_HANDLES)];
	return pick(r, 8) ? h : edge(r);
}

static uint64_t any_id(struct rng *r)
{
	return pick(r, 8) ? ids[pick(r, MAX_IDS)] : edge(r);
}

static void remember(uint64_t *arr, int n, uint64_t v, struct rng *r)
{
	arr[pick(r, n)] = v;
}

/* Takes a slot's fd out (the taker closes it) or puts one in. */
static int swap_fd(int *arr, int n, int slot, int fd)
{
	int old;

	pthread_mutex_lock(&lock);
	old = arr[slot % n];
	arr[slot % n] = fd;
	pthread_mutex_unlock(&lock);
	return old;
}

static void fill(struct rng *r, void *p, size_t len)
{
	unsigned char *c = p;
	size_t i;

	for (i = 0; i < len; i++)
		c[i] = pick(r, 3) ? 0 : rnd(r);
}

/* ---- the operations --------------------------------------------------- */

static void op_query(struct rng *r)
{
	struct peerdirect_query q;

	fill(r, &q, sizeof(q));
	if (pick(r, 2))
		memset(&q.abi_major, 0, sizeof(q) - offsetof(struct peerdirect_query, abi_major));
	q.argsz = argsz(r, sizeof(q));
	check("query", ioctl(any_dev(r), PEERDIRECT_IOCTL_QUERY, argp(r, &q)));
}

static void op_alloc(struct rng *r)
{
	struct peerdirect_alloc a = { .argsz = argsz(r, sizeof(a)), .size = edge(r) };

	if (!pick(r, 8))
		a.flags = flags(r);
	if (!pick(r, 8))
		a.handle = rnd(r);
	if (pick(r, 2))
		a.size = (pick(r, 4) + 1) * q0.page_size;
	if (!ioctl(any_dev(r), PEERDIRECT_IOCTL_ALLOC, argp(r, &a)))
		remember(handles, MAX_HANDLES, a.handle, r);
	else
		check("alloc", -1);
}

static void op_free(struct rng *r)
{
	struct peerdirect_free f = { .argsz = argsz(r, sizeof(f)), .handle = any_handle(r) };

	if (!pick(r, 8))
		f.flags = flags(r);
	check("free", ioctl(any_dev(r), PEERDIRECT_IOCTL_FREE, argp(r, &f)));
}

static void op_export(struct rng *r)
{
	struct peerdirect_export e = {
		.argsz = argsz(r, sizeof(e)), .handle = any_handle(r),
		.flags = pick(r, 4) ? pick(r, 4) : flags(r),
	};
	int old;

	if (pick(r, 2)) {
		e.offset = pick(r, 2) * q0.page_size;
		e.length = (pick(r, 2) + 1) * q0.page_size;
	} else {
		e.offset = edge(r);
		e.length = edge(r);
	}
	if (!pick(r, 10))
		e.pad = rnd(r);
	if (!pick(r, 10))
		e.fd = rnd(r);
	if (ioctl(any_dev(r), PEERDIRECT_IOCTL_EXPORT, argp(r, &e))) {
		check("export", -1);
		return;
	}
	remember(ids, MAX_IDS, e.export_id, r);
	old = swap_fd(bufs, MAX_BUFS, pick(r, MAX_BUFS), e.fd);
	if (old >= 0)
		close(old);
}

static void op_revoke(struct rng *r, bool admin)
{
	struct peerdirect_revoke v = {
		.argsz = argsz(r, sizeof(v)),
		.flags = pick(r, 4) ? 1 + pick(r, 2) : flags(r),
	};

	if (v.flags == PEERDIRECT_REVOKE_ALLOC && pick(r, 4))
		v.handle = any_handle(r);
	else if (pick(r, 4))
		v.export_id = any_id(r);
	else {
		v.handle = any_handle(r);
		v.export_id = any_id(r);
	}
	if (!pick(r, 10))
		v.pending = rnd(r);
	check(admin ? "admin revoke" : "revoke",
	      ioctl(any_dev(r), admin ? PEERDIRECT_IOCTL_ADMIN_REVOKE : PEERDIRECT_IOCTL_REVOKE,
		    argp(r, &v)));
}

static void op_reset(struct rng *r)
{
	struct peerdirect_reset s = { .argsz = argsz(r, sizeof(s)) };

	if (!pick(r, 8))
		s.flags = flags(r);
	check("reset", ioctl(any_dev(r), PEERDIRECT_IOCTL_RESET, argp(r, &s)));
}

static void op_bad_ioctl(struct rng *r)
{
	char buf[256];
	unsigned long cmd;

	fill(r, buf, sizeof(buf));
	switch (pick(r, 4)) {
	case 0:
		cmd = _IOC(pick(r, 4), PEERDIRECT_IOCTL_MAGIC, pick(r, 16), pick(r, 256));
		break;
	case 1:
		cmd = _IOWR('b', pick(r, 16), char[8]);	/* dma-buf's magic */
		break;
	default:
		cmd = rnd(r);
	}
	check("ioctl", ioctl(pick(r, 2) ? any_dev(r) : any_buf(r), cmd, argp(r, buf)));
}

static void op_read_events(struct rng *r)
{
	struct peerdirect_event ev[8];
	struct pollfd p = { .fd = any_dev(r), .events = POLLIN };
	size_t len = pick(r, 4) ? (pick(r, 8) + 1) * sizeof(ev[0]) : pick(r, sizeof(ev));

	check("poll", poll(&p, 1, 0));
	if (p.revents & POLLIN || !pick(r, 4))
		check("read", read(p.fd, argp(r, ev), len));
}

static __thread sigjmp_buf *volatile bus_env;

static void on_sigbus(int sig)
{
	if (bus_env)
		siglongjmp(*bus_env, 1);
	_exit(99);
}

static void op_mmap(struct rng *r)
{
	size_t len = (pick(r, 3) + 1) * 4096;
	off_t off = pick(r, 4) ? pick(r, 2) * 4096 : (off_t)edge(r);
	int prot = pick(r, 2) ? PROT_READ : PROT_READ | PROT_WRITE;
	int fl = pick(r, 8) ? MAP_SHARED : MAP_PRIVATE;
	volatile unsigned char *p;
	sigjmp_buf env;

	p = mmap(NULL, len, prot, fl, any_buf(r), off);
	if (p == MAP_FAILED) {
		check("mmap", -1);
		return;
	}
	if (!sigsetjmp(env, 1)) {
		bus_env = &env;
		(void)p[pick(r, len)];
		if (prot & PROT_WRITE)
			p[pick(r, len)] = rnd(r);
		if (!pick(r, 4))
			mprotect((void *)p, len, PROT_READ | PROT_WRITE);
	}
	bus_env = NULL;
	munmap((void *)p, len);
}

static void op_sync(struct rng *r)
{
	struct dma_buf_sync s = { .flags = pick(r, 4) ? pick(r, 8) : rnd(r) };

	check("sync", ioctl(any_buf(r), DMA_BUF_IOCTL_SYNC, argp(r, &s)));
}

static void op_name(struct rng *r)
{
	char name[40];

	fill(r, name, sizeof(name));
	name[pick(r, sizeof(name))] = 0;
	check("set name", ioctl(any_buf(r), pick(r, 2) ? DMA_BUF_SET_NAME_A : DMA_BUF_SET_NAME_B,
				argp(r, name)));
}

static void op_fileops(struct rng *r)
{
	int d = any_buf(r), n;
	struct stat st;
	char buf[64];

	switch (pick(r, 5)) {
	case 0:
		check("fstat", fstat(d, &st));
		break;
	case 1:
		n = dup(d);
		if (n >= 0)
			close(n);
		break;
	case 2:
		check("lseek", lseek(d, edge(r), pick(r, 3)));
		break;
	case 3:
		check("read", read(d, buf, sizeof(buf)));
		break;
	default:
		n = swap_fd(bufs, MAX_BUFS, pick(r, MAX_BUFS), -1);
		if (n >= 0)
			close(n);
	}
}

static void op_reopen(struct rng *r)
{
	int fd = open(devpath, O_RDWR | O_CLOEXEC | O_NONBLOCK);

	if (fd < 0) {
		check("open", -1);
		return;
	}
	fd = swap_fd(devs, MAX_FDS, pick(r, MAX_FDS), fd);
	if (fd >= 0)
		close(fd);
}

static void op_import(struct rng *r)
{
	static const uint32_t kinds[] = {
		PDTI_DYNAMIC, PDTI_PINNED, PDTI_PINNED | PDTI_REVOCABLE,
		PDTI_DYNAMIC | PDTI_NO_P2P, 0, PDTI_REVOCABLE,
	};
	int imp = pdti_open(strrchr(devpath, '/') + 1), i;
	char buf[4096];

	if (imp < 0)
		return;
	if (pdti_import(imp, any_buf(r), kinds[pick(r, 6)] | PDTI_NO_VERIFY,
			pick(r, 4) ? 0 : 4096 << pick(r, 8)) == 0) {
		for (i = pick(r, 4); i > 0; i--) {
			switch (pick(r, 3)) {
			case 0:
				pdti_read(imp, pick(r, 2) * 4096, buf, sizeof(buf));
				break;
			case 1:
				ioctl(imp, PDTI_IOCTL_REMAP);
				break;
			default:
				usleep(pick(r, 200));
			}
		}
		if (pick(r, 2))
			ioctl(imp, PDTI_IOCTL_RELEASE);
	}
	if (!pick(r, 4))
		pdti_vmap_read(any_buf(r), 0, buf, sizeof(buf));
	close(imp);
}

static void op_vgem(struct rng *r)
{
	struct drm_prime_handle p = { .fd = any_buf(r), .flags = DRM_CLOEXEC };
	struct drm_gem_close c = { 0 };

	if (vgem < 0)
		return;
	if (ioctl(vgem, DRM_IOCTL_PRIME_FD_TO_HANDLE, &p))
		return;
	usleep(pick(r, 100));
	c.handle = p.handle;
	ioctl(vgem, DRM_IOCTL_GEM_CLOSE, &c);
}

/* A child pokes inherited fds by number (no locks: other threads are gone). */
static void op_fork(struct rng *r)
{
	int status, i;
	pid_t pid = fork();

	if (pid < 0)
		return;
	if (!pid) {
		for (i = 0; i < 20; i++) {
			struct peerdirect_query q = { .argsz = sizeof(q) };
			struct peerdirect_alloc a = { .argsz = sizeof(a), .size = q0.page_size };
			int fd = 3 + pick(r, 60);

			ioctl(fd, PEERDIRECT_IOCTL_QUERY, &q);
			if (!ioctl(fd, PEERDIRECT_IOCTL_ALLOC, &a) && pick(r, 2)) {
				struct peerdirect_export e = {
					.argsz = sizeof(e), .handle = a.handle, .length = q0.page_size,
				};

				ioctl(fd, PEERDIRECT_IOCTL_EXPORT, &e);
			}
		}
		_exit(0);	/* closing everything inherited */
	}
	waitpid(pid, &status, 0);
}

/* An fd sent to ourselves with SCM_RIGHTS, then used through the copy. */
static void op_pass(struct rng *r)
{
	char cbuf[CMSG_SPACE(sizeof(int))] = { 0 };
	int sv[2], fd = pick(r, 2) ? any_dev(r) : any_buf(r), got = -1, b = 0;
	struct iovec iov = { .iov_base = &b, .iov_len = 1 };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1,
			    .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *c = CMSG_FIRSTHDR(&m);

	/*
	 * Non-blocking: another thread may reuse a closed fd number and read
	 * this socket through it, which must not park the thread for good.
	 */
	if (fd < 0 || socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv))
		return;
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof(int));
	if (sendmsg(sv[0], &m, 0) < 0)
		goto out;
	if (pick(r, 4)) {
		m.msg_controllen = sizeof(cbuf);
		if (recvmsg(sv[1], &m, MSG_CMSG_CLOEXEC) >= 0 && CMSG_FIRSTHDR(&m))
			memcpy(&got, CMSG_DATA(CMSG_FIRSTHDR(&m)), sizeof(int));
	}	/* else the fd in flight is dropped with the socket */
	if (got >= 0) {
		struct peerdirect_query q = { .argsz = sizeof(q) };

		ioctl(got, PEERDIRECT_IOCTL_QUERY, &q);
		close(got);
	}
out:
	close(sv[0]);
	close(sv[1]);
}

struct op {
	unsigned int weight;
	void (*fn)(struct rng *r);
};

static void op_revoke_user(struct rng *r)
{
	op_revoke(r, false);
}

static void op_revoke_admin(struct rng *r)
{
	op_revoke(r, true);
}

/* Any file subscribes to any fd (ours, vgem's, a device's, closed ones). */
static void op_subscribe(struct rng *r)
{
	struct peerdirect_subscribe s;

	fill(r, &s, sizeof(s));
	s.argsz = argsz(r, sizeof(s));
	s.flags = pick(r, 4) ? (pick(r, 3) ? 0 : PEERDIRECT_SUBSCRIBE_CANCEL) : flags(r);
	if (pick(r, 4))
		s.pad = s.export_id = s.inode = 0;
	if (s.flags & PEERDIRECT_SUBSCRIBE_CANCEL && pick(r, 2))
		s.cookie = 0;
	s.fd = pick(r, 8) ? any_buf(r) : any_dev(r);
	check("subscribe", ioctl(any_dev(r), PEERDIRECT_IOCTL_SUBSCRIBE, argp(r, &s)));
}

/* Record sizes and capacities at their edges, arrays unmapped or in the
 * kernel.  The kernel trusts nr * size: a good array is only passed where
 * that fits in it (else the unmapped page, for EFAULT). */
static void op_list(struct rng *r)
{
	static __thread uint64_t ex[1024], at[1024];
	const uint32_t rec[] = { 0, 1, 8, sizeof(struct peerdirect_export_info) - 8,
				 sizeof(struct peerdirect_export_info),
				 sizeof(struct peerdirect_export_info) + 8, 4096, 0xffffffff };
	struct peerdirect_list l;

	fill(r, &l, sizeof(l));
	l.argsz = argsz(r, sizeof(l));
	l.flags = pick(r, 4) ? (pick(r, 2) ? PEERDIRECT_LIST_ATTACHMENTS : 0) : flags(r);
	l.export_size = pick(r, 2) ? sizeof(struct peerdirect_export_info) : rec[pick(r, 8)];
	l.attach_size = pick(r, 2) ? sizeof(struct peerdirect_attach_info) : rec[pick(r, 8)];
	l.nr_exports = pick(r, 2) ? pick(r, 9) : (uint32_t)edge(r);
	l.nr_attachments = pick(r, 2) ? pick(r, 9) : (uint32_t)edge(r);
	l.exports = (uint64_t)l.nr_exports * l.export_size <= sizeof(ex) ?
		    (uintptr_t)argp(r, ex) : (uintptr_t)unmapped;
	l.attachments = (uint64_t)l.nr_attachments * l.attach_size <= sizeof(at) ?
			(uintptr_t)argp(r, at) : (uintptr_t)unmapped;
	check("list", ioctl(any_dev(r), PEERDIRECT_IOCTL_LIST, argp(r, &l)));
}

static const struct op ops[] = {
	{ 12, op_query }, { 12, op_alloc }, { 8, op_free }, { 14, op_export },
	{ 8, op_revoke_user }, { 2, op_revoke_admin }, { 1, op_reset },
	{ 6, op_bad_ioctl }, { 6, op_read_events }, { 6, op_mmap }, { 6, op_sync },
	{ 3, op_name }, { 6, op_fileops }, { 1, op_reopen }, { 3, op_import },
	{ 2, op_vgem }, { 1, op_pass }, { 6, op_subscribe }, { 4, op_list },
};

static unsigned int total_weight;

static void *worker(void *arg)
{
	struct rng r = { .s = (uintptr_t)arg };
	unsigned long long n;

	while ((n = __atomic_add_fetch(&ops_done, 1, __ATOMIC_RELAXED)) <= max_ops) {
		unsigned int w = pick(&r, total_weight), i;

		if (!(n & 1023) && pd_now_ms() > deadline)
			break;
		for (i = 0; w >= ops[i].weight; i++)
			w -= ops[i].weight;
		ops[i].fn(&r);
		/* forks are slow under TCG: one in 4096 operations */
		if (!(rnd(&r) & 4095))
			op_fork(&r);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	struct sigaction sa = { .sa_handler = on_sigbus, .sa_flags = SA_NODEFER };
	unsigned int seed = time(NULL), threads = 4, i;
	long long ms = 20000, t0, dt;
	pthread_t t[MAX_THREADS];
	char saved_timeout[32] = "";
	struct peerdirect_query q;
	int c, fd;

	while ((c = getopt(argc, argv, "s:n:t:j:")) != -1) {
		switch (c) {
		case 's':
			seed = pd_arg_ull("fuzz: -s", optarg, 0, UINT32_MAX);
			break;
		case 'n':
			max_ops = pd_arg_ull("fuzz: -n", optarg, 1, ULLONG_MAX);
			break;
		case 't':
			ms = pd_arg_ull("fuzz: -t (ms)", optarg, 1, 24 * 3600 * 1000);
			break;
		case 'j':
			threads = pd_arg_ull("fuzz: -j", optarg, 1, MAX_THREADS);
			break;
		default:
			fprintf(stderr, "usage: fuzz [-s SEED] [-n OPS] [-t MS] [-j THREADS] [DEVICE]\n");
			return 2;
		}
	}
	if (optind < argc)
		devpath = argv[optind];

	ksft_print_header();
	ksft_set_plan(3);
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("# fuzz: seed %u, up to %llu operations or %lld ms, %u threads, %s\n",
	       seed, max_ops, ms, threads, devpath);

	sigaction(SIGBUS, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	fd = pd_open(devpath);
	if (fd < 0 || pd_query(fd, &q0))
		ksft_exit_fail_msg("%s: %s\n", devpath, strerror(errno));
	close(fd);
	unmapped = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	munmap((char *)unmapped + 4096, 4096);
	unmapped = (char *)unmapped + 4096;
	pd_param_read("revoke_timeout_ms", saved_timeout, sizeof(saved_timeout));
	pd_param_write("revoke_timeout_ms", "10");
	/* non-blocking: a read on an empty queue must not park a thread */
	for (i = 0; i < MAX_FDS; i++)
		devs[i] = open(devpath, O_RDWR | O_CLOEXEC | O_NONBLOCK);
	for (i = 0; i < MAX_BUFS; i++)
		bufs[i] = -1;
	vgem = pd_open_vgem();
	for (i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
		total_weight += ops[i].weight;

	t0 = pd_now_ms();
	deadline = t0 + ms;
	for (i = 0; i < threads; i++)
		pthread_create(&t[i], NULL, worker,
			       (void *)(uintptr_t)(seed * 0x9e3779b97f4a7c15ULL + i + 1));
	for (i = 0; i < threads; i++)
		pthread_join(t[i], NULL);
	dt = pd_now_ms() - t0;
	if (ops_done > max_ops)
		ops_done = max_ops;
	else
		ops_done--;	/* the one that saw the deadline */

	for (i = 0; i < MAX_BUFS; i++)
		if (bufs[i] >= 0)
			close(bufs[i]);
	for (i = 0; i < MAX_FDS; i++)
		if (devs[i] >= 0)
			close(devs[i]);
	if (vgem >= 0)
		close(vgem);
	if (saved_timeout[0])
		pd_param_write("revoke_timeout_ms", saved_timeout);
	usleep(100 * 1000);	/* deferred releases */

	printf("# fuzz: %llu operations in %lld ms (%lld/s), seed %u\n", ops_done, dt,
	       dt ? ops_done * 1000 / dt : 0, seed);
	ksft_test_result(!bad, "every call answered with an errno the uapi names%s%s\n",
			 bad ? ": " : "", first_bad);
	fd = pd_open(devpath);
	ksft_test_result(fd >= 0 && !pd_query(fd, &q) && q.mem_free == q.mem_size &&
			 !q.quota_used &&
			 pd_debugfs_value(strrchr(devpath, '/') + 1, "exports_live") == 0 &&
			 pd_debugfs_value(strrchr(devpath, '/') + 1, "importer_mappings") == 0,
			 "the device is whole afterwards\n");
	if (fd >= 0)
		close(fd);
	ksft_test_result(ops_done > 0, "%llu operations\n", ops_done);
	ksft_finished();
}
