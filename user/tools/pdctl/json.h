/* SPDX-License-Identifier: MIT */
/*
 * pdctl's JSON writer (json.c): members in order between jopen and jclose,
 * commas put where they belong.  k NULL in jopen: an array element.
 */
#ifndef PDCTL_JSON_H
#define PDCTL_JSON_H

#include <stdbool.h>

void jsep(void);
void jstr_raw(const char *s);
void jkey(const char *k);
void jopen(const char *k, char c);
void jclose(char c);
void ju64(const char *k, unsigned long long v);
void ji64(const char *k, long long v);
void jbool(const char *k, bool v);
void jnull(const char *k);
void jstr(const char *k, const char *v);
/* A new top-level value: a value cut short ends its line first. */
void jreset(void);
/* Whether a top-level value was closed. */
bool jdone(void);

#endif /* PDCTL_JSON_H */
