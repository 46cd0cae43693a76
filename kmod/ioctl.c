// SPDX-License-Identifier: GPL-2.0
/*
 * The ioctl layer: copy, validate, and hand over to the code that owns the
 * object.  Commands carry no size (_IO, as vfio's): argsz says what
 * userspace passed, so a newer or older struct reaches the same handler
 * (see the uapi header for the rules).
 */
#include <linux/capability.h>
#include <linux/file.h>
#include <linux/fs.h>
#include <linux/uaccess.h>
#include "compat.h"
#include "peerdirect.h"

/* The first published size of each argument struct: never changes. */
#define PD_MIN_QUERY	offsetofend(struct peerdirect_query, reserved)
#define PD_MIN_ALLOC	offsetofend(struct peerdirect_alloc, alloc_size)
#define PD_MIN_FREE	offsetofend(struct peerdirect_free, handle)
#define PD_MIN_EXPORT	offsetofend(struct peerdirect_export, inode)
#define PD_MIN_REVOKE	offsetofend(struct peerdirect_revoke, pending)
#define PD_MIN_RESET	offsetofend(struct peerdirect_reset, pending)
#define PD_MIN_SUBSCRIBE offsetofend(struct peerdirect_subscribe, inode)
#define PD_MIN_LIST	offsetofend(struct peerdirect_list, total_attachments)
/* And of LIST's records. */
#define PD_MIN_EXPORT_INFO offsetofend(struct peerdirect_export_info, pad)
#define PD_MIN_ATTACH_INFO offsetofend(struct peerdirect_attach_info, device)
#define PD_MIN_ALLOC_INFO offsetofend(struct peerdirect_alloc_info, nr_exports)

/* The uapi layouts: the same on every architecture, 32-bit ones included. */
static inline void pd_uapi_layout(void)
{
	BUILD_BUG_ON(sizeof(struct peerdirect_query) != 120);
	BUILD_BUG_ON(sizeof(struct peerdirect_alloc) != 32);
	BUILD_BUG_ON(sizeof(struct peerdirect_free) != 16);
	BUILD_BUG_ON(sizeof(struct peerdirect_export) != 56);
	BUILD_BUG_ON(sizeof(struct peerdirect_revoke) != 32);
	BUILD_BUG_ON(sizeof(struct peerdirect_reset) != 16);
	BUILD_BUG_ON(sizeof(struct peerdirect_subscribe) != 40);
	BUILD_BUG_ON(sizeof(struct peerdirect_list) != 72);
	BUILD_BUG_ON(offsetof(struct peerdirect_list, allocation_size) != 48);
	BUILD_BUG_ON(sizeof(struct peerdirect_alloc_info) != 40);
	BUILD_BUG_ON(sizeof(struct peerdirect_export_info) != 88);
	BUILD_BUG_ON(sizeof(struct peerdirect_attach_info) != 72);
	BUILD_BUG_ON(offsetof(struct peerdirect_attach_info, device) != 40);
	BUILD_BUG_ON(sizeof(struct peerdirect_event_header) != 8);
	BUILD_BUG_ON(sizeof(struct peerdirect_event) != 72);
	BUILD_BUG_ON(offsetof(struct peerdirect_event, seq) != 16);
}

static int pd_copy_in(void *karg, size_t ksize, size_t minsz,
		      void __user *uarg, u32 *usize)
{
	u32 argsz;
	int ret;

	if (get_user(argsz, (u32 __user *)uarg))
		return -EFAULT;
	if (argsz < minsz || argsz > PAGE_SIZE)
		return -EINVAL;
	ret = copy_struct_from_user(karg, ksize, uarg, argsz);
	if (ret)
		return ret;
	*usize = argsz;
	return 0;
}

static int pd_copy_out(void __user *uarg, const void *karg, size_t ksize,
		       u32 usize)
{
	return copy_to_user(uarg, karg, min_t(size_t, ksize, usize)) ? -EFAULT : 0;
}

static int pd_ioctl_query(struct pd_file *pfile, void __user *uarg)
{
	struct pd_device *pd = pfile->pd;
	struct peerdirect_query q;
	u32 usize;
	int ret;

	ret = pd_copy_in(&q, sizeof(q), PD_MIN_QUERY, uarg, &usize);
	if (ret)
		return ret;
	if (q.flags || memchr_inv(&q.abi_major, 0,
				  sizeof(q) - offsetof(struct peerdirect_query, abi_major)))
		return -EINVAL;

	q.abi_major = PEERDIRECT_ABI_MAJOR;
	q.abi_minor = PEERDIRECT_ABI_MINOR;
	q.features = pd_device_features(pd);
	q.backend = pd->ops->kind;
	q.index = pd->index;
	q.mem_size = pd->mem_size;
	q.page_size = pd->page_size;
	q.quota = pd->quota;
	q.max_exports = pd->max_exports;
	q.max_events = pd->max_events;
	q.max_subscriptions = pd->max_subscriptions;
	mutex_lock(&pd->lock);
	q.mem_free = pd_device_mem_free(pd);
	mutex_unlock(&pd->lock);
	q.quota_used = pd_owner_used(pd);
	return pd_copy_out(uarg, &q, sizeof(q), usize);
}

static int pd_ioctl_alloc(struct pd_file *pfile, void __user *uarg)
{
	struct peerdirect_alloc a;
	u32 usize;
	int ret;

	ret = pd_copy_in(&a, sizeof(a), PD_MIN_ALLOC, uarg, &usize);
	if (ret)
		return ret;
	if (a.flags || a.handle || a.alloc_size)
		return -EINVAL;

	ret = pd_alloc_create(pfile, a.size, &a.handle, &a.alloc_size);
	if (ret)
		return ret;
	ret = pd_copy_out(uarg, &a, sizeof(a), usize);
	if (ret)
		pd_alloc_free(pfile, a.handle);
	return ret;
}

static int pd_ioctl_free(struct pd_file *pfile, void __user *uarg)
{
	struct peerdirect_free f;
	u32 usize;
	int ret;

	ret = pd_copy_in(&f, sizeof(f), PD_MIN_FREE, uarg, &usize);
	if (ret)
		return ret;
	if (f.flags)
		return -EINVAL;
	return pd_alloc_free(pfile, f.handle);
}

static int pd_ioctl_export(struct pd_file *pfile, void __user *uarg)
{
	struct peerdirect_export e;
	struct pd_alloc *alloc;
	struct dma_buf *dmabuf;
	unsigned int open_flags;
	u64 end;
	u32 usize;
	int fd, ret;

	ret = pd_copy_in(&e, sizeof(e), PD_MIN_EXPORT, uarg, &usize);
	if (ret)
		return ret;
	if (e.flags & ~(PEERDIRECT_EXPORT_RDWR | PEERDIRECT_EXPORT_CLOEXEC))
		return -EINVAL;
	open_flags = (e.flags & PEERDIRECT_EXPORT_RDWR ? O_RDWR : O_RDONLY) |
		     (e.flags & PEERDIRECT_EXPORT_CLOEXEC ? O_CLOEXEC : 0);
	if (e.fd || e.pad || e.export_id || e.inode)
		return -EINVAL;
	if (!e.length || !PAGE_ALIGNED(e.offset) || !PAGE_ALIGNED(e.length) ||
	    check_add_overflow(e.offset, e.length, &end))
		return -EINVAL;

	alloc = pd_alloc_lookup(pfile, e.handle);
	if (!alloc)
		return -ENOENT;
	if (end > alloc->size) {
		ret = -EINVAL;
		goto out_put;
	}

	dmabuf = pd_export_create(pfile, alloc, &e, open_flags, &fd);
	if (IS_ERR(dmabuf)) {
		ret = PTR_ERR(dmabuf);
		goto out_put;
	}
	ret = pd_copy_out(uarg, &e, sizeof(e), usize);
	if (ret) {
		dma_buf_put(dmabuf);
		put_unused_fd(fd);
		goto out_put;
	}
	fd_install(fd, dmabuf->file);
out_put:
	pd_alloc_put(alloc);
	return ret;
}

static int pd_ioctl_revoke(struct pd_file *pfile, void __user *uarg, bool admin)
{
	struct pd_revoke_result res = {};
	struct peerdirect_revoke r;
	struct pd_alloc *alloc;
	u32 usize;
	int ret;

	if (admin && !capable(CAP_SYS_ADMIN))
		return -EPERM;
	ret = pd_copy_in(&r, sizeof(r), PD_MIN_REVOKE, uarg, &usize);
	if (ret)
		return ret;
	if (r.revoked || r.pending)
		return -EINVAL;

	if (admin) {
		if (r.flags != PEERDIRECT_REVOKE_EXPORT || r.handle)
			return -EINVAL;
		ret = pd_revoke_export_id(pfile->pd, NULL, r.export_id,
					  PD_REVOKE_ADMIN, &res);
	} else if (r.flags == PEERDIRECT_REVOKE_EXPORT) {
		if (r.handle)
			return -EINVAL;
		ret = pd_revoke_export_id(pfile->pd, pfile, r.export_id,
					  PD_REVOKE_USER, &res);
	} else if (r.flags == PEERDIRECT_REVOKE_ALLOC) {
		if (r.export_id)
			return -EINVAL;
		alloc = pd_alloc_lookup(pfile, r.handle);
		if (!alloc)
			return -ENOENT;
		ret = pd_revoke_alloc(alloc, PD_REVOKE_USER, &res);
		pd_alloc_put(alloc);
	} else {
		return -EINVAL;
	}
	if (ret)
		return ret;

	r.revoked = res.revoked;
	r.pending = res.pending;
	return pd_copy_out(uarg, &r, sizeof(r), usize);
}

static int pd_ioctl_reset(struct pd_file *pfile, void __user *uarg)
{
	struct pd_revoke_result res = {};
	struct peerdirect_reset r;
	u32 usize;
	int ret;

	if (!capable(CAP_SYS_ADMIN))
		return -EPERM;
	ret = pd_copy_in(&r, sizeof(r), PD_MIN_RESET, uarg, &usize);
	if (ret)
		return ret;
	if (r.flags || r.revoked || r.pending)
		return -EINVAL;

	pd_reset_prepare(pfile->pd, &res);
	pd_reset_done(pfile->pd);
	pr_info_ratelimited("%s: reset by pid %d revoked %u export(s), %u still mapped\n",
			    pfile->pd->name, task_tgid_nr(current),
			    res.revoked, res.pending);
	r.revoked = res.revoked;
	r.pending = res.pending;
	return pd_copy_out(uarg, &r, sizeof(r), usize);
}

static int pd_ioctl_subscribe(struct pd_file *pfile, void __user *uarg)
{
	struct peerdirect_subscribe s;
	u32 usize;
	int ret;

	ret = pd_copy_in(&s, sizeof(s), PD_MIN_SUBSCRIBE, uarg, &usize);
	if (ret)
		return ret;
	if (s.flags & ~PEERDIRECT_SUBSCRIBE_CANCEL || s.pad || s.export_id ||
	    s.inode || ((s.flags & PEERDIRECT_SUBSCRIBE_CANCEL) && s.cookie))
		return -EINVAL;
	ret = pd_subscribe(pfile, &s);
	if (ret)
		return ret;
	return pd_copy_out(uarg, &s, sizeof(s), usize);
}

static bool pd_list_size_ok(u32 size, size_t minsz)
{
	return size >= minsz && size <= PAGE_SIZE && IS_ALIGNED(size, 8);
}

/*
 * Every process may list, but sees only its user's exports and allocations
 * unless it has CAP_SYS_ADMIN (pd_list() decides).  A 2.1 caller's argsz
 * stops before the allocation fields, which then read as zero.
 */
static int pd_ioctl_list(struct pd_file *pfile, void __user *uarg)
{
	const u32 known = PEERDIRECT_LIST_ATTACHMENTS | PEERDIRECT_LIST_ALLOCATIONS;
	struct peerdirect_list l;
	u32 usize;
	int ret;

	ret = pd_copy_in(&l, sizeof(l), PD_MIN_LIST, uarg, &usize);
	if (ret)
		return ret;
	if (l.flags & ~known || l.total_exports || l.total_attachments ||
	    l.total_allocations || l.pad ||
	    !pd_list_size_ok(l.export_size, PD_MIN_EXPORT_INFO))
		return -EINVAL;
	if (l.flags & PEERDIRECT_LIST_ATTACHMENTS) {
		if (!pd_list_size_ok(l.attach_size, PD_MIN_ATTACH_INFO))
			return -EINVAL;
	} else if (l.attach_size || l.attachments || l.nr_attachments) {
		return -EINVAL;
	}
	if (l.flags & PEERDIRECT_LIST_ALLOCATIONS) {
		/* the whole 2.2 struct: else total_allocations never gets back */
		if (usize < offsetofend(struct peerdirect_list, pad) ||
		    !pd_list_size_ok(l.allocation_size, PD_MIN_ALLOC_INFO))
			return -EINVAL;
	} else if (l.allocation_size || l.allocations || l.nr_allocations) {
		return -EINVAL;
	}
	if ((l.nr_exports && !l.exports) || (l.nr_attachments && !l.attachments) ||
	    (l.nr_allocations && !l.allocations))
		return -EFAULT;

	ret = pd_list(pfile->pd, &l);
	if (ret)
		return ret;
	return pd_copy_out(uarg, &l, sizeof(l), usize);
}

/*
 * The commands that change device memory or what others see of it need a
 * file opened for writing, so that a node an admin made readable (0640)
 * for a monitoring group gives that group QUERY, LIST, SUBSCRIBE and the
 * event queue, not use of the memory.  SUBSCRIBE only arms the caller's
 * own queue for a dma-buf it already holds the fd of, and read() of that
 * queue is a read.  EBADF as write(2) on such a file and as the block
 * layer's ioctls that need BLK_OPEN_WRITE; EPERM stays for a missing
 * capability (RESET, ADMIN_REVOKE).
 */
static bool pd_ioctl_needs_write(unsigned int cmd)
{
	switch (cmd) {
	case PEERDIRECT_IOCTL_ALLOC:
	case PEERDIRECT_IOCTL_FREE:
	case PEERDIRECT_IOCTL_EXPORT:
	case PEERDIRECT_IOCTL_REVOKE:
	case PEERDIRECT_IOCTL_RESET:
	case PEERDIRECT_IOCTL_ADMIN_REVOKE:
		return true;
	default:
		return false;
	}
}

long pd_ioctl(struct file *filp, unsigned int cmd, unsigned long arg)
{
	struct pd_file *pfile = filp->private_data;
	void __user *uarg = (void __user *)arg;

	pd_uapi_layout();
	/* Ours in full: _IO(magic, nr), no direction or size encoded. */
	if (cmd != _IO(PEERDIRECT_IOCTL_MAGIC, _IOC_NR(cmd)) ||
	    _IOC_NR(cmd) > _IOC_NR(PEERDIRECT_IOCTL_LIST))
		return -ENOTTY;
	if (READ_ONCE(pfile->pd->dead))
		return -ENODEV;
	if (pd_ioctl_needs_write(cmd) && !(filp->f_mode & FMODE_WRITE))
		return -EBADF;

	switch (cmd) {
	case PEERDIRECT_IOCTL_QUERY:
		return pd_ioctl_query(pfile, uarg);
	case PEERDIRECT_IOCTL_ALLOC:
		return pd_ioctl_alloc(pfile, uarg);
	case PEERDIRECT_IOCTL_FREE:
		return pd_ioctl_free(pfile, uarg);
	case PEERDIRECT_IOCTL_EXPORT:
		return pd_ioctl_export(pfile, uarg);
	case PEERDIRECT_IOCTL_REVOKE:
		return pd_ioctl_revoke(pfile, uarg, false);
	case PEERDIRECT_IOCTL_RESET:
		return pd_ioctl_reset(pfile, uarg);
	case PEERDIRECT_IOCTL_ADMIN_REVOKE:
		return pd_ioctl_revoke(pfile, uarg, true);
	case PEERDIRECT_IOCTL_SUBSCRIBE:
		return pd_ioctl_subscribe(pfile, uarg);
	case PEERDIRECT_IOCTL_LIST:
		return pd_ioctl_list(pfile, uarg);
	default:
		return -ENOTTY;
	}
}
