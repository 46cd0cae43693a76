// SPDX-License-Identifier: MIT
/*
 * listen, connect, accept: the handshake runs over the fabric itself.
 *
 * listen posts a receive from any peer on its listen lane and writes the
 * fabric's address, the lane and a nonce into NCCL's handle.  connect
 * inserts that address, posts a receive for the answer on a reply lane of
 * its own, and sends a request carrying its address and that lane.  accept
 * takes the request, inserts the connector's address, makes the recv comm
 * (its header receives posted) and answers with the comm's id.  Neither
 * side blocks: NCCL calls connect and accept again while they return a
 * NULL comm.  connect gives up after PEERDIRECT_NCCL_CONNECT_TIMEOUT_MS
 * (and the library declares an unreachable listener gone after its peer
 * timeout), so a bad handle fails in bounded time.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "comm.h"

_Static_assert(sizeof(struct pdn_handle) <= NCCL_NET_HANDLE_MAXSIZE,
	       "the handle must fit NCCL's");

struct pdn_listen {
	struct pdn_comm c;
	uint32_t nonce;
	struct pdn_conn_req *buf;	/* registered: the request lands here */
	struct pd_mr *mr;
	struct pd_req *lreq;
	struct pdn_recv *pending;	/* accepted, answer not yet sent */
	struct pd_req *ack_req;
};

/* Connects in progress, so that a handle's stage pointer is looked up
 * here and never dereferenced on trust. */
static struct pdn_send *stages;

static bool stage_find_unlink(struct pdn_send *s, bool unlink)
{
	struct pdn_send **pp;

	for (pp = &stages; *pp; pp = &(*pp)->stage_next)
		if (*pp == s) {
			if (unlink)
				*pp = s->stage_next;
			return true;
		}
	return false;
}

static uint32_t nonce32(void)
{
	uint32_t v;

	if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != sizeof(v))
		v = (uint32_t)pdn_now_ms() ^ (uint32_t)getpid() * 2654435761u;
	return v;
}

static int post_listen(struct pdn_listen *l)
{
	int ret = pd_trecv(l->c.dev->fab, l->mr, 0, sizeof(*l->buf), PD_ANY_PEER,
			   pdn_tag(PDN_LANE_LISTEN, l->c.id, 0), &l->lreq);

	if (ret) {
		l->lreq = NULL;
		PDN_WARN("listen %u: posting the receive for connect requests: %s", l->c.id,
			 pd_last_error());
	}
	return ret;
}

ncclResult_t pdn_listen(int dev, void *handle, void **listen_comm)
{
	struct pdn_dev *d = pdn_dev_get(dev);
	struct pdn_handle *h = handle;
	struct pdn_listen *l;
	int ret;

	if (!d || !h || !listen_comm)
		return ncclInternalError;
	l = calloc(1, sizeof(*l));
	if (!l)
		return ncclSystemError;
	l->c.dev = d;
	l->c.peer = PD_ANY_PEER;
	l->nonce = nonce32();
	ret = pdn_id_alloc(d, &l->c.id);
	if (ret)
		goto fail;
	ret = pdn_buf_alloc(d, sizeof(*l->buf), (void **)&l->buf, &l->mr);
	if (ret)
		goto fail_id;
	ret = post_listen(l);
	if (ret) {
		pdn_buf_free(d, l->buf, sizeof(*l->buf), l->mr);
		goto fail_id;
	}
	memset(h, 0, NCCL_NET_HANDLE_MAXSIZE);
	h->magic = PDN_HANDLE_MAGIC;
	h->proto = PDN_PROTO;
	h->addr_len = (uint16_t)d->addr_len;
	h->listen_id = l->c.id;
	h->nonce = l->nonce;
	memcpy(h->addr, d->addr, d->addr_len);
	l->c.magic = PDN_M_LISTEN;
	pdn_live(1);
	PDN_TRACE("listen %u on %s", l->c.id, d->name);
	*listen_comm = l;
	return ncclSuccess;
fail_id:
	pdn_id_free(d, l->c.id);
fail:
	free(l);
	return pdn_result(ret);
}

/* Ends an attempt that failed: the answer's receive may still be posted,
 * so its block is buried (pdn_send_destroy). */
static ncclResult_t connect_fail(struct pdn_handle *h, struct pdn_send *s, int err)
{
	pthread_mutex_lock(&pdn.lock);
	stage_find_unlink(s, true);
	pthread_mutex_unlock(&pdn.lock);
	h->stage = NULL;
	if (!s->c.err)
		s->c.err = err;
	if (s->conn_sreq)
		pd_req_free(s->conn_sreq);
	if (s->conn_rreq)
		pd_req_free(s->conn_rreq);
	s->conn_sreq = s->conn_rreq = NULL;
	pdn_send_destroy(s);
	return pdn_result(err);
}

static ncclResult_t connect_start(int dev, struct pdn_handle *h, struct pdn_send **out)
{
	struct pdn_dev *d = pdn_dev_get(dev);
	struct pdn_send *s;
	uint64_t peer;
	int ret;

	if (!d)
		return ncclInternalError;
	ret = pdn_peer_insert(d, h->addr, h->addr_len, &peer);
	if (ret) {
		PDN_WARN("connect: the handle's address (%u bytes) was refused: %s", h->addr_len,
			 pd_last_error());
		return pdn_result(ret);
	}
	ret = pdn_send_create(d, peer, &s);
	if (ret)
		return pdn_result(ret);
	*s->creq = (struct pdn_conn_req) {
		.magic = PDN_REQ_MAGIC, .proto = PDN_PROTO, .addr_len = (uint16_t)d->addr_len,
		.listen_id = h->listen_id, .nonce = h->nonce, .reply_id = s->c.id,
	};
	memcpy(s->creq->addr, d->addr, d->addr_len);
	s->deadline_ms = pdn_now_ms() + pdn.connect_timeout_ms;
	pthread_mutex_lock(&pdn.lock);
	s->stage_next = stages;
	stages = s;
	pthread_mutex_unlock(&pdn.lock);
	h->stage = s;
	/* The answer's receive before the request: it cannot arrive first. */
	ret = pd_trecv(d->fab, s->block_mr, (char *)s->ack - (char *)s->block, sizeof(*s->ack), peer,
		       pdn_tag(PDN_LANE_REPLY, s->c.id, 0), &s->conn_rreq);
	if (!ret)
		ret = pd_tsend(d->fab, s->block_mr, (char *)s->creq - (char *)s->block,
			       sizeof(*s->creq), peer, pdn_tag(PDN_LANE_LISTEN, h->listen_id, 0),
			       &s->conn_sreq);
	if (ret) {
		PDN_WARN("connect to listen %u: %s", h->listen_id, pd_last_error());
		return connect_fail(h, s, ret);
	}
	*out = s;
	return ncclSuccess;
}

ncclResult_t pdn_connect(int dev, void *handle, void **send_comm)
{
	struct pdn_handle *h = handle;
	struct pdn_send *s = NULL;
	ncclResult_t res;
	size_t bytes;
	bool known;
	int ret;

	if (!h || !send_comm)
		return ncclInternalError;
	*send_comm = NULL;
	if (h->magic != PDN_HANDLE_MAGIC || h->proto != PDN_PROTO || !h->addr_len ||
	    h->addr_len > PDN_ADDR_MAX) {
		PDN_WARN("connect: not a handle of this plugin (magic %#x, protocol %u, address %u bytes; want %#x, %u, 1..%d)",
			 h->magic, h->proto, h->addr_len, PDN_HANDLE_MAGIC, PDN_PROTO, PDN_ADDR_MAX);
		return ncclInternalError;
	}
	pthread_mutex_lock(&pdn.lock);
	known = h->stage && stage_find_unlink(h->stage, false);
	pthread_mutex_unlock(&pdn.lock);
	if (!known) {
		res = connect_start(dev, h, &s);
		if (res != ncclSuccess)
			return res;
	} else {
		s = h->stage;
	}
	if (s->conn_sreq) {
		ret = pd_test(s->conn_sreq, &bytes);
		if (ret < 0) {
			PDN_WARN("connect to listen %u: sending the request: %s", h->listen_id,
				 pd_last_error());
			return connect_fail(h, s, ret);
		}
		if (ret == 1) {
			pd_req_free(s->conn_sreq);
			s->conn_sreq = NULL;
			s->conn_sent = true;
		}
	}
	if (s->conn_rreq) {
		ret = pd_test(s->conn_rreq, &bytes);
		if (ret < 0) {
			PDN_WARN("connect to listen %u: waiting for the answer: %s", h->listen_id,
				 pd_last_error());
			return connect_fail(h, s, ret);
		}
		if (ret == 1) {
			pd_req_free(s->conn_rreq);
			s->conn_rreq = NULL;
			if (bytes != sizeof(*s->ack) || s->ack->magic != PDN_ACK_MAGIC ||
			    s->ack->nonce != h->nonce || s->ack->status || s->ack->comm_id >= PDN_NIDS) {
				PDN_WARN("connect to listen %u: a malformed answer (%zu bytes, magic %#x, status %u)",
					 h->listen_id, bytes, s->ack->magic, s->ack->status);
				return connect_fail(h, s, -EPROTO);
			}
			s->remote_id = s->ack->comm_id;
			s->remote_id_valid = true;
		}
	}
	/* Answered means the request arrived; its completion follows. */
	if (s->conn_rreq || s->conn_sreq) {
		if (pdn_now_ms() <= s->deadline_ms)
			return ncclSuccess;	/* NULL comm: NCCL calls again */
		PDN_WARN("connect to listen %u: no answer within %d ms (PEERDIRECT_NCCL_CONNECT_TIMEOUT_MS; request %s): is the handle from a live listen of this job?",
			 h->listen_id, pdn.connect_timeout_ms, s->conn_sent ? "sent" : "not yet sent");
		return connect_fail(h, s, -ETIMEDOUT);
	}
	pthread_mutex_lock(&pdn.lock);
	stage_find_unlink(s, true);
	pthread_mutex_unlock(&pdn.lock);
	h->stage = NULL;
	PDN_TRACE("connected: send comm to recv comm %u (peer %llu)", s->remote_id,
		  (unsigned long long)s->c.peer);
	*send_comm = s;
	return ncclSuccess;
}

ncclResult_t pdn_accept(void *listen_comm, void **recv_comm)
{
	struct pdn_listen *l = listen_comm;
	struct pdn_conn_req *q;
	struct pdn_recv *r;
	uint64_t peer;
	size_t bytes;
	int ret;

	if (!l || l->c.magic != PDN_M_LISTEN || !recv_comm) {
		PDN_WARN("accept: %p is not a listen comm of this plugin", listen_comm);
		return ncclInternalError;
	}
	*recv_comm = NULL;
	if (l->pending) {
		ret = pd_test(l->ack_req, &bytes);
		if (ret == 0)
			return ncclSuccess;
		pd_req_free(l->ack_req);
		l->ack_req = NULL;
		r = l->pending;
		l->pending = NULL;
		if (ret < 0) {
			PDN_WARN("accept on listen %u: answering the connector: %s", l->c.id,
				 pd_last_error());
			pdn_recv_destroy(r);
			return pdn_result(ret);
		}
		PDN_TRACE("accepted: recv comm %u (peer %llu)", r->c.id, (unsigned long long)r->c.peer);
		*recv_comm = r;
		return ncclSuccess;
	}
	if (!l->lreq && post_listen(l))
		return ncclSystemError;
	ret = pd_test(l->lreq, &bytes);
	if (ret == 0)
		return ncclSuccess;
	pd_req_free(l->lreq);
	l->lreq = NULL;
	if (ret < 0) {
		PDN_WARN("accept on listen %u: %s", l->c.id, pd_last_error());
		return pdn_result(ret);
	}
	q = l->buf;
	if (bytes != sizeof(*q) || q->magic != PDN_REQ_MAGIC || q->proto != PDN_PROTO ||
	    q->listen_id != l->c.id || q->nonce != l->nonce || !q->addr_len ||
	    q->addr_len > PDN_ADDR_MAX || q->reply_id >= PDN_NIDS) {
		/* A stranger, or a connect meant for an earlier listen with
		 * this id: not this listen's failure. */
		PDN_WARN("accept on listen %u: ignoring a malformed or stale connect request (%zu bytes, magic %#x, listen %u, nonce %s)",
			 l->c.id, bytes, q->magic, q->listen_id, q->nonce == l->nonce ? "ok" : "wrong");
		post_listen(l);
		return ncclSuccess;
	}
	ret = pdn_peer_insert(l->c.dev, q->addr, q->addr_len, &peer);
	if (ret) {
		PDN_WARN("accept on listen %u: the connector's address was refused: %s", l->c.id,
			 pd_last_error());
		post_listen(l);
		return pdn_result(ret);
	}
	ret = pdn_recv_create(l->c.dev, peer, &r);
	if (!ret)
		ret = pdn_recv_progress(r);	/* header receives posted first */
	if (ret) {
		post_listen(l);
		return pdn_result(ret);
	}
	*r->ack = (struct pdn_ack) { .magic = PDN_ACK_MAGIC, .nonce = q->nonce, .comm_id = r->c.id };
	ret = pd_tsend(l->c.dev->fab, r->block_mr, (char *)r->ack - (char *)r->block,
		       sizeof(*r->ack), peer, pdn_tag(PDN_LANE_REPLY, q->reply_id, 0), &l->ack_req);
	post_listen(l);	/* NCCL may connect more than once to one handle */
	if (ret) {
		PDN_WARN("accept on listen %u: answering: %s", l->c.id, pd_last_error());
		pdn_recv_destroy(r);
		return pdn_result(ret);
	}
	l->pending = r;
	return pdn_accept(l, recv_comm);	/* the answer may be out already */
}

ncclResult_t pdn_close_listen(void *listen_comm)
{
	struct pdn_listen *l = listen_comm;
	struct pdn_dev *d;

	if (!l || l->c.magic != PDN_M_LISTEN) {
		PDN_WARN("closeListen: %p is not a listen comm of this plugin", listen_comm);
		return ncclInternalError;
	}
	d = l->c.dev;
	if (l->pending) {
		pd_req_free(l->ack_req);
		pdn_recv_destroy(l->pending);
	}
	if (l->lreq) {
		pd_req_free(l->lreq);
		pdn_buf_bury(d, l->buf, sizeof(*l->buf), l->mr);
	} else {
		pdn_buf_free(d, l->buf, sizeof(*l->buf), l->mr);
	}
	pdn_id_free(d, l->c.id);
	l->c.magic = PDN_M_DEAD;
	free(l);
	pdn_live(-1);
	return ncclSuccess;
}

long pdn_connect_pending(void)
{
	struct pdn_send *s;
	long n = 0;

	pthread_mutex_lock(&pdn.lock);
	for (s = stages; s; s = s->stage_next)
		n++;
	pthread_mutex_unlock(&pdn.lock);
	return n;
}

void pdn_connect_abandon_all(void)
{
	struct pdn_send *s;

	pthread_mutex_lock(&pdn.lock);
	s = stages;
	stages = NULL;
	pthread_mutex_unlock(&pdn.lock);
	while (s) {
		struct pdn_send *next = s->stage_next;

		if (s->conn_sreq)
			pd_req_free(s->conn_sreq);
		if (s->conn_rreq)
			pd_req_free(s->conn_rreq);
		pdn_send_destroy(s);
		s = next;
	}
}
