#!/bin/sh
# /init of the test VM built by scripts/vm-run.sh (busybox sh, PID 1).
#
# Mounts the usual filesystems, runs the guest script under bash with a
# timeout, reports kernel trouble from dmesg/kmemleak, prints
# PD_VM_EXIT=<rc> for the host and powers off.  vm-run.sh writes the
# settings to /etc/pd-vm.conf and the command to /etc/pd-run.sh.
#
# Busybox ash runs its own applets before $PATH (FEATURE_PREFER_APPLETS),
# which is why everything a test runs goes through /bin/bash instead.

PATH=/pd/bin:/pd:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export PATH

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
# What udev would add: bash process substitution needs /dev/fd.
ln -s /proc/self/fd /dev/fd
ln -s /proc/self/fd/0 /dev/stdin
ln -s /proc/self/fd/1 /dev/stdout
ln -s /proc/self/fd/2 /dev/stderr
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /dev/shm
mount -t tmpfs tmpfs /tmp
mount -t tmpfs tmpfs /run
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
exec </dev/null >/dev/console 2>&1

PD_TIMEOUT=600
# shellcheck source=/dev/null
. /etc/pd-vm.conf
# The debug kernel (KASAN, lockdep, kmemleak), for guest scripts that size
# their work by it: one test, here, for all of them.
PD_DEBUG_KERNEL=
[ -e /sys/kernel/debug/kmemleak ] && PD_DEBUG_KERNEL=1
export PD_DEBUG_KERNEL

hostname pdvm
ip link set lo up
echo "PD_VM_BOOTED uptime=$(cut -d' ' -f1 /proc/uptime) kernel=$(uname -r)"

/usr/bin/timeout -k 10 "$PD_TIMEOUT" /bin/bash /etc/pd-run.sh
rc=$?
[ "$rc" = 124 ] && echo "PD_VM: guest script timed out after ${PD_TIMEOUT}s"

# Kernel messages below the console loglevel never reached the serial log:
# look at the whole ring buffer, and dump it if it holds a problem report.
dmesg > /tmp/pd-dmesg.txt
# A kmemleak scan takes ~10 s under TCG; vm-run.sh --no-kmemleak skips it.
if [ -w /sys/kernel/debug/kmemleak ] && ! grep -qw pd.nokmemleak /proc/cmdline; then
	echo scan > /sys/kernel/debug/kmemleak
	sed 's/^/PD_KMEMLEAK: /' /sys/kernel/debug/kmemleak >> /tmp/pd-dmesg.txt
fi
if ! /bin/bash /etc/pd-vm-scan-log.sh --quiet --allow-file /etc/pd-vm-scan-allow /tmp/pd-dmesg.txt; then
	echo "PD_VM_DMESG_BEGIN"
	cat /tmp/pd-dmesg.txt
	echo "PD_VM_DMESG_END"
fi

printf "\nPD_VM_EXIT=%s\n" "$rc"
sync
poweroff -f
