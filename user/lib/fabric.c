// SPDX-License-Identifier: MIT
/*
 * One RDM endpoint per pd_fabric: provider choice, queue sizing, address
 * exchange, path policy and the registration cache's home.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>

#include "abi.h"
#include "bounce_pool.h"
#include "device.h"
#include "errors.h"
#include "fabric.h"
#include "fabric_hints.h"
#include "log.h"

#define DEFAULT_CHUNK		(4u << 20)
/* A chunk is a bounce slot too: 1 GiB of them, times up to 4096 slots,
 * stays far from wrapping a size, and so does a message's chunk count. */
#define MAX_CHUNK		((size_t)1 << 30)
#define DEFAULT_BOUNCE_SLOTS	8
#define DEFAULT_CACHE_ENTRIES	1024
#define DEFAULT_CACHE_BYTES	(64ULL << 30)
/*
 * The expected number of peers, given to the AV (fi_av_attr.count).  The
 * library never sets FI_UNIVERSE_SIZE: libfabric reads it once, at its
 * initialisation, for the whole process, and setenv races with other
 * threads.  ofi_rxm sizes each MSG-provider CQ as (tx + rx) times that
 * variable (default 256: 196608 entries over verbs, above rxe's max_cqe of
 * 32767); a process that uses rxm over rxe sets FI_UNIVERSE_SIZE itself
 * before its first libfabric call, as the tools do.
 */
#define DEFAULT_UNIVERSE	32
#define DEFAULT_MAX_PENDING	4096
#define DEFAULT_PEER_TIMEOUT_MS	10000
#define DEFAULT_WAIT_SPIN_US	50
#define MAX_WAIT_SPIN_US	1000000
/* Own staging buffers beyond the pool: 256 requests of a 4M chunk.  A
 * caller built before 1.2 never chose a cap and keeps none (SIZE_MAX)
 * unless the environment sets one. */
#define DEFAULT_MAX_STAGING	(1ULL << 30)

static const char *const path_names[] = {
	[PD_PATH_AUTO] = "auto", [PD_PATH_HOST] = "host", [PD_PATH_DMABUF] = "dmabuf",
	[PD_PATH_MAPPED] = "mapped", [PD_PATH_BOUNCE] = "bounce",
};

const char *pd_path_name(enum pd_path path)
{
	if ((unsigned int)path < sizeof(path_names) / sizeof(path_names[0]))
		return path_names[path];
	return "invalid";
}

int pd_path_parse(const char *name, enum pd_path *out)
{
	unsigned int i;

	if (!out)
		return pd_error(-EINVAL, "pd_path_parse: out is NULL");
	for (i = 0; name && i < sizeof(path_names) / sizeof(path_names[0]); i++) {
		if (!strcmp(name, path_names[i])) {
			*out = (enum pd_path)i;
			return 0;
		}
	}
	return pd_error(-EINVAL, "path '%s' is not one of auto|dmabuf|mapped|bounce",
			name ? name : "(null)");
}

/*
 * Providers whose sender copies the bytes with its own CPU, so a VM_PFNMAP
 * mapping of device memory works as their source and target.  shm does
 * too only without CMA (pd_provider_pins_cpu_maps): with it, it moves
 * large messages with process_vm_readv/writev, which must pin the peer's
 * pages and fails on a PFN mapping (measured: EIO in the VM).
 */
bool pd_provider_copies_with_cpu(const char *provider)
{
	static const char *const movers[] = { "tcp", "sockets", "udp", "net" };
	size_t core = strcspn(provider, ";");
	unsigned int i;

	for (i = 0; i < sizeof(movers) / sizeof(movers[0]); i++) {
		if (strlen(movers[i]) == core && !strncmp(provider, movers[i], core))
			return true;
	}
	return false;
}

/*
 * Providers whose registration pins host pages (verbs, efa, psm, ...):
 * every one but those that resolve addresses at transfer time (the CPU
 * movers and shm).  An idle registration of theirs would keep a freed
 * buffer's pages; with no memory monitor the cache keeps none idle.
 */
bool pd_provider_pins_host_pages(const char *provider)
{
	size_t core = strcspn(provider, ";");

	return !pd_provider_copies_with_cpu(provider) &&
	       !(core == 3 && !strncmp(provider, "shm", 3));
}

/* A libfabric boolean setting in the environment (fi_param_get_bool's
 * spellings of true). */
static bool fi_env_true(const char *name)
{
	const char *v = getenv(name);

	return v && (!strcmp(v, "1") || !strcasecmp(v, "yes") || !strcasecmp(v, "true") ||
		     !strcasecmp(v, "on"));
}

/*
 * Providers that move some messages by pinning the pages of a CPU mapping:
 * shm sends above its inject size with process_vm_readv/writev (CMA).  A
 * dma-buf's mmap is VM_PFNMAP, so that fails (EIO, measured in the VM)
 * whether the mapping was registered as host memory or as the base_addr of
 * an FI_MR_DMABUF registration.
 */
bool pd_provider_pins_cpu_maps(const char *provider, bool hmem)
{
	size_t core = strcspn(provider, ";");

	/*
	 * shm turns CMA off for an endpoint with FI_HMEM (smr_ep.c, libfabric
	 * 1.13 to 2.6 and main), as for FI_SHM_DISABLE_CMA: it copies through
	 * its own shared buffers, with the CPU, from base_addr (tested in the
	 * VM's shim part).  The library asks FI_HMEM only from 1.20.
	 */
	/* In any case: libfabric matches provider names so. */
	return core == 3 && !strncasecmp(provider, "shm", 3) && !hmem &&
	       !fi_env_true("FI_SHM_DISABLE_CMA");
}

/* The caller's size, not ours: an older caller's struct is shorter, a
 * newer one's longer, but never by pages. */
#define PD_FABRIC_ATTR_SIZE_MAX 4096u

void pd_fabric_attr_init_sz(struct pd_fabric_attr *attr, size_t size)
{
	struct pd_fabric_attr zero = { .size = (uint32_t)size };

	/* void in the 1.0 ABI: a bad call leaves attr alone and says why
	 * through pd_last_error; pd_fabric_open then refuses the struct. */
	if (!attr || size < PD_FABRIC_ATTR_SIZE_1_0 || size > PD_FABRIC_ATTR_SIZE_MAX) {
		pd_error(-EINVAL, "pd_fabric_attr_init: %s (size %zu; from %u to %u)",
			 !attr ? "attr is NULL" : "not a size of struct pd_fabric_attr", size,
			 (unsigned int)PD_FABRIC_ATTR_SIZE_1_0, PD_FABRIC_ATTR_SIZE_MAX);
		return;
	}
	pd_copy_out("pd_fabric_attr_init", attr, size, &zero, sizeof(zero),
		    PD_FABRIC_ATTR_SIZE_1_0, NULL);
}

/* A caller newer than the library may pass a longer struct: fine as long
 * as it asks nothing of the fields this library does not know. */
static bool unknown_tail_is_zero(const struct pd_fabric_attr *a)
{
	const unsigned char *p = (const unsigned char *)a;
	size_t i;

	for (i = sizeof(*a); i < a->size; i++) {
		if (p[i])
			return false;
	}
	return true;
}

/* API value if given, else the environment, else the default. */
/* bytes: the environment may say 4K, 8M; counts and times are digits. */
static int setting(size_t api, const char *env, size_t dflt, bool bytes, size_t *out)
{
	*out = dflt;
	if (api) {
		*out = api;
		return 0;
	}
	return bytes ? pd_env_size(env, out) : pd_env_count(env, out);
}

struct settings {
	const char *provider;
	const char *domain;	/* NULL: the first that fits */
	enum pd_path path;
	size_t chunk, slots, max_entries, max_bytes, queue, universe, max_pending;
	size_t max_staging;
	int peer_timeout_ms;
	int64_t wait_spin_ns;	/* <0: never sleep */
};

/* Fields past the caller's attr size read as zero (default). */
#define HAS_FIELD(a, f) ((a)->size >= offsetof(struct pd_fabric_attr, f) + sizeof((a)->f))
#define ATTR_FIELD(a, f) (HAS_FIELD(a, f) ? (a)->f : 0)

/*
 * pd_wait's busy-poll budget before it sleeps: the attr's wait_spin_us
 * when set (PD_WAIT_SPIN_NONE: sleep at once, PD_WAIT_SPIN_ALWAYS: never
 * sleep), else PEERDIRECT_WAIT_SPIN_US ("always", or microseconds, 0 for
 * none), else the default.  Documentation/libpeerdirect.md, "Waiting",
 * has the measurements behind it.
 */
static int wait_spin_setting(int32_t attr_us, int64_t *ns)
{
	const char *env = getenv("PEERDIRECT_WAIT_SPIN_US");
	size_t us;
	int ret;

	if (attr_us == PD_WAIT_SPIN_ALWAYS || (!attr_us && env && !strcmp(env, "always"))) {
		*ns = -1;
		return 0;
	}
	if ((attr_us < 0 && attr_us != PD_WAIT_SPIN_NONE) || attr_us > MAX_WAIT_SPIN_US)
		return pd_error(-EINVAL, "pd_fabric_open: wait_spin_us %d: want 1 to %d microseconds, PD_WAIT_SPIN_NONE or PD_WAIT_SPIN_ALWAYS",
				(int)attr_us, MAX_WAIT_SPIN_US);
	if (attr_us) {
		*ns = attr_us == PD_WAIT_SPIN_NONE ? 0 : (int64_t)attr_us * 1000;
		return 0;
	}
	ret = setting(0, "PEERDIRECT_WAIT_SPIN_US", DEFAULT_WAIT_SPIN_US, false, &us);
	if (ret)
		return ret;
	if (us > MAX_WAIT_SPIN_US)
		return pd_error(-EINVAL, "PEERDIRECT_WAIT_SPIN_US=%zu: at most %d (or \"always\")",
				us, MAX_WAIT_SPIN_US);
	*ns = (int64_t)us * 1000;
	return 0;
}

static int read_settings(const struct pd_fabric_attr *a, struct settings *s)
{
	const char *env_path = getenv("PEERDIRECT_PATH");
	size_t timeout;
	int ret;

	if (a->size < offsetof(struct pd_fabric_attr, universe_size) + sizeof(size_t) ||
	    a->flags)
		return pd_error(-EINVAL, "pd_fabric_open: attr not initialised with pd_fabric_attr_init (size %u, flags 0x%x)",
				a->size, a->flags);
	/* A garbage size (an attr never initialised) would have the tail
	 * scan read gigabytes past the caller's struct. */
	if (a->size > PD_FABRIC_ATTR_SIZE_MAX)
		return pd_error(-EINVAL, "pd_fabric_open: attr size %u is past any struct pd_fabric_attr (%u at most): initialise it with pd_fabric_attr_init",
				a->size, PD_FABRIC_ATTR_SIZE_MAX);
	if (!unknown_tail_is_zero(a))
		return pd_error(-E2BIG, "pd_fabric_open: attr of %u bytes sets fields past the %zu this libpeerdirect knows: install a newer one",
				a->size, sizeof(*a));
	s->provider = a->provider ? a->provider : getenv("PEERDIRECT_PROVIDER");
	if (s->provider && (!*s->provider || !strcmp(s->provider, "auto")))
		s->provider = NULL;
	s->domain = ATTR_FIELD(a, domain) ? a->domain : getenv("PEERDIRECT_DOMAIN");
	if (s->domain && !*s->domain)
		s->domain = NULL;
	s->path = a->path;
	if ((unsigned int)a->path > PD_PATH_BOUNCE || a->path == PD_PATH_HOST)
		return pd_error(-EINVAL, "pd_fabric_open: path %d is not auto|dmabuf|mapped|bounce",
				(int)a->path);
	if (s->path == PD_PATH_AUTO && env_path) {
		ret = pd_path_parse(env_path, &s->path);
		if (ret || s->path == PD_PATH_HOST)
			return pd_error(-EINVAL, "PEERDIRECT_PATH='%s' is not one of auto|dmabuf|mapped|bounce",
					env_path);
	}
	if ((ret = setting(a->chunk_size, "PEERDIRECT_CHUNK_SIZE", DEFAULT_CHUNK, true,
			   &s->chunk)) ||
	    (ret = setting(a->bounce_slots, "PEERDIRECT_BOUNCE_SLOTS", DEFAULT_BOUNCE_SLOTS, false,
			   &s->slots)) ||
	    (ret = setting(a->cache_max_entries, "PEERDIRECT_MR_CACHE_MAX_ENTRIES",
			   DEFAULT_CACHE_ENTRIES, false, &s->max_entries)) ||
	    (ret = setting(a->cache_max_bytes, "PEERDIRECT_MR_CACHE_MAX_BYTES",
			   DEFAULT_CACHE_BYTES, true, &s->max_bytes)) ||
	    (ret = setting(a->queue_size, "PEERDIRECT_QUEUE_SIZE", 0, false, &s->queue)) ||
	    (ret = setting(a->universe_size, "PEERDIRECT_UNIVERSE_SIZE", DEFAULT_UNIVERSE, false,
			   &s->universe)) ||
	    (ret = setting(ATTR_FIELD(a, max_pending), "PEERDIRECT_MAX_PENDING",
			   DEFAULT_MAX_PENDING, false, &s->max_pending)) ||
	    (ret = setting(ATTR_FIELD(a, peer_timeout_ms) < 0 ? SIZE_MAX :
			   (size_t)ATTR_FIELD(a, peer_timeout_ms), "PEERDIRECT_PEER_TIMEOUT_MS",
			   DEFAULT_PEER_TIMEOUT_MS, false, &timeout)) ||
	    (ret = setting(ATTR_FIELD(a, max_staging_bytes), "PEERDIRECT_MAX_STAGING_BYTES",
			   HAS_FIELD(a, max_staging_bytes) ? DEFAULT_MAX_STAGING : SIZE_MAX,
			   true, &s->max_staging)))
		return ret;
	if (ATTR_FIELD(a, reserved))
		return pd_error(-EINVAL, "pd_fabric_open: attr reserved field is %u, must be 0",
				(unsigned int)a->reserved);
	ret = wait_spin_setting(ATTR_FIELD(a, wait_spin_us), &s->wait_spin_ns);
	if (ret)
		return ret;
	/* SIZE_MAX, or 0 from the environment: never declare a peer dead. */
	s->peer_timeout_ms = timeout == SIZE_MAX || timeout == 0 ? -1 :
			     timeout > INT32_MAX ? INT32_MAX : (int)timeout;
	if (s->chunk < 4096 || s->chunk > MAX_CHUNK || s->slots < 2 || s->slots > 4096 ||
	    !s->universe || !s->max_pending)
		return pd_error(-EINVAL, "pd_fabric_open: chunk_size %zu (4096..1G), bounce_slots %zu (2..4096), universe_size %zu, max_pending %zu (min 1)",
				s->chunk, s->slots, s->universe, s->max_pending);
	return 0;
}

static struct fi_info *make_hints(const struct settings *s, const struct pd_wants *w)
{
	struct fi_info *h = fi_allocinfo();

	if (!h)
		return NULL;
	pd_hints_for(h, w);
	/* Left to choose, libfabric could answer with a node-local provider
	 * (on 2.1 shm is the one with FI_HMEM, asked for first), and a job's
	 * remote peers would never answer.  Named, any provider is taken. */
	if (!s->provider)
		h->caps |= FI_REMOTE_COMM;
	if (s->provider)
		h->fabric_attr->prov_name = strdup(s->provider);
	if (s->domain)
		h->domain_attr->name = strdup(s->domain);
	if (s->queue) {
		h->tx_attr->size = s->queue;
		h->rx_attr->size = s->queue;
	}
	return h;
}

/*
 * Why FI_HMEM is not asked for, or NULL if it is.  It is not free on shm:
 * shm turns its single copy (CMA) off for every message of an endpoint
 * that has it, host memory included, and copies through its own buffers
 * (smr_ep.c, libfabric 1.13 to 2.6 and main).  On libfabric 2.1 that cost
 * pd-coll's host allreduce 1.2x-1.4x its time at 1-8 MiB, and
 * device memory on the dmabuf path (two CPU copies) was no faster than
 * bounce with CMA (results/performance-log.md, section S).  shm has no NIC to give a
 * dma-buf to, so it gets FI_HMEM only where CMA is off anyway
 * (FI_SHM_DISABLE_CMA) or the fabric is opened with path dmabuf.
 */
static const char *hmem_unasked(const struct pd_fabric *fab, const struct settings *s)
{
	if (!pd_fi_has_dmabuf(fab->fi_api))
		return "libfabric has no FI_MR_DMABUF";
	if (s->path != PD_PATH_DMABUF && s->provider && pd_provider_pins_cpu_maps(s->provider, false))
		return "it would turn off shm's CMA, host memory included; FI_SHM_DISABLE_CMA=1 or path dmabuf gives shm the dma-buf";
	return NULL;
}

/*
 * The entry of the domain asked for, alone in fab->info.  The hint alone
 * is not enough: libfabric 1.17's tcp;ofi_rxm ignores a domain name and
 * answers with every interface's entries, eth0's first.
 */
static int pick_domain(struct pd_fabric *fab, const struct settings *s)
{
	struct fi_info *fi, *one;

	if (!s->domain)
		return 0;
	for (fi = fab->info; fi; fi = fi->next)
		if (fi->domain_attr->name && !strcmp(fi->domain_attr->name, s->domain) &&
		    !strcmp(fi->fabric_attr->prov_name, fab->info->fabric_attr->prov_name))
			break;
	one = fi ? fi_dupinfo(fi) : NULL;
	fi_freeinfo(fab->info);
	fab->info = one;
	if (!one)
		return pd_error(fi ? -ENOMEM : -ENODATA, "fi_getinfo(provider %s, domain %s): %s",
				s->provider ? s->provider : "auto", s->domain,
				fi ? "out of memory" : "no such domain (pd_fabric_domains and pdctl doctor list the domains)");
	return 0;
}

static int get_info(struct pd_fabric *fab, const struct settings *s)
{
	/* pd_tries (fabric_hints.h): the nice-to-haves, dropped in order. */
	struct fi_info *hints;
	int ret = -FI_ENODATA;
	unsigned int i;

	/* Decided here, at run time: a library built against 1.17's headers
	 * asks a 2.x libfabric for 1.20, and so gets FI_MR_DMABUF. */
	fab->fi_runtime = fi_version();
	fab->fi_api = pd_fi_api_version(fab->fi_runtime);
	for (i = 0; i < PD_NR_TRIES && ret; i++) {
		if (pd_tries[i].hmem && hmem_unasked(fab, s))
			continue;
		hints = make_hints(s, &pd_tries[i]);
		if (!hints)
			return pd_error(-ENOMEM, "fi_allocinfo: out of memory");
		ret = fi_getinfo(fab->fi_api, NULL, NULL, 0, hints, &fab->info);
		fi_freeinfo(hints);
	}
	if (ret)
		return pd_error(ret, "fi_getinfo(provider %s%s%s, RDM, tagged + RMA): %s%s",
				s->provider ? s->provider : "auto", s->domain ? ", domain " : "",
				s->domain ? s->domain : "", fi_strerror(-ret),
				s->domain && ret == -FI_ENODATA ?
				" (pd_fabric_domains and pdctl doctor list the domains)" : "");
	ret = pick_domain(fab, s);
	if (ret)
		return ret;
	fab->hmem_unasked = hmem_unasked(fab, s);
	fab->directed_recv = fab->info->caps & FI_DIRECTED_RECV;
	fab->source = fab->info->caps & FI_SOURCE;
	fab->sas = (fab->info->tx_attr->msg_order & FI_ORDER_SAS) &&
		   (fab->info->rx_attr->msg_order & FI_ORDER_SAS);
	return pd_tag_bits_for(fab->info->ep_attr->mem_tag_format, &fab->tag_bits);
}

/*
 * mem_tag_format (fi_endpoint(3)): leading zero bits are ignored by the
 * provider, the rest are usable; 0 means no restriction.  The top
 * PD_CHUNK_BITS of those carry the chunk index, the user gets the rest (48
 * on a 64-bit provider, PD_TAG_BITS).
 */
int pd_tag_bits_for(uint64_t fmt, unsigned int *user_bits)
{
	unsigned int bits = fmt ? 64 - (unsigned int)__builtin_clzll(fmt) : 64;

	if (bits < PD_CHUNK_BITS + 16)
		return pd_error(-EOPNOTSUPP, "the provider's tags have %u bits (mem_tag_format 0x%llx): at least %u are needed, %u for the chunk index and 16 tag bits for the user",
				bits, (unsigned long long)fmt, PD_CHUNK_BITS + 16, PD_CHUNK_BITS);
	*user_bits = bits - PD_CHUNK_BITS;
	if (*user_bits > PD_TAG_BITS)
		*user_bits = PD_TAG_BITS;
	return 0;
}

static void fabric_destroy(struct pd_fabric *fab);
static unsigned int fabric_drop_idle(void *ctx, uint64_t origin);

/*
 * With a wait fd when the provider has one, so that pd_wait can sleep
 * until a completion comes (wakeup.c); else without, and waits poll.
 */
static int open_cq(struct pd_fabric *fab, struct fi_cq_attr *attr, bool sleeps)
{
	int ret, fd = -1;

	fab->wakeup.cq_fd = -1;
	/* A CQ with a wait object signals it as completions come, which a
	 * waiter that never sleeps would pay for nothing. */
	if (!sleeps) {
		snprintf(fab->cq_why_not, sizeof(fab->cq_why_not), "waits never sleep (wait_spin_us)");
	} else {
		attr->wait_obj = FI_WAIT_FD;
		ret = fi_cq_open(fab->domain, attr, &fab->cq, NULL);
		if (!ret && !fi_control(&fab->cq->fid, FI_GETWAIT, &fd) && fd >= 0) {
			fab->wakeup.cq_fd = fd;
			return 0;
		}
		if (!ret) {
			fi_close(&fab->cq->fid);
			fab->cq = NULL;
		}
		snprintf(fab->cq_why_not, sizeof(fab->cq_why_not), "%s has no CQ wait fd (%s: %s)",
			 fab->provider, ret ? "FI_WAIT_FD" : "FI_GETWAIT",
			 fi_strerror(ret ? -ret : FI_ENOSYS));
	}
	attr->wait_obj = FI_WAIT_NONE;
	return fi_cq_open(fab->domain, attr, &fab->cq, NULL);
}

static int open_objects(struct pd_fabric *fab, bool sleeps)
{
	struct fi_info *i = fab->info;
	/* The expected number of peers: the universe size, passed where
	 * libfabric takes it per object instead of from the environment. */
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE, .count = fab->universe };
	struct fi_cq_attr cq_attr = {
		.format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_NONE,
		.size = i->tx_attr->size + i->rx_attr->size,
	};
	const char *step;
	int ret;

	if ((ret = fi_fabric(i->fabric_attr, &fab->fabric, NULL))) {
		step = "fi_fabric";
	} else if ((ret = fi_domain(fab->fabric, i, &fab->domain, NULL))) {
		step = "fi_domain";
	} else if ((ret = fi_av_open(fab->domain, &av_attr, &fab->av, NULL))) {
		step = "fi_av_open";
	} else if ((ret = open_cq(fab, &cq_attr, sleeps))) {
		step = "fi_cq_open";
	} else if ((ret = fi_endpoint(fab->domain, i, &fab->ep, NULL))) {
		step = "fi_endpoint";
	} else if ((ret = fi_ep_bind(fab->ep, &fab->av->fid, 0)) ||
		   (ret = fi_ep_bind(fab->ep, &fab->cq->fid, FI_TRANSMIT | FI_RECV))) {
		step = "fi_ep_bind";
	} else if ((ret = fi_enable(fab->ep))) {
		step = "fi_enable";
	} else {
		return 0;
	}
	return pd_error(ret, "%s on %s: %s", step, fab->provider, fi_strerror(-ret));
}

/* A NULL attr does not say which ABI its caller was built for: it gets
 * 1.1's defaults, which have no staging cap. */
static int attr_settings(const struct pd_fabric_attr *attr, struct settings *s)
{
	struct pd_fabric_attr dflt = { 0 };

	if (!attr) {
		pd_fabric_attr_init_sz(&dflt, offsetof(struct pd_fabric_attr, max_staging_bytes));
		attr = &dflt;
	}
	return read_settings(attr, s);
}

/* name is already among buf's used bytes of names. */
static bool listed(const char *buf, size_t used, const char *name)
{
	size_t off;

	for (off = 0; off < used; off += strlen(buf + off) + 1)
		if (!strcmp(buf + off, name))
			return true;
	return false;
}

/*
 * The same fi_getinfo as pd_fabric_open's (settings, hints and the tries
 * dropping nice-to-haves), so that each name listed opens: a node's NICs
 * for a network plugin that makes one device of each.
 */
int pd_fabric_domains(const struct pd_fabric_attr *attr, char *buf, size_t len)
{
	struct pd_fabric *probe;
	const char *prov;
	size_t used = 0;
	bool short_buf = false;
	struct fi_info *fi;
	struct settings s;
	int ret, n = 0;

	if (!buf || !len)
		return pd_error(!buf ? -EINVAL : -ENOSPC, "pd_fabric_domains: %s",
				!buf ? "buf is NULL" : "len is 0");
	buf[0] = 0;
	ret = attr_settings(attr, &s);
	if (ret)
		return ret;
	probe = calloc(1, sizeof(*probe));
	if (!probe)
		return pd_error(-ENOMEM, "pd_fabric_domains: out of memory");
	ret = get_info(probe, &s);
	if (ret) {
		/* get_info may fail after fi_getinfo answered (tag bits) */
		fi_freeinfo(probe->info);
		free(probe);
		return ret == -FI_ENODATA ? 0 : ret;	/* pd_last_error says why */
	}
	prov = probe->info->fabric_attr->prov_name;
	for (fi = probe->info; fi; fi = fi->next) {
		const char *name = fi->domain_attr->name;

		if (!name || strcmp(fi->fabric_attr->prov_name, prov) || listed(buf, used, name))
			continue;
		if (used + strlen(name) + 2 > len) {
			short_buf = true;
			break;
		}
		memcpy(buf + used, name, strlen(name) + 1);
		used += strlen(name) + 1;
		buf[used] = 0;
		n++;
	}
	fi_freeinfo(probe->info);
	free(probe);
	if (short_buf)
		return pd_error(-ENOSPC, "pd_fabric_domains: %zu bytes are too few for the domains' names",
				len);
	return n;
}

int pd_fabric_open(const struct pd_fabric_attr *attr, struct pd_fabric **out)
{
	struct pd_mr_cache_ops ops = {
		.reg = pd_paths_register, .dereg = pd_paths_deregister,
	};
	struct pd_fabric *fab;
	struct settings s;
	int ret;

	if (!out)
		return pd_error(-EINVAL, "pd_fabric_open: out is NULL");
	ret = attr_settings(attr, &s);
	if (ret)
		return ret;
	fab = calloc(1, sizeof(*fab));
	if (!fab)
		return pd_error(-ENOMEM, "pd_fabric_open: out of memory");
	pthread_mutex_init(&fab->lock, NULL);
	pthread_cond_init(&fab->jobs_done, NULL);
	fab->wakeup.cq_fd = -1;
	fab->refs = 1;
	fab->fork_gen = pd_fork_gen();
	ops.ctx = fab;
	ret = get_info(fab, &s);
	if (ret)
		goto fail;
	snprintf(fab->provider, sizeof(fab->provider), "%s", fab->info->fabric_attr->prov_name);
	fab->hmem = fab->info->caps & FI_HMEM;
	fab->pins_cpu_maps = pd_provider_pins_cpu_maps(fab->provider, fab->hmem);
	/* Neither pins host pages nor the mapping: copies from it with the
	 * CPU at transfer time (tcp, sockets, ..., and shm without CMA). */
	fab->cpu_mover = !pd_provider_pins_host_pages(fab->provider) && !fab->pins_cpu_maps;
	fab->virt_addr = fab->info->domain_attr->mr_mode & FI_MR_VIRT_ADDR;
	fab->chunk = s.chunk < fab->info->ep_attr->max_msg_size ? s.chunk :
		     fab->info->ep_attr->max_msg_size;
	fab->bounce_slots = s.slots;
	fab->path = s.path;
	fab->universe = s.universe;
	fab->max_pending = s.max_pending;
	fab->max_staging = s.max_staging;
	fab->peer_timeout_ms = s.peer_timeout_ms;
	ret = open_objects(fab, s.wait_spin_ns >= 0) ?: pd_xfer_init(fab);
	if (ret)
		goto fail;
	fab->wakeup.spin_ns = s.wait_spin_ns;
	ret = pd_mr_cache_create(&ops, s.max_entries, s.max_bytes, &fab->cache) ?:
	      pd_watch_create(&(struct pd_watch_ops) {
				.revoked = pd_fabric_revoked,
				.origin_gone = pd_fabric_origin_gone,
				.drop_idle = fabric_drop_idle, .ctx = fab,
			      }, &fab->watch);
	if (ret)
		goto fail;
	pd_mr_cache_set_retain_idle_host(fab->cache, !pd_provider_pins_host_pages(fab->provider));
	if (pd_log_on(PD_LOG_INFO)) {
		char why[768], waits[192];
		enum pd_path p = pd_paths_plan(fab, why, sizeof(why));

		if (fab->wakeup.spin_ns < 0)
			snprintf(waits, sizeof(waits), "poll, never sleep");
		else if (fab->wakeup.cq_fd < 0)
			snprintf(waits, sizeof(waits), "poll %lld us, then nap 20-160 us at a time: %s",
				 (long long)fab->wakeup.spin_ns / 1000, fab->cq_why_not);
		else
			snprintf(waits, sizeof(waits), "poll %lld us, then sleep on the CQ's wait fd",
				 (long long)fab->wakeup.spin_ns / 1000);
		pd_log(PD_LOG_INFO, "fabric open: provider %s, libfabric %u.%u (API %u.%u asked); waits: %s; host memory: path host (fi_mr_reg); dma-buf: path %s: %s",
		       fab->provider, FI_MAJOR(fab->fi_runtime), FI_MINOR(fab->fi_runtime),
		       FI_MAJOR(fab->fi_api), FI_MINOR(fab->fi_api), waits, pd_path_name(p), why);
	}
	*out = fab;
	return 0;
fail:
	fabric_destroy(fab);
	return ret;
}

/*
 * The caller's handle goes; the endpoint closes now, so the provider
 * touches no buffer afterwards and every unfinished request fails with
 * -ECANCELED.  Registrations and requests the caller still holds stay
 * valid for pd_mr_dereg, pd_test and pd_req_free; the last of them tears
 * the rest down.
 */
void pd_fabric_close(struct pd_fabric *fab)
{
	/* In a forked child the endpoint and its sockets are the parent's. */
	if (!fab || pd_forked_since(fab->fork_gen))
		return;
	/* No device calls into a closed fabric. */
	pd_watch_detach_all(fab->watch);
	pthread_mutex_lock(&fab->lock);
	if (!fab->closed) {
		fab->closed = true;
		if (fab->ep)
			fi_close(&fab->ep->fid);
		fab->ep = NULL;
		pd_xfer_close_locked(fab);
	}
	pd_xfer_unlock_and_reap(fab);
	pd_fabric_put(fab);
}

void pd_fabric_get(struct pd_fabric *fab)
{
	__atomic_add_fetch(&fab->refs, 1, __ATOMIC_RELAXED);
}

void pd_fabric_put(struct pd_fabric *fab)
{
	if (__atomic_sub_fetch(&fab->refs, 1, __ATOMIC_ACQ_REL) == 0)
		fabric_destroy(fab);
}

static void fabric_destroy(struct pd_fabric *fab)
{
	if (fab->ep)
		fi_close(&fab->ep->fid);
	if (fab->cq)
		fi_close(&fab->cq->fid);
	if (fab->av)
		fi_close(&fab->av->fid);
	pd_watch_destroy(fab->watch);
	pd_mr_cache_destroy(fab->cache);
	pd_bounce_pool_destroy(fab->bounce);
	pd_xfer_fini(fab);
	if (fab->domain)
		fi_close(&fab->domain->fid);
	if (fab->fabric)
		fi_close(&fab->fabric->fid);
	fi_freeinfo(fab->info);
	pthread_mutex_destroy(&fab->lock);
	pthread_cond_destroy(&fab->jobs_done);
	free(fab);
}

const char *pd_fabric_provider(const struct pd_fabric *fab)
{
	return fab ? fab->provider : "";
}

const char *pd_fabric_domain(const struct pd_fabric *fab)
{
	return fab && fab->info->domain_attr->name ? fab->info->domain_attr->name : "";
}

size_t pd_fabric_chunk_size(const struct pd_fabric *fab)
{
	return fab ? fab->chunk : 0;
}

int pd_fabric_set_path(struct pd_fabric *fab, enum pd_path path)
{
	if (!fab)
		return pd_error(-EINVAL, "pd_fabric_set_path: fabric is NULL");
	if ((unsigned int)path > PD_PATH_BOUNCE || path == PD_PATH_HOST)
		return pd_error(-EINVAL, "pd_fabric_set_path: %d is not auto|dmabuf|mapped|bounce",
				(int)path);
	__atomic_store_n(&fab->path, path, __ATOMIC_RELAXED);
	return 0;
}

/*
 * The address a peer inserts is the provider's, behind a header with the
 * wire parameters both ends must share: peers that disagree on the chunk
 * size or the tag layout would hang or mismatch chunks, so insert refuses
 * them.  Both ends are assumed to have the same byte order.
 */
#define WIRE_MAGIC	0x31574450u	/* "PDW1" */
#define WIRE_VERSION	1

struct wire_hdr {
	uint32_t magic;
	uint16_t version;
	uint16_t raw_len;	/* the provider's address that follows */
	uint64_t chunk;
	uint8_t tag_bits;
	uint8_t chunk_bits;
	uint8_t pad[6];
};

int pd_fabric_addr(struct pd_fabric *fab, void *buf, size_t *len)
{
	struct wire_hdr h = {
		.magic = WIRE_MAGIC, .version = WIRE_VERSION, .chunk = fab ? fab->chunk : 0,
		.tag_bits = fab ? (uint8_t)fab->tag_bits : 0, .chunk_bits = PD_CHUNK_BITS,
	};
	char raw[1024];
	size_t rlen = sizeof(raw);
	int ret;

	if (!fab || !len)
		return pd_error(-EINVAL, "pd_fabric_addr: NULL argument");
	if (fab->closed)
		return pd_error(-ESHUTDOWN, "pd_fabric_addr: the fabric was closed");
	ret = fi_getname(&fab->ep->fid, raw, &rlen);
	if (ret)
		return pd_error(ret, "fi_getname: %s (%zu bytes)", fi_strerror(-ret), rlen);
	if (!buf || *len < sizeof(h) + rlen) {
		ret = pd_error(-ENOSPC, "pd_fabric_addr: the address needs %zu bytes, the buffer has %zu",
			       sizeof(h) + rlen, *len);
		*len = sizeof(h) + rlen;
		return ret;
	}
	h.raw_len = (uint16_t)rlen;
	memcpy(buf, &h, sizeof(h));
	memcpy((char *)buf + sizeof(h), raw, rlen);
	*len = sizeof(h) + rlen;
	return 0;
}

int pd_fabric_insert(struct pd_fabric *fab, const void *addr, size_t len,
		     uint64_t *peer)
{
	struct wire_hdr h;
	fi_addr_t fa;
	int ret;

	if (!fab || !addr || !len || !peer)
		return pd_error(-EINVAL, "pd_fabric_insert: %s", !len ? "length is 0" : "NULL argument");
	if (len < sizeof(h))
		return pd_error(-EPROTO, "pd_fabric_insert: %zu bytes are not an address from pd_fabric_addr", len);
	memcpy(&h, addr, sizeof(h));
	if (h.magic != WIRE_MAGIC || h.version != WIRE_VERSION || h.raw_len != len - sizeof(h))
		return pd_error(-EPROTO, "pd_fabric_insert: not an address from pd_fabric_addr of this libpeerdirect (magic 0x%x, version %u, %zu bytes)",
				h.magic, h.version, len);
	if (h.chunk != fab->chunk)
		return pd_error(-EPROTO, "pd_fabric_insert: the peer's chunk size %llu differs from ours %zu: every rank must use the same PEERDIRECT_CHUNK_SIZE (and a provider with the same max_msg_size)",
				(unsigned long long)h.chunk, fab->chunk);
	if (h.tag_bits != fab->tag_bits || h.chunk_bits != PD_CHUNK_BITS)
		return pd_error(-EPROTO, "pd_fabric_insert: the peer's tags have %u user and %u chunk bits, ours %u and %u: different providers?",
				h.tag_bits, h.chunk_bits, fab->tag_bits, PD_CHUNK_BITS);
	pthread_mutex_lock(&fab->lock);
	ret = fab->closed ? -ESHUTDOWN : fi_av_insert(fab->av, (const char *)addr + sizeof(h), 1, &fa, 0, NULL);
	/* A table: peers are indices, and one never inserted would index
	 * past the provider's table. */
	if (ret == 1 && fa + 1 > fab->npeers)
		__atomic_store_n(&fab->npeers, fa + 1, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&fab->lock);
	if (ret != 1)
		return pd_error(ret < 0 ? ret : -EINVAL, "fi_av_insert of a %zu-byte address on %s: %s",
				len - sizeof(h), fab->provider, ret < 0 ? fi_strerror(-ret) : "address rejected");
	*peer = fa;
	return 0;
}

int pd_fabric_bounce_pool(struct pd_fabric *fab, struct pd_bounce_pool **out)
{
	struct pd_bounce_pool *pool;
	int ret;

	pthread_mutex_lock(&fab->lock);
	pool = fab->bounce;
	pthread_mutex_unlock(&fab->lock);
	if (pool) {
		*out = pool;
		return 0;
	}
	ret = pd_bounce_pool_create(fab->domain, fab->chunk, fab->bounce_slots, pd_next_mr_key(), &pool);
	if (ret)
		return ret;
	pthread_mutex_lock(&fab->lock);
	if (!fab->bounce) {
		fab->bounce = pool;
		pool = NULL;
	}
	*out = fab->bounce;
	pthread_mutex_unlock(&fab->lock);
	pd_bounce_pool_destroy(pool);	/* lost a race: another thread made one */
	return 0;
}

int pd_fabric_attach_device(struct pd_fabric *fab, struct pd_device *dev)
{
	if (!fab || !dev)
		return pd_error(-EINVAL, "pd_fabric_attach_device: NULL argument");
	if (pd_forked_since(fab->fork_gen) || pd_device_forked(dev))
		return pd_fork_refuse("pd_fabric_attach_device");
	return pd_watch_attach(fab->watch, pd_device_monitor(dev));
}

int pd_fabric_detach_device(struct pd_fabric *fab, struct pd_device *dev)
{
	if (!fab || !dev)
		return pd_error(-EINVAL, "pd_fabric_detach_device: NULL argument");
	if (pd_forked_since(fab->fork_gen))
		return pd_fork_refuse("pd_fabric_detach_device");
	return pd_watch_detach(fab->watch, pd_device_monitor(dev));
}

unsigned int pd_fabric_revoked(void *ctx, uint64_t origin, uint64_t st_dev,
			       uint64_t st_ino, uint32_t reason)
{
	struct pd_fabric *fab = ctx;
	unsigned int n = pd_mr_cache_invalidate_dmabuf(fab->cache, st_dev, st_ino, reason);

	pd_log_rl(PD_LOG_WARN, "revocation seen on %s: dma-buf %llu:%llu of device origin 0x%llx (reason %s): %u registrations invalidated",
		  fab->provider, (unsigned long long)st_dev, (unsigned long long)st_ino,
		  (unsigned long long)origin, pd_reason_name(reason), n);
	return n;
}

unsigned int pd_fabric_origin_gone(void *ctx, uint64_t origin, uint32_t reason)
{
	struct pd_fabric *fab = ctx;
	unsigned int n = pd_mr_cache_invalidate_origin(fab->cache, origin, reason);

	pd_log_rl(PD_LOG_WARN, "revocation seen on %s: every dma-buf of device origin 0x%llx (reason %s): %u registrations invalidated",
		  fab->provider, (unsigned long long)origin, pd_reason_name(reason), n);
	return n;
}

static unsigned int fabric_drop_idle(void *ctx, uint64_t origin)
{
	struct pd_fabric *fab = ctx;

	return pd_mr_cache_drop_idle_origin(fab->cache, origin);
}

/* Every attached device's queued events reach every fabric attached to it,
 * this one included.  Returns the entries this fabric lost meanwhile. */
int pd_fabric_poll_events(struct pd_fabric *fab)
{
	if (!fab)
		return pd_error(-EINVAL, "pd_fabric_poll_events: fabric is NULL");
	if (pd_forked_since(fab->fork_gen))
		return pd_fork_refuse("pd_fabric_poll_events");
	return pd_watch_drain(fab->watch);
}

int pd_fabric_cache_stats_sz(struct pd_fabric *fab, struct pd_cache_stats *out,
			     size_t size, size_t *filled)
{
	struct pd_cache_stats st;

	if (!fab || !out)
		return pd_error(-EINVAL, "pd_fabric_cache_stats: NULL argument");
	pd_mr_cache_stats(fab->cache, &st);
	return pd_copy_out("pd_fabric_cache_stats", out, size, &st, sizeof(st),
			   PD_CACHE_STATS_SIZE_1_0, filled);
}

int pd_fabric_set_cache_limits(struct pd_fabric *fab, size_t max_entries,
			       size_t max_bytes)
{
	if (!fab)
		return pd_error(-EINVAL, "pd_fabric_set_cache_limits: fabric is NULL");
	return pd_mr_cache_set_limits(fab->cache, max_entries, max_bytes);
}
