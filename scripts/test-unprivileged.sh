#!/bin/sh
# Runs the unit tests of every package outside cmd/ and internal/ the way a
# developer without root and without QEMU would: test binaries built here,
# run as the unprivileged user nobody with a PATH that has no QEMU, qemu-img,
# fio, lvs, zfs, rbd, qm or pvesm. They must pass with no test skipped
# (ARCHITECTURE.md "Tests").
#
# nobody may not be able to read the checkout (CI may clone below /root), so
# the tracked files and the corpora beside the checkout are copied to a
# world-readable scratch directory first, and the tests run there.
set -eu
cd "$(dirname "$0")/.."
out=$(mktemp -d /tmp/pdc-unpriv.XXXXXX)
trap 'rm -rf "$out"' EXIT
mkdir "$out/bin" "$out/tests" "$out/work"
# A PATH without the tools the integration tier needs.
for f in /usr/bin/* /bin/*; do
	case "${f##*/}" in qemu*|fio|lvs|lvm|zfs|rbd|qm|pvesm) continue ;; esac
	[ -e "$out/bin/${f##*/}" ] || ln -s "$f" "$out/bin/${f##*/}"
done
git ls-files -z | xargs -0 cp --parents -t "$out/work"
shared=${PVEDISKCHECK_SHARED:-../shared}
cfg2cmd=${PVE_CFG2CMD_DIR:-$shared/pve-cfg2cmd}
realworld=${PVE_REALWORLD_DIR:-$shared/real-world}
[ -d "$cfg2cmd" ] && cp -r "$cfg2cmd" "$out/cfg2cmd"
[ -d "$realworld" ] && cp -r "$realworld" "$out/realworld"
chmod -R a+rX "$out"
pkgs=$(go list ./... | grep -v -e '/cmd/' -e '/internal/')
mod=$(go list -m)
fail=0
for p in $pkgs; do
	rel=${p#"$mod"}
	rel=${rel#/}
	name=$(echo "$p" | tr / _)
	go test -c -o "$out/tests/$name.test" "$p" >/dev/null
	[ -f "$out/tests/$name.test" ] || continue # no test files
	log="$out/$name.log"
	if ! (cd "$out/work/$rel" && su nobody -s /bin/sh -c "env -i PATH=$out/bin HOME=/tmp PVE_CFG2CMD_DIR='$out/cfg2cmd' PVE_REALWORLD_DIR='$out/realworld' '$out/tests/$name.test' -test.v -test.count=1" >"$log" 2>&1); then
		echo "FAIL $p (as nobody):"; tail -n 30 "$log"; fail=1; continue
	fi
	if grep -q -e '^\s*--- SKIP' "$log"; then
		echo "SKIP in $p (as nobody): outside cmd/ and internal/ no test may skip"; grep -e '--- SKIP' -A2 "$log"; fail=1; continue
	fi
	echo "ok   $p (as nobody, $(grep -c -e '^\s*--- PASS' "$log") passed, none skipped)"
done
exit $fail
