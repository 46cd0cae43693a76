#!/bin/bash
# The version every build of this tree carries: the packages' (Debian
# changelog), DKMS's PACKAGE_VERSION, the module's MODULE_VERSION and the
# library's and tools' --version.  One source, so that they always agree.
#
#   scripts/version.sh              print it
#
# BASE+YYYYMMDDHHMMSS.gitHASH[.dirty]: BASE is user/Makefile's BASE_VERSION
# (the last release), then the commit's committer time in UTC and its hash.
# The time grows with every commit, so each build sorts above the last under
# `dpkg --compare-versions` (apt upgrades, DKMS builds the new module), and
# it needs no history: a shallow clone, as CI makes, gives the same version
# as a full one (a count of commits would not).  Uncommitted edits add
# ".dirty", which sorts above that commit and below the next.  The next
# release (1.2.2) sorts above every 1.2.1+....
# Without git (a tarball; the packages' staged tree): the VERSION file at the
# top, which scripts/package.sh writes, else BASE alone.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
base=$(sed -n 's/^BASE_VERSION := *//p' "$top/user/Makefile")
[ -n "$base" ] || { echo "version: no BASE_VERSION in $top/user/Makefile" >&2; exit 1; }

# Only a git checkout whose top is this tree: the packages' staged tree
# lies inside the checkout's build/ but is no checkout of its own.
if gtop=$(git -C "$top" rev-parse --show-toplevel 2> /dev/null) && [ "$gtop" = "$top" ] &&
	git -C "$top" rev-parse -q --verify HEAD > /dev/null 2>&1; then
	read -r when hash < <(TZ=UTC git -C "$top" log -1 --date=format-local:%Y%m%d%H%M%S --format='%cd %h' HEAD)
	dirty=
	git -C "$top" update-index -q --refresh > /dev/null 2>&1 || true
	git -C "$top" diff-index --quiet HEAD -- 2> /dev/null || dirty=.dirty
	echo "$base+$when.git$hash$dirty"
elif [ -s "$top/VERSION" ]; then
	v=$(head -n 1 "$top/VERSION")
	[[ "$v" =~ ^[0-9][0-9A-Za-z.+~]*$ ]] || { echo "version: bad VERSION file '$v'" >&2; exit 1; }
	echo "$v"
else
	echo "$base"
fi
