#!/bin/bash
# Runs inside the VM for the doctor part of scripts/check.sh: the verdicts
# of `pdctl doctor` (the shared build an admin installs, which dlopen()s
# libibverbs, libfabric and libpeerdirect) on the situations it is for:
#   - the module not loaded, then loaded without devices: exit 3;
#   - soft-RoCE (rxe): bounce, because ibv_reg_dmabuf_mr of a real export
#     is refused, with the errno; the library's own choice agrees: exit 7;
#   - tcp over a veth: mapped (the CPU reads the dma-buf): exit 0;
#   - libfabric with FI_MR_DMABUF (the unstable root's 2.x) or without it
#     (Debian 12's 1.17): the check says which; the library's shm choice
#     is bounce with CMA, and why, and once FI_SHM_DISABLE_CMA=1 dmabuf
#     on 2.x, mapped on 1.17; verbs says why it could not take the dma-buf;
#   - a user outside the node's group: denied, exit 4, and the fix;
#   - only simulated devices: exit 9 unless --allow-sim (given everywhere
#     else here), and the uapi check.
# The payload holds bin/pdctl and lib/libpeerdirect.so.1, built for this
# tier's userspace.
set -u
cd /pd || exit 1
pdctl=/pd/bin/pdctl
ko=/pd/ko/peerdirect.ko
source /pd/lib/vm-net-setup.sh
source /pd/lib/vm-libfabric.sh

source /pd/lib/vm-tap.sh
doctor() {	# doctor LOG ARGS...: pdctl's exit code
	local log=$1
	shift
	timeout 120 "$pdctl" "$@" > "$log" 2>&1
}

tap_plan 13

# ---- no module ------------------------------------------------------------
doctor /tmp/d-nomod doctor
check "module not loaded: exit 3, says so and how to load it" 3 $? /tmp/d-nomod \
	'^module +peerdirect +fail +the peerdirect module is not loaded' 'fix: modprobe peerdirect' \
	'^exit 3: no module'
doctor /tmp/d-nomod.json --json doctor
check "module not loaded, --json: the same check, an \"error\" and \"exit\": 3" 3 $? /tmp/d-nomod.json \
	'"check": *"module"' '"status": *"fail"' '"error": *"no module, device or node"' '"exit": *3'

insmod "$ko" sim_devices=0 || exit 1
doctor /tmp/d-nodev doctor
check "module loaded without devices: exit 3, names the parameters" 3 $? /tmp/d-nodev \
	'^module +peerdirect +ok +loaded, version [0-9]+\.[0-9]+' '^module +parameters +ok .*sim_devices=0' \
	'the module is loaded but has no devices'
rmmod peerdirect || exit 1
insmod "$ko" sim_devices=2 sim_mem_mb=64 || exit 1

# ---- simulated devices only ----------------------------------------------------
doctor /tmp/d-sim doctor
check "only simulated devices, without --allow-sim: exit 9, says so and how to bind one" 9 $? \
	/tmp/d-sim '^device +simulated +fail +every device is simulated' 'fix: bind the accelerator' \
	'^uapi +peerdirect0 +ok +module uapi [0-9]+\.[0-9]+, tools [0-9]+\.[0-9]+' \
	'^exit 9: only simulated devices'
doctor /tmp/d-sim.json --json doctor
check "only simulated devices, --json: the check and \"exit\": 9" 9 $? /tmp/d-sim.json \
	'"subject": *"simulated"' '"exit": *9'

# ---- NICs -------------------------------------------------------------------
if ! rxe_policy > /tmp/rxe.log 2>&1; then
	sed 's/^/# /' /tmp/rxe.log
	for t in "rxe: bounce" "rxe --json" "rxe and veth" "library choice" "FI_MR_DMABUF" \
		"veth: mapped"; do
		skip "$t" "no rxe layout on this kernel"
	done
else
	unset FI_UNIVERSE_SIZE
	doctor /tmp/d-rxe -d 0 doctor --allow-sim --nic rxe0
	check "rxe: bounce, ibv_reg_dmabuf_mr of a real export refused with its errno, exit 7" 7 $? \
		/tmp/d-rxe \
		'^peerdirect0 +rxe0 +rdma +bounce +ibv_reg_dmabuf_mr on rxe0 refused a peerdirect0 export: .*\(errno [0-9]+, E[A-Z]+\)' \
		'fix: a NIC whose driver registers dma-bufs' '^exit 7: a pair would fall back to bounce' \
		'!^peerdirect1 '
	doctor /tmp/d-rxe.json --json -d 0 doctor --allow-sim --nic rxe0
	check "rxe, --json: verdict bounce, ibv_errno set, \"exit\": 7" 7 $? /tmp/d-rxe.json \
		'"nic": *"rxe0"' '"nic_kind": *"rdma"' '"verdict": *"bounce"' '"ibv_errno": *[1-9]' \
		'"exit": *7'
	doctor /tmp/d-both -d 0 doctor --allow-sim --nic rxe0 --nic va
	check "rxe and a veth: one pair each, the worse exit (7)" 7 $? /tmp/d-both \
		'^peerdirect0 +rxe0 +rdma +bounce ' '^peerdirect0 +va +netdev +mapped '
	# The library's own choice, through a fabric of each provider.
	check "library choice: verbs (rxe) bounce with its reason, tcp mapped" 7 7 /tmp/d-both \
		'^libpeerdirect +peerdirect0/verbs +warn +pd_mr_reg_dmabuf chose bounce: .*VM_PFNMAP' \
		'^libpeerdirect +peerdirect0/tcp +ok +pd_mr_reg_dmabuf chose mapped'
	if lf_has_dmabuf; then
		# With CMA the library asks no FI_HMEM of shm (it would turn
		# CMA off for host memory too) and bounces, since CMA cannot pin
		# the VM_PFNMAP mapping; with FI_SHM_DISABLE_CMA=1 shm copies
		# from the mapping with the CPU and takes the dma-buf itself.
		FI_SHM_DISABLE_CMA=1 doctor /tmp/d-shm -d 0 doctor --allow-sim --nic va
		cat /tmp/d-both /tmp/d-shm > /tmp/d-lf
		check "libfabric $lfver: FI_MR_DMABUF; shm bounces with CMA and says why, takes the dma-buf without; verbs says why it refused" \
			7 7 /tmp/d-lf \
			'^libfabric +FI_HMEM +ok +libfabric [0-9]+\.[0-9]+: providers offering FI_HMEM: .*shm.*; dma-buf registrations \(FI_MR_DMABUF\): yes$' \
			'^libpeerdirect +peerdirect0/verbs +warn +pd_mr_reg_dmabuf chose bounce: .*dmabuf: ' \
			"^libpeerdirect +peerdirect0/shm +warn +pd_mr_reg_dmabuf chose bounce: dmabuf: FI_HMEM not asked of shm: it would turn off shm's CMA, host memory included; .*; bounce: staged through [0-9]+ x [0-9]+ B registered host slots\$" \
			'^libpeerdirect +peerdirect0/shm +ok +pd_mr_reg_dmabuf chose dmabuf: .*FI_MR_DMABUF on shm'
	else
		# Without FI_MR_DMABUF, shm without CMA copies from the mapping
		# registered as host memory: mapped.
		FI_SHM_DISABLE_CMA=1 doctor /tmp/d-shm -d 0 doctor --allow-sim --nic va
		cat /tmp/d-both /tmp/d-shm > /tmp/d-lf
		check "libfabric ${lfver:-?}: no FI_MR_DMABUF, and the check and the library say so; shm without CMA maps" 7 7 /tmp/d-lf \
			'^libfabric +FI_HMEM +warn +libfabric 1\.[0-9]+: providers offering FI_HMEM: .*; dma-buf registrations \(FI_MR_DMABUF\): no, libfabric 1\.[0-9]+ lacks it \(needs 1\.20\)$' \
			'fix: libfabric >= 1\.20' \
			'^libpeerdirect +peerdirect0/shm +warn +pd_mr_reg_dmabuf chose bounce: dmabuf: libfabric 1\.[0-9]+ \(loaded at run time\) without FI_MR_DMABUF' \
			'^libpeerdirect +peerdirect0/shm +ok +pd_mr_reg_dmabuf chose mapped: .*mapped: provider shm copies with the CPU'
	fi
	doctor /tmp/d-veth -d 0 doctor --allow-sim --nic va
	check "veth: mapped, exit 0" 0 $? /tmp/d-veth '^peerdirect0 +va +netdev +mapped +tcp over va' \
		'^exit 0: no pair falls back to bounce'
fi

# ---- permissions ----------------------------------------------------------
doctor /tmp/d-all doctor --allow-sim
rc=$?
want=7
[ -e /sys/class/infiniband/rxe0 ] || want=0
check "every device and NIC, as root: no pair unknown or denied" $want $rc /tmp/d-all \
	'^peerdirect0 ' '^peerdirect1 ' '!^peerdirect[0-9]+ .* (unknown|denied|unavailable) ' \
	'^device_node +peerdirect0 +ok .*; simulated \(RAM standing in for device memory\)$'
chmod 0660 /dev/peerdirect0
chgrp 0 /dev/peerdirect0
timeout 120 setpriv --reuid=65534 --regid=65534 --clear-groups "$pdctl" -d 0 doctor \
	--allow-sim > /tmp/d-perm 2>&1
rc=$?
check "user outside the node's group: denied, exit 4, the group fix" 4 $rc /tmp/d-perm \
	'^device_node +peerdirect0 +fail +/dev/peerdirect0: Permission denied \(mode 0660 group .*not in that group\)' \
	'^peerdirect0 +va +netdev +denied +/dev/peerdirect0 cannot be opened: Permission denied' \
	'fix: add the user to the node.s group' '^exit 4: permission denied'

tap_done
