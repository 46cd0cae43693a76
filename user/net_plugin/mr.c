// SPDX-License-Identifier: MIT
/*
 * regMr, regMrDmaBuf, deregMr: through libpeerdirect's registration cache,
 * so NCCL's repeated registrations of one buffer (regIsGlobal) are hits.
 */
#include <errno.h>
#include <stdlib.h>

#include "plugin.h"

/* Any comm carries its device; a pointer that is not one of ours is
 * refused rather than followed further. */
static struct pdn_dev *comm_dev(void *comm, const char *fn)
{
	struct pdn_comm *c = comm;

	if (!c || (c->magic != PDN_M_SEND && c->magic != PDN_M_RECV && c->magic != PDN_M_LISTEN)) {
		PDN_WARN("%s: %p is not a comm of this plugin", fn, comm);
		return NULL;
	}
	return c->dev;
}

/* Both directions: with regIsGlobal NCCL may use a registration made on
 * one comm on another. */
#define PDN_ACCESS (PD_ACCESS_SEND | PD_ACCESS_RECV)

/* A registration made: its handle filled in, logged, counted, handed out. */
static ncclResult_t mr_ready(struct pdn_dev *d, struct pdn_mr *m, int type, void *data,
			     size_t size, const char *what, void **mhandle)
{
	m->magic = PDN_M_MR;
	m->type = type;
	m->base = (uintptr_t)data;
	m->len = size;
	pdn_log_registration(d, m, what);
	pdn_live(1);
	*mhandle = m;
	return ncclSuccess;
}

ncclResult_t pdn_reg_mr(void *comm, void *data, size_t size, int type, void **mhandle)
{
	struct pdn_dev *d = comm_dev(comm, "regMr");
	struct pdn_mr *m;
	int ret;

	if (!d || !mhandle)
		return ncclInternalError;
	if (type != NCCL_PTR_HOST) {
		PDN_WARN("regMr: memory type %d: only host memory (NCCL_PTR_HOST) without a dma-buf fd; device memory comes through regMrDmaBuf",
			 type);
		return ncclInternalError;
	}
	if (!data || !size) {
		PDN_WARN("regMr: %s", !data ? "NULL address" : "0 bytes");
		return ncclInternalError;
	}
	m = calloc(1, sizeof(*m));
	if (!m)
		return ncclSystemError;
	ret = pd_mr_reg_host(d->fab, data, size, PDN_ACCESS, &m->mr);
	if (ret) {
		PDN_WARN("regMr of host [%p, +%zu): %s", data, size, pd_last_error());
		free(m);
		return pdn_result(ret);
	}
	return mr_ready(d, m, NCCL_PTR_HOST, data, size, "regMr host", mhandle);
}

ncclResult_t pdn_reg_mr_dmabuf(void *comm, void *data, size_t size, int type, uint64_t offset,
			       int fd, void **mhandle)
{
	struct pdn_dev *d = comm_dev(comm, "regMrDmaBuf");
	struct pdn_mr *m;
	int ret;

	if (!d || !mhandle)
		return ncclInternalError;
	/* Host memory may come this way without an fd (NCCL passes -1). */
	if (fd < 0 && type == NCCL_PTR_HOST)
		return pdn_reg_mr(comm, data, size, type, mhandle);
	if (fd < 0 || !size) {
		PDN_WARN("regMrDmaBuf: %s", fd < 0 ? "no dma-buf fd" : "0 bytes");
		return ncclInternalError;
	}
	m = calloc(1, sizeof(*m));
	if (!m)
		return ncclSystemError;
	/* The cache keys the dma-buf's inode, not the fd number: a repeated
	 * registration is a hit whatever fd NCCL holds it by. */
	ret = pd_mr_reg_dmabuf(d->fab, fd, offset, size, PDN_ACCESS, &m->mr);
	if (ret) {
		PDN_WARN("regMrDmaBuf fd %d [%llu, +%zu): %s", fd, (unsigned long long)offset, size,
			 pd_last_error());
		free(m);
		return pdn_result(ret);
	}
	return mr_ready(d, m, NCCL_PTR_DMABUF, data, size, "regMrDmaBuf", mhandle);
}

ncclResult_t pdn_dereg_mr(void *comm, void *mhandle)
{
	struct pdn_mr *m = mhandle;

	(void)comm;	/* registrations are the device's, not the comm's */
	if (!m || m->magic != PDN_M_MR) {
		PDN_WARN("deregMr: %p is not a registration of this plugin", mhandle);
		return ncclInternalError;
	}
	m->magic = PDN_M_DEAD;
	/* Requests still using it hold the library's entry themselves. */
	pd_mr_dereg(m->mr);
	free(m);
	pdn_live(-1);
	return ncclSuccess;
}

struct pdn_mr *pdn_mr_check(void *mhandle, const void *data, size_t size, const char *fn)
{
	struct pdn_mr *m = mhandle;
	uintptr_t p = (uintptr_t)data;

	if (!m || m->magic != PDN_M_MR) {
		PDN_WARN("%s: %p is not a registration of this plugin", fn, mhandle);
		return NULL;
	}
	if (p < m->base || p - m->base > m->len || size > m->len - (p - m->base)) {
		PDN_WARN("%s: [%p, +%zu) lies outside its registration [%p, +%zu)", fn, data, size,
			 (void *)m->base, m->len);
		return NULL;
	}
	return m;
}
