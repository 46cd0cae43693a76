#!/bin/bash
# Write a string into the ivshmem BAR2 through /dev/mem; the host checks the
# backing file after the VM exits.  Usage: ivshmem.sh STRING [OFFSET]
set -euo pipefail
msg=$1
off=${2:-0}
dev=
for d in /sys/bus/pci/devices/*; do
	if [ "$(cat "$d/vendor")" = 0x1af4 ] && [ "$(cat "$d/device")" = 0x1110 ]; then
		dev=$d
		break
	fi
done
[ -n "$dev" ] || { echo "no ivshmem device"; exit 1; }
# Third line of "resource" is BAR2: start end flags.
read -r start end _ < <(sed -n 3p "$dev/resource")
echo "ivshmem at $dev BAR2 $start-$end size $(( end - start + 1 ))"
# Pad to whole 32-bit words and store them little-endian with devmem.
while [ $(( ${#msg} % 4 )) -ne 0 ]; do msg+=$'\n'; done
for (( i = 0; i < ${#msg}; i += 4 )); do
	w=0
	for (( j = 3; j >= 0; j-- )); do
		w=$(( (w << 8) | $(printf '%d' "'${msg:i+j:1}") ))
	done
	devmem $(( start + off + i )) 32 "$w"
done
printf 'readback: 0x%08x\n' "$(devmem $(( start + off )) 32)"
