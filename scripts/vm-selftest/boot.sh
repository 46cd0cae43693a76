#!/bin/bash
# Plain boot: kernel, PCI devices, module autoload.
set -euo pipefail
echo "uname -r: $(uname -r)"
ls /sys/bus/pci/devices
modprobe vgem
ls -1 /dev/dri
echo "guest uptime at end: $(cut -d' ' -f1 /proc/uptime)"
