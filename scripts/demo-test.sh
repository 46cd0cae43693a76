#!/bin/bash
# `make demo` as a test (check.sh's admin stage): the story must reach its
# end on a fresh machine, since a newcomer's first run is this one.  Prints
# KTAP lines and "N passed, N failed".
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top" || exit 1
log=$(mktemp)
trap 'rm -f "$log"' EXIT
t0=$SECONDS
scripts/demo.sh > "$log" 2>&1
rc=$?
n=0 pass=0 fail=0
check() {	# check DESCRIPTION REGEX...
	local desc=$1 re ok=1
	shift
	for re in "$@"; do
		grep -qE -- "$re" "$log" || { ok=0; echo "# missing /$re/"; }
	done
	n=$((n + 1))
	if [ $ok = 1 ]; then
		pass=$((pass + 1)); echo "ok $n $desc"
	else
		fail=$((fail + 1)); echo "not ok $n $desc"; tail -n 30 "$log" | sed 's/^/# /'
	fi
}
echo "TAP version 13"
echo "1..7"
n=1
if [ "$rc" = 0 ]; then
	pass=1; echo "ok 1 make demo exits 0 ($((SECONDS - t0)) s, $(grep -oE 'wall=[0-9.]+s' "$log") in the VM)"
else
	fail=1; echo "not ok 1 make demo exits 0 (rc $rc)"; tail -n 30 "$log" | sed 's/^/# /'
fi
check "the kernel walk-through ends with the module unloaded" '^==> rmmod' '^    unloaded$'
check "two processes move a device buffer, every byte checked, path and reason printed" \
	'rank 0 provider .* memory device:0 size 4194304 path (dmabuf|mapped|bounce): .+' \
	'rank 0 summary: ok 4 error 0 mismatch 0' 'rank 1 summary: ok 4 error 0 mismatch 0'
check "pd-coll's direct vs bounce vs host table, every element right" \
	'^# out-of-place busbw ratios: +size +direct/bounce +direct/host' \
	'^# Out of bounds values : 0 OK' ' direct$' ' bounce$' ' host$'
# Every row (3 sizes x 3 paths), and no rank reported an error.
rows=$(grep -cE '^ +[0-9]+ +[0-9]+ +float +sum .* (direct|bounce|host)$' "$log")
errs=$(grep -c '^pd-coll: ' "$log")
n=$((n + 1))
if [ "$rows" = 9 ] && [ "$errs" = 0 ]; then
	pass=$((pass + 1)); echo "ok $n pd-coll's table has all 9 rows and no rank failed"
else
	fail=$((fail + 1)); echo "not ok $n pd-coll's table has all 9 rows and no rank failed ($rows rows, $errs errors)"
	grep '^pd-coll: ' "$log" | head -n 5 | sed 's/^/# /'
fi
# The dma-buf path: the host's libfabric (Debian 12: 1.17) has no
# FI_MR_DMABUF, and the reason says so; the same binary against the unstable
# root's libfabric 2.x takes it, whenever that root exists, and only then.
host_lf=$(dpkg-query -W -f='${Version}' libfabric1 2>/dev/null || echo 0)
if dpkg --compare-versions "$host_lf" lt 1.20; then
	check "libfabric $host_lf: the device buffer is not a dma-buf, and the reason says why" \
		'^    rank 0 provider tcp[^ ]* memory device:0 size 4194304 path mapped: dmabuf: libfabric 1\.[0-9]+ \(loaded at run time\) without FI_MR_DMABUF \(needs 1\.20\)'
else
	check "libfabric $host_lf: tcp maps the device buffer, and the reason says why" \
		'^    rank 0 provider tcp[^ ]* memory device:0 size 4194304 path mapped: dmabuf: provider tcp[^ ]* lacks FI_HMEM'
fi
sid=$(scripts/stack-root.sh --path)
if [ -e "$sid/usr/lib/x86_64-linux-gnu/libfabric.so.1" ]; then
	check "the same binary against libfabric 2.x takes the dma-buf path, every byte checked" \
		'^==> the same pd-xfer binary, now against libfabric 2\.' \
		'^    \[libfabric 2\] rank 0 provider shm memory device:0 size 4194304 path dmabuf: FI_MR_DMABUF on shm' \
		'^    \[libfabric 2\] rank 1 provider shm memory device:0 size 4194304 path dmabuf: FI_MR_DMABUF on shm' \
		'^    \[libfabric 2\] rank 0 summary: ok 4 error 0 mismatch 0' \
		'^    \[libfabric 2\] rank 1 summary: ok 4 error 0 mismatch 0'
else
	n=$((n + 1))
	if grep -q 'path dmabuf' "$log" || ! grep -q '^==> no libfabric 2.x here' "$log"; then
		fail=$((fail + 1)); echo "not ok $n without libfabric 2.x no dma-buf path is claimed"
	else
		pass=$((pass + 1)); echo "ok $n without libfabric 2.x no dma-buf path is claimed, and the demo says why"
	fi
fi
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
