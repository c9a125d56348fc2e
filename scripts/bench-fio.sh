#!/bin/bash
# bench-fio.sh [N]: wall time of `pvediskcheck fio summary` on N (2,000) fio
# JSON files, next to what a Lab 19 user's riassunto.py pays before doing any
# work: python3 json-loading the same files. The files are copies of the real
# fio 3.33 outputs in fio/testdata/real/lab19 (json and json+) under varied
# Lab 19 names (s000libaio-rr4k-1.json, ...), in a temporary directory.
set -eu
cd "$(dirname "$0")/.."
n=${1:-2000}
runs=3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
${GO:-go} build -o "$tmp/pvediskcheck" ./cmd/pvediskcheck

mkdir "$tmp/res"
src=(fio/testdata/real/lab19/*.json)
for ((i = 0; i < n; i++)); do
	f=${src[i % ${#src[@]}]}
	printf -v name 's%03d%s' $((i / ${#src[@]})) "${f##*/}"
	cp "$f" "$tmp/res/$name"
done
cat "$tmp"/res/* >/dev/null # page cache warm for every contender
size=$(du -sh "$tmp/res" | cut -f1)

secs() { # wall seconds of "$@", output discarded
	local TIMEFORMAT=%3R
	{ time "$@" >/dev/null 2>&1; } 2>&1
}
row() { # label, command...
	local label=$1 t best=
	shift
	printf '%-44s' "$label"
	for ((r = 0; r < runs; r++)); do
		t=$(secs "$@")
		printf '%8s' "$t"
		if [ -z "$best" ] || awk "BEGIN{exit !($t < $best)}"; then best=$t; fi
	done
	printf '%8s s\n' "$best"
}

echo "$n fio JSON files ($size) in $tmp/res, $(nproc) CPUs, page cache warm"
printf '%-44s%8s%8s%8s%10s\n' "" "run 1" "run 2" "run 3" "best"
row "pvediskcheck fio summary (table)" "$tmp/pvediskcheck" fio summary "$tmp/res"
row "pvediskcheck --json fio summary" "$tmp/pvediskcheck" --json fio summary "$tmp/res"
row "python3 json.load only (no summary)" \
	python3 -c 'import json,sys,glob; [json.load(open(f)) for f in glob.glob(sys.argv[1] + "/*.json")]' "$tmp/res"
