#!/bin/bash
# Runs inside the VM for the unplug stage of scripts/check.sh: two ivshmem
# BAR devices, and a third of 1 GiB for selftests/zeroing.  ivshmem0 is
# removed by the host through QEMU's monitor while selftests/unplug holds
# it; ivshmem1 is removed through sysfs and rebound by a rescan.
set -u
cd /pd || exit 1
insmod /pd/ko/peerdirect.ko sim_devices=0 bind_ivshmem=1 revoke_timeout_ms=300 || exit 1
insmod /pd/ko/pd_test_importer.ko || exit 1

bar_of() {	# PCI address of the device behind /dev/peerdirectN
	basename "$(readlink -f "/sys/class/misc/$1/device")"
}
a0=$(bar_of peerdirect0)
a1=$(bar_of peerdirect1)
echo "# peerdirect0 on $a0, peerdirect1 on $a1"

# ALLOC's zeroing killed, and the device removed under it
# (selftests/zeroing.c), on the device of at least 512 MiB that
# scripts/check.sh adds for it, before anything else is unplugged.
zdev=
for m in /sys/class/misc/peerdirect*; do
	[ "$(cat "$m/mem_size")" -ge $((512 << 20)) ] && zdev=/dev/$(basename "$m")
done
echo "# zeroing on ${zdev:-no device of 512 MiB or more}"
if [ -n "$zdev" ]; then
	PD_ZERO_DEV=$zdev timeout 600 /pd/selftests/zeroing
	rc=$?
else
	rc=1
fi
# The harness exits 0, or 1 with its failures in its "# Totals"; a crash
# or a timeout prints none: count it here.  A missing device too.
if [ -z "$zdev" ] || { [ "$rc" != 0 ] && [ "$rc" != 1 ]; }; then
	echo "not ok zeroing: exit $rc${zdev:+ on $zdev}${zdev:- (no device of 512 MiB or more)}"
	echo "# Totals: pass:0 fail:1 xfail:0 xpass:0 skip:0 error:0"
fi
# Its last test removed the device: bring it back before the names are used.
echo 1 > /sys/bus/pci/rescan
sleep 1

/pd/selftests/unplug /dev/peerdirect0 "$a0"

echo "TAP version 13"
echo "1..22"
pass=0
fail=0
skip=0
n=0
res() {	# res STATUS DESCRIPTION: the next result, numbered in order
	n=$((n + 1))
	if [ "$1" = 0 ]; then pass=$((pass + 1)); echo "ok $n $2"; else fail=$((fail + 1)); echo "not ok $n $2"; fi
}
res_skip() {	# res_skip DESCRIPTION REASON
	n=$((n + 1))
	skip=$((skip + 1))
	echo "ok $n $1 # SKIP $2"
}
pat_list=/sys/kernel/debug/x86/pat_memtype_list
dev_of() {	# /dev/peerdirectN bound to the PCI address $1, or nothing
	local m
	for m in /sys/class/misc/peerdirect*; do
		[ "$(basename "$(readlink -f "$m/device")")" = "$1" ] && echo "/dev/$(basename "$m")"
	done
}
# removal_waits MODE WHO: sysfs remove of $a1 while `unplug MODE` holds
# its device: the removal waits for the holder, the BAR stays requested
# (nothing can be hot-added over it), and once it lets go the removal
# completes, leaving no write-combining PAT entry over the BAR although
# a file is still open, a user's new mapping of it is uncached, and a
# rescan binds a fresh device.  Six results (eight with a hot-add, for
# MODE hold).
removal_waits() {
	local mode=$1 who=$2 hold holder remover rescanner range dev start pat d
	dev=$(dev_of "$a1")
	# BAR2's start, as x86 PAT's memtype list prints it
	start=$(awk 'NR == 3 { print $1 }' "/sys/bus/pci/devices/$a1/resource")
	hold=$(mktemp -d)
	/pd/selftests/unplug "$mode" "$dev" "$hold" &
	holder=$!
	for _ in $(seq 1 100); do [ -e "$hold/ready" ] && break; sleep 0.1; done
	exec 7<>"$dev"
	(echo 1 > "/sys/bus/pci/devices/$a1/remove") &
	remover=$!
	sleep 2
	kill -0 "$remover" 2>/dev/null && [ -e "/sys/bus/pci/devices/$a1" ]
	res $? "sysfs remove waits while $who"
	(echo 1 > /sys/bus/pci/rescan) &
	rescanner=$!
	sleep 1
	range=$(awk 'NR == 3 { print substr($1, 3) }' "/sys/bus/pci/devices/$a1/resource" 2>/dev/null)
	grep -q "${range#"${range%%[!0]*}"}.*peerdirect" /proc/iomem
	res $? "the BAR stays requested while $who"
	[ "$mode" = hold ] && hot_add_while_held
	touch "$hold/release"
	wait "$holder"
	# The remover's write returns once remove() has finished.  The device's
	# sysfs directory is no witness: the rescan started above was waiting
	# for the same lock and may already have added the function back.
	for _ in $(seq 1 100); do kill -0 "$remover" 2>/dev/null || break; sleep 0.1; done
	! kill -0 "$remover" 2>/dev/null && wait "$remover"
	res $? "the removal completes once the holder lets go ($mode)"
	# The rescan waiting behind the removal adds the function back and
	# binds it (6.1's pci_bus_add_device() probes whatever
	# drivers_autoprobe says), mapping the BAR anew: unbind that binding,
	# whose remove() has no holder to wait for.
	wait "$rescanner"
	echo 1 > /sys/bus/pci/rescan
	sleep 1
	[ -e "/sys/bus/pci/devices/$a1/driver" ] &&
		echo "$a1" > "/sys/bus/pci/devices/$a1/driver/unbind"
	# fd 7 still holds the removed device's structures: its kernel
	# write-combining mapping of the BAR must be gone with its remove()
	# all the same, or the PAT entry turns the next user's uncached
	# mapping of the range write-combining (review N2).
	if [ -r "$pat_list" ]; then
		pat=$(grep -a "mem $start-.*write-combining" "$pat_list")
		[ -z "$pat" ]
		res $? "no write-combining PAT entry for the removed BAR at $start while a file is open${pat:+ ($pat)}"
		# The function, unbound: its sysfs resource2 mapped by a user
		# is uncached, not write-combining.
		/pd/selftests/unplug memtype "/sys/bus/pci/devices/$a1/resource2"
		res $? "a new mapping of the function's BAR after the removal is uncached-minus (BAR at $(awk 'NR == 3 { print $1 }' "/sys/bus/pci/devices/$a1/resource"), was $start)"
	else
		# The debug tier's kernel (tinyconfig based) has none.
		res_skip "no write-combining PAT entry for the removed BAR" "no $pat_list (no x86 PAT, or not its debugfs)"
		res_skip "a new mapping of the function's BAR after the removal is uncached-minus" "no $pat_list"
	fi
	exec 7<&-
	echo "$a1" > /sys/bus/pci/drivers_probe
	sleep 1
	[ -n "$(dev_of "$a1")" ]
	res $? "rescan rebinds the device ($(ls /dev/peerdirect* 2>/dev/null | tr '\n' ' '))"
	[ "$mode" = hold ] && hot_added_after_release
}
ivshmem_devices() {
	local d
	for d in /sys/bus/pci/devices/*; do
		[ "$(cat "$d/vendor")" = 0x1af4 ] && [ "$(cat "$d/device")" = 0x1110 ] && basename "$d"
	done
}
# A real hot-add while the removal waits: the host adds an ivshmem device
# through QEMU's monitor (scripts/check.sh watches for the marker).  The PCI
# core serializes hotplug behind the removal we block, so nothing new may
# appear while the BAR is held; once released, the new device comes.
# The hot-plug notification is ACPI GPE 1 on QEMU's pc machine (PIIX4):
# its count going up says the event reached the guest while the BAR is
# held; nothing new may have appeared by then.
gpe_count() { awk '{ print $1 }' /sys/firmware/acpi/interrupts/gpe01 2>/dev/null || echo 0; }
hot_add_while_held() {
	local new gpe0 gpe=0
	known=$(ivshmem_devices | tr '\n' ' ')
	gpe0=$(gpe_count)
	echo "PD_HOTADD_READY"
	for _ in $(seq 1 120); do
		gpe=$(gpe_count)
		[ "$gpe" -gt "$gpe0" ] && break
		sleep 0.5
	done
	sleep 3
	new=$(ivshmem_devices | grep -vxF -f <(echo "$known" | tr ' ' '\n' | grep .) || true)
	[ "$gpe" -gt "$gpe0" ]
	res $? "the hot-add notification reached the guest while the BAR is held (GPE 1: $gpe0 -> $gpe)"
	[ -z "$new" ]
	res $? "a device hot-added while the BAR is held waits for the removal (${new:-none appeared})"
}
hot_added_after_release() {
	local new=
	for _ in $(seq 1 60); do
		new=$(ivshmem_devices | grep -vxF -f <(echo "$known" | tr ' ' '\n' | grep .) || true)
		[ -n "$new" ] && break
		sleep 0.5
	done
	[ -n "$new" ] && [ -n "$(dev_of "$new")" ]
	res $? "the hot-added device appears and binds once the holder let go (${new:-none})"
}
# N9: a BAR export has no kernel vmap (CPU MMIO that no removal, reset or
# AER could stop), so there is none to hold the removal: refused at once.
vh=$(mktemp -d)
vout=$(timeout 30 /pd/selftests/unplug hold-vmap "$(dev_of "$a1")" "$vh" 2>&1)
vrc=$?
[ "$vrc" = 1 ] && [[ "$vout" == *"Invalid argument"* ]]
res $? "a kernel vmap of a BAR export is refused with EINVAL (exit $vrc: $vout)"
rm -rf "$vh"
removal_waits hold "a pinned importer maps the BAR"
removal_waits hold-revoking "a revocation another call marked is unfinished"
rmmod pd_test_importer && rmmod peerdirect
res $? "modules unload after device loss (the hot-added one too)"
echo "# Totals: pass:$pass fail:$fail xfail:0 xpass:0 skip:$skip error:0"
