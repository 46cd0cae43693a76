#!/bin/bash
# The support matrix, written from the results of the last `make check`
# (build/check/results.tsv and the shim logs' "# matrix:" rows), never by
# hand.  `make support-matrix` puts it in Documentation/support-matrix.md.
#
#   scripts/support-matrix.sh [CHECK_DIR]     markdown on stdout
set -euo pipefail
dir=${1:-build/check}
res=$dir/results.tsv
[ -s "$res" ] || { echo "support-matrix: no $res (run make check first)" >&2; exit 1; }

echo "# Support matrix"
echo
echo "Written by scripts/support-matrix.sh from the \`make check\` run of"
echo "$(date -u -r "$res" '+%Y-%m-%d %H:%M UTC') on $(uname -m), $(nproc) cores.  Do not edit by hand."
echo
echo "## Kernel tiers"
echo
echo "Each cell is passed/failed/skipped for that part (W=1 build, selftests on the simulated"
echo "and the ivshmem BAR backend, PCI unplug, libpeerdirect between two processes, pdctl doctor's verdicts)."
echo
echo "| tier | kernel | from | build W=1 | sim | bar | unplug | shim | doctor |"
echo "|---|---|---|---|---|---|---|---|---|"
awk -F'\t' '
NR == 1 { next }
$2 ~ /^k/ || $1 == $2 {
	t = $2
	if (!(t in seen)) { seen[t] = 1; order[++n] = t; kern[t] = $3; src[t] = $4 }
	part = $1; sub("^" t "-", "", part)
	if ($1 == $2) part = "tier"
	cell[t, part] = $5 "/" $6 "/" $7
}
END {
	for (i = 1; i <= n; i++) {
		t = order[i]
		if ((t, "tier") in cell) {
			printf "| %s | - | %s | %s | | | | | |\n", t, "not reachable or not prepared", cell[t, "tier"]
			continue
		}
		printf "| %s | %s | %s |", t, kern[t], src[t]
		split("build sim bar unplug shim doctor", parts, " ")
		for (j = 1; j <= 6; j++) {
			c = ((t, parts[j]) in cell) ? cell[t, parts[j]] : "not run"
			printf " %s |", c
		}
		printf "\n"
	}
}' "$res"

echo
echo "## Userspace stacks (host tests, no VM)"
echo
echo "| name | from | passed | failed | skipped |"
echo "|---|---|---|---|---|"
awk -F'\t' 'NR > 1 && $1 ~ /^(user|stack)/ { printf "| %s | %s | %d | %d | %d |\n", $1, $4, $5, $6, $7 }' "$res"

echo
echo "## Data path: kernel x backend x libfabric x provider"
echo
echo "From the shim part (simulated backend; the exporter is the module, the"
echo "two processes are in one VM).  \"asked\" is the path requested (auto lets"
echo "the library choose), \"took\" is what the library reported."
echo
echo "| kernel | backend | libfabric | provider | asked | took | result | the library's reason |"
echo "|---|---|---|---|---|---|---|---|"
for log in "$dir"/k*-shim.log; do
	[ -f "$log" ] || continue
	kernel=$(awk -F'\t' -v n="$(basename "$log" .log)" '$1 == n { print $3 }' "$res")
	grep -a '^# matrix: ' "$log" | sed 's/^# matrix: //' |
		awk -v k="${kernel:-?}" '{
			why = $0; sub(/^.* why=/, "", why); gsub(/\|/, "\\|", why)
			# key=value fields come before why=, whose text may hold anything
			head = $0; sub(/ why=.*$/, "", head)
			split("", v); nf = split(head, f, " ")
			for (i = 1; i <= nf; i++) {
				eq = index(f[i], "=")
				if (eq) v[substr(f[i], 1, eq - 1)] = substr(f[i], eq + 1)
			}
			printf "| %s | sim | %s | %s | %s | %s | %s | %s |\n", k, v["libfabric"], v["provider"], v["asked"], v["took"], v["result"], why
		}'
done

echo
echo "## Not exercised here"
echo
echo "- Real hardware: Gaudi HBM BARs, EFA, mlx5, irdma.  ivshmem stands in for the BAR, rxe for the"
echo "  RDMA NIC; rxe has no dma-buf MRs on any kernel here, so verbs is only seen falling back."
echo "- A PCI importer accepted over a real PCIe switch; IOMMU-backed mapping (no vIOMMU in the VM)."
echo "- The library's data path on the BAR backend: the shim part loads the simulated backend;"
echo "  BAR exports are covered by the selftests (sim/bar columns above), not by two-process transfers."
echo "- shm's default large-message path (CMA, process_vm_readv) on a dma-buf mapping: it cannot pin"
echo "  the exporter's VM_PFNMAP pages, so the dmabuf rows above run shm with FI_SHM_DISABLE_CMA=1;"
echo "  the library's auto path does not choose dmabuf on shm for that reason."
