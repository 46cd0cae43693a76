// SPDX-License-Identifier: MIT
/*
 * pdctl's JSON writer: one document on stdout, built by calls in order
 * (jopen, the members, jclose).  Strings are valid UTF-8 with controls
 * escaped, whatever bytes the files and processes gave.
 */
#include <stdbool.h>
#include <stdio.h>

#include "json.h"

static bool jfirst = true;
static int jdepth;		/* open objects and arrays */
static bool jprinted;		/* a top-level value was closed */

void jsep(void)
{
	if (!jfirst)
		putchar(',');
	jfirst = false;
}

/* The length of the well-formed UTF-8 sequence at s, or 0. */
static size_t utf8_len(const unsigned char *s)
{
	unsigned int n, i, cp;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		n = 2, cp = s[0] & 0x1f;
	else if ((s[0] & 0xf0) == 0xe0)
		n = 3, cp = s[0] & 0x0f;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		n = 4, cp = s[0] & 0x07;
	else
		return 0;
	for (i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if (n == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff)))
		return 0;
	if (n == 4 && (cp < 0x10000 || cp > 0x10ffff))
		return 0;
	return n;
}

/*
 * A JSON string of bytes that come from processes (comm) and files: JSON
 * must be UTF-8, so a byte that starts no well-formed sequence is U+FFFD.
 */
void jstr_raw(const char *s)
{
	size_t n;

	putchar('"');
	for (; s && *s; s++) {
		unsigned char c = *s;

		if (c == '"' || c == '\\') {
			printf("\\%c", c);
		} else if (c < 0x20 || c == 0x7f) {
			printf("\\u%04x", c);
		} else if (c < 0x80) {
			putchar(c);
		} else if ((n = utf8_len((const unsigned char *)s))) {
			fwrite(s, 1, n, stdout);
			s += n - 1;
		} else {
			fputs("\\ufffd", stdout);
		}
	}
	putchar('"');
}

void jkey(const char *k)
{
	jsep();
	jstr_raw(k);
	putchar(':');
}

void jopen(const char *k, char c)
{
	if (k)
		jkey(k);
	else
		jsep();
	putchar(c);
	jfirst = true;
	jdepth++;
}

void jclose(char c)
{
	putchar(c);
	jfirst = false;
	if (jdepth > 0 && !--jdepth)
		jprinted = true;
}

void ju64(const char *k, unsigned long long v)
{
	jkey(k);
	printf("%llu", v);
}

void ji64(const char *k, long long v)
{
	jkey(k);
	printf("%lld", v);
}

void jbool(const char *k, bool v)
{
	jkey(k);
	fputs(v ? "true" : "false", stdout);
}

void jnull(const char *k)
{
	jkey(k);
	fputs("null", stdout);
}

void jstr(const char *k, const char *v)
{
	jkey(k);
	if (v)
		jstr_raw(v);
	else
		fputs("null", stdout);
}

/* A new top-level value: after a cut-short one, on a line of its own. */
void jreset(void)
{
	if (jdepth)
		putchar('\n');
	jfirst = true;
	jdepth = 0;
}

bool jdone(void)
{
	return jprinted;
}
