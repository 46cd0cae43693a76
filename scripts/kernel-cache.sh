#!/bin/bash
# A Debian kernel image and its headers unpacked into the cache, never
# installed: nothing lands in /boot, /lib/modules or dpkg's database, so
# GRUB's next boot is whatever it was before `make check`.
#
#   scripts/kernel-cache.sh ABI [SUITE]   unpack (once) and print the root
#   scripts/kernel-cache.sh --list        the roots already unpacked
#   scripts/kernel-cache.sh --newest      the root of the newest unpacked ABI
#
# The root (/var/cache/peerdirect/kernel-ABI-VERSION) holds boot/vmlinuz-ABI,
# lib/modules/ABI (depmod run, build -> the headers) and usr/src/linux-headers-*,
# whose absolute include is rewritten to the cache, so `make -C
# ROOT/lib/modules/ABI/build M=...` builds an out-of-tree module on Debian 12.
# The key is the package version: a point release unpacks a new root.
set -euo pipefail
cache=${PEERDIRECT_CACHE:-/var/cache/peerdirect}

die() {
	echo "kernel-cache: $*" >&2
	exit 1
}

roots() {
	ls -d "$cache"/kernel-*/.complete 2>/dev/null | sed 's|/.complete$||' || true
}

case "${1:-}" in
--list)
	roots
	exit 0
	;;
--newest)
	r=$(for d in $(roots); do echo "$(ls "$d"/boot/vmlinuz-* | sed 's|.*/vmlinuz-||') $d"; done |
		sort -V | tail -n 1 | cut -d' ' -f2)
	[ -n "$r" ] || die "no kernel unpacked in $cache (scripts/tiers.sh prepare stable)"
	echo "$r"
	exit 0
	;;
''|-*)
	echo "usage: kernel-cache.sh ABI [SUITE] | --list | --newest" >&2
	exit 2
	;;
esac

abi=$1
suite=${2:-}
pin=${suite:+/$suite}
ver=$(apt-cache madison "linux-image-$abi" 2>/dev/null |
	awk -F' [|] ' -v s="$suite" 's == "" || $3 ~ ("(^| )" s "/") { gsub(/ /, "", $2); print $2 }' |
	sort -V | tail -n 1)
if [ -z "$ver" ]; then
	# Unreachable suite: an earlier unpack of this ABI still serves.
	r=$(ls -d "$cache/kernel-$abi-"*/.complete 2>/dev/null | sort -V | tail -n 1)
	[ -n "$r" ] || die "apt knows no linux-image-$abi${suite:+ in $suite}"
	dirname "$r"
	exit 0
fi
root=$cache/kernel-$abi-$ver
if [ -f "$root/.complete" ]; then
	echo "$root"
	exit 0
fi

exec 9> "$cache/.kernel-$abi.lock" 2> /dev/null || { mkdir -p "$cache" && exec 9> "$cache/.kernel-$abi.lock"; }
flock 9
[ -f "$root/.complete" ] && { echo "$root"; exit 0; }

# The headers' own dependencies: the -common tree and kbuild (fixdep,
# modpost), at the versions this image's headers name.
hdr_deps=$(apt-cache show "linux-headers-$abi=$ver" 2>/dev/null |
	sed -n 's/^Depends: //p' | head -n 1 | tr ',' '\n' |
	sed -n 's/^ *\(linux-\(headers\|kbuild\)-[^ ]*\).*/\1/p')
image=linux-image-$abi
# The signed image is a copy of the -unsigned one plus a signature: the
# unsigned one is smaller to fetch and has the same modules.
apt-cache show "linux-image-$abi-unsigned=$ver" > /dev/null 2>&1 && image=linux-image-$abi-unsigned

tmp=$(mktemp -d "$cache/.kernel-$abi.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/debs" "$tmp/root"
pkgs=("$image=$ver" "linux-headers-$abi=$ver")
for p in $hdr_deps; do
	v=$(apt-cache madison "$p" | awk -F' [|] ' '{ gsub(/ /, "", $2); print $2 }' | sort -V | tail -n 1)
	[ -n "$v" ] || die "apt knows no $p (needed by linux-headers-$abi)"
	pkgs+=("$p=$v")
done
echo "kernel-cache: unpacking ${pkgs[*]} into $root" >&2
(cd "$tmp/debs" && apt-get download -q "${pkgs[@]}" > "$tmp/download.log" 2>&1) ||
	{ tail -n 5 "$tmp/download.log" >&2; die "apt-get download ${pkgs[*]} failed"; }
for d in "$tmp"/debs/*.deb; do
	dpkg -x "$d" "$tmp/root"
done
rm -rf "$tmp/debs"
r=$tmp/root
[ -f "$r/boot/vmlinuz-$abi" ] || die "no boot/vmlinuz-$abi in $image"

# Absolute paths in the headers point into /usr/src of an installed system.
mk=$r/usr/src/linux-headers-$abi/Makefile
[ -f "$mk" ] || die "no usr/src/linux-headers-$abi in linux-headers-$abi"
sed -i "s|include /usr/src/|include $root/usr/src/|" "$mk"
ln -sfn "$root/usr/src/linux-headers-$abi" "$r/lib/modules/$abi/build"
common=$(ls -d "$r"/usr/src/linux-headers-*-common* 2>/dev/null | head -n 1 || true)
[ -z "$common" ] || ln -sfn "$root/usr/src/${common##*/}" "$r/lib/modules/$abi/source"
depmod -b "$r" "$abi"

mv "$r" "$root"
touch "$root/.complete"
echo "$root"
