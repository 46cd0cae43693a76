/* SPDX-License-Identifier: MIT */
/*
 * What pdctl.c shares with the doctor (pdctl_doctor.c): exit codes, the
 * roots the tests override, the JSON writers (valid UTF-8, controls
 * escaped) and the sysfs readers.
 */
#ifndef PDCTL_H
#define PDCTL_H

#include <stdbool.h>
#include <stddef.h>

#include "tool_cli.h"

/* Exit codes, documented in pdctl(8): the tools' shared ones (tool_cli.h;
 * 5, data that failed verification, is never pdctl's), then pdctl's own. */
enum {
	EX_OK = TOOL_EX_OK, EX_FAIL = TOOL_EX_FAIL, EX_USAGE = TOOL_EX_USAGE,
	EX_NODEV = TOOL_EX_SETUP, EX_PERM = TOOL_EX_PERM,
	EX_NOENT = 6, EX_BOUNCE = 7, EX_PENDING = 8,
	EX_SIMONLY = 9,		/* doctor: only simulated devices, no --allow-sim */
};

#define MAX_DEVS 64

extern bool json;
extern int want_dev;
extern const char *sysroot;	/* PDCTL_SYSFS */
extern const char *devroot;	/* PDCTL_DEV */

void jsep(void);
void jstr_raw(const char *s);
void jkey(const char *k);
void jopen(const char *k, char c);
void jclose(char c);
void ju64(const char *k, unsigned long long v);
void ji64(const char *k, long long v);
void jbool(const char *k, bool v);
void jnull(const char *k);
/* An error on stderr; the first becomes --json's {"error": ...} object,
 * which main() prints once for a command that printed nothing else. */
void __attribute__((format(printf, 1, 2))) pdctl_err(const char *fmt, ...);
void jstr(const char *k, const char *v);

void term_safe(char *s);
/* /proc/PID/comm: "-" for no pid, "?" when gone; terminal-safe in text mode. */
void proc_comm(int tgid, char *buf, size_t len);
int read_file(const char *path, char *buf, size_t len);
int attr_str(int idx, const char *name, char *buf, size_t len);
unsigned long long attr_u64(int idx, const char *name);
int attr_num(int idx, const char *name, unsigned long long *out);
int link_base(const char *path, char *buf, size_t len);
bool module_loaded(void);
int list_devices(int *out, int max);

int cmd_doctor(int argc, char **argv);

#endif /* PDCTL_H */
