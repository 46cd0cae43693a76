#!/bin/bash
# Send one QMP command to a VM started with scripts/vm-run.sh --qmp SOCK.
#
#   scripts/vm-qmp.sh [--wait-event NAME] [--timeout SECS] SOCK COMMAND-JSON
#
# Example: scripts/vm-qmp.sh --wait-event DEVICE_DELETED /tmp/q.sock \
#              '{"execute":"device_del","arguments":{"id":"ivshmem0"}}'
#
# Waits for the socket to appear, negotiates capabilities, sends the command
# and prints its reply (one JSON line) on stdout.  --wait-event also waits for
# that asynchronous event (device_del only starts the unplug; the guest has
# to answer the ACPI request) and prints it.  Events seen meanwhile go to
# stderr.  Exit 0 on a "return" reply, 1 on "error" or timeout.
set -euo pipefail

usage() {
	sed -n '2,13s/^# \{0,1\}//p' "$0" >&2
	exit 2
}

event=
secs=30
while [ $# -gt 0 ]; do
	case "$1" in
	--wait-event) event=${2:?}; shift 2 ;;
	--timeout) secs=${2:?}; shift 2 ;;
	-h|--help) usage ;;
	*) break ;;
	esac
done
[ $# -eq 2 ] || usage
sock=$1
cmd=$2

deadline=$((SECONDS + secs))
until [ -S "$sock" ]; do
	[ "$SECONDS" -lt "$deadline" ] || { echo "vm-qmp: no socket $sock" >&2; exit 1; }
	sleep 0.2
done

coproc QMP { exec socat - "UNIX-CONNECT:$sock"; }
trap 'kill "$QMP_PID" 2>/dev/null || true' EXIT

# read_until REGEX: read QMP lines until one matches; print it.
read_until() {
	local line left
	while :; do
		left=$((deadline - SECONDS))
		[ "$left" -gt 0 ] || { echo "vm-qmp: timed out waiting for $1" >&2; return 1; }
		IFS= read -r -t "$left" line <&"${QMP[0]}" || { echo "vm-qmp: connection closed" >&2; return 1; }
		line=${line%$'\r'}
		if [[ "$line" =~ $1 ]]; then
			printf '%s\n' "$line"
			return 0
		fi
		printf 'vm-qmp: %s\n' "$line" >&2
	done
}

read_until '"QMP"' > /dev/null
echo '{"execute":"qmp_capabilities"}' >&"${QMP[1]}"
read_until '^\{"(return|error)"' > /dev/null
printf '%s\n' "$cmd" >&"${QMP[1]}"
reply=$(read_until '^\{"(return|error)"')
printf '%s\n' "$reply"
[[ "$reply" == '{"return"'* ]] || exit 1
if [ -n "$event" ]; then
	read_until "\"event\": *\"$event\""
fi
