// SPDX-License-Identifier: MIT
/*
 * pd-coll launch: who am I, how many are we, and how do we swap addresses.
 *
 *   --np N           fork N local ranks (rank 0 is this process), TCP
 *                    rendezvous on 127.0.0.1 (tests, a quick look)
 *   mpirun (Open MPI: OMPI_COMM_WORLD_SIZE set)
 *                    libmpi is dlopen'ed (no MPI headers or link at build
 *                    time, like nccl-tests' MPI=1 build): MPI_Init and
 *                    MPI_Allgather carry the fabric addresses; the data
 *                    path stays libfabric.  PD_COLL_LIBMPI names the
 *                    library; PD_COLL_NO_MPI=1 skips it.
 *   Slurm, PMI       rank and size from SLURM_PROCID/SLURM_NTASKS,
 *                    PMI_RANK/PMI_SIZE (or OMPI_COMM_WORLD_* when libmpi
 *                    cannot be loaded), addresses over the TCP rendezvous
 *   --rank/--nranks  by hand; they win over the environment
 *
 * The rendezvous is --rendezvous HOST:PORT, else PD_COLL_RENDEZVOUS, else
 * MASTER_ADDR and MASTER_PORT.
 */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <signal.h>
#include <stdbool.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "coll.h"
#include "../listen_port.h"
#include "../tool_args.h"
#include "../tool_cli.h"

static pid_t children[MAX_RANKS];
static int nchildren;

/* ---- TCP rendezvous ---------------------------------------------------- */

static int rdv_allgather(struct boot *b, const void *in, size_t len, void *out)
{
	return pd_rdv_allgather(b->priv, in, len, out);
}

static void rdv_close(struct boot *b)
{
	pd_rdv_close(b->priv);
}

static int boot_rdv(struct boot *b, const char *spec)
{
	char host[256];
	struct pd_rdv *rdv;
	uint16_t port;
	int ret;

	if (!spec) {
		fprintf(stderr, "pd-coll: rank %d of %d: no rendezvous: give --rendezvous HOST:PORT, PD_COLL_RENDEZVOUS or MASTER_ADDR/MASTER_PORT\n",
			b->rank, b->size);
		return -EINVAL;
	}
	if (tool_hostport(TOOL_NAME, "rendezvous", spec, host, sizeof(host), &port))
		return -EINVAL;
	ret = pd_rdv_open(host, port, b->rank, b->size, 300000, &rdv);
	if (ret) {
		fprintf(stderr, "pd-coll: rank %d: rendezvous %s: %s\n", b->rank, spec, pd_last_error());
		return ret;
	}
	b->priv = rdv;
	b->allgather = rdv_allgather;
	b->close = rdv_close;
	snprintf(b->how, sizeof(b->how), "tcp rendezvous %.150s", spec);
	return 0;
}

/* ---- MPI through dlopen ------------------------------------------------ */

struct mpi {
	void *h, *comm, *byte;
	int (*init)(int *, char ***);
	int (*finalize)(void);
	int (*rank)(void *, int *);
	int (*size)(void *, int *);
	int (*allgather)(const void *, int, void *, void *, int, void *, void *);
};

static int mpi_allgather(struct boot *b, const void *in, size_t len, void *out)
{
	struct mpi *m = b->priv;

	if (len > INT32_MAX)
		return -EINVAL;
	return m->allgather(in, (int)len, m->byte, out, (int)len, m->byte, m->comm) ? -EIO : 0;
}

static void mpi_close(struct boot *b)
{
	struct mpi *m = b->priv;

	m->finalize();
	/* Open MPI cannot be unloaded and re-initialised; keep it mapped. */
	free(m);
}

#define SYM(m, f, name) (*(void **)&(m)->f = dlsym((m)->h, name))

static int boot_mpi(struct boot *b, int argc, char **argv)
{
	static const char *const libs[] = { "libmpi.so.40", "libmpi.so" };
	const char *env = getenv("PD_COLL_LIBMPI");
	struct mpi *m = calloc(1, sizeof(*m));
	size_t i;

	if (!m)
		return -ENOMEM;
	/* RTLD_GLOBAL: Open MPI's own plugins resolve libmpi's symbols. */
	m->h = env ? dlopen(env, RTLD_NOW | RTLD_GLOBAL) : NULL;
	for (i = 0; !m->h && i < sizeof(libs) / sizeof(libs[0]); i++)
		m->h = dlopen(libs[i], RTLD_NOW | RTLD_GLOBAL);
	if (!m->h || !SYM(m, init, "MPI_Init") || !SYM(m, finalize, "MPI_Finalize") ||
	    !SYM(m, rank, "MPI_Comm_rank") || !SYM(m, size, "MPI_Comm_size") ||
	    !SYM(m, allgather, "MPI_Allgather") ||
	    !(m->comm = dlsym(m->h, "ompi_mpi_comm_world")) ||
	    !(m->byte = dlsym(m->h, "ompi_mpi_byte"))) {
		fprintf(stderr, "pd-coll: under mpirun but no Open MPI library: %s; using the TCP rendezvous\n",
			m->h ? "missing symbols" : dlerror());
		free(m);
		return -ENOENT;
	}
	if (m->init(&argc, &argv) || m->rank(m->comm, &b->rank) || m->size(m->comm, &b->size)) {
		fprintf(stderr, "pd-coll: MPI_Init failed\n");
		free(m);
		return -EIO;
	}
	b->priv = m;
	if (b->size < 2 || b->size > MAX_RANKS) {
		if (b->rank == 0)
			fprintf(stderr, "pd-coll: mpirun started %d ranks; pd-coll runs 2 to %d\n",
				b->size, MAX_RANKS);
		mpi_close(b);
		b->priv = NULL;
		return -EINVAL;
	}
	b->allgather = mpi_allgather;
	b->close = mpi_close;
	snprintf(b->how, sizeof(b->how), "mpi (dlopen libmpi)");
	return 0;
}

/* ---- local fork --------------------------------------------------------- */

/*
 * 0 when every child exited 0, else the worst exit status.  A rank killed
 * by a signal is named (SIGKILL is what the OOM killer sends).  Once rank 0
 * has stopped on an error (status 1, 3 or 4; 5, wrong elements, is a
 * finished run), a rank still blocked on it gets LINGER_MS to notice
 * before it is killed, so that a failed run ends instead of hanging in
 * waitpid().
 */
#define LINGER_MS 10000
int launch_wait_children(int status)
{
	int i, st, worst = 0, left_ms = LINGER_MS;
	bool linger = status == TOOL_EX_FAIL || status == TOOL_EX_SETUP || status == TOOL_EX_PERM;

	for (i = 0; i < nchildren; i++) {
		pid_t pid = children[i], got;
		bool killed = false;

		while ((got = waitpid(pid, &st, linger && !killed ? WNOHANG : 0)) == 0) {
			if (left_ms <= 0) {
				fprintf(stderr, "pd-coll: rank %d (pid %d) still running %d s after rank 0 failed: killed\n",
					i + 1, (int)pid, LINGER_MS / 1000);
				kill(pid, SIGKILL);
				killed = true;
				continue;
			}
			usleep(50000);
			left_ms -= 50;
		}
		if (got < 0)
			continue;
		if (WIFSIGNALED(st) && !killed)
			fprintf(stderr, "pd-coll: rank %d (pid %d) died of signal %d (%s)%s\n", i + 1, (int)pid,
				WTERMSIG(st), strsignal(WTERMSIG(st)),
				WTERMSIG(st) == SIGKILL ? "; the OOM killer if dmesg says so" : "");
		st = WIFEXITED(st) ? WEXITSTATUS(st) : 3;
		worst = st > worst ? st : worst;
	}
	nchildren = 0;
	return worst;
}

/*
 * The launcher's TERM or INT goes on to its ranks, then ends it as the
 * signal would have (a terminal's ^C reaches them already; kill(1) and a
 * batch system's TERM reach the launcher alone).
 */
static void forward_signal(int sig)
{
	int i;

	for (i = 0; i < nchildren; i++)
		kill(children[i], sig);
	signal(sig, SIG_DFL);
	raise(sig);
}

/*
 * A forked rank ends when its launcher does, however it ends (SIGKILL
 * included, which nothing can forward): the kernel sends it SIGTERM.  The
 * launcher may have died before prctl(): then the rank's parent is no
 * longer it.
 */
static void die_with_launcher(pid_t launcher)
{
	if (prctl(PR_SET_PDEATHSIG, SIGTERM) || getppid() != launcher)
		_exit(TOOL_EX_SETUP);
}

/* 1 if the launcher set both; a value that is not a number is -1, which
 * the range check below refuses, naming the variables. */
static int env_int(const char *a, const char *b, int *ra, int *rb)
{
	const char *x = getenv(a), *y = getenv(b);

	if (!x || !y)
		return 0;
	if (tool_number(x, 0, 1 << 30, ra))
		*ra = -1;
	if (tool_number(y, 0, 1 << 30, rb))
		*rb = -1;
	return 1;
}

int launch(int argc, char **argv, const char *rdv_spec, int rank_opt, int nranks_opt, int np,
	   struct boot *b)
{
	char spec[300];
	const char *how = NULL;
	int r = -1, n = 0, i;
	pid_t launcher;

	memset(b, 0, sizeof(*b));
	if (np > 0) {
		int port = listen_port();

		if (np < 2 || np > MAX_RANKS)
			return -EINVAL;
		if (port < 0) {
			fprintf(stderr, "pd-coll: --np: no free port outside the ephemeral range for the rendezvous; start the ranks with --rendezvous HOST:PORT\n");
			return -EADDRINUSE;
		}
		/* A job of our own, which the ranks we fork inherit: a rank
		 * left over from an earlier run on this port is turned away. */
		if (!getenv("PEERDIRECT_RDV_JOB")) {
			char job[32];

			snprintf(job, sizeof(job), "%llu",
				 ((unsigned long long)getpid() << 32) ^ coll_now_ns());
			setenv("PEERDIRECT_RDV_JOB", job, 1);
		}
		fflush(NULL);
		b->rank = 0;
		b->size = np;
		launcher = getpid();
		for (i = 1; i < np; i++) {
			pid_t pid = fork();

			if (pid < 0)
				return -errno;
			if (pid == 0) {
				nchildren = 0;
				b->rank = i;
				signal(SIGTERM, SIG_DFL);
				signal(SIGINT, SIG_DFL);
				die_with_launcher(launcher);
				break;
			}
			children[nchildren++] = pid;
			if (nchildren == 1) {
				signal(SIGTERM, forward_signal);
				signal(SIGINT, forward_signal);
			}
		}
		snprintf(spec, sizeof(spec), "127.0.0.1:%d", port);
		if (boot_rdv(b, spec))
			return -EIO;
		snprintf(b->how, sizeof(b->how), "--np %d (fork), tcp rendezvous %.100s", np, spec);
		return 0;
	}
	if (getenv("OMPI_COMM_WORLD_SIZE") && !getenv("PD_COLL_NO_MPI") && rank_opt < 0) {
		int ret = boot_mpi(b, argc, argv);

		/* Only a rank count out of range ends it; without libmpi,
		 * or if MPI_Init failed, the TCP rendezvous takes over. */
		if (ret == 0 || ret == -EINVAL)
			return ret;
	}
	if (env_int("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", &r, &n))
		how = "OMPI_COMM_WORLD_RANK/SIZE";
	else if (env_int("SLURM_PROCID", "SLURM_NTASKS", &r, &n))
		how = "SLURM_PROCID/SLURM_NTASKS";
	else if (env_int("PMI_RANK", "PMI_SIZE", &r, &n))
		how = "PMI_RANK/PMI_SIZE";
	if (rank_opt >= 0 || nranks_opt > 0) {
		r = rank_opt;
		n = nranks_opt;
		how = "--rank/--nranks";
	}
	if (n < 2 || n > MAX_RANKS || r < 0 || r >= n) {
		fprintf(stderr, "pd-coll: no rank/size of 2 to 64 ranks (%s gave rank %d of %d): run under mpirun, srun or a PMI launcher, or give --np N, or --rank R --nranks N\n",
			how ? how : "nothing", r, n);
		return -EINVAL;
	}
	b->rank = r;
	b->size = n;
	if (!rdv_spec)
		rdv_spec = getenv("PD_COLL_RENDEZVOUS");
	if (!rdv_spec && getenv("MASTER_ADDR") && getenv("MASTER_PORT")) {
		const char *addr = getenv("MASTER_ADDR");
		bool v6 = strchr(addr, ':') && addr[0] != '[';

		snprintf(spec, sizeof(spec), "%s%s%s:%s", v6 ? "[" : "", addr, v6 ? "]" : "",
			 getenv("MASTER_PORT"));
		rdv_spec = spec;
	}
	if (boot_rdv(b, rdv_spec))
		return -EIO;
	snprintf(spec, sizeof(spec), "%.40s, %.150s", how, b->how);
	snprintf(b->how, sizeof(b->how), "%.199s", spec);
	return 0;
}
