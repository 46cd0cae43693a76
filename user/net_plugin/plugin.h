/* SPDX-License-Identifier: MIT */
/*
 * libnccl-net-peerdirect: NCCL's net plugin ABI over libpeerdirect's
 * public API (peerdirect.h only).  Internal declarations shared by the
 * plugin's files; the version tables (versions.c) adapt NCCL's per-version
 * signatures to the pdn_* calls here, which take size_t sizes.
 *
 * Wire design (Documentation/libpeerdirect.md, "NCCL net plugin"):
 * - One pd_fabric per NCCL device; every comm of the device shares it and
 *   its peers (an address is inserted once, so directed receives match).
 * - Tags: 2 bits of lane, 14 bits of id, 32 bits of NCCL tag (48 bits, the
 *   library's PD_TAG_BITS).  The id is the receiver's: a recv comm's id for
 *   the data and control lanes, a listen comm's for connect requests, a
 *   connecting send comm's for the answer.
 * - Every isend sends a 16-byte header (NCCL tag, size) on the receiver's
 *   control lane, then the payload (if any) on the data lane of its NCCL
 *   tag.  The receiver learns the exact size from the header before it
 *   posts the payload's receive, so NCCL's "receive larger than the send"
 *   works although libpeerdirect needs the exact length of a multi-chunk
 *   message, and a 0-byte send (which libpeerdirect refuses) is a header
 *   alone: nothing is ever written past what was sent.
 * - Headers arrive in send order; each goes to the oldest receive waiting
 *   with its tag, so sends of one tag match receives in order (NCCL's rule)
 *   and a grouped receive's n tags pick their buffers.
 *
 * Threads: a comm and its requests are driven by one thread at a time (as
 * NCCL's proxy does); different comms may be driven from different
 * threads.  Shared state (devices, peers, ids, the log-once set) is under
 * each device's lock or the plugin's.
 */
#ifndef PD_NET_PLUGIN_H
#define PD_NET_PLUGIN_H

#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nccl_net_abi.h"
#include "peerdirect.h"

#define PDN_NAME "peerdirect"
#define PDN_PROTO 1
#define PDN_MAX_DEVS 64		/* a fabric per NIC of the provider (32 EFA on a p5) */
#define PDN_MAX_RECVS 8		/* grouped receives (NCCL's IB plugin's count) */
#define PDN_ID_BITS 14
#define PDN_NIDS (1u << PDN_ID_BITS)
#define PDN_MAX_COMMS 8192	/* half the ids: listens and connects use them too */
#define PDN_CTRL_DEPTH 32	/* header receives kept posted per recv comm */
#define PDN_SEND_SLOTS (NCCL_NET_MAX_REQUESTS * PDN_MAX_RECVS * 2)
#define PDN_ADDR_MAX 96		/* a fabric address, wire header included */
#define PDN_MAX_PEERS 1024

enum pdn_lane { PDN_LANE_DATA = 0, PDN_LANE_CTRL = 1, PDN_LANE_LISTEN = 2, PDN_LANE_REPLY = 3 };

static inline uint64_t pdn_tag(enum pdn_lane lane, uint32_t id, uint32_t low)
{
	return (uint64_t)lane << 46 | (uint64_t)id << 32 | low;
}

/* Object kinds, checked on every entry: NCCL hands back void pointers, and
 * a wrong one must be an error, not a crash. */
enum pdn_magic {
	PDN_M_LISTEN = 0x70644c31, PDN_M_SEND = 0x70645331, PDN_M_RECV = 0x70645231,
	PDN_M_MR = 0x70644d31, PDN_M_REQ = 0x70645131, PDN_M_DEAD = 0x64656164,
};

struct pdn_peer {
	size_t len;
	unsigned char addr[PDN_ADDR_MAX];
	uint64_t id;
};

struct pdn_dev {
	struct pd_fabric *fab;
	char name[64];
	size_t addr_len;
	unsigned char addr[PDN_ADDR_MAX];
	pthread_mutex_t lock;		/* ids, peers */
	uint8_t ids[PDN_NIDS / 8];
	uint32_t next_id;
	size_t npeers, peers_cap;
	struct pdn_peer *peers;
	struct pd_device *pddev;	/* attached for revocation events, or NULL */
	struct pdn_grave *graves;	/* buffers a cancelled receive may still hit */
	/* The fabric's NIC (nic.c): sysfs name, PCI function ("" when on
	 * none: NCCL's topology then takes it as virtual), speed (0 unknown) */
	char nic[64];
	bool nic_rdma;
	char pci_path[PATH_MAX];
	int nic_speed_mbps;
};

/* A registered buffer that had a receive cancelled on it: the provider may
 * still write into it until the fabric closes, so it is freed only then. */
struct pdn_grave {
	struct pdn_grave *next;
	void *buf;
	size_t len;
	struct pd_mr *mr;
};

/* What every comm starts with: regMr takes any of them. */
struct pdn_comm {
	uint32_t magic;
	uint32_t id;
	struct pdn_dev *dev;
	uint64_t peer;
	int err;			/* negative errno once the comm failed */
};

struct pdn_mr {
	uint32_t magic;
	int type;			/* NCCL_PTR_HOST or NCCL_PTR_DMABUF */
	struct pd_mr *mr;
	uintptr_t base;			/* NCCL's address of byte 0 */
	size_t len;
};

/* On the wire: little-endian hosts, as libpeerdirect assumes. */
struct pdn_hdr {
	uint32_t magic;			/* PDN_HDR_MAGIC */
	uint32_t tag;
	uint64_t size;
};
#define PDN_HDR_MAGIC 0x50444e48u

/* Global plugin state (plugin.c). */
struct pdn_state {
	pthread_mutex_t lock;
	bool ready;
	bool trace;			/* NCCL_DEBUG=TRACE: TRACE lines are formatted */
	ncclDebugLogger_t logger;
	int ndevs;
	struct pdn_dev devs[PDN_MAX_DEVS];
	long live;			/* listen/send/recv comms and mrs alive */
	int connect_timeout_ms;
	int speed_mbps;			/* PEERDIRECT_NCCL_SPEED_MBPS; 0: the NIC's */
};
extern struct pdn_state pdn;

/* log.c */
void pdn_log(ncclDebugLogLevel level, unsigned long flags, const char *fn, int line,
	     const char *fmt, ...) __attribute__((format(printf, 5, 6)));
#define PDN_WARN(...) pdn_log(NCCL_LOG_WARN, NCCL_NET, __func__, __LINE__, __VA_ARGS__)
#define PDN_INFO(flags, ...) pdn_log(NCCL_LOG_INFO, (flags), __func__, __LINE__, __VA_ARGS__)
#define PDN_TRACE(...) pdn_log(NCCL_LOG_TRACE, NCCL_NET, __func__, __LINE__, __VA_ARGS__)
/* Says a registration's path and reason at INFO the first time this
 * (type, path, reason) is seen, at TRACE after. */
void pdn_log_registration(struct pdn_dev *d, const struct pdn_mr *m, const char *what);
void pdn_log_reset(void);
/* An errno from libpeerdirect as an NCCL result. */
ncclResult_t pdn_result(int err);

/* plugin.c */
ncclResult_t pdn_init(ncclDebugLogger_t logger);
ncclResult_t pdn_devices(int *ndev);
struct pdn_dev *pdn_dev_get(int dev);
void pdn_fill_props(int dev, ncclNetProperties_v9_t *p);

/* nic.c */
void pdn_nic_locate(struct pdn_dev *d);
bool pdn_nic_loopback(const char *domain);
bool pdn_nic_wanted(const char *spec, const char *name);
int pdn_id_alloc(struct pdn_dev *d, uint32_t *id);
void pdn_id_free(struct pdn_dev *d, uint32_t id);
int pdn_peer_insert(struct pdn_dev *d, const void *addr, size_t len, uint64_t *peer);
void pdn_live(long delta);
int64_t pdn_now_ms(void);
/* Registered plugin-owned memory (headers, handshakes). */
int pdn_buf_alloc(struct pdn_dev *d, size_t len, void **buf, struct pd_mr **mr);
void pdn_buf_free(struct pdn_dev *d, void *buf, size_t len, struct pd_mr *mr);
/* The same, for a buffer a cancelled receive was posted to: kept until the
 * fabric closes. */
void pdn_buf_bury(struct pdn_dev *d, void *buf, size_t len, struct pd_mr *mr);

/* connect.c */
ncclResult_t pdn_listen(int dev, void *handle, void **listen_comm);
ncclResult_t pdn_connect(int dev, void *handle, void **send_comm);
ncclResult_t pdn_accept(void *listen_comm, void **recv_comm);
ncclResult_t pdn_close_listen(void *listen_comm);
/* Connects in progress (each holds a send comm), and their end. */
long pdn_connect_pending(void);
void pdn_connect_abandon_all(void);

/* mr.c */
ncclResult_t pdn_reg_mr(void *comm, void *data, size_t size, int type, void **mhandle);
ncclResult_t pdn_reg_mr_dmabuf(void *comm, void *data, size_t size, int type, uint64_t offset,
			       int fd, void **mhandle);
ncclResult_t pdn_dereg_mr(void *comm, void *mhandle);
/* The handle's registration for [data, data + size), or NULL (logged). */
struct pdn_mr *pdn_mr_check(void *mhandle, const void *data, size_t size, const char *fn);

/* comm.c: the connected comms (comm.h; created by connect.c) */
ncclResult_t pdn_close_send(void *send_comm);
ncclResult_t pdn_close_recv(void *recv_comm);

/* xfer.c */
ncclResult_t pdn_isend(void *send_comm, void *data, size_t size, int tag, void *mhandle,
		       void **request);
ncclResult_t pdn_irecv(void *recv_comm, int n, void **data, const size_t *sizes, const int *tags,
		       void **mhandles, void **request);
ncclResult_t pdn_iflush(void *recv_comm, int n, void **data, const int *sizes, void **mhandles,
			void **request);
ncclResult_t pdn_test(void *request, int *done, int *sizes);

#endif /* PD_NET_PLUGIN_H */
