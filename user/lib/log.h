/* SPDX-License-Identifier: MIT */
/*
 * Logging while a job runs: PEERDIRECT_LOG=error|warn|info|debug and
 * PEERDIRECT_LOG_FILE, read once when the library loads.  Off by default;
 * off, a call site costs one load and one predictable branch.
 */
#ifndef PD_LOG_H
#define PD_LOG_H

#include <stdint.h>

enum pd_log_level {
	PD_LOG_OFF, PD_LOG_ERROR, PD_LOG_WARN, PD_LOG_INFO, PD_LOG_DEBUG,
};

/* Written only by pd_log_init (at load, and by tests before any thread). */
extern int pd_log_level;

/* Per call site: at most burst lines per interval, then a count of what
 * was dropped on the next line that passes. */
struct pd_log_rl {
	uint64_t window_start_ns;
	unsigned int in_window;
	unsigned long suppressed;
};

#define pd_log_on(level) \
	__builtin_expect(__atomic_load_n(&pd_log_level, __ATOMIC_RELAXED) >= (level), 0)

#define pd_log(level, ...) do {						\
	if (pd_log_on(level))						\
		pd_log_emit((level), NULL, __VA_ARGS__);		\
} while (0)

/* Rate-limited: for what happens per registration or per request. */
#define pd_log_rl(level, ...) do {					\
	static struct pd_log_rl pd_log_rl_site_;			\
	if (pd_log_on(level))						\
		pd_log_emit((level), &pd_log_rl_site_, __VA_ARGS__);	\
} while (0)

void pd_log_emit(int level, struct pd_log_rl *rl, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Reads the environment again (the tests; the library's constructor). */
void pd_log_init(void);
/* The tests' knob: rate limit of interval_ms and burst lines per site. */
void pd_log_set_ratelimit(unsigned int interval_ms, unsigned int burst);

#endif
