#!/bin/bash
# make.sh: how the fixtures in this directory were produced (see README.md).
# Runs fio on image files under /tmp, never on a device. Takes about 3 minutes; replaces lab19/, pitfalls/ and bad/.
# Usage: fio/testdata/real/make.sh [OUTDIR]   (default: the directory of this script)
set -eu
out=${1:-$(cd "$(dirname "$0")" && pwd)}
work=/tmp/pvediskcheck-fio
fio=/usr/bin/fio
rm -rf "$work" "$out/lab19" "$out/pitfalls" "$out/bad"
mkdir -p "$work" "$out/lab19" "$out/pitfalls" "$out/bad"
area=256M

# Lab 19's method on two labels, one per ioengine; libaio writes json, io_uring json+.
# Each label has its own image file, filled once (the precondition pass), then
# three runs of every job; the labels alternate within each run.
fmt_libaio=json fmt_io_uring=json+
for lab in libaio io_uring; do
	fallocate -l $area "$work/$lab.img"
	fmt=fmt_$lab
	$fio --name=fill --filename="$work/$lab.img" --rw=write --bs=1M --size=$area --direct=1 \
		--ioengine=$lab --iodepth=16 --output-format=${!fmt} --output="$out/lab19/$lab-fill.json" >/dev/null
done
for run in 1 2 3; do
	for lab in libaio io_uring; do
		fmt=fmt_$lab
		for job in "rr4k randread 4k 32" "rw4k randwrite 4k 32" "rw4kqd1 randwrite 4k 1" \
			"sr1m read 1M 16" "sw1m write 1M 16" "sync randwrite 4k 1 --fsync=1"; do
			set -- $job
			$fio --name=$1 --filename="$work/$lab.img" --rw=$2 --bs=$3 --iodepth=$4 ${5:-} \
				--size=$area --direct=1 --ioengine=$lab --time_based --runtime=3 --ramp_time=1 \
				--output-format=${!fmt} --output="$out/lab19/$lab-$1-$run.json" >/dev/null
		done
	done
done

# Pitfalls, one file each, names that do not follow <label>-<job>-<run>.json.
fallocate -l $area "$work/fresh.img" # allocated, never written
$fio --name=unwritten --filename="$work/fresh.img" --rw=randread --bs=4k --iodepth=32 --size=$area \
	--direct=1 --ioengine=libaio --time_based --runtime=3 --ramp_time=1 \
	--output-format=json --output="$out/pitfalls/unwritten-read.json" >/dev/null
$fio --name=buffered --filename="$work/libaio.img" --rw=randread --bs=4k --iodepth=1 --size=$area \
	--direct=0 --ioengine=psync --time_based --runtime=2 \
	--output-format=json --output="$out/pitfalls/buffered-read.json" >/dev/null
# psync with iodepth=8: fio prints a "note:" line before the JSON on stdout.
$fio --name=preamble --filename="$work/libaio.img" --rw=randwrite --bs=4k --iodepth=8 --size=$area \
	--direct=1 --ioengine=psync --time_based --runtime=2 --ramp_time=1 \
	--output-format=json >"$out/pitfalls/with-note.json"
$fio --name=mixed --filename="$work/libaio.img" --rw=randrw --rwmixread=70 --bs=4k --iodepth=16 --size=$area \
	--direct=1 --ioengine=libaio --time_based --runtime=3 --ramp_time=1 \
	--output-format=json --output="$out/pitfalls/rwmix.json" >/dev/null
# numjobs=2 without group_reporting: two entries with the same jobname in one file.
$fio --name=twojobs --filename="$work/libaio.img" --rw=randread --bs=4k --iodepth=16 --numjobs=2 --size=$area \
	--direct=1 --ioengine=libaio --time_based --runtime=3 --ramp_time=1 \
	--output-format=json --output="$out/pitfalls/numjobs2.json" >/dev/null

# Percentiles of the total latency only (clat_percentiles=0 lat_percentiles=1).
$fio --name=latpct --filename="$work/libaio.img" --rw=randread --bs=4k --iodepth=16 --size=$area \
	--direct=1 --ioengine=libaio --time_based --runtime=3 --ramp_time=1 --clat_percentiles=0 --lat_percentiles=1 \
	--output-format=json --output="$out/pitfalls/lat-percentiles.json" >/dev/null
# Both output formats: fio's header lines, the JSON, then the normal report.
$fio --name=both --filename="$work/libaio.img" --rw=randwrite --bs=4k --iodepth=16 --size=$area \
	--direct=1 --ioengine=libaio --time_based --runtime=3 --ramp_time=1 \
	--output-format=normal,json >"$out/pitfalls/normal-and-json.json"

# Broken files, cut from or shaped like the real ones.
: >"$out/bad/empty.json"
head -c 2000 "$out/lab19/libaio-rr4k-1.json" >"$out/bad/truncated.json"
printf 'fio: pid=0, err=2/file:filesetup.c:805, func=open(/dev/disk/by-id/nope), error=No such file or directory\n' >"$out/bad/error-only.json"
printf '{"fio version" : "fio-3.33", "jobs" : "none"}\n' >"$out/bad/no-jobs.json"

rm -rf "$work"
