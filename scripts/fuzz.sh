#!/bin/sh
# Runs every Go fuzz target of the module for FUZZTIME each (default 30s).
# `make test` runs their seed corpora as ordinary tests; this explores.
#
# The fuzzer minimizes every new interesting input before it goes on, and
# shows "0 execs/sec" meanwhile: minimizing tries every cut of the input,
# so a mutant of a large seed (a 20 KB recorded reply, a 4 KB real-world
# config) at 0.1-0.4 ms an exec held FuzzParseReplies and FuzzParseConfig
# for 20-60 s each (Go's default -fuzzminimizetime 60s). FUZZMINIMIZETIME
# (default 5s) bounds each stretch to that; no input was slow in itself.
set -eu
cd "$(dirname "$0")/.."
t=${FUZZTIME:-30s}
m=${FUZZMINIMIZETIME:-5s}
grep -rl --include='*_test.go' '^func Fuzz' . | sort | while read -r f; do
	dir=$(dirname "$f")
	for fn in $(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' "$f"); do
		echo "== $dir $fn ($t)"
		go test -run XXX -fuzz "^$fn\$" -fuzztime "$t" -fuzzminimizetime "$m" "$dir"
	done
done
