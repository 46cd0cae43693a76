#!/bin/bash
# Builds libpeerdirect (library, tools, tests; -Werror) inside a Debian root
# with each compiler given, then runs its host tests there with the last one.
# This checks the library against that root's glibc and libfabric without
# touching the host's.
#
#   scripts/user-stack.sh ROOT [CC...]  (default: gcc-15 where the root has it, then gcc)
#
# Prints "ok build CC" or "FAIL build CC" per compiler, then the tests' KTAP,
# then whether the library built on this host (its libfabric headers) takes
# the dma-buf path in the root and on the host exactly where the libfabric
# loaded there has FI_MR_DMABUF, and, last, the totals line "N passed, N failed" (a failed build counts as
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
	scripts/packaging/debian/libpeerdirect1.symbols scripts/nccl-plugin-gpu.sh |
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

# One binary for every libfabric: pd-xfer (the library linked in) built
# here, against the host's headers (Debian 12: libfabric 1.17), run in the
# root against its libfabric and on the host against the host's.  shm
# without CMA copies from the mapping, so it takes a dma-buf wherever the
# loaded libfabric has FI_MR_DMABUF (1.20), and is mapped, saying why,
# where it has not.  A memfd stands in for the dma-buf.
xfer_shm() {	# RUNNER... PD_XFER: rank 0's output, both ranks' status
	local port=$((20000 + RANDOM % 20000)) args
	args=(--rendezvous "127.0.0.1:$port" --memory memfd --provider shm --size 1M --iters 2)
	local rc
	"$@" --rank 1 "${args[@]}" >/dev/null 2>&1 &
	"$@" --rank 0 "${args[@]}" 2>&1
	rc=$?
	wait $! || rc=1
	return $rc
}
same_binary_part() {
	local b=$src/build/user-stack-host out lf want host_lf
	mkdir -p "$src/build"
	if ! make -C "$src/user" -s -j2 O="$b" "$b/pd-xfer" >"$b.log" 2>&1; then
		echo "not ok host-built pd-xfer # build failed (log: $b.log)"
		fail=$((fail + 1))
		return
	fi
	cp "$b/pd-xfer" "$root$dst/pd-xfer-host-built"
	lf=$(in_root dpkg-query -W -f='${Version}' libfabric1)
	host_lf=$(dpkg-query -W -f='${Version}' libfabric1)
	if dpkg --compare-versions "$lf" ge 1.20; then
		want='path dmabuf: FI_MR_DMABUF on shm'
	else
		want='path mapped: dmabuf: libfabric [0-9.]+ \(loaded at run time\) without FI_MR_DMABUF \(needs 1\.20\)'
	fi
	out=$(xfer_shm in_root env FI_SHM_DISABLE_CMA=1 "$dst/pd-xfer-host-built")
	if [ $? = 0 ] && grep -qE "^rank 0 provider shm memory memfd size [0-9]+ $want" <<<"$out" &&
	   grep -q 'summary: ok 2 error 0 mismatch 0' <<<"$out"; then
		echo "ok host-built (libfabric $host_lf headers) library in the root: libfabric $lf, ${want%%:*}"
		pass=$((pass + 1))
	else
		echo "not ok host-built library in the root (libfabric $lf): want '$want'"
		echo "$out" | sed 's/^/# /'
		fail=$((fail + 1))
	fi
	if dpkg --compare-versions "$host_lf" ge 1.20; then
		want='path dmabuf: FI_MR_DMABUF on shm'
	else
		want='path mapped: dmabuf: libfabric [0-9.]+ \(loaded at run time\) without FI_MR_DMABUF \(needs 1\.20\)'
	fi
	out=$(xfer_shm env FI_SHM_DISABLE_CMA=1 "$b/pd-xfer")
	if [ $? = 0 ] && grep -qE "^rank 0 provider shm memory memfd size [0-9]+ $want" <<<"$out" &&
	   grep -q 'summary: ok 2 error 0 mismatch 0' <<<"$out"; then
		echo "ok the same binary on the host: libfabric $host_lf, ${want%%:*}, and why"
		pass=$((pass + 1))
	else
		echo "not ok the same binary on the host (libfabric $host_lf): want '$want'"
		echo "$out" | sed 's/^/# /'
		fail=$((fail + 1))
	fi
}
same_binary_part
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
