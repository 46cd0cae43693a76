#!/bin/bash
# A fresh, clean Debian root (default: bookworm, minbase) in DIR, for
# installing the packages the way a new machine would.
#
#   scripts/packaging/clean-root.sh DIR [SUITE]
#   scripts/packaging/clean-root.sh --cache-only [SUITE]   (make the cache only)
#
# The pristine root (debootstrap --variant=minbase, then `apt-get update`,
# nothing else) is cached as a tarball in $PEERDIRECT_CACHE (default
# /var/cache/peerdirect)/root-SUITE-minbase-KEY.tar.zst, where KEY is the
# suite's version and Release date on the mirror: a point release makes a
# new one, older ones are removed.  Each call extracts a new copy into DIR.
# Next to it, apt-SUITE-KEY/ keeps the .debs installed into such roots, so
# later runs download nothing (scripts/package-test.sh fills it).
#
# Prints "KEY CACHE_TARBALL".  Exit status 4: the mirror cannot be reached
# and nothing is cached (the caller reports a skip).
set -euo pipefail
dir=${1:?usage: clean-root.sh DIR [SUITE]}
suite=${2:-bookworm}
mirror=${PD_DEBIAN_MIRROR:-http://deb.debian.org/debian}
cache=${PEERDIRECT_CACHE:-/var/cache/peerdirect}
mkdir -p "$cache"

release=$(curl -fsS -m 30 "$mirror/dists/$suite/Release" 2> /dev/null | sed -n '1,30p' || true)
ver=$(sed -n 's/^Version: *//p' <<< "$release")
date=$(sed -n 's/^Date: *//p' <<< "$release")
if [ -n "$date" ]; then
	key=${ver:-noversion}-$(date -u -d "$date" +%Y%m%dT%H%M)
	tarball=$cache/root-$suite-minbase-$key.tar.zst
else
	# Offline: the newest cached root, if any.
	tarball=$(ls -t "$cache"/root-"$suite"-minbase-*.tar.zst 2> /dev/null | head -n 1 || true)
	[ -n "$tarball" ] || {
		echo "clean-root: $mirror/dists/$suite/Release unreachable and no cached $suite root" >&2
		exit 4
	}
	key=${tarball##*/root-"$suite"-minbase-}
	key=${key%.tar.zst}
	echo "clean-root: mirror unreachable, using the cached root $key" >&2
fi

exec 9> "$cache/.root-$suite-minbase.lock"
flock 9
if [ ! -f "$tarball" ]; then
	tmp=$(mktemp -d "$cache/.root-$suite.XXXXXX")
	log=$cache/root-$suite-minbase.log
	echo "clean-root: debootstrap $suite minbase ($key), once; log $log" >&2
	if ! debootstrap --variant=minbase "$suite" "$tmp/root" "$mirror" > "$log" 2>&1 ||
		! chroot "$tmp/root" env DEBIAN_FRONTEND=noninteractive LC_ALL=C \
			apt-get -q -o Dpkg::Use-Pty=0 update >> "$log" 2>&1; then
		tail -n 20 "$log" >&2
		rm -rf "$tmp"
		echo "clean-root: debootstrap $suite failed" >&2
		exit 1
	fi
	chroot "$tmp/root" apt-get clean
	tar -C "$tmp/root" --numeric-owner --xattrs -c . | zstd -q -T0 -3 -o "$tmp/root.tar.zst"
	mv "$tmp/root.tar.zst" "$tarball"
	rm -rf "$tmp"
	# Older point releases: their roots and .deb caches go.
	for old in "$cache"/root-"$suite"-minbase-*.tar.zst "$cache"/apt-"$suite"-*; do
		[ -e "$old" ] || continue
		case "$old" in
		"$tarball" | "$cache/apt-$suite-$key") ;;
		*) rm -rf "$old" ;;
		esac
	done
fi
flock -u 9
if [ "$dir" = --cache-only ]; then
	echo "$key $tarball"
	exit 0
fi

rm -rf "$dir"
mkdir -p "$dir"
zstd -q -dc "$tarball" | tar -C "$dir" --numeric-owner --xattrs -x
mkdir -p "$cache/apt-$suite-$key"
echo "$key $tarball"
