#!/bin/bash
# Every pci_driver id_table in kmod/ must reach modules.alias, or udev and
# modprobe never load the module for the device: MODULE_DEVICE_TABLE(pci,
# TABLE) names it for modpost, and `modinfo -F alias` of the built module
# must list exactly the aliases of the table's entries, decoded from the
# module's ELF (not from the source) the way modpost's file2alias does.
#
# usage: check-devtables.sh SRCDIR KO     ends with "N passed, N failed"
set -uo pipefail
src=$1
ko=$2
[ -f "$ko" ] || { echo "not ok 1 $ko was built"; echo "0 passed, 1 failed"; exit 1; }
pass=0
fail=0
n=0
result() {	# result ok|fail description
	n=$((n + 1))
	if [ "$1" = ok ]; then
		pass=$((pass + 1)); echo "ok $n $2"
	else
		fail=$((fail + 1)); echo "not ok $n $2"
	fi
}

# Whatever a struct pci_driver points .id_table at.
mapfile -t tables < <(cat "$src"/kmod/*.c |
	sed -n 's/^[[:space:]]*\.id_table[[:space:]]*=[[:space:]]*\([A-Za-z_][A-Za-z0-9_]*\).*/\1/p' | sort -u)
grep -q 'struct pci_driver' "$src"/kmod/*.c && [ ${#tables[@]} = 0 ] &&
	result fail "a pci_driver in kmod/ has an id_table"

aliases=$(modinfo -F alias "$ko" | grep '^pci:' | sort)
syms=$(readelf -sW "$ko")
expected=
for t in "${tables[@]}"; do
	if grep -qE "^MODULE_DEVICE_TABLE\(pci, $t\);" "$src"/kmod/*.c; then
		result ok "MODULE_DEVICE_TABLE(pci, $t)"
	else
		result fail "MODULE_DEVICE_TABLE(pci, $t) (found: $(grep -h 'MODULE_DEVICE_TABLE' "$src"/kmod/*.c | tr '\n' ' '))"
	fi
	# modpost's symbol for the table: __mod_pci__T_device_table (to 6.12),
	# __mod_device_table__pci__T or __mod_device_table__kmod_M__pci__T
	# (later).
	# Not `readelf | grep -q`: grep leaves at the first match, readelf
	# dies of SIGPIPE and pipefail fails a correct module.
	if grep -qE "__mod_(device_table__(.*__)?)?pci__${t}(_device_table)?\$" <<<"$syms"; then
		result ok "$t is a pci device table in $(basename "$ko")"
	else
		result fail "$t is a pci device table in $(basename "$ko")"
	fi
	if ! e=$(python3 - "$ko" "$t" <<'PY'
import struct, sys
ko, name = sys.argv[1], sys.argv[2]
d = open(ko, 'rb').read()
# Any kernel's module: ELF32 or ELF64, either byte order (EI_CLASS, EI_DATA).
assert d[:4] == b'\x7fELF' and d[4] in (1, 2) and d[5] in (1, 2), 'not an ELF file'
e = '<' if d[5] == 1 else '>'
if d[4] == 2:
    shoff, = struct.unpack_from(e + 'Q', d, 0x28)
    shentsize, shnum = struct.unpack_from(e + 'HH', d, 0x3a)
    shfmt, symfmt, symsize, ulong = 'IIQQQQIIQQ', 'IBBHQQ', 24, 8
else:
    shoff, = struct.unpack_from(e + 'I', d, 0x20)
    shentsize, shnum = struct.unpack_from(e + 'HH', d, 0x2e)
    shfmt, symfmt, symsize, ulong = 'IIIIIIIIII', 'IIIBBH', 16, 4
secs = [struct.unpack_from(e + shfmt, d, shoff + i * shentsize) for i in range(shnum)]
# struct pci_device_id: six u32, kernel_ulong_t driver_data, u32
# override_only (5.15+), padded to the ulong's alignment.
over_at = 24 + ulong
idsize = (over_at + 4 + ulong - 1) // ulong * ulong
for s in secs:
    if s[1] != 2:		# SHT_SYMTAB
        continue
    strtab = secs[s[6]]
    for off in range(s[4], s[4] + s[5], symsize):
        sym = struct.unpack_from(e + symfmt, d, off)
        if d[4] == 2:
            st_name, info, other, shndx, value, size = sym
        else:
            st_name, value, size, info, other, shndx = sym
        end = d.index(b'\0', strtab[4] + st_name)
        if d[strtab[4] + st_name:end].decode() != name or not size:
            continue
        sec = secs[shndx]
        if sec[1] == 8:		# SHT_NOBITS: all zero, no entry
            sys.exit(0)
        data = d[sec[4] + value:sec[4] + value + size]
        assert size % idsize == 0, 'pci_device_id of %d bytes?' % size
        ANY = 0xffffffff
        for i in range(0, size - idsize, idsize):	# the last entry terminates
            v, dev, sv, sd, cls, mask = struct.unpack_from(e + '6I', data, i)
            over, = struct.unpack_from(e + 'I', data, i + over_at)
            a = 'vfio_pci:' if over else 'pci:'
            for tag, val in (('v', v), ('d', dev), ('sv', sv), ('sd', sd)):
                a += tag + ('*' if val == ANY else '%08X' % val)
            for tag, sh in (('bc', 16), ('sc', 8), ('i', 0)):
                m = (mask >> sh) & 0xff
                a += tag + ('%02X' % ((cls >> sh) & 0xff) if m == 0xff else '*')
            print(a if a.endswith('*') else a + '*')
        sys.exit(0)
sys.exit('no symbol %s in %s' % (name, ko))
PY
); then
		result fail "$t read from $(basename "$ko")"
		continue
	fi
	expected+=$e$'\n'
	echo "# $t: ${e:-no entries}"
done
expected=$(grep -v '^$' <<<"$expected" | grep '^pci:' | sort)
missing=$(comm -23 <(echo "$expected") <(echo "$aliases") | grep -v '^$')
extra=$(comm -13 <(echo "$expected") <(echo "$aliases") | grep -v '^$')
if [ -z "$missing" ] && [ -z "$extra" ]; then
	result ok "modinfo -F alias lists every pci id_table entry (${aliases//$'\n'/ })"
else
	result fail "modinfo -F alias lists every pci id_table entry (missing: ${missing:-none}; not in a table: ${extra:-none})"
fi
if [ -n "$expected" ]; then
	result ok "the id tables name at least one device"
else
	result fail "the id tables name at least one device (nothing to autoload for)"
fi
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
