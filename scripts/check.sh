#!/bin/bash
# `make check`: every test peerdirect has, ending with "N passed, N failed".
#
# Stages (each timed):
#   static    checkpatch --strict and sparse on the kernel code
#   user      libpeerdirect host tests (no VM), plain and under ASan/UBSan
#   stock     selftests in a VM on Debian's installed kernel
#   shim      libpeerdirect in a VM: two processes exchange dma-buf memory
#             over tcp (netns) and verbs (rxe), revocation mid-stream
#   unplug    PCI device loss driven through QEMU's monitor, checked from
#             both sides (the guest's holders, the host's backing file)
#   debug     the same selftests and unplug on the debug kernel (KASAN, lockdep,
#             kmemleak, UBSAN, DMABUF_DEBUG, MOVE_NOTIFY, P2PDMA), which is
#             built once from linux-source-6.1 and cached outside the tree
#
# PD_CHECK_STAGES="static user stock debug" selects stages.  Each VM run
# also fails if the kernel logged a BUG, WARNING, KASAN, lockdep, UBSAN or
# kmemleak report (scripts/vm-scan-log.sh).
set -uo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top" || exit 1
stages=${PD_CHECK_STAGES:-static user stock unplug shim debug}
out=$top/build/check
mkdir -p "$out"

total_pass=0
total_fail=0
total_skip=0
summary=()

add() {		# add STAGE PASS FAIL SKIP SECONDS
	total_pass=$((total_pass + $2))
	total_fail=$((total_fail + $3))
	total_skip=$((total_skip + $4))
	summary+=("$(printf '%-8s %4d passed %3d failed %3d skipped %5ds' "$1" "$2" "$3" "$4" "$5")")
}

# Sums the kselftest "# Totals:" lines of a log (error counts as failure).
totals() {
	awk '/# Totals: pass:/ {
		for (i = 1; i <= NF; i++) {
			split($i, kv, ":")
			if (kv[1] == "pass") p += kv[2]
			if (kv[1] == "fail" || kv[1] == "error" || kv[1] == "xpass") f += kv[2]
			if (kv[1] == "skip") s += kv[2]
		}
	} END { printf "%d %d %d\n", p, f, s }' "$1"
}

stage_static() {
	local t0=$SECONDS p=0 f=0
	if make -s checkpatch > "$out/checkpatch.log" 2>&1; then
		p=$((p + 1)); echo "ok checkpatch --strict"
	else
		f=$((f + 1)); echo "not ok checkpatch --strict"; tail -n 20 "$out/checkpatch.log"
	fi
	if make -s sparse > "$out/sparse.log" 2>&1; then
		p=$((p + 1)); echo "ok sparse"
	else
		f=$((f + 1)); echo "not ok sparse"; grep -E 'warning|error' "$out/sparse.log" | head -n 20
	fi
	add static $p $f 0 $((SECONDS - t0))
}

# user_tests NAME TARGET: one run of the library's host tests.
user_tests() {
	local name=$1 target=$2 t0=$SECONDS line p f
	make -C user "$target" > "$out/$name.log" 2>&1
	line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$out/$name.log" | tail -n 1)
	if [ -z "$line" ]; then
		tail -n 30 "$out/$name.log"
		add "$name" 0 1 0 $((SECONDS - t0))
		return
	fi
	p=$(echo "$line" | awk '{print $1}')
	f=$(echo "$line" | awk '{print $3}')
	grep -E '^not ok' "$out/$name.log" | head -n 20
	add "$name" "$p" "$f" 0 $((SECONDS - t0))
}

# The host tests, then again under AddressSanitizer and UBSan.
stage_user() {
	user_tests user check
	user_tests user-asan check-asan
}

# A clean kernel log is a test of its own (WARN, KASAN, lockdep, kmemleak...):
# vm-run.sh exits 3 for a kernel report, 124/125 for a timeout or crash.
vm_log_clean() {	# vm_log_clean NAME RC
	if [ "$2" = 3 ] || [ "$2" -ge 124 ]; then
		echo "not ok $1: VM exit $2 (kernel report, crash or timeout)"
		tail -n 40 "$out/$1.out"
		return 1
	fi
	return 0
}

# vm_result NAME RC T0: the KTAP totals of a VM run plus its clean-log test.
vm_result() {
	local name=$1 rc=$2 t0=$3 p f s
	read -r p f s <<< "$(totals "$out/$name.log")"
	grep -aE '^not ok|#  FAIL' "$out/$name.log" | head -n 30
	vm_log_clean "$name" "$rc" && p=$((p + 1)) || f=$((f + 1))
	[ "$p$f" = 00 ] && f=1
	add "$name" "$p" "$f" "$s" $((SECONDS - t0))
}

# vm_selftests NAME KERNEL MODDIR BACKEND: run selftests/run-in-vm.sh in a VM.
vm_selftests() {
	local name=$1 kernel=$2 moddir=$3 backend=$4 t0=$SECONDS payload
	local extra=()
	[ "$backend" = bar ] && extra=(--ivshmem 32M --ivshmem 32M)
	payload=$(mktemp -d)
	mkdir -p "$payload/selftests"
	cp build/selftests/* "$payload/selftests/"
	cp selftests/run-in-vm.sh "$payload/"
	scripts/vm-run.sh --kernel "$kernel" --timeout 1500 \
		--ko "$moddir/kmod/peerdirect.ko" \
		--ko "$moddir/selftests/importer/pd_test_importer.ko" \
		--payload "$payload" --log "$out/$name.log" "${extra[@]}" \
		-- run-in-vm.sh "$backend" > "$out/$name.out" 2>&1
	vm_result "$name" $? "$t0"
	rm -rf "$payload"
}

stage_stock() {
	vm_selftests stock-sim stock "$top" sim
	vm_selftests stock-bar stock "$top" bar
}

# vm_unplug NAME KERNEL MODDIR: device loss through QEMU's monitor while a
# process holds an export, a mapping and a pinned importer; afterwards the
# host checks the BAR's backing file holds exactly what the guest wrote.
vm_unplug() {
	local name=$1 kernel=$2 moddir=$3 t0=$SECONDS work rc p f s ready off i
	work=$(mktemp -d)
	mkdir -p "$work/payload/selftests"
	cp build/selftests/unplug "$work/payload/selftests/"
	cp selftests/unplug-in-vm.sh "$work/payload/"
	: > "$out/$name.log"
	scripts/vm-run.sh --kernel "$kernel" --timeout 300 \
		--ko "$moddir/kmod/peerdirect.ko" \
		--ko "$moddir/selftests/importer/pd_test_importer.ko" \
		--ivshmem 32M --ivshmem 32M --ivshmem-dir "$work/hbm" --qmp "$work/qmp.sock" \
		--payload "$work/payload" --log "$out/$name.log" \
		-- unplug-in-vm.sh > "$out/$name.out" 2>&1 &
	local vm=$!
	ready=
	for i in $(seq 1 600); do
		ready=$(grep -a -m1 -o 'PD_UNPLUG_READY offset=[0-9-]* length=[0-9]*' "$out/$name.log" || true)
		[ -n "$ready" ] && break
		kill -0 "$vm" 2>/dev/null || break
		sleep 0.5
	done
	p=0
	f=0
	if [ -n "$ready" ]; then
		scripts/vm-qmp.sh --wait-event DEVICE_DELETED --timeout 60 "$work/qmp.sock" \
			'{"execute":"device_del","arguments":{"id":"ivshmem0"}}' > "$out/$name.qmp" 2>&1 ||
			echo "# device_del: $(cat "$out/$name.qmp")"
	fi
	wait "$vm"
	rc=$?
	read -r p f s <<< "$(totals "$out/$name.log")"
	grep -aE '^not ok' "$out/$name.log" | head -n 20
	off=$(echo "$ready" | sed -n 's/.*offset=\([0-9]*\).*/\1/p')
	if [ -n "$off" ] && [ -f "$work/hbm/hbm0" ]; then
		for i in $(seq 0 4095); do printf 'peerdirect%05d\n' "$i"; done > "$work/expected"
		if dd if="$work/hbm/hbm0" of="$work/got" bs=64K iflag=skip_bytes count=1 \
			skip="$off" status=none && cmp -s "$work/expected" "$work/got"; then
			p=$((p + 1)); echo "ok host sees the guest's bytes at BAR offset $off"
		else
			f=$((f + 1)); echo "not ok host sees the guest's bytes at BAR offset $off"
		fi
	else
		f=$((f + 1)); echo "not ok guest never reported ready (see $out/$name.out)"
	fi
	vm_log_clean "$name" "$rc" && p=$((p + 1)) || f=$((f + 1))
	rm -rf "$work"
	add "$name" "$p" "$f" "$s" $((SECONDS - t0))
}

# vm_shim NAME KERNEL MODDIR: libpeerdirect moving real dma-buf memory
# between two processes (selftests/shim-in-vm.sh).
vm_shim() {
	local name=$1 kernel=$2 moddir=$3 t0=$SECONDS payload
	payload=$(mktemp -d)
	mkdir -p "$payload/bin"
	cp user/build/pd-xfer "$payload/bin/"
	cp selftests/shim-in-vm.sh "$payload/"
	scripts/vm-run.sh --kernel "$kernel" --timeout 900 \
		--ko "$moddir/kmod/peerdirect.ko" --payload "$payload" \
		--log "$out/$name.log" -- shim-in-vm.sh > "$out/$name.out" 2>&1
	vm_result "$name" $? "$t0"
	rm -rf "$payload"
}

stage_shim() {
	make -s -C user all > "$out/shim-build.log" 2>&1
	if [ ! -x user/build/pd-xfer ]; then
		echo "not ok shim: user/build/pd-xfer was not built"
		add shim 0 1 0 0
		return
	fi
	vm_shim stock-shim stock "$top"
}

stage_unplug() {
	vm_unplug stock-unplug stock "$top"
}

stage_debug() {
	local t0=$SECONDS kdir mod
	if ! kdir=$(scripts/debug-kernel.sh); then
		add debug 0 1 0 $((SECONDS - t0))
		return
	fi
	echo "debug kernel: $kdir ($(cat "$kdir/.build-seconds" 2>/dev/null || echo cached) s to build)"
	# Out-of-tree objects are per kernel: build a copy of the sources.
	mod=$top/build/debug-modules
	rm -rf "$mod"
	mkdir -p "$mod/selftests"
	cp -r Kbuild kmod uapi "$mod/"
	cp -r selftests/importer "$mod/selftests/"
	find "$mod" -name '*.o' -o -name '*.ko' -o -name '*.mod*' -o -name '.*.cmd' | xargs rm -f
	if ! make -s -C "$kdir" M="$mod" modules > "$out/debug-build.log" 2>&1; then
		tail -n 20 "$out/debug-build.log"
		add debug 0 1 0 $((SECONDS - t0))
		return
	fi
	vm_selftests debug-sim debug "$mod" sim
	vm_selftests debug-bar debug "$mod" bar
	vm_unplug debug-unplug debug "$mod"
	[ -x user/build/pd-xfer ] && vm_shim debug-shim debug "$mod"
}

t_all=$SECONDS
echo "peerdirect check: building"
if ! make -s modules selftests > "$out/build.log" 2>&1; then
	tail -n 40 "$out/build.log"
	echo "build failed"
	echo "0 passed, 1 failed"
	exit 1
fi
for s in $stages; do
	echo "== stage $s"
	"stage_$s"
done

echo
echo "stage      results                              time"
printf '%s\n' "${summary[@]}"
echo "total time $((SECONDS - t_all)) s; logs in build/check/"
echo "$total_pass passed, $total_fail failed, $total_skip skipped"
[ "$total_fail" = 0 ]
