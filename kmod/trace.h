/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Trace events of peerdirect (events/peerdirect/ in tracefs), for perf,
 * trace-cmd and bpftrace: an allocation's and an export's lifecycle, the
 * importers' attach, pin and map and their undoing, revocation with how
 * long the importers took to let go, and event delivery.  Devices are
 * named by N of /dev/peerdirectN, exports by their export id, importers by
 * their device name (cut to PD_TRACE_DEVNAME - 1 bytes; callers pass
 * pd_dev_name(), never NULL).  A fixed field, not __string(): its
 * __assign_str() lost the source argument in 6.10, and the record's layout
 * stays the same on every kernel.
 */
#undef TRACE_SYSTEM
#define TRACE_SYSTEM peerdirect

#if !defined(_PEERDIRECT_TRACE_H) || defined(TRACE_HEADER_MULTI_READ)
#define _PEERDIRECT_TRACE_H

#include <linux/string.h>
#include <linux/tracepoint.h>
#include <linux/types.h>

#include "../uapi/linux/peerdirect.h"

#define PD_TRACE_DEVNAME	32

/* A PEERDIRECT_REASON_* by its name, as the uapi header has it. */
#define pd_trace_reason(reason)						\
	__print_symbolic(reason,					\
			 { PEERDIRECT_REASON_FREE, "free" },		\
			 { PEERDIRECT_REASON_REVOKE, "revoke" },	\
			 { PEERDIRECT_REASON_RESET, "reset" },		\
			 { PEERDIRECT_REASON_ADMIN, "admin" },		\
			 { PEERDIRECT_REASON_UNPLUG, "unplug" },	\
			 { PEERDIRECT_REASON_OVERFLOW, "overflow" })

TRACE_EVENT(peerdirect_alloc,
	    TP_PROTO(int dev, pid_t tgid, u64 handle, u64 offset, u64 size),
	    TP_ARGS(dev, tgid, handle, offset, size),
	    TP_STRUCT__entry(__field(int, dev)
			     __field(pid_t, tgid)
			     __field(u64, handle)
			     __field(u64, offset)
			     __field(u64, size)),
	    TP_fast_assign(__entry->dev = dev;
			   __entry->tgid = tgid;
			   __entry->handle = handle;
			   __entry->offset = offset;
			   __entry->size = size;),
	    TP_printk("dev=%d tgid=%d handle=%llu offset=0x%llx size=%llu",
		      __entry->dev, __entry->tgid, __entry->handle,
		      __entry->offset, __entry->size)
);

TRACE_EVENT(peerdirect_free,
	    TP_PROTO(int dev, pid_t tgid, u64 handle, u64 size, u32 exports),
	    TP_ARGS(dev, tgid, handle, size, exports),
	    TP_STRUCT__entry(__field(int, dev)
			     __field(pid_t, tgid)
			     __field(u64, handle)
			     __field(u64, size)
			     __field(u32, exports)),
	    TP_fast_assign(__entry->dev = dev;
			   __entry->tgid = tgid;
			   __entry->handle = handle;
			   __entry->size = size;
			   __entry->exports = exports;),
	    TP_printk("dev=%d tgid=%d handle=%llu size=%llu exports=%u",
		      __entry->dev, __entry->tgid, __entry->handle,
		      __entry->size, __entry->exports)
);

TRACE_EVENT(peerdirect_export,
	    TP_PROTO(int dev, u64 id, u64 handle, u64 offset, u64 length,
		     u64 inode, bool rdonly),
	    TP_ARGS(dev, id, handle, offset, length, inode, rdonly),
	    TP_STRUCT__entry(__field(int, dev)
			     __field(bool, rdonly)
			     __field(u64, id)
			     __field(u64, handle)
			     __field(u64, offset)
			     __field(u64, length)
			     __field(u64, inode)),
	    TP_fast_assign(__entry->dev = dev;
			   __entry->rdonly = rdonly;
			   __entry->id = id;
			   __entry->handle = handle;
			   __entry->offset = offset;
			   __entry->length = length;
			   __entry->inode = inode;),
	    TP_printk("dev=%d export=%llu handle=%llu offset=0x%llx length=%llu inode=%llu %s",
		      __entry->dev, __entry->id, __entry->handle,
		      __entry->offset, __entry->length, __entry->inode,
		      __entry->rdonly ? "ro" : "rw")
);

TRACE_EVENT(peerdirect_export_release,
	    TP_PROTO(int dev, u64 id),
	    TP_ARGS(dev, id),
	    TP_STRUCT__entry(__field(int, dev)
			     __field(u64, id)),
	    TP_fast_assign(__entry->dev = dev;
			   __entry->id = id;),
	    TP_printk("dev=%d export=%llu", __entry->dev, __entry->id)
);

/* attach (ret: 0, or why the importer was refused), detach */

DECLARE_EVENT_CLASS(peerdirect_attach_class,
		    TP_PROTO(int dev, u64 id, const char *importer,
			     bool peer2peer, bool dynamic, int ret),
		    TP_ARGS(dev, id, importer, peer2peer, dynamic, ret),
		    TP_STRUCT__entry(__field(int, dev)
				     __field(int, ret)
				     __field(u64, id)
				     __field(bool, peer2peer)
				     __field(bool, dynamic)
				     __array(char, importer, PD_TRACE_DEVNAME)),
		    TP_fast_assign(__entry->dev = dev;
				   __entry->ret = ret;
				   __entry->id = id;
				   __entry->peer2peer = peer2peer;
				   __entry->dynamic = dynamic;
				   strscpy(__entry->importer, importer, PD_TRACE_DEVNAME);),
		    TP_printk("dev=%d export=%llu importer=%s p2p=%d dynamic=%d ret=%d",
			      __entry->dev, __entry->id, __entry->importer,
			      __entry->peer2peer, __entry->dynamic,
			      __entry->ret)
);

DEFINE_EVENT(peerdirect_attach_class, peerdirect_attach,
	     TP_PROTO(int dev, u64 id, const char *importer, bool peer2peer,
		      bool dynamic, int ret),
	     TP_ARGS(dev, id, importer, peer2peer, dynamic, ret)
);

DEFINE_EVENT(peerdirect_attach_class, peerdirect_detach,
	     TP_PROTO(int dev, u64 id, const char *importer, bool peer2peer,
		      bool dynamic, int ret),
	     TP_ARGS(dev, id, importer, peer2peer, dynamic, ret)
);

/* pin, unpin: the attachment's pins after the call */

DECLARE_EVENT_CLASS(peerdirect_pin_class,
		    TP_PROTO(int dev, u64 id, const char *importer, u32 pins,
			     int ret),
		    TP_ARGS(dev, id, importer, pins, ret),
		    TP_STRUCT__entry(__field(int, dev)
				     __field(int, ret)
				     __field(u64, id)
				     __field(u32, pins)
				     __array(char, importer, PD_TRACE_DEVNAME)),
		    TP_fast_assign(__entry->dev = dev;
				   __entry->ret = ret;
				   __entry->id = id;
				   __entry->pins = pins;
				   strscpy(__entry->importer, importer, PD_TRACE_DEVNAME);),
		    TP_printk("dev=%d export=%llu importer=%s pins=%u ret=%d",
			      __entry->dev, __entry->id, __entry->importer,
			      __entry->pins, __entry->ret)
);

DEFINE_EVENT(peerdirect_pin_class, peerdirect_pin,
	     TP_PROTO(int dev, u64 id, const char *importer, u32 pins, int ret),
	     TP_ARGS(dev, id, importer, pins, ret)
);

DEFINE_EVENT(peerdirect_pin_class, peerdirect_unpin,
	     TP_PROTO(int dev, u64 id, const char *importer, u32 pins, int ret),
	     TP_ARGS(dev, id, importer, pins, ret)
);

/* map, unmap: in the direction made (read-only exports: to_device) */

DECLARE_EVENT_CLASS(peerdirect_map_class,
		    TP_PROTO(int dev, u64 id, const char *importer, int dir,
			     u64 length, u32 nents, int ret),
		    TP_ARGS(dev, id, importer, dir, length, nents, ret),
		    TP_STRUCT__entry(__field(int, dev)
				     __field(int, dir)
				     __field(int, ret)
				     __field(u32, nents)
				     __field(u64, id)
				     __field(u64, length)
				     __array(char, importer, PD_TRACE_DEVNAME)),
		    TP_fast_assign(__entry->dev = dev;
				   __entry->dir = dir;
				   __entry->ret = ret;
				   __entry->nents = nents;
				   __entry->id = id;
				   __entry->length = length;
				   strscpy(__entry->importer, importer, PD_TRACE_DEVNAME);),
		    TP_printk("dev=%d export=%llu importer=%s dir=%s length=%llu nents=%u ret=%d",
			      __entry->dev, __entry->id, __entry->importer,
			      __print_symbolic(__entry->dir,
					       { 0, "bidirectional" },
					       { 1, "to_device" },
					       { 2, "from_device" }),
			      __entry->length, __entry->nents, __entry->ret)
);

DEFINE_EVENT(peerdirect_map_class, peerdirect_map,
	     TP_PROTO(int dev, u64 id, const char *importer, int dir,
		      u64 length, u32 nents, int ret),
	     TP_ARGS(dev, id, importer, dir, length, nents, ret)
);

DEFINE_EVENT(peerdirect_map_class, peerdirect_unmap,
	     TP_PROTO(int dev, u64 id, const char *importer, int dir,
		      u64 length, u32 nents, int ret),
	     TP_ARGS(dev, id, importer, dir, length, nents, ret)
);

/* An export marked revoked: importers invalidated, CPU mappings zapped. */

TRACE_EVENT(peerdirect_revoke,
	    TP_PROTO(int dev, u64 id, pid_t tgid, u32 reason, u32 attachments,
		     u32 maps),
	    TP_ARGS(dev, id, tgid, reason, attachments, maps),
	    TP_STRUCT__entry(__field(int, dev)
			     __field(pid_t, tgid)
			     __field(u32, reason)
			     __field(u32, attachments)
			     __field(u32, maps)
			     __field(u64, id)),
	    TP_fast_assign(__entry->dev = dev;
			   __entry->tgid = tgid;
			   __entry->reason = reason;
			   __entry->attachments = attachments;
			   __entry->maps = maps;
			   __entry->id = id;),
	    TP_printk("dev=%d export=%llu tgid=%d reason=%s attachments=%u maps=%u",
		      __entry->dev, __entry->id, __entry->tgid,
		      pd_trace_reason(__entry->reason),
		      __entry->attachments, __entry->maps)
);

/*
 * The end of a revoked export's wait: how long its importers took to unmap
 * (and drop a vmap of device memory), from the start of the call's wait;
 * pending if they had not when the wait ended.  A free does not wait
 * (waited=0).
 */

TRACE_EVENT(peerdirect_revoke_done,
	    TP_PROTO(int dev, u64 id, u32 reason, bool waited, u64 wait_us,
		     bool pending),
	    TP_ARGS(dev, id, reason, waited, wait_us, pending),
	    TP_STRUCT__entry(__field(int, dev)
			     __field(u32, reason)
			     __field(bool, waited)
			     __field(bool, pending)
			     __field(u64, id)
			     __field(u64, wait_us)),
	    TP_fast_assign(__entry->dev = dev;
			   __entry->reason = reason;
			   __entry->waited = waited;
			   __entry->pending = pending;
			   __entry->id = id;
			   __entry->wait_us = wait_us;),
	    TP_printk("dev=%d export=%llu reason=%s waited=%d wait_us=%llu pending=%d",
		      __entry->dev, __entry->id,
		      pd_trace_reason(__entry->reason),
		      __entry->waited, __entry->wait_us, __entry->pending)
);

/*
 * A revocation record for a file (the owner, or a subscriber: flags
 * PEERDIRECT_EVENT_SUBSCRIBED): queued (1), dropped (0: the file closed,
 * never exported, or its queue already overflowed), or the one that
 * overflowed the queue (-1: the reader gets an OVERFLOW record).
 */

TRACE_EVENT(peerdirect_event,
	    TP_PROTO(int dev, u64 id, u32 reason, u32 flags, u64 seq,
		     int queued),
	    TP_ARGS(dev, id, reason, flags, seq, queued),
	    TP_STRUCT__entry(__field(int, dev)
			     __field(int, queued)
			     __field(u32, reason)
			     __field(u32, flags)
			     __field(u64, id)
			     __field(u64, seq)),
	    TP_fast_assign(__entry->dev = dev;
			   __entry->queued = queued;
			   __entry->reason = reason;
			   __entry->flags = flags;
			   __entry->id = id;
			   __entry->seq = seq;),
	    TP_printk("dev=%d export=%llu reason=%s flags=0x%x seq=%llu %s",
		      __entry->dev, __entry->id,
		      pd_trace_reason(__entry->reason),
		      __entry->flags, __entry->seq,
		      __print_symbolic(__entry->queued, { 1, "queued" },
				       { 0, "dropped" }, { -1, "overflow" }))
);

#endif /* _PEERDIRECT_TRACE_H */

/* Out of tree too: kmod/Kbuild adds this directory to core.o's includes. */
#undef TRACE_INCLUDE_PATH
#define TRACE_INCLUDE_PATH .
#undef TRACE_INCLUDE_FILE
#define TRACE_INCLUDE_FILE trace
#include <trace/define_trace.h>
