#!/usr/bin/env bash
# bench-compare.sh [BASE [ROUNDS [BENCH-REGEXP]]] (`make bench-compare`): the
# speed benchmarks of cmd/pvediskcheck (docs/speed.md) for two commits in one
# run: the test binary of BASE (default: the last tag, else HEAD~1) and of the
# working tree, built once each, then run in turn ROUNDS times (default 3),
# so that both meet the same machine, load and QEMU. Each benchmark reports
# its own figures (the tool against its QMP floor, measured in the same
# iteration); this prints each round's figures for both and, per figure, the
# median of the rounds and the ratio working tree / BASE.
# BENCH-REGEXP: the benchmarks (default: the per-command targets).
# Needs what make bench needs (root for the fake node's volumes, QEMU).
set -euo pipefail
cd "$(dirname "$0")/.."
base=${1:-$(git describe --tags --abbrev=0 2>/dev/null || echo HEAD~1)}
rounds=${2:-3}
re=${3:-'^Benchmark(Cache15Disks|CheckAll50VMs|Top50VMs|TopProcess50VMs|Metrics50VMs)$'}
benchtime=${BENCHTIME:-10x}
go=${GO:-go}

work=$(mktemp -d /tmp/pvediskcheck-compare.XXXXXX)
trap 'git worktree remove --force "$work/base" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
git worktree add --detach -q "$work/base" "$base"
# Each test binary builds the CLI from its own package folder (buildBinary
# runs go build in the working directory), so each runs in its own tree.
(cd "$work/base/cmd/pvediskcheck" && $go test -c -tags integration -o "$work/base.test" .)
(cd cmd/pvediskcheck && $go test -c -tags integration -o "$work/head.test" .)
echo "bench-compare: BASE $(git rev-parse --short "$base") against the working tree ($(git rev-parse --short HEAD)$(git diff --quiet || echo ' + changes')), $rounds rounds, -benchtime $benchtime, load $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq 1 "$rounds"); do
	for side in base head; do
		dir=cmd/pvediskcheck
		[ $side = base ] && dir=$work/base/cmd/pvediskcheck
		(cd "$dir" && "$work/$side.test" -test.run XXX -test.bench "$re" -test.benchtime "$benchtime") 2>&1 |
			awk -v side=$side -v r=$r '/^Benchmark/ { printf "%s %s", side, r; for (i = 1; i <= NF; i++) printf " %s", $i; print "" }' | tee -a "$work/rows"
	done
done
printf '%-44s %10s %10s %8s\n' "median of the rounds" BASE tree tree/BASE
# rows: SIDE ROUND NAME N [VALUE UNIT]...
awk '
{ for (i = 5; i < NF; i += 2) { k = $3 " " $(i+1); v[$1, k, ++n[$1, k]] = $i; keys[k] = 1 } }
function med(side, k,   m, i, j, t, a) {
	m = n[side, k]; for (i = 1; i <= m; i++) a[i] = v[side, k, i]
	for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
	return m ? a[int((m + 1) / 2)] : ""
}
END {
	for (k in keys) { b = med("base", k); h = med("head", k)
		printf "%-44s %10s %10s %8s\n", k, b, h, (b > 0 && h != "") ? sprintf("%.2f", h / b) : "-" }
}' "$work/rows" | sort
