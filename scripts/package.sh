#!/bin/bash
# Debian packages of peerdirect, built from this tree (`make package`).
#
#   scripts/package.sh [--out DIR]
#
# 1. Stages the tree's files (git's tracked and untracked, not ignored ones;
#    no build output) in DIR/peerdirect-VERSION, default build/pkg, with
#    scripts/packaging/debian as debian/ and a changelog for VERSION, which
#    comes from scripts/version.sh (the base release plus the commit: every
#    commit's packages upgrade the last) and nowhere else; the tree gets a
#    VERSION file, so that its build without git says the same.
# 2. Writes DIR/peerdirect_VERSION.orig.tar.xz of the same tree (without
#    debian/), so that `dpkg-buildpackage -S` works there too.
# 3. dpkg-buildpackage -us -uc -b in it (debhelper compat 13, dh-dkms);
#    log in DIR/build.log.
#
# Binary packages: peerdirect-dkms, peerdirect-udev, libpeerdirect1,
# libpeerdirect-dev, libnccl-net-peerdirect, peerdirect-tools.  Prints the
# paths of the .debs.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
out=$top/build/pkg
while [ $# -gt 0 ]; do
	case "$1" in
	--out) out=${2:?}; shift 2 ;;
	*) echo "usage: $0 [--out DIR]" >&2; exit 2 ;;
	esac
done
mkdir -p "$out"
out=$(cd "$out" && pwd)
cd "$top"
"$top/scripts/packaging/deps.sh"

version=$(make -s --no-print-directory -C user version)
[[ "$version" =~ ^[0-9][0-9A-Za-z.+~]*$ ]] || { echo "package: bad version '$version' (scripts/version.sh)" >&2; exit 1; }
src=$out/peerdirect-$version
rm -rf "$src" "$out"/*.deb "$out"/*.changes "$out"/*.buildinfo "$out"/*.orig.tar.*
mkdir -p "$src"

# The tree as git sees it, edits included; without git, everything but
# build output.
if git rev-parse --git-dir > /dev/null 2>&1; then
	git ls-files -z --cached --others --exclude-standard |
		while IFS= read -r -d '' f; do
			[ -f "$f" ] && printf '%s\0' "$f"
		done | xargs -0 cp --parents -t "$src"
	rev=$(git describe --always --dirty 2> /dev/null || echo unknown)
	when=$(git log -1 --format=%ct 2> /dev/null || date +%s)
else
	tar -c --exclude=./build --exclude='*/build' --exclude='*.o' --exclude='*.ko' \
		--exclude='*.mod*' --exclude='.*.cmd' --exclude=./.git . | tar -x -C "$src"
	rev=unknown
	when=$(date +%s)
fi
rm -rf "$src/debian"
# The staged tree is no git checkout: scripts/version.sh reads this there.
echo "$version" > "$src/VERSION"
tar -C "$out" --sort=name --owner=0 --group=0 --mtime="@$when" -cJf \
	"$out/peerdirect_$version.orig.tar.xz" "peerdirect-$version"
cp -r scripts/packaging/debian "$src/debian"
rm "$src/debian/changelog.in"
sed -e "s/@VERSION@/$version/g" -e "s/@GITREV@/$rev/g" -e "s/@DATE@/$(date -R -u -d "@$when")/" \
	scripts/packaging/debian/changelog.in > "$src/debian/changelog"

echo "package: building peerdirect $version ($rev) in $src" >&2
t0=$SECONDS
if ! (cd "$src" && DEB_BUILD_OPTIONS="parallel=$(nproc)" dpkg-buildpackage -us -uc -b) \
	> "$out/build.log" 2>&1; then
	tail -n 40 "$out/build.log" >&2
	echo "package: dpkg-buildpackage failed (log: $out/build.log)" >&2
	exit 1
fi
echo "package: built in $((SECONDS - t0)) s (log: $out/build.log)" >&2
ls "$out"/*_"$version"-*.deb
