#!/bin/bash
# Wait until the host removes ivshmem0 through QMP (device_del).
set -uo pipefail
count() { grep -l 0x1110 /sys/bus/pci/devices/*/device 2>/dev/null | wc -l; }
echo "ivshmem devices before: $(count)"
echo "PD_READY_FOR_UNPLUG"
for i in $(seq 120); do
	if [ "$(count)" = 0 ]; then
		echo "ivshmem gone after ${i}x0.5s"
		ls /sys/bus/pci/devices
		exit 0
	fi
	sleep 0.5
done
echo "ivshmem still present"
exit 1
