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
#include "trace.h"

static int pd_open(struct inode *inode, struct file *filp)
{
	/*
	 * misc_open() holds the global misc_mtx, which unplug's
	 * misc_deregister() takes: only files_lock here, never
	 * pd_device.lock, so no open of any misc device waits for this one.
	 */
	struct pd_device *pd = container_of(filp->private_data,
					      struct pd_device, misc);
	struct pd_file *pfile;

	pfile = kzalloc(sizeof(*pfile), GFP_KERNEL_ACCOUNT);
	if (!pfile)
		return -ENOMEM;

	kref_init(&pfile->ref);
	xa_init_flags(&pfile->allocs, XA_FLAGS_ALLOC1);
	mutex_init(&pfile->ev_read_lock);
	mutex_init(&pfile->ev_lock);
	init_waitqueue_head(&pfile->ev_wq);
	INIT_LIST_HEAD(&pfile->subs);
	pfile->pd = pd;

	mutex_lock(&pd->files_lock);
	if (READ_ONCE(pd->dead)) {
		mutex_unlock(&pd->files_lock);
		kfree(pfile);
		return -ENODEV;
	}
	kref_get(&pd->ref);
	list_add_tail(&pfile->node, &pd->files);
	mutex_unlock(&pd->files_lock);

	filp->private_data = pfile;
	return nonseekable_open(inode, filp);
}

static void pd_file_release_ref(struct kref *ref)
{
	struct pd_file *pfile = container_of(ref, struct pd_file, ref);
	struct pd_device *pd = pfile->pd;

	xa_destroy(&pfile->allocs);
	mutex_destroy(&pfile->ev_read_lock);
	mutex_destroy(&pfile->ev_lock);
	kvfree(pfile->ev_ring);
	kfree(pfile);
	pd_device_put(pd);
}

void pd_file_put(struct pd_file *pfile)
{
	kref_put(&pfile->ref, pd_file_release_ref);
}

/*
 * Closing the context frees its allocations: their exports are revoked
 * (reason FREE) and the memory returns to the pool once every dma-buf over
 * it is released.  Exports outliving the file keep a reference to it.
 */
static int pd_release(struct inode *inode, struct file *filp)
{
	struct pd_file *pfile = filp->private_data;
	struct pd_device *pd = pfile->pd;
	struct pd_alloc *alloc;
	unsigned long handle;

	pd_subs_drop_file(pfile);
	mutex_lock(&pfile->ev_lock);
	pfile->closed = true;
	mutex_unlock(&pfile->ev_lock);

	xa_for_each(&pfile->allocs, handle, alloc)
		pd_alloc_free(pfile, handle);

	mutex_lock(&pd->files_lock);
	list_del(&pfile->node);
	mutex_unlock(&pd->files_lock);

	pd_file_put(pfile);
	return 0;
}

/*
 * The event ring is allocated with the file's first export, the first
 * thing that can be revoked, and charged to the caller's memory cgroup:
 * files that never export cost no ring, and queueing an event never
 * allocates.
 */
int pd_file_events_init(struct pd_file *pfile)
{
	struct peerdirect_event *ring;

	if (READ_ONCE(pfile->ev_ring))
		return 0;
	ring = kvcalloc(pfile->pd->max_events, sizeof(*ring), GFP_KERNEL_ACCOUNT);
	if (!ring)
		return -ENOMEM;
	mutex_lock(&pfile->ev_lock);
	if (!pfile->ev_ring) {
		pfile->ev_ring = ring;
		ring = NULL;
	}
	mutex_unlock(&pfile->ev_lock);
	kvfree(ring);
	return 0;
}

/*
 * Past max_events, or while an OVERFLOW record is waiting to be read,
 * events are dropped: the reader treats every export as revoked when it
 * reads the OVERFLOW record, which covers them.  The record's sequence
 * number is taken when the first event is dropped, so numbers stay unique
 * and increasing in the order records are read.
 */
/*
 * The device is gone and every UNPLUG record is queued: readers get them,
 * then ENODEV; poll reports hang-up.  Under pd_device.lock, after the
 * unplug's revocation walk.
 */
void pd_file_gone(struct pd_file *pfile)
{
	mutex_lock(&pfile->ev_lock);
	WRITE_ONCE(pfile->gone, true);
	mutex_unlock(&pfile->ev_lock);
	wake_up_interruptible_all(&pfile->ev_wq);
}

static void pd_event_init(struct peerdirect_event *ev, u32 reason)
{
	memset(ev, 0, sizeof(*ev));
	ev->hdr.type = PEERDIRECT_EVENT_REVOKE;
	ev->hdr.length = sizeof(*ev);
	ev->reason = reason;
}

static void pd_file_queue(struct pd_file *pfile, const struct pd_export *exp,
			  u32 reason, u32 flags, u64 handle, u64 cookie)
{
	struct peerdirect_event *ev;
	u32 max = pfile->pd->max_events;
	int queued = 0;

	mutex_lock(&pfile->ev_lock);
	if (pfile->closed || !pfile->ev_ring)
		goto out;
	if (pfile->ev_overflow)
		goto out;
	if (pfile->ev_count == max) {
		pfile->ev_overflow = true;
		pfile->ev_overflow_seq = ++pfile->ev_seq;
		queued = -1;
		goto wake;
	}
	ev = &pfile->ev_ring[(pfile->ev_head + pfile->ev_count) % max];
	pd_event_init(ev, reason);
	ev->flags = flags;
	ev->seq = ++pfile->ev_seq;
	ev->export_id = exp->id;
	ev->handle = handle;
	ev->inode = exp->inode;
	ev->offset = exp->offset;
	ev->length = exp->length;
	ev->cookie = cookie;
	pfile->ev_count++;
	queued = 1;
wake:
	wake_up_interruptible(&pfile->ev_wq);
out:
	trace_peerdirect_event(pfile->pd->index, exp->id, reason, flags,
			       queued ? pfile->ev_seq : 0, queued);
	mutex_unlock(&pfile->ev_lock);
}

/* To the owner, the file that exported it. */
void pd_file_queue_event(struct pd_file *pfile, const struct pd_export *exp,
			 u32 reason)
{
	pd_file_queue(pfile, exp, reason, 0, exp->alloc->handle, 0);
}

/* To a subscriber: the allocation handle is not its to know. */
void pd_file_queue_sub_event(struct pd_file *pfile, const struct pd_export *exp,
			     u32 reason, u64 cookie)
{
	pd_file_queue(pfile, exp, reason, PEERDIRECT_EVENT_SUBSCRIBED, 0, cookie);
}

static bool pd_events_ready(struct pd_file *pfile)
{
	return READ_ONCE(pfile->ev_count) || READ_ONCE(pfile->ev_overflow) ||
	       READ_ONCE(pfile->gone);
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
static u32 pd_events_peek(struct pd_file *pfile, struct peerdirect_event *ev,
			  u32 max, bool *overflow)
{
	u32 qmax = pfile->pd->max_events, n;

	*overflow = false;
	for (n = 0; n < max && n < pfile->ev_count; n++)
		ev[n] = pfile->ev_ring[(pfile->ev_head + n) % qmax];
	if (n < max && n == pfile->ev_count && pfile->ev_overflow) {
		pd_event_init(&ev[n], PEERDIRECT_REASON_OVERFLOW);
		ev[n].seq = pfile->ev_overflow_seq;
		*overflow = true;
		n++;
	}
	return n;
}

/* Consumes what pd_events_peek() returned and the reader delivered. */
static void pd_events_consume(struct pd_file *pfile, u32 n, bool overflow)
{
	if (overflow) {
		n--;
		pfile->ev_overflow = false;
	}
	pfile->ev_head = (pfile->ev_head + n) % pfile->pd->max_events;
	pfile->ev_count -= n;
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
	struct pd_file *pfile = filp->private_data;
	struct peerdirect_event ev[PD_READ_BATCH];
	size_t done = 0;
	bool overflow;
	u32 n;
	int ret;

	if (count < sizeof(ev[0]))
		return -EINVAL;
	ret = mutex_lock_interruptible(&pfile->ev_read_lock);
	if (ret)
		return ret;

	for (;;) {
		u32 room = min_t(size_t, (count - done) / sizeof(ev[0]), PD_READ_BATCH);

		mutex_lock(&pfile->ev_lock);
		n = room ? pd_events_peek(pfile, ev, room, &overflow) : 0;
		mutex_unlock(&pfile->ev_lock);

		if (n) {
			if (copy_to_user(buf + done, ev, n * sizeof(ev[0]))) {
				ret = done ? 0 : -EFAULT;
				break;
			}
			mutex_lock(&pfile->ev_lock);
			pd_events_consume(pfile, n, overflow);
			mutex_unlock(&pfile->ev_lock);
			done += n * sizeof(ev[0]);
			continue;
		}
		if (done)
			break;
		if (READ_ONCE(pfile->gone)) {
			ret = -ENODEV;
			break;
		}
		if (filp->f_flags & O_NONBLOCK) {
			ret = -EAGAIN;
			break;
		}
		mutex_unlock(&pfile->ev_read_lock);
		ret = wait_event_interruptible(pfile->ev_wq, pd_events_ready(pfile));
		if (ret)
			return ret;
		ret = mutex_lock_interruptible(&pfile->ev_read_lock);
		if (ret)
			return ret;
	}
	mutex_unlock(&pfile->ev_read_lock);
	return done ? done : ret;
}

static __poll_t pd_poll(struct file *filp, struct poll_table_struct *wait)
{
	struct pd_file *pfile = filp->private_data;
	__poll_t mask = 0;

	poll_wait(filp, &pfile->ev_wq, wait);
	if (READ_ONCE(pfile->ev_count) || READ_ONCE(pfile->ev_overflow))
		mask |= EPOLLIN | EPOLLRDNORM;
	if (READ_ONCE(pfile->gone))
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
