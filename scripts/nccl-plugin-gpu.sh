#!/bin/bash
# nccl-tests over the peerdirect NCCL net plugin, beside NCCL's own socket
# transport and aws-ofi-nccl (if installed), on a node with GPUs (issue 36,
# part 4).  P2P and SHM are off in every run, so that the net transport
# carries all the traffic, also between the GPUs of one node.
#
#   scripts/nccl-plugin-gpu.sh [options]
#   scripts/nccl-plugin-gpu.sh --parse PEERDIRECT_LOG [SOCKET_LOG [OFI_LOG]]
#
#   --nccl-tests DIR   nccl-tests' binaries (its build/; default
#                      $NCCL_TESTS_DIR, else all_reduce_perf on PATH)
#   --coll LIST        collectives, comma-separated (all_reduce,all_gather,
#                      reduce_scatter,...: each runs NAME_perf); all_reduce
#   -b SIZE -e SIZE -f FACTOR   nccl-tests' sizes (8, 128M, 2)
#   -n ITERS -w WARMUP          nccl-tests' iterations (20, 5)
#   -g GPUS            GPUs per process (nccl-tests -g); default: every GPU
#                      of this node in one process (no --launcher)
#   --launcher CMD     how to start the ranks, e.g. "mpirun -np 16 -npernode 8
#                      --hostfile hosts" or "srun -N2 --ntasks-per-node=8":
#                      the environment goes through `env` on every rank, so
#                      no launcher-specific export (-x) is needed
#   --plugin P         NCCL_NET_PLUGIN for peerdirect: default "peerdirect"
#                      when the loader finds libnccl-net-peerdirect.so (the
#                      package, make install), else user/build's copy by path
#   --ofi P            NCCL_NET_PLUGIN for aws-ofi-nccl (default: "ofi" when
#                      the loader finds libnccl-net-ofi.so, else the file
#                      in /opt/amazon/ofi-nccl/lib or /opt/aws-ofi-nccl/lib);
#                      --ofi none leaves it out
#   --out FILE         the table and the commands, also written to FILE
#   --logs DIR         each run's output (default build/nccl-plugin-gpu)
#   --dry-run          print the commands, run nothing (no GPU needed)
#   --parse ...        the busbw table of saved nccl-tests outputs, in the
#                      order peerdirect, socket, ofi, with the ratios
#
# Every run has NCCL_DEBUG=INFO: the peerdirect run must show the plugin's
# own "NET/peerdirect" lines and NCCL's "Using network peerdirect"; a run
# in which NCCL took another network (fell back to Socket or IB) fails
# loudly, its figures are not the plugin's.  Exit 0 when every run passed
# its checks, 1 when one failed, 2 on a usage error, 4 (kselftest's SKIP)
# when the node lacks what it needs: a GPU, nccl-tests, NCCL (each missing
# thing is named).
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)

nccl_tests=${NCCL_TESTS_DIR:-}
colls=all_reduce
b=8 e=128M f=2 iters=20 warmup=5 gpus=
launcher=
plugin=
ofi=
out=
logs=$top/build/nccl-plugin-gpu
dry=0
parse=0

usage() {
	sed -n '2,/^set -eu/{/^set -eu/d; s/^# \{0,1\}//; p}' "$0" >&2
	exit 2
}
die() { echo "nccl-plugin-gpu: $*" >&2; exit 1; }
skip() { printf 'nccl-plugin-gpu: SKIP: %s\n' "$@" >&2; exit 4; }

# ---- parsing nccl-tests' output ----------------------------------------
# A result row: the size first, then count, type, redop (and root in
# nccl-tests 2.x), then out-of-place time algbw busbw #wrong and in-place
# the same: the out-of-place busbw is the 6th field from the end, whatever
# the version's middle columns.  NCCL's INFO lines (host:pid:tid [dev]
# NCCL INFO ...) and nccl-tests' comments do not start with a number.
busbw_rows() {	# FILE: "size busbw" per row
	awk '$1 ~ /^[0-9]+$/ && NF >= 10 && $(NF-5) ~ /^[0-9]+(\.[0-9]+)?$/ { print $1, $(NF-5) }' "$1"
}
avg_busbw() {	# FILE: nccl-tests' "# Avg bus bandwidth    : 12.34"
	sed -n 's/^# *Avg bus bandwidth *: *\([0-9.][0-9.]*\).*/\1/p' "$1" | tail -n 1
}

# table LABEL=FILE...: out-of-place busbw per size side by side, then the
# first column's ratio to each other column (peerdirect/socket, ...), and
# nccl-tests' average.  A size a run lacks shows "-".
table() {
	local spec file args=()
	for spec in "$@"; do
		file=${spec#*=}
		[ -n "$file" ] || file=/dev/null	# a run that failed: its column "-"
		args+=("${spec%%=*}" "$(avg_busbw "$file")")
		busbw_rows "$file" > "$tmp/rows.${#args[@]}"
		args+=("$tmp/rows.${#args[@]}")
	done
	awk -v n=$# '
	BEGIN {
		for (i = 1; i <= n; i++) {
			label[i] = ARGV[3 * i - 2]; avg[i] = ARGV[3 * i - 1]; file = ARGV[3 * i]
			while ((getline line < file) > 0) {
				split(line, w, " ")
				if (!((w[1]) in seen)) { seen[w[1]] = 1; size[++rows] = w[1] }
				bw[i, w[1]] = w[2]
			}
		}
		printf "%12s", "size (B)"
		for (i = 1; i <= n; i++) printf " %12s", label[i]
		for (i = 2; i <= n; i++) printf " %18s", label[1] "/" label[i]
		printf "\n"
		for (r = 1; r <= rows; r++) {
			s = size[r]; printf "%12s", s
			for (i = 1; i <= n; i++) printf " %12s", ((i, s) in bw) ? bw[i, s] : "-"
			for (i = 2; i <= n; i++) printf " %18s", ratio(bw[1, s], bw[i, s])
			printf "\n"
		}
		printf "%12s", "avg busbw"
		for (i = 1; i <= n; i++) printf " %12s", avg[i] == "" ? "-" : avg[i]
		for (i = 2; i <= n; i++) printf " %18s", ratio(avg[1], avg[i])
		printf "\n"
		exit
	}
	function ratio(a, c) { return (a != "" && c + 0 > 0) ? sprintf("%.2f", a / c) : "-" }
	' "${args[@]}"
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

while [ $# -gt 0 ]; do
	case "$1" in
	--nccl-tests) nccl_tests=${2:?}; shift 2 ;;
	--coll) colls=${2:?}; shift 2 ;;
	-b) b=${2:?}; shift 2 ;;
	-e) e=${2:?}; shift 2 ;;
	-f) f=${2:?}; shift 2 ;;
	-n) iters=${2:?}; shift 2 ;;
	-w) warmup=${2:?}; shift 2 ;;
	-g) gpus=${2:?}; shift 2 ;;
	--launcher) launcher=${2:?}; shift 2 ;;
	--plugin) plugin=${2:?}; shift 2 ;;
	--ofi) ofi=${2:?}; shift 2 ;;
	--out) out=${2:?}; shift 2 ;;
	--logs) logs=${2:?}; shift 2 ;;
	--dry-run) dry=1; shift ;;
	--parse) parse=1; shift; break ;;
	-h|--help) usage ;;
	*) echo "nccl-plugin-gpu: unknown argument '$1'" >&2; usage ;;
	esac
done

if [ "$parse" = 1 ]; then
	if [ $# -lt 1 ] || [ $# -gt 3 ]; then usage; fi
	labels=(peerdirect socket ofi) specs=()
	for file in "$@"; do
		[ -r "$file" ] || die "cannot read $file"
		[ -n "$(busbw_rows "$file")" ] || die "$file: no nccl-tests result row"
		specs+=("${labels[${#specs[@]}]}=$file")
	done
	table "${specs[@]}"
	exit 0
fi

for v in "$b" "$e"; do [[ $v =~ ^[0-9]+[KMG]?$ ]] || die "size '$v': a number, K, M or G"; done
for v in "$f" "$iters" "$warmup" ${gpus:+"$gpus"}; do
	[[ $v =~ ^[1-9][0-9]*$ ]] || die "'$v': a positive whole number"
done
[[ $colls =~ ^[a-z_]+(,[a-z_]+)*$ ]] || die "--coll '$colls': names like all_reduce,all_gather"

# ---- what the node has ---------------------------------------------------
# GPUs: NVIDIA's through nvidia-smi -L ("GPU 0: ..."), AMD's through
# rocm-smi (RCCL loads the same plugin ABI; rccl-tests has the same
# binaries).  Counted on this node only: with --launcher the others are
# the launcher's business.
ngpu=0 gpu_why='' rccl=0
if command -v nvidia-smi > /dev/null 2>&1; then
	ngpu=$(nvidia-smi -L 2> /dev/null | grep -c '^GPU [0-9]' || true)
	[ "$ngpu" -gt 0 ] || gpu_why="nvidia-smi -L lists no GPU"
elif command -v rocm-smi > /dev/null 2>&1; then
	ngpu=$(rocm-smi --showid 2> /dev/null | grep -oE '^GPU\[[0-9]+\]' | sort -u | wc -l)
	rccl=1
	[ "$ngpu" -gt 0 ] || gpu_why="rocm-smi --showid lists no GPU"
else
	gpu_why="no GPU: neither nvidia-smi nor rocm-smi is installed"
fi

missing=()
[ "$ngpu" -gt 0 ] || missing+=("$gpu_why")
IFS=, read -r -a coll_list <<<"$colls"
bindir=
if [ -n "$nccl_tests" ]; then
	bindir=$nccl_tests
	[ -x "$bindir/${coll_list[0]}_perf" ] || [ ! -d "$bindir/build" ] || bindir=$bindir/build
elif p=$(command -v "${coll_list[0]}_perf" 2> /dev/null); then
	bindir=$(dirname "$p")
fi
for c in "${coll_list[@]}"; do
	if [ -z "$bindir" ]; then
		missing+=("nccl-tests: no ${c}_perf on PATH (--nccl-tests DIR or NCCL_TESTS_DIR)")
		break
	fi
	[ -x "$bindir/${c}_perf" ] || missing+=("nccl-tests: no $bindir/${c}_perf")
done
# NCCL: what nccl-tests was linked against, if the loader cannot find it
# (a static NCCL has no libnccl line at all).
if [ -n "$bindir" ] && [ -x "$bindir/${coll_list[0]}_perf" ] &&
	nccl=$(ldd "$bindir/${coll_list[0]}_perf" 2> /dev/null | grep -E '^\s*lib[rn]ccl\.so'); then
	if grep -q 'not found' <<<"$nccl"; then
		missing+=("NCCL: $(awk '{ $1 = $1; print; exit }' <<<"$nccl") (LD_LIBRARY_PATH?)")
	fi
fi

# peerdirect's plugin: by name when the loader finds it (installed), else
# the build tree's file.
found_by_loader() { /sbin/ldconfig -p 2> /dev/null | grep -q "[[:space:]]$1 "; }
if [ -z "$plugin" ]; then
	if found_by_loader libnccl-net-peerdirect.so; then
		plugin=peerdirect
	else
		plugin=$top/user/build/libnccl-net-peerdirect.so
	fi
fi
if [[ $plugin == */* ]] && [ ! -r "$plugin" ]; then
	missing+=("the peerdirect plugin: no $plugin (make -C user, or install the libnccl-net-peerdirect package)")
fi
if [ -z "$ofi" ]; then
	ofi=none
	if found_by_loader libnccl-net-ofi.so; then
		ofi=ofi
	else
		for d in /opt/amazon/ofi-nccl/lib /opt/aws-ofi-nccl/lib; do
			if [ -r "$d/libnccl-net-ofi.so" ]; then ofi=$d/libnccl-net-ofi.so; break; fi
		done
	fi
fi

if [ ${#missing[@]} -gt 0 ] && [ "$dry" = 0 ]; then
	skip "${missing[@]}"
fi
# One process drives every local GPU (nccl-tests -g); under a launcher,
# one GPU per rank unless -g says otherwise.
if [ -z "$gpus" ]; then
	if [ -n "$launcher" ] || [ "$ngpu" = 0 ]; then gpus=1; else gpus=$ngpu; fi
fi

# ---- the runs ------------------------------------------------------------
# Per transport: NCCL's environment, the network name NCCL must report
# ("Using network NAME", NCCL's init line) and, for peerdirect, the
# plugin's own log prefix.  aws-ofi-nccl calls its network "Libfabric"
# ("AWS Libfabric" in older releases' logs).
transports=(peerdirect socket)
[ "$ofi" = none ] || transports+=(ofi)
# shellcheck disable=SC2054  # INIT,NET is one value
common=(NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET)
# NCCL_NET_PLUGIN for a plugin given by name or by file.  NCCL up to 2.18
# dlopen()s "libnccl-net-$NCCL_NET_PLUGIN.so" only (later ones try the
# value as a path first): a file named so goes by its suffix, its
# directory into LD_LIBRARY_PATH, which every NCCL honours.  RCCL looks
# for "librccl-net-NAME.so" instead, which nobody installs for these
# plugins: it gets the file's path (NCCL's newer loader, which RCCL
# follows, tries the value as a path first; not checked on a real RCCL),
# the loader's for a name.
plugin_env() {
	local base=${1##*/}
	if [ "$rccl" = 1 ]; then
		if [[ $1 != */* ]]; then
			set -- "$(/sbin/ldconfig -p 2> /dev/null |
				awk -v n="libnccl-net-$1.so" '$1 == n { print $NF; exit }')"
		fi
		echo "NCCL_NET_PLUGIN=$1"
	elif [[ $1 == */* && $base =~ ^libnccl-net-(.+)\.so$ ]]; then
		echo "NCCL_NET_PLUGIN=${BASH_REMATCH[1]}" "LD_LIBRARY_PATH=$(dirname "$1")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
	else
		echo "NCCL_NET_PLUGIN=$1"
	fi
}
# NCCL_NET insists on the network by name: without it NCCL may prefer its
# internal IB transport where one is usable.  The socket run loads no
# plugin (an unknown name loads nothing: NCCL's own transports).
env_of() {
	case "$1" in
	peerdirect) echo "$(plugin_env "$plugin")" NCCL_NET=peerdirect ;;
	socket) echo NCCL_NET_PLUGIN=none NCCL_NET=Socket NCCL_IB_DISABLE=1 ;;
	ofi) plugin_env "$ofi" ;;
	esac
}
want_net() {
	case "$1" in
	peerdirect) echo 'peerdirect' ;;
	socket) echo 'Socket' ;;
	ofi) echo '(AWS )?Libfabric' ;;
	esac
}
command_of() {	# COLL TRANSPORT: the command line, shell-quoted
	local -a cmd extra
	# shellcheck disable=SC2206  # a launcher is words, as typed
	cmd=(${launcher} env "${common[@]}")
	read -r -a extra <<<"$(env_of "$2")"
	cmd+=("${extra[@]}" "${bindir:+$bindir/}${1}_perf" -b "$b" -e "$e" -f "$f" -g "$gpus" -n "$iters" -w "$warmup" -c 1)
	printf '%q ' "${cmd[@]}" | sed 's/ $//'
}

# check_log TRANSPORT LOG: did NCCL use the network it was meant to?
check_log() {
	local t=$1 log=$2 want used
	want=$(want_net "$t")
	used=$(grep -oE 'NCCL INFO Using network .*' "$log" | sed 's/.*Using network //' | sort -u | tr '\n' ',' | sed 's/,$//')
	if [ -z "$used" ]; then
		echo "FAIL $t: no \"NCCL INFO Using network\" line in $log (no NCCL_DEBUG=INFO output?)"
		return 1
	fi
	if grep -qvxE "$want" <<<"${used//,/$'\n'}"; then
		echo "FAIL $t: NCCL used network(s) $used, not $want: it fell back, these figures are not $t's"
		return 1
	fi
	# The plugin's own device line: NCCL's channel lines say
	# "via NET/peerdirect/0" whatever the plugin logged.
	if [ "$t" = peerdirect ] && ! grep -qE 'NET/peerdirect device [0-9]+:' "$log"; then
		echo "FAIL peerdirect: NCCL says \"Using network peerdirect\" but the plugin logged no NET/peerdirect line"
		return 1
	fi
	echo "ok $t: NCCL used network $used"
}

mkdir -p "$logs"
report=$tmp/report
rc=0
{
	echo "# nccl-plugin-gpu $(date -u +%FT%TZ) on $(hostname): $ngpu local GPU(s), -g $gpus${launcher:+, launcher: $launcher}"
	[ "$ofi" != none ] || echo "# aws-ofi-nccl: not found (libnccl-net-ofi.so), its column left out"
} > "$report"
for c in "${coll_list[@]}"; do
	specs=()
	for t in "${transports[@]}"; do
		line=$(command_of "$c" "$t")
		log=$logs/$c.$t.log
		echo "\$ $line" >> "$report"
		if [ "$dry" = 1 ]; then
			continue
		fi
		echo "nccl-plugin-gpu: $c over $t ..." >&2
		st=0
		bash -c "$line" > "$log" 2>&1 || st=$?
		if [ "$st" != 0 ]; then
			echo "FAIL $t: ${c}_perf exited $st (log: $log)" >> "$report"
			tail -n 5 "$log" | sed 's/^/#   /' >> "$report"
			rc=1
			specs+=("$t=")
			continue
		fi
		check_log "$t" "$log" >> "$report" || rc=1
		if [ -z "$(busbw_rows "$log")" ]; then
			echo "FAIL $t: no result row in $log" >> "$report"
			rc=1
		fi
		specs+=("$t=$log")
	done
	if [ "$dry" = 0 ]; then
		echo "# ${c}_perf: out-of-place busbw (GB/s); logs in $logs" >> "$report"
		table "${specs[@]}" >> "$report"
	fi
done
if [ "$dry" = 1 ] && [ ${#missing[@]} -gt 0 ]; then
	printf '# would SKIP: %s\n' "${missing[@]}" >> "$report"
fi
cat "$report"
[ -z "$out" ] || cp "$report" "$out"
exit "$rc"
