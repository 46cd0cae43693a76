#!/bin/bash
# Print the kernel build directory to compile the module against: $KDIR if
# set, else the running kernel's headers if installed, else the newest
# installed Debian linux-headers-*-amd64.  Our build machines run a kernel
# without headers, so the version is always discovered, never hard-coded.
set -euo pipefail
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
[ -n "$best" ] || { echo "kdir: no kernel headers (scripts/install-deps.sh)" >&2; exit 1; }
echo "$best"
