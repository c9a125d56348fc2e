#!/usr/bin/env bash
# demo.sh (`make demo`, after `make deps build`): starts a scratch Proxmox VE
# node with Lab 37's VM 370 (real QEMU, disks on loop devices laid out like
# local-lvm) and runs bin/pvediskcheck's commands against it, one line of
# explanation per step. The driver is internal/demo (Go).
#
# Clean-up happens twice over: the driver stops QEMU and releases the loop
# devices itself on exit, Ctrl-C or SIGTERM; this script's trap then removes
# whatever a killed driver left (QEMU processes started from the scratch
# directory, loop devices backed by its files, /dev/<vg>) and the directory.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" -ne 0 ]; then
	echo "demo: needs root (loop devices and /dev/<vg> for the local-lvm stand-in), like make test" >&2
	exit 2
fi
[ -x bin/pvediskcheck ] || { echo "demo: bin/pvediskcheck missing: run make build (make demo does)" >&2; exit 2; }

work=$(mktemp -d /tmp/pvediskcheck-demo.XXXXXX)
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

start=$(date +%s%N)
# The flags of `make build`, also inherited by the harness' build of its
# lvs/qm stand-ins: one build configuration, so on a fresh machine the
# standard library and the modules are compiled once, not three times.
export CGO_ENABLED=0 GOFLAGS="${GOFLAGS:+$GOFLAGS }-trimpath"
go build -o "$work/demo" ./internal/demo
# TMPDIR: the harness builds its lvs/qm stand-ins below it, so they go with $work.
TMPDIR=$work "$work/demo" run -bin bin/pvediskcheck -dir "$node"
ms=$((($(date +%s%N) - start) / 1000000))
echo "demo: $((ms / 1000)).$((ms % 1000 / 100)) s from here (driver build, VM, the commands, clean-up)"
