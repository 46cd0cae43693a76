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
static inline int tool_number(const char *s, long lo, long hi, int *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi)
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

/* "HOST:PORT" (the last colon splits, so "[::1]:5000" keeps its brackets
 * for the resolver to refuse or take): host into host[hostlen], port 1 to
 * 65535. */
static inline int tool_hostport(const char *tool, const char *opt, const char *spec, char *host,
				size_t hostlen, uint16_t *port)
{
	const char *colon = strrchr(spec, ':');
	int p;

	if (!colon || colon == spec || (size_t)(colon - spec) >= hostlen)
		return tool_bad(tool, opt, spec, "want HOST:PORT");
	if (tool_number(colon + 1, 1, 65535, &p))
		return tool_bad(tool, opt, spec, "want HOST:PORT with a port from 1 to 65535");
	memcpy(host, spec, (size_t)(colon - spec));
	host[colon - spec] = '\0';
	*port = (uint16_t)p;
	return 0;
}

#endif
