// SPDX-License-Identifier: GPL-2.0
/*
 * Attributes of /sys/class/misc/peerdirectN/, a stable source for
 * administrators' tools (debugfs is for developers): what the device is,
 * how full it is, and what revocation has done.  One value per file;
 * revocations by reason under revoked/.  Read-only and world-readable:
 * nothing here names a process.  The misc core creates and removes them
 * with the device node (misc.groups), so the pd_device outlives every
 * reader: unplug's misc_deregister() waits for readers to leave.
 */
#include <linux/device.h>
#include <linux/sysfs.h>
#include "peerdirect.h"

static struct pd_device *pd_from_dev(struct device *dev)
{
	struct miscdevice *misc = dev_get_drvdata(dev);

	return container_of(misc, struct pd_device, misc);
}

struct pd_sysfs_counts {
	u64 mem_free, quarantined, nr_allocs, nr_exports, exports_total;
	u64 revoked[PD_REVOKE_NR_REASONS], revoke_timeouts, resets;
	const char *state;
};

/*
 * Lock-free (see pd_device.lock): each value is one that was true, not all
 * of them at the same instant, which a monitoring tool does not need.
 */
static void pd_sysfs_counts(struct pd_device *pd, struct pd_sysfs_counts *c)
{
	int i;

	c->nr_allocs = READ_ONCE(pd->nr_allocs);
	c->nr_exports = READ_ONCE(pd->nr_live_exports);
	c->mem_free = pd_device_mem_free(pd);
	c->quarantined = atomic64_read(&pd->quarantined);
	c->exports_total = atomic64_read(&pd->nr_exports_total);
	for (i = 0; i < PD_REVOKE_NR_REASONS; i++)
		c->revoked[i] = atomic64_read(&pd->nr_revoked[i]);
	c->revoke_timeouts = atomic64_read(&pd->nr_revoke_timeouts);
	c->resets = atomic64_read(&pd->nr_resets);
	c->state = READ_ONCE(pd->dead) ? "unplugged" :
		   READ_ONCE(pd->resetting) ? "resetting" : "live";
}

#define PD_ATTR_COUNT(_name, _field)					\
static ssize_t _name##_show(struct device *dev,				\
			    struct device_attribute *attr, char *buf)	\
{									\
	struct pd_sysfs_counts c;					\
									\
	pd_sysfs_counts(pd_from_dev(dev), &c);				\
	return sysfs_emit(buf, "%llu\n", c._field);			\
}									\
static DEVICE_ATTR_RO(_name)

#define PD_ATTR_CONST(_name, _fmt, _expr)				\
static ssize_t _name##_show(struct device *dev,				\
			    struct device_attribute *attr, char *buf)	\
{									\
	struct pd_device *pd = pd_from_dev(dev);			\
									\
	return sysfs_emit(buf, _fmt "\n", _expr);			\
}									\
static DEVICE_ATTR_RO(_name)

PD_ATTR_CONST(backend, "%s", pd->ops->name);
/* 1: RAM standing in for device memory (sim_devices), nothing to accelerate. */
PD_ATTR_CONST(simulated, "%d", pd->ops->kind == PEERDIRECT_BACKEND_SIM);
PD_ATTR_CONST(features, "0x%llx", pd_device_features(pd));
PD_ATTR_CONST(p2pdma, "%d",
	      !!(pd_device_features(pd) & PEERDIRECT_FEAT_P2PDMA));
PD_ATTR_CONST(mem_size, "%llu", pd->mem_size);
PD_ATTR_CONST(page_size, "%llu", pd->page_size);
PD_ATTR_CONST(quota, "%llu", pd->quota);
PD_ATTR_CONST(max_exports, "%u", pd->max_exports);
PD_ATTR_CONST(max_events, "%u", pd->max_events);
PD_ATTR_CONST(importer_mappings, "%d", atomic_read(&pd->nr_reach));
PD_ATTR_COUNT(mem_free, mem_free);
PD_ATTR_COUNT(quarantined, quarantined);
PD_ATTR_COUNT(nr_allocs, nr_allocs);
PD_ATTR_COUNT(nr_exports, nr_exports);
PD_ATTR_COUNT(exports_total, exports_total);
PD_ATTR_COUNT(revoke_timeouts, revoke_timeouts);
PD_ATTR_COUNT(resets, resets);

static ssize_t abi_version_show(struct device *dev,
				struct device_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%u.%u\n", PEERDIRECT_ABI_MAJOR,
			  PEERDIRECT_ABI_MINOR);
}
static DEVICE_ATTR_RO(abi_version);

static ssize_t state_show(struct device *dev, struct device_attribute *attr,
			  char *buf)
{
	struct pd_sysfs_counts c;

	pd_sysfs_counts(pd_from_dev(dev), &c);
	return sysfs_emit(buf, "%s\n", c.state);
}
static DEVICE_ATTR_RO(state);

static struct attribute *pd_attrs[] = {
	&dev_attr_backend.attr,
	&dev_attr_simulated.attr,
	&dev_attr_abi_version.attr,
	&dev_attr_features.attr,
	&dev_attr_p2pdma.attr,
	&dev_attr_state.attr,
	&dev_attr_mem_size.attr,
	&dev_attr_mem_free.attr,
	&dev_attr_page_size.attr,
	&dev_attr_quota.attr,
	&dev_attr_quarantined.attr,
	&dev_attr_max_exports.attr,
	&dev_attr_max_events.attr,
	&dev_attr_nr_allocs.attr,
	&dev_attr_nr_exports.attr,
	&dev_attr_exports_total.attr,
	&dev_attr_importer_mappings.attr,
	&dev_attr_revoke_timeouts.attr,
	&dev_attr_resets.attr,
	NULL,
};

static const struct attribute_group pd_attr_group = {
	.attrs = pd_attrs,
};

/* revoked/<reason>: exports revoked for that reason since the device came. */
#define PD_ATTR_REVOKED(_name, _reason)					\
static ssize_t revoked_##_name##_show(struct device *dev,		\
				      struct device_attribute *attr,	\
				      char *buf)			\
{									\
	struct pd_sysfs_counts c;					\
									\
	pd_sysfs_counts(pd_from_dev(dev), &c);				\
	return sysfs_emit(buf, "%llu\n", c.revoked[(_reason) - 1]);	\
}									\
static struct device_attribute dev_attr_revoked_##_name =		\
	__ATTR(_name, 0444, revoked_##_name##_show, NULL)

PD_ATTR_REVOKED(free, PD_REVOKE_FREE);
PD_ATTR_REVOKED(revoke, PD_REVOKE_USER);
PD_ATTR_REVOKED(reset, PD_REVOKE_RESET);
PD_ATTR_REVOKED(admin, PD_REVOKE_ADMIN);
PD_ATTR_REVOKED(unplug, PD_REVOKE_UNPLUG);

static struct attribute *pd_revoked_attrs[] = {
	&dev_attr_revoked_free.attr,
	&dev_attr_revoked_revoke.attr,
	&dev_attr_revoked_reset.attr,
	&dev_attr_revoked_admin.attr,
	&dev_attr_revoked_unplug.attr,
	NULL,
};

static const struct attribute_group pd_revoked_group = {
	.name = "revoked",
	.attrs = pd_revoked_attrs,
};

const struct attribute_group *pd_attr_groups[] = {
	&pd_attr_group,
	&pd_revoked_group,
	NULL,
};
