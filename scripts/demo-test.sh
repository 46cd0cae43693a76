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
echo "1..5"
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
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
