#!/bin/bash
# `make demo`: boot Debian's kernel in QEMU, load peerdirect, and walk through
# allocate -> export -> import -> write/read -> revoke (scripts/demo/pd-demo.c);
# then the peer-direct path itself: two processes move a device buffer over
# libfabric through libpeerdirect (pd-xfer), with the path the library took
# and why; the same binary against libfabric 2.x where the unstable root has
# it (the dma-buf path); and a short direct vs bounce vs host table from pd-coll.
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
# libfabric 2.x, where the unstable root has it (scripts/stack-root.sh): its
# loader, libc, and libfabric with the libraries it needs, for the same
# pd-xfer binary, built above against this host's libfabric headers.
sid=$(scripts/stack-root.sh --path)
lf2=$sid/usr/lib/x86_64-linux-gnu/libfabric.so.1
if [ -e "$lf2" ] && chroot "$sid" true 2>/dev/null; then
	mkdir "$payload/lf2"
	for f in /usr/lib/x86_64-linux-gnu/libfabric.so.1 \
		$(chroot "$sid" ldd /usr/lib/x86_64-linux-gnu/libfabric.so.1 |
		  awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\/.*ld-linux/ { print $1 }'); do
		cp "$sid$(chroot "$sid" readlink -f "$f")" "$payload/lf2/$(basename "$f")"
	done
	chroot "$sid" dpkg-query -W -f='${Version}\n' libfabric1 > "$payload/lf2.version"
	# A tarball: vm-run.sh would resolve loose libraries with the host's ldd.
	tar -C "$payload" -cf "$payload/lf2.tar" lf2 lf2.version
	rm -rf "$payload/lf2" "$payload/lf2.version"
fi
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

if [ -f /pd/lf2.tar ]; then
	tar -C /tmp -xf /pd/lf2.tar
	echo
	echo "==> the same pd-xfer binary, now against libfabric $(cat /tmp/lf2.version) (Debian unstable's,"
	echo "    loaded at run time): the library asks it for FI_MR_DMABUF, and shm (without CMA:"
	echo "    it copies from the dma-buf's mapping) takes the device buffer as a dma-buf"
	lf2=(/tmp/lf2/ld-linux-x86-64.so.2 --library-path /tmp/lf2 /pd/bin/pd-xfer
	     --rendezvous 127.0.0.1:7301 --memory device:0 --provider shm --size 4M --iters 4)
	FI_SHM_DISABLE_CMA=1 "${lf2[@]}" --rank 0 > /tmp/y0 2>&1 &
	sleep 0.3
	FI_SHM_DISABLE_CMA=1 "${lf2[@]}" --rank 1 > /tmp/y1 2>&1
	wait $!
	grep -h -E 'path|summary' /tmp/y0 /tmp/y1 | sed 's/^/    [libfabric 2] /' | sort -u
else
	echo
	echo "==> no libfabric 2.x here (scripts/stack-root.sh makes Debian unstable's root):"
	echo "    the dma-buf path needs libfabric 1.20 or newer at run time, as the reason says"
fi

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
