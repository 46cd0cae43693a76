// SPDX-License-Identifier: MIT
/*
 * PEERDIRECT_LOG and PEERDIRECT_LOG_FILE, after NCCL_DEBUG and
 * NCCL_DEBUG_FILE: lines "host:pid:tid peerdirect LEVEL text" on stderr,
 * or appended to a file whose name may hold %h (host) and %p (pid).  The
 * environment is read once, when the library is loaded: a call site then
 * tests a cached level, and nothing at all is written (no file created)
 * when PEERDIRECT_LOG is unset.  Each line is one write(2), so lines of
 * threads and processes sharing the file do not interleave.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

int pd_log_level;

static int log_fd = 2;
static char host[64] = "?";
static uint64_t rl_interval_ns = 5000000000ULL;
static unsigned int rl_burst = 10;
static pthread_mutex_t rl_lock = PTHREAD_MUTEX_INITIALIZER;

static const char *const level_names[] = {
	[PD_LOG_ERROR] = "ERROR", [PD_LOG_WARN] = "WARN", [PD_LOG_INFO] = "INFO",
	[PD_LOG_DEBUG] = "DEBUG",
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static void write_all(const char *buf, size_t len)
{
	while (len) {
		ssize_t n = write(log_fd, buf, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return;		/* nowhere to report it */
		buf += n;
		len -= (size_t)n;
	}
}

static void emit_line(int level, unsigned long dropped, const char *fmt, va_list ap)
{
	char line[2048];
	size_t n, room = sizeof(line) - 1;	/* keep one byte for '\n' */
	int k;

	k = snprintf(line, room, "%s:%d:%ld peerdirect %s ", host, (int)getpid(),
		     (long)syscall(SYS_gettid), level_names[level]);
	n = k < 0 ? 0 : (size_t)k < room ? (size_t)k : room - 1;
	k = vsnprintf(line + n, room - n, fmt, ap);
	n += k < 0 ? 0 : (size_t)k < room - n ? (size_t)k : room - n - 1;
	if (dropped && n < room - 1) {
		k = snprintf(line + n, room - n, " (%lu similar messages suppressed)", dropped);
		n += k < 0 ? 0 : (size_t)k < room - n ? (size_t)k : room - n - 1;
	}
	line[n++] = '\n';
	write_all(line, n);
}

void pd_log_emit(int level, struct pd_log_rl *rl, const char *fmt, ...)
{
	unsigned long dropped = 0;
	va_list ap;

	if (level < PD_LOG_ERROR || level > PD_LOG_DEBUG)
		return;
	if (rl) {
		uint64_t now = now_ns();

		pthread_mutex_lock(&rl_lock);
		if (!rl->window_start_ns || now - rl->window_start_ns >= rl_interval_ns) {
			dropped = rl->suppressed;
			rl->suppressed = 0;
			rl->in_window = 0;
			rl->window_start_ns = now;
		}
		if (rl->in_window >= rl_burst) {
			rl->suppressed++;
			pthread_mutex_unlock(&rl_lock);
			return;
		}
		rl->in_window++;
		pthread_mutex_unlock(&rl_lock);
	}
	va_start(ap, fmt);
	emit_line(level, dropped, fmt, ap);
	va_end(ap);
}

static int parse_level(const char *v)
{
	static const struct { const char *name; int level; } names[] = {
		{ "error", PD_LOG_ERROR }, { "warn", PD_LOG_WARN }, { "warning", PD_LOG_WARN },
		{ "info", PD_LOG_INFO }, { "debug", PD_LOG_DEBUG }, { "trace", PD_LOG_DEBUG },
		{ "none", PD_LOG_OFF }, { "off", PD_LOG_OFF }, { "", PD_LOG_OFF },
	};
	size_t i;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (!strcasecmp(v, names[i].name))
			return names[i].level;
	}
	return -1;
}

/* %h: the host name, %p: the pid, %%: a percent sign (as NCCL_DEBUG_FILE). */
static void expand_name(const char *pat, char *out, size_t len)
{
	size_t n = 0;

	for (; *pat && n + 1 < len; pat++) {
		int k = 0;

		if (pat[0] == '%' && pat[1] == 'h')
			k = snprintf(out + n, len - n, "%s", host), pat++;
		else if (pat[0] == '%' && pat[1] == 'p')
			k = snprintf(out + n, len - n, "%d", (int)getpid()), pat++;
		else if (pat[0] == '%' && pat[1] == '%')
			out[n] = '%', k = 1, pat++;
		else
			out[n] = *pat, k = 1;
		n += k < 0 ? 0 : (size_t)k < len - n ? (size_t)k : len - n - 1;
	}
	out[n] = '\0';
}

void pd_log_set_ratelimit(unsigned int interval_ms, unsigned int burst)
{
	rl_interval_ns = (uint64_t)interval_ms * 1000000ULL;
	rl_burst = burst;
}

static void log_say(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void log_say(int level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	emit_line(level, 0, fmt, ap);
	va_end(ap);
}

void pd_log_init(void)
{
	/* secure_getenv: a set-id program never writes where its caller says */
	const char *v = secure_getenv("PEERDIRECT_LOG");
	const char *file = secure_getenv("PEERDIRECT_LOG_FILE");
	char name[4096];
	int level, fd;

	if (log_fd > 2)
		close(log_fd);
	log_fd = 2;
	__atomic_store_n(&pd_log_level, PD_LOG_OFF, __ATOMIC_RELAXED);
	if (!v)
		return;
	if (gethostname(host, sizeof(host)) || !host[0])
		snprintf(host, sizeof(host), "?");
	host[sizeof(host) - 1] = '\0';
	host[strcspn(host, ".")] = '\0';
	level = parse_level(v);
	if (level < 0) {
		log_say(PD_LOG_WARN, "PEERDIRECT_LOG='%s' is not one of error|warn|info|debug: logging is off",
			v);
		return;
	}
	if (level == PD_LOG_OFF)
		return;
	if (file && *file) {
		expand_name(file, name, sizeof(name));
		fd = open(name, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
		if (fd < 0)
			log_say(PD_LOG_WARN, "PEERDIRECT_LOG_FILE '%s': %s: logging to stderr",
				name, strerror(errno));
		else
			log_fd = fd;
	}
	__atomic_store_n(&pd_log_level, level, __ATOMIC_RELAXED);
}

__attribute__((constructor)) static void log_load(void)
{
	pd_log_init();
}

