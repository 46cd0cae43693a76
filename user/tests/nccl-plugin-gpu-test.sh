#!/bin/bash
# scripts/nccl-plugin-gpu.sh without a GPU: the SKIP and its reasons, the
# commands of --dry-run, the parser on recorded nccl-tests output
# (tests/nccl-tests/), and the whole flow with a fake nvidia-smi and a fake
# all_reduce_perf that prints that output: a clean run, NCCL falling back
# to its socket transport, the plugin's lines missing, a run that fails.
# KTAP; run by `make -C user check` through run-tests.sh.
# shellcheck disable=SC2016  # each test's body expands when eval runs it
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
script=$here/../scripts/nccl-plugin-gpu.sh
fx=$here/tests/nccl-tests
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export LC_ALL=C
n=0 pass=0 fail=0

# t NAME CMD...: one test; CMD's output is in $tmp/out for the next ones.
t() {
	local name=$1
	shift
	n=$((n + 1))
	if "$@"; then
		pass=$((pass + 1)); echo "ok $n $name"
	else
		fail=$((fail + 1)); echo "not ok $n $name"
		sed 's/^/# /' "$tmp/out"
	fi
}
# run WANT_STATUS ARGS...: the script with PATH=$tmp/bin first, no
# nvidia-smi or nccl-tests of the host's, into $tmp/out.
run() {
	local want=$1 st=0
	shift
	env -u LD_LIBRARY_PATH PATH="${RUN_PATH:-$tmp/bin}:/usr/bin:/bin" NCCL_TESTS_DIR= "$script" "$@" > "$tmp/out" 2>&1 || st=$?
	[ "$st" = "$want" ] || { echo "exit $st, want $want" >> "$tmp/out"; return 1; }
}
has() { grep -qF -- "$1" "$tmp/out"; }
lacks() { ! grep -qF -- "$1" "$tmp/out"; }

mkdir -p "$tmp/bin"
touch "$tmp/libnccl-net-peerdirect.so"	# --plugin: a file by that name

echo "TAP version 13"
echo "1..13"

t "no GPU: exit 4 (SKIP), says nvidia-smi is missing and nccl-tests too" eval '
	run 4 && has "SKIP: no GPU: neither nvidia-smi nor rocm-smi is installed" &&
	has "SKIP: nccl-tests: no all_reduce_perf on PATH"'

# nvidia-smi -L as the driver prints it; FAKE_GPUS=0 lists none.
cat > "$tmp/bin/nvidia-smi" <<'EOF'
#!/bin/sh
[ "$1" = -L ] || exit 9
i=0
while [ "$i" -lt "${FAKE_GPUS:-2}" ]; do
	echo "GPU $i: NVIDIA A100-SXM4-40GB (UUID: GPU-0000000$i-1111-2222-3333-444444444444)"
	i=$((i + 1))
done
EOF
chmod +x "$tmp/bin/nvidia-smi"
t "nvidia-smi listing no GPU: exit 4, says so" eval 'FAKE_GPUS=0 run 4 && has "SKIP: nvidia-smi -L lists no GPU"'
t "GPUs but no nccl-tests: exit 4 naming the missing binary" eval '
	run 4 --nccl-tests "$tmp/none" && has "SKIP: nccl-tests: no $tmp/none/all_reduce_perf" && lacks "no GPU"'

t "--dry-run: three transports, P2P and SHM off in each, exit 0 without nccl-tests" eval '
	run 0 --dry-run --plugin "$tmp/libnccl-net-peerdirect.so" --ofi ofi -b 1K -e 1M &&
	[ "$(grep -c "^\\\$ .*NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_DEBUG=INFO" "$tmp/out")" = 3 ] &&
	has "NCCL_NET_PLUGIN=peerdirect LD_LIBRARY_PATH=$tmp NCCL_NET=peerdirect all_reduce_perf -b 1K -e 1M" &&
	has "NCCL_NET_PLUGIN=none NCCL_NET=Socket NCCL_IB_DISABLE=1 all_reduce_perf" &&
	has "NCCL_NET_PLUGIN=ofi all_reduce_perf" && has "# would SKIP: nccl-tests"'
t "--dry-run: a launcher starts env on every rank; -g 2 from nvidia-smi without one" eval '
	run 0 --dry-run --ofi none --launcher "mpirun -np 4 --hostfile h" --coll all_reduce,all_gather &&
	[ "$(grep -c "^\\\$ mpirun -np 4 --hostfile h env NCCL_P2P_DISABLE=1" "$tmp/out")" = 4 ] &&
	has "all_gather_perf -b 8 -e 128M -f 2 -g 1" && lacks "NCCL_NET_PLUGIN=ofi" &&
	run 0 --dry-run --ofi none && has "all_reduce_perf -b 8 -e 128M -f 2 -g 2 "'

# rocm-smi --showid as ROCm prints it: RCCL, which looks for
# librccl-net-NAME.so, gets the plugin's path.
mkdir -p "$tmp/rocm"
printf '%s\n' '=== ROCm System Management Interface ===' 'GPU[0]		: Device Name: 		Instinct MI210' \
	'GPU[0]		: Device ID: 		0x740f' 'GPU[1]		: Device Name: 		Instinct MI210' > "$tmp/rocm.out"
printf '#!/bin/sh\ncat "%s"\n' "$tmp/rocm.out" > "$tmp/rocm/rocm-smi"
chmod +x "$tmp/rocm/rocm-smi"
t "AMD GPUs (rocm-smi): 2 found, RCCL gets the plugin by its path" eval '
	RUN_PATH=$tmp/rocm run 0 --dry-run --ofi none --plugin "$tmp/libnccl-net-peerdirect.so" &&
	has "NCCL_NET_PLUGIN=$tmp/libnccl-net-peerdirect.so NCCL_NET=peerdirect all_reduce_perf -b 8 -e 128M -f 2 -g 2 " &&
	lacks "no GPU" && lacks LD_LIBRARY_PATH'

t "--parse: the busbw table and ratio of the recorded peerdirect and socket runs" eval '
	run 0 --parse "$fx/all_reduce_perf.peerdirect.out" "$fx/all_reduce_perf.socket.out" &&
	grep -qxE " +1048576 +2\\.56 +1\\.28 +2\\.00" "$tmp/out" &&
	grep -qxE " +65536 +0\\.82 +0\\.44 +1\\.86" "$tmp/out" &&
	grep -qxE " +16777216 +4\\.09 +2\\.04 +2\\.00" "$tmp/out" &&
	grep -qxE " +8 +0\\.00 +0\\.00 +-" "$tmp/out" &&
	grep -qxE " +avg busbw +1\\.95 +0\\.98 +1\\.99" "$tmp/out" &&
	[ "$(grep -cE "^ +[0-9]+ " "$tmp/out")" = 6 ]'
t "--parse: output without a result row is an error" eval '
	printf "# nThread 1\nNCCL WARN oops\n" > "$tmp/empty.out" && run 1 --parse "$tmp/empty.out" && has "no nccl-tests result row"'

# all_reduce_perf as nccl-tests prints it, chosen by the environment the
# script gives it; it refuses to run with P2P or SHM on.  FAKE_MODE:
# fallback (NCCL took Socket though asked for peerdirect), noplugin (no
# NET/peerdirect line), fail (exits 3).
cat > "$tmp/bin/all_reduce_perf" <<EOF
#!/bin/bash
[ "\${NCCL_P2P_DISABLE:-}" = 1 ] && [ "\${NCCL_SHM_DISABLE:-}" = 1 ] && [ "\${NCCL_DEBUG:-}" = INFO ] ||
	{ echo "P2P or SHM left on" >&2; exit 7; }
echo "\$NCCL_NET_PLUGIN \${NCCL_NET:-} \${LD_LIBRARY_PATH:-} \$*" >> "$tmp/calls"
case "\$NCCL_NET_PLUGIN:\${FAKE_MODE:-}" in
peerdirect:fallback) cat "$fx/all_reduce_perf.socket.out" ;;
peerdirect:noplugin) grep -v 'NET/peerdirect device' "$fx/all_reduce_perf.peerdirect.out" ;;
peerdirect:fail) echo "NCCL WARN NET/peerdirect : init failed"; exit 3 ;;
peerdirect:*) cat "$fx/all_reduce_perf.peerdirect.out" ;;
none:*) cat "$fx/all_reduce_perf.socket.out" ;;
ofi:*) sed 's/Using network Socket/Using network Libfabric/' "$fx/all_reduce_perf.socket.out" ;;
*) echo "unexpected NCCL_NET_PLUGIN=\$NCCL_NET_PLUGIN" >&2; exit 8 ;;
esac
EOF
chmod +x "$tmp/bin/all_reduce_perf"
flow() { run "$@" --plugin "$tmp/libnccl-net-peerdirect.so" --ofi ofi -e 128M --logs "$tmp/logs" --out "$tmp/report"; }

t "fake GPUs and nccl-tests: three runs, each checked, the table with both ratios, exit 0" eval '
	flow 0 && has "ok peerdirect: NCCL used network peerdirect" && has "ok socket: NCCL used network Socket" &&
	has "ok ofi: NCCL used network Libfabric" &&
	grep -qF "peerdirect/socket     peerdirect/ofi" "$tmp/out" &&
	grep -qxE " +134217728 +4\\.20 +2\\.10 +2\\.10 +2\\.00 +2\\.00" "$tmp/out" &&
	[ "$(wc -l < "$tmp/calls")" = 3 ] && grep -q "^peerdirect peerdirect $tmp -b 8 -e 128M -f 2 -g 2 " "$tmp/calls"'
t "--out holds the report, the logs each run's output" eval '
	diff <(grep -v "^nccl-plugin-gpu: " "$tmp/out") "$tmp/report" > /dev/null &&
	grep -q "Using network Libfabric" "$tmp/logs/all_reduce.ofi.log"'
t "NCCL fell back to Socket: exit 1, says so loudly" eval '
	FAKE_MODE=fallback flow 1 &&
	has "FAIL peerdirect: NCCL used network(s) Socket, not peerdirect: it fell back" &&
	has "ok socket: NCCL used network Socket"'
t "NCCL says it uses peerdirect but the plugin logged nothing: exit 1" eval '
	FAKE_MODE=noplugin flow 1 && has "peerdirect\" but the plugin logged no NET/peerdirect line" &&
	has "FAIL peerdirect: NCCL says"'
t "a run that fails: exit 1, its status and output shown, the others still compared" eval '
	FAKE_MODE=fail flow 1 && has "FAIL peerdirect: all_reduce_perf exited 3" && has "NET/peerdirect : init failed" &&
	grep -qxE " +1048576 +- +1\\.28 +1\\.28 +- +-" "$tmp/out"'

echo "# Totals: pass:$pass fail:$fail xfail:0 xpass:0 skip:0 error:0"
[ "$fail" = 0 ]
