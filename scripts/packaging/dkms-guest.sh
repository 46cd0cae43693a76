#!/bin/bash
# Guest side of scripts/dkms-test.sh, run by scripts/vm-run.sh in /pd: load
# the DKMS-built module from /pd/ko/ (.ko or .ko.xz), check it is that
# build and works (dkms-smoke), unload it.  "ok"/"not ok" lines.
set -u
pass=0
fail=0
check() {	# check DESCRIPTION COMMAND...
	local what=$1
	shift
	if "$@"; then
		pass=$((pass + 1)); echo "ok $what"
	else
		fail=$((fail + 1)); echo "not ok $what"
	fi
}
ko=$(ls /pd/ko/peerdirect.ko* | head -n 1)
kver=$(uname -r)
echo "# kernel $kver, module $ko: $(modinfo -F vermagic "$ko")"
echo "# signer: $(modinfo -F signer "$ko" || true)"
check "$kver: the DKMS build's vermagic is this kernel's" \
	bash -c '[[ "$(modinfo -F vermagic "$1") " == "$2 "* ]]' _ "$ko" "$kver"
check "$kver: insmod $(basename "$ko") sim_devices=2" insmod "$ko" sim_devices=2
check "$kver: the loaded module is that file (srcversion)" \
	test "$(cat /sys/module/peerdirect/srcversion 2>/dev/null)" = "$(modinfo -F srcversion "$ko")"
check "$kver: /dev/peerdirect0 and /dev/peerdirect1" test -c /dev/peerdirect0 -a -c /dev/peerdirect1
if /pd/bin/dkms-smoke > /tmp/smoke.out 2>&1; then
	pass=$((pass + 1)); echo "ok $kver: allocate, export, map, revoke, free"
else
	fail=$((fail + 1)); echo "not ok $kver: allocate, export, map, revoke, free"
fi
sed 's/^/#   /' /tmp/smoke.out
check "$kver: no test importer loaded" bash -c '! grep -q pd_test_importer /proc/modules'
check "$kver: rmmod peerdirect" rmmod peerdirect
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
