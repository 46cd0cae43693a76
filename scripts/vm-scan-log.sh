#!/bin/bash
# Scan a VM console log (or a dmesg dump) for kernel problem reports.
#
#   scripts/vm-scan-log.sh [--allow REGEX]... [--allow-file FILE] [--any-line]
#                          [--quiet] LOGFILE
#
# Exit 0: nothing found.  Exit 1: found (the matching lines go to stdout
# unless --quiet).  Exit 2: usage error.
#
# Only kernel lines count: those with a printk timestamp ("[    1.234567] ",
# vm-run.sh boots with printk.time=1), so a test that prints "BUG:" about
# its own state is not mistaken for the kernel.  kmemleak reports read from
# debugfs carry no timestamp; the VM init prefixes them with "PD_KMEMLEAK: ".
# --any-line drops the timestamp requirement (for logs from elsewhere).
# --allow REGEX (extended regex, repeatable) drops matching lines: known noise.
# --allow-file FILE reads more such regexes, one a line.
#
# A test that drives a memory cgroup into its limit on purpose (selftests
# limits.c) writes "pd-selftest: expected oom-kill begin" and "... end" to
# /dev/kmsg around it.  Between the two, and only after the kernel said
# "invoked oom-killer" there, the OOM report's "Call Trace:" lines are not
# problems; anything else (BUG, KASAN, WARNING, a trace outside an OOM
# report) still is.
set -euo pipefail

usage() {
	sed -n '2,17s/^# \{0,1\}//p' "$0" >&2
	exit 2
}

allow=()
any=0
quiet=0
while [ $# -gt 0 ]; do
	case "$1" in
	--allow) [ $# -ge 2 ] || usage; allow+=("$2"); shift 2 ;;
	--allow-file)
		[ $# -ge 2 ] || usage
		while IFS= read -r re; do
			[ -n "$re" ] && allow+=("$re")
		done < "$2"
		shift 2 ;;
	--any-line) any=1; shift ;;
	--quiet) quiet=1; shift ;;
	-h|--help) usage ;;
	--) shift; break ;;
	-*) usage ;;
	*) break ;;
	esac
done
[ $# -eq 1 ] || usage
log=$1
[ -r "$log" ] || { echo "vm-scan-log: cannot read $log" >&2; exit 2; }

# What a kernel says when something is wrong.  Lockdep and KASAN reports
# start with "WARNING:"/"BUG:", but name them anyway in case the wording moves.
problems='BUG:|KASAN:|WARNING:|possible circular locking|possible recursive locking|UBSAN:|unreferenced object|kmemleak: .*new suspected memory leak|Oops|general protection fault|Call Trace:|Kernel panic|kernel BUG at'
if [ "$any" = 1 ]; then
	pat="($problems)"
else
	pat="^(\[ *[0-9]+\.[0-9]+\] .*($problems)|PD_KMEMLEAK: unreferenced object)"
fi

# The console log can contain the same kernel line twice (console and the
# dmesg dump init prints on trouble): print each once, in order.
hits=$(tr -d '\r' < "$log" | awk '
	/pd-selftest: expected oom-kill begin/ { win = 1; oom = 0 }
	/pd-selftest: expected oom-kill end/ { win = 0 }
	win && /invoked oom-killer/ { oom = 1 }
	win && oom && /Call Trace:/ { next }
	{ print }' | grep -aE "$pat" | awk '!seen[$0]++' || true)
for re in ${allow[@]+"${allow[@]}"}; do
	[ -n "$hits" ] || break
	hits=$(printf '%s\n' "$hits" | grep -avE -- "$re" || true)
done

[ -n "$hits" ] || exit 0
[ "$quiet" = 1 ] || printf '%s\n' "$hits"
exit 1
