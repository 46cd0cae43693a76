#!/bin/bash
# A Debian root made with debootstrap for a newer stack (default: unstable):
# its kernel image, modules and headers, its compiler and its libfabric and
# rdma-core.  Newer suites' kernel-header tools link against that suite's
# libc, so modules and libraries for that stack are built inside it.
#
#   scripts/stack-root.sh [--suite SUITE] [--path] [--versions]
#
#   (no option)  create or refresh the root if needed, print its directory
#   --path       print the directory only (no network, no build)
#   --versions   print "package version" lines of what the root holds
#
# Cached in $PEERDIRECT_CACHE (default /var/cache/peerdirect)/root-SUITE.
# The packages' versions are looked up at run time: a root older than a day
# is refreshed with apt, and anything newer the suite serves is installed.
# Exit status 4 means the suite could not be reached and no root exists: the
# caller counts that tier as skipped and says why.
set -euo pipefail

suite=sid
mode=build
while [ $# -gt 0 ]; do
	case "$1" in
	--suite) suite=${2:?}; shift 2 ;;
	--path) mode=path; shift ;;
	--versions) mode=versions; shift ;;
	*) echo "usage: $0 [--suite SUITE] [--path|--versions]" >&2; exit 2 ;;
	esac
done

cache_root=${PEERDIRECT_CACHE:-/var/cache/peerdirect}
dir=$cache_root/root-$suite
mirror=${PD_DEBIAN_MIRROR:-http://deb.debian.org/debian}
max_age=${PD_ROOT_MAX_AGE:-86400}

# What the tiers need inside the root: the kernel (image, modules, headers),
# a compiler, libfabric and rdma-core (libraries, providers, tools), and the
# programs the VM image carries.
pkgs=(
	linux-image-amd64 linux-headers-amd64
	build-essential pkg-config make kmod xz-utils
	libfabric-dev libfabric-bin rdma-core ibverbs-providers ibverbs-utils
	libibverbs-dev librdmacm-dev perftest
	iproute2 bash busybox-static procps
)
# The versions that key the cached root (and so the tier's results).
key_pkgs=(linux-image-amd64 libfabric-dev libibverbs-dev gcc)

versions() {
	local p v
	for p in "${key_pkgs[@]}"; do
		v=$(chroot "$dir" dpkg-query -W -f='${Version}' "$p" 2>/dev/null || echo none)
		echo "$p $v"
	done
	v=$(ls "$dir"/boot/vmlinuz-* 2>/dev/null | sed 's|.*/vmlinuz-||' | sort -V | tail -n 1)
	echo "kernel-release ${v:-none}"
}

case "$mode" in
path) echo "$dir"; exit 0 ;;
versions)
	[ -f "$dir/.done" ] || { echo "stack-root: $dir not built" >&2; exit 1; }
	versions
	exit 0
	;;
esac

mkdir -p "$cache_root"
exec 9>"$cache_root/.root-$suite.lock"
flock 9

apt_in_root() {
	chroot "$dir" env DEBIAN_FRONTEND=noninteractive LC_ALL=C apt-get \
		-o Acquire::Check-Valid-Until=false -o Dpkg::Use-Pty=0 -q -y "$@"
}

# Daemons must not start inside the root while packages install.
no_daemons() {
	printf '#!/bin/sh\nexit 101\n' > "$dir/usr/sbin/policy-rc.d"
	chmod 755 "$dir/usr/sbin/policy-rc.d"
}

# gcc 15 beside the suite's default compiler, while the suite still has it
# (scripts/user-stack.sh builds with every gcc-N it finds).
extra_compilers() {
	if chroot "$dir" apt-cache show gcc-15 > /dev/null 2>&1; then
		apt_in_root install --no-install-recommends gcc-15
	else
		echo "stack-root: $suite has no gcc-15 any more; building with its default gcc only"
	fi
}

log=$cache_root/root-$suite.log
if [ ! -f "$dir/.done" ]; then
	command -v debootstrap > /dev/null || {
		echo "stack-root: debootstrap missing (scripts/install-deps.sh)" >&2; exit 1; }
	if ! curl -fsS -m 30 -o /dev/null "$mirror/dists/$suite/Release"; then
		echo "stack-root: $mirror/dists/$suite/Release unreachable: no $suite root" >&2
		exit 4
	fi
	echo "stack-root: creating the $suite root in $dir (log: $log); a few minutes" >&2
	# A killed debootstrap can leave proc/sys mounted inside.
	grep -o " $dir/[^ ]*" /proc/mounts | sort -r | xargs -r -n1 umount -l 2>/dev/null || true
	rm -rf --one-file-system "$dir"
	start=$(date +%s)
	# The mirror answered: a failure from here on is a failure, not a skip.
	if ! debootstrap --variant=minbase "$suite" "$dir" "$mirror" > "$log" 2>&1; then
		tail -n 20 "$log" >&2
		echo "stack-root: debootstrap $suite failed" >&2
		exit 1
	fi
	# Unstable's Release file is often past its Valid-Until date.
	printf 'Acquire::Check-Valid-Until "false";\n' > "$dir/etc/apt/apt.conf.d/99peerdirect"
	no_daemons
	if ! { apt_in_root update && apt_in_root install --no-install-recommends "${pkgs[@]}" &&
		extra_compilers; } >> "$log" 2>&1; then
		tail -n 20 "$log" >&2
		echo "stack-root: installing packages in the $suite root failed" >&2
		rm -rf --one-file-system "$dir"
		exit 1
	fi
	apt_in_root clean >> "$log" 2>&1 || true
	echo "$(( $(date +%s) - start ))" > "$dir/.build-seconds"
	touch "$dir/.done"
	versions > "$dir/.versions"
elif [ $(( $(date +%s) - $(stat -c %Y "$dir/.done") )) -gt "$max_age" ]; then
	# A day old: take whatever newer versions the suite serves now.  An
	# unreachable mirror keeps the cached root (its versions are printed).
	echo "stack-root: refreshing the $suite root" >&2
	no_daemons
	if { apt_in_root update && apt_in_root install --no-install-recommends "${pkgs[@]}" &&
		extra_compilers && apt_in_root upgrade; } >> "$log" 2>&1; then
		apt_in_root autoremove --purge >> "$log" 2>&1 || true
		apt_in_root clean >> "$log" 2>&1 || true
		touch "$dir/.done"
		versions > "$dir/.versions"
	else
		echo "stack-root: refresh failed (see $log); using the cached root" >&2
	fi
fi
echo "$dir"
