# shellcheck shell=bash
# Result lines for the packaging tests (sourced): "ok"/"not ok" lines and the
# closing "N passed, N failed, N skipped" that scripts/check.sh counts.
pass=0
fail=0
skip=0
ok() { pass=$((pass + 1)); echo "ok $*"; }
notok() { fail=$((fail + 1)); echo "not ok $*"; }
skipped() { skip=$((skip + 1)); echo "ok $* # SKIP"; }
check() {	# check DESCRIPTION COMMAND...: ok when the command succeeds
	local what=$1
	shift
	if "$@"; then ok "$what"; else notok "$what"; fi
}
