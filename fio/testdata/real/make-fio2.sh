#!/bin/bash
# make-fio2.sh: how the fixtures in fio2/ were produced (see README.md).
# Builds six fio 2.x releases from fio's own git tags, one on each side of the
# changes of fio's JSON that package fio reads differently (README.md, "fio2/"),
# and runs each on an image file under /tmp, never on a device.
# Not part of make test: the recordings are committed, this says how they were
# made. Needs git, gcc, make, libaio-dev, zlib1g-dev. Takes about 10 minutes
# on 2 cores; replaces fio2/. Nothing of fio's source is kept.
# Usage: fio/testdata/real/make-fio2.sh [OUTDIR]   (default: the directory of this script)
#   FIO_GIT: where to clone fio from (default https://github.com/axboe/fio; a
#   local clone or bare mirror of it gives the same tags)
set -eu
out=${1:-$(cd "$(dirname "$0")" && pwd)}/fio2
work=/tmp/pvediskcheck-fio2
tags="fio-2.0.13 fio-2.2.13 fio-2.18 fio-2.20 fio-2.21 fio-2.99"
rm -rf "$work" "$out"
mkdir -p "$work/compat/linux" "$out"
git clone -q --bare "${FIO_GIT:-https://github.com/axboe/fio}" "$work/fio.git"

# Build flags only, fio's code is not touched. These releases predate the
# headers of this system (glibc 2.36, Linux 6.x UAPI, gcc 12):
# - glibc 2.30 declares gettid() in <unistd.h>, and fio before 3.13 defines its
#   own static one: glibc's is declared under another name first;
# - glibc 2.28 no longer has major()/minor() in <sys/types.h>: <sys/sysmacros.h>;
# - fio 2.2's oslib/libmtd.h uses uint8_t without <stdint.h>;
# - <linux/raw.h> left the kernel's headers in 5.14 (raw driver removed); fio
#   includes it for its /dev/raw lookup, which files never reach: the
#   definitions it uses, as the kernel had them;
# - gcc 10 made -fno-common the default; fio 2.x defines globals in headers.
cat >"$work/compat/compat.h" <<'EOF'
#define gettid glibc_gettid
#include <unistd.h>
#undef gettid
#include <stdint.h>
#include <sys/sysmacros.h>
EOF
cat >"$work/compat/linux/raw.h" <<'EOF'
#include <linux/ioctl.h>
#include <linux/types.h>
#define RAW_SETBIND _IO(0xac, 0)
#define RAW_GETBIND _IO(0xac, 1)
struct raw_config_request {
	int raw_minor;
	__u64 block_major;
	__u64 block_minor;
};
EOF
for tag in $tags; do
	src=$work/$tag
	mkdir -p "$src"
	# An archive has no .git: FIO-VERSION-GEN prints the tag's own version.
	git --git-dir="$work/fio.git" archive "$tag" | tar -x -C "$src"
	(
		cd "$src"
		if [ -x configure ]; then ./configure >/dev/null; fi # fio-2.0.13 has none
		make -j2 fio EXTFLAGS="-fcommon -I$work/compat -include $work/compat/compat.h" >build.log 2>&1
	)
	echo "$tag $(git --git-dir="$work/fio.git" rev-parse "$tag^{commit}") built: $("$src/fio" --version)"
done

# Lab 19's jobs (fio/jobs.go LabJobs) on a 128 MiB image per version, written
# once by a fill pass; 3 s runs after a 1 s ramp. rr4k runs twice (two runs of
# one test), the others once; "clones" is numjobs=2 (one jobs[] entry per
# clone), "grouped" the same with group_reporting (one entry).
# Output: JSON then fio's normal report of the same run (json,normal, fio
# 2.2.11+) in the one file; fio-2.0.13 writes JSON only. fio-2.2.13 aborts in
# show_disk_util with two output formats ("Assertion `parent' failed"): it runs
# with --disk_util=0 (no disk_util section; 2.2.13 prints no options).
area=128M
echo "started $(date -u '+%F %T') UTC"
for tag in $tags; do
	fio=$work/$tag/fio img=$work/$tag.img
	fmt=json,normal extra=
	case $tag in
	fio-2.0.13) fmt=json ;;
	fio-2.2.13) extra=--disk_util=0 ;;
	esac
	fallocate -l $area "$img"
	$fio --name=fill --filename="$img" --rw=write --bs=1M --size=$area --direct=1 --ioengine=libaio \
		--iodepth=16 $extra --output-format=$fmt --output="$out/$tag-fill.json" >/dev/null
	for job in "rr4k randread 4k 32" "rw4k randwrite 4k 32" "rw4kqd1 randwrite 4k 1" \
		"sr1m read 1M 16" "sw1m write 1M 16" "sync randwrite 4k 1 --fsync=1" \
		"clones randread 4k 16 --numjobs=2" "grouped randread 4k 16 --numjobs=2 --group_reporting"; do
		set -- $job
		runs=1
		if [ "$1" = rr4k ]; then runs="1 2"; fi
		for run in $runs; do
			$fio --name=$1 --filename="$img" --rw=$2 --bs=$3 --iodepth=$4 ${5:-} ${6:-} \
				--size=$area --direct=1 --ioengine=libaio --time_based --runtime=3 --ramp_time=1 \
				$extra --output-format=$fmt --output="$out/$tag-$1-$run.json" >/dev/null
		done
	done
	rm -f "$img"
done
echo "ended $(date -u '+%F %T') UTC"
rm -rf "$work"
