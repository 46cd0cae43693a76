// SPDX-License-Identifier: GPL-2.0
/*
 * Revocation events for a dma-buf one holds but did not export: a network
 * plugin or a runtime is handed the fd, not the exporter's device file.
 * Passing the fd is the permission; the record goes to the subscriber's own
 * device file, once, and the subscription ends there.
 *
 * One mutex guards every subscription list (the export's and the file's):
 * subscribing is rare next to transfers, and a single lock needs no order
 * between devices.  Lock order: pd_device.lock -> pd_subs_lock ->
 * pd_file.ev_lock.  Nothing here allocates under the lock, so the revoke
 * walk never does either.
 */
#include <linux/dma-buf.h>
#include <linux/slab.h>
#include "peerdirect.h"

struct pd_sub {
	struct list_head exp_node;	/* pd_export.subs */
	struct list_head file_node;	/* pd_file.subs */
	struct pd_file *pfile;
	struct pd_export *exp;
	u64 cookie;
};

static DEFINE_MUTEX(pd_subs_lock);

static void pd_sub_unlink(struct pd_sub *sub)
{
	list_del(&sub->exp_node);
	list_del(&sub->file_node);
	sub->pfile->nr_subs--;
	kfree(sub);
}

static struct pd_sub *pd_sub_find(struct pd_export *exp, struct pd_file *pfile)
{
	struct pd_sub *sub;

	list_for_each_entry(sub, &exp->subs, exp_node)
		if (sub->pfile == pfile)
			return sub;
	return NULL;
}

int pd_subscribe(struct pd_file *pfile, struct peerdirect_subscribe *s)
{
	struct pd_sub *sub = NULL, *old;
	struct pd_export *exp;
	struct dma_buf *dmabuf;
	bool cancel = s->flags & PEERDIRECT_SUBSCRIBE_CANCEL;
	int ret = 0;

	dmabuf = dma_buf_get(s->fd);
	if (IS_ERR(dmabuf))
		return PTR_ERR(dmabuf);	/* EBADF, or EINVAL: not a dma-buf */
	if (!pd_dmabuf_is_ours(dmabuf)) {
		ret = -EINVAL;
		goto out_put;
	}
	exp = dmabuf->priv;

	if (!cancel) {
		ret = pd_file_events_init(pfile);
		if (ret)
			goto out_put;
		sub = kzalloc(sizeof(*sub), GFP_KERNEL_ACCOUNT);
		if (!sub) {
			ret = -ENOMEM;
			goto out_put;
		}
		sub->pfile = pfile;
		sub->exp = exp;
		sub->cookie = s->cookie;
	}

	mutex_lock(&pd_subs_lock);
	old = pd_sub_find(exp, pfile);
	if (cancel) {
		if (old)
			pd_sub_unlink(old);
		else
			ret = -ENOENT;
	} else if (READ_ONCE(exp->revoked)) {
		/*
		 * Set before the revoke walk takes this lock to notify.  Ahead
		 * of EEXIST: a subscriber asking again after lost events must
		 * not read "still subscribed" as "live" in that window.
		 */
		ret = -ENODEV;
	} else if (old) {
		ret = -EEXIST;
	} else if (pfile->nr_subs >= pfile->pd->max_subscriptions) {
		ret = -ENOSPC;
	} else {
		list_add_tail(&sub->exp_node, &exp->subs);
		list_add_tail(&sub->file_node, &pfile->subs);
		pfile->nr_subs++;
		sub = NULL;
	}
	mutex_unlock(&pd_subs_lock);
	kfree(sub);

	s->export_id = exp->id;
	s->inode = exp->inode;
out_put:
	dma_buf_put(dmabuf);
	return ret;
}

/* @exp was just revoked: one record to each subscriber, and they end. */
void pd_subs_notify(struct pd_export *exp, u32 reason)
{
	struct pd_sub *sub, *tmp;

	mutex_lock(&pd_subs_lock);
	list_for_each_entry_safe(sub, tmp, &exp->subs, exp_node) {
		pd_file_queue_sub_event(sub->pfile, exp, reason, sub->cookie);
		pd_sub_unlink(sub);
	}
	mutex_unlock(&pd_subs_lock);
}

/* The dma-buf is being released: nothing is left to revoke. */
void pd_subs_drop_export(struct pd_export *exp)
{
	struct pd_sub *sub, *tmp;

	mutex_lock(&pd_subs_lock);
	list_for_each_entry_safe(sub, tmp, &exp->subs, exp_node)
		pd_sub_unlink(sub);
	mutex_unlock(&pd_subs_lock);
}

/* The subscriber's file is closing. */
void pd_subs_drop_file(struct pd_file *pfile)
{
	struct pd_sub *sub, *tmp;

	mutex_lock(&pd_subs_lock);
	list_for_each_entry_safe(sub, tmp, &pfile->subs, file_node)
		pd_sub_unlink(sub);
	mutex_unlock(&pd_subs_lock);
}
