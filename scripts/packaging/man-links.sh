#!/bin/bash
# Prints "PAGE ALIAS" for every further name in the NAME section of the
# given man pages (pd_device_alloc.3 for pd_device_open.3...), so that
# `man pd_device_alloc` finds the page: `make install-man` and the Debian
# packages install those aliases as symlinks.
#
#   scripts/packaging/man-links.sh Documentation/man/*.3
set -euo pipefail
for p in "$@"; do
	sec=${p##*.}
	base=$(basename "$p")
	awk '/^\.Sh NAME/ { on = 1; next } /^\.Sh/ { on = 0 } on && /^\.Nm/ { print $2 }' "$p" |
		while read -r name; do
			[ "$name.$sec" = "$base" ] || echo "$base $name.$sec"
		done
done
