#!/bin/bash
# Runs inside the VM for the shim stage of scripts/check.sh: two processes
# move real dma-buf memory from the module through libpeerdirect (pd-xfer),
# over tcp between network namespaces (mapped and bounce paths) and over
# verbs on soft-RoCE (rxe), with end-to-end checksums, and revocation in the
# middle of a stream.  pd-xfer exits 0 all OK, 1 clear errors only, 5 if any
# transfer delivered wrong data, 3 if setup failed (pd-xfer(1)).
set -u
cd /pd || exit 1
xfer=/pd/bin/pd-xfer
insmod /pd/ko/peerdirect.ko sim_devices=2 sim_mem_mb=64 revoke_timeout_ms=300 || exit 1
source /pd/lib/vm-net-setup.sh
# libfabric's version decides whether the dmabuf path (FI_MR_DMABUF, 1.20+)
# exists; the support matrix records it with every result.
source /pd/lib/vm-libfabric.sh

source /pd/lib/vm-tap.sh

# A transfer's bound and sizes.  The debug kernel (KASAN, lockdep, kmemleak
# and memcg under TCG) ran a first 4 MiB transfer, connection setup
# included, in over 10 s: there the kernel paths (export, mmap, revoke,
# import) are what is under test, with a quarter of the bytes and 40 s.
wait_ms=10000 big=4M mid=1M life=(4096 1048576 16777216)
if [ -n "${PD_DEBUG_KERNEL:-}" ]; then
	wait_ms=40000 big=1M mid=256K life=(4096 1048576 4194304)
fi

# A row for scripts/support-matrix.sh: provider, path asked for, path the
# library took (from pd-xfer's report), the verdict, and the library's reason
# (last, it has spaces).
matrix() {	# matrix PROVIDER ASKED LOG RESULT
	local took
	local took why
	took=$(grep -oE 'size [0-9]+ path [a-z]+' "$3" | head -n 1 | cut -d' ' -f4)
	why=$(grep -m1 -oE 'size [0-9]+ path [a-z]+: .*' "$3" | sed 's/^size [0-9]* path [a-z]*: //')
	[ -n "$why" ] || why=$(grep -m1 -oE 'impossible: .*' "$3" | sed 's/^impossible: //')
	echo "# matrix: provider=$1 asked=$2 took=${took:-refused} libfabric=${lfver:-unknown} result=$4 why=$why"
}

# pair NS0 NS1 HOST LOG ARGS...: rank 0 in NS0, rank 1 in NS1 ("-" = init_net);
# the result is the worse of the two exit codes.  Ranks default to
# device:0 and device:1; a --memory in ARGS comes later and wins.
pair() {
	local ns0=$1 ns1=$2 host=$3 log=$4 r0 r1 p0
	shift 4
	run_in() { if [ "$1" = - ]; then shift; "$@"; else ip netns exec "$@"; fi; }
	run_in "$ns0" timeout 240 "$xfer" --timeout "$wait_ms" --rank 0 --rendezvous "$host:7300" --memory device:0 "$@" > "$log.0" 2>&1 &
	p0=$!
	sleep 0.3
	run_in "$ns1" timeout 240 "$xfer" --timeout "$wait_ms" --rank 1 --rendezvous "$host:7300" --memory device:1 "$@" > "$log.1" 2>&1
	r1=$?
	wait "$p0"
	r0=$?
	cat "$log.0" "$log.1" > "$log"
	return $((r0 > r1 ? r0 : r1))
}

tap_plan 18
netns_tcp > /dev/null

pair ns1 ns2 10.0.0.1 /tmp/tcp-mapped --provider tcp --path mapped --size $big --iters 4
check "tcp across netns, mapped path, checksums match" 0 $? /tmp/tcp-mapped \
	'path mapped' 'summary: ok 4 error 0 mismatch 0'
matrix tcp mapped /tmp/tcp-mapped $last

pair ns1 ns2 10.0.0.1 /tmp/tcp-bounce --provider tcp --path bounce --size $big --iters 4
check "tcp across netns, bounce path, checksums match" 0 $? /tmp/tcp-bounce \
	'path bounce' 'summary: ok 4 error 0 mismatch 0'
matrix tcp bounce /tmp/tcp-bounce $last

# FI_MR_DMABUF on module dma-bufs.  libfabric 2.x's tcp has no FI_HMEM, so
# forcing dmabuf there must be refused clearly (before 1.20: compiled out).
# shm has FI_HMEM: both ranks in init_net, small (inject) and large messages.
# shm's CMA cannot pin the exporter's VM_PFNMAP mapping; an shm endpoint
# with FI_HMEM has no CMA and copies through its shared buffers with the
# CPU from base_addr.  The library asks shm for FI_HMEM where
# FI_SHM_DISABLE_CMA=1 (64 B) or the fabric is opened with path dmabuf,
# as pd-xfer --path dmabuf does (the large size, without the variable).
pair ns1 ns2 10.0.0.1 /tmp/tcp-dmabuf --provider tcp --path dmabuf --size 64 --iters 1
rc=$?
if lf_has_dmabuf; then why='lacks FI_HMEM'; else why='without FI_MR_DMABUF'; fi
check "tcp: forcing the dmabuf path is refused clearly ($why)" 3 $rc /tmp/tcp-dmabuf \
	"forced path dmabuf is impossible: .*$why"
matrix tcp dmabuf /tmp/tcp-dmabuf $last
for run in "64 FI_SHM_DISABLE_CMA=1" "$big"; do
	read -r size env <<<"$run"
	(
		[ -z "$env" ] || export "${env?}"
		pair - - 127.0.0.1 /tmp/shm-dmabuf-$size --provider shm --path dmabuf --size "$size" --iters 3
	)
	rc=$?
	if lf_has_dmabuf; then
		check "shm${env:+ with $env}, dmabuf path (FI_MR_DMABUF), $size B, checksums match" 0 $rc \
			/tmp/shm-dmabuf-$size 'path dmabuf' 'summary: ok 3 error 0 mismatch 0'
	else
		check "shm, forcing the dmabuf path before libfabric 1.20 fails clearly ($size B)" 3 $rc \
			/tmp/shm-dmabuf-$size 'forced path dmabuf is impossible: .*without FI_MR_DMABUF'
	fi
	matrix "shm${env:++$env}" dmabuf /tmp/shm-dmabuf-$size $last
done

# tcp copies with the CPU and has no FI_HMEM: auto maps the dma-buf.
pair ns1 ns2 10.0.0.1 /tmp/tcp-auto --provider tcp --size $mid --iters 2
check "tcp, path chosen automatically and reported" 0 $? /tmp/tcp-auto 'path mapped' \
	'summary: ok 2 error 0 mismatch 0'
matrix tcp auto /tmp/tcp-auto $last

pair ns1 ns2 10.0.0.1 /tmp/tcp-revoke --provider tcp --path mapped --size $mid --iters 8 --revoke-after 3
check "revocation mid-stream (mapped): clear errors, no wrong data, cache invalidated" 1 $? /tmp/tcp-revoke \
	'revoked export' 'mismatch 0' 'invalidations [1-9]'

# The fd alone, as a runtime hands it to a network plugin: the export was
# made through another handle, so only the library's subscription
# (PEERDIRECT_IOCTL_SUBSCRIBE on the fabric's device) reports the revoke.
pair ns1 ns2 10.0.0.1 /tmp/tcp-revoke-h --provider tcp --path mapped --size $mid --iters 8 \
	--revoke-after 3 --memory handed:0
check "revocation of a handed dma-buf (fd only, subscribed): cache invalidated" 1 $? \
	/tmp/tcp-revoke-h 'revoked export' 'mismatch 0' 'invalidations [1-9]'

pair ns1 ns2 10.0.0.1 /tmp/tcp-revoke-b --provider tcp --path bounce --size $mid --iters 8 --revoke-after 3
check "revocation mid-stream (bounce): clear errors, no wrong data" 1 $? /tmp/tcp-revoke-b \
	'revoked export' 'mismatch 0'

# A dma-buf of another exporter (udmabuf): the library registers it like any
# dma-buf, with no peerdirect device behind it and no revocation events.
if [ -e /dev/udmabuf ]; then
	for p in mapped bounce; do
		pair ns1 ns2 10.0.0.1 /tmp/udmabuf-$p --provider tcp --memory udmabuf --path $p \
			--size $mid --iters 3
		check "foreign dma-buf (udmabuf), tcp, $p path, checksums match" 0 $? /tmp/udmabuf-$p \
			"memory udmabuf size [0-9]+ path $p" 'summary: ok 3 error 0 mismatch 0'
		matrix tcp+udmabuf $p /tmp/udmabuf-$p $last
	done
else
	skip "foreign dma-buf, mapped" "no /dev/udmabuf (CONFIG_UDMABUF off)"
	skip "foreign dma-buf, bounce" "no /dev/udmabuf (CONFIG_UDMABUF off)"
fi

if rxe_policy > /tmp/rxe.log 2>&1; then
	# The layout exports FI_UNIVERSE_SIZE=32 for raw libfabric tools; the
	# library must size rxm's queues for rxe by itself.
	unset FI_UNIVERSE_SIZE
	pair - - 127.0.0.1 /tmp/verbs-auto --provider 'verbs;ofi_rxm' --size $mid --iters 3
	rc=$?
	# With FI_MR_DMABUF the reason must also say why rxe refused it.
	why=()
	lf_has_dmabuf && why=('path bounce: .*dmabuf: ')
	check "verbs over rxe: falls back to bounce and says why" 0 $rc /tmp/verbs-auto \
		'path bounce: .*cannot pin the VM_PFNMAP mapping' 'summary: ok 3 error 0 mismatch 0' \
		${why[@]+"${why[@]}"}
	matrix 'verbs;ofi_rxm' auto /tmp/verbs-auto $last
	pair - - 127.0.0.1 /tmp/verbs-mapped --provider 'verbs;ofi_rxm' --path mapped --size $mid --iters 1
	check "verbs over rxe: forcing the mapped path fails clearly" 3 $? /tmp/verbs-mapped \
		'forced path mapped is impossible: .*Bad address .*cannot be pinned'
	matrix 'verbs;ofi_rxm' mapped /tmp/verbs-mapped $last
	# verbs pins the pages of a host registration.  Freed host memory
	# that comes back at the same address holds new pages: a
	# registration the cache kept idle would still point at the old ones
	# (the receiver's bytes land there, the sender's old bytes go out).
	# 1.5M on every tier: only rxm's rendezvous (above its 128 KiB SAR
	# limit) reads the user's MR; smaller messages copy through rxm's own
	# buffers by address and could not show a stale registration.  Not
	# 1M: 6.1's rxe_mr_copy() reads one map pointer past the MR's map
	# array when a copy ends at the end of an MR of whole 256-page maps
	# (KASAN: slab-out-of-bounds on the debug kernel; gone with 6.3's
	# xarray rewrite of rxe's MR pages).
	pair - - 127.0.0.1 /tmp/verbs-remap --provider 'verbs;ofi_rxm' --memory host --remap \
		--size 1536K --iters 3
	check "verbs over rxe: new host pages at a reused address carry the new bytes (no idle pinned entry)" \
		0 $? /tmp/verbs-remap 'rank 0 summary: ok 3 error 0 mismatch 0; cache lookups 3 hits 0 misses 3' \
		'rank 1 summary: ok 3 error 0 mismatch 0; cache lookups 3 hits 0 misses 3'
else
	sed 's/^/# /' /tmp/rxe.log
	skip "verbs over rxe" "no rxe layout on this kernel"
	skip "verbs forced mapped" "no rxe layout on this kernel"
	skip "verbs, host pages at a reused address" "no rxe layout on this kernel"
fi

# The library's own tests on the module's dma-bufs (on the host they
# skip): the range checked by lseek, a read-only export, revocation by the
# device's events and, for a holder of only the fd, by SUBSCRIBE.  Its
# totals line is renamed so that it counts once, as this check.
timeout 180 /pd/bin/test_device > /tmp/test-device.log 2>&1
rc=$?
sed -i 's/# Totals:/# totals:/' /tmp/test-device.log
check "test_device: the library on module dma-bufs (4 tests)" 0 $rc /tmp/test-device.log \
	'# totals: pass:4 fail:0 xfail:0 xpass:0 skip:0 error:0'
sed 's/^/#| /' /tmp/test-device.log

# The NCCL net plugin on the node's devices (issue 36), in a namespace of
# two NICs: a device per NIC, each carrying traffic; then two processes
# hand the plugin only their exports' fds, as a runtime hands NCCL a
# buffer: sizes 0 to 16 MiB, and a revocation of each side's memory
# between messages, learnt by the plugin's own device (SUBSCRIBE).
netns_nics > /dev/null
PD_TEST_NET_MIN_DEVS=2 PD_TEST_NET_LEFT_OUT=docker0 PD_TEST_NET_PLUGIN=/pd/lib/libnccl-net-peerdirect.so \
	ip netns exec nics timeout 600 /pd/bin/test_net_plugin_device > /tmp/net-plugin.log 2>&1
rc=$?
sed -i 's/# Totals:/# totals:/' /tmp/net-plugin.log
check "NCCL net plugin: a device per NIC (2, docker0 left out), module dma-bufs 0 to 16 MiB, revocation mid-stream (3 tests)" \
	0 $rc /tmp/net-plugin.log 'device 1: nic[12] at' \
	'# totals: pass:3 fail:0 xfail:0 xpass:0 skip:0 error:0'
sed 's/^/#| /' /tmp/net-plugin.log

# Lifecycle costs on module dma-bufs (issue 9): every step has a figure.
timeout 300 /pd/bin/pd-bench lifecycle --memory device:0 --provider tcp \
	--sizes "$(IFS=,; echo "${life[*]}")" --repeats 3 > /tmp/lifecycle.log 2>&1
rc=$?
rows=()
for bytes in "${life[@]}"; do
	rows+=("^ +$bytes( +[0-9.]+){11} *\$")
done
check "pd-bench lifecycle on device:0: every step measured at ${life[*]} B" 0 $rc /tmp/lifecycle.log "${rows[@]}"
sed 's/^/# /' /tmp/lifecycle.log

# Cache hits on module dma-bufs with their device attached (P3, review N4):
# by fd and through a handle, beside host ranges in the same run.  Each
# cached dma-buf registration holds a dup of its fd: 2000 of them need
# more than the default 1024.  Not on the debug kernel: its figures would
# measure KASAN.
if [ -n "${PD_DEBUG_KERNEL:-}" ]; then
	skip "pd-bench cache on device:0" "debug kernel: cache figures under KASAN measure KASAN; the registration paths they drive run in the transfers above"
else
	(ulimit -n 8192 && timeout 300 /pd/bin/pd-bench cache --memory device:0 --provider tcp \
		--entries 2000) > /tmp/cache.log 2>&1
	rc=$?
	check "pd-bench cache on device:0: a watched handle hit measured" 0 $rc /tmp/cache.log \
		'^shim host 4 KiB ranges +entries +2000 +hit' \
		'^shim dma-buf handle \(device:0, watched\) +entries +2000 +hit \(get\+release\) median +[0-9]+ ns.* hits 200100/202100'
	sed 's/^/# /' /tmp/cache.log
fi

tap_done
