#!/bin/bash
# Runs inside the VM for the coll part of scripts/check.sh: pd-coll's
# collectives on the module's dma-bufs (simulated HBM and an ivshmem PCI
# BAR), every path side by side (direct, bounce, host), 2, 4 and 8 ranks,
# launched by --np, by mpirun (when the tier has Open MPI) and from Slurm's
# variables.  Every table must verify every element (#wrong = 0, "Out of
# bounds values : 0 OK"); a deliberately corrupted run must be counted.
# The payload holds bin/pd-coll, built for this tier's userspace.
set -u
cd /pd || exit 1
export PATH=/pd/bin:$PATH
ko=/pd/ko/peerdirect.ko
source /pd/lib/vm-libfabric.sh
source /pd/lib/vm-tap.sh

# Device memory: device 0 simulated, the ivshmem BAR next (bar_page_kb: the
# BAR is 64 MiB, pages of 64 KiB keep the allocator's bitmap small).
if ! insmod "$ko" sim_devices=1 sim_mem_mb=128 bind_ivshmem=1 bar_page_kb=64; then
	echo "Bail out! insmod peerdirect failed"
	exit 1
fi
ip link set lo up
bar=
for d in /sys/class/misc/peerdirect*; do
	[ "$(cat "$d/backend" 2>/dev/null)" = pci-bar ] && bar=${d##*/peerdirect}
done
echo "# BAR device: ${bar:-none}"

# tables LOG: how many tables ended verified, as a line the checks can match.
tables() {
	echo "# verified tables: $(grep -c '^# Out of bounds values : 0 OK' "$1")" >> "$1"
}
run() {	# run LOG COMMAND...: the command's exit code
	local log=$1 rc
	shift
	timeout 300 "$@" > "$log" 2>&1
	rc=$?
	tables "$log"
	return $rc
}
# No #wrong column may hold anything but 0 (columns 9 and 13 of a row).
rows_clean() {
	awk '$1 ~ /^[0-9]+$/ && NF >= 14 && ($9 != "0" || $13 != "0") { bad++ }
		END { exit bad > 0 }' "$1"
}

tap_plan 8

# Two sizes (an eager 4K, a pipelined 256K): under TCG each size costs tens
# of seconds here.  On the debug kernel (KASAN, lockdep, kmemleak) the
# largest size of a run is 4K (64K for the BAR and shm runs): each rank's
# region is then a few pages, so multi-page faults and scatter lists under
# KASAN come from the shim part and the selftests, and the sizes' own
# coverage from the other tiers.  Launchers are userspace only, and 8 ranks
# add load to the device but no path that 4 do not take: skipped there, said
# so, and run on the other tiers.
top=256K small=64K top_large=1M
[ -n "${PD_DEBUG_KERNEL:-}" ] && top=4K small=4K top_large=64K
debug_skip="runs on the other tiers (debug kernel: its time goes to the module's paths)"
sweep=(-b 4K -e "$top" -f 64 -n 2 -w 1 -c 1)
run /tmp/c2 pd-coll --np 2 --provider tcp --memory device:0 --coll all -d all "${sweep[@]}"
rc=$?
rows_clean /tmp/c2 || rc=wrong
# nccl-tests' parsers read one average per run, whatever the tables
[ "$(grep -c '^# Avg bus bandwidth' /tmp/c2)" = 1 ] || rc=avg-lines
check "2 ranks, every collective, float and bfloat16, module dma-bufs over tcp: every element right, one nccl-tests average" 0 "$rc" /tmp/c2 \
	'^# verified tables: 14$' '^# path direct: memory device:0 (mapped|dmabuf)' \
	'^# path bounce: memory device:0 bounce' '^# path host  : memory host' \
	'^# out-of-place busbw ratios' '!^# Out of bounds values : [1-9]' \
	'^# path direct: memory device:0 .*\(simulated device: RAM, not an accelerator\)$' \
	'^# Avg bus bandwidth    : [0-9.e+-]+ $' '^# pd-coll avg busbw \(bounce\): ' \
	'!^# Avg bus bandwidth .*(direct|bounce|host)$'
# For the record: the paths the library took here, and the copy bandwidth.
grep -E '^# (path|CPU copy)' /tmp/c2 | sed 's/^/# /'

run /tmp/c4 pd-coll --np 4 --provider tcp --memory device:0 --coll all -b 4K -e "$top" -f 64 -n 1 -w 1 -c 1
rc=$?
rows_clean /tmp/c4 || rc=wrong
check "4 ranks, every collective on module dma-bufs: every element right" 0 "$rc" /tmp/c4 \
	'^# 4 ranks, bootstrap: --np 4' '^# verified tables: 7$'

# Eight ranks of three fabrics each do not fit in 2 GiB with ofi_rxm's
# default pools (about 100 MiB of 16 KiB buffers per fabric, measured) and
# 4M bounce slots: smaller rxm buffers and pieces of 256K.
if [ -n "${PD_DEBUG_KERNEL:-}" ]; then
	skip "8 ranks, allreduce, allgather and alltoall on module dma-bufs" "$debug_skip"
else
	FI_OFI_RXM_BUFFER_SIZE=4096 run /tmp/c8 pd-coll --np 8 --chunk 256K --provider tcp --memory device:0 \
		--coll allreduce,allgather,alltoall -b 4K -e "$small" -f 16 -n 1 -w 1 -c 1
	rc=$?
	rows_clean /tmp/c8 || rc=wrong
	check "8 ranks, allreduce, allgather and alltoall on module dma-bufs: every element right" 0 "$rc" /tmp/c8 \
		'^# 8 ranks, bootstrap: --np 8' '^# verified tables: 3$'
fi

if [ -n "$bar" ]; then
	# by its PCI address, as a job script names it (indices follow probe order)
	pci=$(basename "$(readlink "/sys/class/misc/peerdirect$bar/device")")
	run /tmp/cbar pd-coll --np 2 --provider tcp --device "pci:$pci" --coll allreduce,broadcast,alltoall \
		-b 4K -e "$top_large" -f 16 -n 2 -w 1 -c 1
	rc=$?
	rows_clean /tmp/cbar || rc=wrong
	check "2 ranks on the ivshmem BAR's dma-bufs, --device pci:ADDR: every element right" 0 "$rc" /tmp/cbar \
		"^# path direct: memory device:pci:$pci (mapped|dmabuf)" '^# verified tables: 3$' '!simulated'
else
	skip "2 ranks on the ivshmem BAR's dma-bufs" "no BAR device bound"
fi

if [ -n "${PD_DEBUG_KERNEL:-}" ]; then
	skip "mpirun -np 4, every collective on module dma-bufs" "$debug_skip"
elif command -v orterun > /dev/null && orterun --version 2>&1 | grep -qE 'OpenRTE|Open MPI'; then
	# Only lo here: Open MPI's tcp transports skip it unless told.
	OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_plm_rsh_agent=false \
	run /tmp/cmpi orterun --oversubscribe -np 4 --mca btl tcp,self --mca btl_tcp_if_include lo \
		--mca oob_tcp_if_include lo pd-coll --provider tcp --memory device:0 --coll all \
		-b 4K -e "$small" -f 16 -n 1 -w 1 -c 1
	check "mpirun (Open MPI's orterun) -np 4, every collective on module dma-bufs: MPI bootstrap, every element right" 0 $? /tmp/cmpi \
		'^# 4 ranks, bootstrap: mpi \(dlopen libmpi\)' '^# verified tables: 7$'
else
	skip "mpirun -np 4, every collective on module dma-bufs" "no Open MPI in this tier's userspace"
fi

# A scheduler's launch: each rank started on its own, rank and size from
# Slurm's variables, the addresses over the TCP rendezvous.
if [ -n "${PD_DEBUG_KERNEL:-}" ]; then
	skip "Slurm's SLURM_PROCID/SLURM_NTASKS, ranks started apart" "$debug_skip"
else
	slurm=(--provider tcp --memory device:0 --coll 'allreduce,reducescatter' -b 4K -e "$top" -f 8 -n 2)
	PD_COLL_RENDEZVOUS=127.0.0.1:29511 SLURM_NTASKS=2 SLURM_PROCID=1 \
		timeout 300 pd-coll "${slurm[@]}" > /tmp/cslurm1 2>&1 &
	p1=$!
	PD_COLL_RENDEZVOUS=127.0.0.1:29511 SLURM_NTASKS=2 SLURM_PROCID=0 run /tmp/cslurm pd-coll "${slurm[@]}"
	rc=$?
	wait "$p1" || rc=rank1:$?
	check "Slurm's SLURM_PROCID/SLURM_NTASKS, ranks started apart, module dma-bufs: every element right" 0 "$rc" \
		/tmp/cslurm '^# 2 ranks, bootstrap: SLURM_PROCID/SLURM_NTASKS, tcp rendezvous' '^# verified tables: 2$'
fi

# shm's CMA cannot pin a CPU mapping of a dma-buf, and the library keeps
# CMA (it asks no FI_HMEM of shm, which would turn CMA off): the direct
# lane bounces, says so, and the collective stays right.  --rd-max 4K:
# recursive doubling at 4K, the ring above, so both allreduces run over shm.
run /tmp/cshm pd-coll --np 2 --provider shm --memory device:0 --coll allreduce,allgather -b 4K -e "$top_large" -f 16 -n 2 -w 1 -c 1 --rd-max 4K
rc=$?
rows_clean /tmp/cshm || rc=wrong
check "2 ranks over shm on module dma-bufs: the path is bounce, every element right" 0 "$rc" /tmp/cshm \
	'^# path direct: memory device:0 bounce: ' '^# verified tables: 2$'

# The check must be able to fail: corrupted elements are counted, the table
# goes on, and the exit status says so.
run /tmp/ccorrupt pd-coll --np 2 --provider tcp --memory device:0 --coll allreduce -b 4K -e "$small" -f 16 -n 2 -c 2 \
	--test-corrupt
check "a corrupted result on module dma-bufs is counted in #wrong and exits 5 (data failed verification)" 5 $? /tmp/ccorrupt \
	'^# Out of bounds values : [1-9][0-9]* FAILED' '^# verified tables: 0$'

tap_done
