#!/bin/bash
# The Debian packages that packaging, its tests and the man-page lint need,
# installed when missing (as scripts/install-deps.sh does for the rest).
#
#   scripts/packaging/deps.sh
set -euo pipefail
pkgs=(
	build-essential dpkg-dev debhelper dh-dkms dkms fakeroot lintian
	libfabric-dev libibverbs-dev pkg-config
	mandoc man-db groff-base
	debootstrap xz-utils kmod
)
missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
	echo "packaging deps: installing ${missing[*]}" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get install -y -qq -o DPkg::Lock::Timeout=600 --no-install-recommends "${missing[@]}" > /dev/null ||
		{ apt-get update -qq && apt-get install -y -qq -o DPkg::Lock::Timeout=600 \
			--no-install-recommends "${missing[@]}" > /dev/null; }
fi
