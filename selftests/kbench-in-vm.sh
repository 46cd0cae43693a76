#!/bin/bash
# Kernel figures (P4) inside a test VM: selftests/kbench against a
# simulated device (sim) or an ivshmem BAR (bar, started with
# --ivshmem 512M).  Sized for 64k live exports and a 256 MiB export.
#
#   d=$(mktemp -d); mkdir -p $d/selftests
#   cp build/selftests/kbench $d/selftests/; cp selftests/kbench-in-vm.sh $d/
#   scripts/vm-run.sh --mem 2048 --timeout 1200 --ko kmod/peerdirect.ko \
#       --ko selftests/importer/pd_test_importer.ko --payload $d \
#       [--ivshmem 512M] -- kbench-in-vm.sh sim|bar
set -u
cd /pd || exit 1
backend=${1:-sim}
common="quota_mb=0 max_exports=65536 max_events=16 revoke_timeout_ms=300"
case $backend in
sim) params="sim_devices=1 sim_mem_mb=320 sim_page_kb=64 $common" ;;
bar) params="sim_devices=0 bind_ivshmem=1 bar_page_kb=64 $common" ;;
*) echo "usage: kbench-in-vm.sh sim|bar"; exit 2 ;;
esac
echo "# kernel $(uname -r), backend $backend, $params"
insmod /pd/ko/peerdirect.ko $params || exit 1
insmod /pd/ko/pd_test_importer.ko || exit 1
/pd/selftests/kbench /dev/peerdirect0 65536
rc=$?
rmmod pd_test_importer && rmmod peerdirect || rc=1
exit $rc
