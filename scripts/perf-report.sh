#!/bin/bash
# SPDX-License-Identifier: MIT
# `make perf-report`: every performance figure the project claims, in one
# run, each printed with the command that made it, into one results file
# (build/perf-report/perf-<UTC time>-<commit>.txt, also on stdout).
# Documentation/performance.md and libpeerdirect.md quote the latest.
#
#   scripts/perf-report.sh [--quick] [--only NAME,...]
#
# Parts (NAME): cache, lifecycle, bw, paths, net, mpi, mpi-hogs, mpi-hogs-4,
# wait-budget, stack (libfabric 2.x from the unstable root, when
# /var/cache/peerdirect/root-sid-mpi or its network setup is at hand).
# --quick: small sizes and few iterations, to check that every part runs
# and verifies its data (make check); its figures mean nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0 only=""
while [ $# -gt 0 ]; do
	case $1 in
	--quick) quick=1 ;;
	--only) only=${2:?--only NAME,...}; shift ;;
	*) sed -n '2,15p' "$0"; exit 2 ;;
	esac
	shift
done
all="cache lifecycle bw paths net mpi mpi-hogs mpi-hogs-4 wait-budget stack"
for p in ${only//,/ }; do
	[[ " $all " == *" $p "* ]] || { echo "perf-report: no part '$p' (parts: $all)" >&2; exit 2; }
done
want() { [ -z "$only" ] || [[ ",$only," == *",$1,"* ]]; }
MAKEFLAGS='' MAKELEVEL='' make -s -C user build/pd-bench build/pd-coll build/libnccl-net-peerdirect.so >/dev/null
commit=$(git rev-parse --short HEAD 2>/dev/null || echo '?')
out=build/perf-report/perf-$(date -u +%Y%m%dT%H%M%S)-$commit.txt
mkdir -p build/perf-report
exec > >(tee "$out") 2>&1
echo "# perf-report $(date -u '+%F %T') $(uname -n), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), commit $commit$( ((quick)) && echo ', --quick: figures mean nothing')"
failed=0
# part NAME COMMAND...: runs it under its heading; a failure is reported
# and counted, and the report goes on.
part() {
	local name=$1
	shift
	want "$name" || return 0
	echo
	echo "## $name"
	echo "\$ $*"
	if ! "$@"; then
		echo "perf-report: part $name failed" >&2
		failed=$((failed + 1))
	fi
}
b=user/build/pd-bench c=user/build/pd-coll plugin=user/build/libnccl-net-peerdirect.so
# The NCCL net plugin's lane beside the host lane, host memory both, over
# tcp then shm: the host/net ratios (libpeerdirect.md, "pd-coll's net lane").
net_lane() {
	local prov rc=0

	for prov in tcp shm; do
		echo "\$ $c --np 2 --provider $prov --paths host --net $plugin $*"
		"$c" --np 2 --provider "$prov" --paths host --net "$plugin" "$@" || rc=1
	done
	return $rc
}
if ((quick)); then
	part cache "$b" cache --provider tcp --entries 201 --repeats 2
	part lifecycle "$b" lifecycle --provider tcp --sizes 4K --repeats 2
	part bw "$b" bw --provider tcp --sizes 4K,64K --repeats 1
	part paths "$c" --np 2 --provider tcp --memory memfd -b 64K -e 64K -n 2
	part net net_lane -b 4K -e 64K -f 4 -n 2
	part mpi scripts/coll-vs-mpi.sh -b 4096 -e 8192 -i 2 -r 1 tcp shm
	part mpi-hogs scripts/coll-vs-mpi.sh -H 2 -b 4096 -e 8192 -i 2 -r 1 tcp shm
	part mpi-hogs-4 scripts/coll-vs-mpi.sh -n 4 -H 2 -b 4096 -e 8192 -i 2 -r 1 tcp
	part wait-budget scripts/wait-budget.sh -b 4096 -e 16384 -i 2 -r 1 -s "0 50" tcp shm
else
	part cache "$b" cache --provider tcp --entries 10000 --repeats 9
	part lifecycle "$b" lifecycle --provider tcp --repeats 21
	part bw "$b" bw --provider tcp --sizes 4K,1M,64M --repeats 5
	part paths "$c" --np 2 --provider tcp --memory memfd -b 32M -e 256M -f 2 -n 10
	part net net_lane -b 4K -e 16M -f 4 -n 20
	part mpi scripts/coll-vs-mpi.sh -b 4096 -e 67108864 -i 20 -r 3 tcp shm
	part mpi-hogs scripts/coll-vs-mpi.sh -H 2 -b 4096 -e 16777216 -i 20 -r 3 tcp shm
	part mpi-hogs-4 scripts/coll-vs-mpi.sh -n 4 -H 2 -b 4096 -e 16777216 -i 10 -r 3 tcp shm
	part wait-budget scripts/wait-budget.sh -b 4096 -e 16777216 -i 20 -r 3
	if want stack; then
		if [ -d /var/cache/peerdirect/root-sid-mpi ] || [ -n "${PD_PERF_STACK:-}" ]; then
			part stack scripts/coll-vs-mpi-stack.sh -b 4096 -e 16777216 -i 20 -r 3 tcp shm
		else
			echo
			echo "## stack"
			echo "skipped: no /var/cache/peerdirect/root-sid-mpi (PD_PERF_STACK=1 builds it, with the network)"
		fi
	fi
fi
echo
echo "# perf-report: $failed part(s) failed; results in $out"
exit $((failed > 0))
