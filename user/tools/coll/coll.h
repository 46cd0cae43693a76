/* SPDX-License-Identifier: MIT */
/*
 * pd-coll: nccl-tests' collectives over libpeerdirect, with the paths side
 * by side.  Files:
 *   main.c    the run: setup, one table per collective, type and op, teardown
 *   options.c the command line, the sweep of sizes, a provider's defaults
 *   report.c  what rank 0 prints: header, rows, ratios, footers; CSV and plot
 *   launch.c  rank and size (mpirun, Slurm, PMI, flags, --np), bootstrap
 *   lane.c    one fabric per path, pipelined exchange, barrier, waiting
 *   net_lane.c the net path: the same messages through an NCCL net plugin
 *   algo.c    the collectives (ring, chain, pairwise, recursive doubling)
 *   data.c    types, reductions, fill, poison and check
 *   outfile.c the --csv and --plot files, written when the run went ahead
 *   model.c   direct/bounce's bound from the run's own link and copies
 *   stats.h   medians and paired ratios over the timed iterations
 */
#ifndef PD_COLL_H
#define PD_COLL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "peerdirect.h"
#include "stats.h"
#include "../dmabuf_source.h"

#define TOOL_NAME "pd-coll"
#define MAX_RANKS 64
#define MAX_DEPTH 64
#define MAX_PEND (4 * MAX_DEPTH)	/* sends left pending in a run */
#define SLOW_PATH_NS 2000000	/* --test-slow-path */

/* LANE_NET: --net's plugin, after the native ones (the primary path is the first run). */
enum lane_kind { LANE_DIRECT, LANE_BOUNCE, LANE_HOST, LANE_NET, NLANES };
enum coll_kind { C_ALLREDUCE, C_ALLGATHER, C_REDUCESCATTER, C_BROADCAST, C_REDUCE,
		 C_ALLTOALL, C_SENDRECV, NCOLLS };
enum dtype { T_FLOAT, T_BF16, NTYPES };
enum redop { OP_SUM, OP_MIN, OP_MAX, NOPS };
enum algo { ALGO_AUTO, ALGO_RING, ALGO_RD };

extern const char *const lane_names[NLANES];
extern const char *const coll_names[NCOLLS];
extern const char *const type_names[NTYPES];
extern const char *const op_names[NOPS];

/* Out-of-band channel for setup: MPI (dlopen'ed libmpi) or the TCP rendezvous. */
struct boot {
	int rank, size;
	char how[200];
	int (*allgather)(struct boot *b, const void *in, size_t len, void *out);
	void (*close)(struct boot *b);
	void *priv;
};

/* One path: its own fabric, region and peers. */
struct lane {
	enum lane_kind kind;
	struct pd_fabric *fab;
	struct pd_mr *mr, *ctl_mr;
	struct dmabuf_source src;
	uint64_t peer[MAX_RANKS];
	char ctl[MAX_RANKS];	/* host bytes for the barrier */
	struct net_lane *net;	/* the net lane's plugin and comms (no fab, mr) */
};

enum { CORRUPT_POISON = 1, CORRUPT_MISPLACE = 2 };

struct opts {
	size_t minb, maxb, stepb, chunk;	/* chunk: the lanes' wire chunk */
	size_t piece;		/* pieces of a message past small_max: chunk or a provider's */
	double stepf;
	int iters, warmup, check, root, depth, timeout_ms, median;
	int colls[NCOLLS], ncolls, types[NTYPES], ntypes, ops[NOPS], nops;
	bool lanes[NLANES];
	enum algo algo;
	size_t rd_max;		/* allreduce: recursive doubling up to this size */
	bool rd_max_set, chunk_set;
	/* exchanges of at most small_max bytes go in pieces of small_chunk */
	size_t small_chunk, small_max;
	unsigned int small_set;	/* SMALL_CHUNK_SET | SMALL_MAX_SET */
	const char *provider, *memory, *csv, *plot;
	const char *net, *net_memory;	/* --net PLUGIN, --net-memory KIND (host) */
	/* test only: undo one element of a received result (CORRUPT_POISON),
	 * or deliver its first half in place of its second (CORRUPT_MISPLACE) */
	int corrupt;
	int kill_rank;		/* test only: this rank raises SIGKILL before the first collective */
	int max_pend;		/* test only (below MAX_PEND): pending sends before a wait */
	int slow_lane;		/* test only: this lane's timed iterations sleep SLOW_PATH_NS */
};

/* A collective in flight on one lane: where its buffers are. */
struct run {
	const struct opts *o;
	struct lane *l;
	int rank, n;
	enum dtype t;
	enum redop op;
	size_t esz;
	size_t max;		/* region: in [0, max), out [max, 2max), scratch [2max, 3max) */
	uint64_t seq;		/* collective number, part of every tag */
	/* Sends an exchange posted and did not wait for: [off, off + len) is
	 * not written until each completes (pend_wait), and the collective
	 * waits for all of them before it returns. */
	struct pend {
		void *req;	/* lane_post's */
		size_t off, len;
	} pend[MAX_PEND];
	int npend;
};

#define OFF_IN(r)	((size_t)0)
#define OFF_OUT(r)	((r)->max)
#define OFF_SCR(r)	(2 * (r)->max)

/* nccl-tests' buffer geometry of one collective at one size. */
struct geom {
	size_t count;		/* the "count" column: elements per the collective's parameter */
	size_t sendcount, recvcount;
	size_t send_ip_off, recv_ip_off;	/* in elements, times the rank */
	double alg_factor, bus_factor;	/* algbw = bytes * alg_factor / t */
};

/* The lane each ratio compares with: direct for the native ones, host for
 * net (host memory both, unless --net-memory: the API is what differs). */
static inline int coll_ratio_base(int p)
{
	return p == LANE_NET ? LANE_HOST : LANE_DIRECT;
}

static inline bool coll_reducing(enum coll_kind k)
{
	return k == C_ALLREDUCE || k == C_REDUCESCATTER || k == C_REDUCE;
}

static inline bool coll_rooted(enum coll_kind k)
{
	return k == C_BROADCAST || k == C_REDUCE;
}

/* options.c */
struct launch_opts {
	const char *rdv;
	int rank, nranks, np;
};

/* 0, 'h' for --help and --version (printed), -1 after saying what is wrong. */
int coll_parse(int argc, char **argv, struct opts *o, struct launch_opts *lo);
bool coll_in_path(const char *prog);
int coll_sweep_sizes(const struct opts *o, size_t *sizes, int *n);
uint64_t coll_sweep_plan(const struct opts *o, const size_t *sizes, int nsizes);
void coll_provider_defaults(struct opts *o, const char *prov, int nranks, bool shm_without_cma);

/* report.c */
struct rankinfo {
	int32_t pid, ready;	/* ready: its sample buffers are there */
	char host[56];
	uint64_t piece, small_chunk, small_max, rd_max;	/* every rank must agree */
};

struct result {
	double us, alg, bus;
	uint64_t wrong;
	bool checked;
};

/* One size of one table, measured: what its rows print. */
struct table_row {
	enum coll_kind k;
	enum dtype t;
	int op, nranks;
	size_t esz, size;
	const struct geom *g;
	struct result res[NLANES][2];
	const struct coll_ratio *ratio;	/* [NLANES], each lane's base over it (coll_ratio_base) */
};

/* A table's sums so far, for its footer. */
struct table_sums {
	double avg[NLANES], rsize[64], pbus[NLANES][64];
	struct coll_ratio ratio[64][NLANES];
	int nrat, rows;
	uint64_t wrong;
};

/* The run's: nccl-tests' one average line. */
struct run_sums {
	double sum[NLANES];
	int rows;
};

bool report_open_outputs(const struct opts *o, char *datpath, size_t len);
void report_run_header(const char *cmd, const struct opts *o, const struct boot *b,
		       const struct rankinfo *ris, const struct lane *lanes, struct pd_fabric *first);
void report_table_header(const struct opts *o, enum coll_kind k, enum dtype t, int op);
void report_rows(const struct opts *o, const struct table_row *row, const struct lane *lanes,
		 struct table_sums *t);
void report_table_footer(const struct opts *o, enum coll_kind k, enum dtype type, int op,
			 const struct table_sums *t, bool ended, struct run_sums *run);
void report_run_footer(const struct opts *o, const struct run_sums *run, bool ended);
int report_close_outputs(const struct opts *o, bool began, const char *datpath);
void report_drop_outputs(void);

/* main.c */
void coll_copy_bandwidth(const struct lane *l, size_t len, double *to_dev, double *from_dev);

/* model.c: the model of direct against bounce, on this run's inputs */
void model_set_copies(double to_dev, double from_dev);
double model_direct_over_bounce(double link_gbps);	/* NAN without copies measured */
void model_print_article(void);

/* launch.c */
int launch(int argc, char **argv, const char *rdv_spec, int rank_opt, int nranks_opt, int np,
	   struct boot *b);

int launch_wait_children(int status);

/* lane.c */
int lane_open(struct lane *l, enum lane_kind kind, const struct opts *o, struct boot *b,
	      size_t region, int *bad);
void lane_close(struct lane *l);
uint64_t coll_tag(struct run *r, int step, size_t piece);
int lane_barrier(struct run *r);
/* Send [soff, soff+slen) to speer and receive [roff, roff+rlen) from rpeer
 * (either peer -1 for none), in pieces of o->piece (the small chunk
 * for a message of at most small_max) with at most
 * depth of each in flight.  on_recv runs for each received piece, in
 * order; chain: piece i is sent only after piece i was received.  Returns
 * when every piece was received and every send posted: the sends join
 * the run's pending ones (pend_wait). */
enum { SMALL_CHUNK_SET = 1, SMALL_MAX_SET = 2 };

struct xchg {
	int speer, rpeer;
	size_t soff, slen, roff, rlen;
	int step;
	bool chain;
	int (*on_recv)(struct run *r, size_t off, size_t len, void *arg);
	void *arg;
};
int xchg(struct run *r, const struct xchg *x);
/* A lane's messages, whichever carries them: post returns 0, 1 when the
 * plugin said try again (nothing posted), or an error; test 0 (in flight),
 * 1 (done, the request is gone) or an error (gone too); drop cancels. */
int lane_post(struct lane *l, bool send, bool ctl, size_t off, size_t len, int peer,
	      uint64_t tag, void **req);
int lane_test(struct lane *l, void *req);
void lane_drop(struct lane *l, void *req);
int pend_wait(struct run *r, size_t off, size_t len);
void pend_drop(struct run *r);
int cpu_begin(struct run *r);
int cpu_end(struct run *r);
int lane_idle(struct run *r, uint64_t tok, uint64_t end);
uint64_t coll_now_ns(void);

/* net_lane.c */
int net_lane_open(struct lane *l, const struct opts *o, struct boot *b, size_t region, int *bad);
void net_lane_close(struct lane *l);
int net_lane_post(struct lane *l, bool send, bool ctl, size_t off, size_t len, int peer,
		  uint64_t tag, void **req);
int net_lane_test(struct lane *l, void *req);
/* "peerdirect device 0, eth0 (ncclNetPlugin_v12 of PATH), memory host, regMr" */
const char *net_lane_describe(const struct lane *l);
const char *net_lane_name(const struct lane *l);

/* algo.c */
void coll_geom(enum coll_kind k, size_t bytes, size_t esz, int n, struct geom *g);
int coll_run(struct run *r, enum coll_kind k, const struct geom *g, bool in_place);

/* data.c */
void reduce_into(enum dtype t, enum redop op, void *dst, const void *a, const void *b, size_t n);
void store(enum dtype t, void *p, size_t i, float v);
float load(enum dtype t, const void *p, size_t i);
int prepare(struct run *r, enum coll_kind k, const struct geom *g, bool ip, int iter);
int verify(struct run *r, enum coll_kind k, const struct geom *g, bool ip, int iter,
	   uint64_t *wrong);
size_t coll_in_off(struct run *r, const struct geom *g, bool ip);
size_t coll_out_off(struct run *r, const struct geom *g, bool ip);
int corrupt(struct run *r, const struct geom *g, bool ip, int iter);
int local_copy(struct run *r, size_t dst, size_t src, size_t len);

/* outfile.c */
struct outfile {
	FILE *f;		/* in memory until the end */
	char *buf;
	size_t len;
	const char *path, *what;
	bool created;		/* by outfile_open: removed if the run is refused */
};

int outfile_open(struct outfile *of, const char *path, const char *what);
bool outfile_close(struct outfile *of, bool keep);

#endif
