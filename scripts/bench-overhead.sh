#!/usr/bin/env bash
# bench-overhead.sh [ROUNDS [DISK BENCH-FLAGS...]] (`make bench-overhead`, after
# `make deps build`): what `pvediskcheck bench` adds to the wall time of the
# fio runs it makes, and its own CPU (docs/speed.md). It boots Lab 37's VM
# 370 with the end-to-end tier's guest (TCG, fio, qemu-guest-agent;
# scripts/build-guest.sh, cached in /var/cache/pvediskcheck) and times, in
# turn, ROUNDS rounds (default 3) of
#   the tool:  bin/pvediskcheck bench 370 DISK BENCH-FLAGS
#   by hand:   the same fio command lines, from its --dry-run, each started
#              with guest-exec and polled with guest-exec-status every 100 ms
#              until it exits, from its start ("poll") and, again, after a
#              sleep for its ramp and runtime ("sleep") (internal/demo, the
#              project's agent client)
# and prints each round's wall times and ratio (the tool over the faster by
# hand), and the tool's CPU
# (utime+stime from /proc/PID/stat at its exit) as % of one core. Default
# flags: Lab 19's timing (20 s + 3 s ramp) on one job, two runs, a 64 MiB area.
# Takes ROUNDS x about 2.5 minutes; run it under nice -n 19 on a shared machine.
# BIN=PATH times another build of the tool (an older commit's, say); V=1
# prints each round's tool output, stamped, and each fio run's time by hand.
# Clean-up as in demo.sh: the driver's own, then scratch-node-cleanup.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" -ne 0 ]; then
	echo "bench-overhead: needs root (loop devices and /dev/<vg> for the local-lvm stand-in), like make test" >&2
	exit 2
fi
bin=${BIN:-bin/pvediskcheck}
[ -x "$bin" ] || { echo "bench-overhead: $bin missing: run make build (make bench-overhead does)" >&2; exit 2; }
rounds=${1:-3}
shift || true
if [ $# -eq 0 ]; then
	set -- scsi1 --destroy scsi1 --job rr4k --runs 2 --runtime 20s --ramp 3s --size 64M
fi

work=$(mktemp -d /tmp/pvediskcheck-overhead.XXXXXX)
node=$work/node
cleanup() {
	local rc=$?
	trap - EXIT INT TERM HUP
	scripts/scratch-node-cleanup.sh "$node"
	rm -rf "${work:?}"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

export CGO_ENABLED=0 GOFLAGS="${GOFLAGS:+$GOFLAGS }-trimpath"
go build -o "$work/demo" ./internal/demo
TMPDIR=$work "$work/demo" overhead -bin "$bin" -dir "$node" -rounds "$rounds" ${V:+-v} "$@"
