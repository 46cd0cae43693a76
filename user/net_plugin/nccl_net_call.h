/* SPDX-License-Identifier: MIT */
/*
 * Calling an NCCL net plugin through whichever exported table it has
 * (ncclNetPlugin_v8 ... _v12): each version's own call signatures behind
 * one set of calls.  One call each, no retry loop and no logging: the
 * caller decides how to wait and where WARN lines go.  Shared by
 * test_net_plugin (tests/net_plugin_driver.h) and pd-coll's net lane
 * (tools/coll/net_lane.c), so both drive a plugin as NCCL does.
 */
#ifndef PD_NCCL_NET_CALL_H
#define PD_NCCL_NET_CALL_H

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "nccl_net_abi.h"

struct net {
	void *dl;
	int ver;
	const ncclNet_v8_t *v8;
	const ncclNet_v9_t *v9;
	const ncclNet_v10_t *v10;
	const ncclNet_v11_t *v11;
	const ncclNet_v12_t *v12;
	void *ctx;		/* v11 and later: init's context */
	int dev;		/* the device listen and connect use */
};

/* Calls the same member of whichever table is open (a member whose
 * signature all versions share). */
#define NET(n, fn, ...) \
	((n)->v8 ? (n)->v8->fn(__VA_ARGS__) : (n)->v9 ? (n)->v9->fn(__VA_ARGS__) : \
	 (n)->v10 ? (n)->v10->fn(__VA_ARGS__) : (n)->v11 ? (n)->v11->fn(__VA_ARGS__) : \
	 (n)->v12->fn(__VA_ARGS__))
#define NET_NAME(n) \
	((n)->v8 ? (n)->v8->name : (n)->v9 ? (n)->v9->name : (n)->v10 ? (n)->v10->name : \
	 (n)->v11 ? (n)->v11->name : (n)->v12->name)
/* isend and irecv: v10's signature from v10 on. */
#define NET10(n, fn, ...) \
	((n)->v10 ? (n)->v10->fn(__VA_ARGS__) : (n)->v11 ? (n)->v11->fn(__VA_ARGS__) : \
	 (n)->v12->fn(__VA_ARGS__))

/* The table of version ver in the library at path: 0, or -ENOENT with
 * nothing left open (dlerror() says why when dlopen failed: dl is NULL). */
static inline int net_open_path(struct net *n, const char *path, int ver)
{
	char sym[32];
	void *t;

	memset(n, 0, sizeof(*n));
	n->dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!n->dl)
		return -ENOENT;
	snprintf(sym, sizeof(sym), "ncclNetPlugin_v%d", ver);
	t = dlsym(n->dl, sym);
	if (!t) {
		dlclose(n->dl);
		n->dl = NULL;
		n->ver = -1;	/* loaded, but no such table */
		return -ENOENT;
	}
	n->ver = ver;
	if (ver == 8)
		n->v8 = t;
	else if (ver == 9)
		n->v9 = t;
	else if (ver == 10)
		n->v10 = t;
	else if (ver == 11)
		n->v11 = t;
	else
		n->v12 = t;
	return 0;
}

static inline ncclResult_t net_init_log(struct net *n, ncclDebugLogger_t logger)
{
	ncclNetCommConfig_v11_t cfg = { .trafficClass = -1 };

	if (n->v11)
		return n->v11->init(&n->ctx, 0x5044, &cfg, logger, NULL);
	if (n->v12)
		return n->v12->init(&n->ctx, 0x5044, &cfg, logger, NULL);
	if (n->v10)
		return n->v10->init(logger, NULL);
	return n->v8 ? n->v8->init(logger) : n->v9->init(logger);
}

static inline ncclResult_t net_listen(struct net *n, void *handle, void **lcomm)
{
	if (n->v11)
		return n->v11->listen(n->ctx, n->dev, handle, lcomm);
	if (n->v12)
		return n->v12->listen(n->ctx, n->dev, handle, lcomm);
	return n->v8 ? n->v8->listen(n->dev, handle, lcomm) :
	       n->v9 ? n->v9->listen(n->dev, handle, lcomm) : n->v10->listen(n->dev, handle, lcomm);
}

/* finalize (v11 on), then dlclose's answer. */
static inline int net_close(struct net *n)
{
	if (n->ctx && (n->v11 ? n->v11->finalize(n->ctx) : n->v12->finalize(n->ctx)))
		return -1;
	n->ctx = NULL;
	return dlclose(n->dl);
}

/* The v9 layout (v8's fields have the same names and meaning). */
static inline ncclResult_t net_props(struct net *n, int dev, ncclNetProperties_v9_t *p)
{
	ncclNetProperties_v8_t p8;
	ncclResult_t r;

	memset(p, 0, sizeof(*p));
	if (n->v9 || n->v10)
		return n->v9 ? n->v9->getProperties(dev, p) : n->v10->getProperties(dev, p);
	if (n->v11) {
		ncclNetProperties_v11_t p11;

		r = n->v11->getProperties(dev, &p11);
		memcpy(p, &p11, sizeof(*p));	/* v11 appends to v9 */
		return r;
	}
	if (n->v12) {
		ncclNetProperties_v12_t p12;

		r = n->v12->getProperties(dev, &p12);
		*p = (ncclNetProperties_v9_t) {
			.name = p12.name, .pciPath = p12.pciPath, .guid = p12.guid,
			.ptrSupport = p12.ptrSupport, .regIsGlobal = p12.regIsGlobal,
			.speed = p12.speed, .port = p12.port, .latency = p12.latency,
			.maxComms = p12.maxComms, .maxRecvs = p12.maxRecvs,
			.netDeviceType = p12.netDeviceType, .vProps.ndevs = p12.vProps.ndevs,
			.vProps.devs[0] = p12.vProps.devs[0], .maxP2pBytes = p12.maxP2pBytes,
			.maxCollBytes = p12.maxCollBytes,
		};
		return r;
	}
	r = n->v8->getProperties(dev, &p8);
	*p = (ncclNetProperties_v9_t) {
		.name = p8.name, .pciPath = p8.pciPath, .guid = p8.guid, .ptrSupport = p8.ptrSupport,
		.regIsGlobal = p8.regIsGlobal, .speed = p8.speed, .port = p8.port,
		.latency = p8.latency, .maxComms = p8.maxComms, .maxRecvs = p8.maxRecvs,
	};
	return r;
}

static inline ncclResult_t net_connect_once(struct net *n, void *handle, void **comm)
{
	ncclNetDeviceHandle_v8_t *dc = NULL;
	ncclNetCommConfig_v10_t cfg = { .trafficClass = -1 };

	if (n->v10)
		return n->v10->connect(n->dev, &cfg, handle, comm, &dc);
	if (n->v11)
		return n->v11->connect(n->ctx, n->dev, handle, comm, &dc);
	if (n->v12)
		return n->v12->connect(n->ctx, n->dev, handle, comm, &dc);
	return n->v8 ? n->v8->connect(n->dev, handle, comm, &dc) :
		       n->v9->connect(n->dev, handle, comm, &dc);
}

static inline ncclResult_t net_isend_once(struct net *n, void *comm, void *data, size_t size,
					  int tag, void *mh, void **req)
{
	if (n->v8)
		return n->v8->isend(comm, data, (int)size, tag, mh, req);
	if (n->v9)
		return n->v9->isend(comm, data, size, tag, mh, req);
	return NET10(n, isend, comm, data, size, tag, mh, NULL, req);
}

/* One irecv as posted, *req as the caller left it. */
static inline ncclResult_t net_irecv_call(struct net *n, void *comm, int cnt, void **data,
					  const size_t *sizes, int *tags, void **mh, void **req)
{
	int isz[8];
	size_t ssz[8];
	void *ph[8] = { 0 };
	int i;

	for (i = 0; i < cnt && i < 8; i++) {
		isz[i] = (int)sizes[i];
		ssz[i] = sizes[i];
	}
	if (n->v8)
		return n->v8->irecv(comm, cnt, data, isz, tags, mh, req);
	if (n->v9)
		return n->v9->irecv(comm, cnt, data, ssz, tags, mh, req);
	return NET10(n, irecv, comm, cnt, data, ssz, tags, mh, ph, req);
}

/* As NCCL may call it for LL protocols: the completion optional. */
static inline ncclResult_t net_irecv_once(struct net *n, void *comm, int cnt, void **data,
					  const size_t *sizes, int *tags, void **mh, void **req)
{
	*req = (void *)NCCL_NET_OPTIONAL_RECV_COMPLETION;
	return net_irecv_call(n, comm, cnt, data, sizes, tags, mh, req);
}

#endif
