#!/bin/bash
# Builds libpeerdirect (library, tools, tests; -Werror) inside a Debian root
# with each compiler given, then runs its host tests there with the last one.
# This checks the library against that root's glibc and libfabric without
# touching the host's.
#
#   scripts/user-stack.sh ROOT [CC...]  (default: gcc-15 where the root has it, then gcc)
#
# Prints "ok build CC" or "FAIL build CC" per compiler, then the tests' KTAP
# and, last, the totals line "N passed, N failed" (a failed build counts as
# one failure).  Exit status is non-zero on any failure.
# The copy is fresh each run: ROOT/var/tmp/pd-user holds only user/, uapi/,
# build/kselftest and the Debian symbols file (test_abi checks the map's
# version nodes against it), so nothing else of the tree can leak into the
# build.
set -uo pipefail
root=${1:?usage: user-stack.sh ROOT [CC...]}
shift
ccs=("$@")
if [ ${#ccs[@]} = 0 ]; then
	[ ! -x "$root/usr/bin/gcc-15" ] || ccs=(gcc-15)
	ccs+=(gcc)
fi
src=$(cd "$(dirname "$0")/.." && pwd)
dst=/var/tmp/pd-user
in_root() { "$src/scripts/in-root.sh" "$root" "$@"; }

[ -f "$src/build/kselftest/kselftest_harness.h" ] ||
	"$src/scripts/kselftest-headers.sh" "$src/build/kselftest" || exit 1
rm -rf "$root$dst"
mkdir -p "$root$dst/build"
tar -C "$src" -c --exclude='user/build*' user uapi build/kselftest \
	scripts/packaging/debian/libpeerdirect1.symbols |
	tar -C "$root$dst" -x || exit 1

failed=0
for cc in "${ccs[@]}"; do
	if in_root make -C "$dst/user" -j2 O="build-$cc" CC="$cc" all >"$root$dst/build-$cc.log" 2>&1; then
		echo "ok build $cc"
	else
		echo "FAIL build $cc (log: $root$dst/build-$cc.log)"
		tail -n 30 "$root$dst/build-$cc.log"
		failed=$((failed + 1))
	fi
done

cc=${ccs[-1]}
out=$(in_root make -C "$dst/user" O="build-$cc" CC="$cc" check 2>&1)
re='^[0-9]+ passed, [0-9]+ failed$'
echo "$out" | grep -vE "$re"
totals=$(echo "$out" | grep -E "$re" | tail -1)
[ -n "$totals" ] || totals="0 passed, 1 failed"	# the run itself broke
pass=${totals%% passed*}
fail=${totals#*, }
fail=$((${fail%% failed} + failed))
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
