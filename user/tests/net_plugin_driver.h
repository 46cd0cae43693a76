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

#include "nccl_net_call.h"

#define LOOP_MS 15000	/* a bound no healthy step comes near, loaded or not */

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
	int ret = net_open_path(n, net_plugin_path(), ver);

	if (ret && n->ver != -1)
		fprintf(stderr, "# dlopen %s: %s\n", net_plugin_path(), dlerror());
	return ret;
}

static inline ncclResult_t net_init(struct net *n)
{
	return net_init_log(n, logger);
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
