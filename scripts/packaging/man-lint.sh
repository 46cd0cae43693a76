#!/bin/bash
# `make man-lint`: the man pages in Documentation/man, linted.
#
#   scripts/packaging/man-lint.sh [PAGE...]     (default: Documentation/man/*)
#
# Per page, "ok" or "not ok":
#   mandoc -Tlint at style level and up: any message fails, except a
#     reference to another project's page that is not installed here
#     (references to pd_*, pd-*, pdctl, peerdirect pages must resolve);
#   man --warnings -l (groff, as lintian runs it): any warning fails.
# SEE ALSO, per page: present; every reference resolves to a page we ship
#   or a well-known one (libfabric's, rdma-core's, the system's: the list
#   is in this script); the pages link each other (tool pages name every
#   tool page, libpeerdirect(3) and peerdirect(4); those two name every tool
#   page; function pages name libpeerdirect(3)).
# Coverage: every function of user/include/peerdirect.h is named by a
# section 3 page, and every tool user/Makefile builds (TOOLS) has a page.
# Ends with "N passed, N failed"; exit status 1 if any failed.
set -uo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top" || exit 1
if [ $# -eq 0 ]; then
	set -- Documentation/man/*.[1-8]
fi
pass=0
fail=0
ok() { pass=$((pass + 1)); echo "ok $*"; }
notok() { fail=$((fail + 1)); echo "not ok $*"; }

for t in mandoc man groff; do
	command -v "$t" > /dev/null || { echo "man-lint: $t missing (apt-get install mandoc man-db groff-base)" >&2; exit 2; }
done

# Our pages in a man tree of their own, so that cross references resolve.
tree=$(mktemp -d)
trap 'rm -rf "$tree"' EXIT
ours=()
for p in "$@"; do
	sec=${p##*.}
	mkdir -p "$tree/man$sec"
	cp "$p" "$tree/man$sec/"
	ours+=("$(basename "$p" ".$sec")($sec)")
done
# and the other names each page documents, as `make install-man` links them
while read -r page alias; do
	sec=${page##*.}
	ln -sf "$page" "$tree/man$sec/$alias"
	ours+=("${alias%.*}($sec)")
done < <(scripts/packaging/man-links.sh "$@")

for p in "$@"; do
	name=$(basename "$p")
	msgs=$(MANPATH=$tree:/usr/share/man mandoc -Tlint -Wstyle "$tree/man${p##*.}/$name" 2>&1 |
		grep -v 'outdated mandoc.db' || true)
	# External references (dlopen(3), fi_mr(3)...) depend on what this
	# machine has installed; ours must be found.
	filtered=$(while IFS= read -r line; do
		[ -n "$line" ] || continue
		if [[ "$line" =~ referenced\ manual\ not\ found:\ Xr\ ([^ ]+)\ ([0-9a-z]+) ]]; then
			ref="${BASH_REMATCH[1]}(${BASH_REMATCH[2]})"
			# not ours by name: another package's page, maybe not here
			[[ " ${ours[*]} " == *" $ref "* || "$ref" =~ ^(pd[_-]|pdctl|libpeerdirect|peerdirect) ]] ||
				continue
		fi
		echo "$line"
	done <<< "$msgs")
	if [ -z "$filtered" ]; then
		ok "mandoc -Tlint $name"
	else
		notok "mandoc -Tlint $name"
		sed "s|$tree/man[0-9]/||; s/^/#   /" <<< "$filtered"
	fi
	warn=$(LC_ALL=C.UTF-8 MANROFFSEQ='' MANWIDTH=80 man --warnings -E UTF-8 -l "$p" 2>&1 > /dev/null)
	if [ -z "$warn" ]; then
		ok "man --warnings $name"
	else
		notok "man --warnings $name"
		sed 's/^/#   /' <<< "$warn"
	fi
done

# SEE ALSO: every page has one; each reference is a page we ship (or a name
# one documents) or a well-known page of the system or of the stack below
# (libfabric's fi_*, rdma-core's ibv_*); and the pages link each other: a
# tool's page (sections 1 and 8) names every other tool's page,
# libpeerdirect(3) and peerdirect(4); those two name every tool's page; a
# function's page names libpeerdirect(3).
external='^(fi_[a-z_]+\([0-9]\)|ibv_[a-z_]+\([0-9]\)|(dlopen|dlsym|pkg-config|gnuplot|mpirun|srun|trace-cmd|modinfo|modprobe|dkms|udevadm|rdma|lspci|numactl|read|poll|mmap|lseek|fstat|ioctl|close)\([0-9]\)|udev\(7\)|dma-buf\(7\))$'
seealso() {	# the NAME(SECTION) references of a page's SEE ALSO section
	awk '/^\.Sh SEE ALSO/ { on = 1; next } /^\.Sh/ { on = 0 } on && /^\.Xr/ { print $2 "(" $3 ")" }' "$1"
}
pageref() { local b=${1##*/}; echo "${b%.*}(${b##*.})"; }
tools=()
for p in "$@"; do
	case "$p" in *.1 | *.8) tools+=("$(pageref "$p")") ;; esac
done
for p in "$@"; do
	name=$(basename "$p")
	me=$(pageref "$p")
	if ! grep -q '^\.Sh SEE ALSO' "$p"; then
		notok "SEE ALSO in $name: the page has no SEE ALSO section"
		continue
	fi
	refs=$(seealso "$p")
	bad=()
	while IFS= read -r r; do
		[ -n "$r" ] || continue
		[[ " ${ours[*]} " == *" $r "* || "$r" =~ $external ]] || bad+=("$r")
	done <<< "$refs"
	want=()
	case "$name" in
	*.1 | *.8) want=("${tools[@]}" "libpeerdirect(3)" "peerdirect(4)") ;;
	libpeerdirect.3 | peerdirect.4) want=("${tools[@]}") ;;
	*.3) want=("libpeerdirect(3)") ;;
	esac
	lacks=()
	for w in "${want[@]}"; do
		[ "$w" = "$me" ] || grep -qxF "$w" <<< "$refs" || lacks+=("$w")
	done
	if [ ${#bad[@]} -eq 0 ] && [ ${#lacks[@]} -eq 0 ]; then
		ok "SEE ALSO in $name: $(wc -l <<< "$refs") references, each a page we ship or a known one"
	else
		notok "SEE ALSO in $name:${bad[*]:+ names no page we ship nor a known one: ${bad[*]};}${lacks[*]:+ lacks ${lacks[*]}}"
	fi
done

# Coverage: functions of the public header, and the tools.
named=$(cat Documentation/man/*.3 2>/dev/null | awk '/^\.Sh NAME/ { on = 1; next } /^\.Sh/ { on = 0 } on && /^\.Nm/ { print $2 }')
missing=()
while IFS= read -r fn; do
	grep -qx "$fn" <<< "$named" || missing+=("$fn")
done < <(sed -n 's/^[a-z].*[ *]\(pd_[a-z0-9_]*\)(.*/\1/p' user/include/peerdirect.h | sort -u)
if [ ${#missing[@]} -eq 0 ]; then
	ok "every function of peerdirect.h has a section 3 page"
else
	notok "functions of peerdirect.h without a page: ${missing[*]}"
fi
missing=()
for tool in $(sed -n 's/^TOOLS := //p' user/Makefile); do
	tool=$(basename "$tool")
	ls Documentation/man/"$tool".[18] > /dev/null 2>&1 || missing+=("$tool")
done
if [ ${#missing[@]} -eq 0 ]; then
	ok "every tool has a man page"
else
	notok "tools without a man page: ${missing[*]}"
fi
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
