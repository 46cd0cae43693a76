#!/bin/bash
# Run a command inside a Debian root (scripts/stack-root.sh) with /proc,
# /sys and /dev (so /dev/shm for the shm provider) mounted for its duration.
#
#   scripts/in-root.sh ROOT COMMAND [ARGS...]
#
# The mounts are private to this command: it runs in a new mount namespace,
# so nothing is left mounted in the root if it is killed.
set -euo pipefail
root=${1:?usage: in-root.sh ROOT COMMAND...}
shift
[ $# -ge 1 ] || { echo "usage: in-root.sh ROOT COMMAND..." >&2; exit 2; }
[ -x "$root/bin/sh" ] || { echo "in-root: $root is not a root" >&2; exit 2; }
exec unshare --mount --propagation private /bin/bash -c '
	set -e
	root=$1
	shift
	mount -t proc proc "$root/proc"
	mount --rbind /sys "$root/sys"
	mount --rbind /dev "$root/dev"
	exec chroot "$root" /usr/bin/env -i PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin \
		HOME=/root LC_ALL=C TERM=dumb "$@"
' in-root "$root" "$@"
