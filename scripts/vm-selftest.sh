#!/bin/bash
# Self-test of the VM harness: boots the VM a few times and checks what
# scripts/vm-run.sh promises.  Takes about 2 minutes under TCG.
#
#   scripts/vm-selftest.sh [--kernel stock|debug] [TEST...]
#
# Tests: boot ivshmem rdma rdmaloop exit scan qmp (default: all; with
# --kernel debug rdma is left out: no policy routing in that kernel).  Prints one
# "ok"/"FAIL" line per test and exits 1 if any failed.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
t=$here/vm-selftest
kernel=stock
if [ "${1:-}" = --kernel ]; then
	kernel=${2:?}
	shift 2
fi
tests=("$@")
if [ ${#tests[@]} -eq 0 ]; then
	tests=(boot ivshmem rdma rdmaloop exit scan qmp)
	[ "$kernel" = stock ] || tests=(boot ivshmem rdmaloop exit scan qmp)
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/pd-vm-selftest.XXXXXX")
trap 'rm -rf "$work"' EXIT

# Only the boot test pays for the kmemleak scan (debug kernel, ~10 s).
vm() {
	"$here/vm-run.sh" --kernel "$kernel" --no-kmemleak "$@"
}

test_boot() {
	"$here/vm-run.sh" --kernel "$kernel" --log "$work/boot.log" -- "$t/boot.sh" > /dev/null 2>&1 &&
		grep -q '^card0$' "$work/boot.log"
}

test_ivshmem() {
	vm --ivshmem 64M --ivshmem-dir "$work/hbm" -- "$t/ivshmem.sh" PEERDIRECT-HBM-OK 256 \
		> /dev/null 2>&1 &&
		[ "$(dd if="$work/hbm/hbm0" bs=1 skip=256 count=17 2>/dev/null)" = PEERDIRECT-HBM-OK ]
}

test_rdma() {
	vm --timeout 300 -- "$t/rdma.sh" > /dev/null 2>&1
}

test_rdmaloop() {
	vm --timeout 300 -- "$t/rdma-loop.sh" > /dev/null 2>&1
}

test_exit() {
	local rc=0
	vm -- "$t/exit7.sh" > /dev/null 2>&1 || rc=$?
	[ "$rc" = 7 ]
}

test_scan() {
	local rc=0
	vm -- "$t/kmsg-warn.sh" > /dev/null 2>&1 || rc=$?
	[ "$rc" = 3 ] || return 1
	vm --allow-warn 'pd-selftest synthetic' -- "$t/kmsg-warn.sh" > /dev/null 2>&1
}

test_qmp() {
	local sock=$work/qmp.sock log=$work/qmp.log pid rc=0
	: > "$log"
	vm --ivshmem 64M --qmp "$sock" --timeout 120 --log "$log" -- "$t/hotunplug.sh" \
		> /dev/null 2>&1 &
	pid=$!
	for _ in $(seq 240); do
		grep -q PD_READY_FOR_UNPLUG "$log" && break
		sleep 0.5
	done
	"$here/vm-qmp.sh" --wait-event DEVICE_DELETED "$sock" \
		'{"execute":"device_del","arguments":{"id":"ivshmem0"}}' > /dev/null 2>&1 || rc=1
	wait "$pid" || rc=1
	[ "$rc" = 0 ] && grep -q '^ivshmem gone' "$log"
}

failed=0
for name in "${tests[@]}"; do
	start=$SECONDS
	if "test_$name"; then
		echo "ok   $name ($((SECONDS - start)) s)"
	else
		echo "FAIL $name ($((SECONDS - start)) s)"
		failed=1
	fi
done
exit "$failed"
