// SPDX-License-Identifier: MIT
/*
 * A libibverbs.so.1 for test_pdctl from before dma-buf MRs (rdma-core
 * older than 34): every verb pdctl's doctor looks up but
 * ibv_reg_dmabuf_mr.  None is ever called: the doctor gives up at the
 * missing one.
 */
#define STUB(name) void *name(void); void *name(void) { return 0; }

STUB(ibv_get_device_list)
STUB(ibv_free_device_list)
STUB(ibv_get_device_name)
STUB(ibv_open_device)
STUB(ibv_close_device)
STUB(ibv_alloc_pd)
STUB(ibv_dealloc_pd)
STUB(ibv_dereg_mr)
