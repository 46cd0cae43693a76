# SPDX-License-Identifier: MIT
# Sourced by the scripts that run pd-coll against something (coll-vs-mpi,
# coll-scaling, wait-budget), from the tree's top.

# pd-coll: $PD_COLL (a test's own build), else user/build's, made first.
# Not a make run's overrides (O=, CC=) if one started the script.
pdcoll_path() {
	if [ -n "${PD_COLL:-}" ]; then
		echo "$PD_COLL"
	else
		MAKEFLAGS='' MAKELEVEL='' make -s -C user build/pd-coll >/dev/null
		echo user/build/pd-coll
	fi
}

# The median of the numbers on stdin, one per line.
median() { sort -g | awk '{ a[NR] = $1 } END { if (NR) print a[int((NR + 1) / 2)] }'; }

# N CPU hogs (busy loops at the caller's priority) until stop_hogs, which
# the caller's EXIT trap must also call.
hog_pids=()
start_hogs() {
	local h

	for ((h = 0; h < $1; h++)); do
		(trap - EXIT; while :; do :; done) &
		hog_pids+=($!)
	done
}
stop_hogs() {
	((${#hog_pids[@]} == 0)) && return 0
	kill "${hog_pids[@]}" 2>/dev/null || true
	wait "${hog_pids[@]}" 2>/dev/null || true
	hog_pids=()
}
