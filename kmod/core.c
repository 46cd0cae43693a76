// SPDX-License-Identifier: GPL-2.0
/*
 * peerdirect core: the device registry and module glue.  Backends create a
 * pd_device, the core gives it a /dev/peerdirectN, a quota policy and
 * debugfs, and tears it down on unplug while files and dma-bufs may still
 * hold it.
 */
#include <linux/genalloc.h>
#include <linux/idr.h>
#include <linux/log2.h>
#include <linux/module.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include "compat.h"
#include "peerdirect.h"
#define CREATE_TRACE_POINTS
#include "trace.h"

static unsigned int quota_mb;
module_param(quota_mb, uint, 0444);
MODULE_PARM_DESC(quota_mb, "Per-user (real uid) device memory quota in MiB (0 = the whole device)");

static unsigned int max_exports = 64;
module_param(max_exports, uint, 0444);
MODULE_PARM_DESC(max_exports, "Live dma-buf exports allowed per allocation (default 64)");

static unsigned int max_events = 1024;
module_param(max_events, uint, 0444);
MODULE_PARM_DESC(max_events, "Revocation events queued per open file before overflow (default 1024)");

static unsigned int max_subscriptions = 4096;
module_param(max_subscriptions, uint, 0444);
MODULE_PARM_DESC(max_subscriptions, "Dma-bufs one open file may subscribe to (PEERDIRECT_IOCTL_SUBSCRIBE; 0-1048576, default 4096)");

/*
 * Bounded: a revoke inside remove(), a reset or module exit waits this long
 * at most (once per call, not per export), and the waits are killable.
 */
#define PD_REVOKE_TIMEOUT_MAX_MS	60000
unsigned int pd_revoke_timeout_ms = 2000;

static int pd_set_revoke_timeout(const char *val, const struct kernel_param *kp)
{
	unsigned int ms;
	int ret = kstrtouint(val, 0, &ms);

	if (ret)
		return ret;
	if (ms > PD_REVOKE_TIMEOUT_MAX_MS)
		return -EINVAL;
	WRITE_ONCE(pd_revoke_timeout_ms, ms);
	return 0;
}

static const struct kernel_param_ops pd_revoke_timeout_ops = {
	.set = pd_set_revoke_timeout,
	.get = param_get_uint,
};
module_param_cb(revoke_timeout_ms, &pd_revoke_timeout_ops, &pd_revoke_timeout_ms, 0644);
MODULE_PARM_DESC(revoke_timeout_ms,
		 "How long a revoke waits for importers to unmap before leaving the memory quarantined, 0-60000 (default 2000)");

static DEFINE_IDA(pd_ida);

struct pd_device *pd_device_create(const struct pd_backend_ops *ops,
				   void *backend, struct device *parent,
				   u64 mem_size, u64 page_size)
{
	struct pd_device *pd;

	if (!is_power_of_2(page_size) || page_size < PAGE_SIZE ||
	    !mem_size || !IS_ALIGNED(mem_size, page_size))
		return ERR_PTR(-EINVAL);
	/*
	 * genalloc addresses and sizes are unsigned long: on a 32-bit kernel
	 * device memory of 4 GiB and more would be truncated, not refused.
	 */
	if (mem_size > ULONG_MAX - page_size) {
		pr_err("peerdirect: %llu bytes of device memory do not fit this kernel's address size\n",
		       mem_size);
		return ERR_PTR(-EOVERFLOW);
	}

	pd = kzalloc(sizeof(*pd), GFP_KERNEL);
	if (!pd)
		return ERR_PTR(-ENOMEM);

	kref_init(&pd->ref);
	pd->index = -1;
	pd->ops = ops;
	pd->backend = backend;
	pd->parent = parent;
	pd->mem_size = mem_size;
	pd->page_size = page_size;
	pd->quota = quota_mb ? min_t(u64, (u64)quota_mb << 20, mem_size) : mem_size;
	pd->max_exports = max(max_exports, 1U);
	pd->max_events = clamp(max_events, 16U, 65536U);
	pd->max_subscriptions = min(max_subscriptions, 1048576U);
	mutex_init(&pd->lock);
	mutex_init(&pd->files_lock);
	INIT_LIST_HEAD(&pd->files);
	INIT_LIST_HEAD(&pd->owners);
	INIT_LIST_HEAD(&pd->allocs);
	init_waitqueue_head(&pd->reset_wq);
	init_waitqueue_head(&pd->reach_wq);

	/*
	 * genalloc treats address 0 as failure, so device memory offset X is
	 * pool address X + page_size.
	 */
	pd->pool = gen_pool_create(ilog2(page_size), NUMA_NO_NODE);
	if (!pd->pool)
		goto err_free;
	if (gen_pool_add(pd->pool, page_size, mem_size, NUMA_NO_NODE))
		goto err_pool;
	return pd;

err_pool:
	gen_pool_destroy(pd->pool);
err_free:
	kfree(pd);
	return ERR_PTR(-ENOMEM);
}

int pd_device_register(struct pd_device *pd)
{
	int ret;

	ret = ida_alloc(&pd_ida, GFP_KERNEL);
	if (ret < 0)
		return ret;
	pd->index = ret;
	snprintf(pd->name, sizeof(pd->name), "peerdirect%d", pd->index);

	pd->misc.minor = MISC_DYNAMIC_MINOR;
	pd->misc.name = pd->name;
	pd->misc.fops = &pd_fops;
	pd->misc.mode = 0660;
	pd->misc.parent = pd->parent;
	pd->misc.groups = pd_attr_groups;
	ret = misc_register(&pd->misc);
	if (ret) {
		ida_free(&pd_ida, pd->index);
		pd->index = -1;
		return ret;
	}
	pd->registered = true;
	pd_debugfs_add(pd);
	dev_info(pd->misc.this_device, "%s backend, %llu MiB, %llu KiB pages\n",
		 pd->ops->name, pd->mem_size >> 20, pd->page_size >> 10);
	return 0;
}

static void pd_device_release(struct kref *ref)
{
	struct pd_device *pd = container_of(ref, struct pd_device, ref);

	WARN_ON(!list_empty(&pd->allocs));
	/* Every allocation returned its range, so the pool is whole again. */
	gen_pool_destroy(pd->pool);
	if (pd->ops->release)
		pd->ops->release(pd);
	if (pd->index >= 0)
		ida_free(&pd_ida, pd->index);
	mutex_destroy(&pd->files_lock);
	mutex_destroy(&pd->lock);
	kfree(pd);
}

void pd_device_put(struct pd_device *pd)
{
	kref_put(&pd->ref, pd_device_release);
}

/*
 * Take the device away from users: no new opens, every export revoked
 * (importers notified, CPU mappings zapped), readers woken.  Open files and
 * live dma-bufs keep the structure; their calls now fail with ENODEV.
 */
void pd_device_unplug(struct pd_device *pd)
{
	struct pd_revoke_result res = {};
	struct pd_file *pfile;

	if (!pd->registered)
		return;

	mutex_lock(&pd->lock);
	WRITE_ONCE(pd->dead, true);
	mutex_unlock(&pd->lock);

	wake_up_all(&pd->reset_wq);

	misc_deregister(&pd->misc);
	pd_revoke_device(pd, PD_REVOKE_UNPLUG, &res);
	if (res.pending)
		pr_warn("%s: removed with %u export(s) still mapped by importers\n",
			pd->name, res.pending);
	if (pd->ops->unplug)
		pd->ops->unplug(pd);

	mutex_lock(&pd->files_lock);
	list_for_each_entry(pfile, &pd->files, node)
		pd_file_gone(pfile);
	mutex_unlock(&pd->files_lock);

	pd_debugfs_remove(pd);
	pd->registered = false;
}

/* An importer mapping or vmap of device memory was made (+1) or dropped (-1). */
void pd_device_reach(struct pd_device *pd, int delta)
{
	if (atomic_add_return(delta, &pd->nr_reach) == 0)
		wake_up_all(&pd->reach_wq);
}

/*
 * No importer mapping or vmap of device memory is left, and every
 * revocation is complete (no importer left to invalidate, no PTE left to
 * zap): after unplug, for good.
 */
bool pd_device_unreachable(struct pd_device *pd)
{
	return !atomic_read(&pd->nr_reach) && !atomic_read(&pd->nr_revoking);
}

/*
 * After unplug, until no importer can reach device memory any more: no DMA
 * mapping and no vmap of it is left, and every revocation, ours or one
 * another call marked earlier and left to its revoke_work, has invalidated
 * its importers and zapped its CPU mappings.  Without bound, as vfio-pci
 * waits for its users in remove(): the backend must not give the memory
 * back while anyone can still reach it.  Logged every PD_REACH_LOG_S
 * seconds.
 */
#define PD_REACH_LOG_S	10

void pd_device_wait_unreachable(struct pd_device *pd)
{
	bool interrupted = false;
	long ret;

	while (!pd_device_unreachable(pd)) {
		pr_warn_ratelimited("%s: removal waits for %d importer mapping(s) of device memory to be released and %d revocation(s) to complete (task %s, pid %d)\n",
				    pd->name, atomic_read(&pd->nr_reach),
				    atomic_read(&pd->nr_revoking),
				    current->comm, task_pid_nr(current));
		if (interrupted) {
			wait_event_timeout(pd->reach_wq, pd_device_unreachable(pd),
					   PD_REACH_LOG_S * HZ);
			continue;
		}
		ret = wait_event_interruptible_timeout(pd->reach_wq,
						       pd_device_unreachable(pd),
						       PD_REACH_LOG_S * HZ);
		if (ret < 0)
			interrupted = true;
	}
}

u64 pd_device_mem_free(struct pd_device *pd)
{
	return gen_pool_avail(pd->pool);
}

/* What QUERY and sysfs "features" report. */
u64 pd_device_features(struct pd_device *pd)
{
	u64 features = PEERDIRECT_FEAT_EXPORT | PEERDIRECT_FEAT_PIN |
		       PEERDIRECT_FEAT_CPU_MMAP | PEERDIRECT_FEAT_EVENTS |
		       PEERDIRECT_FEAT_SUBSCRIBE | PEERDIRECT_FEAT_LIST |
		       PEERDIRECT_FEAT_LIST_ALLOCS |
		       pd->ops->features;

	if (pd->ops->dyn_features)
		features |= pd->ops->dyn_features(pd);
	if (PD_MOVE_NOTIFY > 0)
		features |= PEERDIRECT_FEAT_MOVE_NOTIFY;
	return features;
}

static int __init peerdirect_init(void)
{
	int ret;

	ret = pd_revoke_init();
	if (ret)
		return ret;
	pd_debugfs_init();
	ret = pd_sim_init();
	if (ret)
		goto err_debugfs;
	ret = pd_pci_init();
	if (ret)
		goto err_sim;
	return 0;

err_sim:
	pd_sim_exit();
err_debugfs:
	pd_debugfs_exit();
	pd_revoke_exit();
	return ret;
}

static void __exit peerdirect_exit(void)
{
	pd_pci_exit();
	pd_sim_exit();
	pd_debugfs_exit();
	pd_revoke_exit();
	ida_destroy(&pd_ida);
}

module_init(peerdirect_init);
module_exit(peerdirect_exit);

MODULE_DESCRIPTION("Export accelerator device memory as DMA-BUF, with pinning and revocation");
MODULE_AUTHOR("peerdirect developers");
MODULE_LICENSE("GPL");
MODULE_VERSION(PD_VERSION);
MODULE_INFO(probes, PD_PROBES);
PD_MODULE_IMPORT_DMA_BUF();
