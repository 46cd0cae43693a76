#!/bin/bash
# `make check`: every test peerdirect has, ending with "N passed, N failed".
#
# Stages (each timed):
#   static    checkpatch --strict and sparse on the kernel code
#   user      libpeerdirect host tests (no VM), plain, under ASan/UBSan and
#             under TSan, against Debian 12's gcc and libfabric
#   stack     the same host tests inside a Debian unstable root (newer gcc,
#             glibc and libfabric 2.x with FI_MR_DMABUF), scripts/user-stack.sh
#   admin     what cluster admins install and read: man pages (mandoc -Tlint),
#             the Debian packages (lintian, contents, apt install into a clean
#             Debian 12 root, a pkg-config sample), DKMS against every
#             installed kernel's headers and every kernel in the cache, with
#             its module loaded in a VM; `make demo` reaching its end
#   tiers     per kernel tier (scripts/tiers.sh: Debian 12's 6.1, our debug
#             6.1, the backports LTS, unstable's newest), resolved at run time:
#               build   the module and test importer, W=1, no warnings;
#                       every PCI ID table in the module's aliases
#                       (scripts/check-devtables.sh)
#               sim     all selftests, simulated HBM
#               bar     all selftests, ivshmem PCI BARs; pdctl bind/unbind,
#                       devices.conf's udev helper, topo and ps
#               unplug  PCI device loss driven through QEMU's monitor
#               shim    libpeerdirect moving module dma-bufs between two
#                       processes over tcp (netns) and verbs (rxe)
#               doctor  pdctl doctor's verdicts: module missing, rxe bounce,
#                       veth mapped, FI_MR_DMABUF or not, permission denied
#               coll    pd-coll's collectives on module dma-bufs (simulated
#                       and an ivshmem BAR), 2, 4 and 8 ranks, by --np,
#                       mpirun and Slurm's variables, every element checked
#             Every tier VM has two CPUs.  The debug tier (KASAN, lockdep,
#             kmemleak) gives races and fuzzing the longest budgets, runs
#             shim and coll on fewer bytes, skips coll's launchers and 8
#             ranks and the doctor part, each with its reason
#             (Documentation/testing.md).
#             A tier whose suite cannot be reached is counted as skipped,
#             with the reason, never as passed.
#
# First and last, scripts/host-state.sh records the host's kernels (dpkg -l
# 'linux-image*'), /boot and apt's sources: any difference is a failure
# ("host kernels and /boot unchanged").
#
# PD_CHECK_STAGES="static user stack tiers admin", PD_CHECK_TIERS="stable debug lts
# newest" and PD_CHECK_PARTS="build sim bar unplug shim doctor coll" select.  Each VM run
# also fails if the kernel logged a BUG, WARNING, KASAN, lockdep, UBSAN or
# kmemleak report (scripts/vm-scan-log.sh).  build/check/results.tsv keeps
# one row per result for scripts/support-matrix.sh.
set -uo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top" || exit 1
stages=${PD_CHECK_STAGES:-static user stack tiers admin}
tiers=${PD_CHECK_TIERS:-$(scripts/tiers.sh list)}
parts=${PD_CHECK_PARTS:-build sim bar unplug shim doctor coll}
out=$top/build/check
rm -rf "$out"
mkdir -p "$out"
results=$out/results.tsv
printf 'name\ttier\tkernel\tsource\tpassed\tfailed\tskipped\tseconds\n' > "$results"

total_pass=0
total_fail=0
total_skip=0
summary=()
failed_parts=()
# The tier being run (scripts/tiers.sh prepare sets the TIER_* variables).
TIER_LABEL=host
TIER_KVER=-
TIER_SOURCE="Debian 12 host"

add() {		# add NAME PASS FAIL SKIP SECONDS
	# A count that came back empty or garbled is a failure, never a pass.
	local n
	for n in "$2" "$3" "$4"; do
		[[ "$n" =~ ^[0-9]+$ ]] || { echo "not ok $1: no result counts ('$2' '$3' '$4')"; set -- "$1" 0 1 0 "$5"; break; }
	done
	total_pass=$((total_pass + $2))
	total_fail=$((total_fail + $3))
	total_skip=$((total_skip + $4))
	[ "$3" = 0 ] || failed_parts+=("$1")
	summary+=("$(printf '%-16s %4d passed %3d failed %3d skipped %5ds' "$1" "$2" "$3" "$4" "$5")")
	printf '%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\n' "$1" "$TIER_LABEL" "$TIER_KVER" \
		"$TIER_SOURCE" "$2" "$3" "$4" "$5" >> "$results"
}
# Sums the kselftest "# Totals:" lines of a log (error counts as failure);
# a missing log sums to zero (the caller then counts the run as failed).
totals() {
	[ -f "$1" ] || { echo "0 0 0"; return; }
	awk '/# Totals: pass:/ {
		for (i = 1; i <= NF; i++) {
			split($i, kv, ":")
			if (kv[1] == "pass") p += kv[2]
			if (kv[1] == "fail" || kv[1] == "error" || kv[1] == "xpass") f += kv[2]
			if (kv[1] == "skip") s += kv[2]
		}
	} END { printf "%d %d %d\n", p, f, s }' "$1"
}

# Every failed part again, with its failing tests and what vm-run said of
# its kernel (a crash, a timeout, a report that survived vm-scan-log.sh's
# allow-list), just above the closing line: a CI log cut in the middle
# still says what failed.  A part with no such lines shows its log's tail.
failure_digest() {
	local n log shown vm
	[ "${#failed_parts[@]}" -gt 0 ] || return 0
	echo "failed parts (repeated from above; logs in build/check/):"
	for n in "${failed_parts[@]}"; do
		echo "  $n"
		shown=
		if [ -f "$out/$n.log" ]; then
			# Each failed test with the file:line reports (TH_LOG,
			# failed EXPECTs) its harness printed since its RUN line.
			shown=$(awk '/^# +RUN |^ok |^# selftest:/ { n = 0 }
				/^# [^ ]+\.c:[0-9]+:/ { buf[n++ % 6] = $0 }
				/^not ok/ { for (i = (n > 6 ? n - 6 : 0); i < n; i++) print buf[i % 6]
					print; n = 0 }' "$out/$n.log" | head -n 30)
		fi
		if [ -f "$out/$n.out" ]; then
			vm=$(sed -n '/^vm-run: \(kernel reported a problem\|VM killed\|VM ended\)/,/^vm-run: rc=/p' \
				"$out/$n.out" | head -n 25)
			[ -z "$vm" ] || shown+=${shown:+$'\n'}$vm
		fi
		if [ -z "$shown" ]; then
			for log in "$out/$n.log" "$out/tier-$n.log" "$out/$n.out"; do
				[ -f "$log" ] || continue
				shown=$(tail -n 5 "$log")
				break
			done
		fi
		[ -z "$shown" ] || printf '%s\n' "$shown" | sed 's/^/    /'
	done
	return 0
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
	if scripts/check-gfp.sh . > "$out/check-gfp.log" 2>&1; then
		p=$((p + 1)); echo "ok kernel allocations on a caller's behalf are memcg-charged"
	else
		f=$((f + 1)); echo "not ok kernel allocations on a caller's behalf are memcg-charged"; grep "^not ok" "$out/check-gfp.log"
	fi
	if scripts/check-params-doc.sh . > "$out/check-params-doc.log" 2>&1; then
		p=$((p + 1)); echo "ok every module parameter is documented, and only those"
	else
		f=$((f + 1)); echo "not ok every module parameter is documented, and only those"; grep "^not ok" "$out/check-params-doc.log"
	fi
	if scripts/check-compat-notify.sh . > "$out/check-compat-notify.log" 2>&1; then
		p=$((p + 1)); echo "ok the pin rule is the safe one where the build cannot tell (compat_notify.h)"
	else
		f=$((f + 1)); echo "not ok the pin rule is the safe one where the build cannot tell (compat_notify.h)"; grep "^not ok" "$out/check-compat-notify.log"
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

# The host tests, then again under AddressSanitizer and UBSan, and under
# ThreadSanitizer for the data races the threaded tests can reach.
stage_user() {
	user_tests user check
	user_tests user-asan check-asan
	user_tests user-tsan check-tsan
}

# counted NAME LOG COMMAND...: run a script that ends with "N passed, N
# failed[, N skipped]" and add its totals (no totals line is one failure).
counted() {
	local name=$1 log=$2 t0=$SECONDS line p f s
	shift 2
	"$@" > "$log" 2>&1
	line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1)
	grep -E '^not ok' "$log" | head -n 20
	if [ -z "$line" ]; then
		echo "not ok $name: no totals (see $log)"; tail -n 20 "$log"
		add "$name" 0 1 0 $((SECONDS - t0))
		return
	fi
	read -r p f s <<< "$(awk '{ print $1, $3, ($5 == "" ? 0 : $5) }' <<<"$line")"
	add "$name" "$p" "$f" "$s" $((SECONDS - t0))
}

stage_admin() {
	wait_prefetch all
	counted man-lint "$out/man-lint.log" make -s man-lint
	counted packages "$out/packages.log" scripts/package-test.sh
	counted dkms "$out/dkms.log" scripts/dkms-test.sh
	counted demo "$out/demo.log" scripts/demo-test.sh
}

# The library built and tested in the unstable root (scripts/user-stack.sh),
# which also leaves the root's pd-xfer for the newest tier's shim part.
stage_stack() {
	local t0=$SECONDS rc=0 root line p f
	root=$(scripts/stack-root.sh --suite sid 2> "$out/stack-root.log") || rc=$?
	if [ "$rc" = 4 ]; then
		echo "ok stack # SKIP $(tail -n 1 "$out/stack-root.log")"
		add stack 0 0 1 $((SECONDS - t0))
		return
	elif [ "$rc" != 0 ]; then
		echo "not ok stack: no unstable root"; tail -n 20 "$out/stack-root.log"
		add stack 0 1 0 $((SECONDS - t0))
		return
	fi
	TIER_LABEL=sid TIER_SOURCE="sid: $(scripts/stack-root.sh --versions | tr '\n' ' ')"
	scripts/user-stack.sh "$root" > "$out/stack.log" 2>&1
	stack_built=1
	line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$out/stack.log" | tail -n 1)
	grep -E '^not ok' "$out/stack.log" | head -n 20
	if [ -z "$line" ]; then
		tail -n 30 "$out/stack.log"
		add stack 0 1 0 $((SECONDS - t0))
	else
		p=$(awk '{print $1}' <<<"$line")
		f=$(awk '{print $3}' <<<"$line")
		add stack "$p" "$f" 0 $((SECONDS - t0))
	fi
	TIER_LABEL=host TIER_SOURCE="Debian 12 host"
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
	# A guest script that failed (or never ran: vm-run.sh exits 2 before
	# booting) without a failing test line still fails the part.
	if [ "$rc" != 0 ] && [ "$f" = 0 ]; then
		echo "not ok $name: guest script exit $rc with no failing test (see $out/$name.out)"
		tail -n 10 "$out/$name.out"
		f=1
	fi
	add "$name" "$p" "$f" "$s" $((SECONDS - t0))
}

# tier_vm ARGS...: scripts/vm-run.sh for the current tier.  Two guest CPUs,
# so per-CPU state, IPIs and cross-CPU wakeups are exercised; they take
# turns on one host thread, because multi-threaded TCG is suspected of
# leaving a CPU on a stale translation of text the guest patches live
# (Documentation/testing.md).
tier_vm() {
	scripts/vm-run.sh "${TIER_VM[@]}" --smp 2 --tcg single "$@"
}

# vm_selftests NAME MODDIR BACKEND: run selftests/run-in-vm.sh in a VM of
# the current tier.
vm_selftests() {
	local name=$1 moddir=$2 backend=$3 t0=$SECONDS payload
	local extra=()
	# Behind bridges: a real sysfs reset (secondary bus reset) of the BAR.
	[ "$backend" = bar ] && extra=(--ivshmem 32M --ivshmem 32M --ivshmem-bridged)
	payload=$(mktemp -d)
	mkdir -p "$payload/selftests"
	cp build/selftests/* "$payload/selftests/"
	cp selftests/run-in-vm.sh kmod/60-peerdirect.rules "$payload/"
	# udevd for the stable names test (udevadm is udevd when called so).
	command -v udevadm > /dev/null && extra+=(--bin udevadm)
	tier_vm --timeout 1500 \
		--ko "$moddir/kmod/peerdirect.ko" \
		--ko "$moddir/selftests/importer/pd_test_importer.ko" \
		--payload "$payload" --log "$out/$name.log" "${extra[@]}" \
		-- run-in-vm.sh "$backend" > "$out/$name.out" 2>&1
	vm_result "$name" $? "$t0"
	rm -rf "$payload"
}

# vm_prefetch NAME MODDIR: selftests/prefetch-in-vm.sh, a non-prefetchable
# BAR2 (QEMU's std VGA) mapped uncached, an ivshmem one write-combining.
vm_prefetch() {
	local name=$1 moddir=$2 t0=$SECONDS payload
	payload=$(mktemp -d)
	cp selftests/prefetch-in-vm.sh "$payload/"
	tier_vm --timeout 300 --ko "$moddir/kmod/peerdirect.ko" --ivshmem 32M \
		--qemu-arg -device --qemu-arg VGA \
		--payload "$payload" --log "$out/$name.log" -- prefetch-in-vm.sh > "$out/$name.out" 2>&1
	vm_result "$name" $? "$t0"
	rm -rf "$payload"
}

# vm_bind NAME MODDIR: selftests/bind-in-vm.sh (pdctl bind/unbind, the
# devices.conf helper, topo and ps) with two ivshmem functions that the
# module, loaded without bind_ivshmem, binds only when asked.
vm_bind() {
	local name=$1 moddir=$2 t0=$SECONDS payload
	payload=$(mktemp -d)
	mkdir -p "$payload/bin"
	cp build/selftests/pdctl "$payload/bin/"
	cp kmod/peerdirect-bind selftests/bind-in-vm.sh "$payload/"
	tier_vm --timeout 600 --bin setpriv --mod pci-stub \
		--ko "$moddir/kmod/peerdirect.ko" --ivshmem 32M --ivshmem 32M \
		--payload "$payload" --log "$out/$name.log" -- bind-in-vm.sh > "$out/$name.out" 2>&1
	vm_result "$name" $? "$t0"
	rm -rf "$payload"
}

# vm_unplug NAME MODDIR: device loss through QEMU's monitor while a process
# holds an export, a mapping and a pinned importer; afterwards the host
# checks the BAR's backing file holds exactly what the guest wrote.
vm_unplug() {
	local name=$1 moddir=$2 t0=$SECONDS work rc p f s ready off i hotadd=fail
	work=$(mktemp -d)
	mkdir -p "$work/payload/selftests"
	cp build/selftests/unplug build/selftests/zeroing "$work/payload/selftests/"
	cp selftests/unplug-in-vm.sh "$work/payload/"
	: > "$out/$name.log"
	tier_vm --timeout 600 \
		--ko "$moddir/kmod/peerdirect.ko" \
		--ko "$moddir/selftests/importer/pd_test_importer.ko" \
		--ivshmem 32M --ivshmem 32M --ivshmem 1G --ivshmem-dir "$work/hbm" \
		--qmp "$work/qmp.sock" --payload "$work/payload" --log "$out/$name.log" \
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
		# The guest holds ivshmem1's BAR while its removal waits, then
		# asks for a hot-add (selftests/unplug-in-vm.sh).
		for i in $(seq 1 600); do
			grep -aq PD_HOTADD_READY "$out/$name.log" && break
			kill -0 "$vm" 2>/dev/null || break
			sleep 0.5
		done
		hotadd=fail
		if grep -aq PD_HOTADD_READY "$out/$name.log" && {
			scripts/vm-qmp.sh "$work/qmp.sock" '{"execute":"object-add","arguments":{"qom-type":"memory-backend-file","id":"hbm9","mem-path":"'"$work/hbm/hbm9"'","size":33554432,"share":true}}' &&
			scripts/vm-qmp.sh "$work/qmp.sock" '{"execute":"device_add","arguments":{"driver":"ivshmem-plain","memdev":"hbm9","id":"ivshmem9"}}'
		} >> "$out/$name.qmp" 2>&1; then
			hotadd=ok
		fi
	fi
	wait "$vm"
	rc=$?
	read -r p f s <<< "$(totals "$out/$name.log")"
	if [ "${hotadd:-fail}" = ok ]; then
		p=$((p + 1)); echo "ok host hot-added an ivshmem device through QEMU's monitor"
	else
		f=$((f + 1)); echo "not ok host hot-added an ivshmem device through QEMU's monitor ($(tail -n 2 "$out/$name.qmp" 2>/dev/null | tr '\n' ' '))"
	fi
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

# vm_user_part NAME MODDIR UBUILD SCRIPT [VM-ARGS...]: a guest script that
# drives the module through libpeerdirect's tools, built for the tier's
# userspace (the host's, or the root's for a root tier) in UBUILD: pd-xfer
# (static in the library) for selftests/shim-in-vm.sh, the shared pdctl and
# libpeerdirect.so.1 for selftests/doctor-in-vm.sh, pd-coll for
# selftests/coll-in-vm.sh.
vm_user_part() {
	local name=$1 moddir=$2 ubuild=$3 script=$4 t0=$SECONDS payload f need
	shift 4
	case "$script" in
	shim-in-vm.sh) need=(pd-xfer pd-bench tests/test_device tests/test_net_plugin_device
		libnccl-net-peerdirect.so libpeerdirect.so.1) ;;
	doctor-in-vm.sh) need=(pdctl libpeerdirect.so.1) ;;
	*) need=(pd-coll) ;;
	esac
	for f in "${need[@]}"; do
		if [ ! -e "$ubuild/$f" ]; then
			echo "not ok $name: $ubuild/$f was not built"
			add "$name" 0 1 0 0
			return
		fi
	done
	payload=$(mktemp -d)
	mkdir -p "$payload/bin" "$payload/lib"
	for f in "${need[@]}"; do
		case "$f" in
		*.so*) cp -L "$ubuild/$f" "$payload/lib/" ;;
		*) cp "$ubuild/$f" "$payload/bin/" ;;
		esac
	done
	cp "selftests/$script" "$payload/"
	tier_vm --timeout 900 --bin setpriv "$@" \
		--ko "$moddir/kmod/peerdirect.ko" --payload "$payload" \
		--log "$out/$name.log" -- "$script" > "$out/$name.out" 2>&1
	vm_result "$name" $? "$t0"
	rm -rf "$payload"
}

# The coll part's VM: two CPUs for up to 8 ranks, an ivshmem BAR, and Open
# MPI (mpirun, orted and the plugins it loads) when the tier's userspace
# has it; the guest script skips the mpirun test otherwise.
vm_coll() {
	local name=$1 moddir=$2 ubuild=$3 mpi=() d
	# Open MPI by its own names (mpirun may be MPICH's alternative); a root
	# without orted (Open MPI 5, MPICH) skips the test in the guest.
	if [ -e "${TIER_ROOT:-}/usr/bin/orterun" ] && [ -e "${TIER_ROOT:-}/usr/bin/orted" ] &&
		[ -d "${TIER_ROOT:-}/usr/lib/x86_64-linux-gnu/openmpi" ]; then
		mpi=(--bin orterun --bin orted)
		for d in /usr/lib/x86_64-linux-gnu/openmpi /usr/share/openmpi /etc/openmpi \
			/usr/lib/x86_64-linux-gnu/pmix2 /usr/lib/x86_64-linux-gnu/pmix; do
			[ ! -e "${TIER_ROOT:-}$d" ] || mpi+=(--tree "$d")
		done
	fi
	vm_user_part "$name" "$moddir" "$ubuild" coll-in-vm.sh --mem 2048 --ivshmem 64M \
		${mpi[@]+"${mpi[@]}"}
}

# tier_modules DIR: build the module and test importer for the current tier
# in DIR (out-of-tree objects are per kernel), W=1; any warning fails.
tier_modules() {
	local dir=$1 name=$TIER_LABEL-build t0=$SECONDS log=$out/$TIER_LABEL-build.log rc=0 ver
	# The copy has no user/Makefile to read the version from (as DKMS).
	ver=$(make -s -C user version)
	rm -rf "$dir"
	mkdir -p "$dir/selftests"
	cp -r Kbuild kmod uapi "$dir/"
	cp -r selftests/importer "$dir/selftests/"
	find "$dir" \( -name '*.o' -o -name '*.ko' -o -name '*.mod*' -o -name '.*.cmd' \) -delete
	if [ -n "$TIER_ROOT" ]; then
		scripts/in-root.sh "$TIER_ROOT" make -C "$TIER_KDIR" M="${dir#"$TIER_ROOT"}" W=1 PD_VERSION="$ver" modules \
			> "$log" 2>&1 || rc=$?
	else
		make -C "$TIER_KDIR" M="$dir" W=1 PD_VERSION="$ver" modules > "$log" 2>&1 || rc=$?
	fi
	if [ "$rc" = 0 ] && ! grep -qiE 'warning:|error:' "$log"; then
		echo "ok $name: W=1 build against $TIER_KVER is clean"
		add "$name" 1 0 0 $((SECONDS - t0))
		# Every PCI ID table reaches modules.alias (udev autoloading).
		counted "$TIER_LABEL-devtables" "$out/$TIER_LABEL-devtables.log" \
			scripts/check-devtables.sh "$dir" "$dir/kmod/peerdirect.ko"
		return 0
	fi
	echo "not ok $name: W=1 build against $TIER_KVER"
	grep -iE 'warning:|error:' "$log" | head -n 20
	add "$name" 0 1 0 $((SECONDS - t0))
	return 1
}

# One kernel tier: prepare it (or skip it, saying why), then every part.
run_tier() {
	local tier=$1 t0=$SECONDS env rc=0 mod ubuild
	env=$(scripts/tiers.sh prepare "$tier" 2> "$out/tier-$tier.log") || rc=$?
	TIER_LABEL=$tier TIER_KVER=- TIER_SOURCE=-
	if [ "$rc" = 4 ]; then
		echo "ok tier $tier # SKIP $(tail -n 1 "$out/tier-$tier.log")"
		add "$tier" 0 0 1 $((SECONDS - t0))
		return
	elif [ "$rc" != 0 ]; then
		echo "not ok tier $tier: cannot prepare it"; tail -n 20 "$out/tier-$tier.log"
		add "$tier" 0 1 0 $((SECONDS - t0))
		return
	fi
	eval "$env"
	echo "== tier $TIER_LABEL: $TIER_KVER ($TIER_SOURCE)"
	if [ -n "$TIER_ROOT" ]; then
		mod=$TIER_ROOT/var/tmp/peerdirect-$TIER_LABEL
		ubuild=$TIER_ROOT/var/tmp/pd-user/user/build-gcc
		# This checkout's library, never one an earlier run left in the root.
		if [[ " $parts " == *" shim "* || " $parts " == *" doctor "* || " $parts " == *" coll "* ]] &&
			[ -z "${stack_built:-}" ]; then
			rm -f "$ubuild/pd-xfer" "$ubuild/pd-bench" "$ubuild/pdctl" "$ubuild/pd-coll" \
				"$ubuild/libpeerdirect.so.1" "$ubuild/tests/test_device" \
				"$ubuild/tests/test_net_plugin_device" "$ubuild/libnccl-net-peerdirect.so"
			scripts/user-stack.sh "$TIER_ROOT" gcc > "$out/$TIER_LABEL-shim-build.log" 2>&1
			stack_built=1
		fi
	else
		mod=$top/build/tiers/$TIER_LABEL
		ubuild=$top/user/build
		[[ " $parts " != *" shim "* && " $parts " != *" doctor "* && " $parts " != *" coll "* ]] ||
			make -s -C user all build/tests/test_device > "$out/shim-build.log" 2>&1
	fi
	tier_modules "$mod" || return
	for part in $parts; do
		case "$part" in
		build) ;;
		sim) vm_selftests "$TIER_LABEL-$part" "$mod" "$part" ;;
		bar)
			vm_selftests "$TIER_LABEL-$part" "$mod" "$part"
			vm_bind "$TIER_LABEL-bind" "$mod"
			vm_prefetch "$TIER_LABEL-prefetch" "$mod" ;;
		unplug) vm_unplug "$TIER_LABEL-unplug" "$mod" ;;
		shim) vm_user_part "$TIER_LABEL-shim" "$mod" "$ubuild" shim-in-vm.sh ;;
		doctor)
			# The doctor's kernel side is device queries and rxe
			# refusing dma-buf MRs before any import: the stable
			# tiers run it; the debug tier's time goes to the
			# module's own paths under KASAN, lockdep and kmemleak.
			if [ "$tier" = debug ]; then
				echo "ok $TIER_LABEL-doctor # SKIP debug tier: the doctor reaches no module path that sim, bar and shim do not"
				add "$TIER_LABEL-doctor" 0 0 1 0
			else
				vm_user_part "$TIER_LABEL-doctor" "$mod" "$ubuild" doctor-in-vm.sh
			fi ;;
		coll) vm_coll "$TIER_LABEL-coll" "$mod" "$ubuild" ;;
		*) echo "not ok unknown part $part"; add "$part" 0 1 0 0 ;;
		esac
	done
	TIER_LABEL=host TIER_KVER=- TIER_SOURCE="Debian 12 host"
}

stage_tiers() {
	local tier
	wait_prefetch roots
	for tier in $tiers; do
		run_tier "$tier"
	done
}

t_all=$SECONDS
# The host's boot setup before anything runs: no stage may install, remove
# or touch a kernel, /boot (GRUB's config included) or apt's sources (the
# tiers unpack their kernels into /var/cache/peerdirect instead).  Compared
# at the end as one counted result.
scripts/host-state.sh > "$out/host-state.before" 2>&1
echo "peerdirect check: host kernels, /boot and apt sources recorded ($(grep -c . "$out/host-state.before") lines)"
# The debug kernel takes 15-25 minutes to build once: start it now (nice 19,
# it holds its own lock) so that it overlaps the stages before its tier.
if [[ " $stages " == *" tiers "* && " $tiers " == *" debug "* ]] &&
	[ ! -f "$(scripts/debug-kernel.sh --path)/.done" ]; then
	echo "peerdirect check: building the debug kernel in the background"
	scripts/debug-kernel.sh > "$out/debug-kernel.log" 2>&1 &
fi
echo "peerdirect check: building"
if ! make -s selftests > "$out/build.log" 2>&1; then
	tail -n 40 "$out/build.log"
	echo "build failed"
	echo "0 passed, 1 failed"
	exit 1
fi
# On a fresh machine the unstable root, the backports kernel and the clean
# Debian 12 root are about 700 s of downloading and unpacking, each made when
# its stage came.  Fetch them in the background, once the static stage is
# done (sparse takes the newest installed kernel headers: no backports kernel
# may arrive under it), while the host stages keep the CPUs busy.  Each
# script holds its own lock, so a stage that needs one before it is ready
# waits for it; the stages still prepare them as before (then a no-op) and
# report any failure themselves.  Two jobs: the tiers wait for the first
# (it runs apt on the host), only admin for the second.
prefetch_roots=
prefetch_clean=
start_prefetch() {
	local sid=n lts=n
	[ -z "${prefetch_started:-}" ] || return 0
	prefetch_started=1
	[[ " $stages " == *" stack "* ]] && sid=y
	if [[ " $stages " == *" tiers "* ]]; then
		[[ " $tiers " == *" newest "* ]] && sid=y
		[[ " $tiers " == *" lts "* ]] && lts=y
	fi
	if [ $sid = y ] || [ $lts = y ]; then
		(
			[ $sid = n ] || nice -n 10 scripts/stack-root.sh --suite sid > /dev/null || true
			[ $lts = n ] || nice -n 10 scripts/tiers.sh prepare lts > /dev/null || true
		) > "$out/prefetch-roots.log" 2>&1 &
		prefetch_roots=$!
	fi
	if [[ " $stages " == *" admin "* ]]; then
		nice -n 10 scripts/packaging/clean-root.sh --cache-only bookworm \
			> "$out/prefetch-clean-root.log" 2>&1 &
		prefetch_clean=$!
	fi
}
wait_prefetch() {	# wait_prefetch roots|all
	if [ -n "$prefetch_roots" ]; then
		wait "$prefetch_roots"
		prefetch_roots=
	fi
	if [ "$1" = all ] && [ -n "$prefetch_clean" ]; then
		wait "$prefetch_clean"
		prefetch_clean=
	fi
	return 0
}
# Never leave apt or dpkg running behind us, whatever ends the run.
trap 'wait_prefetch all' EXIT

for s in $stages; do
	[ "$s" = static ] || start_prefetch
	echo "== stage $s"
	"stage_$s"
done

# After the stages, and after the prefetch jobs (they run apt).
wait_prefetch all
t0=$SECONDS
scripts/host-state.sh > "$out/host-state.after" 2>&1
if diff -u "$out/host-state.before" "$out/host-state.after" > "$out/host-state.diff"; then
	echo "ok host kernels and /boot unchanged (dpkg -l 'linux-image*', /boot, /etc/apt/sources.list.d)"
	add host-state 1 0 0 $((SECONDS - t0))
else
	echo "not ok host kernels and /boot unchanged (build/check/host-state.diff)"
	sed -n '3,40p' "$out/host-state.diff"
	add host-state 0 1 0 $((SECONDS - t0))
	cp "$out/host-state.diff" "$out/host-state.log"
fi

echo
echo "result           results                              time"
printf '%s\n' "${summary[@]}"
echo
echo "per tier (kernel / userspace stack):"
awk -F'\t' 'NR > 1 { p[$2] += $5; f[$2] += $6; s[$2] += $7; t[$2] += $8
	if (!($2 in k)) { k[$2] = $3; order[++n] = $2 } }
	END { for (i = 1; i <= n; i++) { x = order[i]
		printf "  %-12s %-28s %4d passed %3d failed %3d skipped %5ds\n", x, k[x], p[x], f[x], s[x], t[x] } }' "$results"
skipped=$(awk -F'\t' 'NR > 1 && $1 == $2 && $7 > 0 { printf "%s ", $1 }' "$results")
[ -z "$skipped" ] || echo "TIERS SKIPPED (not tested, see build/check/tier-*.log): $skipped"
echo "total time $((SECONDS - t_all)) s; logs in build/check/"
scripts/support-matrix.sh "$out" > "$out/support-matrix.md" 2> "$out/support-matrix.err" ||
	echo "support-matrix: $(cat "$out/support-matrix.err")"
failure_digest
echo "$total_pass passed, $total_fail failed, $total_skip skipped"
[ "$total_fail" = 0 ]
