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

for t in "$@"; do
	echo "# ---- $t"
	drop_stale_shm
	t0=$SECONDS
	if [ -n "$VALGRIND" ]; then
		out=$(PEERDIRECT_TEST_QUICK=1 valgrind -q --error-exitcode=99 --leak-check=full \
			--errors-for-leak-kinds=definite --show-leak-kinds=definite \
			--suppressions="$(dirname "$0")/valgrind.supp" "$t" 2>&1)
	else
		out=$("$t" 2>&1)
	fi
	rc=$?
	echo "$out"
	echo "# ---- $t: exit $rc after $((SECONDS - t0)) s"
	totals=$(echo "$out" | grep -E '^# Totals: pass:[0-9]+ fail:[0-9]+' | tail -1)
	if [ -z "$totals" ]; then
		echo "# $t: no totals line (exit $rc): counted as one failure"
		fail=$((fail + 1))
		continue
	fi
	p=$(echo "$totals" | sed -E 's/.*Totals: pass:([0-9]+).*/\1/')
	f=$(echo "$totals" | sed -E 's/.* fail:([0-9]+).*/\1/')
	s=$(echo "$totals" | sed -E 's/.* skip:([0-9]+).*/\1/')
	if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
		echo "# $t: exit $rc with no failed test: counted as one failure"
		f=1
	fi
	pass=$((pass + p)) fail=$((fail + f)) skip=$((skip + s))
done
[ "$skip" -gt 0 ] && echo "# $skip skipped (not counted as passed)"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
