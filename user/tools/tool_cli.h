/* SPDX-License-Identifier: MIT */
/*
 * The command-line convention every tool keeps (pdctl, pd-coll, pd-bench,
 * pd-xfer): one set of exit codes, --help and --version exiting 0, and no
 * empty names.  Each man page's EXIT STATUS lists these codes.
 */
#ifndef PD_TOOLS_TOOL_CLI_H
#define PD_TOOLS_TOOL_CLI_H

#include <stdio.h>
#include <string.h>

/* A tool's own codes (pdctl's revoke/doctor codes) start at 6. */
enum {
	TOOL_EX_OK = 0,
	TOOL_EX_FAIL = 1,	/* an operation failed */
	TOOL_EX_USAGE = 2,	/* bad command line */
	TOOL_EX_SETUP = 3,	/* no module, device, provider, peer or program */
	TOOL_EX_PERM = 4,	/* permission denied */
	TOOL_EX_DATA = 5,	/* data failed verification (wrong bytes delivered) */
};

/* The build sets it from `git describe` (user/Makefile's VERSION). */
#ifndef PD_VERSION
#define PD_VERSION "unknown"
#endif

/*
 * An empty value for an option that takes a name or path ("--nic ''",
 * "--csv="): refused, as every tool does, rather than taken as "the
 * default" or "the current directory".  Scans argv before getopt, so it
 * covers options after a subcommand too.  0, else prints why and -1.
 */
static inline int tool_refuse_empty(const char *tool, int argc, char **argv)
{
	int i;

	for (i = 1; i < argc; i++) {
		const char *eq = argv[i][0] == '-' && argv[i][1] == '-' ? strchr(argv[i], '=') : NULL;

		if (!strcmp(argv[i], "--"))
			break;
		if (eq && !eq[1]) {
			fprintf(stderr, "%s: %s: empty value\n", tool, argv[i]);
			return -1;
		}
		if (!argv[i][0]) {
			fprintf(stderr, "%s: %s: empty value\n", tool, i > 1 ? argv[i - 1] : "argument");
			return -1;
		}
	}
	return 0;
}

#endif
