#!/bin/bash
# `make kbench`: the kernel module's figures (performance goal P4), from
# selftests/kbench in a test VM, on the simulated backend and on an ivshmem
# BAR.  Every table is printed with the command that made it.
#
#   PD_KBENCH_BACKENDS="sim bar"   which backends (default both)
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
make -s modules selftests
payload=$(mktemp -d)
trap 'rm -rf "$payload"' EXIT
mkdir -p "$payload/selftests"
cp build/selftests/kbench "$payload/selftests/"
cp selftests/kbench-in-vm.sh "$payload/"
for backend in ${PD_KBENCH_BACKENDS:-sim bar}; do
	extra=()
	[ "$backend" = bar ] && extra=(--ivshmem 512M)
	cmd=(scripts/vm-run.sh --mem 2048 --timeout 1500 --ko kmod/peerdirect.ko
	     --ko selftests/importer/pd_test_importer.ko --payload "$payload"
	     "${extra[@]}" -- kbench-in-vm.sh "$backend")
	echo "### kbench, $backend backend: ${cmd[*]}"
	echo "### ($(nproc) host cores, QEMU TCG, $(date -u +%F))"
	"${cmd[@]}" 2>&1 | grep -v '^\[ *[0-9.]*\]' | sed -n '/^# kernel/,/^PD_VM_EXIT/p'
done
