#!/bin/bash
# Collectives across "nodes": pd-coll (user/tools/coll/) on module dma-bufs,
# every path side by side (direct: mapped on tcp; bounce; host), nccl-tests'
# table per collective.
#
#   scripts/bench-nodes.sh [--mode single|nodes|both] [--ppn N] [--coll LIST]
#                          [-b SIZE] [-e SIZE] [-n ITERS] [-w WARMUP]
#                          [--keep-logs DIR]
#
#   single  one VM (--smp 2 --tcg multi --mem 2048), 2 ranks inside it (pd-coll --np 2)
#   nodes   two VMs at once (-smp 1 each), --ppn ranks in each (default 2:
#           ranks 0-1 in VM 0, 2-3 in VM 1), joined by virtio-net over
#           `-netdev stream,addr.type=unix` (QEMU on the host: VM 0 listens
#           on a unix socket, VM 1 connects; --ppn 1 or 2); eth0 is 10.9.0.1/24 and
#           10.9.0.2/24, the rendezvous at 10.9.0.1 (a scheduler's launch:
#           --rank/--nranks per process)
#   both    (default) single, then nodes
#
# Every VM loads kmod/peerdirect.ko (sim_devices=1) and runs its ranks with
# --memory device:0 --provider tcp.  Rank 0's tables, with the exact
# command, are printed per mode.  Defaults (allreduce, 64K to 16M by 4,
# 3 iterations, 1 warmup) take about 5 min under TCG on a 2-core host.
#
# vm-run.sh has no NIC option: the NIC goes in through --qemu-arg, and the
# stock kernel's virtio_pci/virtio_net through --mod (loaded by the guest).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"

mode=both
ppn=2
coll=allreduce
minb=64K
maxb=16M
iters=3
warmup=1
logs=
while [ $# -gt 0 ]; do
	case "$1" in
	--mode) mode=${2:?}; shift 2 ;;
	--ppn) ppn=${2:?}; shift 2 ;;
	--coll) coll=${2:?}; shift 2 ;;
	-b) minb=${2:?}; shift 2 ;;
	-e) maxb=${2:?}; shift 2 ;;
	-n) iters=${2:?}; shift 2 ;;
	-w) warmup=${2:?}; shift 2 ;;
	--keep-logs) logs=${2:?}; shift 2 ;;
	*) sed -n '2,26s/^# \{0,1\}//p' "$0" >&2; exit 2 ;;
	esac
done
case "$mode" in single|nodes|both) ;; *) echo "bench-nodes: --mode single|nodes|both" >&2; exit 2 ;; esac
# Two ranks of three fabrics each fill a 1.5 GiB VM (ofi_rxm's pools) and
# 256 MiB of simulated HBM at -e 16M (two device lanes of 3 x 16M each).
[[ "$ppn" =~ ^[12]$ ]] || { echo "bench-nodes: --ppn 1 or 2 (memory: see the script)" >&2; exit 2; }

[ -f kmod/peerdirect.ko ] || make -s modules
make -s -C user build/pd-coll

work=$(mktemp -d "${TMPDIR:-/tmp}/pd-nodes.XXXXXX")
pids=()
cleanup() {
	local p
	for p in ${pids[@]+"${pids[@]}"}; do
		kill "$p" 2>/dev/null || true
	done
	rm -rf "$work"
}
trap cleanup EXIT
[ -z "$logs" ] || mkdir -p "$logs"
logdir=${logs:-$work}

mkdir -p "$work/payload/bin"
cp user/build/pd-coll "$work/payload/bin/"
# Guest: NODE PPN NNODES [ADDR] PD-COLL-ARGS...; runs ranks NODE*PPN ..
# NODE*PPN+PPN-1 of PPN*NNODES.  Output lines of rank 0 are prefixed
# "PDC0:" so the host can pick the tables from the console log.
cat > "$work/payload/node.sh" <<'GUEST'
set -o pipefail
node=$1 ppn=$2 nnodes=$3 addr=${4:-}
shift 4
export PATH=/pd/bin:$PATH
insmod /pd/ko/peerdirect.ko sim_devices=1 sim_mem_mb=256 || exit 3
ip link set lo up
if [ -n "$addr" ]; then
	modprobe virtio_pci
	modprobe virtio_net
	for i in $(seq 50); do [ -e /sys/class/net/eth0 ] && break; sleep 0.1; done
	ip link set eth0 up
	ip addr add "$addr/24" dev eth0
	# libfabric's tcp provider would otherwise advertise lo.
	export FI_TCP_IFACE=eth0
fi
common=(--memory device:0 --provider tcp --timeout 120000 "$@")
rc=0
if [ -z "$addr" ]; then
	pd-coll --np "$ppn" "${common[@]}" 2>&1 | sed 's/^/PDC0: /' || rc=1
	exit "$rc"
fi
nranks=$((ppn * nnodes))
pids=()
for i in $(seq $((ppn - 1)) -1 0); do
	r=$((node * ppn + i))
	if [ "$r" = 0 ]; then
		pd-coll --rank 0 --nranks "$nranks" --rendezvous 10.9.0.1:29500 "${common[@]}" 2>&1 |
			sed 's/^/PDC0: /' || rc=1
	else
		pd-coll --rank "$r" --nranks "$nranks" --rendezvous 10.9.0.1:29500 "${common[@]}" \
			> "/tmp/rank$r.out" 2>&1 &
		pids+=("$!:$r")
	fi
done
for p in ${pids[@]+"${pids[@]}"}; do
	wait "${p%%:*}" || { rc=1; echo "rank ${p#*:} failed:"; tail -n 20 "/tmp/rank${p#*:}.out"; }
done
exit "$rc"
GUEST

bench=(--coll "$coll" -b "$minb" -e "$maxb" -f 4 -n "$iters" -w "$warmup")
vm=(scripts/vm-run.sh --mem 1536 --ko kmod/peerdirect.ko --payload "$work/payload"
    --timeout 600 --no-kmemleak)
status=0

table() {
	grep -a '^PDC0: ' "$1" | sed 's/^PDC0: //' || true
}

if [ "$mode" != nodes ]; then
	echo "### single VM (-smp 2, multi-threaded TCG): 2 ranks over lo, module dma-bufs"
	echo "# scripts/vm-run.sh ... --smp 2 --tcg multi --mem 2048 -- node.sh 0 2 1 '' ${bench[*]}"
	# --mem 2048: two ranks of three fabrics each (ofi_rxm's pools), OOM in 1G.
	if ! "${vm[@]}" --smp 2 --tcg multi --mem 2048 --log "$logdir/single.log" -- node.sh 0 2 1 '' "${bench[@]}" \
		> "$logdir/single.out" 2>&1; then
		status=1
		tail -n 30 "$logdir/single.out"
	fi
	table "$logdir/single.log"
fi

if [ "$mode" != single ]; then
	sock=$work/n0.sock
	net() {	# SERVER MAC
		echo --qemu-arg "-netdev" --qemu-arg "stream,id=n0,server=$1,addr.type=unix,addr.path=$sock" \
			--qemu-arg "-device" --qemu-arg "virtio-net-pci,netdev=n0,mac=$2,romfile="
	}
	echo "### two VMs (-smp 1 each): $ppn ranks per VM, virtio-net over a unix stream socket"
	# shellcheck disable=SC2046  # net prints separate words
	"${vm[@]}" $(net on 52:54:00:09:00:01) --mod virtio_net --mod virtio_pci \
		--log "$logdir/node0.log" -- node.sh 0 "$ppn" 2 10.9.0.1 "${bench[@]}" > "$logdir/node0.out" 2>&1 &
	pids+=($!)
	# QEMU 7.2's stream client does not retry: start VM 1 once VM 0 listens.
	for _ in $(seq 600); do
		[ -S "$sock" ] && break
		sleep 0.1
	done
	[ -S "$sock" ] || { echo "bench-nodes: VM 0 never listened on $sock" >&2; exit 1; }
	# shellcheck disable=SC2046
	"${vm[@]}" $(net off 52:54:00:09:00:02) --mod virtio_net --mod virtio_pci \
		--log "$logdir/node1.log" -- node.sh 1 "$ppn" 2 10.9.0.2 "${bench[@]}" > "$logdir/node1.out" 2>&1 &
	pids+=($!)
	for i in 0 1; do
		if ! wait "${pids[$i]}"; then
			status=1
			echo "--- VM $i failed:"
			tail -n 30 "$logdir/node$i.out"
		fi
	done
	pids=()
	echo "# VM 0: scripts/vm-run.sh ... $(net on 52:54:00:09:00:01 | tr '\n' ' ')--mod virtio_net --mod virtio_pci -- node.sh 0 $ppn 2 10.9.0.1 ${bench[*]}"
	echo "# VM 1: the same with server=off, mac 52:54:00:09:00:02, node.sh 1 $ppn 2 10.9.0.2"
	table "$logdir/node0.log"
fi
exit "$status"
