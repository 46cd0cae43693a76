#!/bin/bash
# Ring allreduce across "nodes": pd-collective (user/tools/pd-collective.c)
# on module dma-bufs, direct (auto: mapped on tcp) vs forced bounce.
#
#   scripts/bench-nodes.sh [--mode single|nodes|both] [--sizes LIST]
#                          [--warmup N] [--iters N] [--keep-logs DIR]
#
#   single  one VM (--smp 2 --mem 2048), both ranks inside it, over lo
#   nodes   two VMs at once (-smp 1 each), one rank in each, joined by
#           virtio-net over `-netdev stream,addr.type=unix` (QEMU on the
#           host: VM 0 listens on a unix socket, VM 1 connects); eth0 is
#           10.9.0.1/24 and 10.9.0.2/24, rendezvous at 10.9.0.1
#   both    (default) single, then nodes
#
# Every VM loads kmod/peerdirect.ko (sim_devices=1 sim_mem_mb=512) and runs
# its rank(s) with --memory device:0 --provider tcp.  Rank 0's table, with
# the exact command, is printed per mode.  Defaults (sizes 4K..64M, warmup 1,
# iters 3: x4 up to 1M) take about 4-5 min under TCG on a 2-core host.
#
# vm-run.sh has no NIC option: the NIC goes in through --qemu-arg, and the
# stock kernel's virtio_pci/virtio_net through --mod (loaded by the guest).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"

mode=both
sizes=4K,64K,1M,8M,32M,64M
warmup=1
iters=3
logs=
while [ $# -gt 0 ]; do
	case "$1" in
	--mode) mode=${2:?}; shift 2 ;;
	--sizes) sizes=${2:?}; shift 2 ;;
	--warmup) warmup=${2:?}; shift 2 ;;
	--iters) iters=${2:?}; shift 2 ;;
	--keep-logs) logs=${2:?}; shift 2 ;;
	*) sed -n '2,21s/^# \{0,1\}//p' "$0" >&2; exit 2 ;;
	esac
done
case "$mode" in single|nodes|both) ;; *) echo "bench-nodes: --mode single|nodes|both" >&2; exit 2 ;; esac

[ -f kmod/peerdirect.ko ] || make -s modules
make -s -C user build/pd-collective

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
cp user/build/pd-collective "$work/payload/bin/"
# Guest: NODE NRANKS [ADDR]; NODE is the first rank it runs.  Output lines
# of rank 0 are prefixed "PDC0:" so the host can pick the table from the
# console log.
cat > "$work/payload/node.sh" <<'GUEST'
set -eo pipefail
node=$1 nranks=$2 addr=${3:-}
shift 3
insmod /pd/ko/peerdirect.ko sim_devices=1 sim_mem_mb=512
if [ -n "$addr" ]; then
	modprobe virtio_pci
	modprobe virtio_net
	for i in $(seq 50); do [ -e /sys/class/net/eth0 ] && break; sleep 0.1; done
	ip link set eth0 up
	ip addr add "$addr/24" dev eth0
	# libfabric's tcp provider would otherwise advertise lo.
	export FI_TCP_IFACE=eth0
	rdv=10.9.0.1
else
	rdv=127.0.0.1
fi
args=(--nranks "$nranks" --rendezvous "$rdv:29500" --memory device:0 --provider tcp --timeout 60000 "$@")
rc=0
if [ "$node" = 0 ] && [ "$nranks" -gt 1 ] && [ -z "$addr" ]; then
	# All ranks in this VM: rank 1 in the background.
	pd-collective --rank 1 "${args[@]}" > /tmp/rank1.out 2>&1 &
	r1=$!
	pd-collective --rank 0 "${args[@]}" 2>&1 | sed 's/^/PDC0: /' || rc=1
	wait "$r1" || rc=1
	sed 's/^/rank1: /' /tmp/rank1.out
else
	prefix="rank$node: "
	[ "$node" = 0 ] && prefix="PDC0: "
	pd-collective --rank "$node" "${args[@]}" 2>&1 | sed "s/^/$prefix/" || rc=1
fi
exit "$rc"
GUEST

bench=(--sizes "$sizes" --warmup "$warmup" --iters "$iters")
vm=(scripts/vm-run.sh --mem 1024 --ko kmod/peerdirect.ko --payload "$work/payload"
    --timeout 600 --no-kmemleak)
status=0

table() {
	grep -a '^PDC0: ' "$1" | sed 's/^PDC0: //' || true
}

if [ "$mode" != nodes ]; then
	echo "### single VM (-smp 2): 2 ranks over lo, module dma-bufs"
	echo "# scripts/vm-run.sh ... --smp 2 --mem 2048 -- node.sh 0 2 '' ${bench[*]}"
	# --mem 2048: two ranks, each with a direct and a bounce fabric, OOM in 1G.
	if ! "${vm[@]}" --smp 2 --mem 2048 --log "$logdir/single.log" -- node.sh 0 2 '' "${bench[@]}" \
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
	echo "### two VMs (-smp 1 each): 1 rank per VM, virtio-net over a unix stream socket"
	# shellcheck disable=SC2046  # net prints separate words
	"${vm[@]}" $(net on 52:54:00:09:00:01) --mod virtio_net --mod virtio_pci \
		--log "$logdir/node0.log" -- node.sh 0 2 10.9.0.1 "${bench[@]}" > "$logdir/node0.out" 2>&1 &
	pids+=($!)
	# QEMU 7.2's stream client does not retry: start VM 1 once VM 0 listens.
	for _ in $(seq 600); do
		[ -S "$sock" ] && break
		sleep 0.1
	done
	[ -S "$sock" ] || { echo "bench-nodes: VM 0 never listened on $sock" >&2; exit 1; }
	# shellcheck disable=SC2046
	"${vm[@]}" $(net off 52:54:00:09:00:02) --mod virtio_net --mod virtio_pci \
		--log "$logdir/node1.log" -- node.sh 1 2 10.9.0.2 "${bench[@]}" > "$logdir/node1.out" 2>&1 &
	pids+=($!)
	for i in 0 1; do
		if ! wait "${pids[$i]}"; then
			status=1
			echo "--- VM $i failed:"
			tail -n 30 "$logdir/node$i.out"
		fi
	done
	pids=()
	echo "# VM 0: scripts/vm-run.sh ... $(net on 52:54:00:09:00:01 | tr '\n' ' ')--mod virtio_net --mod virtio_pci -- node.sh 0 2 10.9.0.1 ${bench[*]}"
	echo "# VM 1: the same with server=off, mac 52:54:00:09:00:02, node.sh 1 2 10.9.0.2"
	table "$logdir/node0.log"
fi
exit "$status"
