#!/bin/sh
# Runs the unit tests of every package outside cmd/ and internal/ the way a
# developer without root and without QEMU would: test binaries built here,
# run as the unprivileged user nobody with a PATH that has no QEMU, qemu-img
# or fio. They must pass with no test skipped (ARCHITECTURE.md "Tests").
set -eu
cd "$(dirname "$0")/.."
out=$(mktemp -d /tmp/pdc-unpriv.XXXXXX)
chmod 755 "$out"
trap 'rm -rf "$out"' EXIT
# A PATH without QEMU, qemu-img, fio, lvs, zfs, rbd, qm or pvesm.
mkdir "$out/bin"
for f in /usr/bin/* /bin/*; do
	case "${f##*/}" in qemu*|fio|lvs|lvm|zfs|rbd|qm|pvesm) continue ;; esac
	[ -e "$out/bin/${f##*/}" ] || ln -s "$f" "$out/bin/${f##*/}"
done
pkgs=$(go list ./... | grep -v -e '/cmd/' -e '/internal/')
fail=0
for p in $pkgs; do
	dir=$(go list -f '{{.Dir}}' "$p")
	name=$(echo "$p" | tr / _)
	go test -c -o "$out/$name.test" "$p" >/dev/null
	[ -f "$out/$name.test" ] || continue # no test files
	# The corpora beside the checkout, as the tests find them.
	log="$out/$name.log"
	if ! (cd "$dir" && su nobody -s /bin/sh -c "env -i PATH=$out/bin HOME=/tmp PVE_CFG2CMD_DIR='${PVE_CFG2CMD_DIR:-}' PVE_REALWORLD_DIR='${PVE_REALWORLD_DIR:-}' '$out/$name.test' -test.v -test.count=1" >"$log" 2>&1); then
		echo "FAIL $p (as nobody):"; tail -n 30 "$log"; fail=1; continue
	fi
	if grep -q -e '^\s*--- SKIP' "$log"; then
		echo "SKIP in $p (as nobody): outside cmd/ and internal/ no test may skip"; grep -e '--- SKIP' -A2 "$log"; fail=1; continue
	fi
	echo "ok   $p (as nobody, $(grep -c -e '^\s*--- PASS' "$log") passed, none skipped)"
done
exit $fail
