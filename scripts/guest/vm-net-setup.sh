#!/bin/bash
# Network layouts for tests inside the VM (shipped at /pd/lib/vm-net-setup.sh).
#
#   source /pd/lib/vm-net-setup.sh; rxe_policy      (as functions)
#   bash /pd/lib/vm-net-setup.sh rxe_policy netns_tcp  (as subcommands)
#
# netns_tcp   two namespaces ns1/ns2 joined by a veth pair (vt1 in ns1 with
#             10.0.0.1/24, vt2 in ns2 with 10.0.0.2/24), lo up in each.  For
#             tcp-provider tests: rxe on 6.1 works in init_net only.
# netns_nics  a namespace "nics" with two NICs, veth ends nic1 (10.2.1.1/24)
#             and nic2 (10.2.2.1/24) whose peers sit in "nicpeer": what a
#             network plugin makes two devices of; and a docker0
#             (172.17.0.1/16, the address every Docker host gives it),
#             which it must leave out.
# rxe_policy  two rxe devices in init_net that really talk over a wire:
#             veth va (10.0.1.1, rxe0) <-> vb (10.0.1.2, rxe1).  Both
#             addresses are local, so policy routing sends traffic for the
#             other address out of the right veth instead of through lo:
#             "iif lo" rules for locally generated packets, "oif" rules for
#             rdma_cm's netdev check (without them connects are rejected with
#             -28), the local table moved after them to pref 100, and
#             accept_local/rp_filter so a packet from a local source is taken.
#             netdev_max_backlog is raised because veth drops bursts of 1 MiB
#             transfers otherwise (rxe then stalls ~2 s per retransmit).
#             rdma_ucm is loaded here: nothing autoloads it without udev.
# rxe_loop    one rxe0 on a veth (rxe-internal loopback), the simplest smoke.
#
# After sourcing, the chosen addresses are in RXE0_ADDR, RXE1_ADDR,
# NS1_ADDR, NS2_ADDR.  Export FI_UNIVERSE_SIZE=32 for verbs;ofi_rxm on rxe
# (rxm's CQ size exceeds rxe's max_cqe otherwise); rxe_policy and rxe_loop do
# so.  The functions stop at the first failing step and return non-zero.

NS1_ADDR=${NS1_ADDR:-10.0.0.1}
NS2_ADDR=${NS2_ADDR:-10.0.0.2}
RXE0_ADDR=${RXE0_ADDR:-10.0.1.1}
RXE1_ADDR=${RXE1_ADDR:-10.0.1.2}

# wait_rxe_active DEV: the rxe port follows the carrier of its netdev.
wait_rxe_active() {
	for _ in $(seq 50); do
		if rdma link show "$1/1" 2>/dev/null | grep -q 'state ACTIVE'; then
			return 0
		fi
		sleep 0.1
	done
	echo "vm-net-setup: $1 port not ACTIVE" >&2
	rdma link show >&2
	return 1
}

netns_tcp() {
	local -
	set -e
	modprobe veth
	ip netns add ns1
	ip netns add ns2
	ip link add vt1 netns ns1 type veth peer name vt2 netns ns2
	ip -n ns1 link set lo up
	ip -n ns2 link set lo up
	ip -n ns1 addr add "$NS1_ADDR/24" dev vt1
	ip -n ns2 addr add "$NS2_ADDR/24" dev vt2
	ip -n ns1 link set vt1 up
	ip -n ns2 link set vt2 up
}

netns_nics() {
	local - i
	set -e
	modprobe veth
	ip netns add nics
	ip netns add nicpeer
	ip -n nics link set lo up
	for i in 1 2; do
		ip link add "nic$i" netns nics type veth peer name "peer$i" netns nicpeer
		ip -n nics addr add "10.2.$i.1/24" dev "nic$i"
		ip -n nicpeer addr add "10.2.$i.2/24" dev "peer$i"
		ip -n nics link set "nic$i" up
		ip -n nicpeer link set "peer$i" up
	done
	ip link add docker0 netns nics type veth peer name dpeer netns nicpeer
	ip -n nics addr add 172.17.0.1/16 dev docker0
	ip -n nics link set docker0 up
	ip -n nicpeer link set dpeer up
}

rxe_policy() {
	local - k
	set -e
	if ! ip rule show > /dev/null 2>&1; then
		echo "rxe_policy: no policy routing in this kernel" \
			"(CONFIG_IP_MULTIPLE_TABLES); use rxe_loop" >&2
		return 1
	fi
	modprobe veth
	modprobe rdma_rxe
	modprobe rdma_ucm
	sysctl -qw net.core.netdev_max_backlog=100000
	ip link add va type veth peer name vb
	for k in all default va vb; do
		sysctl -qw "net.ipv4.conf.$k.accept_local=1"
		sysctl -qw "net.ipv4.conf.$k.rp_filter=0"
	done
	ip addr add "$RXE0_ADDR/24" dev va
	ip addr add "$RXE1_ADDR/24" dev vb
	ip link set va up
	ip link set vb up

	ip route add "$RXE1_ADDR" dev va src "$RXE0_ADDR" table 101
	ip route add "$RXE0_ADDR" dev vb src "$RXE1_ADDR" table 102
	ip rule add pref 10 iif lo to "$RXE1_ADDR" lookup 101
	ip rule add pref 11 iif lo to "$RXE0_ADDR" lookup 102
	ip rule add pref 12 oif va to "$RXE1_ADDR" lookup 101
	ip rule add pref 13 oif vb to "$RXE0_ADDR" lookup 102
	ip rule add pref 100 lookup local
	ip rule del pref 0 lookup local

	rdma link add rxe0 type rxe netdev va
	rdma link add rxe1 type rxe netdev vb
	wait_rxe_active rxe0
	wait_rxe_active rxe1
	export FI_UNIVERSE_SIZE=32
}

rxe_loop() {
	local -
	set -e
	modprobe veth
	modprobe rdma_rxe
	modprobe rdma_ucm
	sysctl -qw net.core.netdev_max_backlog=100000
	ip link add va type veth peer name vb
	ip addr add "$RXE0_ADDR/24" dev va
	ip link set va up
	ip link set vb up
	rdma link add rxe0 type rxe netdev va
	wait_rxe_active rxe0
	export FI_UNIVERSE_SIZE=32
}

# Run as a script: each argument names a layout.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
	set -euo pipefail
	[ $# -gt 0 ] || { sed -n '2,27s/^# \{0,1\}//p' "$0" >&2; exit 2; }
	for layout in "$@"; do
		case "$layout" in
		netns_tcp|rxe_policy|rxe_loop) "$layout" ;;
		*) echo "vm-net-setup: unknown layout $layout" >&2; exit 2 ;;
		esac
	done
fi
