// SPDX-License-Identifier: MIT
/*
 * pdctl revoke and reset: the administrative revocations, one export or
 * every export of a device (CAP_SYS_ADMIN), and what is left mapped.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>
#include <linux/peerdirect.h>

#include "pdctl.h"
#include "json.h"
#include "../tool_args.h"

#define err pdctl_err

/*
 * One administrative ioctl on device dev: 0, or the exit code once the
 * error is said (EPERM names the capability; ENOENT gets enoent_hint).
 */
static int admin_ioctl(int dev, unsigned long req, void *arg, const char *what,
		       const char *enoent_hint)
{
	int fd = open_dev(dev, O_RDWR), e;

	if (fd < 0)
		return errno_exit(-fd);
	if (!ioctl(fd, req, arg)) {
		close(fd);
		return 0;
	}
	e = errno;
	err("peerdirect%d: %s: %s%s", dev, what, strerror(e),
	    e == EPERM ? " (CAP_SYS_ADMIN needed)" :
	    e == ENOENT && enoent_hint ? enoent_hint : "");
	close(fd);
	return errno_exit(e);
}

/* A revocation's outcome as one JSON object; export_id 0 for a reset. */
static void print_revoked_json(int dev, uint64_t export_id, uint64_t revoked, uint64_t pending)
{
	jopen_device(dev);
	if (export_id)
		ju64("export_id", export_id);
	ju64("revoked", revoked);
	ju64("pending", pending);
	jclose('}');
	putchar('\n');
}

int cmd_revoke(int argc, char **argv)
{
	struct peerdirect_revoke r = { .argsz = sizeof(r), .flags = PEERDIRECT_REVOKE_EXPORT };
	int devs[MAX_DEVS], n, ret;
	unsigned long long id;
	char what[48];

	if (argc != 2) {
		err("usage: pdctl -d DEVICE revoke EXPORT_ID");
		return EX_USAGE;
	}
	if (want_dev < 0) {
		err("revoke: -d DEVICE required (export ids are per device; see pdctl exports)");
		return EX_USAGE;
	}
	if (tool_ull(argv[1], 1, UINT64_MAX, &id)) {
		err("revoke: bad export id '%s' (a whole number from 1)", argv[1]);
		return EX_USAGE;
	}
	r.export_id = id;
	ret = select_devices(devs, &n);
	if (ret)
		return ret;
	snprintf(what, sizeof(what), "revoke export %llu", (unsigned long long)r.export_id);
	ret = admin_ioctl(devs[0], PEERDIRECT_IOCTL_ADMIN_REVOKE, &r, what,
			  " (no such export on this device; see pdctl exports)");
	if (ret)
		return ret;
	if (json)
		print_revoked_json(devs[0], r.export_id, r.revoked, r.pending);
	else
		printf("peerdirect%d: export %llu: %s%s\n", devs[0],
		       (unsigned long long)r.export_id,
		       r.revoked ? "revoked" : "already revoked",
		       r.pending ? ", still mapped by an importer (memory quarantined)" : "");
	return r.pending ? EX_PENDING : 0;
}

int cmd_reset(int argc, char **argv)
{
	struct peerdirect_reset r = { .argsz = sizeof(r) };
	int devs[MAX_DEVS], n, ret;

	(void)argv;
	if (argc != 1 || want_dev < 0) {
		err("usage: pdctl -d DEVICE reset (a reset revokes every export of the device)");
		return EX_USAGE;
	}
	ret = select_devices(devs, &n);
	if (ret)
		return ret;
	ret = admin_ioctl(devs[0], PEERDIRECT_IOCTL_RESET, &r, "reset", NULL);
	if (ret)
		return ret;
	if (json)
		print_revoked_json(devs[0], 0, r.revoked, r.pending);
	else
		printf("peerdirect%d: reset revoked %u export(s), %u still mapped by importers\n",
		       devs[0], r.revoked, r.pending);
	return r.pending ? EX_PENDING : 0;
}
