#!/bin/sh
# Mutation testing (gremlins) of the packages that hold the product's
# decisions: every capability package, qemuserver, fio and fioreport. Each
# must reach a test efficacy of at least 85 % and a mutator coverage of at
# least 80 % with its own unit tests (no root, no QEMU). gremlins tests a
# copy of the module, so the corpora beside the checkout are passed by environment.
# A mutant's test run may take 10 times the unmutated run (gremlins'
# default timed out most mutants of packages whose tests take a fraction
# of a second, such as latency: their build alone takes longer).
set -eu
cd "$(dirname "$0")/.."
GREMLINS_VERSION=v0.6.0
gremlins=$(go env GOPATH)/bin/gremlins
if ! "$gremlins" --version >/dev/null 2>&1; then
	go install github.com/go-gremlins/gremlins/cmd/gremlins@$GREMLINS_VERSION
fi
export PVE_CFG2CMD_DIR="${PVE_CFG2CMD_DIR:-$(cd .. && pwd)/shared/pve-cfg2cmd}"
export PVE_REALWORLD_DIR="${PVE_REALWORLD_DIR:-$(cd .. && pwd)/shared/real-world}"
pkgs=${MUTANT_PKGS:-"cache check discard flush limit thinpool storage storage/storagetype storage/zfs queues volchain stall latency backupcfg bench qemuserver fio fioreport top cluster metrics lvm pvesm guestdisk alloc threads vm sampler advisory dpkg policy"}
fail=0
for p in $pkgs; do
	[ -d "$p" ] || continue
	echo "== gremlins ./$p"
	log="/tmp/gremlins-$(echo "$p" | tr / -).log"
	if ! "$gremlins" unleash --workers "${MUTANT_WORKERS:-1}" --timeout-coefficient "${MUTANT_TIMEOUT_COEFFICIENT:-10}" --threshold-efficacy 85 --threshold-mcover 80 "./$p" >"$log" 2>&1; then
		fail=1
	fi
	grep -E 'Killed:|Timed out|Test efficacy|Mutator coverage' "$log" | sed 's/^/   /'
done
exit $fail
