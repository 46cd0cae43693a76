#!/bin/bash
# Runs inside the VM for the bar part of scripts/check.sh, with two
# ivshmem-plain functions and the module loaded with sim_devices=0 and
# without bind_ivshmem, so that nothing binds them unless asked:
#   - pdctl bind by address, by vendor:device; a module reload keeps the
#     binding (driver_override persists); unbind clears it;
#   - a function held by another driver (pci-stub) is refused, and --force
#     takes it, saying so; the errors: no such device (3), bad name (2),
#     module not loaded (3), not root (4);
#   - /etc/peerdirect/devices.conf through the udev helper, called as the
#     rule 61-peerdirect-bind.rules calls it: on a function's add (the
#     module loaded on demand), on the module's add, held functions left
#     alone unless the line says force;
#   - pdctl topo (two PCI devices x a veth and rxe) and pdctl ps, their
#     shape in text and JSON.
# The payload holds bin/pdctl (the static VM build) and peerdirect-bind.
set -u
cd /pd || exit 1
pdctl=/pd/bin/pdctl
helper=/pd/peerdirect-bind
ko=/pd/ko/peerdirect.ko
source /pd/lib/vm-tap.sh
source /pd/lib/vm-net-setup.sh

tap_plan 24

mapfile -t fns < <(for d in /sys/bus/pci/devices/*; do
	[ "$(cat "$d/vendor")" = 0x1af4 ] && [ "$(cat "$d/device")" = 0x1110 ] && echo "${d##*/}"
done)
if [ "${#fns[@]}" -lt 2 ]; then
	echo "# need two ivshmem functions, found ${#fns[@]}"
	exit 1
fi
a0=${fns[0]}
a1=${fns[1]}
drv_of() { [ -L "/sys/bus/pci/devices/$1/driver" ] && basename "$(readlink "/sys/bus/pci/devices/$1/driver")" || echo none; }
state() { echo "$1 driver=$(drv_of "$1") override=$(cat "/sys/bus/pci/devices/$1/driver_override")"; }
run() { local log=$1; shift; timeout 60 "$@" > "$log" 2>&1; }
# The last state of both functions, appended to a log for check's regexes.
note() { { state "$a0"; state "$a1"; } >> "$1"; }

insmod "$ko" sim_devices=0 || exit 1

# ---- bind, reload, unbind ---------------------------------------------------
run /tmp/b1 "$pdctl" bind "$a0"; rc=$?; note /tmp/b1
check "bind by address: exit 0, bound to peerdirect through driver_override" 0 $rc /tmp/b1 \
	"^$a0: bound" "^$a0 driver=peerdirect override=peerdirect" "^$a1 driver=none"
run /tmp/b2 "$pdctl" list; rc=$?
check "the bound function is a pci-bar device in pdctl list" 0 $rc /tmp/b2 'pci-bar'
run /tmp/b3 "$pdctl" bind --json "$a0"; rc=$?
check "bind again, --json after the command: already bound, exit 0" 0 $rc /tmp/b3 \
	'"action": *"bound"' 'already bound' '^\{"devices"'
rmmod peerdirect && insmod "$ko" sim_devices=0
: > /tmp/b4; note /tmp/b4
check "module reload: driver_override persists, the function is bound again" 0 0 /tmp/b4 \
	"^$a0 driver=peerdirect override=peerdirect" "^$a1 driver=none"
run /tmp/b5 "$pdctl" unbind "$a0"; rc=$?; note /tmp/b5
check "unbind: exit 0, no driver, driver_override cleared" 0 $rc /tmp/b5 \
	"^$a0: unbound" "^$a0 driver=none override=\(null\)"
rmmod peerdirect && insmod "$ko" sim_devices=0
: > /tmp/b6; note /tmp/b6
check "module reload after unbind: the function stays unbound" 0 0 /tmp/b6 "^$a0 driver=none"

# ---- another driver holds it ------------------------------------------------
stub=
if modprobe pci-stub 2>/dev/null || [ -d /sys/bus/pci/drivers/pci-stub ]; then
	echo pci-stub > "/sys/bus/pci/devices/$a1/driver_override"
	echo "$a1" > /sys/bus/pci/drivers_probe
	[ "$(drv_of "$a1")" = pci-stub ] && stub=1
fi
if [ -n "$stub" ]; then
	run /tmp/s1 "$pdctl" bind "$a1"; rc=$?; note /tmp/s1
	check "held by pci-stub: refused, exit 1, names the driver and --force" 1 $rc /tmp/s1 \
		"held by driver pci-stub" '--force' "^$a1 driver=pci-stub"
	run /tmp/s2 "$pdctl" bind --force 1af4:1110; rc=$?; note /tmp/s2
	check "bind --force VENDOR:DEVICE: both functions, says what it unbound" 0 $rc /tmp/s2 \
		"^$a1: unbound from pci-stub \(--force\)" "^$a0 driver=peerdirect" \
		"^$a1 driver=peerdirect override=peerdirect"
else
	skip "held by pci-stub: refused" "no pci-stub driver in this kernel"
	skip "bind --force VENDOR:DEVICE" "no pci-stub driver in this kernel"
	"$pdctl" bind 1af4:1110 > /dev/null 2>&1
fi

# ---- topo and ps while both are bound --------------------------------------
ip link add va type veth peer name vb 2>/dev/null && ip link set va up && ip link set vb up
nics=(--nic va)
if modprobe rdma_rxe 2>/dev/null && rdma link add rxe0 type rxe netdev va 2>/dev/null; then
	nics+=(--nic rxe0)
fi
run /tmp/t1 "$pdctl" topo "${nics[@]}"; rc=$?
check "topo: a row per device, a column per NIC, the legend" 0 $rc /tmp/t1 \
	'^ +va' '^peerdirect0 +- [=x?] [a-z]+' '^peerdirect1 ' '^  PIX ' '^  SYS '
run /tmp/t2 "$pdctl" topo --json "${nics[@]}"; rc=$?
check "topo --json: devices with their PCI address, NICs, a pair each" 0 $rc /tmp/t2 \
	"\"pci\": *\"($a0|$a1)\"" '"name": *"va"' '"relation": *null' '"numa_affinity": *"' \
	'"verdict": *"[a-z]+"'
run /tmp/t3 "$pdctl" topo --nic nosuchnic; rc=$?
check "topo --nic that does not exist: exit 3" 3 $rc /tmp/t3 'no NIC nosuchnic'
run /tmp/p1 "$pdctl" ps; rc=$?
check "ps: header and the source it used" 0 $rc /tmp/p1 '^DEVICE +PID +COMM' 'source: LIST of (allocations|exports)'
run /tmp/p2 "$pdctl" ps --json; rc=$?
check "ps --json: source, processes and the memory not attributed per device" 0 $rc /tmp/p2 \
	'"source": *"(allocations|exports)"' '"processes": *\[' '"not_attributed"' '"device": *"peerdirect1"'

# ---- errors -------------------------------------------------------------------
run /tmp/e1 "$pdctl" bind 0000:ff:1f.7; rc=$?
check "bind of a function that does not exist: exit 3" 3 $rc /tmp/e1 'no PCI device 0000:ff:1f.7'
run /tmp/e2 "$pdctl" bind not-a-device; rc=$?
check "bind of a malformed name: exit 2" 2 $rc /tmp/e2 'neither a PCI address'
if command -v setpriv > /dev/null; then
	run /tmp/e3 setpriv --reuid 65534 --regid 65534 --clear-groups "$pdctl" bind "$a0"; rc=$?
	check "bind as a user: exit 4, says root is needed" 4 $rc /tmp/e3 'needs root'
else
	skip "bind as a user: exit 4" "no setpriv in the VM"
fi
"$pdctl" unbind "$a0" "$a1" > /dev/null 2>&1
rmmod peerdirect
run /tmp/e4 "$pdctl" bind "$a0"; rc=$?
check "bind without the module: exit 3, says to load it" 3 $rc /tmp/e4 'module is not loaded' \
	'modprobe peerdirect'

# ---- devices.conf through the udev helper ------------------------------------
mkdir -p /pd/shim
# The module comes from /pd/ko, not modules.dep: a modprobe that knows it.
cat > /pd/shim/modprobe <<EOF
#!/bin/bash
for a; do
	[ "\$a" = peerdirect ] && exec insmod $ko sim_devices=0 >> /tmp/shim.log 2>&1
done
exec modprobe "\$@"
EOF
chmod +x /pd/shim/modprobe
export PEERDIRECT_CONF=/tmp/devices.conf
printf '# test\n%s   # the first ivshmem\n' "$a0" > "$PEERDIRECT_CONF"
run /tmp/u1 env PEERDIRECT_MODPROBE=/pd/shim/modprobe ACTION=add SUBSYSTEM=pci "$helper" pci "$a0"; rc=$?
run /tmp/u1b env PEERDIRECT_MODPROBE=/pd/shim/modprobe ACTION=add SUBSYSTEM=pci "$helper" pci "$a1"; rc2=$?
note /tmp/u1
cat /tmp/shim.log >> /tmp/u1 2>/dev/null
check "udev add of a listed function: override set, module loaded on demand, bound" 0 $((rc + rc2)) \
	/tmp/u1 "driver_override set; loading peerdirect" "^$a0 driver=peerdirect override=peerdirect" \
	"^$a1 driver=none override=\(null\)"
"$pdctl" unbind "$a0" > /dev/null 2>&1
run /tmp/u2 env ACTION=add SUBSYSTEM=module "$helper" all; rc=$?; note /tmp/u2
check "udev add of the module: binds every listed function, leaves the rest" 0 $rc /tmp/u2 \
	"^$a0 driver=peerdirect" "^$a1 driver=none"
if [ -n "$stub" ]; then
	"$pdctl" unbind "$a0" > /dev/null 2>&1
	echo pci-stub > "/sys/bus/pci/devices/$a1/driver_override"
	echo "$a1" > /sys/bus/pci/drivers_probe
	printf '1af4:1110\n' > "$PEERDIRECT_CONF"
	run /tmp/u3 "$helper" all; rc=$?; note /tmp/u3
	check "listed by vendor:device, one held by pci-stub: left to it, logged, exit 1" 1 $rc \
		/tmp/u3 "$a1 is held by pci-stub: left to it" "^$a0 driver=peerdirect" \
		"^$a1 driver=pci-stub"
	printf '1AF4:1110 force\n' > "$PEERDIRECT_CONF"
	run /tmp/u4 "$helper" all; rc=$?; note /tmp/u4
	check "the line says force: taken from pci-stub" 0 $rc /tmp/u4 \
		"$a1 unbound from pci-stub \(force\)" "^$a1 driver=peerdirect"
else
	skip "held by pci-stub, listed" "no pci-stub driver in this kernel"
	skip "the line says force" "no pci-stub driver in this kernel"
fi
if [ -n "$stub" ]; then
	# A vendor module loaded by one listed function's event takes every
	# function it matches that has no override yet: the first event must
	# claim the listed siblings too.  pci-stub's new_id stands in for it.
	"$pdctl" unbind "$a0" "$a1" > /dev/null 2>&1
	printf '1af4:1110\n' > "$PEERDIRECT_CONF"
	run /tmp/u7 "$helper" pci "$a0"; rc=$?
	echo "1af4 1110" > /sys/bus/pci/drivers/pci-stub/new_id 2>> /tmp/u7
	"$helper" pci "$a1" >> /tmp/u7 2>&1 || rc=$((rc + 10))
	echo "1af4 1110" > /sys/bus/pci/drivers/pci-stub/remove_id 2> /dev/null
	note /tmp/u7
	check "the first add event claims the listed siblings before a vendor module can" 0 $rc \
		/tmp/u7 "^$a0 driver=peerdirect" "^$a1 driver=peerdirect"
else
	skip "the first add event claims the listed siblings" "no pci-stub driver in this kernel"
fi
"$pdctl" unbind "$a0" "$a1" > /dev/null 2>&1
printf '0000:zz:00.0\n%s forse\n' "$a0" > "$PEERDIRECT_CONF"
run /tmp/u5 "$helper" all; rc=$?; note /tmp/u5
# the same file on a function's add event: nothing bound, nothing said
run /tmp/u5b "$helper" pci "$a0"
! grep -q 'line ignored' /tmp/u5b || rc=noisy
check "malformed lines: named by 'all', ignored (a misspelt option binds nothing), quiet per add event" \
	0 "$rc" /tmp/u5 "'0000:zz:00.0' is neither" "unknown option 'forse'" "^$a0 driver=none"
run /tmp/u6 "$helper" bogus; rc=$?
check "the helper's usage error: exit 2" 2 $rc /tmp/u6 'usage: peerdirect-bind'

"$pdctl" unbind "$a0" "$a1" > /dev/null 2>&1
rmmod peerdirect 2>/dev/null
tap_done
