#!/bin/bash
# run-tests.sh itself, on stand-in test binaries: what it counts, what it
# shows and that it ends, with binaries running side by side.  KTAP; run by
# `make -C user check` through run-tests.sh.
set -u
runner=$(cd "$(dirname "$0")" && pwd)/run-tests.sh
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
n=0 pass=0 fail=0

check() {	# check NAME CONDITION...
	local name=$1
	shift
	n=$((n + 1))
	if "$@"; then
		pass=$((pass + 1)); echo "ok $n $name"
	else
		fail=$((fail + 1)); echo "not ok $n $name"
	fi
}

stub() {	# stub NAME BODY: an executable stand-in printing KTAP totals
	printf '#!/bin/bash\n%s\n' "$2" > "$dir/$1"
	chmod +x "$dir/$1"
}
totals='echo "# Totals: pass:1 fail:0 xfail:0 xpass:0 skip:0 error:0"'
stub ok.sh "$totals"
stub slow.sh "sleep 1; $totals"
stub kills-runner.sh 'echo "# before"; kill -9 $PPID; sleep 2'
stub leaves-child.sh "( sleep 1; echo LEFT-BEHIND ) & $totals"
stub exit3.sh "$totals; exit 3"
stub fails.sh 'echo "# Totals: pass:0 fail:2 xfail:0 xpass:0 skip:0 error:0"; exit 1'

run() {		# run JOBS STUB...: the runner's output in $dir/out, its status in rc
	local jobs=$1 s bins=()
	shift
	for s in "$@"; do
		bins+=("$dir/$s")
	done
	PD_TEST_JOBS=$jobs timeout 60 bash "$runner" "${bins[@]}" > "$dir/out" 2>&1
	rc=$?
}
last() { tail -n 1 "$dir/out"; }

run 2 ok.sh slow.sh ok.sh
check "three passing binaries, two at a time: 3 passed, exit 0" \
	test "$(last)" = "3 passed, 0 failed" -a "$rc" = 0
check "their KTAP shown in the order given" \
	test "$(grep -o '^# ---- [^:]*$' "$dir/out" | sed 's|.*/||' | tr '\n' ' ')" = "ok.sh slow.sh ok.sh "
run 2 kills-runner.sh ok.sh
check "a binary whose runner is killed ends the run, counted as a failure" \
	test "$(last)" = "1 passed, 1 failed" -a "$rc" = 1
check "... with its exit status named" grep -q 'no totals line (exit 137)' "$dir/out"
run 2 leaves-child.sh ok.sh
check "what a binary leaves running is shown before its end line" \
	grep -q LEFT-BEHIND "$dir/out"
run 2 exit3.sh ok.sh
check "a non-zero exit without a failed test counts as one failure" \
	test "$(last)" = "2 passed, 1 failed" -a "$rc" = 1
run 1 fails.sh ok.sh
check "failed tests counted, one at a time too" \
	test "$(last)" = "1 passed, 2 failed" -a "$rc" = 1
echo "# Totals: pass:$pass fail:$fail xfail:0 xpass:0 skip:0 error:0"
[ "$fail" = 0 ]
