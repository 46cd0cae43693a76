#!/bin/bash
# SPDX-License-Identifier: MIT
# Scaling efficiency of pd-coll across rank counts (issue 10, item 4): runs
# one collective at each rank count (local ranks, --np) with every path, and
# prints per path and size the out-of-place busbw and busbw(N) / busbw(first
# rank count).  When efficiency falls with the rank count or the size, the
# data path is the first suspect.  Allreduce is the ring at every rank
# count (--algo ring, which PD_COLL_ARGS may override): pd-coll's automatic
# choice depends on the rank count, and a change of algorithm is not
# scaling.
#
#   scripts/coll-scaling.sh [-p PROVIDER] [-c COLL] [-b MIN] [-e MAX] [-n ITERS] [RANKS...]
#
# RANKS default to 2 4 8.  Extra pd-coll options go in PD_COLL_ARGS; PD_COLL
# names another pd-coll build (a test's own).
set -euo pipefail
cd "$(dirname "$0")/.."
prov=tcp coll=allreduce minb=1M maxb=32M iters=5
while getopts p:c:b:e:n: opt; do
	case $opt in
	p) prov=$OPTARG ;; c) coll=$OPTARG ;; b) minb=$OPTARG ;; e) maxb=$OPTARG ;; n) iters=$OPTARG ;;
	*) sed -n '2,15p' "$0"; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
ranks=${*:-2 4 8}
# One collective: a table row is one size of one collective, one type and
# one reduction (the first the CSV has, if PD_COLL_ARGS asks for several).
case $coll in
*,* | all) echo "coll-scaling: -c takes one collective, not '$coll'" >&2; exit 2 ;;
esac
. scripts/coll-common.sh
pdcoll=$(pdcoll_path)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "# $(date -u '+%F %T') $(uname -n), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
for n in $ranks; do
	cmd=("$pdcoll" --np "$n" --provider "$prov" --coll "$coll" -b "$minb" -e "$maxb" -f 4
	     -n "$iters" --stat median --csv "$tmp/$n.csv" --algo ring ${PD_COLL_ARGS:-})
	echo "# ${cmd[*]}"
	"${cmd[@]}" > "$tmp/$n.out" || { cat "$tmp/$n.out"; echo "coll-scaling: pd-coll failed at $n ranks" >&2; exit 1; }
	grep -E "^# Out of bounds|^# path " "$tmp/$n.out" | sed "s/^#/#   $n ranks:/"
done
first=${ranks%% *}
printf "# %-7s %10s" path size
for n in $ranks; do printf " %9s" "busbw@$n"; done
for n in $ranks; do printf " %8s" "eff@$n"; done
echo "   (busbw GB/s, out of place; eff = busbw(N) / busbw($first))"
# Rows pair up by the size the sweep asked for (sweep_size, column 18), not
# by the size column, which allgather, reducescatter and alltoall round to
# the rank count (1M is 1048560 at 3 ranks), nor by their place: a size too
# small for every rank to get an element has no row at that rank count.
type=$(awk -F, 'NR == 2 { print $9 }' "$tmp/$first.csv")
op=$(awk -F, 'NR == 2 { print $10 }' "$tmp/$first.csv")
rows() { # CSV PATH: "SWEEP_SIZE BUSBW" of each out-of-place row
	awk -F, -v c="$coll" -v p="$2" -v t="$type" -v o="$op" \
		'$1 == c && $2 == p && $9 == t && $10 == o && $12 == "out-of-place" { print $18, $15 }' "$1"
}
for path in direct bounce host; do
	for z in $(rows "$tmp/$first.csv" $path | cut -d' ' -f1); do
		cells=()	# busbw per rank count, empty where it has no row
		for n in $ranks; do
			cells+=("$(rows "$tmp/$n.csv" $path | awk -v z="$z" '$1 == z { print $2 }')")
		done
		printf "  %-7s %10s" "$path" "$z"
		for b in "${cells[@]}"; do
			if [ -n "$b" ]; then printf " %9.3f" "$b"; else printf " %9s" -; fi
		done
		for b in "${cells[@]}"; do
			if [ -n "$b" ]; then awk -v b="$b" -v b0="${cells[0]}" 'BEGIN { if (b0 > 0) printf " %7.2fx", b / b0; else printf " %8s", "-" }'; else printf " %8s" -; fi
		done
		echo
	done
done
