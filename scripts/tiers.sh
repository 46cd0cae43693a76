#!/bin/bash
# The kernel tiers `make check` runs on, resolved at run time: nothing here
# names a kernel version.
#
#   scripts/tiers.sh list            tier names, in the order check runs them
#   scripts/tiers.sh prepare TIER    make the tier available (install, build or
#                                    cache), then print its settings as shell
#                                    assignments:
#     TIER_LABEL    short name for results (k6.1, k6.1-debug, k6.12, k7.2...)
#     TIER_KVER     the kernel release (uname -r in the VM)
#     TIER_VM       vm-run.sh arguments that boot it
#     TIER_KDIR     kernel build directory for the module
#     TIER_ROOT     Debian root to build in (chroot), empty for the host
#     TIER_SOURCE   where it came from (suite and package version)
#
# Tiers:
#   stable    Debian 12's 6.1, the newest installed from bookworm
#   debug     our debug build of the same source (scripts/debug-kernel.sh)
#   lts       the newest kernel in bookworm-backports (6.12 LTS today),
#             read through an apt configuration of our own in the cache, so
#             the host's apt sources never name backports
#
# No tier installs a kernel: stable and lts are unpacked into
# /var/cache/peerdirect (scripts/kernel-cache.sh) and booted and built from
# there, so /boot, GRUB and dpkg's list of kernels stay as they were.
#   newest    the newest kernel in unstable, in a debootstrap'd root
#             (scripts/stack-root.sh): its headers need that suite's libc
#
# prepare exits 4 when a tier's suite cannot be reached and nothing is
# cached: check counts the tier as skipped and prints why.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
mirror=${PD_DEBIAN_MIRROR:-http://deb.debian.org/debian}

die() {
	echo "tiers: $*" >&2
	exit 1
}

emit() {	# emit LABEL KVER KDIR ROOT SOURCE VM...
	local label=$1 kver=$2 kdir=$3 root=$4 src=$5
	shift 5
	printf 'TIER_LABEL=%q\nTIER_KVER=%q\nTIER_KDIR=%q\nTIER_ROOT=%q\nTIER_SOURCE=%q\n' \
		"$label" "$kver" "$kdir" "$root" "$src"
	printf 'TIER_VM=(%s)\n' "$(printf '%q ' "$@")"
}

# k6.12 from 6.12.63+deb12-amd64: the upstream version, nothing Debian adds.
label_of() {
	local v=${1%%-*}
	v=${v%%+*}
	echo "k$(cut -d. -f1,2 <<<"$v")"
}

# The newest version of linux-image-amd64 that apt knows, in the suites
# that match (or not) REGEX, and the ABI release it depends on.
meta_abi() {	# meta_abi match|skip REGEX
	local v
	v=$(apt-cache madison linux-image-amd64 2>/dev/null |
		awk -F' [|] ' -v m="$1" -v re="$2" '(m == "match") == ($3 ~ re) { print $2 }' |
		tr -d ' ' | sort -V | tail -n 1)
	[ -n "$v" ] || return 0
	apt-cache show "linux-image-amd64=$v" 2>/dev/null |
		sed -n 's/^Depends:.*linux-image-\([^ ,]*-amd64\).*/\1/p' | head -n 1
}

# The private apt configuration for bookworm-backports: its own sources and
# lists, dpkg's status read-only.  apt-cache and apt-get download through it
# never change what the host's apt sees.
backports_apt() {
	local d=${PEERDIRECT_CACHE:-/var/cache/peerdirect}/apt-backports
	mkdir -p "$d/lists/partial" "$d/archives/partial"
	echo "deb $mirror bookworm-backports main" > "$d/sources.list"
	cat > "$d/apt.conf" <<-EOF
	Dir::Etc::SourceList "$d/sources.list";
	Dir::Etc::SourceParts "-";
	Dir::State::Lists "$d/lists";
	Dir::Cache "$d";
	Dir::Cache::archives "$d/archives";
	Dir::Cache::pkgcache "";
	Dir::Cache::srcpkgcache "";
	EOF
	echo "$d/apt.conf"
}

# Debian 12's own kernel: the newest 6.1 ABI bookworm (with its security
# and point-release updates) serves, not whatever the metapackage says.
prepare_stable() {
	local abi root ver
	abi=$(meta_abi skip 'backports')
	[ -n "$abi" ] || die "apt knows no Debian 12 kernel (apt-get update?)"
	root=$("$here/kernel-cache.sh" "$abi") || die "unpacking linux-image-$abi failed"
	ver=${root##*/kernel-"$abi"-}
	emit "$(label_of "$abi")" "$abi" "$root/lib/modules/$abi/build" "" \
		"bookworm linux-image-$abi $ver" --kernel stock --kver "$abi" --kroot "$root"
}

prepare_debug() {
	local kdir kver
	kdir=$("$here/debug-kernel.sh") || die "debug kernel build failed"
	# Everything is built in, so `make modules` never ran there: its
	# Module.symvers is vmlinux's, which modpost needs to resolve our imports.
	[ -f "$kdir/Module.symvers" ] || cp "$kdir/vmlinux.symvers" "$kdir/Module.symvers" ||
		die "no vmlinux.symvers in $kdir"
	kver=$(cat "$kdir/include/config/kernel.release")
	emit "$(label_of "$kver")-debug" "$kver" "$kdir" "" \
		"linux-source-6.1 $(dpkg-query -W -f='${Version}' linux-source-6.1) + scripts/debug-kernel.config" \
		--kernel debug
}

# Debian 12's backports suite: its headers' tools run on Debian 12.
prepare_lts() {
	local conf abi root ver
	conf=$(backports_apt)
	APT_CONFIG=$conf apt-get update -qq > /dev/null 2>&1 ||
		echo "tiers: apt-get update of bookworm-backports failed" >&2
	abi=$(APT_CONFIG=$conf meta_abi match 'backports')
	if [ -z "$abi" ]; then
		# Unreachable now: use what an earlier run unpacked, if anything.
		abi=$("$here/kernel-cache.sh" --list | sed -n 's|.*/kernel-\(.*+deb12-amd64\)-.*|\1|p' | sort -V | tail -n 1)
		[ -n "$abi" ] || { echo "tiers: bookworm-backports unreachable and no backports kernel cached" >&2; exit 4; }
		echo "tiers: bookworm-backports unreachable; using the cached $abi" >&2
	fi
	root=$(APT_CONFIG=$conf "$here/kernel-cache.sh" "$abi") || die "unpacking linux-image-$abi failed"
	ver=${root##*/kernel-"$abi"-}
	emit "$(label_of "$abi")" "$abi" "$root/lib/modules/$abi/build" "" \
		"bookworm-backports linux-image-$abi $ver" --kernel stock --kver "$abi" --kroot "$root"
}

prepare_newest() {
	local root rc=0 kver ver
	root=$("$here/stack-root.sh" --suite sid) || rc=$?
	[ "$rc" = 0 ] || exit "$rc"
	kver=$(ls "$root"/boot/vmlinuz-*-amd64 2>/dev/null | sed 's|.*/vmlinuz-||' | sort -V | tail -n 1)
	[ -n "$kver" ] && [ -d "$root/lib/modules/$kver/build" ] || die "no kernel with headers in $root"
	ver=$(chroot "$root" dpkg-query -W -f='${Version}' "linux-image-$kver")
	emit "$(label_of "$kver")" "$kver" "/lib/modules/$kver/build" "$root" \
		"sid linux-image-$kver $ver" --kernel stock --kver "$kver" --sysroot "$root"
}

case "${1:-}" in
# debug last: check starts its (cached) build in the background first.
list) echo "stable lts newest debug" ;;
prepare)
	case "${2:-}" in
	stable|debug|lts|newest) "prepare_$2" ;;
	*) die "prepare stable|debug|lts|newest" ;;
	esac
	;;
*) echo "usage: $0 list | prepare TIER" >&2; exit 2 ;;
esac
