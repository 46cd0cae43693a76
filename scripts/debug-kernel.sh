#!/bin/bash
# Build (once) the debug kernel from Debian's linux-source-6.1 and print the
# cache directory that holds it.  The cache lives outside the work tree and is
# keyed by the config fragment, this script and the source package version, so
# a change to any of them builds a new kernel and an unchanged one is reused.
#
#   scripts/debug-kernel.sh            build if needed, print the directory
#   scripts/debug-kernel.sh --path     print the directory only (no build)
#
# The directory holds arch/x86/boot/bzImage and a tree prepared for
# out-of-tree module builds (make M=...).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
frag="$here/debug-kernel.config"
cache_root=${PEERDIRECT_CACHE:-/var/cache/peerdirect}
tarball=/usr/src/linux-source-6.1.tar.xz

srcver=$(dpkg-query -W -f='${Version}' linux-source-6.1 2>/dev/null || echo unknown)
key=$(cat "$frag" "$0" | sha256sum | cut -c1-16)
dir="$cache_root/debug-kernel-$srcver-$key"

if [ "${1:-}" = "--path" ]; then
	echo "$dir"
	exit 0
fi

if [ -f "$dir/.done" ]; then
	echo "$dir"
	exit 0
fi

[ -f "$tarball" ] || { echo "debug-kernel: $tarball missing (scripts/install-deps.sh)" >&2; exit 1; }

mkdir -p "$cache_root"
# One builder at a time: a concurrent caller waits for the first to finish.
exec 9>"$cache_root/.debug-kernel.lock"
flock 9
if [ -f "$dir/.done" ]; then
	echo "$dir"
	exit 0
fi

rm -rf "$dir"
mkdir -p "$dir"
log="$cache_root/debug-kernel-$key.log"
echo "debug-kernel: building in $dir (log: $log); about 20 minutes on 2 cores" >&2
start=$(date +%s)
(
	set -e
	tar -C "$dir" --strip-components=1 -xf "$tarball"
	cd "$dir"
	make tinyconfig
	scripts/kconfig/merge_config.sh -m .config "$frag"
	make olddefconfig
	missing=0
	while IFS= read -r line; do
		case "$line" in
		CONFIG_*=y)
			grep -qx "$line" .config || { echo "missing: $line"; missing=1; } ;;
		CONFIG_*=n)
			opt=${line%=n}
			if grep -q "^$opt=" .config; then echo "not off: $opt"; missing=1; fi ;;
		esac
	done < "$frag"
	[ "$missing" = 0 ] || { echo "debug-kernel: config fragment not satisfied"; exit 1; }
	nice -n 19 make -j"$(nproc)" bzImage
	nice -n 19 make -j"$(nproc)" modules_prepare
) > "$log" 2>&1 || { echo "debug-kernel: build failed, see $log" >&2; tail -n 30 "$log" >&2; exit 1; }
echo "$(( $(date +%s) - start ))" > "$dir/.build-seconds"
touch "$dir/.done"
echo "debug-kernel: built in $(cat "$dir/.build-seconds") s" >&2
echo "$dir"
