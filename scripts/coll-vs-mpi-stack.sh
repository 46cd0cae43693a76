#!/bin/bash
# SPDX-License-Identifier: MIT
# scripts/coll-vs-mpi.sh on the newest stack: libfabric 2.x and Open MPI
# from Debian unstable, in a copy of the stack tier's root
# (scripts/stack-root.sh) with openmpi-bin and libopenmpi-dev added, so
# that the tier's own root stays as CI builds it.  This tree (HEAD's
# files, not uncommitted ones) is built inside.
#
#   scripts/coll-vs-mpi-stack.sh [coll-vs-mpi.sh arguments]
#
# The copy is cached as $PEERDIRECT_CACHE/root-sid-mpi and made again when
# the stack root is newer.  Needs root (chroot) and, on first use, the
# network (apt).  Runs under stack-root.sh's lock, so that a refresh of
# the root cannot run meanwhile.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "coll-vs-mpi-stack: needs root (chroot, mounts)" >&2; exit 2; }
cache=${PEERDIRECT_CACHE:-/var/cache/peerdirect}
root=$(scripts/stack-root.sh --suite sid)
mpiroot=$cache/root-sid-mpi
exec 9>"$cache/.root-sid.lock"
flock 9
# mpicc is a link through /etc/alternatives: test the root's own file.
if [ ! -f "$mpiroot/.made" ] || [ ! -e "$mpiroot/usr/bin/mpicc.openmpi" ] ||
   [ "$root/var/lib/dpkg/status" -nt "$mpiroot/.made" ]; then
	trap 'rm -rf --one-file-system "$mpiroot.new"' EXIT
	rm -rf --one-file-system "$mpiroot.new"
	cp -a --one-file-system "$root" "$mpiroot.new"
	cp /etc/resolv.conf "$mpiroot.new/etc/resolv.conf"
	scripts/in-root.sh "$mpiroot.new" sh -c 'apt-get update -qq &&
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openmpi-bin libopenmpi-dev' \
		> "$cache/root-sid-mpi.log" 2>&1 ||
		{ echo "coll-vs-mpi-stack: apt in the root failed (log: $cache/root-sid-mpi.log)" >&2; exit 1; }
	touch "$mpiroot.new/.made"
	rm -rf --one-file-system "$mpiroot"
	mv "$mpiroot.new" "$mpiroot"
	trap - EXIT
fi
dst=/var/tmp/pd-coll-vs-mpi
rm -rf --one-file-system "${mpiroot:?}$dst"
mkdir -p "$mpiroot$dst"
git archive HEAD | tar -C "$mpiroot$dst" -x
# The arguments go through as positional parameters, never re-quoted.
# shellcheck disable=SC2016
scripts/in-root.sh "$mpiroot" sh -c 'cd "$1" && shift && export PD_COMMIT="$0" && exec scripts/coll-vs-mpi.sh "$@"' \
	"$(git rev-parse --short HEAD)" "$dst" "$@"
