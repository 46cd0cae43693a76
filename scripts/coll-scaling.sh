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
# RANKS default to 2 4 8.  Extra pd-coll options go in PD_COLL_ARGS.
set -euo pipefail
cd "$(dirname "$0")/.."
prov=tcp coll=allreduce minb=1M maxb=32M iters=5
while getopts p:c:b:e:n: opt; do
	case $opt in
	p) prov=$OPTARG ;; c) coll=$OPTARG ;; b) minb=$OPTARG ;; e) maxb=$OPTARG ;; n) iters=$OPTARG ;;
	*) sed -n '2,14p' "$0"; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
ranks=${*:-2 4 8}
make -s -C user build/pd-coll >/dev/null
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "# $(date -u '+%F %T') $(uname -n), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
for n in $ranks; do
	cmd=(user/build/pd-coll --np "$n" --provider "$prov" --coll "$coll" -b "$minb" -e "$maxb" -f 4
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
for path in direct bounce host; do
	for z in $(awk -F, -v p=$path '$2 == p && $12 == "out-of-place" { print $7 }' "$tmp/$first.csv"); do
		printf "  %-7s %10s" "$path" "$z"
		for n in $ranks; do
			awk -F, -v p=$path -v z="$z" '$2 == p && $7 == z && $12 == "out-of-place" { printf " %9.3f", $15 }' "$tmp/$n.csv"
		done
		b0=$(awk -F, -v p=$path -v z="$z" '$2 == p && $7 == z && $12 == "out-of-place" { print $15 }' "$tmp/$first.csv")
		for n in $ranks; do
			awk -F, -v p=$path -v z="$z" -v b0="$b0" '$2 == p && $7 == z && $12 == "out-of-place" { printf " %7.2fx", $15 / b0 }' "$tmp/$n.csv"
		done
		echo
	done
done
