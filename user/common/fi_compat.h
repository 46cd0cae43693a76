/* SPDX-License-Identifier: MIT */
/*
 * libfabric's dma-buf registration ABI, defined here so that one binary
 * takes FI_MR_DMABUF wherever the libfabric loaded at run time has it,
 * whatever headers it was built against (Debian 12 ships 1.17's, which lack
 * it).  Shared with pdctl's doctor.
 *
 * Facts, from libfabric's public headers and util code (v1.17.0 to v2.6.0):
 *  - FI_MR_DMABUF (1ULL << 40) is a flag of fi_mr_regattr, from 1.20 (in
 *    fabric.h; fi_domain.h from 2.0).
 *  - struct fi_mr_dmabuf { int fd; uint64_t offset; size_t len;
 *    void *base_addr; }, from 1.20.
 *  - struct fi_mr_attr: from 1.20 mr_iov shares a union with dmabuf; then
 *    iov_count, access, offset, requested_key, context, auth_key_size,
 *    auth_key, iface, device (a union of a uint64_t and ints), hmem_data
 *    (1.19), page_size (1.22), base_mr and sub_mr_cnt (2.0).
 *  - Providers read the fields of fi_mr_attr by the API version the fabric
 *    was opened with (fi_getinfo's version, kept in fabric_attr and
 *    fid_fabric's api_version): util's ofi_mr_update_attr reads dmabuf
 *    only from 1.20, hmem_data from 1.19, page_size from 1.22, base_mr
 *    and sub_mr_cnt from 2.0; efa refuses the FI_MR_DMABUF flag below 1.20.
 *    So the library asks for at least 1.20 wherever the run-time libfabric
 *    has it, and passes the whole 2.x struct, zeroed past what it sets: a
 *    libfabric that reads more than its requested version's fields still
 *    reads zeros inside our object.
 *  - fi_getinfo and fi_dupinfo are symbol-versioned: a binary built against
 *    1.17 binds fi_getinfo@FABRIC_1.3, which 2.x keeps and which passes the
 *    requested version through unchanged (src/abi_1_0.c).
 */
#ifndef PD_FI_COMPAT_H
#define PD_FI_COMPAT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>

#define PD_FI_MR_DMABUF		(1ULL << 40)
/* The first API version with FI_MR_DMABUF. */
#define PD_FI_DMABUF_VERSION	FI_VERSION(1, 20)

struct pd_fi_mr_dmabuf {
	int fd;
	uint64_t offset;
	size_t len;
	void *base_addr;
};

struct pd_fi_mr_attr {
	union {
		const struct iovec *mr_iov;
		const struct pd_fi_mr_dmabuf *dmabuf;
	};
	size_t iov_count;
	uint64_t access;
	uint64_t offset;
	uint64_t requested_key;
	void *context;
	size_t auth_key_size;
	uint8_t *auth_key;
	enum fi_hmem_iface iface;
	union {
		uint64_t reserved;
		int cuda;
		int ze;
		int neuron;
		int synapseai;
	} device;
	void *hmem_data;		/* 1.19 */
	size_t page_size;		/* 1.22 */
	const struct fid_mr *base_mr;	/* 2.0 */
	size_t sub_mr_cnt;		/* 2.0 */
};

/*
 * Built against headers that have it: our copy must be the real one, and
 * at least as long (a newer libfabric's longer struct would be read past
 * our object when we ask for its API version).
 */
#ifdef FI_MR_DMABUF
#define PD_FI_SAME(t, u, f) \
	_Static_assert(offsetof(t, f) == offsetof(u, f) && \
		       sizeof(((t *)0)->f) == sizeof(((u *)0)->f), #f " differs from libfabric's")
_Static_assert(PD_FI_MR_DMABUF == FI_MR_DMABUF, "FI_MR_DMABUF differs from libfabric's");
_Static_assert(sizeof(struct pd_fi_mr_dmabuf) == sizeof(struct fi_mr_dmabuf),
	       "struct fi_mr_dmabuf differs from libfabric's");
PD_FI_SAME(struct pd_fi_mr_dmabuf, struct fi_mr_dmabuf, fd);
PD_FI_SAME(struct pd_fi_mr_dmabuf, struct fi_mr_dmabuf, offset);
PD_FI_SAME(struct pd_fi_mr_dmabuf, struct fi_mr_dmabuf, len);
PD_FI_SAME(struct pd_fi_mr_dmabuf, struct fi_mr_dmabuf, base_addr);
PD_FI_SAME(struct pd_fi_mr_attr, struct fi_mr_attr, mr_iov);
PD_FI_SAME(struct pd_fi_mr_attr, struct fi_mr_attr, dmabuf);
PD_FI_SAME(struct pd_fi_mr_attr, struct fi_mr_attr, iov_count);
PD_FI_SAME(struct pd_fi_mr_attr, struct fi_mr_attr, access);
PD_FI_SAME(struct pd_fi_mr_attr, struct fi_mr_attr, offset);
PD_FI_SAME(struct pd_fi_mr_attr, struct fi_mr_attr, requested_key);
PD_FI_SAME(struct pd_fi_mr_attr, struct fi_mr_attr, context);
PD_FI_SAME(struct pd_fi_mr_attr, struct fi_mr_attr, auth_key_size);
PD_FI_SAME(struct pd_fi_mr_attr, struct fi_mr_attr, auth_key);
PD_FI_SAME(struct pd_fi_mr_attr, struct fi_mr_attr, iface);
PD_FI_SAME(struct pd_fi_mr_attr, struct fi_mr_attr, device);
PD_FI_SAME(struct pd_fi_mr_attr, struct fi_mr_attr, hmem_data);
#if FI_MAJOR_VERSION >= 2 || (FI_MAJOR_VERSION == 1 && FI_MINOR_VERSION >= 22)
PD_FI_SAME(struct pd_fi_mr_attr, struct fi_mr_attr, page_size);
#endif
#if FI_MAJOR_VERSION >= 2
PD_FI_SAME(struct pd_fi_mr_attr, struct fi_mr_attr, base_mr);
PD_FI_SAME(struct pd_fi_mr_attr, struct fi_mr_attr, sub_mr_cnt);
#endif
_Static_assert(sizeof(struct pd_fi_mr_attr) >= sizeof(struct fi_mr_attr),
	       "libfabric's fi_mr_attr grew: extend struct pd_fi_mr_attr");
#undef PD_FI_SAME
#endif

/* The headers' own version: what the rest of the code was written for. */
#define PD_FI_BUILD_VERSION	FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION)

/*
 * The API version to ask fi_getinfo for, given the run-time libfabric's
 * fi_version(): the headers' own, raised to 1.20 where the run-time
 * libfabric has FI_MR_DMABUF, and never above what it implements (it
 * refuses a newer one with -FI_ENOSYS).
 */
static inline uint32_t pd_fi_api_version(uint32_t runtime)
{
	uint32_t want = PD_FI_BUILD_VERSION;

	if (FI_VERSION_GE(runtime, PD_FI_DMABUF_VERSION) &&
	    FI_VERSION_LT(want, PD_FI_DMABUF_VERSION))
		want = PD_FI_DMABUF_VERSION;
	return FI_VERSION_LT(runtime, want) ? runtime : want;
}

/* Whether an API version has FI_MR_DMABUF. */
static inline int pd_fi_has_dmabuf(uint32_t api)
{
	return FI_VERSION_GE(api, PD_FI_DMABUF_VERSION);
}

#endif
