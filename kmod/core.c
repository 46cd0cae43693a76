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
#include <linux/slab.h>
#include "compat.h"
#include "peerdirect.h"

static unsigned int quota_mb;
module_param(quota_mb, uint, 0444);
MODULE_PARM_DESC(quota_mb, "Per-process device memory quota in MiB (0 = the whole device)");

static unsigned int max_exports = 64;
module_param(max_exports, uint, 0444);
MODULE_PARM_DESC(max_exports, "Live dma-buf exports allowed per allocation (default 64)");

static unsigned int max_events = 1024;
module_param(max_events, uint, 0444);
MODULE_PARM_DESC(max_events, "Revocation events queued per open file before overflow (default 1024)");

unsigned int pd_revoke_timeout_ms = 2000;
module_param_named(revoke_timeout_ms, pd_revoke_timeout_ms, uint, 0644);
MODULE_PARM_DESC(revoke_timeout_ms,
		 "How long a revoke waits for importers to unmap before leaving the memory quarantined (default 2000)");

static DEFINE_IDA(pd_ida);

struct pd_device *pd_device_create(const struct pd_backend_ops *ops,
				   void *backend, struct device *parent,
				   u64 mem_size, u64 page_size)
{
	struct pd_device *pdev;

	if (!is_power_of_2(page_size) || page_size < PAGE_SIZE ||
	    !mem_size || !IS_ALIGNED(mem_size, page_size))
		return ERR_PTR(-EINVAL);

	pdev = kzalloc(sizeof(*pdev), GFP_KERNEL);
	if (!pdev)
		return ERR_PTR(-ENOMEM);

	kref_init(&pdev->ref);
	pdev->index = -1;
	pdev->ops = ops;
	pdev->backend = backend;
	pdev->parent = parent;
	pdev->mem_size = mem_size;
	pdev->page_size = page_size;
	pdev->quota = quota_mb ? min_t(u64, (u64)quota_mb << 20, mem_size) : mem_size;
	pdev->max_exports = max(max_exports, 1U);
	pdev->max_events = clamp(max_events, 16U, 65536U);
	mutex_init(&pdev->lock);
	INIT_LIST_HEAD(&pdev->files);
	INIT_LIST_HEAD(&pdev->owners);
	INIT_LIST_HEAD(&pdev->allocs);
	init_waitqueue_head(&pdev->dead_wq);

	/*
	 * genalloc treats address 0 as failure, so device memory offset X is
	 * pool address X + page_size.
	 */
	pdev->pool = gen_pool_create(ilog2(page_size), NUMA_NO_NODE);
	if (!pdev->pool)
		goto err_free;
	if (gen_pool_add(pdev->pool, page_size, mem_size, NUMA_NO_NODE))
		goto err_pool;
	return pdev;

err_pool:
	gen_pool_destroy(pdev->pool);
err_free:
	kfree(pdev);
	return ERR_PTR(-ENOMEM);
}

int pd_device_register(struct pd_device *pdev)
{
	int ret;

	ret = ida_alloc(&pd_ida, GFP_KERNEL);
	if (ret < 0)
		return ret;
	pdev->index = ret;
	snprintf(pdev->name, sizeof(pdev->name), "peerdirect%d", pdev->index);

	pdev->misc.minor = MISC_DYNAMIC_MINOR;
	pdev->misc.name = pdev->name;
	pdev->misc.fops = &pd_fops;
	pdev->misc.mode = 0660;
	pdev->misc.parent = pdev->parent;
	ret = misc_register(&pdev->misc);
	if (ret) {
		ida_free(&pd_ida, pdev->index);
		pdev->index = -1;
		return ret;
	}
	pdev->registered = true;
	pd_debugfs_add(pdev);
	dev_info(pdev->misc.this_device, "%s backend, %llu MiB, %llu KiB pages\n",
		 pdev->ops->name, pdev->mem_size >> 20, pdev->page_size >> 10);
	return 0;
}

static void pd_device_release(struct kref *ref)
{
	struct pd_device *pdev = container_of(ref, struct pd_device, ref);

	WARN_ON(!list_empty(&pdev->allocs));
	/* Every allocation returned its range, so the pool is whole again. */
	gen_pool_destroy(pdev->pool);
	if (pdev->ops->release)
		pdev->ops->release(pdev);
	if (pdev->index >= 0)
		ida_free(&pd_ida, pdev->index);
	mutex_destroy(&pdev->lock);
	kfree(pdev);
}

void pd_device_put(struct pd_device *pdev)
{
	kref_put(&pdev->ref, pd_device_release);
}

/*
 * Take the device away from users: no new opens, every export revoked
 * (importers notified, CPU mappings zapped), readers woken.  Open files and
 * live dma-bufs keep the structure; their calls now fail with ENODEV.
 */
void pd_device_unplug(struct pd_device *pdev)
{
	struct pd_revoke_result res = {};
	struct pd_file *file;

	if (!pdev->registered)
		return;

	mutex_lock(&pdev->lock);
	pdev->dead = true;
	mutex_unlock(&pdev->lock);

	misc_deregister(&pdev->misc);
	pd_revoke_device(pdev, PD_REVOKE_UNPLUG, &res);
	if (res.pending)
		pr_warn("%s: removed with %u export(s) still mapped by importers\n",
			pdev->name, res.pending);
	if (pdev->ops->unplug)
		pdev->ops->unplug(pdev);

	mutex_lock(&pdev->lock);
	list_for_each_entry(file, &pdev->files, node)
		wake_up_interruptible_all(&file->ev_wq);
	mutex_unlock(&pdev->lock);

	pd_debugfs_remove(pdev);
	pdev->registered = false;
}

u64 pd_device_mem_free(struct pd_device *pdev)
{
	return gen_pool_avail(pdev->pool);
}

static int __init peerdirect_init(void)
{
	int ret;

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
	return ret;
}

static void __exit peerdirect_exit(void)
{
	pd_pci_exit();
	pd_sim_exit();
	pd_debugfs_exit();
	ida_destroy(&pd_ida);
}

module_init(peerdirect_init);
module_exit(peerdirect_exit);

MODULE_DESCRIPTION("Export accelerator device memory as DMA-BUF, with pinning and revocation");
MODULE_AUTHOR("peerdirect developers");
MODULE_LICENSE("GPL");
PD_MODULE_IMPORT_DMA_BUF();
