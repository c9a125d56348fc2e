#!/bin/bash
# make-failed.sh: how the fixtures in failed/ and shapes/ were produced (see README.md).
# Real fio runs that fail, measure nothing or are stopped, and one with
# unified_rw_reporting: the shapes fio summary must name instead of dropping.
# Runs fio on files under /tmp and on /dev/null and /dev/full (which only
# refuse or swallow I/O), never on a disk. Takes about 10 seconds; replaces failed/ and shapes/.
# Usage: fio/testdata/real/make-failed.sh [OUTDIR]   (default: the directory of this script)
set -u
out=${1:-$(cd "$(dirname "$0")" && pwd)}
work=/tmp/pvediskcheck-fio-failed
fio=/usr/bin/fio
rm -rf "$work" "$out/failed" "$out/shapes"
mkdir -p "$work" "$out/failed" "$out/shapes"
head -c 4M /dev/zero >"$work/area.img"

# fio prints its error line ("fio: pid=..., err=22/file:filesetup.c:805,
# func=open(/dev/null), error=Invalid argument") on stdout before the JSON:
# redirecting stdout keeps it in the file, --output=FILE does not.
# O_DIRECT open of /dev/null: EINVAL before any I/O.
$fio --name=odirect --filename=/dev/null --direct=1 --rw=read --bs=4k --size=1M \
	--output-format=json >"$out/failed/open-einval.json" 2>/dev/null
# Writes to /dev/full: ENOSPC on the first write; --output=FILE, so no error line.
$fio --name=fullwrite --filename=/dev/full --rw=write --bs=4k --size=1M \
	--output-format=json --output="$out/failed/enospc-no-line.json" >/dev/null 2>&1
# Reads work on /dev/full, writes do not: a few reads measured, then ENOSPC.
$fio --name=fullrw --filename=/dev/full --rw=randrw --bs=4k --size=1M \
	--output-format=json >"$out/failed/enospc-partial.json" 2>/dev/null
# The same with continue_on_error=all: fio counts the errors (total_err) and goes on.
$fio --name=coe --filename=/dev/full --rw=write --bs=4k --size=64k --continue_on_error=all \
	--output-format=json >"$out/failed/continue-on-error.json" 2>/dev/null
# A directory as the file: EISDIR while laying it out (fio's line says pid=0).
$fio --name=isdir --filename="$work" --rw=read --bs=4k --size=1M \
	--output-format=json >"$out/failed/eisdir.json" 2>/dev/null
# --exitall: the first job to finish stops the others; "late" never started,
# so it has no I/O and no error.
$fio --exitall --name=quick --filename="$work/area.img" --rw=read --bs=4k --size=1M \
	--name=late --startdelay=3 --filename="$work/area.img" --rw=read --bs=4k --size=1M \
	--output-format=json >"$out/failed/exitall-no-io.json" 2>/dev/null
# Ctrl-C two seconds into a 30 s run: "fio: terminating on signal 2" before the JSON.
$fio --name=stopped --filename="$work/area.img" --rw=randread --bs=4k --size=4M --time_based --runtime=30 \
	--output-format=json >"$out/failed/interrupted.json" 2>/dev/null &
sleep 2
kill -INT $!
wait $!

# unified_rw_reporting=1: reads and writes reported as one "mixed" direction.
$fio --name=unified --filename="$work/area.img" --rw=randrw --bs=4k --size=4M --unified_rw_reporting=1 \
	--output-format=json >"$out/shapes/mixed.json" 2>/dev/null

rm -rf "$work"
