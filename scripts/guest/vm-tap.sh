#!/bin/bash
# KTAP output for the guest scripts of scripts/check.sh's VM parts
# (shipped at /pd/lib/vm-tap.sh), so that every part counts the same way.
#
#   source /pd/lib/vm-tap.sh; tap_plan N
#   check DESCRIPTION EXPECTED-RC RC LOG [REGEX...]
#       ok when RC is EXPECTED-RC and every REGEX (grep -E) matches a line
#       of LOG; a REGEX starting with ! must match none.  On failure the
#       end of LOG is printed as comments.  $last is ok or fail.
#   skip DESCRIPTION REASON
#   tap_done                 the totals line; fails if the plan was not run

# The library's counters are tap_*, so that a sourcing script's own
# variables cannot miscount; its interface is the functions above and $last.
tap_n=0
tap_pass=0
tap_fail=0
tap_skipped=0
tap_planned=0
# shellcheck disable=SC2034  # read by the sourcing script
last=

tap_plan() {
	tap_planned=$1
	echo "TAP version 13"
	echo "1..$tap_planned"
}

check() {
	local desc=$1 want=$2 got=$3 log=$4 re ok=1
	shift 4
	[ "$got" = "$want" ] || ok=0
	for re in "$@"; do
		if [ "${re:0:1}" = '!' ]; then
			! grep -qE -- "${re:1}" "$log" || { ok=0; echo "# unexpected /${re:1}/"; }
		else
			grep -qE -- "$re" "$log" || { ok=0; echo "# missing /$re/"; }
		fi
	done
	tap_n=$((tap_n + 1))
	if [ $ok = 1 ]; then
		tap_pass=$((tap_pass + 1)); echo "ok $tap_n $desc"
		# shellcheck disable=SC2034
		last=ok
	else
		tap_fail=$((tap_fail + 1)); echo "not ok $tap_n $desc (rc $got, want $want)"
		sed 's/^/# /' "$log" | tail -n 40
		# shellcheck disable=SC2034
		last=fail
	fi
}

skip() {
	tap_n=$((tap_n + 1)); tap_skipped=$((tap_skipped + 1)); echo "ok $tap_n $1 # SKIP $2"
}

tap_done() {
	if [ "$tap_n" != "$tap_planned" ]; then
		tap_fail=$((tap_fail + 1))
		echo "not ok $((tap_n + 1)) ran $tap_n results, planned $tap_planned"
	fi
	echo "# Totals: pass:$tap_pass fail:$tap_fail xfail:0 xpass:0 skip:$tap_skipped error:0"
	[ "$tap_fail" = 0 ]
}
