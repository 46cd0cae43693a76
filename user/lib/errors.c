// SPDX-License-Identifier: MIT
/*
 * Per-thread error text.  Errors are negative errno values so a runtime can
 * switch on them; the text says what the library was doing and why it failed,
 * which an errno alone cannot (e.g. "EOPNOTSUPP" vs "libfabric 1.17 without
 * FI_MR_DMABUF").
 */
#include <ctype.h>
#include <limits.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/fi_errno.h>

#include "peerdirect.h"
#include "errors.h"
#include "log.h"

static _Thread_local char last_error[512];

int pd_error(int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(last_error, sizeof(last_error), fmt, ap);
	va_end(ap);
	pd_log(PD_LOG_DEBUG, "error %d (%s): %s", err, pd_strerror(err), last_error);
	return err;
}

void pd_clear_error(void)
{
	last_error[0] = '\0';
}

const char *pd_last_error(void)
{
	return last_error;
}

const char *pd_strerror(int err)
{
	if (err > 0)
		err = -err;
	/* libfabric's own codes (FI_ETRUNC, ...) sit above the errno range. */
	if (-err >= FI_ERRNO_OFFSET)
		return fi_strerror(-err);
	return strerror(-err);
}

int pd_parse_size(const char *s, size_t *out)
{
	unsigned long long v;
	unsigned int shift = 0;
	char *end;

	/* Decimal: strtoull's base 0 read "0100" as 64.  A digit first: it
	 * would skip blanks and take a sign. */
	if (!s || !isdigit((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno == ERANGE)
		return -ERANGE;
	if (errno)
		return -EINVAL;
	switch (toupper((unsigned char)*end)) {
	case 'G': shift += 10; /* fall through */
	case 'M': shift += 10; /* fall through */
	case 'K': shift += 10; end++; break;
	case '\0': break;
	default: return -EINVAL;
	}
	if (v > (ULLONG_MAX >> shift))
		return -ERANGE;	/* "17179869188G" is not 4G */
	v <<= shift;
	if (*end == 'i' || *end == 'I')
		end++;
	if (*end == 'B' || *end == 'b')
		end++;
	if (*end)
		return -EINVAL;
	if (v > SIZE_MAX)
		return -ERANGE;
	*out = (size_t)v;
	return 0;
}

/* suffix: K/M/G allowed (a size); else digits alone (a count, a time). */
static int env_number(const char *name, bool suffix, size_t *out)
{
	const char *s = getenv(name);

	if (!s)
		return 0;
	if ((!suffix && s[strspn(s, "0123456789")]) || pd_parse_size(s, out))
		return pd_error(-EINVAL, suffix ? "%s='%s' is not a size (e.g. 1024, 4K, 8M, 2G)" :
				"%s='%s' is not a whole number (decimal digits, no suffix)", name, s);
	return 0;
}

int pd_env_size(const char *name, size_t *out)
{
	return env_number(name, true, out);
}

int pd_env_count(const char *name, size_t *out)
{
	return env_number(name, false, out);
}
