// SPDX-License-Identifier: MIT
/*
 * The exported tables, ncclNetPlugin_v8 to _v12: NCCL looks up the newest
 * it knows.  Each adapts its version's signatures to the pdn_* calls
 * (size_t sizes); the semantics are the same in all of them.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "plugin.h"

#define EXPORT __attribute__((visibility("default")))

/* ---- shared by every version ----------------------------------------- */

static ncclResult_t devices(int *ndev)
{
	return pdn_devices(ndev);
}

static ncclResult_t listen_(int dev, void *handle, void **listen_comm)
{
	return pdn_listen(dev, handle, listen_comm);
}

static ncclResult_t accept_(void *listen_comm, void **recv_comm,
			    ncclNetDeviceHandle_v8_t **recv_dev_comm)
{
	(void)recv_dev_comm;	/* no device offload (netDeviceType HOST) */
	return pdn_accept(listen_comm, recv_comm);
}

static ncclResult_t connect_v8(int dev, void *handle, void **send_comm,
			       ncclNetDeviceHandle_v8_t **send_dev_comm)
{
	(void)send_dev_comm;
	return pdn_connect(dev, handle, send_comm);
}

static ncclResult_t iflush(void *recv_comm, int n, void **data, int *sizes, void **mhandles,
			   void **request)
{
	return pdn_iflush(recv_comm, n, data, sizes, mhandles, request);
}

static ncclResult_t close_listen(void *c)
{
	return pdn_close_listen(c);
}

static ncclResult_t init_v8(ncclDebugLogger_t logger)
{
	return pdn_init(logger);
}

static ncclResult_t props_v9(int dev, ncclNetProperties_v9_t *props)
{
	if (!props || !pdn_dev_get(dev))
		return ncclInternalError;
	pdn_fill_props(dev, props);
	return ncclSuccess;
}

static ncclResult_t isend_v9(void *send_comm, void *data, size_t size, int tag, void *mhandle,
			     void **request)
{
	return pdn_isend(send_comm, data, size, tag, mhandle, request);
}

static ncclResult_t irecv_v9(void *recv_comm, int n, void **data, size_t *sizes, int *tags,
			     void **mhandles, void **request)
{
	return pdn_irecv(recv_comm, n, data, sizes, tags, mhandles, request);
}

/* ---- v8: int sizes, no vProps or size limits ------------------------- */

static ncclResult_t props_v8(int dev, ncclNetProperties_v8_t *props)
{
	ncclNetProperties_v9_t p;

	if (!props || !pdn_dev_get(dev))
		return ncclInternalError;
	pdn_fill_props(dev, &p);
	*props = (ncclNetProperties_v8_t) {
		.name = p.name, .pciPath = p.pciPath, .guid = p.guid, .ptrSupport = p.ptrSupport,
		.regIsGlobal = p.regIsGlobal, .speed = p.speed, .port = p.port,
		.latency = p.latency, .maxComms = p.maxComms, .maxRecvs = p.maxRecvs,
		.netDeviceType = p.netDeviceType, .netDeviceVersion = p.netDeviceVersion,
	};
	return ncclSuccess;
}

static ncclResult_t isend_v8(void *send_comm, void *data, int size, int tag, void *mhandle,
			     void **request)
{
	if (size < 0) {
		PDN_WARN("isend: size %d", size);
		return ncclInternalError;
	}
	return pdn_isend(send_comm, data, (size_t)size, tag, mhandle, request);
}

static ncclResult_t irecv_v8(void *recv_comm, int n, void **data, int *sizes, int *tags,
			     void **mhandles, void **request)
{
	size_t s[PDN_MAX_RECVS];
	int i;

	if (!request)
		return ncclInternalError;
	if (n < 1 || n > PDN_MAX_RECVS || !sizes) {
		*request = NULL;
		PDN_WARN("irecv: %d receives (1..%d)", n, PDN_MAX_RECVS);
		return ncclInternalError;
	}
	for (i = 0; i < n; i++) {
		if (sizes[i] < 0) {
			*request = NULL;
			PDN_WARN("irecv: size %d", sizes[i]);
			return ncclInternalError;
		}
		s[i] = (size_t)sizes[i];
	}
	return pdn_irecv(recv_comm, n, data, s, tags, mhandles, request);
}

EXPORT const ncclNet_v8_t ncclNetPlugin_v8 = {
	.name = PDN_NAME,
	.init = init_v8,
	.devices = devices,
	.getProperties = props_v8,
	.listen = listen_,
	.connect = connect_v8,
	.accept = accept_,
	.regMr = pdn_reg_mr,
	.regMrDmaBuf = pdn_reg_mr_dmabuf,
	.deregMr = pdn_dereg_mr,
	.isend = isend_v8,
	.irecv = irecv_v8,
	.iflush = iflush,
	.test = pdn_test,
	.closeSend = pdn_close_send,
	.closeRecv = pdn_close_recv,
	.closeListen = close_listen,
	.getDeviceMr = NULL,	/* host-driven only (netDeviceType HOST) */
	.irecvConsumed = NULL,
};

/* ---- v9 -------------------------------------------------------------- */

EXPORT const ncclNet_v9_t ncclNetPlugin_v9 = {
	.name = PDN_NAME,
	.init = init_v8,
	.devices = devices,
	.getProperties = props_v9,
	.listen = listen_,
	.connect = connect_v8,
	.accept = accept_,
	.regMr = pdn_reg_mr,
	.regMrDmaBuf = pdn_reg_mr_dmabuf,
	.deregMr = pdn_dereg_mr,
	.isend = isend_v9,
	.irecv = irecv_v9,
	.iflush = iflush,
	.test = pdn_test,
	.closeSend = pdn_close_send,
	.closeRecv = pdn_close_recv,
	.closeListen = close_listen,
	.getDeviceMr = NULL,
	.irecvConsumed = NULL,
	.makeVDevice = NULL,	/* no NIC fusion: one fabric per device */
};

/* ---- v10: profiler callback, comm config, profiler handles ------------ */

static ncclResult_t init_v10(ncclDebugLogger_t logger, ncclProfilerCallback_t prof)
{
	(void)prof;	/* the plugin records no profiler events */
	return pdn_init(logger);
}

static ncclResult_t connect_v10(int dev, ncclNetCommConfig_v10_t *config, void *handle,
				void **send_comm, ncclNetDeviceHandle_v8_t **send_dev_comm)
{
	(void)config;	/* traffic classes: the provider's default */
	(void)send_dev_comm;
	return pdn_connect(dev, handle, send_comm);
}

static ncclResult_t isend_v10(void *send_comm, void *data, size_t size, int tag, void *mhandle,
			      void *phandle, void **request)
{
	(void)phandle;
	return pdn_isend(send_comm, data, size, tag, mhandle, request);
}

static ncclResult_t irecv_v10(void *recv_comm, int n, void **data, size_t *sizes, int *tags,
			      void **mhandles, void **phandles, void **request)
{
	(void)phandles;
	return pdn_irecv(recv_comm, n, data, sizes, tags, mhandles, request);
}

EXPORT const ncclNet_v10_t ncclNetPlugin_v10 = {
	.name = PDN_NAME,
	.init = init_v10,
	.devices = devices,
	.getProperties = props_v9,
	.listen = listen_,
	.connect = connect_v10,
	.accept = accept_,
	.regMr = pdn_reg_mr,
	.regMrDmaBuf = pdn_reg_mr_dmabuf,
	.deregMr = pdn_dereg_mr,
	.isend = isend_v10,
	.irecv = irecv_v10,
	.iflush = iflush,
	.test = pdn_test,
	.closeSend = pdn_close_send,
	.closeRecv = pdn_close_recv,
	.closeListen = close_listen,
	.getDeviceMr = NULL,
	.irecvConsumed = NULL,
	.makeVDevice = NULL,
};

/* ---- v11 and v12: a context per communicator ------------------------- */

/* The fabric stays the process's (one per device, as before v11): a
 * context only records what its communicator asked for, and counts as
 * alive until finalize, so that unloading frees nothing it may still use. */
struct pdn_ctx {
	uint32_t magic;
	uint64_t comm_id;
	int traffic_class;
};
#define PDN_M_CTX 0x70644331u

static bool ctx_ok(void *ctx, const char *fn)
{
	struct pdn_ctx *c = ctx;

	if (c && c->magic == PDN_M_CTX)
		return true;
	PDN_WARN("%s: %p is not a context from this plugin's init", fn, ctx);
	return false;
}

static ncclResult_t init_v11(void **ctx, uint64_t comm_id, ncclNetCommConfig_v11_t *config,
			     ncclDebugLogger_t logger, ncclProfilerCallback_t prof)
{
	struct pdn_ctx *c;
	ncclResult_t r;

	(void)prof;
	if (!ctx)
		return ncclInternalError;
	*ctx = NULL;
	r = pdn_init(logger);
	if (r != ncclSuccess)
		return r;
	c = calloc(1, sizeof(*c));
	if (!c)
		return ncclSystemError;
	*c = (struct pdn_ctx) {
		.magic = PDN_M_CTX, .comm_id = comm_id,
		.traffic_class = config ? config->trafficClass : -1,
	};
	pdn_live(1);
	PDN_TRACE("context for communicator %#llx (traffic class %d: the provider's default is used)",
		  (unsigned long long)comm_id, c->traffic_class);
	*ctx = c;
	return ncclSuccess;
}

static ncclResult_t finalize_v11(void *ctx)
{
	struct pdn_ctx *c = ctx;

	if (!ctx_ok(ctx, "finalize"))
		return ncclInternalError;
	c->magic = PDN_M_DEAD;
	free(c);
	pdn_live(-1);
	return ncclSuccess;
}

static ncclResult_t listen_v11(void *ctx, int dev, void *handle, void **listen_comm)
{
	if (!ctx_ok(ctx, "listen"))
		return ncclInternalError;
	return pdn_listen(dev, handle, listen_comm);
}

static ncclResult_t connect_v11(void *ctx, int dev, void *handle, void **send_comm,
				ncclNetDeviceHandle_v8_t **send_dev_comm)
{
	(void)send_dev_comm;
	if (!ctx_ok(ctx, "connect"))
		return ncclInternalError;
	return pdn_connect(dev, handle, send_comm);
}

static ncclResult_t props_v11(int dev, ncclNetProperties_v11_t *props)
{
	ncclNetProperties_v9_t p;

	if (!props || !pdn_dev_get(dev))
		return ncclInternalError;
	pdn_fill_props(dev, &p);
	memset(props, 0, sizeof(*props));
	memcpy(props, &p, sizeof(p));	/* v11 appends to v9's layout */
	props->maxMultiRequestSize = 1;	/* no NCCL_NET_MULTI_REQUEST */
	return ncclSuccess;
}

static ncclResult_t props_v12(int dev, ncclNetProperties_v12_t *props)
{
	ncclNetProperties_v11_t p;
	int i;

	if (props_v11(dev, &p) != ncclSuccess)
		return ncclInternalError;
	*props = (ncclNetProperties_v12_t) {
		.name = p.name, .pciPath = p.pciPath, .guid = p.guid, .ptrSupport = p.ptrSupport,
		.regIsGlobal = p.regIsGlobal, .forceFlush = p.forceFlush, .speed = p.speed,
		.port = p.port, .latency = p.latency, .maxComms = p.maxComms,
		.maxRecvs = p.maxRecvs, .netDeviceType = p.netDeviceType,
		.netDeviceVersion = p.netDeviceVersion, .vProps.ndevs = p.vProps.ndevs,
		.maxP2pBytes = p.maxP2pBytes, .maxCollBytes = p.maxCollBytes,
		.maxMultiRequestSize = p.maxMultiRequestSize,
		.railId = NCCL_NET_ID_UNDEF, .planeId = NCCL_NET_ID_UNDEF,
	};
	for (i = 0; i < p.vProps.ndevs; i++)
		props->vProps.devs[i] = p.vProps.devs[i];
	return ncclSuccess;
}

#define V11_COMMON \
	.name = PDN_NAME, \
	.init = init_v11, \
	.devices = devices, \
	.listen = listen_v11, \
	.connect = connect_v11, \
	.accept = accept_, \
	.regMr = pdn_reg_mr, \
	.regMrDmaBuf = pdn_reg_mr_dmabuf, \
	.deregMr = pdn_dereg_mr, \
	.isend = isend_v10, \
	.irecv = irecv_v10, \
	.iflush = iflush, \
	.test = pdn_test, \
	.closeSend = pdn_close_send, \
	.closeRecv = pdn_close_recv, \
	.closeListen = close_listen, \
	.getDeviceMr = NULL, \
	.irecvConsumed = NULL, \
	.makeVDevice = NULL, \
	.finalize = finalize_v11, \
	.setNetAttr = NULL	/* flow hints: one endpoint per device takes none */

EXPORT const ncclNet_v11_t ncclNetPlugin_v11 = {
	V11_COMMON,
	.getProperties = props_v11,
};

EXPORT const ncclNet_v12_t ncclNetPlugin_v12 = {
	V11_COMMON,
	.getProperties = props_v12,
};
