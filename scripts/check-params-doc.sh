#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Every module parameter (module_param* in kmod/) is in the admin guide's
# table, kernel-module.md's table and peerdirect(4), and each of those names
# only parameters that exist: max_subscriptions was in none of them.
# TAP lines, exit 1 on any miss.
#
#   scripts/check-params-doc.sh [TOP]
set -uo pipefail
top=${1:-.}
params=$(grep -ohE 'module_param(_cb|_named)?\([a-z_0-9]+' "$top"/kmod/*.c | sed 's/.*(//' | sort -u)
[ -n "$params" ] || { echo "not ok no module_param found in $top/kmod"; exit 1; }
bad=0
for p in $params; do
	for doc in Documentation/admin-guide.md Documentation/kernel-module.md; do
		if grep -qE "^\| \`$p\` \|" "$top/$doc"; then echo "ok $p in $doc"; else echo "not ok $p missing from $doc's table"; bad=1; fi
	done
	if grep -qE "(^|[ ,])$p( ,|$| )" <(sed -n '/modinfo peerdirect/,/^\.It/p' "$top/Documentation/man/peerdirect.4"); then
		echo "ok $p in peerdirect.4"
	else
		echo "not ok $p missing from peerdirect.4's list"; bad=1
	fi
done
for doc in Documentation/admin-guide.md Documentation/kernel-module.md; do
	for p in $(sed -n '/^| parameter |/,/^$/p' "$top/$doc" | grep -oE '^\| `[a-z_0-9]+`' | tr -d '|` '); do
		grep -qx "$p" <<< "$params" || { echo "not ok $doc's table names $p, which the module does not have"; bad=1; }
	done
done
# peerdirect.4: the .Cm lines after "modinfo peerdirect", up to the next .It
for p in $(sed -n '/modinfo peerdirect/,/^\.It/p' "$top/Documentation/man/peerdirect.4" |
	   sed -n 's/^\.Cm //p' | tr -d ',' | tr ' ' '\n' | grep -E '^[a-z_0-9]+$'); do
	grep -qx "$p" <<< "$params" || { echo "not ok peerdirect.4 names $p, which the module does not have"; bad=1; }
done
exit $bad
