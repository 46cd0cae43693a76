/* SPDX-License-Identifier: MIT */
/*
 * The NCCL net plugin ABI, versions 8 to 12, declared from NCCL's
 * published headers (src/include/plugin/net/net_v8.h ... net_v12.h,
 * src/include/nccl_common.h, src/include/nccl_device/net_device.h, nccl.h)
 * and plugins/net/README.md.  Written here rather than copied: only what
 * the plugin and its conformance test need, in C.  The layouts must match
 * NCCL's byte for byte: test_net_plugin pins their sizes and offsets.
 *
 * Collective (ncclCollNet) tables are not declared: this plugin exports
 * none.
 */
#ifndef PD_NCCL_NET_ABI_H
#define PD_NCCL_NET_ABI_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
	ncclSuccess = 0,
	ncclUnhandledCudaError = 1,
	ncclSystemError = 2,
	ncclInternalError = 3,
	ncclInvalidArgument = 4,
	ncclInvalidUsage = 5,
	ncclRemoteError = 6,
	ncclInProgress = 7,
} ncclResult_t;

typedef enum {
	NCCL_LOG_NONE = 0,
	NCCL_LOG_VERSION = 1,
	NCCL_LOG_WARN = 2,
	NCCL_LOG_INFO = 3,
	NCCL_LOG_ABORT = 4,
	NCCL_LOG_TRACE = 5,
} ncclDebugLogLevel;

/* Subsystem flags of a log line (ncclDebugLogSubSys). */
#define NCCL_INIT 0x1ul
#define NCCL_NET 0x10ul
#define NCCL_REG 0x2000ul
#define NCCL_ALL (~0ul)

typedef void (*ncclDebugLogger_t)(ncclDebugLogLevel level, unsigned long flags,
				  const char *file, int line, const char *fmt, ...);
/* v10's profiler callback; the plugin records no events. */
typedef ncclResult_t (*ncclProfilerCallback_t)(void **eHandle, int type, void *pHandle,
					       int64_t pluginId, void *extData);

#define NCCL_NET_HANDLE_MAXSIZE 128
#define NCCL_PTR_HOST 0x1
#define NCCL_PTR_CUDA 0x2
#define NCCL_PTR_DMABUF 0x4
/* What NCCL may pass in *request to irecv (LL/LL128); a hint only. */
#define NCCL_NET_OPTIONAL_RECV_COMPLETION 0x1
/* Requests per comm NCCL may have in flight (times maxRecvs for sends). */
#define NCCL_NET_MAX_REQUESTS 32
/* NCCL's default cap for a v8 plugin's transfers (MAX_NET_SIZE). */
#define NCCL_MAX_NET_SIZE (1024 * 1024 * 1024L)
#define NCCL_NET_MAX_DEVS_PER_NIC_V10 4	/* NCCL_NET_MAX_DEVS_PER_NIC_V11 */
#define NCCL_NET_MAX_DEVS_PER_NIC_V12 8
#define NCCL_NET_ID_UNDEF -1

typedef enum {
	NCCL_NET_DEVICE_HOST = 0,
	NCCL_NET_DEVICE_UNPACK = 1,
} ncclNetDeviceType;
#define NCCL_NET_DEVICE_INVALID_VERSION 0x0

typedef struct {
	ncclNetDeviceType netDeviceType;
	int netDeviceVersion;
	void *handle;
	size_t size;
	int needsProxyProgress;
} ncclNetDeviceHandle_v8_t;	/* = _v7_t = _v9_t = _v10_t */

typedef struct {
	char *name;
	char *pciPath;
	uint64_t guid;
	int ptrSupport;
	int regIsGlobal;
	int speed;		/* Mbps */
	int port;
	float latency;		/* us */
	int maxComms;
	int maxRecvs;
	ncclNetDeviceType netDeviceType;
	int netDeviceVersion;
} ncclNetProperties_v8_t;

typedef struct {
	int ndevs;
	int devs[NCCL_NET_MAX_DEVS_PER_NIC_V10];
} ncclNetVDeviceProps_v9_t;	/* = _v10_t */

/* v9 inserted forceFlush after regIsGlobal and appended the rest. */
typedef struct {
	char *name;
	char *pciPath;
	uint64_t guid;
	int ptrSupport;
	int regIsGlobal;
	int forceFlush;
	int speed;
	int port;
	float latency;
	int maxComms;
	int maxRecvs;
	ncclNetDeviceType netDeviceType;
	int netDeviceVersion;
	ncclNetVDeviceProps_v9_t vProps;
	size_t maxP2pBytes;
	size_t maxCollBytes;
} ncclNetProperties_v9_t;	/* = _v10_t */

typedef struct {
	int trafficClass;	/* -1: undefined */
} ncclNetCommConfig_v10_t;

typedef struct {
	const char *name;
	ncclResult_t (*init)(ncclDebugLogger_t logFunction);
	ncclResult_t (*devices)(int *ndev);
	ncclResult_t (*getProperties)(int dev, ncclNetProperties_v8_t *props);
	ncclResult_t (*listen)(int dev, void *handle, void **listenComm);
	ncclResult_t (*connect)(int dev, void *handle, void **sendComm,
				ncclNetDeviceHandle_v8_t **sendDevComm);
	ncclResult_t (*accept)(void *listenComm, void **recvComm,
			       ncclNetDeviceHandle_v8_t **recvDevComm);
	ncclResult_t (*regMr)(void *comm, void *data, size_t size, int type, void **mhandle);
	ncclResult_t (*regMrDmaBuf)(void *comm, void *data, size_t size, int type,
				    uint64_t offset, int fd, void **mhandle);
	ncclResult_t (*deregMr)(void *comm, void *mhandle);
	ncclResult_t (*isend)(void *sendComm, void *data, int size, int tag, void *mhandle,
			      void **request);
	ncclResult_t (*irecv)(void *recvComm, int n, void **data, int *sizes, int *tags,
			      void **mhandles, void **request);
	ncclResult_t (*iflush)(void *recvComm, int n, void **data, int *sizes, void **mhandles,
			       void **request);
	ncclResult_t (*test)(void *request, int *done, int *sizes);
	ncclResult_t (*closeSend)(void *sendComm);
	ncclResult_t (*closeRecv)(void *recvComm);
	ncclResult_t (*closeListen)(void *listenComm);
	ncclResult_t (*getDeviceMr)(void *comm, void *mhandle, void **dptr_mhandle);
	ncclResult_t (*irecvConsumed)(void *recvComm, int n, void *request);
} ncclNet_v8_t;

/* v9: size_t sizes in isend/irecv, v9 properties, makeVDevice. */
typedef struct {
	const char *name;
	ncclResult_t (*init)(ncclDebugLogger_t logFunction);
	ncclResult_t (*devices)(int *ndev);
	ncclResult_t (*getProperties)(int dev, ncclNetProperties_v9_t *props);
	ncclResult_t (*listen)(int dev, void *handle, void **listenComm);
	ncclResult_t (*connect)(int dev, void *handle, void **sendComm,
				ncclNetDeviceHandle_v8_t **sendDevComm);
	ncclResult_t (*accept)(void *listenComm, void **recvComm,
			       ncclNetDeviceHandle_v8_t **recvDevComm);
	ncclResult_t (*regMr)(void *comm, void *data, size_t size, int type, void **mhandle);
	ncclResult_t (*regMrDmaBuf)(void *comm, void *data, size_t size, int type,
				    uint64_t offset, int fd, void **mhandle);
	ncclResult_t (*deregMr)(void *comm, void *mhandle);
	ncclResult_t (*isend)(void *sendComm, void *data, size_t size, int tag, void *mhandle,
			      void **request);
	ncclResult_t (*irecv)(void *recvComm, int n, void **data, size_t *sizes, int *tags,
			      void **mhandles, void **request);
	ncclResult_t (*iflush)(void *recvComm, int n, void **data, int *sizes, void **mhandles,
			       void **request);
	ncclResult_t (*test)(void *request, int *done, int *sizes);
	ncclResult_t (*closeSend)(void *sendComm);
	ncclResult_t (*closeRecv)(void *recvComm);
	ncclResult_t (*closeListen)(void *listenComm);
	ncclResult_t (*getDeviceMr)(void *comm, void *mhandle, void **dptr_mhandle);
	ncclResult_t (*irecvConsumed)(void *recvComm, int n, void *request);
	ncclResult_t (*makeVDevice)(int *d, ncclNetVDeviceProps_v9_t *props);
} ncclNet_v9_t;

/* v10: init takes the profiler callback, connect a comm config, isend and
 * irecv profiler handles. */
typedef struct {
	const char *name;
	ncclResult_t (*init)(ncclDebugLogger_t logFunction, ncclProfilerCallback_t profFunction);
	ncclResult_t (*devices)(int *ndev);
	ncclResult_t (*getProperties)(int dev, ncclNetProperties_v9_t *props);
	ncclResult_t (*listen)(int dev, void *handle, void **listenComm);
	ncclResult_t (*connect)(int dev, ncclNetCommConfig_v10_t *config, void *handle,
				void **sendComm, ncclNetDeviceHandle_v8_t **sendDevComm);
	ncclResult_t (*accept)(void *listenComm, void **recvComm,
			       ncclNetDeviceHandle_v8_t **recvDevComm);
	ncclResult_t (*regMr)(void *comm, void *data, size_t size, int type, void **mhandle);
	ncclResult_t (*regMrDmaBuf)(void *comm, void *data, size_t size, int type,
				    uint64_t offset, int fd, void **mhandle);
	ncclResult_t (*deregMr)(void *comm, void *mhandle);
	ncclResult_t (*isend)(void *sendComm, void *data, size_t size, int tag, void *mhandle,
			      void *phandle, void **request);
	ncclResult_t (*irecv)(void *recvComm, int n, void **data, size_t *sizes, int *tags,
			      void **mhandles, void **phandles, void **request);
	ncclResult_t (*iflush)(void *recvComm, int n, void **data, int *sizes, void **mhandles,
			       void **request);
	ncclResult_t (*test)(void *request, int *done, int *sizes);
	ncclResult_t (*closeSend)(void *sendComm);
	ncclResult_t (*closeRecv)(void *recvComm);
	ncclResult_t (*closeListen)(void *listenComm);
	ncclResult_t (*getDeviceMr)(void *comm, void *mhandle, void **dptr_mhandle);
	ncclResult_t (*irecvConsumed)(void *recvComm, int n, void *request);
	ncclResult_t (*makeVDevice)(int *d, ncclNetVDeviceProps_v9_t *props);
} ncclNet_v10_t;

/* ---- v11: a context per communicator (init ... finalize), the comm
 * config moved from connect to init, setNetAttr, maxMultiRequestSize. */

typedef ncclNetCommConfig_v10_t ncclNetCommConfig_v11_t;

typedef struct {
	char *name;
	char *pciPath;
	uint64_t guid;
	int ptrSupport;
	int regIsGlobal;
	int forceFlush;
	int speed;
	int port;
	float latency;
	int maxComms;
	int maxRecvs;
	ncclNetDeviceType netDeviceType;
	int netDeviceVersion;
	ncclNetVDeviceProps_v9_t vProps;
	size_t maxP2pBytes;
	size_t maxCollBytes;
	int maxMultiRequestSize;	/* requests in one multi-request (1: none) */
} ncclNetProperties_v11_t;

typedef struct {
	int32_t maxConcurrentPeers;
	int32_t minConcurrentPeers;
	int32_t maxFlowsPerPeer;
	int32_t minFlowsPerPeer;
} ncclNetCommAttr_v11_t;

typedef struct {
	ncclNetCommAttr_v11_t sendCommAttr;
	ncclNetCommAttr_v11_t recvCommAttr;
	uint32_t op;
	uint32_t algo;
	uint32_t proto;
} ncclNetAttr_v11_t;	/* = _v12_t */

/* v12: eight devices per virtual NIC, railId and planeId appended. */
typedef struct {
	int ndevs;
	int devs[NCCL_NET_MAX_DEVS_PER_NIC_V12];
} ncclNetVDeviceProps_v12_t;

typedef struct {
	char *name;
	char *pciPath;
	uint64_t guid;
	int ptrSupport;
	int regIsGlobal;
	int forceFlush;
	int speed;
	int port;
	float latency;
	int maxComms;
	int maxRecvs;
	ncclNetDeviceType netDeviceType;
	int netDeviceVersion;
	ncclNetVDeviceProps_v12_t vProps;
	size_t maxP2pBytes;
	size_t maxCollBytes;
	int maxMultiRequestSize;
	int16_t railId;
	int16_t planeId;
} ncclNetProperties_v12_t;

/* The v11 and v12 tables differ only in their property and vProps types. */
#define PD_NCCL_NET_V11_TABLE(props_t, vprops_t) \
	struct { \
		const char *name; \
		ncclResult_t (*init)(void **ctx, uint64_t commId, ncclNetCommConfig_v11_t *config, \
				     ncclDebugLogger_t logFunction, ncclProfilerCallback_t profFunction); \
		ncclResult_t (*devices)(int *ndev); \
		ncclResult_t (*getProperties)(int dev, props_t *props); \
		ncclResult_t (*listen)(void *ctx, int dev, void *handle, void **listenComm); \
		ncclResult_t (*connect)(void *ctx, int dev, void *handle, void **sendComm, \
					ncclNetDeviceHandle_v8_t **sendDevComm); \
		ncclResult_t (*accept)(void *listenComm, void **recvComm, \
				       ncclNetDeviceHandle_v8_t **recvDevComm); \
		ncclResult_t (*regMr)(void *comm, void *data, size_t size, int type, void **mhandle); \
		ncclResult_t (*regMrDmaBuf)(void *comm, void *data, size_t size, int type, \
					    uint64_t offset, int fd, void **mhandle); \
		ncclResult_t (*deregMr)(void *comm, void *mhandle); \
		ncclResult_t (*isend)(void *sendComm, void *data, size_t size, int tag, void *mhandle, \
				      void *phandle, void **request); \
		ncclResult_t (*irecv)(void *recvComm, int n, void **data, size_t *sizes, int *tags, \
				      void **mhandles, void **phandles, void **request); \
		ncclResult_t (*iflush)(void *recvComm, int n, void **data, int *sizes, void **mhandles, \
				       void **request); \
		ncclResult_t (*test)(void *request, int *done, int *sizes); \
		ncclResult_t (*closeSend)(void *sendComm); \
		ncclResult_t (*closeRecv)(void *recvComm); \
		ncclResult_t (*closeListen)(void *listenComm); \
		ncclResult_t (*getDeviceMr)(void *comm, void *mhandle, void **dptr_mhandle); \
		ncclResult_t (*irecvConsumed)(void *recvComm, int n, void *request); \
		ncclResult_t (*makeVDevice)(int *d, vprops_t *props); \
		ncclResult_t (*finalize)(void *ctx); \
		ncclResult_t (*setNetAttr)(void *ctx, ncclNetAttr_v11_t *netAttr); \
	}

typedef PD_NCCL_NET_V11_TABLE(ncclNetProperties_v11_t, ncclNetVDeviceProps_v9_t) ncclNet_v11_t;
typedef PD_NCCL_NET_V11_TABLE(ncclNetProperties_v12_t, ncclNetVDeviceProps_v12_t) ncclNet_v12_t;

#endif /* PD_NCCL_NET_ABI_H */
