// SPDX-License-Identifier: MIT
/*
 * Connected comms: their registered blocks (headers, handshake), their
 * live requests, failure, and close.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"

void pdn_req_link(struct pdn_req *head, struct pdn_req *r)
{
	r->prev = head->prev;
	r->next = head;
	head->prev->next = r;
	head->prev = r;
}

void pdn_req_unlink(struct pdn_req *r)
{
	r->prev->next = r->next;
	r->next->prev = r->prev;
	r->prev = r->next = r;
}

int pdn_comm_fail(struct pdn_comm *c, int err, const char *fmt, ...)
{
	char msg[768];
	va_list ap;

	if (c->err)
		return c->err;	/* the first failure is the one that explains */
	c->err = err < 0 ? err : -EIO;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	PDN_WARN("%s comm %u (peer %llu) failed: %s", c->magic == PDN_M_SEND ? "send" : "recv",
		 c->id, (unsigned long long)c->peer, msg);
	return c->err;
}

static void send_slot_put(struct pdn_send *s, struct pdn_sreq *q)
{
	if (q->slot >= 0)
		s->free_slots[s->nfree++] = q->slot;
	q->slot = -1;
}

void pdn_req_destroy(struct pdn_req *r)
{
	int i;

	pdn_req_unlink(r);
	r->magic = PDN_M_DEAD;
	if (r->kind == PDN_REQ_SEND) {
		struct pdn_sreq *q = (struct pdn_sreq *)r;
		struct pdn_send *s = (struct pdn_send *)r->comm;

		/* A send still unfinished is cancelled; its payload is the
		 * caller's, its header slot is reused only by this comm. */
		if (q->hreq)
			pd_req_free(q->hreq);
		if (q->dreq)
			pd_req_free(q->dreq);
		send_slot_put(s, q);
	} else if (r->kind == PDN_REQ_RECV) {
		struct pdn_rreq *q = (struct pdn_rreq *)r;
		struct pdn_recv *c = (struct pdn_recv *)r->comm;
		struct pdn_sub **pp;

		for (i = 0; i < q->n; i++) {
			if (q->sub[i].dreq)
				pd_req_free(q->sub[i].dreq);
			/* Out of the comm's queue, if still in it. */
			for (pp = &c->subs; *pp; pp = &(*pp)->next)
				if (*pp == &q->sub[i]) {
					*pp = q->sub[i].next;
					break;
				}
		}
		c->subs_tail = &c->subs;
		while (*c->subs_tail)
			c->subs_tail = &(*c->subs_tail)->next;
	}
	free(r);
}

static void live_init(struct pdn_req *head)
{
	memset(head, 0, sizeof(*head));
	head->prev = head->next = head;
}

static void live_free_all(struct pdn_req *head)
{
	while (head->next != head)
		pdn_req_destroy(head->next);
}

int pdn_send_create(struct pdn_dev *d, uint64_t peer, struct pdn_send **out)
{
	struct pdn_send *s = calloc(1, sizeof(*s));
	int ret, i;

	if (!s)
		return -ENOMEM;
	s->c.dev = d;
	s->c.peer = peer;
	ret = pdn_id_alloc(d, &s->c.id);
	if (ret)
		goto fail;
	s->block_len = PDN_SEND_SLOTS * sizeof(struct pdn_hdr) + sizeof(struct pdn_conn_req) +
		       sizeof(struct pdn_ack);
	ret = pdn_buf_alloc(d, s->block_len, &s->block, &s->block_mr);
	if (ret) {
		pdn_id_free(d, s->c.id);
		goto fail;
	}
	s->hdrs = s->block;
	s->creq = (struct pdn_conn_req *)(s->hdrs + PDN_SEND_SLOTS);
	s->ack = (struct pdn_ack *)(s->creq + 1);
	for (i = 0; i < PDN_SEND_SLOTS; i++)
		s->free_slots[i] = PDN_SEND_SLOTS - 1 - i;
	s->nfree = PDN_SEND_SLOTS;
	live_init(&s->live);
	s->c.magic = PDN_M_SEND;
	pdn_live(1);
	*out = s;
	return 0;
fail:
	free(s);
	return ret;
}

/* The handshake's answer may still be posted into the block if it never
 * came: bury the block rather than free it. */
void pdn_send_destroy(struct pdn_send *s)
{
	live_free_all(&s->live);
	if (!s->remote_id_valid)
		pdn_buf_bury(s->c.dev, s->block, s->block_len, s->block_mr);
	else
		pdn_buf_free(s->c.dev, s->block, s->block_len, s->block_mr);
	pdn_id_free(s->c.dev, s->c.id);
	s->c.magic = PDN_M_DEAD;
	free(s);
	pdn_live(-1);
}

ncclResult_t pdn_close_send(void *send_comm)
{
	struct pdn_send *s = send_comm;

	if (!s || s->c.magic != PDN_M_SEND) {
		PDN_WARN("closeSend: %p is not a send comm of this plugin", send_comm);
		return ncclInternalError;
	}
	pdn_send_destroy(s);
	return ncclSuccess;
}

int pdn_recv_create(struct pdn_dev *d, uint64_t peer, struct pdn_recv **out)
{
	struct pdn_recv *r = calloc(1, sizeof(*r));
	int ret;

	if (!r)
		return -ENOMEM;
	r->c.dev = d;
	r->c.peer = peer;
	ret = pdn_id_alloc(d, &r->c.id);
	if (ret)
		goto fail;
	r->block_len = PDN_CTRL_DEPTH * sizeof(struct pdn_hdr) + sizeof(struct pdn_ack);
	ret = pdn_buf_alloc(d, r->block_len, &r->block, &r->block_mr);
	if (ret) {
		pdn_id_free(d, r->c.id);
		goto fail;
	}
	r->ctrl = r->block;
	r->ack = (struct pdn_ack *)(r->ctrl + PDN_CTRL_DEPTH);
	r->subs_tail = &r->subs;
	live_init(&r->live);
	r->c.magic = PDN_M_RECV;
	pdn_live(1);
	*out = r;
	return 0;
fail:
	free(r);
	return ret;
}

void pdn_recv_destroy(struct pdn_recv *r)
{
	bool posted = false;
	unsigned i;

	live_free_all(&r->live);
	for (i = 0; i < PDN_CTRL_DEPTH; i++)
		if (r->creq[i]) {
			pd_req_free(r->creq[i]);
			posted = true;
		}
	/* Header receives were cancelled: the provider may still be writing
	 * one, so the block stays until the fabric closes. */
	if (posted)
		pdn_buf_bury(r->c.dev, r->block, r->block_len, r->block_mr);
	else
		pdn_buf_free(r->c.dev, r->block, r->block_len, r->block_mr);
	free(r->unexp);
	pdn_id_free(r->c.dev, r->c.id);
	r->c.magic = PDN_M_DEAD;
	free(r);
	pdn_live(-1);
}

ncclResult_t pdn_close_recv(void *recv_comm)
{
	struct pdn_recv *r = recv_comm;

	if (!r || r->c.magic != PDN_M_RECV) {
		PDN_WARN("closeRecv: %p is not a recv comm of this plugin", recv_comm);
		return ncclInternalError;
	}
	pdn_recv_destroy(r);
	return ncclSuccess;
}
