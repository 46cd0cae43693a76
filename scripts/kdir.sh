#!/bin/bash
# Print the kernel build directory to compile the module against: $KDIR if
# set, else the running kernel's headers if installed, else the newest
# installed Debian linux-headers-*-amd64, else the newest kernel unpacked
# into the cache (scripts/kernel-cache.sh; `scripts/tiers.sh prepare stable`
# unpacks Debian 12's without installing it).  Our build machines run a
# kernel without headers, so the version is always discovered, never
# hard-coded.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [ -n "${KDIR:-}" ]; then
	echo "$KDIR"
	exit 0
fi
run=/lib/modules/$(uname -r)/build
if [ -d "$run" ]; then
	echo "$run"
	exit 0
fi
best=$(ls -d /lib/modules/*-amd64/build 2>/dev/null | sort -V | tail -n 1 || true)
if [ -z "$best" ] && root=$("$here/kernel-cache.sh" --newest 2> /dev/null); then
	best=$(ls -d "$root"/lib/modules/*/build | head -n 1)
fi
[ -n "$best" ] || { echo "kdir: no kernel headers (scripts/tiers.sh prepare stable unpacks Debian 12's into the cache)" >&2; exit 1; }
echo "$best"
