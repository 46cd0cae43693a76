/* SPDX-License-Identifier: MIT */
#ifndef PD_ERRORS_H
#define PD_ERRORS_H

#include <stddef.h>

/* Records a message for pd_last_error() and returns err (a negative errno). */
int pd_error(int err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void pd_clear_error(void);

/* Environment: a size with optional K/M/G suffix.  Returns 0 and leaves
 * *out untouched when the variable is unset; -EINVAL with a message naming
 * the variable when it does not parse. */
int pd_env_size(const char *name, size_t *out);
/* The same for a count or a time: decimal digits only, no suffix. */
int pd_env_count(const char *name, size_t *out);
/* A size parser shared by the environment and tools ("4k", "1M", "64MiB"). */
int pd_parse_size(const char *s, size_t *out);

#endif
