#!/bin/bash
# `make demo`: boot Debian's kernel in QEMU, load peerdirect, and walk through
# allocate -> export -> import -> write/read -> revoke (scripts/demo/pd-demo.c);
# then the peer-direct path itself: two processes move a device buffer over
# libfabric through libpeerdirect (pd-xfer), with the path the library took
# and why, and a short direct vs bounce vs host table from pd-coll.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
make -s modules
make -s -C user build/pd-xfer build/pd-coll
payload=$(mktemp -d)
trap 'rm -rf "$payload"' EXIT
cc -O2 -Wall -Werror -static -o "$payload/pd-demo" scripts/demo/pd-demo.c
mkdir -p "$payload/bin"
cp user/build/pd-xfer user/build/pd-coll "$payload/bin/"
cat > "$payload/demo.sh" <<'GUEST'
set -eo pipefail
echo "==> insmod peerdirect.ko sim_devices=1 sim_mem_mb=256 revoke_timeout_ms=500"
insmod /pd/ko/peerdirect.ko sim_devices=1 sim_mem_mb=256 revoke_timeout_ms=500
insmod /pd/ko/pd_test_importer.ko
modprobe vgem
./pd-demo
rmmod pd_test_importer

echo
echo "==> the peer-direct path: two processes, one device buffer each, over libfabric"
echo "    rank 1 sends 4 MiB of /dev/peerdirect0 memory, rank 0 receives into its own,"
echo "    both check every byte; libpeerdirect says which path it took and why"
ip link set lo up
xfer=(--rendezvous 127.0.0.1:7300 --memory device:0 --provider tcp --size 4M --iters 4)
/pd/bin/pd-xfer --rank 0 "${xfer[@]}" > /tmp/x0 2>&1 &
sleep 0.3
/pd/bin/pd-xfer --rank 1 "${xfer[@]}" > /tmp/x1 2>&1
wait $!
grep -h -E 'path|summary' /tmp/x0 /tmp/x1 | sed 's/^/    /' | sort -u

echo
echo "==> a collective on device memory, every path side by side (nccl-tests' table)"
echo "    direct: device memory read by the NIC path; bounce: copied through host"
echo "    buffers (the detour peer direct removes); host: host memory, the limit"
/pd/bin/pd-coll --np 2 --provider tcp --memory device:0 --coll allreduce -b 1M -e 16M -f 4 -n 3 -w 1 \
	| grep -v -E '^#  Rank|^# paths alternate'
echo
echo "    (two emulated CPUs taking turns on one host thread: read the ratios, not the"
echo "    times; Documentation/performance.md"
echo "    has the model and the figures)"

echo
echo "==> rmmod: allowed now that nothing is exported"
rmmod peerdirect && echo "    unloaded"
GUEST
scripts/vm-run.sh --ko kmod/peerdirect.ko --ko selftests/importer/pd_test_importer.ko \
	--smp 2 --tcg single --mem 2048 --payload "$payload" --timeout 300 -- demo.sh
