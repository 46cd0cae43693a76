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
# the stack root is newer.  Needs the network on first use (apt).
set -euo pipefail
cd "$(dirname "$0")/.."
cache=${PEERDIRECT_CACHE:-/var/cache/peerdirect}
root=$(scripts/stack-root.sh --suite sid)
mpiroot=$cache/root-sid-mpi
if [ ! -x "$mpiroot/usr/bin/mpicc" ] || [ "$root/var/lib/dpkg/status" -nt "$mpiroot/.made" ]; then
	rm -rf "$mpiroot.new"
	cp -a "$root" "$mpiroot.new"
	cp /etc/resolv.conf "$mpiroot.new/etc/resolv.conf"
	scripts/in-root.sh "$mpiroot.new" sh -c 'apt-get update -qq &&
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openmpi-bin libopenmpi-dev' \
		> "$cache/root-sid-mpi.log" 2>&1 ||
		{ echo "coll-vs-mpi-stack: apt in the root failed (log: $cache/root-sid-mpi.log)" >&2; exit 1; }
	touch "$mpiroot.new/.made"
	rm -rf "$mpiroot"
	mv "$mpiroot.new" "$mpiroot"
fi
dst=/var/tmp/pd-coll-vs-mpi
rm -rf "${mpiroot:?}$dst"
mkdir -p "$mpiroot$dst"
git archive HEAD | tar -C "$mpiroot$dst" -x
args=$(printf ' %q' "$@")
exec scripts/in-root.sh "$mpiroot" sh -c "cd $dst && PD_COMMIT=$(git rev-parse --short HEAD) scripts/coll-vs-mpi.sh$args"
