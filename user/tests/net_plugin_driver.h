/* SPDX-License-Identifier: MIT */
/*
 * Drives libnccl-net-peerdirect.so as NCCL does, through one exported
 * table (ncclNetPlugin_v8, _v9 or _v10): dlopen, the version's own call
 * signatures, connect and accept called again while they return a NULL
 * comm, isend/irecv called again while they return a NULL request.  Every
 * loop is bounded.  For test_net_plugin.
 */
#ifndef PD_TEST_NET_PLUGIN_DRIVER_H
#define PD_TEST_NET_PLUGIN_DRIVER_H

#include <dlfcn.h>
#include <pthread.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nccl_net_abi.h"

#define LOOP_MS 15000	/* a bound no healthy step comes near, loaded or not */

struct net {
	void *dl;
	int ver;
	const ncclNet_v8_t *v8;
	const ncclNet_v9_t *v9;
	const ncclNet_v10_t *v10;
	const ncclNet_v11_t *v11;
	const ncclNet_v12_t *v12;
	void *ctx;		/* v11 and later: init's context */
};

static inline long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* What the plugin logged, for the tests that read its INFO lines. */
static char logbuf[16384];
static size_t loglen;
static pthread_mutex_t loglock = PTHREAD_MUTEX_INITIALIZER;	/* NCCL's logger is thread-safe too */

static void logger(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
		   const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	int n;

	(void)flags;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	pthread_mutex_lock(&loglock);
	n = snprintf(logbuf + loglen, sizeof(logbuf) - loglen, "%d %s\n", (int)level, msg);
	if (n > 0 && (size_t)n < sizeof(logbuf) - loglen)
		loglen += (size_t)n;
	pthread_mutex_unlock(&loglock);
	if (level == NCCL_LOG_WARN || getenv("PD_TEST_NET_VERBOSE"))
		fprintf(stderr, "# [%d] %s:%d %s\n", (int)level, file, line, msg);
}

/* The build's copy, or PD_TEST_NET_PLUGIN's (the VM's payload has the
 * plugin elsewhere than the build tree). */
static inline const char *net_plugin_path(void)
{
	const char *p = getenv("PD_TEST_NET_PLUGIN");

	return p && *p ? p : PD_NET_PLUGIN;
}

static inline int net_open(struct net *n, int ver)
{
	char sym[32];
	void *t;

	memset(n, 0, sizeof(*n));
	n->dl = dlopen(net_plugin_path(), RTLD_NOW | RTLD_LOCAL);
	if (!n->dl) {
		fprintf(stderr, "# dlopen %s: %s\n", net_plugin_path(), dlerror());
		return -ENOENT;
	}
	snprintf(sym, sizeof(sym), "ncclNetPlugin_v%d", ver);
	t = dlsym(n->dl, sym);
	if (!t) {
		dlclose(n->dl);
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

static inline ncclResult_t net_init(struct net *n)
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

/* The device listen and connect use (NCCL's dev argument). */
static int net_dev;

static inline ncclResult_t net_listen(struct net *n, void *handle, void **lcomm)
{
	if (n->v11)
		return n->v11->listen(n->ctx, net_dev, handle, lcomm);
	if (n->v12)
		return n->v12->listen(n->ctx, net_dev, handle, lcomm);
	return n->v8 ? n->v8->listen(net_dev, handle, lcomm) :
	       n->v9 ? n->v9->listen(net_dev, handle, lcomm) : n->v10->listen(net_dev, handle, lcomm);
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
		return n->v10->connect(net_dev, &cfg, handle, comm, &dc);
	if (n->v11)
		return n->v11->connect(n->ctx, net_dev, handle, comm, &dc);
	if (n->v12)
		return n->v12->connect(n->ctx, net_dev, handle, comm, &dc);
	return n->v8 ? n->v8->connect(net_dev, handle, comm, &dc) :
		       n->v9->connect(net_dev, handle, comm, &dc);
}

/* NCCL's loop: call again while the comm is NULL. */
static inline ncclResult_t net_connect(struct net *n, void *handle, void **comm)
{
	long long end = now_ms() + LOOP_MS;
	ncclResult_t r;

	*comm = NULL;
	do
		r = net_connect_once(n, handle, comm);
	while (r == ncclSuccess && !*comm && now_ms() < end);
	return r == ncclSuccess && !*comm ? ncclInProgress : r;
}

static inline ncclResult_t net_accept(struct net *n, void *lcomm, void **comm)
{
	ncclNetDeviceHandle_v8_t *dc = NULL;
	long long end = now_ms() + LOOP_MS;
	ncclResult_t r;

	*comm = NULL;
	do
		r = NET(n, accept, lcomm, comm, &dc);
	while (r == ncclSuccess && !*comm && now_ms() < end);
	return r == ncclSuccess && !*comm ? ncclInProgress : r;
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

static inline ncclResult_t net_irecv_once(struct net *n, void *comm, int cnt, void **data,
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
	/* What NCCL may leave in *request for LL protocols. */
	*req = (void *)NCCL_NET_OPTIONAL_RECV_COMPLETION;
	if (n->v8)
		return n->v8->irecv(comm, cnt, data, isz, tags, mh, req);
	if (n->v9)
		return n->v9->irecv(comm, cnt, data, ssz, tags, mh, req);
	return NET10(n, irecv, comm, cnt, data, ssz, tags, mh, ph, req);
}

/* Call again while the request is NULL ("try again"), as NCCL does. */
static inline ncclResult_t net_isend(struct net *n, void *comm, void *data, size_t size, int tag,
				     void *mh, void **req)
{
	long long end = now_ms() + LOOP_MS;
	ncclResult_t r;

	do
		r = net_isend_once(n, comm, data, size, tag, mh, req);
	while (r == ncclSuccess && !*req && now_ms() < end);
	return r == ncclSuccess && !*req ? ncclInProgress : r;
}

static inline ncclResult_t net_irecv(struct net *n, void *comm, int cnt, void **data,
				     const size_t *sizes, int *tags, void **mh, void **req)
{
	long long end = now_ms() + LOOP_MS;
	ncclResult_t r;

	do
		r = net_irecv_once(n, comm, cnt, data, sizes, tags, mh, req);
	while (r == ncclSuccess && !*req && now_ms() < end);
	return r == ncclSuccess && !*req ? ncclInProgress : r;
}

/* Tests until done; ncclInProgress if the bound passed. */
static inline ncclResult_t net_wait(struct net *n, void *req, int *sizes, long long ms)
{
	long long end = now_ms() + ms;
	ncclResult_t r;
	int done = 0;

	do
		r = NET(n, test, req, &done, sizes);
	while (r == ncclSuccess && !done && now_ms() < end);
	return r == ncclSuccess && !done ? ncclInProgress : r;
}

#endif
