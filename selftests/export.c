// SPDX-License-Identifier: GPL-2.0
/* Exports: fds, CPU mappings, SYNC, names and limits. */
#define _GNU_SOURCE
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include "kselftest_harness.h"
#include "pd_test.h"

FIXTURE(exp) {
	int fd;
	struct peerdirect_query q;
	int64_t h;
	size_t len;
};

FIXTURE_SETUP(exp)
{
	self->fd = pd_open(PD_DEV0);
	ASSERT_LE(0, self->fd);
	ASSERT_EQ(0, pd_query(self->fd, &self->q));
	self->len = 4 * self->q.page_size;
	self->h = pd_alloc(self->fd, self->len);
	ASSERT_LT(0, self->h);
}

FIXTURE_TEARDOWN(exp)
{
	close(self->fd);
}

TEST_F(exp, fd_identity_and_cloexec)
{
	struct stat st;
	__u64 id1 = 0, id2 = 0;
	struct peerdirect_export e = {
		.argsz = sizeof(e), .flags = PEERDIRECT_EXPORT_RDWR | PEERDIRECT_EXPORT_CLOEXEC, .handle = self->h,
		.length = self->len,
	};
	int d2;

	ASSERT_EQ(0, ioctl(self->fd, PEERDIRECT_IOCTL_EXPORT, &e));
	id1 = e.export_id;
	EXPECT_LT(0, id1);
	ASSERT_EQ(0, fstat(e.fd, &st));
	EXPECT_EQ(st.st_ino, e.inode);
	EXPECT_EQ(self->len, (size_t)lseek(e.fd, 0, SEEK_END));
	EXPECT_TRUE(fcntl(e.fd, F_GETFD) & FD_CLOEXEC);
	EXPECT_EQ(O_RDWR, fcntl(e.fd, F_GETFL) & O_ACCMODE);

	d2 = pd_export_id(self->fd, self->h, 0, 4096, 0, &id2);
	ASSERT_LE(0, d2);
	EXPECT_NE(id1, id2);
	EXPECT_FALSE(fcntl(d2, F_GETFD) & FD_CLOEXEC);
	EXPECT_EQ(O_RDONLY, fcntl(d2, F_GETFL) & O_ACCMODE);
	close(e.fd);
	close(d2);
}

/* Bytes written through one export are read through another. */
TEST_F(exp, mmap_round_trip_between_exports)
{
	size_t ps = self->q.page_size;
	int whole = pd_export(self->fd, self->h, 0, self->len);
	int part = pd_export(self->fd, self->h, ps, 2 * ps);
	unsigned char *w, *r;

	ASSERT_LE(0, whole);
	ASSERT_LE(0, part);
	w = mmap(NULL, self->len, PROT_READ | PROT_WRITE, MAP_SHARED, whole, 0);
	ASSERT_NE(MAP_FAILED, w);
	ASSERT_EQ(0, pd_sync(whole, DMA_BUF_SYNC_START | DMA_BUF_SYNC_WRITE));
	pd_fill(w, self->len, 0x1234);
	ASSERT_EQ(0, pd_sync(whole, DMA_BUF_SYNC_END | DMA_BUF_SYNC_WRITE));

	r = mmap(NULL, 2 * ps, PROT_READ, MAP_SHARED, part, 0);
	ASSERT_NE(MAP_FAILED, r);
	ASSERT_EQ(0, pd_sync(part, DMA_BUF_SYNC_START | DMA_BUF_SYNC_READ));
	EXPECT_EQ(0, memcmp(w + ps, r, 2 * ps));
	ASSERT_EQ(0, pd_sync(part, DMA_BUF_SYNC_END | DMA_BUF_SYNC_READ));

	/* a mapping at a page offset inside the dma-buf */
	munmap(r, 2 * ps);
	r = mmap(NULL, 4096, PROT_READ, MAP_SHARED, part, 4096);
	ASSERT_NE(MAP_FAILED, r);
	EXPECT_EQ(0, memcmp(w + ps + 4096, r, 4096));
	munmap(r, 4096);
	munmap(w, self->len);
	close(whole);
	close(part);
}

TEST_F(exp, sync_rejects_bad_flags)
{
	int d = pd_export(self->fd, self->h, 0, 4096);

	ASSERT_LE(0, d);
	EXPECT_EQ(-EINVAL, pd_sync(d, 0x100));
	EXPECT_EQ(-EINVAL, pd_sync(d, DMA_BUF_SYNC_START));
	close(d);
}

TEST_F(exp, mmap_beyond_the_buffer_is_einval)
{
	int d = pd_export(self->fd, self->h, 0, 8192);
	void *p;

	ASSERT_LE(0, d);
	p = mmap(NULL, 3 * 4096, PROT_READ, MAP_SHARED, d, 0);
	EXPECT_EQ(MAP_FAILED, p);
	EXPECT_EQ(EINVAL, errno);
	p = mmap(NULL, 4096, PROT_READ, MAP_SHARED, d, 2 * 4096);
	EXPECT_EQ(MAP_FAILED, p);
	close(d);
}

TEST_F(exp, private_mapping_is_refused)
{
	int d = pd_export(self->fd, self->h, 0, 4096);
	void *p;

	ASSERT_LE(0, d);
	p = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, d, 0);
	EXPECT_EQ(MAP_FAILED, p);
	EXPECT_EQ(EINVAL, errno);
	close(d);
}

TEST_F(exp, read_only_export_refuses_writable_mappings)
{
	int d = pd_export_id(self->fd, self->h, 0, 4096, PEERDIRECT_EXPORT_CLOEXEC, NULL);
	void *p;

	ASSERT_LE(0, d);
	p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, d, 0);
	EXPECT_EQ(MAP_FAILED, p);
	EXPECT_EQ(EACCES, errno);
	p = mmap(NULL, 4096, PROT_READ, MAP_SHARED, d, 0);
	ASSERT_NE(MAP_FAILED, p);
	EXPECT_EQ(-1, mprotect(p, 4096, PROT_READ | PROT_WRITE));
	EXPECT_EQ(EACCES, errno);
	munmap(p, 4096);
	close(d);
}

/*
 * N10: SYNC of a read-only export may bracket reads only: WRITE and RW are
 * EPERM at start and end, as a writable mapping is refused above.
 */
TEST_F(exp, read_only_export_refuses_sync_for_write)
{
	int d = pd_export_id(self->fd, self->h, 0, 4096, PEERDIRECT_EXPORT_CLOEXEC, NULL);

	ASSERT_LE(0, d);
	EXPECT_EQ(-EPERM, pd_sync(d, DMA_BUF_SYNC_START | DMA_BUF_SYNC_WRITE));
	EXPECT_EQ(-EPERM, pd_sync(d, DMA_BUF_SYNC_END | DMA_BUF_SYNC_WRITE));
	EXPECT_EQ(-EPERM, pd_sync(d, DMA_BUF_SYNC_START | DMA_BUF_SYNC_RW));
	EXPECT_EQ(-EPERM, pd_sync(d, DMA_BUF_SYNC_END | DMA_BUF_SYNC_RW));
	EXPECT_EQ(0, pd_sync(d, DMA_BUF_SYNC_START | DMA_BUF_SYNC_READ));
	EXPECT_EQ(0, pd_sync(d, DMA_BUF_SYNC_END | DMA_BUF_SYNC_READ));
	close(d);
}

TEST_F(exp, set_name_shows_in_fdinfo)
{
	int d = pd_export(self->fd, self->h, 0, 4096);
	char path[64], buf[1024];
	ssize_t n;
	int f;

	ASSERT_LE(0, d);
	ASSERT_EQ(0, ioctl(d, DMA_BUF_SET_NAME_B, "grad-bucket-7"));
	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", d);
	f = open(path, O_RDONLY);
	ASSERT_LE(0, f);
	n = read(f, buf, sizeof(buf) - 1);
	ASSERT_LT(0, n);
	buf[n] = 0;
	EXPECT_NE(NULL, strstr(buf, "name:\tgrad-bucket-7")) TH_LOG("%s", buf);
	EXPECT_NE(NULL, strstr(buf, "exp_name:\tpeerdirect")) TH_LOG("%s", buf);
	EXPECT_NE(NULL, strstr(buf, "size:\t4096")) TH_LOG("%s", buf);
	close(f);
	close(d);
}

TEST_F(exp, export_limit_is_enospc_until_one_is_released)
{
	int fds[256], i, n = self->q.max_exports;

	ASSERT_GE(256, n);
	for (i = 0; i < n; i++) {
		fds[i] = pd_export(self->fd, self->h, 0, 4096);
		ASSERT_LE(0, fds[i]) TH_LOG("export %d: %d", i, fds[i]);
	}
	EXPECT_EQ(-ENOSPC, pd_export(self->fd, self->h, 0, 4096));
	close(fds[0]);
	fds[0] = pd_export(self->fd, self->h, 0, 4096);
	EXPECT_LE(0, fds[0]);
	for (i = 0; i < n; i++)
		close(fds[i]);
}

/* Exports LIST shows, all of them for root; -1 without LIST. */
static long listed_exports(int fd)
{
	struct peerdirect_list l = {
		.argsz = sizeof(l),
		.export_size = sizeof(struct peerdirect_export_info),
	};

	if (ioctl(fd, PEERDIRECT_IOCTL_LIST, &l))
		return -1;
	return l.total_exports;
}

/* The lowest free fd number: the next one an export would install. */
static int next_fd(void)
{
	int fd = open("/dev/null", O_RDONLY);

	if (fd >= 0)
		close(fd);
	return fd;
}

/*
 * An EXPORT whose result cannot be written back (the argument is in a
 * read-only page: read in, not out) fails EFAULT and leaves no fd, no
 * export and nothing quarantined.
 */
TEST_F(exp, an_export_whose_result_cannot_be_written_leaves_nothing)
{
	struct peerdirect_export *e;
	long exports;
	__u64 mem_free;
	int fd;

	e = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, e);
	e->argsz = sizeof(*e);
	e->flags = PEERDIRECT_EXPORT_RDWR;
	e->handle = self->h;
	e->length = self->len;
	ASSERT_EQ(0, mprotect(e, 4096, PROT_READ));
	ASSERT_EQ(0, pd_query(self->fd, &self->q));
	mem_free = self->q.mem_free;
	exports = listed_exports(self->fd);
	fd = next_fd();
	ASSERT_LE(0, fd);

	EXPECT_EQ(-1, ioctl(self->fd, PEERDIRECT_IOCTL_EXPORT, e));
	EXPECT_EQ(EFAULT, errno);
	EXPECT_EQ(fd, next_fd()) TH_LOG("an fd was left installed");
	EXPECT_EQ(exports, listed_exports(self->fd));
	/* Nothing quarantined: the whole allocation comes back. */
	EXPECT_EQ(0, pd_free(self->fd, self->h));
	ASSERT_EQ(0, pd_query(self->fd, &self->q));
	EXPECT_EQ(mem_free + self->len, self->q.mem_free);
	munmap(e, 4096);
}

TEST_F(exp, export_after_free_is_enoent)
{
	ASSERT_EQ(0, pd_free(self->fd, self->h));
	EXPECT_EQ(-ENOENT, pd_export(self->fd, self->h, 0, 4096));
}

/*
 * CPU faults while an importer holds the reservation.  The holder is a
 * child in PDTI_IOCTL_HOLD_RESV (an interruptible sleep: killing it lets
 * go); LIST shows the export BUSY once it holds.  The hold outlasts every
 * test, which ends it.
 */
#define HOLD_MS	10000

static void let_go(pid_t child)
{
	if (child > 0) {
		kill(child, SIGKILL);
		waitpid(child, NULL, 0);
	}
}

/* What export fd @d holds, read through a new mapping: 0 or -errno. */
static int read_back(int d, void *buf, size_t len)
{
	void *m = mmap(NULL, len, PROT_READ, MAP_SHARED, d, 0);

	if (m == MAP_FAILED)
		return -errno;
	memcpy(buf, m, len);
	munmap(m, len);
	return 0;
}

/*
 * A new test importer of export fd @d, its import taken now: importing
 * takes the reservation, so it cannot wait until another child holds it.
 * -1 no importer, -2 the import failed (the importer is then in *imp).
 */
static int import_to_hold(int d, __u32 flags, int *imp)
{
	*imp = pdti_open("peerdirect0");
	if (*imp < 0)
		return -1;
	return pdti_import(*imp, d, flags, 0) ? -2 : 0;
}

/*
 * Import export @id (fd @d) into a new test importer (*imp, for the
 * caller to close) and hold its reservation from a child: the child's
 * pid once it holds; -1 no importer, -2 the import failed, -3 the child
 * never held.
 */
static pid_t hold_reservation(int fd, int d, __u64 id, __u32 flags, int *imp)
{
	pid_t pid = import_to_hold(d, flags, imp) ?: pdti_fork_holder(*imp, HOLD_MS);
	int i;

	for (i = 0; pid > 0 && i < 200; i++) {
		if (export_busy(fd, id) == 1)
			return pid;
		usleep(10000);
	}
	if (pid < 0)
		return pid;
	let_go(pid);
	return -3;
}

/*
 * Until the task (a /proc directory) is in one of @states (letters of
 * /proc/PID/stat) in system call @nr, -1 for a page fault outside any
 * system call.
 */
static bool task_in(const char *dir, long nr, const char *states)
{
	char path[96], buf[512], *p;
	bool in_state;
	long in;
	FILE *f;
	int i;

	for (i = 0; i < 400; i++, usleep(10000)) {
		snprintf(path, sizeof(path), "%s/stat", dir);
		f = fopen(path, "r");
		if (!f)
			return false;
		p = fgets(buf, sizeof(buf), f) ? strrchr(buf, ')') : NULL;
		fclose(f);
		in_state = p && p[2] && strchr(states, p[2]);
		snprintf(path, sizeof(path), "%s/syscall", dir);
		f = fopen(path, "r");
		if (!f)
			return false;
		in = fscanf(f, "%ld", &in) == 1 ? in : -2;
		fclose(f);
		if (in_state && in == nr)
			return true;
	}
	return false;
}

/* Until the task sleeps in the kernel in system call @nr, as task_in(). */
static bool task_waits(const char *dir, long nr)
{
	return task_in(dir, nr, "SD");
}

/* User plus system CPU time of a task, in clock ticks. */
static long long task_cpu(const char *dir)
{
	unsigned long long ut, st;
	char path[96], buf[1024], *p;
	FILE *f;

	snprintf(path, sizeof(path), "%s/stat", dir);
	f = fopen(path, "r");
	if (!f)
		return -1;
	p = fgets(buf, sizeof(buf), f) ? strrchr(buf, ')') : NULL;
	fclose(f);
	/* After the name: state and 10 fields, then utime and stime. */
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu",
			 &ut, &st) != 2)
		return -1;
	return ut + st;
}

/* CPU time a task (a /proc directory) takes in half a second: *wall ms. */
static long long cpu_ms_in_half_a_second(const char *dir, long long *wall)
{
	long long cpu = task_cpu(dir);

	*wall = pd_now_ms();
	usleep(500000);
	cpu = (task_cpu(dir) - cpu) * 1000 / sysconf(_SC_CLK_TCK);
	*wall = pd_now_ms() - *wall;
	return cpu;
}

struct toucher {
	const volatile unsigned char *p;
	int pipe;		/* read into p instead, when >= 0 */
	volatile pid_t tid;
	volatile int done;
	unsigned char value;
	ssize_t got;
};

static volatile sig_atomic_t usr1_seen;

static void on_usr1(int sig)
{
	usr1_seen++;
}

static void *touch(void *arg)
{
	struct toucher *t = arg;

	t->tid = syscall(SYS_gettid);
	if (t->pipe >= 0)
		t->got = read(t->pipe, (void *)t->p, 4096);
	else
		t->value = t->p[0];
	t->done = 1;
	return NULL;
}

/* The thread, its /proc directory, and a SIGUSR1 handler it can be sent. */
static int start_toucher(struct toucher *t, pthread_t *th, char *dir, size_t len)
{
	struct sigaction sa = { .sa_handler = on_usr1 };

	usr1_seen = 0;
	if (sigaction(SIGUSR1, &sa, NULL) || pthread_create(th, NULL, touch, t))
		return -1;
	while (!t->tid)
		usleep(1000);
	snprintf(dir, len, "/proc/self/task/%d", (int)t->tid);
	return 0;
}

static bool signal_seen(void)
{
	long long t0 = pd_now_ms();

	while (!usr1_seen && pd_now_ms() - t0 < 1000)
		usleep(1000);
	return usr1_seen;
}

/* How long a mmap() and munmap() take: they queue behind a held mmap lock. */
static long long mmap_munmap_ms(size_t len)
{
	long long t0 = pd_now_ms();
	void *m = mmap(NULL, len, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (m == MAP_FAILED)
		return -1;
	munmap(m, len);
	return pd_now_ms() - t0;
}

/*
 * A user fault that waits for the reservation holds no mmap lock (another
 * thread maps and unmaps meanwhile), takes signals while it waits, and
 * maps the right page once the holder lets go.
 */
TEST_F(exp, a_fault_on_a_held_reservation_leaves_the_mmap_lock_free)
{
	struct toucher t = { .pipe = -1 };
	size_t ps = self->q.page_size;
	unsigned char *w, *r;
	long long took;
	int d, imp;
	char dir[64];
	pthread_t th;
	__u64 id = 0;
	pid_t holder;

	if (!(self->q.features & PEERDIRECT_FEAT_LIST))
		SKIP(return, "no PEERDIRECT_FEAT_LIST");
	d = pd_export_id(self->fd, self->h, 0, self->len, PEERDIRECT_EXPORT_RDWR, &id);
	ASSERT_LE(0, d);
	w = mmap(NULL, ps, PROT_READ | PROT_WRITE, MAP_SHARED, d, 0);
	ASSERT_NE(MAP_FAILED, w);
	pd_fill(w, ps, 0x5eed);
	/* A second mapping of the same page: nothing faulted in yet. */
	r = mmap(NULL, ps, PROT_READ, MAP_SHARED, d, 0);
	ASSERT_NE(MAP_FAILED, r);
	holder = hold_reservation(self->fd, d, id, pd_pinned_flags(&self->q), &imp);
	ASSERT_LT(0, holder) TH_LOG("hold_reservation: %d", holder);
	t.p = r;
	ASSERT_EQ(0, start_toucher(&t, &th, dir, sizeof(dir)));
	ASSERT_TRUE(task_waits(dir, -1)) TH_LOG("the thread never waited in its fault");

	took = mmap_munmap_ms(ps);
	EXPECT_GT(1000, took) TH_LOG("mmap() waited %lld ms behind the fault", took);
	EXPECT_FALSE(t.done) TH_LOG("the fault ended before the holder let go");

	ASSERT_EQ(0, pthread_kill(th, SIGUSR1));
	EXPECT_TRUE(signal_seen()) TH_LOG("the waiting fault held the signal back");
	EXPECT_FALSE(t.done);

	let_go(holder);
	ASSERT_EQ(0, pthread_join(th, NULL));
	EXPECT_EQ(w[0], t.value);
	EXPECT_EQ(0, pd_check(r, ps, 0x5eed));
	munmap(r, ps);
	munmap(w, ps);
	close(imp);
	close(d);
}

/*
 * A kernel access into the mapping (read() from a pipe) that waits for the
 * reservation with a signal pending sleeps: a fault that gave up on the
 * signal would be taken again at once, a CPU spinning for the whole hold.
 */
TEST_F(exp, a_kernel_access_waiting_with_a_signal_pending_does_not_spin)
{
	struct toucher t = { 0 };
	unsigned char pattern[4096], *w;
	size_t ps = self->q.page_size;
	long long cpu, wall, took;
	int d, imp, p[2];
	char dir[64];
	pthread_t th;
	__u64 id = 0;
	pid_t holder;

	if (!(self->q.features & PEERDIRECT_FEAT_LIST))
		SKIP(return, "no PEERDIRECT_FEAT_LIST");
	d = pd_export_id(self->fd, self->h, 0, self->len, PEERDIRECT_EXPORT_RDWR, &id);
	ASSERT_LE(0, d);
	w = mmap(NULL, sizeof(pattern), PROT_READ | PROT_WRITE, MAP_SHARED, d, 0);
	ASSERT_NE(MAP_FAILED, w);
	ASSERT_EQ(0, pipe(p));
	pd_fill(pattern, sizeof(pattern), 0xfeed);
	ASSERT_EQ((ssize_t)sizeof(pattern), write(p[1], pattern, sizeof(pattern)));
	holder = hold_reservation(self->fd, d, id, pd_pinned_flags(&self->q), &imp);
	ASSERT_LT(0, holder) TH_LOG("hold_reservation: %d", holder);
	t.p = w;
	t.pipe = p[0];
	ASSERT_EQ(0, start_toucher(&t, &th, dir, sizeof(dir)));
	ASSERT_TRUE(task_waits(dir, SYS_read)) TH_LOG("the read never waited");
	ASSERT_EQ(0, pthread_kill(th, SIGUSR1));
	usleep(100000);
	ASSERT_LE(0, task_cpu(dir));
	cpu = cpu_ms_in_half_a_second(dir, &wall);
	/* A spin takes all of it; a poll once a jiffy, a few percent. */
	EXPECT_GT(wall / 2, cpu) TH_LOG("%lld ms of CPU in %lld ms of waiting", cpu, wall);
	took = mmap_munmap_ms(ps);
	EXPECT_GT(1000, took) TH_LOG("mmap() waited %lld ms behind the read", took);
	EXPECT_FALSE(t.done) TH_LOG("the read ended before the holder let go");

	let_go(holder);
	ASSERT_EQ(0, pthread_join(th, NULL));
	EXPECT_EQ((ssize_t)sizeof(pattern), t.got);
	EXPECT_EQ(0, memcmp(pattern, w, sizeof(pattern)));
	EXPECT_TRUE(usr1_seen);
	close(p[0]);
	close(p[1]);
	munmap(w, sizeof(pattern));
	close(imp);
	close(d);
}

/* How a victim touches the mapping, and the system call it then waits in. */
enum touch_by {
	BY_LOAD,	/* a user-mode load: no system call */
	BY_READ,	/* read() from a pipe into the mapping: copy_to_user() */
	BY_FUTEX,	/* FUTEX_WAKE_OP on it: a fault that may not be retried */
};

static long touch_syscall(enum touch_by by)
{
	return by == BY_LOAD ? -1 : by == BY_READ ? SYS_read : SYS_futex;
}

/*
 * A child that maps export fd @d and touches it @by (from @pipe for
 * BY_READ).  It handles SIGUSR1, so that signal can be left pending in its
 * wait.
 */
static pid_t start_victim(int d, enum touch_by by, int pipe)
{
	struct sigaction sa = { .sa_handler = on_usr1 };
	volatile unsigned int *p;
	unsigned int word = 0;
	pid_t pid = pd_fork_child();

	if (pid)
		return pid;
	p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, d, 0);
	if (p == MAP_FAILED || sigaction(SIGUSR1, &sa, NULL))
		_exit(1);
	switch (by) {
	case BY_READ:
		_exit(read(pipe, (void *)p, 4096) < 0);
	case BY_FUTEX:
		/* A private futex: the atomic op on p faults without retry. */
		_exit(syscall(SYS_futex, &word, FUTEX_WAKE_OP_PRIVATE, 1, 1, p,
			      FUTEX_OP(FUTEX_OP_SET, 1, FUTEX_OP_CMP_EQ, 0)) < 0);
	default:
		_exit(p[0] & 0);
	}
}

/*
 * Until the victim waits in @nr, with a handled SIGUSR1 left pending
 * after when @usr1: 0, -1 it never waited, -2 the signal ended the wait.
 */
static int victim_waits(pid_t victim, long nr, bool usr1)
{
	char dir[64];

	snprintf(dir, sizeof(dir), "/proc/%d", (int)victim);
	if (!task_waits(dir, nr))
		return -1;
	if (usr1) {
		/* Pending and handled, it must neither end nor spoil the wait. */
		kill(victim, SIGUSR1);
		usleep(100000);
		if (!task_waits(dir, nr))
			return -2;
	}
	return 0;
}

/* SIGKILL the victim waiting in @nr and reap it: how long it took, in ms. */
static long long kill_victim(pid_t victim, long nr, bool usr1_first, int *status)
{
	long long t0;
	int ret = victim_waits(victim, nr, usr1_first);

	if (ret)
		return ret;
	t0 = pd_now_ms();
	if (kill(victim, SIGKILL) || waitpid(victim, status, 0) != victim)
		return -3;
	return pd_now_ms() - t0;
}

/*
 * A process killed while it waits for the reservation dies at once,
 * however it touched the mapping, with or without a handled signal
 * pending before.
 */
static void killed_while_waiting(struct __test_metadata *_metadata,
				 FIXTURE_DATA(exp) *self, enum touch_by by, bool usr1)
{
	int d, imp, status = 0, p[2] = { -1, -1 };
	unsigned char pattern[4096];
	pid_t holder, victim;
	long long took;
	__u64 id = 0;

	if (!(self->q.features & PEERDIRECT_FEAT_LIST))
		SKIP(return, "no PEERDIRECT_FEAT_LIST");
	d = pd_export_id(self->fd, self->h, 0, self->len, PEERDIRECT_EXPORT_RDWR, &id);
	ASSERT_LE(0, d);
	if (by == BY_READ) {
		ASSERT_EQ(0, pipe(p));
		pd_fill(pattern, sizeof(pattern), 0xdead);
		ASSERT_EQ((ssize_t)sizeof(pattern), write(p[1], pattern, sizeof(pattern)));
	}
	holder = hold_reservation(self->fd, d, id, pd_pinned_flags(&self->q), &imp);
	ASSERT_LT(0, holder) TH_LOG("hold_reservation: %d", holder);
	victim = start_victim(d, by, p[0]);
	ASSERT_LT(0, victim);
	took = kill_victim(victim, touch_syscall(by), usr1, &status);
	if (took < 0)
		let_go(victim);
	ASSERT_LE(0, took) TH_LOG("the child %s", took == -3 ? "could not be killed" :
				  took == -2 ? "stopped waiting on SIGUSR1" :
				  "never waited on the reservation");
	EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
		TH_LOG("the child ended with status %#x", status);
	EXPECT_GT(1000, took) TH_LOG("the killed wait took %lld ms to end", took);
	/* Else the wait ended because the holder let go, not by the kill. */
	EXPECT_EQ(1, export_busy(self->fd, id)) TH_LOG("the holder let go first");
	let_go(holder);
	if (p[0] >= 0) {
		close(p[0]);
		close(p[1]);
	}
	close(imp);
	close(d);
}

TEST_F(exp, a_fault_on_a_held_reservation_is_killable)
{
	killed_while_waiting(_metadata, self, BY_LOAD, false);
}

TEST_F(exp, a_kernel_access_waiting_on_a_held_reservation_is_killable)
{
	killed_while_waiting(_metadata, self, BY_READ, false);
}

TEST_F(exp, a_kernel_access_waiting_with_a_signal_pending_is_killable)
{
	killed_while_waiting(_metadata, self, BY_READ, true);
}

/* futex's fault_in_user_writeable(): no retry, no FAULT_FLAG_KILLABLE. */
TEST_F(exp, a_fault_that_may_not_be_retried_is_killable)
{
	killed_while_waiting(_metadata, self, BY_FUTEX, false);
}

TEST_F(exp, a_fault_that_may_not_be_retried_with_a_signal_pending_is_killable)
{
	killed_while_waiting(_metadata, self, BY_FUTEX, true);
}

/*
 * A victim whose wait the holder ends completes its access: futex's
 * fault that may not be retried, and a read() into the mapping, with or
 * without a handled signal pending; what it wrote is there, and the
 * reservation it took was let go (the check faults through a new mapping).
 */
static void completes_when_let_go(struct __test_metadata *_metadata,
				  FIXTURE_DATA(exp) *self, enum touch_by by, bool usr1)
{
	int d, imp, status = -1, p[2] = { -1, -1 };
	unsigned char pattern[4096], got[4096];
	unsigned int word;
	pid_t holder, victim;
	long long cpu, wall;
	char dir[64];
	__u64 id = 0;

	if (!(self->q.features & PEERDIRECT_FEAT_LIST))
		SKIP(return, "no PEERDIRECT_FEAT_LIST");
	d = pd_export_id(self->fd, self->h, 0, self->len, PEERDIRECT_EXPORT_RDWR, &id);
	ASSERT_LE(0, d);
	pd_fill(pattern, sizeof(pattern), 0xc0de);
	if (by == BY_READ) {
		ASSERT_EQ(0, pipe(p));
		ASSERT_EQ((ssize_t)sizeof(pattern), write(p[1], pattern, sizeof(pattern)));
	}
	holder = hold_reservation(self->fd, d, id, pd_pinned_flags(&self->q), &imp);
	ASSERT_LT(0, holder) TH_LOG("hold_reservation: %d", holder);
	victim = start_victim(d, by, p[0]);
	ASSERT_LT(0, victim);
	EXPECT_EQ(0, victim_waits(victim, touch_syscall(by), usr1));
	if (usr1) {
		/* It polls, under the mmap lock for futex: a few percent. */
		snprintf(dir, sizeof(dir), "/proc/%d", (int)victim);
		cpu = cpu_ms_in_half_a_second(dir, &wall);
		EXPECT_GT(wall / 2, cpu) TH_LOG("%lld ms of CPU in %lld ms of polling", cpu, wall);
	}
	let_go(holder);
	if (pd_reap_within(victim, &status, 2000) < 0)
		let_go(victim);
	EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
		TH_LOG("the victim ended with status %#x", status);
	ASSERT_EQ(0, read_back(d, got, sizeof(got)));
	memcpy(&word, got, sizeof(word));
	if (by == BY_FUTEX) {
		EXPECT_EQ(1, word);
	} else {
		EXPECT_EQ(0, memcmp(pattern, got, sizeof(pattern)));
	}
	if (p[0] >= 0) {
		close(p[0]);
		close(p[1]);
	}
	close(imp);
	close(d);
}

TEST_F(exp, a_fault_that_may_not_be_retried_completes_when_the_holder_lets_go)
{
	completes_when_let_go(_metadata, self, BY_FUTEX, false);
}

TEST_F(exp, a_fault_that_may_not_be_retried_polls_to_completion_with_a_signal_pending)
{
	completes_when_let_go(_metadata, self, BY_FUTEX, true);
}

TEST_F(exp, a_kernel_access_polls_to_completion_with_a_signal_pending)
{
	completes_when_let_go(_metadata, self, BY_READ, true);
}

/*
 * The retry of a kernel access that finds the reservation taken again.
 * A process of three threads: V reads from a pipe into a mapping of
 * export 1, F's futex faults (without retry, under the mmap lock) on a
 * mapping of export 2 (of another allocation, so another reservation),
 * M maps.  Children hold each export's
 * reservation (H1, H2), and a second holder of export 1 (H1b) queues
 * behind V.  Then, in order:
 *   V waits for H1 (first try, no mmap lock held)
 *   H1b queues for export 1, behind V
 *   F waits for H2 under the mmap lock; M queues for it as a writer
 *   H1 lets go: V takes and drops the lock and retries, and its retry
 *     queues for the mmap lock behind M (state D); H1b holds export 1
 *   H2 lets go: F ends, M maps, V's retry finds export 1 held by H1b
 *     and waits for it (state S) under the mmap lock, so M's second
 *     mmap() queues behind V (state D).
 * That last wait is the one with FAULT_FLAG_TRIED: on x86 a fault from
 * kernel mode takes no per-VMA lock (6.1 has none; later kernels send it
 * to the mmap lock), so only the retry waits in the queue holding it.
 */
enum { RV_V, RV_F, RV_M, RV_N };
#define RV_UNSET	(-100LL)

struct retry_victim {
	volatile pid_t tid[RV_N];
	volatile int go[RV_N];
	volatile long long mmap_ms[2];	/* M's mmap()s: behind F, then behind V */
	volatile ssize_t got;		/* V's read() */
	unsigned char *m1, *m2;
	int pipe;
};

static struct retry_victim *rv;

static void rv_go_wait(int i, int v)
{
	while (rv->go[i] < v)
		usleep(1000);
}

static void *rv_thread(void *arg)
{
	int i = (int)(intptr_t)arg;
	unsigned int word = 0;
	long long t0;

	rv->tid[i] = syscall(SYS_gettid);
	rv_go_wait(i, 1);
	switch (i) {
	case RV_V:
		rv->got = read(rv->pipe, rv->m1, 4096);
		break;
	case RV_F:
		syscall(SYS_futex, &word, FUTEX_WAKE_OP_PRIVATE, 1, 1, rv->m2,
			FUTEX_OP(FUTEX_OP_SET, 1, FUTEX_OP_CMP_EQ, 0));
		break;
	default:
		/* Mapped only: V's retry waits under the mmap lock, which an
		 * munmap() would wait for. */
		t0 = pd_now_ms();
		rv->mmap_ms[0] = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) ==
				 MAP_FAILED ? -1 : pd_now_ms() - t0;
		rv_go_wait(i, 2);
		t0 = pd_now_ms();
		rv->mmap_ms[1] = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) ==
				 MAP_FAILED ? -1 : pd_now_ms() - t0;
	}
	return NULL;
}

/* The victim process: exits 0 when V read the whole page. */
static pid_t start_retry_victim(int d1, int d2, int pipe)
{
	struct sigaction sa = { .sa_handler = on_usr1 };
	pthread_t th[RV_N];
	pid_t pid = pd_fork_child();
	int i;

	if (pid)
		return pid;
	rv->pipe = pipe;
	rv->m1 = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, d1, 0);
	rv->m2 = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, d2, 0);
	if (rv->m1 == MAP_FAILED || rv->m2 == MAP_FAILED || sigaction(SIGUSR1, &sa, NULL))
		_exit(2);
	for (i = 0; i < RV_N; i++)
		if (pthread_create(&th[i], NULL, rv_thread, (void *)(intptr_t)i))
			_exit(2);
	for (i = 0; i < RV_N; i++)
		pthread_join(th[i], NULL);
	_exit(rv->got == 4096 ? 0 : 1);
}

static void rv_dir(pid_t victim, int i, char *dir, size_t len)
{
	snprintf(dir, len, "/proc/%d/task/%d", (int)victim, (int)rv->tid[i]);
}

/*
 * Brings V to its retry's wait, as above: 0, or the step that failed
 * (for TH_LOG).  hold[2] is the holder V's retry waits for.
 */
static const char *retry_waits(FIXTURE_DATA(exp) *self, int d1, __u64 id1, int d2,
			       __u64 id2, pid_t victim, pid_t hold[3], int imp[3])
{
	__u32 flags = pd_pinned_flags(&self->q);
	char v[64], f[64], m[64], h[64];
	int i, t;

	for (i = 0; i < RV_N; i++)
		for (t = 0; !rv->tid[i]; t++) {
			siginfo_t si = { 0 };

			/* Not reaped here: the caller kills and reaps it. */
			if (t == 200 || (!waitid(P_PID, victim, &si, WEXITED | WNOHANG | WNOWAIT) &&
					 si.si_pid == victim))
				return "the victim never started its threads";
			usleep(10000);
		}
	rv_dir(victim, RV_V, v, sizeof(v));
	rv_dir(victim, RV_F, f, sizeof(f));
	rv_dir(victim, RV_M, m, sizeof(m));
	if (import_to_hold(d1, flags, &imp[2]))
		return "no importer for H1b";
	hold[0] = hold_reservation(self->fd, d1, id1, flags, &imp[0]);
	hold[1] = hold_reservation(self->fd, d2, id2, flags, &imp[1]);
	if (hold[0] < 0 || hold[1] < 0)
		return "a holder never held";
	rv->go[RV_V] = 1;
	if (!task_in(v, SYS_read, "S"))
		return "V never waited for H1";
	hold[2] = pdti_fork_holder(imp[2], HOLD_MS);
	snprintf(h, sizeof(h), "/proc/%d", (int)hold[2]);
	if (hold[2] < 0 || !task_in(h, SYS_ioctl, "D"))
		return "H1b never queued behind V";
	rv->go[RV_F] = 1;
	if (!task_in(f, SYS_futex, "S"))
		return "F never waited for H2";
	rv->go[RV_M] = 1;
	if (!task_in(m, SYS_mmap, "D"))
		return "M's mmap() never queued behind F";
	let_go(hold[0]);
	hold[0] = -1;
	if (!task_in(h, SYS_ioctl, "S"))
		return "H1b never held after V";
	if (!task_in(v, SYS_read, "D"))
		return "V's retry never queued for the mmap lock";
	let_go(hold[1]);
	hold[1] = -1;
	if (!task_in(v, SYS_read, "S"))
		return "V's retry never waited for H1b";
	for (i = 0; rv->mmap_ms[0] == RV_UNSET && i < 200; i++)
		usleep(10000);
	if (rv->mmap_ms[0] < 0)
		return "M's mmap() never ended";
	/* V's retry waits holding the mmap lock: a writer queues behind it. */
	rv->go[RV_M] = 2;
	if (!task_in(m, SYS_mmap, "D"))
		return "M's second mmap() did not queue behind V's retry";
	/* Still queued: not a moment's wait behind something else. */
	usleep(200000);
	if (rv->mmap_ms[1] != RV_UNSET)
		return "M's second mmap() ended while V's retry waited";
	if (!task_in(v, SYS_read, "S"))
		return "V's retry stopped waiting for H1b";
	return NULL;
}

/*
 * @kill: SIGKILL ends the retry's wait at once.  Else a handled SIGUSR1
 * leaves the retry polling, without the mmap lock and without spinning,
 * until H1b lets go; then the read completes.
 */
static void retry_finds_it_held(struct __test_metadata *_metadata,
				FIXTURE_DATA(exp) *self, bool kill_it)
{
	int d1, d2, p[2], imp[3] = { -1, -1, -1 }, status = -1, i;
	pid_t victim, hold[3] = { -1, -1, -1 };
	unsigned char pattern[4096], got[4096];
	long long t0, cpu, wall;
	__u64 id1 = 0, id2 = 0;
	const char *failed;
	int64_t h2;
	char v[64];

	if (!(self->q.features & PEERDIRECT_FEAT_LIST))
		SKIP(return, "no PEERDIRECT_FEAT_LIST");
	rv = mmap(NULL, sizeof(*rv), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, rv);
	memset(rv, 0, sizeof(*rv));
	rv->mmap_ms[0] = rv->mmap_ms[1] = RV_UNSET;
	d1 = pd_export_id(self->fd, self->h, 0, self->len, PEERDIRECT_EXPORT_RDWR, &id1);
	ASSERT_LE(0, d1);
	/* Exports of one allocation share its reservation: another one. */
	h2 = pd_alloc(self->fd, self->len);
	ASSERT_LT(0, h2);
	d2 = pd_export_id(self->fd, h2, 0, self->len, PEERDIRECT_EXPORT_RDWR, &id2);
	ASSERT_LE(0, d2);
	ASSERT_EQ(0, pipe(p));
	pd_fill(pattern, sizeof(pattern), 0x7e57);
	ASSERT_EQ((ssize_t)sizeof(pattern), write(p[1], pattern, sizeof(pattern)));
	victim = start_retry_victim(d1, d2, p[0]);
	ASSERT_LT(0, victim);
	failed = retry_waits(self, d1, id1, d2, id2, victim, hold, imp);
	if (failed) {
		/* All at once: the victim may wait until a holder lets go. */
		kill(victim, SIGKILL);
		for (i = 0; i < 3; i++)
			let_go(hold[i]);
		let_go(victim);
	}
	ASSERT_EQ(NULL, failed) TH_LOG("%s", failed);
	rv_dir(victim, RV_V, v, sizeof(v));

	if (kill_it) {
		t0 = pd_now_ms();
		ASSERT_EQ(0, kill(victim, SIGKILL));
		ASSERT_EQ(victim, waitpid(victim, &status, 0));
		t0 = pd_now_ms() - t0;
		EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
			TH_LOG("the victim ended with status %#x", status);
		EXPECT_GT(1000, t0) TH_LOG("the killed retry took %lld ms to end", t0);
		EXPECT_EQ(1, export_busy(self->fd, id1)) TH_LOG("H1b let go first");
	} else {
		ASSERT_EQ(0, syscall(SYS_tgkill, victim, rv->tid[RV_V], SIGUSR1));
		usleep(100000);
		EXPECT_TRUE(task_waits(v, SYS_read)) TH_LOG("the signal ended the read");
		/* It let go of the mmap lock: the queued mmap() went through. */
		for (t0 = pd_now_ms(); rv->mmap_ms[1] == RV_UNSET && pd_now_ms() - t0 < 2000; )
			usleep(1000);
		EXPECT_LE(0, rv->mmap_ms[1]) TH_LOG("the mmap() behind the retry never ended");
		cpu = cpu_ms_in_half_a_second(v, &wall);
		EXPECT_GT(wall / 2, cpu) TH_LOG("%lld ms of CPU in %lld ms of polling", cpu, wall);
		EXPECT_EQ(0, rv->got) TH_LOG("the read ended before H1b let go");
		let_go(hold[2]);
		hold[2] = -1;
		if (pd_reap_within(victim, &status, 2000) < 0)
			let_go(victim);
		EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
			TH_LOG("the victim ended with status %#x", status);
		ASSERT_EQ(0, read_back(d1, got, sizeof(got)));
		EXPECT_EQ(0, memcmp(pattern, got, sizeof(pattern)));
	}
	let_go(hold[2]);
	for (i = 0; i < 3; i++)
		if (imp[i] >= 0)
			close(imp[i]);
	close(p[0]);
	close(p[1]);
	close(d1);
	close(d2);
	munmap(rv, sizeof(*rv));
}

TEST_F(exp, a_retry_that_finds_the_reservation_held_again_is_killable)
{
	retry_finds_it_held(_metadata, self, true);
}

TEST_F(exp, a_retry_that_finds_the_reservation_held_again_polls_with_a_signal_pending)
{
	retry_finds_it_held(_metadata, self, false);
}

TEST_HARNESS_MAIN
