#!/bin/bash
# The libfabric a VM test runs against (shipped at /pd/lib/vm-libfabric.sh):
# its version decides whether the dmabuf path (FI_MR_DMABUF, 1.20+) exists.
#
#   source /pd/lib/vm-libfabric.sh    sets lfver, prints it as a TAP comment
#   lf_has_dmabuf                      true on libfabric 1.20 or newer

lfver=$(fi_info --version 2>/dev/null | sed -n 's/^libfabric: *//p')
echo "# libfabric ${lfver:-unknown}, kernel $(uname -r)"
lf_has_dmabuf() {
	[ -n "$lfver" ] && [ "$(printf '%s\n1.20.0\n' "$lfver" | sort -V | head -n 1)" = 1.20.0 ]
}
