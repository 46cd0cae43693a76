/* SPDX-License-Identifier: MIT */
/*
 * Connected comms and their requests (comm.c, xfer.c, connect.c).
 */
#ifndef PD_NET_COMM_H
#define PD_NET_COMM_H

#include "plugin.h"

/* The handle NCCL carries from listen to connect (NCCL_NET_HANDLE_MAXSIZE
 * bytes).  stage is the connector's own: NCCL calls connect again with the
 * same handle until it returns a comm, so the attempt in progress is kept
 * there (as NCCL's IB plugin does), and looked up, never trusted. */
struct pdn_handle {
	uint32_t magic;			/* PDN_HANDLE_MAGIC */
	uint16_t proto;
	uint16_t addr_len;
	uint32_t listen_id;
	uint32_t nonce;
	void *stage;
	unsigned char addr[PDN_ADDR_MAX];
};
#define PDN_HANDLE_MAGIC 0x50444e31u

/* Connector -> listener, on the listener's listen lane. */
struct pdn_conn_req {
	uint32_t magic;			/* PDN_REQ_MAGIC */
	uint16_t proto;
	uint16_t addr_len;
	uint32_t listen_id;
	uint32_t nonce;
	uint32_t reply_id;		/* the connector's reply lane */
	uint32_t pad;
	unsigned char addr[PDN_ADDR_MAX];
};
#define PDN_REQ_MAGIC 0x50444e52u

/* A header whose sender's isend failed after nothing of it went out: the
 * matching receive fails, the comm stays in step.  size holds the errno. */
#define PDN_HDR_ABORT_MAGIC 0x50444e58u

/* Listener -> connector, on the connector's reply lane. */
struct pdn_ack {
	uint32_t magic;			/* PDN_ACK_MAGIC */
	uint32_t nonce;
	uint32_t comm_id;		/* the recv comm's id: data and control lanes */
	uint32_t status;
};
#define PDN_ACK_MAGIC 0x50444e41u

enum pdn_req_kind { PDN_REQ_SEND = 1, PDN_REQ_RECV, PDN_REQ_FLUSH };

struct pdn_req {
	uint32_t magic;			/* PDN_M_REQ */
	enum pdn_req_kind kind;
	struct pdn_comm *comm;
	struct pdn_req *prev, *next;	/* the comm's live requests */
};

struct pdn_sreq {
	struct pdn_req r;
	int slot;			/* header slot, -1 once freed */
	struct pd_req *hreq, *dreq;
	struct pdn_mr *mh;
	size_t off, size;
	uint32_t tag;
	bool data_posted, hdr_done, data_done;
	struct pdn_sreq *dnext;		/* payload out, header waiting to post */
};

enum pdn_sub_state { PDN_SUB_WAIT, PDN_SUB_MATCHED, PDN_SUB_POSTED, PDN_SUB_DONE };

struct pdn_rreq;
struct pdn_sub {
	struct pdn_rreq *owner;
	struct pdn_mr *mh;
	size_t off, cap, size;
	uint32_t tag;
	enum pdn_sub_state st;
	struct pd_req *dreq;
	struct pdn_sub *next;		/* the comm's queue of unposted subs */
};

struct pdn_rreq {
	struct pdn_req r;
	int n;
	int err;			/* a sender's isend failed (its abort header) */
	struct pdn_sub sub[PDN_MAX_RECVS];
};

struct pdn_send {
	struct pdn_comm c;
	uint32_t remote_id;		/* the recv comm's id at the peer */
	bool remote_id_valid;		/* connected */
	/* connecting */
	struct pd_req *conn_sreq, *conn_rreq;
	bool conn_sent;
	int64_t deadline_ms;
	struct pdn_send *stage_next;	/* attempts in progress (connect.c) */
	void *block;			/* registered: headers, handshake */
	size_t block_len;
	struct pd_mr *block_mr;
	struct pdn_hdr *hdrs;
	struct pdn_conn_req *creq;
	struct pdn_ack *ack;
	int free_slots[PDN_SEND_SLOTS];
	int nfree;
	struct pdn_sreq *defer_head, *defer_tail;
	struct pdn_req live;		/* list head */
};

struct pdn_recv {
	struct pdn_comm c;
	void *block;			/* registered: header slots, the ack */
	size_t block_len;
	struct pd_mr *block_mr;
	struct pdn_hdr *ctrl;
	struct pdn_ack *ack;
	struct pd_req *creq[PDN_CTRL_DEPTH];
	unsigned chead, ctail;		/* posted header receives: [chead, ctail) */
	struct pdn_hdr *unexp;		/* headers no receive waits for yet */
	size_t nunexp, unexp_cap;
	struct pdn_sub *subs, **subs_tail;
	struct pdn_req live;
};

/* Keeps the recv comm's header receives posted, takes the headers in,
 * matches and posts payload receives.  0 or the comm's error. */
int pdn_recv_progress(struct pdn_recv *r);
int pdn_send_create(struct pdn_dev *d, uint64_t peer, struct pdn_send **out);
int pdn_recv_create(struct pdn_dev *d, uint64_t peer, struct pdn_recv **out);
void pdn_send_destroy(struct pdn_send *s);
void pdn_recv_destroy(struct pdn_recv *r);
void pdn_req_link(struct pdn_req *head, struct pdn_req *r);
void pdn_req_unlink(struct pdn_req *r);
/* Frees a request and what it still holds in the library. */
void pdn_req_destroy(struct pdn_req *r);
/* Marks a comm failed (first error wins) and says why at WARN. */
int pdn_comm_fail(struct pdn_comm *c, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#endif /* PD_NET_COMM_H */
