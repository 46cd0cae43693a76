#!/bin/bash
# `make bench`: libpeerdirect's figures from pd-bench, the only source of
# performance claims.  Host: cache hit cost and shim vs raw libfabric
# bandwidth.  VM (with the module): direct vs bounce on real dma-buf memory.
# Every figure is printed with the command that produced it.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
make -s modules
make -s -C user all
bench=user/build/pd-bench
sizes=${PD_BENCH_SIZES:-4K,64K,1M,8M,32M,64M}

echo "### host: registration cache (10k entries) vs uncached fi_mr_reg"
"$bench" cache --provider tcp
echo "### host: shim vs raw libfabric, host memory"
"$bench" bw --provider tcp --sizes 4K,1M,64M --repeats 5

payload=$(mktemp -d)
trap 'rm -rf "$payload"' EXIT
mkdir -p "$payload/bin"
cp "$bench" "$payload/bin/"
cat > "$payload/bench.sh" <<GUEST
set -e
insmod /pd/ko/peerdirect.ko sim_devices=1 sim_mem_mb=512
for prov in tcp shm; do
	echo "### VM: direct vs bounce on module dma-bufs, provider \$prov"
	/pd/bin/pd-bench paths --memory device:0 --provider \$prov --sizes $sizes --repeats 3
done
GUEST
scripts/vm-run.sh --mem 2048 --ko kmod/peerdirect.ko --payload "$payload" --timeout 1200 -- bench.sh
