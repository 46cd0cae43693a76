// SPDX-License-Identifier: MIT
/*
 * The doctor's library checks, with libibverbs, libfabric and
 * libpeerdirect dlopen()ed (pdctl links none of them; their headers are
 * build-time only): an ibv_reg_dmabuf_mr of a real export per RDMA pair,
 * libfabric's FI_HMEM providers, and libpeerdirect's own choice per device
 * and provider (pd_mr_path, pd_mr_reason).  The static build links
 * static.c instead, which loads nothing.
 */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>
#include <linux/peerdirect.h>
#include <infiniband/verbs.h>
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>	/* FI_MR_DMABUF (1.20+) is a registration flag */
#include "peerdirect.h"
#include "fabric_hints.h"
#include "fi_compat.h"

#include "doctor.h"

/*
 * Libraries stay mapped after dlclose: libfabric's and the providers'
 * constructors keep memory that only their globals point to, which an
 * unmapped library would turn into leaks (LeakSanitizer reports them).
 */
#define DL_FLAGS	(RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE)


/* A dma-buf of one page of device memory: its fd, or -errno (what says where). */
static int make_export(const struct dev *d, uint64_t *handle, uint64_t *len,
		       const char **what)
{
	struct peerdirect_alloc a = { .argsz = sizeof(a), .size = 65536 };
	struct peerdirect_export e = { .argsz = sizeof(e) };
	struct peerdirect_free f = { .argsz = sizeof(f) };
	int ret;

	*what = "PEERDIRECT_IOCTL_ALLOC";
	if (ioctl(d->fd, PEERDIRECT_IOCTL_ALLOC, &a) < 0)
		return -errno;
	e.flags = PEERDIRECT_EXPORT_RDWR | PEERDIRECT_EXPORT_CLOEXEC;
	e.handle = a.handle;
	e.length = a.alloc_size;
	if (ioctl(d->fd, PEERDIRECT_IOCTL_EXPORT, &e) < 0) {
		ret = -errno;
		*what = "PEERDIRECT_IOCTL_EXPORT";
		f.handle = a.handle;
		ioctl(d->fd, PEERDIRECT_IOCTL_FREE, &f);
		return ret;
	}
	*handle = a.handle;
	*len = a.alloc_size;
	return e.fd;
}

static void drop_export(const struct dev *d, int fd, uint64_t handle)
{
	struct peerdirect_free f = { .argsz = sizeof(f), .handle = handle };

	close(fd);
	ioctl(d->fd, PEERDIRECT_IOCTL_FREE, &f);
}

static const char *errname(int e)
{
	const char *s = strerrorname_np(e);

	return s ? s : "?";
}

/*
 * Whether the space-separated list names name; layered: also as the core
 * of a layered provider ("verbs" in "verbs;ofi_rxm").
 */
static bool list_has(const char *list, const char *name, bool layered)
{
	size_t n = strlen(name);

	while (n && *list) {
		size_t len = strcspn(list, " ");

		if (len >= n && !strncmp(list, name, n) &&
		    (len == n || (layered && list[n] == ';')))
			return true;
		list += len;
		list += strspn(list, " ");
	}
	return false;
}

/*
 * The libfabric provider the library would drive an RDMA NIC with: efa for
 * a device the efa driver runs (named rdmap0s31 and the like, not efa*),
 * else dr->verbs.
 */
static const char *rdma_provider(const struct nic *nic)
{
	char path[PATH_MAX], driver[32];

	snprintf(path, sizeof(path), "%s/class/infiniband/%s/device/driver", sysroot, nic->name);
	return !link_base(path, driver, sizeof(driver)) && !strcmp(driver, "efa") ? "efa" : "verbs";
}

static bool load_verbs(struct doctor *dr)
{
	static const char *const names[] = {
		"ibv_get_device_list", "ibv_free_device_list", "ibv_get_device_name",
		"ibv_open_device", "ibv_close_device", "ibv_alloc_pd", "ibv_dealloc_pd",
		"ibv_reg_dmabuf_mr", "ibv_dereg_mr",
	};
	void **slots[] = {
		(void **)&dr->verbs.get_device_list, (void **)&dr->verbs.free_device_list,
		(void **)&dr->verbs.get_device_name, (void **)&dr->verbs.open_device,
		(void **)&dr->verbs.close_device, (void **)&dr->verbs.alloc_pd,
		(void **)&dr->verbs.dealloc_pd, (void **)&dr->verbs.reg_dmabuf_mr,
		(void **)&dr->verbs.dereg_mr,
	};
	unsigned int i;

	if (dr->verbs.tried)
		return dr->verbs.so;
	dr->verbs.tried = true;
	dr->verbs.so = dlopen("libibverbs.so.1", DL_FLAGS);
	if (!dr->verbs.so) {
		set_text(dr->verbs.error, "libibverbs.so.1 not loaded: %s (install libibverbs1 and "
			 "ibverbs-providers)", dlerror());
		return false;
	}
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		*slots[i] = dlsym(dr->verbs.so, names[i]);
		if (!*slots[i]) {
			set_text(dr->verbs.error, "libibverbs.so.1 has no %s (rdma-core too old for "
				 "dma-buf MRs: v34 or newer needed)", names[i]);
			dr->verbs.too_old = true;
			dlclose(dr->verbs.so);
			dr->verbs.so = NULL;
			return false;
		}
	}
	return true;
}

/* ibv_reg_dmabuf_mr of a fresh export on the named device: 0 or errno. */
static void try_dmabuf_mr(struct doctor *dr, const struct dev *d, const struct nic *nic, struct pair *p)
{
	struct ibv_device **list, *ibdev = NULL;
	struct ibv_context *ctx = NULL;
	struct ibv_pd *pd = NULL;
	struct ibv_mr *mr;
	uint64_t handle = 0, len = 0;
	const char *what;
	int n = 0, i, fd, e;

	list = dr->verbs.get_device_list(&n);
	for (i = 0; list && i < n; i++)
		if (!strcmp(dr->verbs.get_device_name(list[i]), nic->name))
			ibdev = list[i];
	if (!ibdev) {
		set_text(p->reason, "ibv_reg_dmabuf_mr not tried: libibverbs lists no device %s "
			 "(%d devices; is its provider in ibverbs-providers?)", nic->name, n);
		set_text(p->fix, "install the provider for %s (ibverbs-providers) and check "
			 "ibv_devices", nic->name);
		goto out;
	}
	ctx = dr->verbs.open_device(ibdev);
	pd = ctx ? dr->verbs.alloc_pd(ctx) : NULL;
	if (!pd) {
		e = errno;
		p->verdict = VERDICT_UNKNOWN;
		set_text(p->reason, "ibv_reg_dmabuf_mr not tried: %s on %s: %s", ctx ?
			 "ibv_alloc_pd" : "ibv_open_device", nic->name, strerror(e));
		set_text(p->fix, "check /dev/infiniband permissions and the locked-memory limit "
			 "(ulimit -l)");
		goto out;
	}
	fd = make_export(d, &handle, &len, &what);
	if (fd < 0) {
		p->verdict = VERDICT_UNKNOWN;
		set_text(p->reason, "ibv_reg_dmabuf_mr not tried: no test export: %s on "
			 "peerdirect%d: %s", what, d->idx, strerror(-fd));
		set_text(p->fix, "free device memory or raise the quota (pdctl list)");
		goto out;
	}
	mr = dr->verbs.reg_dmabuf_mr(pd, 0, len, 0, fd, IBV_ACCESS_LOCAL_WRITE |
				 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE);
	e = errno;
	if (mr) {
		p->ibv_errno = 0;
		p->verdict = VERDICT_DMABUF;
		set_text(p->reason, "ibv_reg_dmabuf_mr on %s accepted a %llu-byte export of "
			 "peerdirect%d: the NIC DMAs device memory", nic->name,
			 (unsigned long long)len, d->idx);
		p->fix[0] = 0;
		dr->verbs.dereg_mr(mr);
	} else {
		p->ibv_errno = e;
		p->verdict = VERDICT_BOUNCE;
		set_text(p->reason, "ibv_reg_dmabuf_mr on %s refused a peerdirect%d export: %s "
			 "(errno %d, %s): the library stages through host memory", nic->name,
			 d->idx, strerror(e), e, errname(e));
		if (e == EOPNOTSUPP && (d->features & PEERDIRECT_FEAT_REVOCABLE_ONLY))
			/* the exporter refused a pinned importer, not the NIC */
			set_text(p->fix, "peerdirect%d refuses pinned importers: someone opted "
				 "in to require_revocable=1; NICs that pin (EFA, older mlx5) need the "
				 "default, 0 (echo 0 > /sys/module/peerdirect/parameters/"
				 "require_revocable, and drop it from /etc/modprobe.d)", d->idx);
		else if (e == EOPNOTSUPP && strstr(p->topology, "ACS redirects"))
			set_text(p->fix, "peer-to-peer is redirected by ACS (see pci:): "
				 "pci=disable_acs_redir=<bridges> on the kernel command line, where "
				 "isolation allows");
		else
			set_text(p->fix, "a NIC whose driver registers dma-bufs (mlx5, efa, ...; "
				 "soft-RoCE rxe does not), with rdma-core >= 34 and kernel >= 5.12");
	}
	drop_export(d, fd, handle);
out:
	if (pd)
		dr->verbs.dealloc_pd(pd);
	if (ctx)
		dr->verbs.close_device(ctx);
	if (list)
		dr->verbs.free_device_list(list);
}

bool libs_usable(const struct doctor *dr, char *why)
{
	if (dr->no_libs)
		set_text(why, "PDCTL_LIBS=none");
	return !dr->no_libs;
}

/* Without libfabric the library cannot run: no pair has a verdict. */
bool libs_fabric_missing(const struct doctor *dr, struct pair *p)
{
	if (dr->no_libs || dr->lf.loaded)
		return false;
	p->verdict = VERDICT_UNKNOWN;
	set_text(p->reason, "the library cannot run without libfabric: %s", dr->lf.why);
	set_text(p->fix, "apt install libfabric1");
	return true;
}

void libs_pair_rdma(struct doctor *dr, const struct dev *d, const struct nic *nic,
		    struct pair *p)
{
	const char *prov;

	if (libs_fabric_missing(dr, p))
		return;
	if (!load_verbs(dr)) {
		if (dr->verbs.too_old)
			p->verdict = VERDICT_BOUNCE;
		set_text(p->reason, "ibv_reg_dmabuf_mr not tried: %s", dr->verbs.error);
		set_text(p->fix, dr->verbs.too_old ? "rdma-core 34 or newer (Debian 12 has 44)" :
			 "apt install libibverbs1 ibverbs-providers");
		return;
	}
	try_dmabuf_mr(dr, d, nic, p);
	prov = rdma_provider(nic);

	/* The NIC takes dma-bufs; the library needs libfabric to, too. */
	if (p->verdict == VERDICT_DMABUF && !dr->lf.dmabuf) {
		p->verdict = VERDICT_BOUNCE;
		set_text(p->reason, "ibv_reg_dmabuf_mr on %s accepted a peerdirect%d export, but "
			 "libfabric %u.%u takes no dma-buf registrations (%s): the library stages "
			 "through host memory", nic->name, d->idx, FI_MAJOR(dr->lf.version),
			 FI_MINOR(dr->lf.version), dr->lf.why);
		set_text(p->fix, "libfabric >= 1.20 (Debian 13)");
	} else if (p->verdict == VERDICT_DMABUF && !list_has(dr->lf.hmem, prov, true)) {
		/* The library asks the NIC's provider for FI_HMEM; without it,
		 * it opens the provider plain and stages (its "lacks FI_HMEM"). */
		p->verdict = VERDICT_BOUNCE;
		set_text(p->reason, "ibv_reg_dmabuf_mr on %s accepted a peerdirect%d export, but "
			 "libfabric %u.%u's %s provider does not offer FI_HMEM (providers that do: "
			 "%s): the library stages through host memory", nic->name, d->idx,
			 FI_MAJOR(dr->lf.version), FI_MINOR(dr->lf.version), prov,
			 dr->lf.hmem[0] ? dr->lf.hmem : "none");
		set_text(p->fix, "a libfabric whose %s provider is built with FI_HMEM (dma-buf) "
			 "support", prov);
	}
}

void libs_check_fabric(struct doctor *dr)
{
	uint32_t (*version)(void);
	int (*getinfo)(uint32_t, const char *, const char *, uint64_t,
		       const struct fi_info *, struct fi_info **);
	struct fi_info *(*dupinfo)(const struct fi_info *);
	void (*freeinfo)(struct fi_info *);
	struct fi_info *hints, *info = NULL, *i;
	const char *dmabuf_why = NULL;
	char provs[TEXT] = "", seen[TEXT] = "", lacks[TEXT];
	size_t used = 0, seen_used = 0, t;
	bool dmabuf;
	uint32_t v;
	void *so;
	int ret = 0, tret;

	so = dlopen("libfabric.so.1", DL_FLAGS);
	if (!so) {
		set_text(dr->lf.why, "libfabric.so.1 not loaded: %s", dlerror());
		add_check(dr, "libfabric", "FI_HMEM", STATUS_FAIL, "apt install libfabric1", "%s", dr->lf.why);
		return;
	}
	*(void **)&version = dlsym(so, "fi_version");
	*(void **)&getinfo = dlsym(so, "fi_getinfo");
	*(void **)&dupinfo = dlsym(so, "fi_dupinfo");
	*(void **)&freeinfo = dlsym(so, "fi_freeinfo");
	if (!version || !getinfo || !dupinfo || !freeinfo) {
		set_text(dr->lf.why, "libfabric.so.1 lacks fi_version/fi_getinfo/fi_dupinfo/"
			 "fi_freeinfo");
		add_check(dr, "libfabric", "FI_HMEM", STATUS_FAIL, "a complete libfabric1", "%s", dr->lf.why);
		dlclose(so);
		return;
	}
	v = version();
	dr->lf.loaded = true;
	dr->lf.version = v;
	/*
	 * The library's tries, in its order, with the API version it asks
	 * for (fi_compat.h): a provider offers FI_HMEM to the library when
	 * the first try it answers asks for it.  One whose MSG endpoints alone
	 * offer FI_HMEM, or that offers it only without FI_DIRECTED_RECV and
	 * FI_SOURCE (asked for first), stages.  Tries with FI_HMEM are asked
	 * even where libfabric has no FI_MR_DMABUF: that is said below.
	 */
	for (t = 0; t < PD_NR_TRIES; t++) {
		hints = dupinfo(NULL);
		if (!hints) {
			add_check(dr, "libfabric", "FI_HMEM", STATUS_FAIL, NULL, "fi_dupinfo failed");
			dlclose(so);
			return;
		}
		pd_hints_for(hints, &pd_tries[t]);
		info = NULL;
		tret = getinfo(pd_fi_api_version(v), NULL, NULL, 0, hints, &info);
		if (tret)
			ret = ret ? ret : tret;
		for (i = tret ? NULL : info; i; i = i->next) {
			const char *name = i->fabric_attr && i->fabric_attr->prov_name ?
					   i->fabric_attr->prov_name : "?";

			if (list_has(seen, name, false))
				continue;
			list_add(seen, sizeof(seen), &seen_used, name);
			if (pd_tries[t].hmem)
				list_add(provs, sizeof(provs), &used, name);
		}
		if (info)
			freeinfo(info);
		freeinfo(hints);
	}
	/*
	 * FI_MR_DMABUF is a flag of fi_mr_regattr, not an mr_mode bit: a
	 * provider offering FI_HMEM takes dma-buf registrations when the
	 * libfabric loaded now is 1.20 or newer, whatever headers the library
	 * and pdctl were built against (they ask for 1.20 at run time).
	 */
	dmabuf = pd_fi_has_dmabuf(pd_fi_api_version(v));
	if (!dmabuf) {
		set_text(lacks, "no, libfabric %u.%u lacks it (needs 1.20)", FI_MAJOR(v),
			 FI_MINOR(v));
		dmabuf_why = lacks;
	}
	dr->lf.dmabuf = dmabuf;
	set_text(dr->lf.hmem, "%s", provs);
	if (dmabuf_why)
		set_text(dr->lf.why, "%s", dmabuf_why);
	if (used)
		add_check(dr, "libfabric", "FI_HMEM", dmabuf ? STATUS_OK : STATUS_WARN, dmabuf ? NULL :
			  "libfabric >= 1.20 (Debian 13)",
			  "libfabric %u.%u: providers offering FI_HMEM: %s; dma-buf registrations "
			  "(FI_MR_DMABUF): %s", FI_MAJOR(v), FI_MINOR(v), provs,
			  dmabuf ? "yes" : dmabuf_why);
	else
		add_check(dr, "libfabric", "FI_HMEM", STATUS_WARN, "libfabric >= 1.20 with the NIC's "
			  "provider (verbs, efa) built with dma-buf support",
			  "libfabric %u.%u: no provider offers FI_HMEM (fi_getinfo: %d)%s%s: the "
			  "library registers mappings or bounces", FI_MAJOR(v), FI_MINOR(v), ret,
			  dmabuf ? "" : "; dma-buf registrations (FI_MR_DMABUF): ",
			  dmabuf ? "" : dmabuf_why);
	dlclose(so);
}

/*
 * What pd_mr_reg_dmabuf (path auto) chooses for a fresh export of device
 * idx on a fabric of provider prov: the library's own verdict and reason.
 * The provider picks its NIC itself (the first it offers).
 */
/* The sized calls below are 1.1's; nothing newer is needed, and the tools
 * do not depend on the library's version (the header's minor may be newer
 * than the installed library). */
#define DOCTOR_ABI_MINOR 1

static void library_choice(struct doctor *dr, const struct pd_api *api, int idx, const char *prov)
{
	struct pd_export_info info = { .fd = -1 };
	struct pd_fabric_attr attr;
	struct pd_fabric *fab = NULL;
	struct pd_device *dev = NULL;
	struct pd_mr *mr = NULL;
	uint64_t handle = 0, len = 0;
	const char *step;
	char subject[64];
	enum pd_path path;
	int ret;

	snprintf(subject, sizeof(subject), "peerdirect%d/%s", idx, prov);
	step = "pd_device_open";
	ret = api->device_open(idx, &dev);
	if (!ret) {
		api->fabric_attr_init_sz(&attr, sizeof(attr));
		attr.provider = prov;
		step = "pd_fabric_open";
		ret = api->fabric_open(&attr, &fab);
	}
	if (!ret) {
		step = "pd_fabric_attach_device";
		ret = api->fabric_attach_device(fab, dev);
	}
	if (!ret) {
		step = "pd_device_alloc";
		ret = api->device_alloc(dev, 65536, &handle, &len);
	}
	if (!ret) {
		step = "pd_device_export";
		ret = api->device_export_sz(dev, handle, 0, len, PD_EXPORT_RDWR | PD_EXPORT_CLOEXEC,
					    &info, sizeof(info), NULL);
	}
	if (!ret) {
		step = "pd_mr_reg_dmabuf";
		ret = api->mr_reg_dmabuf(fab, info.fd, 0, len, PD_ACCESS_ALL, &mr);
	}
	if (ret) {
		add_check(dr, "libpeerdirect", subject, STATUS_SKIP, NULL, "not checked: %s: %s (%s)", step,
			  api->strerror(ret), api->last_error());
	} else {
		path = api->mr_path(mr);
		add_check(dr, "libpeerdirect", subject, path == PD_PATH_BOUNCE ? STATUS_WARN : STATUS_OK,
			  path == PD_PATH_BOUNCE ? "see the pairs' fixes" : NULL,
			  "pd_mr_reg_dmabuf chose %s: %s", api->path_name(path), api->mr_reason(mr));
		api->mr_dereg(mr);
	}
	if (info.fd >= 0)
		close(info.fd);
	if (handle)
		api->device_free(dev, handle);
	if (fab)
		api->fabric_close(fab);
	if (dev)
		api->device_close(dev);
}

void libs_check_peerdirect(struct doctor *dr, const struct dev *devs, int nr_devs,
			   const struct nic *nics, int nr_nics)
{
	const struct pd_api *api = NULL;
	bool rdma = false, netdev = false;
	pd_get_api_fn get;
	int i;
	void *so;

	so = dlopen("libpeerdirect.so.1", DL_FLAGS);
	if (!so) {
		add_check(dr, "libpeerdirect", "path", STATUS_SKIP, "apt install libpeerdirect1",
			  "not checked: libpeerdirect.so.1 not loaded: %s", dlerror());
		return;
	}
	*(void **)&get = dlsym(so, "pd_get_api");
	if (!get || get(PD_ABI_MAJOR, DOCTOR_ABI_MINOR, &api) || !api) {
		add_check(dr, "libpeerdirect", "path", STATUS_WARN, "a libpeerdirect1 of ABI 1.1 or newer",
			  "libpeerdirect.so.1 refuses ABI %d.%d", PD_ABI_MAJOR, DOCTOR_ABI_MINOR);
		dlclose(so);
		return;
	}
	add_check(dr, "libpeerdirect", "path", STATUS_OK, NULL, "libpeerdirect ABI %u.%u loaded; its "
		  "choice per device and provider follows (the provider picks its own NIC)",
		  api->abi_major, api->abi_minor);
	for (i = 0; i < nr_nics; i++) {
		rdma |= nics[i].kind == NIC_RDMA;
		netdev |= nics[i].kind == NIC_NETDEV;
	}
	for (i = 0; i < nr_devs; i++) {
		char state[32];

		if (devs[i].open_errno)
			continue;
		if (!attr_str(devs[i].idx, "state", state, sizeof(state)) &&
		    strcmp(state, "live")) {
			add_check(dr, "libpeerdirect", "path", STATUS_SKIP, "run pdctl doctor again once the "
				  "device is live", "not checked: peerdirect%d is %s", devs[i].idx,
				  state);
			continue;
		}
		if (rdma)
			library_choice(dr, api, devs[i].idx, "verbs");
		if (netdev)
			library_choice(dr, api, devs[i].idx, "tcp");
		/* Within the node: shm bounces with CMA (the library asks
		 * it no FI_HMEM, which would turn CMA off) and takes the
		 * dma-buf itself with FI_SHM_DISABLE_CMA=1. */
		library_choice(dr, api, devs[i].idx, "shm");
	}
	dlclose(so);
}

void libs_close(struct doctor *dr)
{
	if (dr->verbs.so)
		dlclose(dr->verbs.so);
	dr->verbs.so = NULL;
}
