// SPDX-License-Identifier: MIT
/*
 * A libibverbs.so.1 for test_pdctl from before dma-buf MRs (rdma-core
 * older than 34): it has no ibv_reg_dmabuf_mr, nor anything else pdctl's
 * doctor looks up, so the doctor finds rdma-core too old.
 */
int pd_fake_libibverbs(void);

int pd_fake_libibverbs(void)
{
	return 0;
}
