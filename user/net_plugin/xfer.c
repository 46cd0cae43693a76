// SPDX-License-Identifier: MIT
/*
 * isend, irecv, iflush, test.
 *
 * A send posts its payload first (on the data lane of its NCCL tag), then
 * its header (on the receiver's control lane).  Payload first, so that a
 * payload the library refuses (a revoked dma-buf, -ENODEV) has sent
 * nothing: the header then says so (an abort header) and the matching
 * receive fails with the reason instead of waiting.  A receive posts its
 * payload receive only once its header says the exact size.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"

/* NCCL's plugin documentation: a size mismatch is "invalid usage". */
static ncclResult_t comm_error(struct pdn_comm *c)
{
	return c->err == -EINVAL ? ncclInternalError :
	       c->err == -EMSGSIZE ? ncclInvalidUsage : ncclSystemError;
}

/* ---- send ------------------------------------------------------------ */

static int post_header(struct pdn_send *s, struct pdn_sreq *q)
{
	return pd_tsend(s->c.dev->fab, s->block_mr, (size_t)q->slot * sizeof(struct pdn_hdr),
			sizeof(struct pdn_hdr), s->c.peer, pdn_tag(PDN_LANE_CTRL, s->remote_id, 0),
			&q->hreq);
}

/* Headers whose payload went out but whose post met back pressure, in
 * order: the receiver matches headers in the order they arrive. */
static int post_deferred(struct pdn_send *s)
{
	struct pdn_sreq *q;
	int ret;

	while ((q = s->defer_head)) {
		ret = post_header(s, q);
		if (ret == -EAGAIN)
			return 0;
		if (ret)
			return pdn_comm_fail(&s->c, ret, "posting a header: %s", pd_last_error());
		s->defer_head = q->dnext;
		if (!s->defer_head)
			s->defer_tail = NULL;
	}
	return 0;
}

ncclResult_t pdn_isend(void *send_comm, void *data, size_t size, int tag, void *mhandle,
		       void **request)
{
	struct pdn_send *s = send_comm;
	struct pdn_mr *m = NULL;
	struct pdn_sreq *q;
	int ret;

	if (!request)
		return ncclInternalError;
	*request = NULL;
	if (!s || s->c.magic != PDN_M_SEND || !s->remote_id_valid) {
		PDN_WARN("isend: %p is not a connected send comm of this plugin", send_comm);
		return ncclInternalError;
	}
	if (s->c.err)
		return comm_error(&s->c);
	if (size && !(m = pdn_mr_check(mhandle, data, size, "isend")))
		return ncclInternalError;
	if (post_deferred(s))
		return comm_error(&s->c);
	if (s->defer_head || !s->nfree)
		return ncclSuccess;	/* NULL request: NCCL tries again */
	q = calloc(1, sizeof(*q));
	if (!q)
		return ncclSystemError;
	q->r.kind = PDN_REQ_SEND;
	q->r.comm = &s->c;
	q->mh = m;
	q->size = size;
	q->tag = (uint32_t)tag;
	q->data_done = !size;
	q->slot = s->free_slots[--s->nfree];
	s->hdrs[q->slot] = (struct pdn_hdr) { .magic = PDN_HDR_MAGIC, .tag = q->tag, .size = size };
	if (size) {
		q->off = (uintptr_t)data - m->base;
		ret = pd_tsend(s->c.dev->fab, m->mr, q->off, size, s->c.peer,
			       pdn_tag(PDN_LANE_DATA, s->remote_id, q->tag), &q->dreq);
		if (ret == -EAGAIN) {
			s->free_slots[s->nfree++] = q->slot;
			free(q);
			return ncclSuccess;	/* nothing went out: try again */
		}
		if (ret) {
			/* Nothing of it went out: tell the receive why, so
			 * it fails now, and keep the comm in step. */
			PDN_WARN("isend of %zu bytes (tag %d) on %s memory: %s", size, tag,
				 m->type == NCCL_PTR_DMABUF ? "dma-buf" : "host", pd_last_error());
			s->hdrs[q->slot] = (struct pdn_hdr) {
				.magic = PDN_HDR_ABORT_MAGIC, .tag = q->tag, .size = (uint64_t)-ret,
			};
			q->dreq = NULL;
			/* A send freed unfinished may be cancelled: wait for
			 * this small one (an error path; bounded). */
			if (post_header(s, q) == 0) {
				if (pd_wait(q->hreq, 2000, NULL))
					pdn_comm_fail(&s->c, -EIO, "the abort header did not go out: %s",
						      pd_last_error());
				pd_req_free(q->hreq);
			} else {
				pdn_comm_fail(&s->c, -EIO, "the abort header could not be posted: %s",
					      pd_last_error());
			}
			s->free_slots[s->nfree++] = q->slot;
			free(q);
			return pdn_result(ret) == ncclInternalError ? ncclInternalError : ncclSystemError;
		}
	}
	ret = post_header(s, q);
	if (ret == -EAGAIN) {
		q->hreq = NULL;
		if (s->defer_tail)
			s->defer_tail->dnext = q;
		else
			s->defer_head = q;
		s->defer_tail = q;
	} else if (ret) {
		pdn_req_link(&s->live, &q->r);
		q->r.magic = PDN_M_REQ;
		pdn_comm_fail(&s->c, ret, "posting a header: %s", pd_last_error());
		return comm_error(&s->c);
	}
	q->r.magic = PDN_M_REQ;
	pdn_req_link(&s->live, &q->r);
	*request = q;
	return ncclSuccess;
}

static ncclResult_t test_send(struct pdn_sreq *q, int *done, int *sizes)
{
	struct pdn_send *s = (struct pdn_send *)q->r.comm;
	size_t bytes;
	int ret;

	if (post_deferred(s) || s->c.err)
		return comm_error(&s->c);
	if (q->dreq) {
		ret = pd_test(q->dreq, &bytes);
		if (ret < 0) {
			pdn_comm_fail(&s->c, ret, "send of %zu bytes (tag %u): %s", q->size, q->tag,
				      pd_last_error());
			return comm_error(&s->c);
		}
		if (ret == 1) {
			pd_req_free(q->dreq);
			q->dreq = NULL;
			q->data_done = true;
		}
	}
	if (q->hreq) {
		ret = pd_test(q->hreq, &bytes);
		if (ret < 0) {
			pdn_comm_fail(&s->c, ret, "header of a %zu-byte send (tag %u): %s", q->size,
				      q->tag, pd_last_error());
			return comm_error(&s->c);
		}
		if (ret == 1) {
			pd_req_free(q->hreq);
			q->hreq = NULL;
			q->hdr_done = true;
			s->free_slots[s->nfree++] = q->slot;
			q->slot = -1;
		}
	}
	if (!q->hdr_done || !q->data_done)
		return ncclSuccess;
	if (sizes)
		sizes[0] = (int)q->size;
	*done = 1;
	pdn_req_destroy(&q->r);
	return ncclSuccess;
}

/* ---- receive --------------------------------------------------------- */

static int unexp_push(struct pdn_recv *r, const struct pdn_hdr *h)
{
	if (r->nunexp == r->unexp_cap) {
		size_t cap = r->unexp_cap ? r->unexp_cap * 2 : 16;
		struct pdn_hdr *p = realloc(r->unexp, cap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		r->unexp = p;
		r->unexp_cap = cap;
	}
	r->unexp[r->nunexp++] = *h;
	return 0;
}

static int take_headers(struct pdn_recv *r)
{
	struct pdn_dev *d = r->c.dev;
	size_t bytes;
	unsigned i;
	int ret;

	/* In the order they were posted: the library matches same-tag
	 * receives in that order, so this is the order of the sends. */
	while (r->chead != r->ctail) {
		i = r->chead % PDN_CTRL_DEPTH;
		ret = pd_test(r->creq[i], &bytes);
		if (ret == 0)
			break;
		if (ret < 0)
			return pdn_comm_fail(&r->c, ret, "header receive: %s", pd_last_error());
		pd_req_free(r->creq[i]);
		r->creq[i] = NULL;
		r->chead++;
		if (bytes != sizeof(struct pdn_hdr) ||
		    (r->ctrl[i].magic != PDN_HDR_MAGIC && r->ctrl[i].magic != PDN_HDR_ABORT_MAGIC))
			return pdn_comm_fail(&r->c, -EPROTO, "a malformed header (%zu bytes, magic %#x)",
					     bytes, r->ctrl[i].magic);
		if (unexp_push(r, &r->ctrl[i]))
			return pdn_comm_fail(&r->c, -ENOMEM, "out of memory for headers");
	}
	while (r->ctail - r->chead < PDN_CTRL_DEPTH) {
		i = r->ctail % PDN_CTRL_DEPTH;
		ret = pd_trecv(d->fab, r->block_mr, i * sizeof(struct pdn_hdr), sizeof(struct pdn_hdr),
			       r->c.peer, pdn_tag(PDN_LANE_CTRL, r->c.id, 0), &r->creq[i]);
		if (ret == -EAGAIN) {
			r->creq[i] = NULL;
			break;
		}
		if (ret) {
			r->creq[i] = NULL;
			return pdn_comm_fail(&r->c, ret, "posting a header receive: %s", pd_last_error());
		}
		r->ctail++;
	}
	return 0;
}

/* Each header goes to the oldest receive waiting with its tag. */
static int match_headers(struct pdn_recv *r)
{
	struct pdn_sub *sub;
	size_t k = 0;

	while (k < r->nunexp) {
		struct pdn_hdr h = r->unexp[k];

		for (sub = r->subs; sub; sub = sub->next)
			if (sub->st == PDN_SUB_WAIT && sub->tag == h.tag)
				break;
		if (!sub) {
			k++;
			continue;
		}
		memmove(&r->unexp[k], &r->unexp[k + 1], (r->nunexp - k - 1) * sizeof(h));
		r->nunexp--;
		if (h.magic == PDN_HDR_ABORT_MAGIC) {
			PDN_WARN("recv comm %u: the peer's isend for tag %u failed before sending (%s): this receive fails, the comm goes on",
				 r->c.id, h.tag, strerror((int)h.size));
			sub->owner->err = -ECONNABORTED;
			sub->size = 0;
			sub->st = PDN_SUB_DONE;
			continue;
		}
		if (h.size > sub->cap)
			return pdn_comm_fail(&r->c, -EMSGSIZE,
					     "a message of %llu bytes (tag %u) for a receive of %zu: NCCL's receive must be at least the send",
					     (unsigned long long)h.size, h.tag, sub->cap);
		sub->size = h.size;
		sub->st = PDN_SUB_MATCHED;
	}
	return 0;
}

/* Matched receives, in order: same-tag payloads must be posted in the
 * order their headers came. */
static int post_payloads(struct pdn_recv *r)
{
	struct pdn_sub **pp = &r->subs, *sub;
	int ret = 0;

	while ((sub = *pp)) {
		if (sub->st == PDN_SUB_WAIT) {
			pp = &sub->next;
			continue;
		}
		if (sub->st == PDN_SUB_MATCHED) {
			if (!sub->size) {
				sub->st = PDN_SUB_DONE;
			} else {
				ret = pd_trecv(r->c.dev->fab, sub->mh->mr, sub->off, sub->size, r->c.peer,
					       pdn_tag(PDN_LANE_DATA, r->c.id, sub->tag), &sub->dreq);
				if (ret == -EAGAIN) {
					sub->dreq = NULL;
					ret = 0;
					break;
				}
				if (ret) {
					/* Its payload stays on the wire: a later
					 * receive of the tag would take it. */
					sub->dreq = NULL;
					ret = pdn_comm_fail(&r->c, ret, "receive of %zu bytes (tag %u) on %s memory: %s",
							    sub->size, sub->tag,
							    sub->mh->type == NCCL_PTR_DMABUF ? "dma-buf" : "host",
							    pd_last_error());
					break;
				}
				sub->st = PDN_SUB_POSTED;
			}
		}
		*pp = sub->next;
		sub->next = NULL;
	}
	r->subs_tail = &r->subs;
	while (*r->subs_tail)
		r->subs_tail = &(*r->subs_tail)->next;
	return ret;
}

int pdn_recv_progress(struct pdn_recv *r)
{
	int ret;

	if (r->c.err)
		return r->c.err;
	if ((ret = take_headers(r)) || (ret = match_headers(r)) || (ret = post_payloads(r)))
		return ret;
	return 0;
}

ncclResult_t pdn_irecv(void *recv_comm, int n, void **data, const size_t *sizes, const int *tags,
		       void **mhandles, void **request)
{
	struct pdn_recv *r = recv_comm;
	struct pdn_rreq *q;
	struct pdn_mr *m;
	int i;

	if (!request)
		return ncclInternalError;
	*request = NULL;	/* NCCL may pass NCCL_NET_OPTIONAL_RECV_COMPLETION in it */
	if (!r || r->c.magic != PDN_M_RECV) {
		PDN_WARN("irecv: %p is not a recv comm of this plugin", recv_comm);
		return ncclInternalError;
	}
	if (n < 1 || n > PDN_MAX_RECVS || !data || !sizes || !tags || !mhandles) {
		PDN_WARN("irecv: %d receives (1..%d) or a NULL array", n, PDN_MAX_RECVS);
		return ncclInternalError;
	}
	if (r->c.err)
		return comm_error(&r->c);
	for (i = 0; i < n; i++)
		if (sizes[i] && !pdn_mr_check(mhandles[i], data[i], sizes[i], "irecv"))
			return ncclInternalError;
	q = calloc(1, sizeof(*q));
	if (!q)
		return ncclSystemError;
	q->r.magic = PDN_M_REQ;
	q->r.kind = PDN_REQ_RECV;
	q->r.comm = &r->c;
	q->n = n;
	for (i = 0; i < n; i++) {
		struct pdn_sub *sub = &q->sub[i];

		m = sizes[i] ? mhandles[i] : NULL;
		*sub = (struct pdn_sub) {
			.owner = q, .mh = m, .off = m ? (uintptr_t)data[i] - m->base : 0,
			.cap = sizes[i], .tag = (uint32_t)tags[i], .st = PDN_SUB_WAIT,
		};
		*r->subs_tail = sub;
		r->subs_tail = &sub->next;
	}
	pdn_req_link(&r->live, &q->r);
	pdn_recv_progress(r);	/* a failure shows in test, with its reason logged */
	*request = q;
	return ncclSuccess;
}

static ncclResult_t test_recv(struct pdn_rreq *q, int *done, int *sizes)
{
	struct pdn_recv *r = (struct pdn_recv *)q->r.comm;
	size_t bytes;
	int i, ret, ndone = 0;

	if (pdn_recv_progress(r))
		return comm_error(&r->c);
	for (i = 0; i < q->n; i++) {
		struct pdn_sub *sub = &q->sub[i];

		if (sub->st == PDN_SUB_POSTED) {
			ret = pd_test(sub->dreq, &bytes);
			if (ret < 0) {
				pdn_comm_fail(&r->c, ret, "receive of %zu bytes (tag %u): %s", sub->size,
					      sub->tag, pd_last_error());
				return comm_error(&r->c);
			}
			if (ret == 1) {
				pd_req_free(sub->dreq);
				sub->dreq = NULL;
				sub->st = PDN_SUB_DONE;
			}
		}
		ndone += sub->st == PDN_SUB_DONE;
	}
	if (ndone < q->n)
		return ncclSuccess;
	if (q->err) {
		pdn_req_destroy(&q->r);
		return ncclRemoteError;
	}
	if (sizes)
		for (i = 0; i < q->n; i++)
			sizes[i] = (int)q->sub[i].size;
	*done = 1;
	pdn_req_destroy(&q->r);
	return ncclSuccess;
}

/* ---- flush and test -------------------------------------------------- */

/*
 * NCCL flushes GPU receives so that the GPU sees the NIC's writes.  Host
 * memory needs nothing (NULL request, as NCCL's own plugins answer).  A
 * dma-buf receive is complete when test says so: on the mapped and bounce
 * paths libpeerdirect has copied it under DMA_BUF_IOCTL_SYNC, on the
 * dmabuf path the provider reported the NIC's writes done, and no device
 * of ours caches them.  So a flush of dma-bufs is a request that completes
 * at its first test.
 */
ncclResult_t pdn_iflush(void *recv_comm, int n, void **data, const int *sizes, void **mhandles,
			void **request)
{
	struct pdn_recv *r = recv_comm;
	struct pdn_req *q;
	bool dmabuf = false;
	int i;

	if (!request)
		return ncclInternalError;
	*request = NULL;
	if (!r || r->c.magic != PDN_M_RECV || n < 1 || n > PDN_MAX_RECVS || !data || !sizes ||
	    !mhandles) {
		PDN_WARN("iflush: not a recv comm of this plugin, or %d buffers (1..%d)", n,
			 PDN_MAX_RECVS);
		return ncclInternalError;
	}
	if (r->c.err)
		return comm_error(&r->c);
	for (i = 0; i < n; i++) {
		struct pdn_mr *m;

		if (sizes[i] <= 0)
			continue;
		m = pdn_mr_check(mhandles[i], data[i], (size_t)sizes[i], "iflush");
		if (!m)
			return ncclInternalError;
		dmabuf |= m->type == NCCL_PTR_DMABUF;
	}
	if (!dmabuf)
		return ncclSuccess;
	q = calloc(1, sizeof(*q));
	if (!q)
		return ncclSystemError;
	q->magic = PDN_M_REQ;
	q->kind = PDN_REQ_FLUSH;
	q->comm = &r->c;
	pdn_req_link(&r->live, q);
	*request = q;
	return ncclSuccess;
}

ncclResult_t pdn_test(void *request, int *done, int *sizes)
{
	struct pdn_req *q = request;

	if (!q || q->magic != PDN_M_REQ || !done) {
		PDN_WARN("test: %p is not a live request of this plugin", request);
		return ncclInternalError;
	}
	*done = 0;
	switch (q->kind) {
	case PDN_REQ_SEND:
		return test_send((struct pdn_sreq *)q, done, sizes);
	case PDN_REQ_RECV:
		return test_recv((struct pdn_rreq *)q, done, sizes);
	case PDN_REQ_FLUSH:
		*done = 1;
		pdn_req_destroy(q);
		return ncclSuccess;
	}
	return ncclInternalError;
}
