/* SPDX-License-Identifier: MIT */
/*
 * In-process helpers: a fabric that sends to its own address over tcp, a
 * memfd standing in for a dma-buf, a counting DMA_BUF_IOCTL_SYNC stand-in,
 * and a bounded "wait until" that drives progress instead of sleeping.
 */
#ifndef PD_TEST_LOOPBACK_H
#define PD_TEST_LOOPBACK_H

#include <sys/mman.h>
#include <sys/stat.h>

#include <linux/dma-buf.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_tagged.h>

#include "peer_pair.h"
#include "bounce_pool.h"
#include "fabric.h"

static inline int open_loopback(struct pd_fabric_attr *attr, struct pd_fabric **fab,
				uint64_t *self_addr)
{
	char addr[512];
	size_t len = sizeof(addr);

	if (!attr->provider)
		attr->provider = "tcp";
	return pd_fabric_open(attr, fab) ?: pd_fabric_addr(*fab, addr, &len) ?:
	       pd_fabric_insert(*fab, addr, len, self_addr);
}

/* SYNC stand-in: counts brackets (a memfd answers ENOTTY). */
static int sync_count_calls;

static inline int counting_sync(int fd, uint64_t flags)
{
	(void)fd;
	(void)flags;
	__atomic_add_fetch(&sync_count_calls, 1, __ATOMIC_SEQ_CST);
	return 0;
}

static inline struct pd_cache_stats cache_stats(struct pd_fabric *fab)
{
	struct pd_cache_stats st;

	memset(&st, 0, sizeof(st));
	pd_fabric_cache_stats(fab, &st);
	return st;
}

/* Drives fab's progress until cond holds or ms pass; the condition's value. */
#define PROGRESS_UNTIL(fab, ms, cond) ({				\
	int64_t __end = mono_ms() + (ms);				\
	while (!(cond) && mono_ms() < __end)				\
		pd_progress(fab);					\
	(cond);								\
})

/* A raw one-chunk message carrying chunk index i of tag, as a sender that
 * interleaves with others would put it on the wire.  fab's CQ must have
 * nothing else in it; `to` is progressed meanwhile (it accepts the
 * connection). */
static inline int raw_chunk(struct pd_fabric *fab, struct pd_mr *mr, size_t len, uint64_t peer,
			    uint64_t tag, uint32_t i, struct pd_fabric *to)
{
	struct fi_context2 ctx;
	struct fi_cq_tagged_entry ent;
	int64_t end = mono_ms() + WAIT_MS;
	ssize_t ret;

	do {
		ret = fi_tsend(fab->ep, pd_mr_io(mr), len, mr->reg->desc, peer,
			       tag | (uint64_t)i << fab->tag_bits, &ctx);
		if (ret == -FI_EAGAIN) {
			fi_cq_read(fab->cq, &ent, 1);
			pd_progress(to);	/* it accepts the connection */
		}
	} while (ret == -FI_EAGAIN && mono_ms() < end);
	if (ret)
		return (int)ret;
	while ((ret = fi_cq_read(fab->cq, &ent, 1)) == -FI_EAGAIN && mono_ms() < end)
		pd_progress(to);
	return ret == 1 ? 0 : -EIO;
}

#endif
