#!/usr/bin/env bash
# deb-test.sh (`make deb-test`, after `make deb deps`): installs the built
# .deb into a scratch root with dpkg --root (never onto this machine), checks
# what it installed (the alert rules, which promtool must accept, and the
# dashboard too), and runs the installed binary: --version must print the
# changelog's version, and `cache 370 --json` against Lab 37's VM 370, started
# by the test harness (internal/demo serve), must show that VM as it runs, and
# `check 370 --policy` judge it with the shipped example policy; the
# systemd units are installed but not enabled, and the service's own command
# line writes a textfile with that VM's disks that promtool accepts.
# Needs root and QEMU, like the tests. Cleans up on any exit.
set -euo pipefail
cd "$(dirname "$0")/.."

version=$(dpkg-parsechangelog -S Version)
deb=bin/deb/pvediskcheck_${version}_amd64.deb
[ -f "$deb" ] || { echo "deb-test: $deb missing: run make deb (make deb-test does)" >&2; exit 2; }
if [ "$(id -u)" -ne 0 ]; then
	echo "deb-test: needs root (loop devices for the harness' VM), like make test" >&2
	exit 2
fi

work=$(mktemp -d /tmp/pvediskcheck-debtest.XXXXXX)
root=$work/root node=$work/node
serve_pid=""
cleanup() {
	local rc=$?
	trap - EXIT INT TERM HUP
	if [ -n "$serve_pid" ] && kill -0 "$serve_pid" 2>/dev/null; then
		kill -TERM "$serve_pid" 2>/dev/null || true
		wait "$serve_pid" 2>/dev/null || true
	fi
	scripts/scratch-node-cleanup.sh "$node"
	rm -rf "${work:?}"
	[ "$rc" -eq 0 ] || echo "deb-test: FAILED (exit $rc)" >&2
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP
fail() { echo "deb-test: $*" >&2; exit 1; }
start=$(date +%s%N)

# --- install into a scratch root ---------------------------------------------
mkdir -p "$root/var/lib/dpkg/info" "$root/var/lib/dpkg/updates" "$root/var/lib/dpkg/triggers"
: >"$root/var/lib/dpkg/status"
: >"$root/var/lib/dpkg/available"
dpkg --root="$root" --force-not-root --force-depends --force-script-chrootless -i "$deb" >"$work/dpkg.log" 2>&1 ||
	{ cat "$work/dpkg.log"; fail "dpkg --root -i failed"; }
status=$(dpkg-query --admindir="$root/var/lib/dpkg" -W -f='${Package} ${Version} ${Status}' pvediskcheck)
[ "$status" = "pvediskcheck $version install ok installed" ] || fail "dpkg status: $status"
echo "deb-test: installed $deb into $root ($status)"

bin=$root/usr/sbin/pvediskcheck
for f in usr/sbin/pvediskcheck usr/share/man/man8/pvediskcheck.8.gz \
	usr/share/bash-completion/completions/pvediskcheck \
	lib/systemd/system/pvediskcheck-metrics.service lib/systemd/system/pvediskcheck-metrics.timer \
	usr/share/doc/pvediskcheck/copyright usr/share/doc/pvediskcheck/changelog.Debian.gz \
	usr/share/pvediskcheck/prometheus/pvediskcheck.rules.yml usr/share/pvediskcheck/prometheus/pvediskcheck.grafana.json; do
	[ -f "$root/$f" ] || fail "/$f not installed"
done
# The installed alert rules are the repository's, and Prometheus loads them.
cmp -s share/prometheus/pvediskcheck.rules.yml "$root/usr/share/pvediskcheck/prometheus/pvediskcheck.rules.yml" ||
	fail "the installed rule file is not share/prometheus/pvediskcheck.rules.yml"
if command -v promtool >/dev/null; then
	promtool check rules "$root/usr/share/pvediskcheck/prometheus/pvediskcheck.rules.yml" >/dev/null ||
		fail "promtool check rules refuses the installed rule file"
fi
# dh_compress gzips docs over 4 KiB
[ -f "$root/usr/share/doc/pvediskcheck/README.md" ] || [ -f "$root/usr/share/doc/pvediskcheck/README.md.gz" ] ||
	fail "/usr/share/doc/pvediskcheck/README.md not installed"
# The policy example (check --policy) is the repository's.
example=$root/usr/share/doc/pvediskcheck/examples/policy.yaml
[ -f "$example" ] || { [ -f "$example.gz" ] && gunzip "$example.gz"; } || fail "/usr/share/doc/pvediskcheck/examples/policy.yaml not installed"
cmp -s share/examples/policy.yaml "$example" || fail "the installed policy example is not share/examples/policy.yaml"
# Shipped disabled: no symlink and no enablement state in the scratch root
# (dpkg --root runs the maintainer scripts with DPKG_ROOT, which
# deb-systemd-helper honours).
for w in etc/systemd/system/timers.target.wants/pvediskcheck-metrics.timer \
	var/lib/systemd/deb-systemd-helper-enabled/timers.target.wants/pvediskcheck-metrics.timer; do
	[ ! -e "$root/$w" ] || fail "pvediskcheck-metrics.timer is enabled on installation (/$w)"
done
file -b "$bin" 2>/dev/null | grep -q 'statically linked' || [ ! -x /usr/bin/file ] || fail "/usr/sbin/pvediskcheck is not static: $(file -b "$bin")"

# --- the installed binary: version, man page, completion -----------------------
got=$("$bin" --version)
[ "$got" = "pvediskcheck version $version" ] || fail "--version printed '$got', want 'pvediskcheck version $version'"
echo "deb-test: $got"
if command -v man >/dev/null; then
	page=$(MANWIDTH=80 man -l "$root/usr/share/man/man8/pvediskcheck.8.gz" 2>&1 >/dev/null) || fail "man -l failed"
	[ -z "$page" ] || fail "man -l warns: $page"
	MANWIDTH=80 man -l "$root/usr/share/man/man8/pvediskcheck.8.gz" 2>/dev/null | grep -q "pvediskcheck cache \[OPTIONS\] VMID" ||
		fail "the man page has no section for cache"
	echo "deb-test: pvediskcheck(8) renders without warnings"
fi
bash -c "source '$root/usr/share/bash-completion/completions/pvediskcheck' && complete -p pvediskcheck" >/dev/null ||
	fail "the bash completion does not load"
echo "deb-test: bash completion loads"

# --- cache 370 --json against the harness' VM ---------------------------------
go build -o "$work/demo" ./internal/demo
# The server runs until its stdin closes: coproc's pipe closes when this
# script ends, however it ends.
coproc SERVE { TMPDIR=$work exec "$work/demo" serve -dir "$node"; }
serve_pid=$SERVE_PID
read -r -t 120 -u "${SERVE[0]}" noderoot || fail "the harness did not start VM 370"
echo "deb-test: VM 370 running under $noderoot"
set +e
"$bin" --root "$noderoot" cache 370 --json >"$work/cache.json" 2>"$work/cache.err"
rc=$?
set -e
[ "$rc" -eq 0 ] || { cat "$work/cache.json" "$work/cache.err"; fail "cache 370 --json exited $rc"; }
"$work/demo" check-cache <"$work/cache.json" || { cat "$work/cache.json"; fail "unexpected cache --json"; }
# The shipped policy example judges the VM (exit 1: findings, never 2).
set +e
"$bin" --root "$noderoot" check 370 --json --policy "$example" >"$work/policy.json" 2>"$work/policy.err"
rc=$?
set -e
[ "$rc" -le 1 ] && grep -q '"rule": "local-lvm-iothread"' "$work/policy.json" ||
	{ cat "$work/policy.json" "$work/policy.err"; fail "check --policy with the shipped example exited $rc"; }
echo "deb-test: check --policy with the shipped example: exit $rc"

# --- metrics --textfile, as pvediskcheck-metrics.service runs it -----------------
exec_start=$(sed -n 's/^ExecStart=//p' "$root/lib/systemd/system/pvediskcheck-metrics.service")
[ "$exec_start" = "/usr/sbin/pvediskcheck metrics --textfile /var/lib/prometheus/node-exporter" ] ||
	fail "unexpected ExecStart: $exec_start"
textdir=$work/node-exporter
mkdir -p "$textdir"
read -r -a argv <<<"$exec_start"
"$bin" --root "$noderoot" "${argv[@]:1:2}" "$textdir" || fail "the service's command failed"
prom=$textdir/pvediskcheck.prom
grep -q '^pvediskcheck_disk_info{.*disk="scsi1".*vmid="370"} 1$' "$prom" || { cat "$prom"; fail "no info series for VM 370's scsi1"; }
grep -q '^pvediskcheck_collect_errors{source="qmp"} 0$' "$prom" || { cat "$prom"; fail "QMP errors"; }
if command -v promtool >/dev/null; then
	promtool check metrics <"$prom" || fail "promtool check metrics refuses the textfile"
fi
echo "deb-test: the service's command wrote $(grep -vc '^#' "$prom") series to pvediskcheck.prom"

# --- stop the VM -----------------------------------------------------------------
exec {SERVE[1]}>&-
wait "$serve_pid" || fail "the harness did not stop cleanly"
serve_pid=""
pgrep -f "$node/" >/dev/null && fail "a process of the scratch node is still running"
ms=$((($(date +%s%N) - start) / 1000000))
echo "deb-test: passed in $((ms / 1000)).$((ms % 1000 / 100)) s (install, checks, VM start, cache --json, stop)"
