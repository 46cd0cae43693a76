#!/bin/bash
# Runs each test binary, shows its KTAP, and sums the harness's per-test
# results into one final line: "N passed, N failed".  A binary that dies
# before printing its totals counts as one failure.  VALGRIND=1 runs every
# binary under memcheck (big transfer sizes left out); a definite leak or a
# memory error fails the test that caused it.
pass=0 fail=0 skip=0

# libfabric's shm provider names its region /dev/shm/PID:N:N and fails
# fi_enable with EBUSY while a file of that name is left by a dead process
# that had the same pid (one that ended without fi_close): once pids wrap
# (pid_max is 32768 on small machines) a test fails at random.  Between
# two test binaries none of ours runs, so a region whose pid is gone is
# stale.
drop_stale_shm() {
	local f pid
	[ -d /proc/self ] || return 0
	for f in /dev/shm/[0-9]*:*; do
		[ -e "$f" ] || continue
		pid=${f#/dev/shm/}
		pid=${pid%%:*}
		[[ $pid =~ ^[0-9]+$ ]] || continue
		[ -d "/proc/$pid" ] || rm -f -- "$f"
	done
}

# One binary, its output and exit status into DIR/N.out and DIR/N.rc.
run_one() {
	local t=$1 dir=$2 n=$3 t0=$SECONDS rc
	if [ -n "$VALGRIND" ]; then
		PEERDIRECT_TEST_QUICK=1 valgrind -q --error-exitcode=99 --leak-check=full \
			--errors-for-leak-kinds=definite --show-leak-kinds=definite \
			--suppressions="$(dirname "$0")/valgrind.supp" "$t" > "$dir/$n.out" 2>&1
	else
		"$t" > "$dir/$n.out" 2>&1
	fi
	rc=$?
	echo "# ---- $t: exit $rc after $((SECONDS - t0)) s" >> "$dir/$n.out"
	echo "$rc" > "$dir/$n.rc"
}

# Its KTAP, and its totals added to the run's.
report_one() {
	local t=$1 dir=$2 n=$3 out rc totals p f s
	out=$(cat "$dir/$n.out")
	rc=$(cat "$dir/$n.rc")
	echo "# ---- $t"
	echo "$out"
	totals=$(echo "$out" | grep -E '^# Totals: pass:[0-9]+ fail:[0-9]+' | tail -1)
	if [ -z "$totals" ]; then
		echo "# $t: no totals line (exit $rc): counted as one failure"
		fail=$((fail + 1))
		return
	fi
	p=$(echo "$totals" | sed -E 's/.*Totals: pass:([0-9]+).*/\1/')
	f=$(echo "$totals" | sed -E 's/.* fail:([0-9]+).*/\1/')
	s=$(echo "$totals" | sed -E 's/.* skip:([0-9]+).*/\1/')
	if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
		echo "# $t: exit $rc with no failed test: counted as one failure"
		f=1
	fi
	pass=$((pass + p)) fail=$((fail + f)) skip=$((skip + s))
}

# PD_TEST_JOBS binaries at once (default 2): most of them wait on sockets,
# peers and deadlines, not on a CPU, and each binary's tests run in turn
# inside it.  Nothing they share is fixed (ports are drawn at random and
# checked free, files are per process), and the suite holds beside two CPU
# hogs (Documentation/testing.md, "Under load").  Output is shown per
# binary, in the order given, as each one ends.
jobs=${PD_TEST_JOBS:-2}
[[ $jobs =~ ^[1-9][0-9]*$ ]] || jobs=1
dir=$(mktemp -d) || exit 1
trap 'rm -rf "$dir"' EXIT
args=("$@")
next=0 shown=0 running=0
while [ "$shown" -lt "${#args[@]}" ]; do
	while [ "$running" -lt "$jobs" ] && [ "$next" -lt "${#args[@]}" ]; do
		drop_stale_shm
		run_one "${args[$next]}" "$dir" "$next" &
		next=$((next + 1)) running=$((running + 1))
	done
	wait -n 2>/dev/null || true
	running=0
	for ((i = shown; i < next; i++)); do
		[ -e "$dir/$i.rc" ] || running=$((running + 1))
	done
	while [ "$shown" -lt "$next" ] && [ -e "$dir/$shown.rc" ]; do
		report_one "${args[$shown]}" "$dir" "$shown"
		shown=$((shown + 1))
	done
done
[ "$skip" -gt 0 ] && echo "# $skip skipped (not counted as passed)"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
