// SPDX-License-Identifier: GPL-2.0
/*
 * /dev/peerdirectN: one open file is one memory context.  Allocation
 * handles are scoped to it, and read()/poll() deliver records of its
 * exports that were revoked, so a registration cache can drop them.
 */
#include <linux/fs.h>
#include <linux/poll.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include "peerdirect.h"

static int pd_open(struct inode *inode, struct file *filp)
{
	/* misc_open() holds misc_mtx, which unplug's misc_deregister() takes. */
	struct pd_device *pdev = container_of(filp->private_data,
					      struct pd_device, misc);
	struct pd_file *file;

	file = kzalloc(sizeof(*file), GFP_KERNEL);
	if (!file)
		return -ENOMEM;
	file->ev_ring = kvcalloc(pdev->max_events, sizeof(*file->ev_ring),
				 GFP_KERNEL);
	if (!file->ev_ring)
		goto err_free;
	file->tgid = task_tgid_nr(current);
	file->owner = pd_owner_get(pdev, file->tgid);
	if (!file->owner)
		goto err_ring;

	kref_init(&file->ref);
	xa_init_flags(&file->allocs, XA_FLAGS_ALLOC1);
	mutex_init(&file->ev_read_lock);
	mutex_init(&file->ev_lock);
	init_waitqueue_head(&file->ev_wq);
	file->pdev = pdev;

	mutex_lock(&pdev->lock);
	if (pdev->dead) {
		mutex_unlock(&pdev->lock);
		pd_owner_put(file->owner);
		kvfree(file->ev_ring);
		kfree(file);
		return -ENODEV;
	}
	kref_get(&pdev->ref);
	list_add_tail(&file->node, &pdev->files);
	mutex_unlock(&pdev->lock);

	filp->private_data = file;
	return nonseekable_open(inode, filp);

err_ring:
	kvfree(file->ev_ring);
err_free:
	kfree(file);
	return -ENOMEM;
}

static void pd_file_release_ref(struct kref *ref)
{
	struct pd_file *file = container_of(ref, struct pd_file, ref);
	struct pd_device *pdev = file->pdev;

	xa_destroy(&file->allocs);
	pd_owner_put(file->owner);
	mutex_destroy(&file->ev_read_lock);
	mutex_destroy(&file->ev_lock);
	kvfree(file->ev_ring);
	kfree(file);
	pd_device_put(pdev);
}

void pd_file_put(struct pd_file *file)
{
	kref_put(&file->ref, pd_file_release_ref);
}

/*
 * Closing the context frees its allocations: their exports are revoked
 * (reason FREE) and the memory returns to the pool once every dma-buf over
 * it is released.  Exports outliving the file keep a reference to it.
 */
static int pd_release(struct inode *inode, struct file *filp)
{
	struct pd_file *file = filp->private_data;
	struct pd_device *pdev = file->pdev;
	struct pd_alloc *alloc;
	unsigned long handle;

	mutex_lock(&file->ev_lock);
	file->closed = true;
	mutex_unlock(&file->ev_lock);

	xa_for_each(&file->allocs, handle, alloc)
		pd_alloc_free(file, handle);

	mutex_lock(&pdev->lock);
	list_del(&file->node);
	mutex_unlock(&pdev->lock);

	pd_file_put(file);
	return 0;
}

void pd_file_queue_event(struct pd_file *file, const struct pd_export *exp)
{
	struct peerdirect_event *ev;
	u32 max = file->pdev->max_events;

	mutex_lock(&file->ev_lock);
	if (file->closed)
		goto out;
	if (file->ev_count == max) {
		file->ev_overflow = true;
		goto wake;
	}
	ev = &file->ev_ring[(file->ev_head + file->ev_count) % max];
	memset(ev, 0, sizeof(*ev));
	ev->size = sizeof(*ev);
	ev->reason = exp->reason;
	ev->seq = ++file->ev_seq;
	ev->export_id = exp->id;
	ev->handle = exp->alloc->handle;
	ev->inode = exp->inode;
	ev->offset = exp->offset;
	ev->length = exp->length;
	file->ev_count++;
wake:
	wake_up_interruptible(&file->ev_wq);
out:
	mutex_unlock(&file->ev_lock);
}

static bool pd_events_ready(struct pd_file *file)
{
	return READ_ONCE(file->ev_count) || READ_ONCE(file->ev_overflow) ||
	       READ_ONCE(file->pdev->dead);
}

/*
 * Records staged on the stack per copy_to_user(): small, so pd_read()'s
 * frame stays far below 1 KiB with KASAN and on 32-bit kernels; read()
 * loops for more.
 */
#define PD_READ_BATCH	4

/*
 * Copies up to @max records from the head of the queue, without consuming
 * them; the overflow marker comes last.  Under ev_lock.
 */
static u32 pd_events_peek(struct pd_file *file, struct peerdirect_event *ev,
			  u32 max, bool *overflow)
{
	u32 qmax = file->pdev->max_events, n;

	*overflow = false;
	for (n = 0; n < max && n < file->ev_count; n++)
		ev[n] = file->ev_ring[(file->ev_head + n) % qmax];
	if (n < max && n == file->ev_count && file->ev_overflow) {
		memset(&ev[n], 0, sizeof(ev[n]));
		ev[n].size = sizeof(ev[n]);
		ev[n].reason = PEERDIRECT_REASON_OVERFLOW;
		ev[n].seq = file->ev_seq + 1;
		*overflow = true;
		n++;
	}
	return n;
}

/* Consumes what pd_events_peek() returned and the reader delivered. */
static void pd_events_consume(struct pd_file *file, u32 n, bool overflow)
{
	if (overflow) {
		n--;
		file->ev_overflow = false;
		file->ev_seq++;
	}
	file->ev_head = (file->ev_head + n) % file->pdev->max_events;
	file->ev_count -= n;
}

/*
 * Records are copied to userspace with ev_lock dropped and consumed only
 * once delivered, so a faulting or stalled copy neither loses an event nor
 * holds up revocation.  ev_read_lock keeps two readers from delivering the
 * same records.
 */
static ssize_t pd_read(struct file *filp, char __user *buf, size_t count,
		       loff_t *ppos)
{
	struct pd_file *file = filp->private_data;
	struct peerdirect_event ev[PD_READ_BATCH];
	size_t done = 0;
	bool overflow;
	u32 n;
	int ret;

	if (count < sizeof(ev[0]))
		return -EINVAL;
	ret = mutex_lock_interruptible(&file->ev_read_lock);
	if (ret)
		return ret;

	for (;;) {
		u32 room = min_t(size_t, (count - done) / sizeof(ev[0]), PD_READ_BATCH);

		mutex_lock(&file->ev_lock);
		n = room ? pd_events_peek(file, ev, room, &overflow) : 0;
		mutex_unlock(&file->ev_lock);

		if (n) {
			if (copy_to_user(buf + done, ev, n * sizeof(ev[0]))) {
				ret = done ? 0 : -EFAULT;
				break;
			}
			mutex_lock(&file->ev_lock);
			pd_events_consume(file, n, overflow);
			mutex_unlock(&file->ev_lock);
			done += n * sizeof(ev[0]);
			continue;
		}
		if (done)
			break;
		if (READ_ONCE(file->pdev->dead)) {
			ret = -ENODEV;
			break;
		}
		if (filp->f_flags & O_NONBLOCK) {
			ret = -EAGAIN;
			break;
		}
		mutex_unlock(&file->ev_read_lock);
		ret = wait_event_interruptible(file->ev_wq, pd_events_ready(file));
		if (ret)
			return ret;
		ret = mutex_lock_interruptible(&file->ev_read_lock);
		if (ret)
			return ret;
	}
	mutex_unlock(&file->ev_read_lock);
	return done ? done : ret;
}

static __poll_t pd_poll(struct file *filp, struct poll_table_struct *wait)
{
	struct pd_file *file = filp->private_data;
	__poll_t mask = 0;

	poll_wait(filp, &file->ev_wq, wait);
	if (READ_ONCE(file->ev_count) || READ_ONCE(file->ev_overflow))
		mask |= EPOLLIN | EPOLLRDNORM;
	if (READ_ONCE(file->pdev->dead))
		mask |= EPOLLHUP | EPOLLERR;
	return mask;
}

const struct file_operations pd_fops = {
	.owner = THIS_MODULE,
	.open = pd_open,
	.release = pd_release,
	.read = pd_read,
	.poll = pd_poll,
	.unlocked_ioctl = pd_ioctl,
	.compat_ioctl = compat_ptr_ioctl,
};
