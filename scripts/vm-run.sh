#!/bin/bash
# Boot a throw-away QEMU (TCG) VM with a busybox initramfs and run one test
# script in it.
#
#   scripts/vm-run.sh [options] -- GUEST_SCRIPT [args...]
#
#   --kernel stock|debug  stock (default): Debian's newest /boot/vmlinuz-*-amd64
#                         ($KVER or $VMLINUZ override) plus its modules for
#                         veth, rxe, rdma_ucm, vgem; debug: the kernel of
#                         scripts/debug-kernel.sh (all built in, KASAN etc.)
#   --kver RELEASE        the stock kernel's release (same as $KVER); default:
#                         the one the first --ko was built for, if installed,
#                         else the newest
#   --kroot DIR           take the stock kernel and its modules from DIR, an
#                         unpacked image (scripts/kernel-cache.sh), programs
#                         from the host.  Without --kroot or --sysroot: the
#                         host's /boot if it has the kernel, else the cache
#   --sysroot DIR         take the stock kernel, its modules, and every
#                         program and library from the Debian root DIR
#                         (scripts/stack-root.sh) instead of the host
#   --ko FILE             out-of-tree module, put at /pd/ko/ (not loaded)
#   --payload DIR         copied to /pd/ (binaries, libraries, scripts)
#   --ivshmem SIZE        add an ivshmem-plain device (ivshmem0, ivshmem1...)
#                         whose BAR2 is backed by a host file; repeatable
#   --ivshmem-bridged     each ivshmem device behind a PCI bridge of its own:
#                         the bridge's secondary bus reset gives it a reset
#                         method, so /sys/bus/pci/devices/X/reset exists
#   --ivshmem-dir DIR     put the backing files there (hbm0, hbm1...) and keep
#                         them; else a temp dir, kept only if $VM_IVSHMEM_KEEP
#                         is set.  "IVSHMEMn=PATH" lines go to stderr.
#   --qmp SOCK            QMP server on a unix socket (see scripts/vm-qmp.sh)
#   --timeout SECS        guest script timeout (default 600); QEMU itself is
#                         killed 60 s later (debug kernel: 180 s)
#   --mem MB              guest memory (default 1024, debug kernel 2048)
#   --smp N               guest CPUs (default 1)
#   --tcg single|multi    how TCG runs several guest CPUs: in turn on one host
#                         thread (single, the default) or a thread each
#                         (multi: faster; suspected of leaving a CPU on a stale
#                         translation of text the guest patches live, seen as
#                         "Oops: int3"; see Documentation/testing.md).  Do not
#                         pass -accel through --qemu-arg
#   --machine TYPE        QEMU machine (default pc: ACPI PCI hot-unplug works)
#   --append ARGS         extra kernel command line
#   --log FILE            console log (default: a temp file, removed)
#   --allow-warn REGEX    kernel report lines to ignore (repeatable)
#   --no-kmemleak         skip the kmemleak scan after the script (debug
#                         kernel; it takes about 10 s)
#   --mod NAME            extra stock-kernel module to ship (with its deps)
#   --bin NAME            extra host program to ship (with its libraries)
#   --tree PATH           a host (or root) file or directory, shipped at the
#                         same path with every ELF file's libraries (plugin
#                         directories such as Open MPI's); repeatable
#   --qemu-arg ARG        extra QEMU argument (repeatable)
#   --keep                keep the temp dir (initramfs tree) for debugging
#
# GUEST_SCRIPT runs with /bin/bash in /pd; a relative path is taken inside
# /pd.  If it is not in the image but exists on the host, it is copied in.
# scripts/guest/*.sh are always shipped at /pd/lib/.
#
# Exit status: the guest script's; 124 on timeout; 125 if the VM died
# without reporting one (panic, crash); 3 if the script passed but the
# kernel logged a problem (BUG, WARNING, KASAN, lockdep, kmemleak...).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)

usage() {
	awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0" >&2
	exit 2
}

die() {
	echo "vm-run: $*" >&2
	exit 2
}

kernel=stock
sysroot=
kroot=
kos=()
payload=
ivshmem=()
ivshmem_dir=
ivshmem_bridged=0
qmp=
timeout=600
mem=
smp=1
tcg=single
machine=pc
append=
log=
allow_warn=()
extra_mods=()
extra_bins=()
extra_trees=()
qemu_extra=()
keep=0

while [ $# -gt 0 ]; do
	case "$1" in
	--kernel) kernel=${2:?}; shift 2 ;;
	--kver) KVER=${2:?}; shift 2 ;;
	--sysroot) sysroot=$(cd "${2:?}" && pwd); shift 2 ;;
	--kroot) kroot=$(cd "${2:?}" && pwd); shift 2 ;;
	--ko) kos+=("${2:?}"); shift 2 ;;
	--payload) payload=${2:?}; shift 2 ;;
	--ivshmem) ivshmem+=("${2:?}"); shift 2 ;;
	--ivshmem-dir) ivshmem_dir=${2:?}; shift 2 ;;
	--ivshmem-bridged) ivshmem_bridged=1; shift ;;
	--qmp) qmp=${2:?}; shift 2 ;;
	--timeout) timeout=${2:?}; shift 2 ;;
	--mem) mem=${2:?}; shift 2 ;;
	--smp) smp=${2:?}; shift 2 ;;
	--tcg) tcg=${2:?}; shift 2 ;;
	--machine) machine=${2:?}; shift 2 ;;
	--append) append=${2?}; shift 2 ;;
	--log) log=${2:?}; shift 2 ;;
	--allow-warn) allow_warn+=("${2:?}"); shift 2 ;;
	--mod) extra_mods+=("${2:?}"); shift 2 ;;
	--bin) extra_bins+=("${2:?}"); shift 2 ;;
	--tree) extra_trees+=("${2:?}"); shift 2 ;;
	--qemu-arg) qemu_extra+=("${2?}"); shift 2 ;;
	--no-kmemleak) append="$append pd.nokmemleak"; shift ;;
	--keep) keep=1; shift ;;
	-h|--help) usage ;;
	--) shift; break ;;
	*) usage ;;
	esac
done
[ $# -ge 1 ] || usage
script=$1
shift
[[ "$timeout" =~ ^[1-9][0-9]*$ ]] || die "--timeout wants seconds (> 0)"
case "$tcg" in single|multi) ;; *) die "--tcg wants single or multi, not '$tcg'" ;; esac
[ -z "$payload" ] || [ -d "$payload" ] || die "--payload $payload is not a directory"
for ko in ${kos[@]+"${kos[@]}"}; do
	[ -f "$ko" ] || die "--ko $ko: no such file"
done

# ---- kernel -------------------------------------------------------------
case "$kernel" in
stock)
	# Where the kernel comes from: --kroot, the --sysroot, the host's /boot,
	# else the kernels make check unpacked into the cache (never installed).
	[ -n "$kroot" ] || kroot=$sysroot
	if [ -z "$kroot" ] && [ -z "${VMLINUZ:-}" ]; then
		want=${KVER:-}
		if [ -z "$want" ] && [ ${#kos[@]} -gt 0 ]; then
			want=$(modinfo -F vermagic "${kos[0]}" 2>/dev/null | cut -d' ' -f1)
		fi
		if [ -n "$want" ] && [ -e "/boot/vmlinuz-$want" ]; then
			:
		elif [ -n "$want" ] && c=$(ls -d "${PEERDIRECT_CACHE:-/var/cache/peerdirect}/kernel-$want-"*/.complete 2>/dev/null | sort -V | tail -n 1) &&
			[ -n "$c" ]; then
			kroot=${c%/.complete}
		elif ! ls /boot/vmlinuz-*-amd64 > /dev/null 2>&1; then
			kroot=$("$here/kernel-cache.sh" --newest) ||
				die "no kernel: none in /boot and none unpacked (scripts/tiers.sh prepare stable)"
		fi
	fi
	# Without --kver: the kernel the first --ko was built for, when it is
	# there (make modules may take the running kernel's headers, which
	# need not be the newest vmlinuz).
	if [ -z "${KVER:-}" ] && [ -z "${VMLINUZ:-}" ] && [ ${#kos[@]} -gt 0 ]; then
		KVER=$(modinfo -F vermagic "${kos[0]}" 2>/dev/null | cut -d' ' -f1)
		[ -n "$KVER" ] && [ -e "$kroot/boot/vmlinuz-$KVER" ] || KVER=
	fi
	if [ -z "${KVER:-}" ]; then
		if [ -n "${VMLINUZ:-}" ]; then
			[[ "$VMLINUZ" == */vmlinuz-* ]] || die "set KVER too: cannot tell it from VMLINUZ=$VMLINUZ"
			KVER=${VMLINUZ##*/vmlinuz-}
		else
			# shellcheck disable=SC2012  # names are kernel versions
			KVER=$(ls "$kroot"/boot/vmlinuz-*-amd64 2>/dev/null | sed 's|.*/vmlinuz-||' | sort -V | tail -n 1)
		fi
	fi
	[ -n "$KVER" ] || die "no $kroot/boot/vmlinuz-*-amd64 (scripts/tiers.sh prepare stable unpacks one)"
	vmlinuz=${VMLINUZ:-$kroot/boot/vmlinuz-$KVER}
	moddir=$kroot/lib/modules/$KVER
	[ -d "$moddir" ] || die "$moddir missing"
	: "${mem:=1024}"
	margin=60
	;;
debug)
	kdir=$("$here/debug-kernel.sh" --path)
	[ -f "$kdir/.done" ] || die "debug kernel not built: $kdir/.done missing (run scripts/debug-kernel.sh)"
	vmlinuz=$kdir/arch/x86/boot/bzImage
	KVER=$(cat "$kdir/include/config/kernel.release")
	: "${mem:=2048}"
	margin=180
	;;
*) die "--kernel stock|debug" ;;
esac
[ -z "$sysroot$kroot" ] || [ "$kernel" = stock ] || die "--sysroot and --kroot go with --kernel stock"
# Host or root: where programs, libraries and the kernel's modules come from.
# A root's absolute symlinks and its loader only make sense inside it.
in_sys() {
	if [ -n "$sysroot" ]; then
		chroot "$sysroot" "$@"
	else
		"$@"
	fi
}
[ -r "$vmlinuz" ] || die "cannot read $vmlinuz"

# ---- temp space ---------------------------------------------------------
tmp=$(mktemp -d "${TMPDIR:-/tmp}/pd-vm.XXXXXX")
cleanup() {
	if [ "$keep" = 1 ]; then
		echo "vm-run: kept $tmp" >&2
	else
		rm -rf "$tmp" || true
	fi
}
# On INT/TERM stop QEMU too (through timeout, which passes the signal on).
pipe_pid=
on_signal() {
	[ ! -s "$tmp/qemu.pid" ] || kill "$(cat "$tmp/qemu.pid")" 2>/dev/null || true
	[ -z "$pipe_pid" ] || wait "$pipe_pid" || true
	exit "$1"
}
trap cleanup EXIT
trap 'on_signal 130' INT
trap 'on_signal 143' TERM

root=$tmp/root
mkdir -p "$root"/usr/bin "$root"/usr/sbin "$root"/usr/lib "$root"/usr/lib64 \
	"$root"/etc "$root"/proc "$root"/sys "$root"/dev "$root"/tmp "$root"/run \
	"$root"/root "$root"/pd/lib "$root"/pd/ko "$root"/var
# Same merged-/usr layout as the host, so library paths from ldd just work.
ln -s usr/bin "$root/bin"
ln -s usr/sbin "$root/sbin"
ln -s usr/lib "$root/lib"
ln -s usr/lib64 "$root/lib64"
ln -s ../run "$root/var/run"

# ---- files from the host ------------------------------------------------
# Forks are slow here (~10 ms each), so files are collected in lists and
# copied with one cp, libraries are found with one ldd call.
payload_abs=
[ -z "$payload" ] || payload_abs=$(cd "$payload" && pwd)

files=()  # host paths, copied to the same path in the image
elfs=()   # ELF files whose libraries are needed

# add_bin NAME [optional]: a host (or root) program.
add_bin() {
	local p=
	for d in /usr/sbin /usr/bin /sbin /bin; do
		if [ -x "$sysroot$d/$1" ]; then
			p=$d/$1
			break
		fi
	done
	if [ -z "$p" ]; then
		[ "${2:-}" = optional ] && return 0
		die "$1 not found on the host (scripts/install-deps.sh)"
	fi
	files+=("$p")
	elfs+=("$p")
}

is_elf() {
	local magic
	LC_ALL=C read -r -N 4 magic < "$1" 2>/dev/null || return 1
	[ "$magic" = $'\x7fELF' ]
}

for b in bash ip rdma kmod modprobe insmod rmmod lsmod modinfo depmod timeout \
	ibv_devices ibv_devinfo fi_info fi_pingpong ib_write_bw; do
	add_bin "$b"
done
for b in ib_write_lat ib_read_bw ib_read_lat ib_send_bw ib_send_lat rping; do
	add_bin "$b" optional
done
for b in ${extra_bins[@]+"${extra_bins[@]}"}; do
	add_bin "$b"
done

for t in ${extra_trees[@]+"${extra_trees[@]}"}; do
	[[ "$t" == /* ]] || die "--tree $t: an absolute path"
	[ -e "$sysroot$t" ] || die "--tree $t: not found on the host"
	while IFS= read -r -d '' f; do
		[ -e "$f" ] || continue	# a dangling link
		files+=("${f#"$sysroot"}")
		if is_elf "$f"; then
			elfs+=("${f#"$sysroot"}")
		fi
	done < <(find "$sysroot$t" \( -type f -o -type l \) -print0)
done

# libibverbs loads its provider by name from its config directory;
# libfabric 2.x may load some providers as plugins from its own directory.
for f in "$sysroot"/usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav*.so \
	"$sysroot"/usr/lib/x86_64-linux-gnu/libfabric/*.so; do
	[ -e "$f" ] || continue
	files+=("${f#"$sysroot"}")
	elfs+=("${f#"$sysroot"}")
done
[ -e "$sysroot/etc/libibverbs.d/rxe.driver" ] ||
	die "librxe provider missing (apt-get install ibverbs-providers)"
files+=(/etc/libibverbs.d/rxe.driver)

# Payload binaries and libraries: their libraries come from the host,
# except those the payload ships itself (found via LD_LIBRARY_PATH).
ldpath=
guest_ldpath=
if [ -n "$payload" ]; then
	while IFS= read -r d; do
		ldpath=${ldpath:+$ldpath:}$payload_abs/$d
		guest_ldpath=${guest_ldpath:+$guest_ldpath:}/pd/$d
	done < <(cd "$payload_abs" && find . -name '*.so*' -type f -printf '%h\n' | sed 's|^\./||; s|^\.$||' | sort -u)
	while IFS= read -r -d '' f; do
		if is_elf "$f"; then
			elfs+=("$f")
		fi
	done < <(find "$payload_abs" -type f \( -perm -u+x -o -name '*.so*' \) -print0)
fi

# ldd costs ~50 ms a file here; kmod's six tools are one binary.  A root's
# ldd runs inside it, so payload files are staged there for the lookup.
sys_elfs=()
pay_elfs=()
for f in "${elfs[@]}"; do
	if [ -n "$payload_abs" ] && [[ "$f" == "$payload_abs"/* ]]; then
		pay_elfs+=("$f")
	else
		sys_elfs+=("$f")
	fi
done
mapfile -t sys_elfs < <(in_sys readlink -f "${sys_elfs[@]}" | sort -u)
if [ -z "$sysroot" ]; then
	ldd_out=$(LD_LIBRARY_PATH=$ldpath ldd "${sys_elfs[@]}" ${pay_elfs[@]+"${pay_elfs[@]}"} 2>&1 || true)
else
	stage=$(mktemp -d "$sysroot/tmp/pd-ldd.XXXXXX")
	trap 'rm -rf "$stage"; cleanup' EXIT
	[ -z "$payload_abs" ] || cp -a "$payload_abs/." "$stage/"
	staged=()
	for f in ${pay_elfs[@]+"${pay_elfs[@]}"}; do
		staged+=("${stage#"$sysroot"}/${f#"$payload_abs"/}")
	done
	ldd_out=$(chroot "$sysroot" env LD_LIBRARY_PATH="${ldpath//$payload_abs/${stage#"$sysroot"}}" \
		ldd "${sys_elfs[@]}" ${staged[@]+"${staged[@]}"} 2>&1 || true)
	ldd_out=${ldd_out//${stage#"$sysroot"}/$payload_abs}
fi
if grep -q 'not found' <<<"$ldd_out"; then
	echo "vm-run: warning: missing libraries:" >&2
	grep 'not found' <<<"$ldd_out" | sort -u >&2
fi
while IFS= read -r lib; do
	if [ -n "$payload_abs" ] && [[ "$lib" == "$payload_abs"/* ]]; then
		continue
	fi
	files+=("$lib")
done < <(awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^\/[^:]*$/) print $i }' <<<"$ldd_out" | sort -u)

# Copied dereferenced: library links can go through /etc/alternatives, and
# kmod's tools work as copies (they look at argv[0]).  /lib/x and /usr/lib/x
# are one file on a merged-/usr host and in the image: name it once.
for i in "${!files[@]}"; do
	f=${files[$i]}
	for d in bin sbin lib lib64; do
		if [[ "$f" == /$d/* ]] && [ "/$d" -ef "/usr/$d" ]; then
			files[$i]=/usr$f
		fi
	done
done
mapfile -t files < <(printf '%s\n' "${files[@]}" | sort -u)
if [ -z "$sysroot" ]; then
	cp -L --parents "${files[@]}" "$root/"
else
	# Resolve links inside the root, then copy each file to the path asked for.
	mapfile -t real < <(chroot "$sysroot" readlink -f "${files[@]}")
	for i in "${!files[@]}"; do
		mkdir -p "$root$(dirname "${files[$i]}")"
		cp "$sysroot${real[$i]}" "$root${files[$i]}"
	done
fi

# Busybox for the rest; an applet never shadows a real program.
bb=$(command -v busybox) || die "busybox missing (apt-get install busybox-static)"
cp "$bb" "$root/usr/bin/busybox"
# shellcheck disable=SC2016  # perl code
"$bb" --list | PD_ROOT=$root perl -ne 'chomp; my $r = $ENV{PD_ROOT};
	symlink("busybox", "$r/usr/bin/$_")
		unless -e "$r/usr/bin/$_" || -e "$r/usr/sbin/$_" || -l "$r/usr/sbin/$_";'

printf 'root:x:0:0:root:/root:/bin/bash\n' > "$root/etc/passwd"
printf 'root:x:0:\n' > "$root/etc/group"
printf '127.0.0.1 localhost\n' > "$root/etc/hosts"

# ---- kernel modules -------------------------------------------------------
if [ "$kernel" = stock ]; then
	mods=(veth rdma_rxe rdma_ucm ib_umad vgem drm drm_shmem_helper)
	mods+=(${extra_mods[@]+"${extra_mods[@]}"})
	# rxe pulls crc32 in through the crypto API where it is a module (6.1);
	# later kernels build it in.  Any other missing module is an error.
	modprobe -d "$kroot/" -S "$KVER" -n crc32_generic 2>/dev/null && mods+=(crc32_generic)
	deps=$(modprobe -d "$kroot/" -S "$KVER" --show-depends -a "${mods[@]}") ||
		die "a module of ${mods[*]} is missing for $KVER"
	# Paths relative to the root the modules come from ("/" for the host).
	mapfile -t kos_host < <(awk -v r="$kroot" '$1 == "insmod" {
		p = substr($2, length(r) + 1); sub(/^\/+/, "", p); print p }' <<<"$deps" | sort -u)
	(cd "$kroot/" && cp --parents "${kos_host[@]}" "$root/")
	gmoddir=/lib/modules/$KVER
	for f in modules.order modules.builtin modules.builtin.modinfo; do
		[ ! -f "$moddir/$f" ] || cp "$moddir/$f" "$root$gmoddir/$f"
	done
	depmod -b "$root" "$KVER"
else
	# Everything is built in; modprobe still wants modules.builtin to say so.
	mkdir -p "$root/lib/modules/$KVER"
	if [ -f "$kdir/modules.builtin" ]; then
		cp "$kdir/modules.builtin" "$root/lib/modules/$KVER/"
	elif [ -f "$kdir/modules.builtin.modinfo" ]; then
		tr '\0' '\n' < "$kdir/modules.builtin.modinfo" | sed -n 's/^\([^.]*\)\.file=/\1 /p' |
			awk '{ print "kernel/" $2 ".ko" }' | sort -u > "$root/lib/modules/$KVER/modules.builtin"
	fi
	[ ! -f "$kdir/modules.builtin.modinfo" ] || cp "$kdir/modules.builtin.modinfo" "$root/lib/modules/$KVER/"
	touch "$root/lib/modules/$KVER/modules.order"
	depmod -b "$root" "$KVER" 2>/dev/null || true
fi

# ---- payload ------------------------------------------------------------
cp "$here"/guest/*.sh "$root/pd/lib/"
[ ${#kos[@]} -eq 0 ] || cp "${kos[@]}" "$root/pd/ko/"
[ -z "$payload" ] || cp -a "$payload_abs/." "$root/pd/"

case "$script" in
/*) guest_script=$script ;;
*) guest_script=/pd/$script ;;
esac
if [ ! -e "$root$guest_script" ]; then
	[ -f "$script" ] || die "$script: not in the payload and not a host file"
	mkdir -p "$root/pd/.vm-script"
	cp "$script" "$root/pd/.vm-script/"
	guest_script=/pd/.vm-script/${script##*/}
fi

# ---- init -----------------------------------------------------------------
cp "$here/vm-init.sh" "$root/init"
chmod 755 "$root/init"
cp "$here/vm-scan-log.sh" "$root/etc/pd-vm-scan-log.sh"
printf 'PD_TIMEOUT=%s\n' "$timeout" > "$root/etc/pd-vm.conf"
printf '%s\n' ${allow_warn[@]+"${allow_warn[@]}"} > "$root/etc/pd-vm-scan-allow"
{
	echo '#!/bin/bash'
	echo 'export PATH=/pd/bin:/pd:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'
	echo 'export HOME=/root TERM=dumb'
	[ -z "$guest_ldpath" ] || printf 'export LD_LIBRARY_PATH=%q\n' "$guest_ldpath"
	echo 'cd /pd'
	printf 'exec /bin/bash'
	printf ' %q' "$guest_script" "$@"
	printf '\n'
} > "$root/etc/pd-run.sh"

initrd=$tmp/initrd.gz
(cd "$root" && find . -print0 | cpio --null -o -H newc -R 0:0 --quiet) | gzip -1 > "$initrd"

# ---- QEMU -----------------------------------------------------------------
qemu=(qemu-system-x86_64 -machine "$machine" -accel "tcg,thread=$tcg" -m "$mem" -smp "$smp"
	-kernel "$vmlinuz" -initrd "$initrd"
	-append "console=ttyS0 panic=-1 loglevel=5 printk.time=1 $append"
	-nographic -no-reboot -nic none -vga none -serial stdio -monitor none)

if [ ${#ivshmem[@]} -gt 0 ]; then
	if [ -n "$ivshmem_dir" ]; then
		mkdir -p "$ivshmem_dir"
		hbmdir=$(cd "$ivshmem_dir" && pwd)
	elif [ -n "${VM_IVSHMEM_KEEP:-}" ]; then
		hbmdir=$(mktemp -d "${TMPDIR:-/tmp}/pd-hbm.XXXXXX")
	else
		hbmdir=$tmp/hbm
		mkdir -p "$hbmdir"
	fi
	for i in "${!ivshmem[@]}"; do
		qemu+=(-object "memory-backend-file,id=hbm$i,share=on,mem-path=$hbmdir/hbm$i,size=${ivshmem[$i]}")
		if [ "$ivshmem_bridged" = 1 ]; then
			qemu+=(-device "pci-bridge,id=br$i,chassis_nr=$((i + 1)),shpc=off"
				-device "ivshmem-plain,memdev=hbm$i,id=ivshmem$i,bus=br$i,addr=0x1")
		else
			qemu+=(-device "ivshmem-plain,memdev=hbm$i,id=ivshmem$i")
		fi
		echo "IVSHMEM$i=$hbmdir/hbm$i" >&2
	done
fi
[ -z "$qmp" ] || qemu+=(-qmp "unix:$qmp,server=on,wait=off")
qemu+=(${qemu_extra[@]+"${qemu_extra[@]}"})

if [ -z "$log" ]; then
	log=$tmp/console.log
fi
: > "$log"

start=$EPOCHREALTIME
# The pipeline runs in the background so that a signal trap can run while
# we wait (bash defers traps until a foreground pipeline ends).  The console
# loses its CRs and SeaBIOS's terminal escapes.
{
	timeout -k 10 $((timeout + margin)) "${qemu[@]}" < /dev/null 2>&1 &
	echo $! > "$tmp/qemu.pid"
	wait $!
	echo $? > "$tmp/qemu.rc"
} | sed -u 's/\r$//; s/\x1b\[[0-9;?]*[A-Za-z]//g; s/\x1b[c]//g' | tee "$log" &
pipe_pid=$!
wait "$pipe_pid" || true
qemu_rc=$(cat "$tmp/qemu.rc" 2>/dev/null || echo 125)
elapsed=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')

marker=$(grep -a '^PD_VM_EXIT=[0-9]*$' "$log" | tail -n 1 || true)
if [ -n "$marker" ]; then
	rc=${marker#PD_VM_EXIT=}
elif [ "$qemu_rc" = 124 ] || [ "$qemu_rc" = 137 ]; then
	rc=124
	echo "vm-run: VM killed after $((timeout + margin)) s (no PD_VM_EXIT); last console lines:" >&2
	tail -n 40 "$log" >&2
else
	rc=125
	echo "vm-run: VM ended without PD_VM_EXIT (qemu rc $qemu_rc); last console lines:" >&2
	tail -n 40 "$log" >&2
fi

scan=()
for re in ${allow_warn[@]+"${allow_warn[@]}"}; do
	scan+=(--allow "$re")
done
if ! reports=$("$here/vm-scan-log.sh" ${scan[@]+"${scan[@]}"} "$log"); then
	echo "vm-run: kernel reported a problem:" >&2
	printf '%s\n' "$reports" >&2
	[ "$rc" != 0 ] || rc=3
fi
printf 'vm-run: rc=%s wall=%ss kernel=%s%s log=%s\n' "$rc" "$elapsed" "$KVER" \
	"${sysroot:+ (root $sysroot)}" \
	"$([ "$log" = "$tmp/console.log" ] && echo '(temp)' || echo "$log")" >&2
exit "$rc"
