/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Whether the dma-buf core notifies dynamic importers, and so takes no pin
 * per map on their behalf: PD_MOVE_NOTIFY 1 yes, 0 no (6.1 without
 * CONFIG_DMABUF_MOVE_NOTIFY: the core pins once per map), -1 unknown.
 *
 * Upstream merged, in order: the renames (dma_buf_invalidate_mappings()),
 * "Always build with DMABUF_MOVE_NOTIFY" (the config symbol goes), "Make
 * .invalidate_mapping() truly optional", dma_buf_attach_revocable().  A
 * tree with the rename but neither the config symbol nor the revocable
 * helper may or may not have the second step (a partial backport): nothing
 * the build can see tells whether the core still pins per map, so that
 * combination is unknown and pd_attach_pinned() counts every pin as the
 * importer's (never invalidate what may be pinned; the cost is quarantine).
 *
 * Only the preprocessor: scripts/check-compat-notify.sh runs it through
 * cpp with every combination of the three inputs.
 */
#ifndef _PEERDIRECT_COMPAT_NOTIFY_H
#define _PEERDIRECT_COMPAT_NOTIFY_H

#if defined(PD_HAVE_DMA_BUF_ATTACH_REVOCABLE) || defined(CONFIG_DMABUF_MOVE_NOTIFY)
#define PD_MOVE_NOTIFY			1
#elif defined(PD_HAVE_DMA_BUF_INVALIDATE_MAPPINGS)
#define PD_MOVE_NOTIFY			(-1)
#else
#define PD_MOVE_NOTIFY			0
#endif

#endif /* _PEERDIRECT_COMPAT_NOTIFY_H */
