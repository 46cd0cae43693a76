// SPDX-License-Identifier: MIT
/*
 * pdctl events: the revocation counters per device, or with --follow the
 * module's trace events as they happen, from a tracefs instance of pdctl's
 * own.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pdctl.h"
#include "json.h"

#define err pdctl_err

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static int write_file(const char *path, const char *val)
{
	int f = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC), ret = 0;

	if (f < 0)
		return -errno;
	if (write(f, val, strlen(val)) < 0)
		ret = -errno;
	close(f);
	return ret;
}

/*
 * One trace line, "  comm-pid [cpu] flags  ts: peerdirect_NAME: k=v k=v",
 * as one JSON object: event, ts, and every k=v (numbers as numbers).
 */
static void event_json(const char *line)
{
	const char *p = strstr(line, ": peerdirect_"), *q;
	char ts[32] = "", tok[128];
	size_t n;

	if (!p)
		return;
	/* the timestamp is the token before ": peerdirect_" */
	for (q = p; q > line && q[-1] != ' '; q--)
		;
	n = (size_t)(p - q) < sizeof(ts) - 1 ? (size_t)(p - q) : sizeof(ts) - 1;
	memcpy(ts, q, n);
	ts[n] = 0;
	p += 2 + strlen("peerdirect_");
	jreset();
	jopen(NULL, '{');
	q = strchr(p, ':');
	n = q ? (size_t)(q - p) : strlen(p);
	snprintf(tok, sizeof(tok), "%.*s", (int)n, p);
	jstr("event", tok);
	jkey("ts");
	fputs(ts[0] ? ts : "0", stdout);
	p = q ? q + 1 : p + n;
	while (*p) {
		const char *eq, *end;
		char key[64], val[128];
		bool num = true;
		size_t i;

		while (*p == ' ')
			p++;
		end = p + strcspn(p, " \n");
		eq = memchr(p, '=', end - p);
		if (eq && eq > p) {
			snprintf(key, sizeof(key), "%.*s", (int)(eq - p), p);
			snprintf(val, sizeof(val), "%.*s", (int)(end - eq - 1), eq + 1);
		} else if (end > p) {
			snprintf(key, sizeof(key), "%s", "state");
			snprintf(val, sizeof(val), "%.*s", (int)(end - p), p);
		} else {
			break;
		}
		for (i = 0; val[i]; i++)
			if (!(val[i] >= '0' && val[i] <= '9') && !(i == 0 && val[i] == '-' && val[1]))
				num = false;
		if (!val[0] || !strncmp(val, "0x", 2))
			num = false;
		if (num) {
			jkey(key);
			fputs(val, stdout);
		} else {
			jstr(key, val);
		}
		p = end;
	}
	jclose('}');
	putchar('\n');
	fflush(stdout);
}

/* Without --follow: the revocation counters of each device. */
static int events_counters(const int *devs, int n)
{
	unsigned int k;
	int i;

	if (json) {
		jopen(NULL, '{');
		jopen("devices", '[');
	} else {
		printf("%-12s %8s %8s %8s %8s %8s %9s\n", "DEVICE", "FREE", "REVOKE",
		       "RESET", "ADMIN", "UNPLUG", "TIMEOUTS");
	}
	for (i = 0; i < n; i++) {
		if (json) {
			jopen_device(devs[i]);
			jopen("revoked", '{');
			for (k = 0; k < NR_REVOKED_ATTRS; k++)
				jattr(revoked_attrs[k] + 8, devs[i], revoked_attrs[k]);
			jclose('}');
			jattr("revoke_timeouts", devs[i], "revoke_timeouts");
			jclose('}');
			continue;
		}
		printf("peerdirect%-2d", devs[i]);
		for (k = 0; k < NR_REVOKED_ATTRS; k++)
			printf(" %8llu", attr_u64(devs[i], revoked_attrs[k]));
		printf(" %9llu\n", attr_u64(devs[i], "revoke_timeouts"));
	}
	if (json) {
		jclose(']');
		jclose('}');
		putchar('\n');
	}
	return 0;
}

/* Turns on the instance's revocation events (every event with all): 0 or
 * -errno, with path the file that failed. */
static int enable_events(const char *inst, bool all, char *path, size_t len)
{
	static const char *const evs[] = {
		"peerdirect_revoke", "peerdirect_revoke_done", "peerdirect_event",
	};
	unsigned int k;
	int ret = 0;

	snprintf(path, len, "%s/events/peerdirect/enable", inst);
	if (all)
		return write_file(path, "1");
	for (k = 0; k < 3 && !ret; k++) {
		snprintf(path, len, "%s/events/peerdirect/%s/enable", inst, evs[k]);
		ret = write_file(path, "1");
	}
	return ret;
}

/* The trace lines of trace_pipe f until a signal: as they are, or as JSON. */
static void pump(int f)
{
	char buf[8192];
	size_t have = 0;

	while (!stop) {
		struct pollfd pfd = { .fd = f, .events = POLLIN };
		ssize_t got;
		char *nl;

		if (poll(&pfd, 1, 200) <= 0)
			continue;
		got = read(f, buf + have, sizeof(buf) - 1 - have);
		if (got <= 0)
			continue;
		have += got;
		buf[have] = 0;
		while ((nl = strchr(buf, '\n'))) {
			*nl = 0;
			if (json) {
				event_json(buf);
			} else {
				term_safe(buf);
				puts(buf);
				fflush(stdout);
			}
			have -= nl + 1 - buf;
			memmove(buf, nl + 1, have + 1);
		}
		if (have == sizeof(buf) - 1)
			have = 0;	/* a line longer than the buffer: drop it */
	}
}

/*
 * --follow: the module's trace events in a tracefs instance of our own
 * (instances/pdctl-PID), so whatever else traces is not disturbed; removed
 * on exit.
 */
static int events_follow(bool all)
{
	static const char *const tdirs[] = { "/sys/kernel/tracing", "/sys/kernel/debug/tracing" };
	char inst[128], path[256];
	unsigned int k;
	int ret, f = -1;

	inst[0] = 0;
	for (k = 0; k < 2 && !inst[0]; k++) {
		snprintf(path, sizeof(path), "%s/instances", tdirs[k]);
		if (!access(path, W_OK))
			snprintf(inst, sizeof(inst), "%s/instances/pdctl-%d", tdirs[k], (int)getpid());
	}
	if (!inst[0]) {
		err("events --follow: no writable tracefs (root needed; mount -t tracefs nodev /sys/kernel/tracing)");
		return errno == EACCES || errno == EPERM ? EX_PERM : EX_FAIL;
	}
	if (mkdir(inst, 0700)) {
		err("%s: %s", inst, strerror(errno));
		return errno_exit(errno);
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGPIPE, on_signal);
	/* revocations and their delivery by default; every event with --all */
	ret = enable_events(inst, all, path, sizeof(path));
	if (ret) {
		err("%s: %s (is the module loaded?)", path, strerror(-ret));
		ret = errno_exit(-ret);
		goto out;
	}
	snprintf(path, sizeof(path), "%s/trace_pipe", inst);
	f = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (f < 0) {
		err("%s: %s", path, strerror(errno));
		ret = EX_FAIL;
		goto out;
	}
	if (!json) {
		printf("# following peerdirect trace events (Ctrl-C ends)\n");
		fflush(stdout);
	}
	pump(f);
	ret = 0;
out:
	if (f >= 0)
		close(f);
	snprintf(path, sizeof(path), "%s/events/peerdirect/enable", inst);
	write_file(path, "0");
	if (rmdir(inst))
		err("%s: %s (remove it by hand)", inst, strerror(errno));
	return ret;
}

/* events [--follow [--all]] */
int cmd_events(int argc, char **argv)
{
	bool follow = false, all = false;
	int devs[MAX_DEVS], n, i, ret;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--follow") || !strcmp(argv[i], "-f")) {
			follow = true;
		} else if (!strcmp(argv[i], "--all")) {
			all = true;
		} else {
			err("events: unknown argument '%s'", argv[i]);
			return EX_USAGE;
		}
	}
	if (all && !follow) {
		err("events: --all goes with --follow");
		return EX_USAGE;
	}
	ret = select_devices(devs, &n);
	if (ret)
		return ret;
	return follow ? events_follow(all) : events_counters(devs, n);
}
