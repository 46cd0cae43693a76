#!/bin/bash
# Runs inside the VM for the bar part of scripts/check.sh (review finding
# N12), with one ivshmem-plain function and QEMU's std VGA (1234:1111),
# whose BAR2 is its 4 KiB of MMIO registers, not prefetchable.  Bound to
# the module by driver_override with 4 KiB pages, that BAR must be mapped
# uncached (x86 PAT: uncached-minus), not write-combining, and the probe
# must say so; ivshmem's prefetchable BAR2 stays write-combining.
set -u
pass=0
fail=0
n=0
skip=0
pat=/sys/kernel/debug/x86/pat_memtype_list
res() {	# res STATUS DESCRIPTION (STATUS skip: a skip, the kernel has no PAT list)
	n=$((n + 1))
	if [ "$1" = skip ]; then
		skip=$((skip + 1)); echo "ok $n $2 # SKIP no $pat (a kernel without x86 PAT)"
	elif [ "$1" = 0 ]; then
		pass=$((pass + 1)); echo "ok $n $2"
	else
		fail=$((fail + 1)); echo "not ok $n $2"
	fi
}
function_of() {	# function_of VENDOR:DEVICE: the first PCI function with those IDs
	local d
	for d in /sys/bus/pci/devices/*; do
		[ "$(cat "$d/vendor"):$(cat "$d/device")" = "$1" ] && { basename "$d"; return; }
	done
}
memtype() {	# memtype PCIADDR: x86 PAT's line for the start of BAR2
	local start
	start=$(awk 'NR == 3 { print $1 }' "/sys/bus/pci/devices/$1/resource")
	grep -i "mem $start-" "$pat" 2>/dev/null
}

mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug
insmod /pd/ko/peerdirect.ko sim_devices=0 bind_ivshmem=1 bar_page_kb=4
res $? "the module loads (bind_ivshmem=1 bar_page_kb=4)"
iv=$(function_of 0x1af4:0x1110)
vga=$(function_of 0x1234:0x1111)
echo "# ivshmem ${iv:-none}, VGA ${vga:-none}"
[ -n "$iv" ] && [ -n "$vga" ]
res $? "the VM has an ivshmem function and a std VGA"
line=$(memtype "$iv")
echo "# ivshmem: $line"
[ -e "$pat" ] && { [[ "$line" == *write-combining* ]]; r=$?; } || r=skip
res $r "a prefetchable BAR2 (ivshmem) is mapped write-combining"
[ -e "/sys/bus/pci/devices/$vga/driver" ] && echo "$vga" > "/sys/bus/pci/devices/$vga/driver/unbind"
echo peerdirect > "/sys/bus/pci/devices/$vga/driver_override"
echo "$vga" > /sys/bus/pci/drivers/peerdirect/bind
res $? "the VGA binds through driver_override"
line=$(memtype "$vga")
echo "# VGA: $line"
[ -e "$pat" ] && { [[ "$line" == *uncached-minus* ]]; r=$?; } || r=skip
res $r "a non-prefetchable BAR2 (VGA MMIO) is mapped uncached, not write-combining"
dmesg | grep -q "$vga: BAR2 is not prefetchable: mapped uncached"
res $? "the probe says the BAR is mapped uncached"
echo "$vga" > /sys/bus/pci/drivers/peerdirect/unbind && rmmod peerdirect
res $? "unbind and unload"
echo "# Totals: pass:$pass fail:$fail xfail:0 xpass:0 skip:$skip error:0"
