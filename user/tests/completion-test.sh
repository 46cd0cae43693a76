#!/bin/bash
# The bash completion files (user/completion, installed to
# share/bash-completion/completions) sourced in a plain bash, driven as
# readline drives them (COMP_WORDS, COMP_CWORD) against a fake sysfs tree.
# KTAP; run by `make -C user check` through run-tests.sh.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
mkdir -p "$root"/class/misc/peerdirect0 "$root"/class/misc/peerdirect3 \
	"$root"/bus/pci/devices/0000:00:04.0 "$root"/bus/pci/devices/0000:3b:00.0 \
	"$root"/class/infiniband/mlx5_0 "$root"/class/net/eth0 "$root"/class/net/lo
export PDCTL_SYSFS=$root LC_ALL=C
n=0 pass=0 fail=0

# comp FILE FUNC WANT WORD... : completes the last WORD; WANT is the
# sorted, space-separated COMPREPLY.
comp() {
	local file=$1 func=$2 want=$3 got
	shift 3
	got=$(bash --norc --noprofile -c '
		source "$1" || exit 9
		func=$2; shift 2
		COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1))
		"$func"
		printf "%s\n" "${COMPREPLY[@]}" | sort | tr "\n" " "' _ "$here/completion/$file" "$func" "$@")
	got=${got% }
	n=$((n + 1))
	if [ "$got" = "$want" ]; then
		pass=$((pass + 1)); echo "ok $n $file: $* -> $want"
	else
		fail=$((fail + 1)); echo "not ok $n $file: $* -> '$got', want '$want'"
	fi
}

echo "TAP version 13"
echo "1..15"
comp pdctl _pdctl "bind" pdctl bi
comp pdctl _pdctl "doctor" pdctl do
comp pdctl _pdctl "ps" pdctl p
comp pdctl _pdctl "0 3" pdctl -d ''
comp pdctl _pdctl "--allow-sim" pdctl doctor --al
comp pdctl _pdctl "--all" pdctl -d 0 topo --al
comp pdctl _pdctl "eth0 mlx5_0" pdctl topo --nic ''
comp pdctl _pdctl "0000:00:04.0 0000:3b:00.0" pdctl bind --force ''
comp pdctl _pdctl "--force" pdctl bind --f
comp pd-coll _pd_coll "device:0 device:3 memfd" pd-coll --memory ''
comp pd-coll _pd_coll "device:0 device:3 host memfd" pd-coll --net-memory ''
comp pd-coll _pd_coll "--net --net-memory" pd-coll --net
comp pd-coll _pd_coll "rd ring" pd-coll --algo r
comp pd-coll _pd_coll "--rank --rd-max --rendezvous --root" pd-coll --r
comp pd-bench _pd_bench "latency lifecycle" pd-bench l
comp pd-bench _pd_bench "device:0 device:3 memfd" pd-bench bw --memory ''
comp pd-bench _pd_bench "--window" pd-bench --provider tcp latency --wi
echo "# Totals: pass:$pass fail:$fail xfail:0 xpass:0 skip:0 error:0"
[ "$fail" = 0 ]
