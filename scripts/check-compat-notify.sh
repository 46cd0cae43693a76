#!/bin/bash
# kmod/compat_notify.h's PD_MOVE_NOTIFY for every combination of what the
# build sees (review finding N11): a tree with dma_buf_invalidate_mappings()
# but neither CONFIG_DMABUF_MOVE_NOTIFY nor dma_buf_attach_revocable() is
# unknown (-1), so pd_attach_pinned() counts every pin as the importer's.
#   scripts/check-compat-notify.sh [TOP]
top=${1:-.}
pass=0
fail=0
# invalidate revocable config -> expected
while read -r inv rev cfg want; do
	flags=()
	[ "$inv" = y ] && flags+=(-DPD_HAVE_DMA_BUF_INVALIDATE_MAPPINGS)
	[ "$rev" = y ] && flags+=(-DPD_HAVE_DMA_BUF_ATTACH_REVOCABLE)
	[ "$cfg" = y ] && flags+=(-DCONFIG_DMABUF_MOVE_NOTIFY=1)
	got=$(printf '#include "compat_notify.h"\nPD_MOVE_NOTIFY\n' |
		cpp -P -I "$top/kmod" "${flags[@]}" - | tr -d ' ()\n')
	what="invalidate_mappings=$inv attach_revocable=$rev CONFIG_DMABUF_MOVE_NOTIFY=$cfg: PD_MOVE_NOTIFY $want"
	if [ "$got" = "$want" ]; then
		pass=$((pass + 1)); echo "ok $what"
	else
		fail=$((fail + 1)); echo "not ok $what (got $got)"
	fi
done <<'TABLE'
n n n 0
n n y 1
y n n -1
y n y 1
y y n 1
y y y 1
n y n 1
n y y 1
TABLE
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
