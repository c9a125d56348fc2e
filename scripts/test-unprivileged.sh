#!/bin/sh
# Runs the unit tests of every package outside cmd/ and internal/ the way a
# developer without root and without QEMU would: test binaries built here,
# run as the unprivileged user nobody with a PATH that has no QEMU, qemu-img,
# fio, lvs, zfs, rbd, qm or pvesm. They must pass with no test skipped
# (ARCHITECTURE.md "Tests").
#
# The corpora beside the checkout (../shared/pve-cfg2cmd, ../shared/real-world)
# are read at test time, never copied into the repository; where they are
# absent (a clean checkout alone) the tests that read them skip saying so, and
# those skips, and only those, are allowed and listed.
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
oracle=${PVE_ORACLE_DIR:-$shared/pve-oracle}
absent=""
if [ -d "$cfg2cmd" ]; then cp -r "$cfg2cmd" "$out/cfg2cmd"; else absent="$absent $cfg2cmd"; fi
if [ -d "$realworld" ]; then cp -r "$realworld" "$out/realworld"; else absent="$absent $realworld"; fi
if [ -d "$oracle" ]; then cp -r "$oracle" "$out/oracle"; else absent="$absent $oracle"; fi
[ -z "$absent" ] || echo "note: corpus absent:$absent (the tests that read it skip; every other test must run)"
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
	if ! (cd "$out/work/$rel" && su nobody -s /bin/sh -c "env -i PATH=$out/bin HOME=/tmp PVE_CFG2CMD_DIR='$out/cfg2cmd' PVE_REALWORLD_DIR='$out/realworld' PVE_ORACLE_DIR='$out/oracle' '$out/tests/$name.test' -test.v -test.count=1" >"$log" 2>&1); then
		# The failures with what they logged, then the end (a panic, a build error).
		echo "FAIL $p (as nobody):"; grep -v -e '^\s*--- PASS' -e '^=== ' "$log" | grep -B 12 -e '--- FAIL' | head -n 80; tail -n 5 "$log"; fail=1; continue
	fi
	# With -test.v a skip's reason is the line before its "--- SKIP". Only a
	# corpus that is really absent may be a reason.
	bad=$(awk -v absent="$absent" '
		/^[[:space:]]*--- SKIP/ { if (absent == "" || prev !~ /corpus|corpora/) print $0 ": " prev }
		{ prev = $0 }' "$log")
	if [ -n "$bad" ]; then
		echo "SKIP in $p (as nobody): outside cmd/ and internal/ no test may skip but for an absent corpus"; echo "$bad"; fail=1; continue
	fi
	skipped=$(grep -c -e '^\s*--- SKIP' "$log" || true)
	if [ "$skipped" -gt 0 ]; then
		echo "ok   $p (as nobody, $(grep -c -e '^\s*--- PASS' "$log") passed, $skipped skipped: corpus absent)"
	else
		echo "ok   $p (as nobody, $(grep -c -e '^\s*--- PASS' "$log") passed, none skipped)"
	fi
done
exit $fail
