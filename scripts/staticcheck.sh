#!/bin/sh
# staticcheck at one pinned version, so that `make lint` (and `make test`,
# which runs it) finds the same things on every machine and in CI: a newer
# release adds checks, and an unpinned one would make a clean tree fail
# tomorrow without a change of ours.
#
#   scripts/staticcheck.sh --install   install the pinned version when missing
#   scripts/staticcheck.sh ARGS...     install it when missing, then run it
#
# It is built from the Go module proxy (like the tests' other Go tools) into
# bin/tools/ of this checkout, never onto the machine's PATH. Moving the pin:
# change both lines below, run `make lint`, fix what the new checks find.
set -eu
release=2026.2.2        # what `staticcheck -version` prints
module=v0.8.2           # honnef.co/go/tools' tag of that release
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$root/bin/tools/staticcheck
if [ ! -x "$bin" ] || [ "$("$bin" -version 2>/dev/null)" != "staticcheck $release (${module#v})" ]; then
	echo "staticcheck: installing $release (honnef.co/go/tools $module) into bin/tools" >&2
	mkdir -p "$root/bin/tools"
	# GOFLAGS from the caller (-mod=vendor while ./vendor exists) would
	# not apply to a module of its own: install it on its own terms.
	(cd "$root" && GOFLAGS= GOBIN="$root/bin/tools" ${GO:-go} install "honnef.co/go/tools/cmd/staticcheck@$module")
fi
[ "${1:-}" = --install ] && exit 0
exec "$bin" "$@"
