#!/bin/bash
# `make dkms-test`: the module through DKMS, as an administrator gets it.
#
#   scripts/dkms-test.sh [--deb peerdirect-dkms_*.deb] [--no-vm] [--kver RELEASE]...
#
# The source is the tree's `make dkms-source`, or the peerdirect-dkms
# package's /usr/src/peerdirect-VERSION with --deb.  For every kernel whose
# headers are installed (/lib/modules/*/build) or unpacked into the cache
# (scripts/kernel-cache.sh --list: the tiers' kernels, never installed; DKMS
# gets --kernelsourcedir), found at run time (--kver picks): `dkms add`,
# `dkms build` and `dkms install`; then each installed module boots in a
# QEMU VM of its kernel (scripts/vm-run.sh --kernel stock, from /boot or
# --kroot the cache) and is loaded, checked to be that build, used
# (dkms-smoke: allocate, export, map, revoke, free) and unloaded.  A kernel
# with neither a /boot/vmlinuz nor an unpacked image gets no VM run (a
# skip).  On a fresh machine /boot is empty: the cache serves.
#
# Nothing on the machine changes: DKMS runs in a private mount namespace
# with a tmpfs over /var/lib/dkms (its tree and the MOK signing key it makes
# are throw-away), --sourcetree and --installtree in a temp dir, no depmod.
# TAP-like "ok"/"not ok" lines, then "N passed, N failed, N skipped".
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top" || exit 1
deb=
vm=1
kvers=()
while [ $# -gt 0 ]; do
	case "$1" in
	--deb) deb=$(realpath "${2:?}"); shift 2 ;;
	--no-vm) vm=0; shift ;;
	--kver) kvers+=("${2:?}"); shift 2 ;;
	*) echo "usage: $0 [--deb FILE] [--no-vm] [--kver RELEASE]..." >&2; exit 2 ;;
	esac
done
scripts/packaging/deps.sh || exit 1

# shellcheck source=packaging/tap.sh
. scripts/packaging/tap.sh
t_all=$SECONDS

work=$(mktemp -d "${TMPDIR:-/tmp}/pd-dkms.XXXXXX")
trap 'rm -rf "$work"' EXIT
log=$top/build/dkms-test
rm -rf "$log"
mkdir -p "$log"

# ---- the DKMS source tree ---------------------------------------------------
mkdir -p "$work/src" "$work/stage"
if [ -n "$deb" ]; then
	dpkg-deb -x "$deb" "$work/stage" || { notok "extract $deb"; exit 1; }
else
	make -s --no-print-directory dkms-source DESTDIR="$work/stage" > "$log/source.log" 2>&1 ||
		{ notok "make dkms-source"; cat "$log/source.log"; exit 1; }
fi
srcdir=$(ls -d "$work"/stage/usr/src/peerdirect-* 2>/dev/null | head -n 1)
if [ -z "$srcdir" ] || [ ! -f "$srcdir/dkms.conf" ]; then
	notok "a DKMS source tree with dkms.conf"
	echo "$pass passed, $fail failed, $skip skipped"
	exit 1
fi
version=${srcdir##*/peerdirect-}
mv "$srcdir" "$work/src/"
srcdir=$work/src/peerdirect-$version
if [ -z "$(find "$srcdir" -ipath '*importer*' -o -ipath '*selftests*')" ]; then
	ok "DKMS source peerdirect-$version ships no selftests/ or test importer"
else
	notok "DKMS source ships test code: $(find "$srcdir" -ipath '*importer*' -o -ipath '*selftests*')"
fi

# The kernels: every one whose headers are installed (/lib/modules/*/build),
# and every one make check unpacked into the cache (scripts/kernel-cache.sh:
# the tiers' kernels, never installed), whose headers DKMS is pointed at
# with --kernelsourcedir and which boot from there (vm-run.sh --kroot).
declare -A ksrc kroot
for d in /lib/modules/*/build; do
	[ -d "$d/include" ] && ksrc[$(basename "$(dirname "$d")")]=$d
done
while read -r r; do
	[ -n "$r" ] || continue
	for v in "$r"/boot/vmlinuz-*; do
		[ -f "$v" ] || continue
		k=${v##*/vmlinuz-}
		[ -d "$r/lib/modules/$k/build/include" ] || continue
		[ -n "${ksrc[$k]:-}" ] || ksrc[$k]=$(realpath "$r/lib/modules/$k/build")
		kroot[$k]=$r
	done
done < <(scripts/kernel-cache.sh --list)
if [ ${#kvers[@]} -eq 0 ]; then
	kvers=("${!ksrc[@]}")
fi
# Installed headers (dkms pulls in linux-headers-amd64) whose kernel is
# neither in /boot nor in the cache yet (admin before the tiers, on a fresh
# machine): unpack that image into the cache to boot it.
if [ "$vm" = 1 ]; then
	for k in "${kvers[@]}"; do
		[ -n "${ksrc[$k]:-}" ] && [ -z "${kroot[$k]:-}" ] && [ ! -f "/boot/vmlinuz-$k" ] || continue
		r=$(scripts/kernel-cache.sh "$k" 2> "$log/kernel-cache-$k.log") && kroot[$k]=$r
	done
fi
if [ ${#kvers[@]} -eq 0 ]; then
	notok "no kernel headers: none installed (/lib/modules/*/build), none unpacked (scripts/tiers.sh prepare stable)"
	echo "$pass passed, $fail failed, $skip skipped"
	exit 1
fi
mapfile -t kvers < <(printf '%s\n' "${kvers[@]}" | sort -V)
for k in "${kvers[@]}"; do
	[ -n "${ksrc[$k]:-}" ] || { notok "$k: no headers installed or unpacked for it"; continue; }
	echo "# $k: headers ${ksrc[$k]}${kroot[$k]:+, boots from ${kroot[$k]}}"
done
mapfile -t kvers < <(for k in "${kvers[@]}"; do [ -z "${ksrc[$k]:-}" ] || echo "$k"; done)
echo "# peerdirect $version, kernels: ${kvers[*]}"

# ---- dkms add, build, install (one private namespace) ---------------------
mkdir -p "$work/install/lib/modules"
for k in "${kvers[@]}"; do
	mkdir -p "$work/install/lib/modules/$k"
done
kdirs=()
for k in "${kvers[@]}"; do
	kdirs+=("$k=${ksrc[$k]}")
done
t0=$SECONDS
# shellcheck disable=SC2016  # expanded by the inner shell
unshare --mount --propagation private bash -c '
	set -u
	work=$1 version=$2 log=$3
	shift 3
	mount -t tmpfs tmpfs /var/lib/dkms || exit 1
	dkms add -m peerdirect -v "$version" --sourcetree "$work/src" > "$log/add.log" 2>&1
	echo "add=$?"
	for kd in "$@"; do
		k=${kd%%=*} kdir=${kd#*=}
		dkms build -m peerdirect -v "$version" -k "$k" --kernelsourcedir "$kdir" \
			--sourcetree "$work/src" > "$log/build-$k.log" 2>&1
		echo "build $k=$?"
		cp /var/lib/dkms/peerdirect/"$version"/build/make.log "$log/make-$k.log" 2>/dev/null
		dkms install -m peerdirect -v "$version" -k "$k" --kernelsourcedir "$kdir" --sourcetree "$work/src" \
			--installtree "$work/install/lib/modules" --no-depmod > "$log/install-$k.log" 2>&1
		echo "install $k=$?"
	done
	dkms status -m peerdirect --installtree "$work/install/lib/modules" > "$log/status.log" 2>&1
	find /var/lib/dkms/peerdirect -name "*.ko*" > "$log/dkms-tree.txt"
' dkms-test "$work" "$version" "$log" "${kdirs[@]}" > "$log/dkms.rc" 2>&1
echo "# dkms add/build/install: $((SECONDS - t0)) s"
rc_of() { sed -n "s/^$1=//p" "$log/dkms.rc"; }
if [ "$(rc_of add)" = 0 ]; then
	ok "dkms add peerdirect/$version"
else
	notok "dkms add peerdirect/$version"; sed 's/^/#   /' "$log/add.log" "$log/dkms.rc"
fi
for k in "${kvers[@]}"; do
	if grep -q 'BUILD_EXCLUSIVE' "$log/build-$k.log" 2>/dev/null; then
		skipped "dkms build for $k: dkms.conf excludes this kernel"
		continue
	fi
	if [ "$(rc_of "build $k")" = 0 ]; then
		ok "dkms build for $k"
	else
		notok "dkms build for $k"; tail -n 30 "$log/make-$k.log" "$log/build-$k.log" 2>/dev/null | sed 's/^/#   /'
		continue
	fi
	if grep -E 'warning:|error:' "$log/make-$k.log" > /dev/null 2>&1; then
		notok "dkms build for $k has compiler warnings"; grep -E 'warning:|error:' "$log/make-$k.log" | head | sed 's/^/#   /'
	fi
	ko=$(ls "$work/install/lib/modules/$k"/updates/dkms/peerdirect.ko* 2>/dev/null | head -n 1)
	if [ "$(rc_of "install $k")" = 0 ] && [ -n "$ko" ]; then
		ok "dkms install for $k: ${ko#"$work/install"}"
	else
		notok "dkms install for $k"; tail -n 20 "$log/install-$k.log" | sed 's/^/#   /'
		continue
	fi
	# DKMS passes PACKAGE_VERSION on as PD_VERSION: the module says it.
	mv=$(modinfo -F version "$ko" 2> /dev/null)
	check "$k: the module's version is DKMS's ($mv)" test "$mv" = "$version"
	others=$(find "$work/install/lib/modules/$k" -name '*.ko*' ! -name 'peerdirect.ko*')
	if [ -z "$others" ] && ! grep -q pd_test_importer "$log/dkms-tree.txt"; then
		ok "$k: peerdirect.ko is the only module DKMS built and installed"
	else
		notok "$k: DKMS built or installed more than peerdirect.ko: $others $(grep pd_test "$log/dkms-tree.txt")"
	fi
	cp "$ko" "$log/"
	mkdir -p "$log/$k"
	mv "$log/$(basename "$ko")" "$log/$k/"
done
grep -v '^readelf: Warning' "$log/status.log" | sed 's/^/# /'

# ---- load each build in a VM of its kernel ---------------------------------
if [ "$vm" = 1 ]; then
	mkdir -p "$work/payload/bin"
	if ! cc -static -O2 -Wall -Wextra -Werror -Iuapi -o "$work/payload/bin/dkms-smoke" \
		scripts/packaging/dkms-smoke.c > "$log/smoke-build.log" 2>&1; then
		notok "build dkms-smoke"; cat "$log/smoke-build.log"
	fi
	cp scripts/packaging/dkms-guest.sh "$work/payload/"
	for k in "${kvers[@]}"; do
		ko=$(ls "$log/$k"/peerdirect.ko* 2>/dev/null | head -n 1)
		[ -n "$ko" ] || continue
		# The host's /boot if it has the kernel, else the cache's.
		from=()
		if [ ! -f "/boot/vmlinuz-$k" ]; then
			if [ -z "${kroot[$k]:-}" ]; then
				skipped "$k: load in a VM (no /boot/vmlinuz-$k, none unpacked in the cache)"
				continue
			fi
			from=(--kroot "${kroot[$k]}")
		fi
		t0=$SECONDS
		scripts/vm-run.sh --kernel stock --kver "$k" ${from[@]+"${from[@]}"} --timeout 240 \
			--ko "$ko" --payload "$work/payload" --log "$log/vm-$k.log" \
			-- dkms-guest.sh > "$log/vm-$k.out" 2>&1
		rc=$?
		grep -aE '^(ok|not ok) ' "$log/vm-$k.log" | sed 's/^/  /'
		grep -aE '^#' "$log/vm-$k.log" | grep -v '^#   ok' | head -n 8 | sed 's/^/  /'
		if [ "$rc" = 0 ] && grep -aq '^[1-9][0-9]* passed, 0 failed' "$log/vm-$k.log"; then
			ok "$k: the DKMS-built module loads and works in a VM ($((SECONDS - t0)) s)"
		else
			notok "$k: the DKMS-built module in a VM (vm-run exit $rc, log $log/vm-$k.log)"
			tail -n 20 "$log/vm-$k.out" | sed 's/^/#   /'
		fi
	done
fi

echo "# total $((SECONDS - t_all)) s; logs in $log"
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" = 0 ]
