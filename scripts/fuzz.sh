#!/bin/sh
# Runs every Go fuzz target of the module for FUZZTIME each (default 30s).
# `make test` runs their seed corpora as ordinary tests; this explores.
set -eu
cd "$(dirname "$0")/.."
t=${FUZZTIME:-30s}
grep -rl --include='*_test.go' '^func Fuzz' . | sort | while read -r f; do
	dir=$(dirname "$f")
	for fn in $(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' "$f"); do
		echo "== $dir $fn ($t)"
		go test -run XXX -fuzz "^$fn\$" -fuzztime "$t" "$dir"
	done
done
