// SPDX-License-Identifier: MIT
/*
 * pd-coll's net lane (--net PLUGIN): the collectives' messages through an
 * NCCL net plugin's API instead of libpeerdirect's, driven as NCCL drives
 * one (net_plugin/nccl_net_call.h): the newest ncclNetPlugin_vN table,
 * init with a logger, one listen per rank, a send comm to and a recv comm
 * from every peer (connect and accept called again while they return a
 * NULL comm), the region registered on every comm (regMr for host memory,
 * regMrDmaBuf for a dma-buf or memfd), isend/irecv called again while they
 * return a NULL request, test() polled.  xchg, the barrier and the pending
 * sends are lane.c's, unchanged: the pieces, the depth and the order of
 * posts are the native lanes', so a ratio against the host lane measures
 * the transport alone.
 *
 * NCCL tags are ints: the low 31 bits of coll_tag (7 bits of collective
 * number, 8 of step, 16 of piece).  A plugin matches a tag's sends and
 * receives in order on one comm, so a number that wraps cannot mismatch.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

#include "coll.h"
#include "peerdirect_ext.h"
#include "../../net_plugin/nccl_net_call.h"

struct net_peer {
	void *send, *recv;		/* comms: to this peer, from it */
	void *smh, *rmh, *sctl, *rctl;	/* the region's and ctl's handles on each */
};

struct net_lane {
	struct net n;
	void *listen;
	struct net_peer p[MAX_RANKS];
	int rank;
	bool dmabuf;			/* regMrDmaBuf */
	char name[64], desc[512];
};

/*
 * What a rank tells the others at setup: its listen's handle, whether it
 * started.  The handle first and 8-aligned, in every element of the
 * array too: NCCL's handles are, and a plugin may read its own struct in
 * place (ours does: UBSan saw a misaligned struct pdn_handle when the
 * handle came after the int).
 */
struct mine {
	_Alignas(8) char h[NCCL_NET_HANDLE_MAXSIZE];
	int32_t ok;
};

static int log_rank = -1;

/* NCCL's logger: WARN always on stderr (what explains a failed call),
 * the rest with NCCL_DEBUG=INFO or TRACE, as NCCL would. */
static void net_logger(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
		       const char *fmt, ...)
{
	const char *dbg = getenv("NCCL_DEBUG");
	char msg[1024];
	va_list ap;

	(void)flags, (void)file, (void)line;
	if (level != NCCL_LOG_WARN &&
	    !(dbg && (!strcasecmp(dbg, "INFO") || !strcasecmp(dbg, "TRACE"))))
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "pd-coll: rank %d: net plugin %s: %s\n", log_rank,
		level == NCCL_LOG_WARN ? "WARN" : "INFO", msg);
}

static int nccl_fail(ncclResult_t r, const char *what)
{
	return pd_ext_error(-EIO, "net lane: %s: ncclResult %d (the plugin's WARN lines above say why)",
			    what, (int)r);
}

/*
 * The newest table the library has, v12 down to v8; a bare name is
 * also tried as NCCL does with NCCL_NET_PLUGIN (libnccl-net-NAME.so).
 */
static int load_plugin(struct net *n, const char *spec)
{
	char alt[300];
	const char *paths[2] = { spec, NULL };
	int i, ver;

	if (!strchr(spec, '/')) {
		snprintf(alt, sizeof(alt), "libnccl-net-%s.so", spec);
		paths[1] = alt;
	}
	for (i = 0; i < 2 && paths[i]; i++) {
		void *probe = dlopen(paths[i], RTLD_NOW | RTLD_LOCAL);

		if (!probe) {
			if (i == 0 && !paths[1])
				return pd_ext_error(-ENOENT, "--net %s: cannot load it: %s", spec, dlerror());
			continue;
		}
		for (ver = 12; ver >= 8; ver--)
			if (!net_open_path(n, paths[i], ver))
				break;
		dlclose(probe);
		if (ver >= 8)
			return 0;
		return pd_ext_error(-ENOENT, "--net %s: %s has no ncclNetPlugin_v8 ... _v12 symbol: not an NCCL net plugin, or one older than v8",
				    spec, paths[i]);
	}
	return pd_ext_error(-ENOENT, "--net %s: cannot load it as a path or as %s: %s", spec, alt,
			    dlerror());
}

/* init, device 0's properties, the memory and the listen. */
static int start(struct net_lane *nl, struct lane *l, const struct opts *o, size_t region,
		 char *handle)
{
	ncclNetProperties_v9_t pr;
	char chunk[32];
	ncclResult_t r;
	int ndev = 0, ret;

	/* The plugin opens its own fabric: on the native lanes' provider
	 * and wire chunk, so that only the API differs. */
	if (o->provider)
		setenv("PEERDIRECT_PROVIDER", o->provider, 1);
	snprintf(chunk, sizeof(chunk), "%zu", o->chunk);
	setenv("PEERDIRECT_CHUNK_SIZE", chunk, 1);
	ret = load_plugin(&nl->n, o->net);
	if (ret)
		return ret;
	if ((r = net_init_log(&nl->n, net_logger)))
		return nccl_fail(r, "init");
	if ((r = NET(&nl->n, devices, &ndev)) || ndev < 1)
		return r ? nccl_fail(r, "devices") : pd_ext_error(-ENODEV, "net lane: the plugin has no device");
	if ((r = net_props(&nl->n, 0, &pr)))
		return nccl_fail(r, "getProperties");
	snprintf(nl->name, sizeof(nl->name), "%s", pr.name ? pr.name : NET_NAME(&nl->n));
	ret = source_open(&l->src, o->net_memory, region);
	if (ret)
		return pd_ext_error(ret, "net lane: memory %s of %zu bytes: %s", o->net_memory, region,
				    strerror(-ret));
	nl->dmabuf = l->src.fd >= 0;
	if (nl->dmabuf && !(pr.ptrSupport & NCCL_PTR_DMABUF))
		return pd_ext_error(-EOPNOTSUPP, "net lane: --net-memory %s: the plugin (%s) takes no dma-bufs",
				    o->net_memory, nl->name);
	snprintf(nl->desc, sizeof(nl->desc), "%s device 0, %s (ncclNetPlugin_v%d of %s), memory %s, %s",
		 NET_NAME(&nl->n), nl->name, nl->n.ver, o->net, o->net_memory,
		 nl->dmabuf ? "regMrDmaBuf" : "regMr");
	if ((r = net_listen(&nl->n, handle, &nl->listen)))
		return nccl_fail(r, "listen");
	return 0;
}

/* Every rank's answer; -ENOTCONN and *bad the first rank that failed. */
static int agree(struct boot *b, int ret, int *bad)
{
	int32_t failed[MAX_RANKS];
	int i, xret = b->allgather(b, &(int32_t){ ret ? 1 : 0 }, sizeof(int32_t), failed);

	if (ret || xret)
		return ret ?: xret;
	for (i = 0; i < b->size; i++) {
		if (failed[i]) {
			*bad = i;
			return -ENOTCONN;
		}
	}
	return 0;
}

/* Round k: connect to rank + k while accepting from rank - k, neither
 * blocking, until both comms are there. */
static int connect_round(struct net_lane *nl, const struct opts *o, struct boot *b, int k,
			 struct mine *all)
{
	struct net_peer *to = &nl->p[(b->rank + k) % b->size];
	struct net_peer *from = &nl->p[(b->rank - k + b->size) % b->size];
	uint64_t end = coll_now_ns() + (uint64_t)o->timeout_ms * 1000000ULL;
	ncclNetDeviceHandle_v8_t *dc = NULL;
	ncclResult_t r;

	while (!to->send || !from->recv) {
		if (!to->send && (r = net_connect_once(&nl->n, all[(b->rank + k) % b->size].h, &to->send)))
			return nccl_fail(r, "connect");
		if (!from->recv && (r = NET(&nl->n, accept, nl->listen, &from->recv, &dc)))
			return nccl_fail(r, "accept");
		if (coll_now_ns() > end)
			return pd_ext_error(-ETIMEDOUT, "net lane: no connection with ranks %d and %d after %d ms",
					    (b->rank + k) % b->size, (b->rank - k + b->size) % b->size,
					    o->timeout_ms);
	}
	return 0;
}

static ncclResult_t reg(struct net_lane *nl, struct lane *l, void *comm, void **mh, void **ctl)
{
	ncclResult_t r;

	if (nl->dmabuf)
		r = NET(&nl->n, regMrDmaBuf, comm, l->src.map, l->src.len, NCCL_PTR_CUDA, 0, l->src.fd, mh);
	else
		r = NET(&nl->n, regMr, comm, l->src.map, l->src.len, NCCL_PTR_HOST, mh);
	return r ?: NET(&nl->n, regMr, comm, l->ctl, sizeof(l->ctl), NCCL_PTR_HOST, ctl);
}

/*
 * As lane_open: every rank takes part in every exchange whatever failed
 * before, so that one rank's failure fails the lane on all of them.
 * Connections go in rounds with an exchange between them: one listen per
 * rank takes connects from every peer, and a round has one connect per
 * listen, so an accepted comm is from rank - k, and no connect of the next
 * round can be taken for it.
 */
int net_lane_open(struct lane *l, const struct opts *o, struct boot *b, size_t region, int *bad)
{
	struct mine me = { 0 }, all[MAX_RANKS];
	struct net_lane *nl;
	ncclResult_t r;
	int ret, k, i;

	memset(l, 0, sizeof(*l));
	l->kind = LANE_NET;
	l->src.fd = -1;
	log_rank = b->rank;
	nl = l->net = calloc(1, sizeof(*nl));
	ret = nl ? start(nl, l, o, region, me.h) : pd_ext_error(-ENOMEM, "net lane: no memory");
	me.ok = !ret;
	if (b->allgather(b, &me, sizeof(me), all))
		return ret ?: -EPROTO;
	ret = agree(b, ret, bad);
	/* A handle each peer's connect may write into (its stage): all[]'s. */
	for (k = 1; k < b->size && !ret; k++)
		ret = agree(b, connect_round(nl, o, b, k, all), bad);
	for (i = 0; !ret && i < b->size; i++) {
		struct net_peer *p = &nl->p[i];

		if (i == b->rank)
			continue;
		if ((r = reg(nl, l, p->send, &p->smh, &p->sctl)) || (r = reg(nl, l, p->recv, &p->rmh, &p->rctl)))
			ret = nccl_fail(r, nl->dmabuf ? "regMrDmaBuf" : "regMr");
	}
	/* Every rank got here with ret 0 or none did (each agree above). */
	if (k == b->size)
		ret = agree(b, ret, bad);
	return ret;
}

void net_lane_close(struct lane *l)
{
	struct net_lane *nl = l->net;
	int i;

	if (nl && nl->n.dl) {
		for (i = 0; i < MAX_RANKS; i++) {
			struct net_peer *p = &nl->p[i];
			void **mh[] = { &p->smh, &p->sctl, &p->rmh, &p->rctl };
			int j;

			for (j = 0; j < 4; j++)
				if (*mh[j])
					NET(&nl->n, deregMr, j < 2 ? p->send : p->recv, *mh[j]);
			if (p->send)
				NET(&nl->n, closeSend, p->send);
			if (p->recv)
				NET(&nl->n, closeRecv, p->recv);
		}
		if (nl->listen)
			NET(&nl->n, closeListen, nl->listen);
		net_close(&nl->n);
	}
	free(nl);
	source_close(&l->src);
	memset(l, 0, sizeof(*l));
	l->kind = LANE_NET;
	l->src.fd = -1;
}

int net_lane_post(struct lane *l, bool send, bool ctl, size_t off, size_t len, int peer,
		  uint64_t tag, void **req)
{
	struct net_lane *nl = l->net;
	struct net_peer *p = &nl->p[peer];
	void *data = (ctl ? l->ctl : l->src.map) + off;
	int t = (int)(tag & 0x7fffffff);
	ncclResult_t r;

	*req = NULL;
	if (send) {
		r = net_isend_once(&nl->n, p->send, data, len, t, ctl ? p->sctl : p->smh, req);
	} else {
		void *mh = ctl ? p->rctl : p->rmh;

		r = net_irecv_call(&nl->n, p->recv, 1, &data, &len, &t, &mh, req);
	}
	if (r)
		return nccl_fail(r, send ? "isend" : "irecv");
	return *req ? 0 : 1;
}

int net_lane_test(struct lane *l, void *req)
{
	int done = 0, size = 0;
	ncclResult_t r = NET(&l->net->n, test, req, &done, &size);

	if (r)
		return nccl_fail(r, "test");
	return done ? 1 : 0;
}

const char *net_lane_describe(const struct lane *l)
{
	return l->net ? l->net->desc : "";
}

const char *net_lane_name(const struct lane *l)
{
	return l->net ? l->net->name : "";
}
