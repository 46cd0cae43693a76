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
# (pid_max is 32768 on small machines) a test fails at random.  A region
# whose pid is gone is stale, whatever else runs.
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

# One binary, its output into DIR/N.out; its exit status is the job's.
# Through a pipe, as the old `out=$(...)` was: the job ends when every
# process writing the output has, so what a test leaves running is shown
# and waited for instead of lingering beside the next binaries.
run_one() {
	local t=$1 dir=$2 n=$3 t0=$SECONDS rc
	if [ -n "$VALGRIND" ]; then
		PEERDIRECT_TEST_QUICK=1 valgrind -q --error-exitcode=99 --leak-check=full \
			--errors-for-leak-kinds=definite --show-leak-kinds=definite \
			--suppressions="$(dirname "$0")/valgrind.supp" "$t" 2>&1 | cat > "$dir/$n.out"
	else
		"$t" 2>&1 | cat > "$dir/$n.out"
	fi
	rc=${PIPESTATUS[0]}
	echo "# ---- $t: exit $rc after $((SECONDS - t0)) s" >> "$dir/$n.out"
	return "$rc"
}

# Its KTAP, and its totals added to the run's.
report_one() {
	local t=$1 dir=$2 n=$3 out rc totals p f s
	out=$(cat "$dir/$n.out" 2>/dev/null)
	rc=${rcs[$n]}
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
pids=() rcs=()
next=0 shown=0
# Each job's status comes from `wait PID`, which bash keeps for a child
# that has already ended: a job killed before it could write anything
# still ends, with its signal's status, and is counted.
while [ "$shown" -lt "${#args[@]}" ]; do
	running=0
	for ((i = shown; i < next; i++)); do
		[ -n "${rcs[$i]}" ] && continue
		if kill -0 "${pids[$i]}" 2>/dev/null; then
			running=$((running + 1))
		else
			wait "${pids[$i]}"
			rcs[$i]=$?
		fi
	done
	if [ "$running" -lt "$jobs" ] && [ "$next" -lt "${#args[@]}" ]; then
		drop_stale_shm
		run_one "${args[$next]}" "$dir" "$next" &
		pids[$next]=$!
		next=$((next + 1))
		continue
	fi
	while [ "$shown" -lt "$next" ] && [ -n "${rcs[$shown]}" ]; do
		report_one "${args[$shown]}" "$dir" "$shown"
		shown=$((shown + 1))
	done
	[ "$shown" -lt "${#args[@]}" ] && sleep 0.2
done
[ "$skip" -gt 0 ] && echo "# $skip skipped (not counted as passed)"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
