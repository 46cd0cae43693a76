/* SPDX-License-Identifier: MIT */
/*
 * What the tests of the tools share: where the built tools are, and files
 * of a fake sysfs or /dev tree.  Test-only.
 */
#ifndef PD_TEST_TOOL_RUN_H
#define PD_TEST_TOOL_RUN_H

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* build/tests/test_x -> build/TOOL: the tool built beside this test. */
static inline void tool_path(char *out, size_t len, const char *tool)
{
	ssize_t n = readlink("/proc/self/exe", out, len - 64);
	char *slash;

	out[n > 0 ? n : 0] = '\0';
	slash = strrchr(out, '/');
	if (slash)
		*slash = '\0';
	slash = strrchr(out, '/');
	if (slash)
		strcpy(slash + 1, tool);
}

/* sh -c CMD with its stdout in OUT (cut to LEN - 1): its exit status, 128
 * if a signal ended it, -1 if it could not start. */
static inline int run_capture(const char *cmd, char *out, size_t len)
{
	size_t n;
	FILE *f;
	int st;

	fflush(NULL);
	f = popen(cmd, "r");
	if (!f)
		return -1;
	n = fread(out, 1, len - 1, f);
	out[n] = '\0';
	st = pclose(f);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* ROOT/REL holding VAL as is, its directories made as needed. */
static inline void fake_write(const char *root, const char *rel, const char *val)
{
	char path[8200], dir[8200], *p;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	snprintf(dir, sizeof(dir), "%s", path);
	for (p = dir + strlen(root) + 1; (p = strchr(p, '/')); p++) {
		*p = 0;
		mkdir(dir, 0755);
		*p = '/';
	}
	f = fopen(path, "w");
	if (f) {
		fputs(val, f);
		fclose(f);
	}
}

#endif
