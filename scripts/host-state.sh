#!/bin/bash
# What `make check` must leave as it found it, printed so that two runs can
# be compared with diff: the kernels dpkg knows (`dpkg -l 'linux-image*'`),
# every file under /boot (GRUB's config included) with its size, mode and
# checksum, what configures the boot loader (/etc/default/grub and
# /etc/grub.d), and what steers apt (its sources, preferences and
# apt.conf.d): a backports suite or pin left behind would move the host's
# kernel at its next upgrade.
# scripts/check.sh runs it first and last and fails if they differ.
#
#   scripts/host-state.sh [ROOT]    (default /; a root for the tests)
set -uo pipefail
root=${1:-}
root=${root%/}

echo "## dpkg -l 'linux-image*' (installed or half-installed)"
dpkg-query ${root:+--admindir="$root/var/lib/dpkg"} -W -f='${db:Status-Abbrev} ${Package} ${Version}\n' \
	'linux-image*' 2> /dev/null | awk '$1 !~ /^un/' | sort
for d in /boot /etc/default/grub /etc/grub.d /etc/apt/sources.list /etc/apt/sources.list.d \
	/etc/apt/preferences /etc/apt/preferences.d /etc/apt/apt.conf.d; do
	echo "## $d"
	[ -e "$root$d" ] || { echo "(absent)"; continue; }
	(cd "$root${d%/*}/" && find "${d##*/}" -printf '%y %m %s %p\n' | sort -k4 |
		while read -r type mode size path; do
			case "$type" in
			f) sum=$(sha256sum < "$path" | cut -c1-16) ;;
			l) sum="-> $(readlink "$path")" ;;
			*) sum=- ;;
			esac
			echo "$type $mode $size $path $sum"
		done)
done
