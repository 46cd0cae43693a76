#!/bin/bash
# Kernel memory that a caller makes the module allocate is charged to the
# caller's memory cgroup (GFP_KERNEL_ACCOUNT), or a member of the device's
# group with many fds pins gigabytes no limit sees.  Every allocation in
# kmod/ must say so: any GFP_ flag set without __GFP_ACCOUNT, and any
# allocator that takes no gfp (vmalloc and friends: GFP_KERNEL inside), is
# a failure unless its function is exempt below, with the reason.  A new
# one fails this check with the function it is in; an exemption whose
# function no longer allocates fails it too.
#
# usage: check-gfp.sh [SRCDIR]     ends with "N passed, N failed"
set -uo pipefail
src=${1:-.}
# function:why.  Load and probe are the module's own, charged to no caller.
exempt=(
	"pd_bar_probe:probe"
	"pd_sim_alloc:module load"
	"pd_device_create:probe and module load"
	"pd_device_register:probe and module load"
	"pd_vmap_scratch:a page array freed before it returns; charging it only adds a way to fail, and 6.1's dma_buf_vmap() WARNs on any failure"
)
pass=0
fail=0
ok() { pass=$((pass + 1)); echo "ok $((pass + fail)) $*"; }
notok() { fail=$((fail + 1)); echo "not ok $((pass + fail)) $*"; }
why() {
	local e
	for e in "${exempt[@]}"; do
		[ "${e%%:*}" = "$1" ] && { echo "${e#*:}"; return 0; }
	done
	return 1
}
# FILE:LINE:FUNCTION for each suspect line.  The enclosing function is the
# last definition opened at column 0; it ends at a "}" at column 0, and a
# preprocessor line or a new file belongs to none ("-").
hits=$(cd "$src/kmod" && awk '
	FNR == 1 { fn = "-" }
	/^#/ { fn = "-" }
	/^}/ { fn = "-"; next }
	/^[a-z].*\(/ && !/;[ \t]*$/ { f = $0; sub(/\(.*/, "", f); n = split(f, a, " "); f = a[n]; sub(/^\*+/, "", f); fn = f }
	/GFP_[A-Z]/ && !/__GFP_ACCOUNT|GFP_KERNEL_ACCOUNT/ { print FILENAME ":" FNR ":" fn; next }
	/GFP_KERNEL_ACCOUNT/ && /GFP_KERNEL[^_]/ { print FILENAME ":" FNR ":" fn; next }
	/[^a-z_](vmalloc|vzalloc|vmalloc_user|kvmalloc_node|kstrdup|kmemdup|kasprintf)\(/ { print FILENAME ":" FNR ":" fn }
	' ./*.c ./*.h) || { notok "awk could not scan $src/kmod"; hits=; }
used=" "
while IFS=: read -r file line fn; do
	[ -n "$file" ] || continue
	if reason=$(why "$fn"); then
		ok "$file:$line uncharged in $fn: $reason"
		used="$used$fn "
	else
		notok "$file:$line uncharged in ${fn/#-/no function}: user-reachable allocations use GFP_KERNEL_ACCOUNT"
	fi
done <<< "$hits"
for e in "${exempt[@]}"; do
	fn=${e%%:*}
	case "$used" in
	*" $fn "*) ok "exemption $fn is in use" ;;
	*) notok "exemption $fn allocates nothing uncharged any more: drop it" ;;
	esac
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
