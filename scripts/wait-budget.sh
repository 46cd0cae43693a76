#!/bin/bash
# SPDX-License-Identifier: MIT
# What pd_wait's busy-poll budget (PEERDIRECT_WAIT_SPIN_US) buys: pd-coll's
# allreduce (2 ranks, float32 sum, host memory, median over the
# iterations) with each budget in turn, idle and beside CPU hogs.  The
# budgets alternate within each repeat, so load from elsewhere hits them
# all; the median of the repeats is shown, in us per allreduce.
#
#   scripts/wait-budget.sh [-b MIN] [-e MAX] [-i ITERS] [-r REPEATS] [-H HOGS]
#                          [-s "0 10 50 200 always"] [tcp] [shm]
#
# -H HOGS: the run beside HOGS busy loops (default 2, one per core here)
# follows the idle one; -H 0 runs idle only.
set -euo pipefail
cd "$(dirname "$0")/.."
minb=4096 maxb=$((16 << 20)) iters=20 repeats=3 hogs=2 budgets="0 10 50 200 always"
while getopts b:e:i:r:H:s: opt; do
	case $opt in
	b) minb=$OPTARG ;; e) maxb=$OPTARG ;; i) iters=$OPTARG ;; r) repeats=$OPTARG ;;
	H) hogs=$OPTARG ;; s) budgets=$OPTARG ;; *) sed -n '2,15p' "$0"; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
for v in "$minb" "$maxb" "$iters" "$repeats" "$hogs"; do
	[[ $v =~ ^(0|[1-9][0-9]{0,11})$ ]] || { echo "wait-budget: '$v' is not a whole decimal number" >&2; exit 2; }
done
for b in $budgets; do
	[[ $b =~ ^(always|0|[1-9][0-9]{0,6})$ ]] || { echo "wait-budget: budget '$b' is not microseconds or 'always'" >&2; exit 2; }
done
((minb >= 4 && maxb >= minb && iters >= 1 && repeats >= 1 && hogs <= 64)) ||
	{ echo "wait-budget: want -b >= 4, -e >= -b, -i and -r >= 1, -H 0 to 64" >&2; exit 2; }
transports=${*:-tcp shm}
. scripts/coll-common.sh
pdcoll=$(pdcoll_path)
tmp=$(mktemp -d)
trap 'stop_hogs; rm -rf "$tmp"' EXIT
echo "# $(date -u '+%F %T') $(uname -n), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), commit ${PD_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo '?')}"
echo "# $(fi_info --version 2>/dev/null | grep -m1 'libfabric:' | tr -d ' ' || echo 'libfabric:?')"
for load in idle hogs; do
	[ "$load" = hogs ] && { ((hogs > 0)) || break; }
	if [ "$load" = hogs ]; then
		start_hogs "$hogs"
		echo "# beside $hogs CPU hogs (busy loops at the same priority)"
	else
		echo "# idle"
	fi
	for tr in $transports; do
		cmd=("$pdcoll" --np 2 --provider "$tr" --paths host --memory memfd --coll allreduce
		     -b "$minb" -e "$maxb" -f 4 -n "$iters" -w 3 -c 1 --stat median)
		echo "# $tr: PEERDIRECT_WAIT_SPIN_US=B ${cmd[*]}"
		for rep in $(seq "$repeats"); do
			for b in $budgets; do
				out=$tmp/$load.$tr.$b.$rep
				PEERDIRECT_WAIT_SPIN_US=$b "${cmd[@]}" > "$out.log" 2>&1 ||
					{ echo "wait-budget: pd-coll failed ($tr, budget $b):" >&2; cat "$out.log" >&2; exit 1; }
				grep -q "Out of bounds values : 0 OK" "$out.log" ||
					{ echo "wait-budget: pd-coll reported wrong elements:" >&2; cat "$out.log" >&2; exit 1; }
				awk '!/^#/ && $1 ~ /^[0-9]+$/ { print $1, $6 }' "$out.log" > "$out"
			done
		done
		printf "# %-4s %5s %10s" "$tr" load size
		for b in $budgets; do printf " %10s" "spin $b"; done
		echo
		first=$(set -- $budgets; echo "$1")
		for z in $(cut -d' ' -f1 "$tmp/$load.$tr.$first.1"); do
			printf "  %-4s %5s %10d" "$tr" "$load" "$z"
			for b in $budgets; do
				printf " %10.1f" "$(for rep in $(seq "$repeats"); do
					awk -v z="$z" '$1 == z { print $2 }' "$tmp/$load.$tr.$b.$rep"; done | median)"
			done
			echo
		done
	done
	stop_hogs
done
