// SPDX-License-Identifier: MIT
/*
 * A libpeerdirect.so.1 of ABI 1.1 for test_pdctl: pd_get_api serves minors
 * up to 1 and refuses newer ones, as a 1.1 library does; its table opens no
 * device.  pdctl's doctor, built against a newer header, must still load it.
 */
#define PD_ALLOW_1_0_SLOTS
#include <errno.h>
#include <string.h>

#include "peerdirect.h"

static const char *last_error(void)
{
	return "fake libpeerdirect 1.1";
}

static const char *str_error(int err)
{
	return strerror(-err);
}

static int device_open(unsigned int idx, struct pd_device **out)
{
	(void)idx;
	*out = NULL;
	return -ENODEV;
}

static const struct pd_api api = {
	.size = sizeof(api),
	.abi_major = 1,
	.abi_minor = 1,
	.last_error = last_error,
	.strerror = str_error,
	.device_open = device_open,
};

__attribute__((visibility("default")))
int pd_get_api(uint32_t abi_major, uint32_t abi_minor, const struct pd_api **out)
{
	if (abi_major != 1 || abi_minor > 1)
		return -ENOTSUP;
	*out = &api;
	return 0;
}
