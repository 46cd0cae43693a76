#!/bin/bash
# The version every build of this tree carries: the packages' (Debian
# changelog), DKMS's PACKAGE_VERSION, the module's MODULE_VERSION and the
# library's and tools' --version.  One source, so that they always agree.
#
#   scripts/version.sh              print it
#
# BASE+N.gitYYYYMMDD.HASH[.dirty]: BASE is user/Makefile's BASE_VERSION (the
# release this tree works toward), N the number of commits in HEAD's
# history, then the commit's date and hash.  N grows with every commit, so
# each build sorts above the last under `dpkg --compare-versions`: apt
# upgrades and DKMS builds the new module.  Uncommitted edits add ".dirty",
# which sorts above that commit and below the next.  A released BASE (1.2.2)
# sorts above every 1.2.1+N.
# Without git (a tarball; the packages' staged tree): the VERSION file at the
# top, which scripts/package.sh writes, else BASE alone.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
base=$(sed -n 's/^BASE_VERSION := *//p' "$top/user/Makefile")
[ -n "$base" ] || { echo "version: no BASE_VERSION in $top/user/Makefile" >&2; exit 1; }

# Only a git checkout whose top is this tree: the packages' staged tree
# lies inside the checkout's build/ but is no checkout of its own.
if gtop=$(git -C "$top" rev-parse --show-toplevel 2> /dev/null) && [ "$gtop" = "$top" ] &&
	n=$(git -C "$top" rev-list --count HEAD 2> /dev/null); then
	read -r when hash < <(TZ=UTC git -C "$top" log -1 --date=format-local:%Y%m%d --format='%cd %h' HEAD)
	dirty=
	git -C "$top" update-index -q --refresh > /dev/null 2>&1 || true
	git -C "$top" diff-index --quiet HEAD -- 2> /dev/null || dirty=.dirty
	echo "$base+$n.git$when.$hash$dirty"
elif [ -s "$top/VERSION" ]; then
	v=$(head -n 1 "$top/VERSION")
	[[ "$v" =~ ^[0-9][0-9A-Za-z.+~]*$ ]] || { echo "version: bad VERSION file '$v'" >&2; exit 1; }
	echo "$v"
else
	echo "$base"
fi
