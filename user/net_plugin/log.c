// SPDX-License-Identifier: MIT
/*
 * Logging through NCCL's logger (given to init), so that the plugin's lines
 * land in NCCL_DEBUG's output with NCCL's prefixes and filters.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "plugin.h"

/* Registration classes already said at INFO: (type, path, reason). */
#define SEEN_MAX 64
static struct {
	pthread_mutex_t lock;
	size_t n;
	uint64_t hash[SEEN_MAX];
} seen = { .lock = PTHREAD_MUTEX_INITIALIZER };

void pdn_log(ncclDebugLogLevel level, unsigned long flags, const char *fn, int line,
	     const char *fmt, ...)
{
	ncclDebugLogger_t logger = __atomic_load_n(&pdn.logger, __ATOMIC_ACQUIRE);
	char msg[1024];
	va_list ap;

	if (!logger || (level == NCCL_LOG_TRACE && !__atomic_load_n(&pdn.trace, __ATOMIC_RELAXED)))
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	/* NCCL formats the line itself: pass ours as an argument, never as
	 * the format (a reason may hold a '%'). */
	logger(level, flags, fn, line, "NET/" PDN_NAME " %s", msg);
}

static uint64_t fnv1a(uint64_t h, const char *s)
{
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
	return h;
}

void pdn_log_registration(struct pdn_dev *d, const struct pdn_mr *m, const char *what)
{
	struct pd_cache_stats st = { 0 };
	enum pd_path path = pd_mr_path(m->mr);
	const char *reason = pd_mr_reason(m->mr);
	uint64_t h = fnv1a(fnv1a(0xcbf29ce484222325ull ^ (uint64_t)m->type, pd_path_name(path)),
			   reason ? reason : "");
	bool first = true;
	size_t i;

	pthread_mutex_lock(&seen.lock);
	for (i = 0; i < seen.n; i++)
		if (seen.hash[i] == h)
			first = false;
	/* A full table says no more at INFO: a flood would bury NCCL's own. */
	if (first && seen.n < SEEN_MAX)
		seen.hash[seen.n++] = h;
	else
		first = false;
	pthread_mutex_unlock(&seen.lock);
	if (!first && !__atomic_load_n(&pdn.trace, __ATOMIC_RELAXED))
		return;	/* a cache hit pays for no line nobody reads */
	/* INFO once per class answers "why not direct" without a line per
	 * buffer; TRACE has every registration, and the device's cache so
	 * far (NCCL registers a buffer again per comm: those are its hits). */
	pd_fabric_cache_stats(d->fab, &st);
	pdn_log(first ? NCCL_LOG_INFO : NCCL_LOG_TRACE, NCCL_NET | NCCL_REG, __func__, __LINE__,
		"%s [%p, +%zu) on %s: path %s (%s); cache %llu hits, %llu misses so far", what,
		(void *)m->base, m->len, d->name, pd_path_name(path),
		reason && *reason ? reason : "no reason given", (unsigned long long)st.hits,
		(unsigned long long)st.misses);
}

void pdn_log_reset(void)
{
	pthread_mutex_lock(&seen.lock);
	seen.n = 0;
	pthread_mutex_unlock(&seen.lock);
}

ncclResult_t pdn_result(int err)
{
	switch (err) {
	case 0:
		return ncclSuccess;
	case -EINVAL:
	case -EFAULT:
		return ncclInternalError;	/* NCCL passed something wrong */
	default:
		return ncclSystemError;		/* the fabric, the peer, the memory */
	}
}
