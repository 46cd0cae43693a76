#!/bin/bash
# Kernel memory that a caller makes the module allocate is charged to the
# caller's memory cgroup (GFP_KERNEL_ACCOUNT), or a member of the device's
# group with many fds pins gigabytes no limit sees.  Only what the module
# allocates for itself at load or probe may be uncharged: the functions
# listed here.  A new GFP_KERNEL anywhere else fails this check, with the
# function it is in; add a function to the list only if no user call can
# reach it.
#
# usage: check-gfp.sh [SRCDIR]     ends with "N passed, N failed"
set -uo pipefail
src=${1:-.}
allowed=" pd_bar_probe pd_sim_alloc pd_device_create pd_device_register "
pass=0
fail=0
while IFS=: read -r file line fn; do
	[ -n "$file" ] || continue
	case "$allowed" in
	*" $fn "*) pass=$((pass + 1)); echo "ok $((pass + fail)) $file:$line uncharged in $fn, which only load or probe reaches" ;;
	*) fail=$((fail + 1)); echo "not ok $((pass + fail)) $file:$line GFP_KERNEL in $fn: user-reachable allocations use GFP_KERNEL_ACCOUNT" ;;
	esac
done < <(cd "$src/kmod" && awk '
	/^[a-z].*\(/ && !/;$/ { fn = $0 }
	/GFP_KERNEL/ && !/GFP_KERNEL_ACCOUNT/ {
		f = fn; sub(/\(.*/, "", f); n = split(f, a, " "); f = a[n]; sub(/^\*+/, "", f)
		print FILENAME ":" FNR ":" f
	}' ./*.c)
# The list must not outlive the code: an allowed name that no longer
# allocates is a stale exemption.
for fn in $allowed; do
	if grep -q "^[a-z].*[ *]$fn(" "$src"/kmod/*.c; then
		pass=$((pass + 1)); echo "ok $((pass + fail)) $fn exists"
	else
		fail=$((fail + 1)); echo "not ok $((pass + fail)) $fn is allowed uncharged but no longer exists"
	fi
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
