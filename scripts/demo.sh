#!/bin/bash
# `make demo`: boot Debian's kernel in QEMU, load peerdirect, and walk through
# allocate -> export -> import -> write/read -> revoke (scripts/demo/pd-demo.c).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
make -s modules
payload=$(mktemp -d)
trap 'rm -rf "$payload"' EXIT
cc -O2 -Wall -Werror -static -o "$payload/pd-demo" scripts/demo/pd-demo.c
cat > "$payload/demo.sh" <<'GUEST'
set -e
echo "==> insmod peerdirect.ko sim_devices=1 sim_mem_mb=64 revoke_timeout_ms=500"
insmod /pd/ko/peerdirect.ko sim_devices=1 sim_mem_mb=64 revoke_timeout_ms=500
insmod /pd/ko/pd_test_importer.ko
modprobe vgem
./pd-demo
echo
echo "==> rmmod: allowed now that nothing is exported"
rmmod pd_test_importer peerdirect && echo "    unloaded"
GUEST
scripts/vm-run.sh --ko kmod/peerdirect.ko --ko selftests/importer/pd_test_importer.ko \
	--payload "$payload" --timeout 120 -- demo.sh
