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
#             installed on the host next to 6.1 (apt keeps its package cache;
#             an older backports kernel from an earlier run is purged).  On a
#             machine that boots, GRUB would offer it: run make check on
#             build machines, as CI does.
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

# Installs the image and headers of ABI from the named suite only: never
# `-t SUITE`, which would also move linux-image-amd64 to that suite.
install_abi() {	# install_abi ABI SUITE
	[ -f "/boot/vmlinuz-$1" ] && [ -d "/lib/modules/$1/build" ] && return 0
	echo "tiers: installing linux-image-$1 and linux-headers-$1 from $2" >&2
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
		-o DPkg::Lock::Timeout=600 "linux-image-$1/$2" "linux-headers-$1/$2" > /dev/null ||
		die "installing linux-image-$1 from $2 failed"
}

# Older backports kernels an earlier run installed: one tier kernel at a time
# on the host, not a /boot that fills up.
prune_lts() {	# prune_lts KEEP_ABI
	local old
	old=$(dpkg-query -W -f='${Package}\n' 'linux-image-*+deb12-amd64' 'linux-headers-*+deb12-amd64' 2>/dev/null |
		grep -v -- "-$1\$" || true)
	[ -z "$old" ] && return 0
	echo "tiers: removing older backports kernels: $old" >&2
	# shellcheck disable=SC2086  # package names
	DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq -o DPkg::Lock::Timeout=600 $old > /dev/null ||
		echo "tiers: could not remove $old" >&2
}

# Debian 12's own kernel: the newest 6.1 ABI bookworm (with its security
# and point-release updates) serves, not whatever the metapackage says.
prepare_stable() {
	local abi ver
	abi=$(meta_abi skip 'backports')
	[ -n "$abi" ] || die "apt knows no Debian 12 kernel (scripts/install-deps.sh)"
	install_abi "$abi" "$(apt-cache madison "linux-image-$abi" | awk -F' [|] ' 'NR == 1 { split($3, a, " "); print a[2] }' | cut -d/ -f1)"
	ver=$(dpkg-query -W -f='${Version}' "linux-image-$abi")
	emit "$(label_of "$abi")" "$abi" "/lib/modules/$abi/build" "" \
		"bookworm linux-image-$abi $ver" --kernel stock --kver "$abi"
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

# Debian 12's backports suite installs directly on the host.
prepare_lts() {
	local list=/etc/apt/sources.list.d/peerdirect-backports.list abi ver
	[ -f "$list" ] || echo "deb $mirror bookworm-backports main" > "$list"
	apt-get update -qq -o Dir::Etc::sourcelist="$list" -o Dir::Etc::sourceparts=- \
		-o APT::Get::List-Cleanup=0 > /dev/null 2>&1 ||
		echo "tiers: apt-get update of bookworm-backports failed" >&2
	abi=$(meta_abi match 'backports')
	if [ -z "$abi" ]; then
		# Unreachable now: use what an earlier run installed, if anything.
		abi=$(ls /boot/vmlinuz-*+deb12-amd64 2>/dev/null | sed 's|.*/vmlinuz-||' | sort -V | tail -n 1)
		[ -n "$abi" ] || { echo "tiers: bookworm-backports unreachable and no backports kernel installed" >&2; exit 4; }
		echo "tiers: bookworm-backports unreachable; using the installed $abi" >&2
	fi
	install_abi "$abi" bookworm-backports
	prune_lts "$abi"
	ver=$(dpkg-query -W -f='${Version}' "linux-image-$abi")
	emit "$(label_of "$abi")" "$abi" "/lib/modules/$abi/build" "" \
		"bookworm-backports linux-image-$abi $ver" --kernel stock --kver "$abi"
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
