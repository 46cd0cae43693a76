// SPDX-License-Identifier: MIT
/*
 * A program of a libpeerdirect user, built by scripts/package-test.sh in a
 * clean Debian root from the installed packages alone:
 *
 *   cc -o sample sample.c $(pkg-config --cflags --libs peerdirect)
 *
 * It takes the function table, checks the ABI, and asks for a device (a
 * root without the module has none: that must be explained, not crash).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <peerdirect.h>

int main(void)
{
	const struct pd_api *api;
	struct pd_device *dev;
	enum pd_path path;
	int ret;

	ret = pd_get_api(PD_ABI_MAJOR, PD_ABI_MINOR, &api);
	if (ret) {
		fprintf(stderr, "pd_get_api: %s (%s)\n", pd_strerror(ret), pd_last_error());
		return 1;
	}
	printf("libpeerdirect ABI %u.%u, table of %u bytes\n", api->abi_major, api->abi_minor,
	       api->size);
	if (api->abi_major != PD_ABI_MAJOR || api->size < sizeof(*api))
		return 1;
	/* A newer minor than the library's must be refused. */
	if (pd_get_api(PD_ABI_MAJOR, PD_ABI_MINOR + 1, &api) != -ENOTSUP)
		return 1;
	printf("ENOTSUP for ABI %d.%d: %s\n", PD_ABI_MAJOR, PD_ABI_MINOR + 1, pd_last_error());
	if (pd_path_parse("bounce", &path) || strcmp(pd_path_name(path), "bounce"))
		return 1;
	ret = pd_device_open(0, &dev);
	if (ret) {
		printf("no device: %s: %s\n", pd_strerror(ret), pd_last_error());
	} else {
		printf("device 0 opened\n");
		pd_device_close(dev);
	}
	return 0;
}
