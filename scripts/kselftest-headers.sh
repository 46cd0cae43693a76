#!/bin/bash
# Extract kselftest.h and kselftest_harness.h from Debian's linux-source-6.1
# into DIR (default build/kselftest).  They are build inputs, never committed.
set -euo pipefail
out=${1:-build/kselftest}
tarball=/usr/src/linux-source-6.1.tar.xz
[ -f "$out/kselftest_harness.h" ] && [ -f "$out/kselftest.h" ] && exit 0
[ -f "$tarball" ] || { echo "kselftest-headers: $tarball missing (scripts/install-deps.sh)" >&2; exit 1; }
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
top=$(basename "$tarball" .tar.xz)
tar -C "$tmp" -xf "$tarball" --wildcards \
	"$top/tools/testing/selftests/kselftest.h" \
	"$top/tools/testing/selftests/kselftest_harness.h" \
	"$top/scripts/checkpatch.pl" "$top/scripts/spelling.txt" "$top/scripts/const_structs.checkpatch"
cp "$tmp/$top/tools/testing/selftests/kselftest.h" "$tmp/$top/tools/testing/selftests/kselftest_harness.h" "$out/"
mkdir -p "$out/scripts"
cp "$tmp/$top/scripts/checkpatch.pl" "$tmp/$top/scripts/spelling.txt" "$tmp/$top/scripts/const_structs.checkpatch" "$out/scripts/"
