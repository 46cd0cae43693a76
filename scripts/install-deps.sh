#!/bin/bash
# Install every Debian package peerdirect needs to build, test and demo, on a
# fresh Debian 12.  Safe to re-run: packages already present are skipped.
set -euo pipefail

pkgs=(
	build-essential pkg-config git cpio gzip kmod util-linux socat
	# udevadm: the by-path and devices.conf rules tested in the VM
	udev
	# test_pdctl checks pdctl doctor --json with python3's json module
	python3
	# the debug kernel's source, checkpatch.pl and kselftest_harness.h.  The
	# kernels the tiers boot and build against are never installed on the
	# host: scripts/tiers.sh unpacks them into /var/cache/peerdirect.
	linux-source-6.1
	flex bison bc libelf-dev libssl-dev dwarves sparse
	qemu-system-x86 busybox-static bash iproute2
	# RDMA and libfabric, for the shim and the soft-RoCE tests
	rdma-core ibverbs-utils ibverbs-providers libibverbs-dev librdmacm-dev
	libfabric-dev libfabric-bin perftest
	valgrind libdrm-dev
	# the uapi, event, subscribe and list selftests again as i386 binaries
	# (-m32 -static): the kernel's compat ioctl path as real 32-bit code hits it
	gcc-multilib
	# pd-coll: mpirun launches and the Open MPI comparison; its plots
	openmpi-bin libopenmpi-dev gnuplot-nox
	# the newer-stack tiers: a Debian unstable root (scripts/stack-root.sh)
	debootstrap curl
	# packages, DKMS and man pages (scripts/packaging/deps.sh lists the same)
	dpkg-dev debhelper dh-dkms dkms fakeroot lintian mandoc man-db groff-base xz-utils
)

missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ "${#missing[@]}" -gt 0 ]; then
	echo "install-deps: installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq "${missing[@]}" >/dev/null
fi
