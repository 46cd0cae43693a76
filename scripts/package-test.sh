#!/bin/bash
# `make package-test`: peerdirect installs the way an administrator gets it.
#
#   scripts/package-test.sh [--debs DIR] [--keep]
#
# 1. install: `make install DESTDIR=... INSTALL_MOD_PATH=...` (in a copy of
#    the tree) installs peerdirect.ko and no pd_test_importer, and the NCCL
#    net plugin in LIBDIR (soname libnccl-net-peerdirect.so, RUNPATH
#    $ORIGIN); `make uninstall` leaves no file; a plain `make modules`
#    there still builds both modules for the selftests.
#    Versions (scripts/version.sh, in a throw-away clone): the next commit,
#    uncommitted edits and the commit after sort upward under dpkg
#    --compare-versions; without git, the VERSION file or BASE_VERSION.
# 2. packages: scripts/package.sh builds the .debs (or take them from
#    --debs DIR); lintian reports no errors; no package holds the test
#    importer; each holds what it should; their version and DKMS's are
#    scripts/version.sh's; peerdirect-tools and libnccl-net-peerdirect depend
#    on libpeerdirect1 of the same version; the tools suggest gnuplot.
# 3. a clean Debian 12 minbase root (scripts/packaging/clean-root.sh: a
#    cached debootstrap tarball, a fresh copy per run): `apt install ./*.deb`
#    of the packages alone, then in it: DKMS knows the module, group
#    "peerdirect" and the udev rule exist, the man pages are there, a sample
#    program builds with `pkg-config --cflags --libs peerdirect` and runs, the
#    NCCL net plugin is found by bare name through the loader as NCCL looks
#    for it (scripts/packaging/nccl-load.c), the installed pd-xfer moves
#    data between two processes over tcp, and `apt purge` leaves nothing
#    behind.
#
# TAP-like "ok"/"not ok" lines, then "N passed, N failed, N skipped"; logs
# in build/package-test/.  Needs root (debootstrap, chroot).  --keep keeps
# the root.  The DKMS builds and the module in a VM: scripts/dkms-test.sh.
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top" || exit 1
debs=
keep=0
while [ $# -gt 0 ]; do
	case "$1" in
	--debs) debs=$(realpath "${2:?}"); shift 2 ;;
	--keep) keep=1; shift ;;
	*) echo "usage: $0 [--debs DIR] [--keep]" >&2; exit 2 ;;
	esac
done
scripts/packaging/deps.sh || exit 1

# shellcheck source=packaging/tap.sh
. scripts/packaging/tap.sh
t_all=$SECONDS
log=$top/build/package-test
rm -rf "$log"
mkdir -p "$log"
work=$(mktemp -d "$top/build/.package-test.XXXXXX")
cleanup() {
	if [ "$keep" = 1 ]; then
		echo "# kept $work"
	else
		rm -rf "$work"
	fi
}
trap cleanup EXIT
version=$(make -s --no-print-directory -C user version)

# ---- 1. make install leaves the test importer out --------------------------
t0=$SECONDS
mkdir -p "$work/tree"
git ls-files -z --cached --others --exclude-standard |
	while IFS= read -r -d '' f; do [ -f "$f" ] && printf '%s\0' "$f"; done |
	xargs -0 cp --parents -t "$work/tree"
echo "$version" > "$work/tree/VERSION"
kdir=$(scripts/kdir.sh)
if make -C "$work/tree" -j"$(nproc)" install KDIR="$kdir" PREFIX=/usr \
	DESTDIR="$work/destdir" > "$log/make-install.log" 2>&1; then
	ok "make install DESTDIR=... (module for $(basename "$(dirname "$kdir")"), udev rule, library, tools, man pages)"
else
	notok "make install DESTDIR=..."; tail -n 20 "$log/make-install.log" | sed 's/^/#   /'
fi
check "make install: peerdirect.ko installed" \
	test -n "$(find "$work/destdir/lib/modules" -name 'peerdirect.ko*' 2> /dev/null)"
check "make install: the module says MODULE_VERSION $version" bash -c \
	'[ "$(modinfo -F version "$(find "$1" -name "peerdirect.ko*" | head -n 1)")" = "$2" ]' _ "$work/destdir/lib/modules" "$version"
# NCCL_NET_PLUGIN=peerdirect dlopen()s it by that bare name: LIBDIR, soname alike.
plugin=$work/destdir/usr/lib/libnccl-net-peerdirect.so
check "make install: the NCCL net plugin in LIBDIR, soname libnccl-net-peerdirect.so" bash -c \
	'readelf -d "$1" | grep -qF "Library soname: [libnccl-net-peerdirect.so]"' _ "$plugin"
check "make install: the plugin finds libpeerdirect.so.1 beside it in any PREFIX (RUNPATH \$ORIGIN)" bash -c \
	'readelf -d "$1" | grep -qF "(RUNPATH)            Library runpath: [\$ORIGIN]"' _ "$plugin"
bad=$(find "$work/destdir" -iname '*importer*' 2> /dev/null)
check "make install: no pd_test_importer${bad:+ ($bad)}" test -z "$bad"
check "make install: nothing installed outside DESTDIR (no depmod, no group)" \
	bash -c '! grep -qE "^\s*(depmod|groupadd|udevadm)" "$1"' _ "$log/make-install.log"
# make uninstall takes back every file make install put there (a node
# moving to the packages needs that: DKMS will not replace a module of the
# same version it finds installed).
make -C "$work/tree" uninstall KDIR="$kdir" PREFIX=/usr DESTDIR="$work/destdir" \
	> "$log/make-uninstall.log" 2>&1 || true
left=$(find "$work/destdir" -type f -o -type l 2> /dev/null | grep -v '/modules\.[a-z.]*$' | head -5 | tr '\n' ' ')
check "make uninstall: no file left${left:+ ($left)}" test -z "$left"
# The selftests' build (make modules, scripts/check.sh) still has both.
if make -C "$kdir" M="$work/tree" -j"$(nproc)" PD_VERSION="$version" modules > "$log/make-modules.log" 2>&1 &&
	[ -f "$work/tree/kmod/peerdirect.ko" ] && [ -f "$work/tree/selftests/importer/pd_test_importer.ko" ]; then
	ok "make modules (the selftests' build) still builds peerdirect.ko and pd_test_importer.ko"
else
	notok "make modules builds both modules"; tail -n 20 "$log/make-modules.log" | sed 's/^/#   /'
fi
echo "# install checks: $((SECONDS - t0)) s"

# ---- versions: every commit's build upgrades the last -------------------
# scripts/version.sh in a throw-away clone: a commit, the next one, edits
# on top, and the same tree without git (with and without a VERSION file).
t0=$SECONDS
vgit() { git -C "$work/vclone" -c user.name=t -c user.email=t@example.invalid "$@"; }
if git clone -q --shared "$top" "$work/vclone" 2> "$log/version-clone.log"; then
	v1=$("$work/vclone/scripts/version.sh")
	# Commits a second apart at least, as real ones are: the version
	# orders commits by their committer time.
	now=$(date +%s)
	GIT_COMMITTER_DATE="@$((now + 2)) +0000" vgit commit -q --allow-empty -m "one more commit"
	v2=$("$work/vclone/scripts/version.sh")
	echo "edited" >> "$work/vclone/README"
	v3=$("$work/vclone/scripts/version.sh")
	GIT_COMMITTER_DATE="@$((now + 4)) +0000" vgit commit -q -a -m "the edit"
	v4=$("$work/vclone/scripts/version.sh")
	# CI clones shallow: the same commit, the same version, without history.
	if git clone -q --depth 1 "file://$work/vclone" "$work/vshallow" 2>> "$log/version-clone.log"; then
		check "version: a shallow clone's is the full clone's ($v4)" \
			test "$("$work/vshallow/scripts/version.sh")" = "$v4"
	else
		notok "git clone --depth 1 for the version checks"
	fi
	echo "# versions: $v1 < $v2 < $v3 < $v4"
	check "version: the next commit's version sorts above ($v2 > $v1)" dpkg --compare-versions "$v2" gt "$v1"
	check "version: uncommitted edits sort above their commit ($v3 > $v2)" dpkg --compare-versions "$v3" gt "$v2"
	check "version: and below the next commit ($v4 > $v3)" dpkg --compare-versions "$v4" gt "$v3"
	base=$(sed -n 's/^BASE_VERSION := *//p' user/Makefile)
	next=$(awk -F. -v OFS=. '{ $NF = $NF + 1; print }' <<<"$base")
	check "version: the next release ($next) sorts above them all" dpkg --compare-versions "$next" gt "$v4"
	rm -rf "$work/vclone/.git"
	check "version: without git, BASE_VERSION ($base)" test "$("$work/vclone/scripts/version.sh")" = "$base"
	echo "$v2" > "$work/vclone/VERSION"
	check "version: without git, the VERSION file" test "$("$work/vclone/scripts/version.sh")" = "$v2"
	check "version: user/Makefile's version is scripts/version.sh's" \
		test "$(make -s --no-print-directory -C "$work/vclone/user" version)" = "$v2"
else
	notok "git clone for the version checks"; sed 's/^/#   /' "$log/version-clone.log"
fi
echo "# version checks: $((SECONDS - t0)) s"

# ---- 2. the packages ------------------------------------------------------
t0=$SECONDS
if [ -z "$debs" ]; then
	debs=$top/build/pkg
	if scripts/package.sh --out "$debs" > "$log/package.out" 2> "$log/package.err"; then
		ok "dpkg-buildpackage -us -uc -b ($(sed -n 's/^package: built in //; T; s/ (log:.*//p' "$log/package.err"))"
	else
		notok "dpkg-buildpackage"; tail -n 30 "$log/package.err" | sed 's/^/#   /'
	fi
fi
mapfile -t all < <(ls "$debs"/*_"$version"-*.deb 2> /dev/null)
mapfile -t main < <(printf '%s\n' "${all[@]}" | grep -v -- '-dbgsym_')
names=$(for d in "${main[@]}"; do dpkg-deb -f "$d" Package; done | sort | tr '\n' ' ')
check "binary packages: $names" \
	test "$names" = "libnccl-net-peerdirect libpeerdirect-dev libpeerdirect1 peerdirect-dkms peerdirect-tools peerdirect-udev "
if [ ${#main[@]} -eq 0 ]; then
	echo "$pass passed, $fail failed, $skip skipped"
	exit 1
fi

# lintian as an unprivileged user (it refuses to be trusted as root).
t0=$SECONDS
chmod -R a+rX "$debs"
runuser -u nobody -- env HOME=/tmp lintian --pedantic --info "${main[@]}" > "$log/lintian.log" 2>&1
errors=$(grep -c '^E: ' "$log/lintian.log")
warnings=$(grep -c '^W: ' "$log/lintian.log")
check "lintian: no errors ($errors errors, $warnings warnings, $((SECONDS - t0)) s)" test "$errors" = 0
grep -E '^(E|W): ' "$log/lintian.log" | sed 's/^/#   /'

contents() { dpkg-deb -c "$1" | awk '{ print $6 }' | sed 's|^\./|/|'; }
bad=$(for d in "${all[@]}"; do contents "$d" | grep -i importer | sed "s|^|$(basename "$d"): |"; done)
check "no package holds the test importer${bad:+: $bad}" test -z "$bad"
pkgfile() { printf '%s\n' "${main[@]}" | grep "/$1_"; }
has() {		# has PACKAGE PATH...
	local p=$1 f
	shift
	for f in "$@"; do
		# grep -q on a pipe would leave early: SIGPIPE, and pipefail fails it.
		grep -qx -- "$f" <<<"$(contents "$(pkgfile "$p")")" || { echo "#   $p lacks $f"; return 1; }
	done
}
ma=/usr/lib/$(dpkg-architecture -qDEB_HOST_MULTIARCH)
check "peerdirect-dkms: the source, dkms.conf, peerdirect(4)" has peerdirect-dkms \
	"/usr/src/peerdirect-$version/dkms.conf" "/usr/src/peerdirect-$version/Kbuild" \
	"/usr/src/peerdirect-$version/kmod/Kbuild" /usr/share/man/man4/peerdirect.4.gz
check "peerdirect-dkms: dkms.conf says PACKAGE_VERSION=\"$version\"" bash -c \
	'dpkg-deb --fsys-tarfile "$1" | tar -xO "./usr/src/peerdirect-$2/dkms.conf" | grep -qx "PACKAGE_VERSION=\"$2\""' \
	_ "$(pkgfile peerdirect-dkms)" "$version"
deb_ver=$(dpkg-deb -f "$(pkgfile peerdirect-dkms)" Version)
check "package version $deb_ver is scripts/version.sh's $version, Debian revision 1" test "$deb_ver" = "$version-1"
check "libpeerdirect1: the shared library" has libpeerdirect1 "$ma/libpeerdirect.so.1"
check "libpeerdirect-dev: header, .so, .a, pkg-config, man pages" has libpeerdirect-dev \
	/usr/include/peerdirect.h "$ma/libpeerdirect.so" "$ma/libpeerdirect.a" "$ma/pkgconfig/peerdirect.pc" \
	/usr/share/man/man3/libpeerdirect.3.gz /usr/share/man/man3/pd_device_alloc.3.gz
tools=$(sed -n 's/^TOOLS := //p' user/Makefile | xargs -n1 basename | sed 's|^|/usr/bin/|' | tr '\n' ' ')
# shellcheck disable=SC2086  # one word per tool
check "peerdirect-tools: every tool of user/Makefile ($tools)" has peerdirect-tools $tools
check "peerdirect-udev: the udev rule" has peerdirect-udev /lib/udev/rules.d/60-peerdirect.rules
# The tools dlopen the library (the doctor) and plot with gnuplot (pd-coll --plot).
tdeps=$(dpkg-deb -f "$(pkgfile peerdirect-tools)" Depends)
# one field's entries, one a line
entries() { dpkg-deb -f "$(pkgfile "$1")" "$2" | tr ',' '\n' | sed 's/^ *//; s/ *$//'; }
check "peerdirect-tools Depends: libpeerdirect1 (= $deb_ver) ($tdeps)" \
	grep -qxF "libpeerdirect1 (= $deb_ver)" <<<"$(entries peerdirect-tools Depends)"
check "libnccl-net-peerdirect: the plugin in the loader's path, its man page" has libnccl-net-peerdirect \
	"$ma/libnccl-net-peerdirect.so" /usr/share/man/man7/libnccl-net-peerdirect.7.gz
check "libnccl-net-peerdirect Depends: libpeerdirect1 (= $deb_ver) ($(dpkg-deb -f "$(pkgfile libnccl-net-peerdirect)" Depends))" \
	grep -qxF "libpeerdirect1 (= $deb_ver)" <<<"$(entries libnccl-net-peerdirect Depends)"
tsugg=$(dpkg-deb -f "$(pkgfile peerdirect-tools)" Suggests)
check "peerdirect-tools Suggests: gnuplot ($tsugg)" grep -qx gnuplot <<<"$(entries peerdirect-tools Suggests)"
check "peerdirect-udev: persistent binding (rule, helper, devices.conf)" has peerdirect-udev \
	/lib/udev/rules.d/61-peerdirect-bind.rules /usr/lib/peerdirect/peerdirect-bind \
	/etc/peerdirect/devices.conf
check "peerdirect-tools: bash completion for pdctl, pd-coll, pd-bench" has peerdirect-tools \
	/usr/share/bash-completion/completions/pdctl /usr/share/bash-completion/completions/pd-coll \
	/usr/share/bash-completion/completions/pd-bench

# ---- 3. a clean Debian 12 root ----------------------------------------------
t0=$SECONDS
root=$work/root
rc=0
read -r key _ < <(scripts/packaging/clean-root.sh "$root" bookworm 2> "$log/clean-root.log") || rc=$?
if [ "$rc" = 4 ] || [ -z "${key:-}" ]; then
	if [ "$rc" = 4 ]; then
		skipped "clean Debian 12 root: $(tail -n 1 "$log/clean-root.log")"
	else
		notok "clean Debian 12 root"; tail -n 20 "$log/clean-root.log" | sed 's/^/#   /'
	fi
	echo "# total $((SECONDS - t_all)) s"
	echo "$pass passed, $fail failed, $skip skipped"
	[ "$fail" = 0 ]
	exit
fi
echo "# clean bookworm minbase root $key: $((SECONDS - t0)) s"
apt_cache=${PEERDIRECT_CACHE:-/var/cache/peerdirect}/apt-bookworm-$key
cp -n "$apt_cache"/*.deb "$root/var/cache/apt/archives/" 2> /dev/null || true
printf '#!/bin/sh\nexit 101\n' > "$root/usr/sbin/policy-rc.d"
chmod 755 "$root/usr/sbin/policy-rc.d"
mkdir -p "$root/tmp/debs"
cp "${main[@]}" "$root/tmp/debs/"
cp scripts/packaging/sample.c scripts/packaging/nccl-load.c "$root/tmp/"
inroot() { scripts/in-root.sh "$root" env DEBIAN_FRONTEND=noninteractive "$@"; }
apt_opts=(-y -q -o Dpkg::Use-Pty=0 -o APT::Install-Recommends=false -o Acquire::Retries=3)

t0=$SECONDS
if scripts/in-root.sh "$root" bash -c \
	'cd /tmp/debs && DEBIAN_FRONTEND=noninteractive apt-get "$@" install ./*.deb' _ "${apt_opts[@]}" \
	> "$log/apt-install.log" 2>&1; then
	ok "apt install ./*.deb in a clean Debian 12 root ($((SECONDS - t0)) s)"
else
	notok "apt install ./*.deb in a clean Debian 12 root"; tail -n 30 "$log/apt-install.log" | sed 's/^/#   /'
fi
inroot dpkg-query -W -f='${Package} ${Version} ${Status}\n' peerdirect-dkms peerdirect-udev \
	libpeerdirect1 libpeerdirect-dev libnccl-net-peerdirect peerdirect-tools > "$log/installed.txt" 2>&1
check "all six packages installed" test "$(grep -c 'install ok installed' "$log/installed.txt")" = 6
inroot dkms status > "$log/dkms-status.txt" 2>&1
check "dkms knows peerdirect/$version: $(grep peerdirect "$log/dkms-status.txt" | head -n 1)" \
	grep -q "peerdirect/$version" "$log/dkms-status.txt"
gid=$(inroot getent group peerdirect | cut -d: -f3)
check "group peerdirect exists and is a system group (gid ${gid:-none})" test -n "$gid" -a "${gid:-1000}" -lt 1000
check "udev rule /lib/udev/rules.d/60-peerdirect.rules" test -f "$root/lib/udev/rules.d/60-peerdirect.rules"
check "man pages peerdirect(4), libpeerdirect(3), pd_device_alloc(3), pd-bench(1)" bash -c \
	'for f in man4/peerdirect.4.gz man3/libpeerdirect.3.gz man3/pd_device_alloc.3.gz man1/pd-bench.1.gz; do
		zcat "$1/usr/share/man/$f" > /dev/null || exit 1; done' _ "$root"

# A user's program, from the packages alone; a C toolchain is the user's
# (gcc came with dkms; the C library's headers and pkg-config do not).
if inroot apt-get "${apt_opts[@]}" install gcc libc6-dev pkg-config > "$log/apt-pkg-config.log" 2>&1; then
	if inroot bash -c 'cd /tmp && cc -Wall -Wextra -Werror -o sample sample.c $(pkg-config --cflags --libs peerdirect)' \
		> "$log/sample-build.log" 2>&1; then
		ok "sample program builds with \$(pkg-config --cflags --libs peerdirect)"
	else
		notok "sample program builds with pkg-config"; sed 's/^/#   /' "$log/sample-build.log"
	fi
	if inroot /tmp/sample > "$log/sample.out" 2>&1 && grep -q '^libpeerdirect ABI 1\.' "$log/sample.out"; then
		ok "sample program runs: $(head -n 1 "$log/sample.out")"
		sed 's/^/#   /' "$log/sample.out"
	else
		notok "sample program runs"; sed 's/^/#   /' "$log/sample.out"
	fi
	# As NCCL_NET_PLUGIN=peerdirect loads it: by bare name, no LD_LIBRARY_PATH.
	if inroot bash -c 'cd /tmp && cc -Wall -Wextra -Werror -o nccl-load nccl-load.c -ldl &&
		env -u LD_LIBRARY_PATH ./nccl-load' > "$log/nccl-load.log" 2>&1; then
		ok "NCCL net plugin: dlopen(\"libnccl-net-peerdirect.so\") through the loader, tables v12 and v8 named peerdirect"
		sed 's/^/#   /' "$log/nccl-load.log"
	else
		notok "NCCL net plugin found by bare name"; sed 's/^/#   /' "$log/nccl-load.log"
	fi
else
	notok "apt-get install gcc libc6-dev pkg-config"; tail -n 10 "$log/apt-pkg-config.log" | sed 's/^/#   /'
fi

# The installed tools move data: two pd-xfer ranks over tcp, host memory.
# Below the ephemeral range: a port there cannot be taken by an outgoing
# connection (apt's, say) between now and pd-xfer's bind.
lo=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2> /dev/null || echo 32768)
port=$((10000 + RANDOM % (lo > 11000 ? lo - 10000 : 1000)))
if inroot bash -c '
	pd-xfer --rank 0 --rendezvous 127.0.0.1:$1 --memory host --provider tcp --iters 3 --size 1M > /tmp/x0 2>&1 &
	pd-xfer --rank 1 --rendezvous 127.0.0.1:$1 --memory host --provider tcp --iters 3 --size 1M > /tmp/x1 2>&1
	r1=$?; wait $!; r0=$?; cat /tmp/x0 /tmp/x1; [ $r0 = 0 ] && [ $r1 = 0 ]' _ "$port" > "$log/pd-xfer.log" 2>&1; then
	ok "installed pd-xfer: 3 x 1 MiB over tcp, checksums match ($(grep -c ' OK ' "$log/pd-xfer.log") OK lines)"
else
	notok "installed pd-xfer over tcp"; tail -n 20 "$log/pd-xfer.log" | sed 's/^/#   /'
fi

# Keep what apt downloaded for the next run (same point release).
cp -n "$root"/var/cache/apt/archives/*.deb "$apt_cache/" 2> /dev/null || true
rm -f "$apt_cache"/peerdirect-* "$apt_cache"/libpeerdirect*

# Removal: apt purge leaves no file of ours and no DKMS registration.
if inroot apt-get "${apt_opts[@]}" purge peerdirect-dkms peerdirect-udev libpeerdirect1 \
	libpeerdirect-dev libnccl-net-peerdirect peerdirect-tools > "$log/apt-purge.log" 2>&1; then
	left=$(cd "$root" && ls -d usr/src/peerdirect-* var/lib/dkms/peerdirect lib/udev/rules.d/60-peerdirect.rules \
		usr/include/peerdirect.h usr/bin/pd-bench "${ma#/}"/libnccl-net-peerdirect.so "${ma#/}"/libpeerdirect.so.1 \
		2> /dev/null | tr '\n' ' ')
	# and the loader no longer finds the plugin by its bare name
	inroot /tmp/nccl-load > "$log/nccl-load-purged.log" 2>&1
	check "apt purge: the plugin is no longer found ($(head -n 1 "$log/nccl-load-purged.log"))" \
		grep -q 'libnccl-net-peerdirect.so: cannot open shared object file' "$log/nccl-load-purged.log"
	check "apt purge removes every package and leaves nothing behind${left:+ (left: $left)}" test -z "$left"
else
	notok "apt purge"; tail -n 20 "$log/apt-purge.log" | sed 's/^/#   /'
fi

echo "# total $((SECONDS - t_all)) s; logs in $log"
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" = 0 ]
