// SPDX-License-Identifier: MIT
/*
 * The plugin's global state: init, devices and their properties, the ids
 * and peers a device's comms share, registered buffers of the plugin's
 * own, and the cleanup when the plugin is unloaded.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <time.h>

#include "plugin.h"

struct pdn_state pdn = { .lock = PTHREAD_MUTEX_INITIALIZER };

int64_t pdn_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void pdn_live(long delta)
{
	__atomic_add_fetch(&pdn.live, delta, __ATOMIC_ACQ_REL);
}

/* A decimal setting from the environment; the default if unset, -1 (said
 * at WARN) if malformed or outside [lo, hi]. */
static int env_int(const char *name, int def, int lo, int hi)
{
	const char *s = getenv(name);
	char *end;
	long v;

	if (!s || !*s)
		return def;
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || v < lo || v > hi) {
		PDN_WARN("%s=%s: not a number in [%d, %d]", name, s, lo, hi);
		return -1;
	}
	return (int)v;
}

/* Revocation events reach the fabric's cache only from an attached
 * peerdirect device (dma-bufs NCCL hands in are subscribed to through
 * it).  PEERDIRECT_NCCL_DEVICE picks it (default 0, -1: none); none
 * present is not an error: host memory needs none. */
static void attach_device(struct pdn_dev *d)
{
	int idx = env_int("PEERDIRECT_NCCL_DEVICE", 0, -1, 1 << 20);
	int ret;

	if (idx < 0) {
		PDN_INFO(NCCL_INIT | NCCL_NET, "no peerdirect device attached (PEERDIRECT_NCCL_DEVICE): dma-buf revocations are not tracked");
		return;
	}
	ret = pd_device_open((unsigned int)idx, &d->pddev);
	if (ret) {
		d->pddev = NULL;
		PDN_INFO(NCCL_INIT | NCCL_NET, "no peerdirect device %d (%s): dma-buf revocations are not tracked",
			 idx, pd_last_error());
		return;
	}
	ret = pd_fabric_attach_device(d->fab, d->pddev);
	if (ret) {
		PDN_WARN("attaching peerdirect device %d: %s: dma-buf revocations are not tracked",
			 idx, pd_last_error());
		pd_device_close(d->pddev);
		d->pddev = NULL;
		return;
	}
	PDN_INFO(NCCL_INIT | NCCL_NET, "peerdirect device %d attached: revoked dma-bufs fail their next transfer",
		 idx);
}

/* The setting, else the NIC's own, else 10 Gb/s. */
static int dev_speed(const struct pdn_dev *d)
{
	return pdn.speed_mbps ? pdn.speed_mbps : d->nic_speed_mbps ? d->nic_speed_mbps : 10000;
}

/* Device idx on the provider's domain (NIC) named domain. */
static int dev_open(struct pdn_dev *d, int idx, const char *domain)
{
	struct pd_fabric_attr a;
	int ret;

	memset(d, 0, sizeof(*d));
	pthread_mutex_init(&d->lock, NULL);
	pd_fabric_attr_init(&a);
	a.domain = domain;
	ret = pd_fabric_open(&a, &d->fab);
	if (ret) {
		PDN_WARN("device %d on %s: pd_fabric_open: %s", idx, domain, pd_last_error());
		goto fail;
	}
	d->addr_len = sizeof(d->addr);
	ret = pd_fabric_addr(d->fab, d->addr, &d->addr_len);
	if (ret) {
		PDN_WARN("pd_fabric_addr: %s (%zu bytes; the handle holds %d)", pd_last_error(),
			 d->addr_len, PDN_ADDR_MAX);
		goto fail;
	}
	/* The NIC's name, as NCCL's IB transport and aws-ofi-nccl name theirs. */
	snprintf(d->name, sizeof(d->name), "%s", pd_fabric_domain(d->fab));
	attach_device(d);
	pdn_nic_locate(d);
	PDN_INFO(NCCL_INIT | NCCL_NET, "device %d: provider %s, wire chunk %zu B, address %zu B; host memory and dma-bufs (no CUDA pointers), %d grouped receives, libpeerdirect ABI %d.%d",
		 idx, pd_fabric_provider(d->fab), pd_fabric_chunk_size(d->fab), d->addr_len,
		 PDN_MAX_RECVS, PD_ABI_MAJOR, PD_ABI_MINOR);
	PDN_INFO(NCCL_INIT | NCCL_NET, "device %d: NIC %s%s at %s; speed %d Mb/s (%s)", idx,
		 d->nic[0] ? d->nic : "(none)", d->nic_rdma ? " (RDMA)" : "",
		 d->pci_path[0] ? d->pci_path : "on no PCI function (virtual to NCCL's topology)",
		 dev_speed(d), pdn.speed_mbps ? "PEERDIRECT_NCCL_SPEED_MBPS" :
		 d->nic_speed_mbps ? "sysfs" : "the NIC does not say: 10000");
	return 0;
fail:
	if (d->fab)
		pd_fabric_close(d->fab);
	d->fab = NULL;
	pthread_mutex_destroy(&d->lock);
	return ret;
}

static void dev_close(struct pdn_dev *d)
{
	struct pdn_grave *g;

	if (!d->fab)
		return;
	/* The fabric first: it detaches from the device, and once its
	 * endpoint is closed no provider writes into a buried buffer. */
	pd_fabric_close(d->fab);
	while ((g = d->graves)) {
		d->graves = g->next;
		pd_mr_dereg(g->mr);
		free(g->buf);
		free(g);
	}
	if (d->pddev)
		pd_device_close(d->pddev);
	free(d->peers);
	pthread_mutex_destroy(&d->lock);
	memset(d, 0, sizeof(*d));
}

/* NCCL_SOCKET_IFNAME's default spirit: container and VM bridges
 * (docker0, virbr0) carry no traffic between nodes, and their addresses
 * repeat on every node. */
#define PDN_NICS_DEFAULT "^docker,virbr"

/* How a NIC stands: spec leaves it out; a loopback interface, no device
 * while other NICs pass (lo reaches no other node; alone, as in a
 * network-less container, it is kept); a device. */
enum nic_class { NIC_OUT, NIC_LOOPBACK, NIC_IN };

static void devs_close(int n)
{
	while (n > 0)
		dev_close(&pdn.devs[--n]);
}

/*
 * One device per NIC the provider offers (pd_fabric_domains), as NCCL
 * expects of a net plugin: it gives each GPU the NIC nearest to it by
 * pciPath, and pairs device i of every node (rails), so a NIC that fails
 * to open fails init rather than shifting the NICs after it.
 * PEERDIRECT_NCCL_NICS filters them with NCCL_SOCKET_IFNAME's syntax.
 * 0, or -1 (said at WARN).
 */
static int devs_open(void)
{
	const char *spec = getenv("PEERDIRECT_NCCL_NICS"), *name;
	struct pd_fabric_attr a;
	char names[4096];
	/* a name takes at least 2 of names' bytes */
	unsigned char cls[sizeof(names) / 2];
	int n, i = 0, k, others = 0;

	if (!spec || !*spec)
		spec = PDN_NICS_DEFAULT;
	pd_fabric_attr_init(&a);
	n = pd_fabric_domains(&a, names, sizeof(names));
	if (n <= 0) {
		PDN_WARN("no NIC to open: %s", pd_last_error());
		return -1;
	}
	/* each NIC's sysfs flags and filter match, once */
	for (name = names, k = 0; *name && k < (int)sizeof(cls); name += strlen(name) + 1, k++) {
		cls[k] = !pdn_nic_wanted(spec, name) ? NIC_OUT :
			 pdn_nic_loopback(name) ? NIC_LOOPBACK : NIC_IN;
		others += cls[k] == NIC_IN;
	}
	for (name = names, k = 0; *name; name += strlen(name) + 1, k++) {
		if (cls[k] == NIC_OUT || (cls[k] == NIC_LOOPBACK && others)) {
			PDN_INFO(NCCL_INIT | NCCL_NET, "%s left out: %s", name,
				 cls[k] == NIC_LOOPBACK ? "a loopback interface" :
				 "PEERDIRECT_NCCL_NICS (default " PDN_NICS_DEFAULT ")");
			continue;
		}
		if (i == PDN_MAX_DEVS) {
			PDN_WARN("%s and the NICs after it left out: %d devices at most (PEERDIRECT_NCCL_NICS chooses)",
				 name, PDN_MAX_DEVS);
			break;
		}
		if (dev_open(&pdn.devs[i], i, name)) {
			PDN_WARN("NIC %s (device %d) did not open: no device, so that every node's device %d stays the same rail; PEERDIRECT_NCCL_NICS leaves a NIC out",
				 name, i, i);
			devs_close(i);
			return -1;
		}
		i++;
	}
	if (!i) {
		PDN_WARN("PEERDIRECT_NCCL_NICS=%s leaves none of the provider's %d NICs", spec, n);
		return -1;
	}
	pdn.ndevs = i;
	return 0;
}

ncclResult_t pdn_init(ncclDebugLogger_t logger)
{
	ncclResult_t res = ncclSuccess;
	int t, s;

	/* NCCL may init more than once (per communicator in newer cores):
	 * the latest logger wins, the fabric stays. */
	__atomic_store_n(&pdn.logger, logger, __ATOMIC_RELEASE);
	/* A line per registration would cost a formatted message on every
	 * cache hit: NCCL drops TRACE below NCCL_DEBUG=TRACE anyway. */
	__atomic_store_n(&pdn.trace, getenv("NCCL_DEBUG") && !strcasecmp(getenv("NCCL_DEBUG"), "TRACE"),
			 __ATOMIC_RELAXED);
	pthread_mutex_lock(&pdn.lock);
	if (__atomic_load_n(&pdn.ready, __ATOMIC_ACQUIRE))
		goto out;
	t = env_int("PEERDIRECT_NCCL_CONNECT_TIMEOUT_MS", 60000, 1, INT_MAX);
	s = env_int("PEERDIRECT_NCCL_SPEED_MBPS", 0, 1, INT_MAX);
	if (t < 0 || s < 0) {
		res = ncclInvalidUsage;
		goto out;
	}
	pdn.connect_timeout_ms = t;
	pdn.speed_mbps = s;
	if (devs_open()) {
		res = ncclSystemError;	/* NCCL falls back to its own transports */
		goto out;
	}
	/* Readers check ready without the lock (devices, every dev lookup):
	 * what init set before is theirs once they see it. */
	__atomic_store_n(&pdn.ready, true, __ATOMIC_RELEASE);
out:
	pthread_mutex_unlock(&pdn.lock);
	return res;
}

ncclResult_t pdn_devices(int *ndev)
{
	if (!ndev)
		return ncclInternalError;
	*ndev = __atomic_load_n(&pdn.ready, __ATOMIC_ACQUIRE) ? pdn.ndevs : 0;
	return ncclSuccess;
}

struct pdn_dev *pdn_dev_get(int dev)
{
	if (!__atomic_load_n(&pdn.ready, __ATOMIC_ACQUIRE) || dev < 0 || dev >= pdn.ndevs) {
		PDN_WARN("device %d does not exist (%d devices%s)", dev, pdn.ndevs,
			 __atomic_load_n(&pdn.ready, __ATOMIC_ACQUIRE) ? "" : ", init not called");
		return NULL;
	}
	return &pdn.devs[dev];
}

void pdn_fill_props(int dev, ncclNetProperties_v9_t *p)
{
	struct pdn_dev *d = &pdn.devs[dev];

	memset(p, 0, sizeof(*p));
	p->name = d->name;
	/* NULL: a virtual NIC to NCCL's topology (no PCI function). */
	p->pciPath = d->pci_path[0] ? d->pci_path : NULL;
	p->guid = (uint64_t)dev;
	p->ptrSupport = NCCL_PTR_HOST | NCCL_PTR_DMABUF;
	/* libpeerdirect's cache serves a registration inside an earlier one,
	 * whatever the comm: what NCCL's regIsGlobal asks for. */
	p->regIsGlobal = 1;
	p->forceFlush = 0;
	p->speed = dev_speed(d);
	p->port = 1;
	p->latency = 0;		/* NCCL's default */
	p->maxComms = PDN_MAX_COMMS;
	p->maxRecvs = PDN_MAX_RECVS;
	p->netDeviceType = NCCL_NET_DEVICE_HOST;
	p->netDeviceVersion = NCCL_NET_DEVICE_INVALID_VERSION;
	p->vProps.ndevs = 1;
	p->vProps.devs[0] = dev;
	p->maxP2pBytes = NCCL_MAX_NET_SIZE;
	p->maxCollBytes = NCCL_MAX_NET_SIZE;
}

/* Ids name lanes at the receiver: a reused id could take a late message
 * meant for a closed comm, so they go round the whole space first. */
int pdn_id_alloc(struct pdn_dev *d, uint32_t *id)
{
	uint32_t i, n;

	pthread_mutex_lock(&d->lock);
	for (n = 0; n < PDN_NIDS; n++) {
		i = (d->next_id + n) % PDN_NIDS;
		if (!(d->ids[i / 8] & (1u << (i % 8)))) {
			d->ids[i / 8] |= (uint8_t)(1u << (i % 8));
			d->next_id = (i + 1) % PDN_NIDS;
			pthread_mutex_unlock(&d->lock);
			*id = i;
			return 0;
		}
	}
	pthread_mutex_unlock(&d->lock);
	PDN_WARN("all %u lane ids of %s are in use (maxComms %d)", PDN_NIDS, d->name, PDN_MAX_COMMS);
	return -ENOSPC;
}

void pdn_id_free(struct pdn_dev *d, uint32_t id)
{
	pthread_mutex_lock(&d->lock);
	d->ids[id / 8] &= (uint8_t)~(1u << (id % 8));
	pthread_mutex_unlock(&d->lock);
}

/* One peer id per address: with FI_SOURCE a message is reported from the
 * address's first entry, so a second entry's directed receives would
 * never match. */
int pdn_peer_insert(struct pdn_dev *d, const void *addr, size_t len, uint64_t *peer)
{
	struct pdn_peer *p;
	size_t i;
	int ret;

	if (!len || len > PDN_ADDR_MAX)
		return -EINVAL;
	pthread_mutex_lock(&d->lock);
	for (i = 0; i < d->npeers; i++)
		if (d->peers[i].len == len && !memcmp(d->peers[i].addr, addr, len)) {
			*peer = d->peers[i].id;
			pthread_mutex_unlock(&d->lock);
			return 0;
		}
	if (d->npeers >= PDN_MAX_PEERS) {
		pthread_mutex_unlock(&d->lock);
		PDN_WARN("%s: more than %d peers", d->name, PDN_MAX_PEERS);
		return -ENOSPC;
	}
	if (d->npeers == d->peers_cap) {
		size_t cap = d->peers_cap ? d->peers_cap * 2 : 8;

		p = realloc(d->peers, cap * sizeof(*p));
		if (!p) {
			pthread_mutex_unlock(&d->lock);
			return -ENOMEM;
		}
		d->peers = p;
		d->peers_cap = cap;
	}
	/* Under the lock: two threads inserting one address get one id. */
	ret = pd_fabric_insert(d->fab, addr, len, peer);
	if (!ret) {
		p = &d->peers[d->npeers++];
		p->len = len;
		memcpy(p->addr, addr, len);
		p->id = *peer;
	}
	pthread_mutex_unlock(&d->lock);
	return ret;
}

int pdn_buf_alloc(struct pdn_dev *d, size_t len, void **buf, struct pd_mr **mr)
{
	void *p = calloc(1, len);
	int ret;

	if (!p)
		return -ENOMEM;
	ret = pd_mr_reg_host(d->fab, p, len, PD_ACCESS_SEND | PD_ACCESS_RECV, mr);
	if (ret) {
		PDN_WARN("registering %zu bytes of the plugin's own: %s", len, pd_last_error());
		free(p);
		return ret;
	}
	*buf = p;
	return 0;
}

void pdn_buf_free(struct pdn_dev *d, void *buf, size_t len, struct pd_mr *mr)
{
	if (!buf)
		return;
	pd_mr_dereg(mr);
	/* The cache may keep the idle entry: drop it before the heap reuses
	 * the pages. */
	pd_mr_invalidate_host(d->fab, buf, len);
	free(buf);
}

void pdn_buf_bury(struct pdn_dev *d, void *buf, size_t len, struct pd_mr *mr)
{
	struct pdn_grave *g = malloc(sizeof(*g));

	if (!buf)
		return;
	if (!g) {
		/* Leaking beats freeing memory a provider may write. */
		PDN_WARN("out of memory: %zu bytes stay allocated", len);
		return;
	}
	*g = (struct pdn_grave) { .buf = buf, .len = len, .mr = mr };
	pthread_mutex_lock(&d->lock);
	g->next = d->graves;
	d->graves = g;
	pthread_mutex_unlock(&d->lock);
}

/* At dlclose (or exit): free everything, but only when nothing is left
 * open but connects NCCL abandoned (an attempt it stopped calling connect
 * for).  With a comm, a registration or a v11 context alive another
 * thread (NCCL's proxy) may still be inside the plugin: leaving it all is
 * then the safe choice. */
__attribute__((destructor)) static void pdn_unload(void)
{
	int i;

	if (__atomic_load_n(&pdn.live, __ATOMIC_ACQUIRE) > pdn_connect_pending())
		return;
	pdn_connect_abandon_all();
	pthread_mutex_lock(&pdn.lock);
	for (i = 0; i < pdn.ndevs; i++)
		dev_close(&pdn.devs[i]);
	pdn.ndevs = 0;
	__atomic_store_n(&pdn.ready, false, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&pdn.lock);
	pdn_log_reset();
}
