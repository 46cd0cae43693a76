/* SPDX-License-Identifier: MIT */
/*
 * The tools' numeric arguments, parsed whole: atoi() took "8x" as 8, "abc"
 * as 0 (then a bare usage, or a default in disguise) and a port of 99999
 * as 34463.  Each failure names the option, what was given and what it
 * takes, as "tool: --opt value: want ...".
 */
#ifndef PD_TOOLS_TOOL_ARGS_H
#define PD_TOOLS_TOOL_ARGS_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static inline int tool_bad(const char *tool, const char *opt, const char *val, const char *want)
{
	fprintf(stderr, "%s: %s %s: %s\n", tool, opt, val, want);
	return -1;
}

/* A whole decimal number in [lo, hi], silently. */
static inline int tool_ull(const char *s, unsigned long long lo, unsigned long long hi,
			   unsigned long long *out)
{
	unsigned long long v;
	char *end;

	/* strtoull skips leading blanks and takes a sign: "port 80" is not " 80" */
	if (s[0] < '0' || s[0] > '9')
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end || v < lo || v > hi)
		return -1;
	*out = v;
	return 0;
}

/* The same for an int in [lo, hi], lo >= 0: every count, index and port
 * the tools take ("-0" and "+1" are not numbers here). */
static inline int tool_number(const char *s, int lo, int hi, int *out)
{
	unsigned long long v;

	if (lo < 0 || tool_ull(s, (unsigned long long)lo, (unsigned long long)hi, &v))
		return -1;
	*out = (int)v;
	return 0;
}

static inline int tool_int(const char *tool, const char *opt, const char *s, int lo, int hi,
			   int *out)
{
	char want[80];

	if (!tool_number(s, lo, hi, out))
		return 0;
	snprintf(want, sizeof(want), "want a whole number from %d to %d", lo, hi);
	return tool_bad(tool, opt, s, want);
}

/* Every wait a tool bounds: a day. */
#define TOOL_MAX_TIMEOUT_MS (24 * 3600 * 1000)

/* In a tool's option switch, with TOOL_NAME defined before use. */
#define TOOL_INT_ARG(opt, lo, hi, out) tool_int(TOOL_NAME, opt, optarg, lo, hi, out)

/* "HOST:PORT", the last colon splitting; "[::1]:5000" for an IPv6
 * address.  Host into host[hostlen], port 1 to 65535. */
static inline int tool_hostport(const char *tool, const char *opt, const char *spec, char *host,
				size_t hostlen, uint16_t *port)
{
	const char *colon = strrchr(spec, ':'), *h = spec;
	size_t len = colon ? (size_t)(colon - spec) : 0;
	int p;

	if (len >= 2 && spec[0] == '[' && spec[len - 1] == ']')
		h++, len -= 2;
	else if (len && memchr(spec, ':', len))
		return tool_bad(tool, opt, spec, "want [IPv6 address]:PORT");	/* "fe80::1" was fe80: port 1 */
	if (!len || len >= hostlen)
		return tool_bad(tool, opt, spec, "want HOST:PORT");
	if (tool_number(colon + 1, 1, 65535, &p))
		return tool_bad(tool, opt, spec, "want HOST:PORT with a port from 1 to 65535");
	memcpy(host, h, len);
	host[len] = '\0';
	*port = (uint16_t)p;
	return 0;
}

#endif
