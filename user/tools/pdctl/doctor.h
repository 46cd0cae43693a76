/* SPDX-License-Identifier: MIT */
/*
 * pdctl doctor, by section: the report (doctor_report.c: the checks and
 * pairs found, printed), the host (doctor_host.c: kernel config, module,
 * device nodes, uapi), the PCI path (doctor_pci.c: NICs, IOMMU, topology),
 * the libraries (doctor_libs.c: rdma-core, libfabric, libpeerdirect,
 * dlopen()ed; static.c stands in for it in the static build) and the
 * command (doctor.c), which runs the checks in order on one struct doctor.
 *
 * Also what pdctl topo takes from the doctor: its NIC list and its
 * per-pair verdict, so that topo and doctor never disagree about a pair.
 */
#ifndef PDCTL_DOCTOR_H
#define PDCTL_DOCTOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "pdctl.h"

/* ---- for pdctl topo ---- */

/* A pair's path, pdctl(8)'s words: verdict_name() */
enum verdict {
	VERDICT_UNKNOWN,	/* not probed, or nothing learned (the zero value) */
	VERDICT_DMABUF,		/* the NIC DMAs device memory */
	VERDICT_MAPPED,		/* the CPU reads the mapping (tcp over a netdev) */
	VERDICT_BOUNCE,		/* staged through host memory */
	VERDICT_NONE,		/* no path at all */
	VERDICT_DENIED,		/* the node cannot be opened: permission */
	VERDICT_UNAVAILABLE,	/* the node cannot be opened: otherwise */
};

const char *verdict_name(enum verdict v);

struct pd_nic_ref {
	char name[64];
	bool rdma;		/* class infiniband, else net */
};

struct pd_verdict {
	enum verdict verdict;
	char reason[640];
};

/* The doctor's NIC list: device-backed ones, and with all the others too. */
int doctor_nics(bool all, struct pd_nic_ref *out, int max);
/* One NIC by name (infiniband first): 0 or -ENODEV. */
int doctor_find_nic(const char *name, struct pd_nic_ref *out);
/* The doctor's verdict on every devs[i] x nics[j] pair, into out[i * nnic + j]. */
void doctor_verdicts(const int *devs, int ndev, const struct pd_nic_ref *nics, int nnic,
		     struct pd_verdict *out);

/* ---- the doctor's own ---- */

#define MAX_NICS	32
#define MAX_CHECKS	512
#define MAX_PAIRS	(MAX_DEVS * MAX_NICS)
#define TEXT		640

enum nic_kind { NIC_RDMA, NIC_NETDEV };

struct nic {
	char name[64];
	enum nic_kind kind;
};

struct dev {
	int idx;
	int fd;			/* -1: not opened */
	int open_errno;		/* 0: opened */
	unsigned long long features;
	bool features_known;	/* from sysfs, else QUERY; unknown: no verdict on cpu_mmap */
};

/* A check's outcome: status_name() */
enum status { STATUS_OK, STATUS_WARN, STATUS_FAIL, STATUS_SKIP };

const char *status_name(enum status s);

struct check {
	const char *check;
	char subject[64];
	enum status status;
	char reason[TEXT];
	char fix[TEXT];
};

struct pair {
	char device[32];
	char nic[64];
	const char *nic_kind;
	enum verdict verdict;
	char reason[TEXT];
	char fix[TEXT];
	char topology[TEXT];
	int ibv_errno;		/* -1: no ibv_reg_dmabuf_mr result */
};

struct ibv_device;
struct ibv_context;
struct ibv_pd;
struct ibv_mr;

/* libibverbs, once loaded (doctor_libs.c) */
struct doctor_verbs {
	void *so;
	bool tried;		/* load_verbs ran */
	bool too_old;		/* loaded, but without ibv_reg_dmabuf_mr */
	char error[TEXT];	/* why not loaded */
	struct ibv_device **(*get_device_list)(int *);
	void (*free_device_list)(struct ibv_device **);
	const char *(*get_device_name)(struct ibv_device *);
	struct ibv_context *(*open_device)(struct ibv_device *);
	int (*close_device)(struct ibv_context *);
	struct ibv_pd *(*alloc_pd)(struct ibv_context *);
	int (*dealloc_pd)(struct ibv_pd *);
	struct ibv_mr *(*reg_dmabuf_mr)(struct ibv_pd *, uint64_t, size_t, uint64_t, int, int);
	int (*dereg_mr)(struct ibv_mr *);
};

/* What the libfabric check learned, for the pairs' verdicts. */
struct doctor_fabric {
	bool loaded, dmabuf;
	uint32_t version;
	char why[TEXT];		/* why not loaded, or why no dma-buf registrations */
	char hmem[TEXT];	/* the providers offering FI_HMEM, space-separated */
};

/*
 * One run of the doctor, passed to each check: the checks and pairs found
 * so far (the report), the roots, and what the library checks learned
 * that later checks use (libfabric before the pairs).
 */
struct doctor {
	struct check checks[MAX_CHECKS];
	int nr_checks;
	struct pair pairs[MAX_PAIRS];
	int nr_pairs;
	const char *procroot;	/* PDCTL_PROC */
	const char *bootroot;	/* PDCTL_BOOT */
	bool no_libs;		/* PDCTL_LIBS=none */
	struct doctor_fabric lf;
	struct doctor_verbs verbs;
};

/* doctor_report.c */
void __attribute__((format(printf, 6, 7)))
add_check(struct doctor *dr, const char *check, const char *subject, enum status status,
	  const char *fix, const char *fmt, ...);
void __attribute__((format(printf, 2, 3))) set_text(char *buf, const char *fmt, ...);
void list_add(char *list, size_t size, size_t *used, const char *word);
int worse(int a, int b);
void doctor_print_human(struct doctor *dr, int ret);
void doctor_print_json(const struct doctor *dr, const char *release, int ret);

/* doctor_host.c */
char *slurp(const char *path);
void check_kernel_config(struct doctor *dr, const char *release);
int check_module(struct doctor *dr);
int check_node(struct doctor *dr, struct dev *d);
void read_features(struct dev *d);
void check_abi(struct doctor *dr, const struct dev *d);
void check_revoke(struct doctor *dr, const struct dev *d);
bool dev_simulated(const struct dev *d);

/* doctor_pci.c */
int add_nics(const char *cls, enum nic_kind kind, bool physical, struct nic *out, int n,
	     int *skipped);
int find_nic(const char *name, struct nic *out);
void check_iommu(struct doctor *dr, const struct dev *devs, int nr);
void topology(const struct dev *d, const struct nic *nic, struct pair *p);

/* doctor_libs.c (static.c: the static build, which loads none) */
/* Whether the libraries may be loaded; why not into why. */
bool libs_usable(const struct doctor *dr, char *why);
/* Without libfabric the library cannot run: no pair has a verdict. */
bool libs_fabric_missing(const struct doctor *dr, struct pair *p);
/* An RDMA pair's verdict from rdma-core and libfabric (verdict unknown so far). */
void libs_pair_rdma(struct doctor *dr, const struct dev *d, const struct nic *nic,
		    struct pair *p);
void libs_check_fabric(struct doctor *dr);
void libs_check_peerdirect(struct doctor *dr, const struct dev *devs, int nr_devs,
			   const struct nic *nics, int nr_nics);
void libs_close(struct doctor *dr);
/* The name of group gid (NSS), or NULL */
const char *group_name(gid_t gid);

#endif /* PDCTL_DOCTOR_H */
