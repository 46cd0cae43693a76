#!/bin/bash
# SPDX-License-Identifier: MIT
# pd-coll's allreduce against Open MPI's MPI_Allreduce, same ranks, same
# transport, same launcher (mpirun), same statistic: the median over the
# iterations of the slowest rank's time, float32 sum, out of place, host
# memory.  tcp: libfabric's tcp provider against Open MPI's tcp btl; shm:
# libfabric's shm provider against Open MPI's vader (shared memory) btl.
# The two alternate REPEATS times and the median of the repeats is shown,
# so that load from elsewhere hits both.
#
#   scripts/coll-vs-mpi.sh [-n RANKS] [-b MIN] [-e MAX] [-i ITERS] [-r REPEATS] [-H HOGS] [tcp] [net] [shm] [shm-nocma]
#
# -H HOGS: that many CPU hogs (busy loops at the same priority) run
# through every measurement, both programs', as a training node's data
# loaders and Python threads do.
#
# Default: tcp, net where this libfabric has it, and shm.
# tcp is what libfabric gives for "tcp": ofi_rxm over tcp up to libfabric
# 1.17, tcp's own RDM endpoint from 1.18.  net: libfabric 1.16-1.17's
# net provider, that same RDM endpoint before it was renamed tcp, against
# the tcp btl too; the header names the provider each row ran on.
# shm-nocma: both without single-copy (CMA, process_vm_readv): Open MPI's
# btl_vader_single_copy_mechanism none (from Open MPI 5, no smsc
# component), libfabric's FI_SHM_DISABLE_CMA=1.
# On this VM pinning the peer's pages costs more than a second copy, for
# both.
# Prints every command, then per transport and size: both times, and
# "pd/mpi busbw" = MPI's time over pd-coll's (above 1: pd-coll is faster).
# Needs openmpi-bin and libopenmpi-dev (mpicc); builds user/build/pd-coll,
# or runs $PD_COLL if set (a test's own build), and pd-mpi-allreduce beside.
# $PD_COMMIT names the commit where the tree is no git checkout
# (scripts/coll-vs-mpi-stack.sh runs it in the unstable root).
set -euo pipefail
cd "$(dirname "$0")/.."
ranks=2 minb=4096 maxb=$((64 << 20)) iters=20 repeats=3 hogs=0
while getopts n:b:e:i:r:H: opt; do
	case $opt in
	n) ranks=$OPTARG ;; b) minb=$OPTARG ;; e) maxb=$OPTARG ;; i) iters=$OPTARG ;;
	r) repeats=$OPTARG ;; H) hogs=$OPTARG ;; *) sed -n '2,30p' "$0"; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
# Decimal bytes and counts: both programs must time the same sizes, and a
# size of 0 would never double.
for v in "$ranks" "$minb" "$maxb" "$iters" "$repeats" "$hogs"; do
	[[ $v =~ ^(0|[1-9][0-9]{0,11})$ ]] || { echo "coll-vs-mpi: '$v' is not a whole decimal number (sizes in bytes: 4096, not 4K)" >&2; exit 2; }
done
if ((ranks < 2 || ranks > 64 || minb < 4 || minb % 4 || maxb < minb || maxb > 1 << 32 ||
      iters < 1 || iters > 100000 || repeats < 1)); then
	echo "coll-vs-mpi: want -n 2 to 64 ranks, -b a multiple of 4 B, -e from -b to 4 GiB, -i 1 to 100000, -r 1 or more (got -n $ranks -b $minb -e $maxb -i $iters -r $repeats)" >&2
	exit 2
fi
((hogs <= 64)) || { echo "coll-vs-mpi: -H $hogs: want 0 to 64 CPU hogs" >&2; exit 2; }
for tr in "$@"; do
	case $tr in
	tcp | net | shm | shm-nocma) ;;
	*) echo "coll-vs-mpi: transport $tr is not tcp, net, shm or shm-nocma" >&2; exit 2 ;;
	esac
done
command -v mpirun >/dev/null && command -v mpicc >/dev/null ||
	{ echo "coll-vs-mpi: needs mpirun and mpicc (apt-get install openmpi-bin libopenmpi-dev)" >&2; exit 2; }
. scripts/coll-common.sh
pdcoll=$(pdcoll_path)
mpiar=$(dirname "$pdcoll")/pd-mpi-allreduce
# Does this libfabric have the net provider?  pd-coll itself asks: 0 yes,
# 1 no (fi_getinfo finds no net), anything else is a failure of its own.
net_probe() {
	local out

	if out=$("$pdcoll" --np 2 --provider net --paths host -b 4096 -e 4096 -n 1 -c 0 --timeout 10000 2>&1); then
		grep -q "^# provider net; " <<<"$out" && return 0
	elif grep -q "fi_getinfo(provider net," <<<"$out"; then
		return 1
	fi
	echo "coll-vs-mpi: pd-coll failed over net, not for want of the provider:" >&2
	echo "$out" >&2
	exit 1
}
if [ $# -gt 0 ]; then
	transports=$*
	if [[ " $transports " == *" net "* ]] && ! net_probe; then
		echo "coll-vs-mpi: this libfabric has no net provider (from 1.18 it is tcp's own RDM endpoint: run tcp)" >&2
		exit 2
	fi
elif net_probe; then
	transports="tcp net shm"
else
	transports="tcp shm"
	echo "# net left out: this libfabric has no net provider"
fi
mpicc -O2 -o "$mpiar" user/tools/coll/mpi/pd-mpi-allreduce.c
ompi_major=$(mpirun --version 2>/dev/null | head -n 1 | grep -oE '[0-9]+' | head -n 1) || true
[[ $ompi_major =~ ^[0-9]+$ ]] || { echo "coll-vs-mpi: cannot read Open MPI's version from mpirun --version" >&2; exit 2; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
tmp=$(mktemp -d)
trap 'stop_hogs; rm -rf "$tmp"' EXIT
warm=3
# Open MPI ignores an --mca name it does not know, silently: every
# transport's names are checked against ompi_info before anything runs,
# so that no comparison claims a setting it did not get.
if ! ompi_info --all --parsable > "$tmp/ompi_info" 2>"$tmp/ompi_info.err" || [ ! -s "$tmp/ompi_info" ]; then
	echo "coll-vs-mpi: ompi_info --all --parsable failed or printed nothing, so the --mca names cannot be checked: $(head -c 300 "$tmp/ompi_info.err")" >&2
	exit 2
fi
mca_known() { awk -F: -v n="$1" '$1 == "mca" && $4 == "param" && $5 == n { found = 1 } END { exit !found }' "$tmp/ompi_info"; }
# mpirun_for TRANSPORT: sets btl, prov and mpi (the mpirun command line).
mpirun_for() {
	local extra=()

	case $1 in
	tcp) btl=tcp,self prov=tcp ;;
	net) btl=tcp,self prov=net ;;
	shm) btl=vader,self prov=shm ;;
	# Shared memory with no single-copy (CMA) on either side: both move
	# large messages through shared buffers, a copy by each process.
	# Open MPI 5 moved single-copy into the smsc framework: there no smsc
	# component is the way.
	shm-nocma) btl=vader,self prov=shm
		if [ "$ompi_major" -ge 5 ]; then
			extra=(--mca smsc '^cma,xpmem,knem' -x FI_SHM_DISABLE_CMA=1)
		else
			extra=(--mca btl_vader_single_copy_mechanism none -x FI_SHM_DISABLE_CMA=1)
		fi ;;
	esac
	mpi=(mpirun --oversubscribe -np "$ranks" --mca pml ob1 --mca btl "$btl" "${extra[@]}")
}
for tr in $transports; do
	mpirun_for "$tr"
	for ((k = 0; k + 1 < ${#mpi[@]}; k++)); do
		if [ "${mpi[k]}" = --mca ] && ! mca_known "${mpi[k + 1]}"; then
			echo "coll-vs-mpi: $tr: Open MPI $ompi_major has no MCA parameter ${mpi[k + 1]} (ompi_info --all): it would ignore it" >&2
			exit 2
		fi
	done
done
start_hogs "$hogs"
echo "# $(date -u '+%F %T') $(uname -n), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), commit ${PD_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo '?')}"
# Which stack: the figures differ between libfabric 1.x and 2.x.
echo "# $(fi_info --version 2>/dev/null | grep -m1 'libfabric:' | tr -d ' ' || echo 'libfabric:?'), $(mpirun --version 2>/dev/null | head -n 1)"
((hogs == 0)) || echo "# beside $hogs CPU hogs (busy loops at the same priority) for the whole run"
[ -z "${PEERDIRECT_WAIT_SPIN_US:-}" ] || echo "# PEERDIRECT_WAIT_SPIN_US=$PEERDIRECT_WAIT_SPIN_US"
for tr in $transports; do
	mpirun_for "$tr"
	pd=("$pdcoll" --provider "$prov" --paths host --coll allreduce -b "$minb" -e "$maxb" -f 2
	    -n "$iters" -w "$warm" -c 1 --stat median)
	mpib=("$mpiar" "$minb" "$maxb" "$iters" "$warm")
	echo "# $tr: ${mpi[*]} ${mpib[*]}"
	echo "# $tr: ${mpi[*]} ${pd[*]}"
	for rep in $(seq "$repeats"); do
		"${mpi[@]}" "${mpib[@]}" | awk '!/^#/ && $1 ~ /^[0-9]+$/ { print $1, $3 }' > "$tmp/mpi.$tr.$rep"
		"${mpi[@]}" "${pd[@]}" > "$tmp/pdout.$tr.$rep"
		grep -q "Out of bounds values : 0 OK" "$tmp/pdout.$tr.$rep" ||
			{ echo "coll-vs-mpi: pd-coll reported wrong elements:" >&2; cat "$tmp/pdout.$tr.$rep" >&2; exit 1; }
		awk '!/^#/ && $1 ~ /^[0-9]+$/ { print $1, $6 }' "$tmp/pdout.$tr.$rep" > "$tmp/pd.$tr.$rep"
	done
	grep -m1 "^# provider" "$tmp/pdout.$tr.1"
	printf "# %-4s %10s %12s %12s %14s\n" "$tr" size "pd-coll us" "MPI us" "pd/mpi busbw"
	for z in $(cut -d' ' -f1 "$tmp/pd.$tr.1"); do
		p=$(awk -v z="$z" '$1 == z { print $2 }' "$tmp"/pd."$tr".* | median)
		m=$(awk -v z="$z" '$1 == z { print $2 }' "$tmp"/mpi."$tr".* | median)
		if [ -z "$m" ]; then
			echo "coll-vs-mpi: MPI printed no time for $z B" >&2
			exit 1
		fi
		awk -v tr="$tr" -v z="$z" -v p="$p" -v m="$m" \
			'BEGIN { printf "  %-4s %10d %12.2f %12.2f %13.2fx\n", tr, z, p, m, m / p }'
	done
done
