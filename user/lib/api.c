// SPDX-License-Identifier: MIT
/*
 * The versioned function table: a runtime dlopen()s libpeerdirect.so.1 and
 * dlsym()s pd_get_api alone, so it needs neither our link-time symbols nor
 * libfabric's headers.  Fields are appended only; minor bumps add fields.
 */
#include <errno.h>

#include "peerdirect.h"
#include "errors.h"

static const struct pd_api api = {
	.size = sizeof(struct pd_api),
	.abi_major = PD_ABI_MAJOR,
	.abi_minor = PD_ABI_MINOR,
	.last_error = pd_last_error,
	.strerror = pd_strerror,
	.device_open = pd_device_open,
	.device_close = pd_device_close,
	.device_query = pd_device_query,
	.device_alloc = pd_device_alloc,
	.device_free = pd_device_free,
	.device_export = pd_device_export,
	.device_revoke = pd_device_revoke,
	.device_read_events = pd_device_read_events,
	.fabric_attr_init = pd_fabric_attr_init,
	.fabric_open = pd_fabric_open,
	.fabric_close = pd_fabric_close,
	.fabric_set_path = pd_fabric_set_path,
	.fabric_addr = pd_fabric_addr,
	.fabric_insert = pd_fabric_insert,
	.fabric_attach_device = pd_fabric_attach_device,
	.fabric_poll_events = pd_fabric_poll_events,
	.mr_reg_host = pd_mr_reg_host,
	.mr_reg_dmabuf = pd_mr_reg_dmabuf,
	.mr_dereg = pd_mr_dereg,
	.mr_path = pd_mr_path,
	.mr_reason = pd_mr_reason,
	.mr_rkey = pd_mr_rkey,
	.fabric_cache_stats = pd_fabric_cache_stats,
	.fabric_set_cache_limits = pd_fabric_set_cache_limits,
	.tsend = pd_tsend,
	.trecv = pd_trecv,
	.write = pd_write,
	.test = pd_test,
	.wait = pd_wait,
	.req_free = pd_req_free,
	.progress = pd_progress,
	.mr_invalidate_host = pd_mr_invalidate_host,
	.device_fd = pd_device_fd,
	.fabric_provider = pd_fabric_provider,
	.fabric_chunk_size = pd_fabric_chunk_size,
	.path_name = pd_path_name,
	.path_parse = pd_path_parse,
	.fabric_detach_device = pd_fabric_detach_device,
	.mr_cpu_ptr = pd_mr_cpu_ptr,
	.rdv_open = pd_rdv_open,
	.rdv_allgather = pd_rdv_allgather,
	.rdv_barrier = pd_rdv_barrier,
	.rdv_close = pd_rdv_close,
	.fabric_attr_init_sz = pd_fabric_attr_init_sz,
	.device_query_sz = pd_device_query_sz,
	.device_export_sz = pd_device_export_sz,
	.device_read_events_sz = pd_device_read_events_sz,
	.fabric_cache_stats_sz = pd_fabric_cache_stats_sz,
	.mr_rkey_sz = pd_mr_rkey_sz,
	.dmabuf_import = pd_dmabuf_import,
	.dmabuf_release = pd_dmabuf_release,
	.mr_reg_imported = pd_mr_reg_imported,
	.fabric_progress_count = pd_fabric_progress_count,
	.fabric_wait = pd_fabric_wait,
	.fabric_domain = pd_fabric_domain,
	.fabric_domains = pd_fabric_domains,
};

int pd_get_api(uint32_t abi_major, uint32_t abi_minor, const struct pd_api **out)
{
	if (!out)
		return pd_error(-EINVAL, "pd_get_api: out is NULL");
	if (abi_major != PD_ABI_MAJOR)
		return pd_error(-ENOTSUP, "libpeerdirect ABI %d.%d cannot serve a caller built for major version %u",
				PD_ABI_MAJOR, PD_ABI_MINOR, abi_major);
	if (abi_minor > PD_ABI_MINOR)
		return pd_error(-ENOTSUP, "libpeerdirect ABI %d.%d is older than the %u.%u the caller needs: install a newer libpeerdirect",
				PD_ABI_MAJOR, PD_ABI_MINOR, abi_major, abi_minor);
	*out = &api;
	return 0;
}
