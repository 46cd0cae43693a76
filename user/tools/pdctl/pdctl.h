/* SPDX-License-Identifier: MIT */
/*
 * What pdctl's units share: exit codes, the roots the tests override, the
 * sysfs and device-node readers (sysfs.c), the commands (main.c's table)
 * and the helpers more than one command prints with.  The JSON writer is
 * json.h, the doctor's interface for topo doctor.h.
 */
#ifndef PDCTL_H
#define PDCTL_H

#include <stdbool.h>
#include <stddef.h>

#include "../tool_cli.h"

/* Exit codes, documented in pdctl(8): the tools' shared ones (tool_cli.h;
 * 5, data that failed verification, is never pdctl's), then pdctl's own. */
enum {
	EX_OK = TOOL_EX_OK, EX_FAIL = TOOL_EX_FAIL, EX_USAGE = TOOL_EX_USAGE,
	EX_NODEV = TOOL_EX_SETUP, EX_PERM = TOOL_EX_PERM,
	EX_NOENT = 6, EX_BOUNCE = 7, EX_PENDING = 8,
	EX_SIMONLY = 9,		/* doctor: only simulated devices, no --allow-sim */
};

#define MAX_DEVS 64

#ifndef PD_VERSION
#define PD_VERSION "unknown"
#endif

/* main.c: the global options and roots */
extern bool json;
extern int want_dev;		/* -d N, else -1 */
extern const char *sysroot;	/* PDCTL_SYSFS */
extern const char *devroot;	/* PDCTL_DEV */

/* An error on stderr; the first becomes --json's {"error": ...} object,
 * which main() prints once for a command that printed nothing else. */
void __attribute__((format(printf, 1, 2))) pdctl_err(const char *fmt, ...);

/* ---- sysfs.c ---- */
int errno_exit(int e);
void term_safe(char *s);
/* /proc/PID/comm: "-" for no pid, "?" when gone; terminal-safe in text mode. */
void proc_comm(int tgid, char *buf, size_t len);
int read_file(const char *path, char *buf, size_t len);
int attr_str(int idx, const char *name, char *buf, size_t len);
unsigned long long attr_u64(int idx, const char *name);
int attr_num(int idx, const char *name, unsigned long long *out);
/* A counter in JSON: its value, or null when the module does not have it. */
void jattr(const char *k, int idx, const char *name);
/* An object for device idx, its first member "device": "peerdirectIDX". */
void jopen_device(int idx);
/* Whether a command that takes no arguments was given some (said). */
bool no_args(const char *cmd, int argc);
int link_base(const char *path, char *buf, size_t len);
void dev_parent(int idx, char *buf, size_t len);
bool module_loaded(void);
int list_devices(int *out, int max);
int select_devices(int *out, int *nr);
/* O_RDONLY for the queries (LIST), O_RDWR for the commands that change
 * something (REVOKE): the module refuses those on a read-only file. */
int open_dev(int idx, int mode);

/* "revoked/free" ... "revoked/unplug": the revocation counters by reason */
#define NR_REVOKED_ATTRS 5
extern const char *const revoked_attrs[NR_REVOKED_ATTRS];

/* devices.c: 4096 as "4K", 1.5 MiB as "1.5M" */
void human_size(unsigned long long v, char *buf, size_t len);

/* libs_dl.c, or libs_static.c in the static build: the libraries'
 * versions for --version, each "" when not found. */
void lib_versions(char *pd, size_t pd_len, char *fab, size_t fab_len);
/* --version's text lines about them */
void print_lib_versions(const char *pd, const char *fab);

/* The commands (main.c's table): argv[0] is the command's name. */
int cmd_list(int argc, char **argv);		/* devices.c */
int cmd_info(int argc, char **argv);
int cmd_version(int argc, char **argv);
int cmd_exports(int argc, char **argv);		/* exports.c */
int cmd_allocs(int argc, char **argv);
int cmd_events(int argc, char **argv);		/* events.c */
int cmd_revoke(int argc, char **argv);		/* revoke.c */
int cmd_reset(int argc, char **argv);
int cmd_bind(int argc, char **argv);		/* bind.c */
int cmd_unbind(int argc, char **argv);
int cmd_ps(int argc, char **argv);		/* ps.c */
int cmd_topo(int argc, char **argv);		/* topo.c */
int cmd_doctor(int argc, char **argv);		/* doctor.c */

/* bind.c: DDDD:BB:DD.F (or BB:DD.F, domain 0), "pci:" prefix allowed */
int pd_parse_bdf(const char *s, char *out, size_t len);

#endif /* PDCTL_H */
