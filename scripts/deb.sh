#!/usr/bin/env bash
# deb.sh: build the .deb with dpkg-buildpackage and check it with lintian
# (`make deb`). On a fresh Debian machine it first installs the build
# dependencies with apt-get. The build itself runs offline from vendor/, which
# `make vendor` fills just before (the only step that may use the network).
#
# The source tree is copied to bin/deb/pvediskcheck-VERSION/ so that
# dpkg-buildpackage's results (.deb, .buildinfo, .changes, written to the
# parent directory) land in bin/deb/ and not next to the repository. The copy's
# .cache/ (GOCACHE) is kept between runs so a rebuild takes seconds.
set -euo pipefail
cd "$(dirname "$0")/.."

# --- build dependencies -------------------------------------------------------
# debhelper and dpkg-dev for dpkg-buildpackage, build-essential because
# dpkg-checkbuilddeps requires it, lintian for the check, man-db for lintian's
# man page check. Go is not among them: the Go toolchain on PATH builds it.
need=()
for p in debhelper dpkg-dev build-essential lintian man-db; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$' || need+=("$p")
done
if ((${#need[@]})); then
	echo "deb: installing ${need[*]}"
	if [ "$(id -u)" -ne 0 ]; then
		echo "deb: installing packages needs root (or install them yourself: apt-get install ${need[*]})" >&2
		exit 2
	fi
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
command -v go >/dev/null || [ -x /usr/local/go/bin/go ] || {
	echo "deb: no Go toolchain on PATH (Debian's golang-go is too old; see debian/README.source)" >&2
	exit 2
}

# --- stage the source ---------------------------------------------------------
version=$(dpkg-parsechangelog -S Version)
upstream=${version%-*}
out=bin/deb
src=$out/pvediskcheck-$upstream
mkdir -p "$src"
# Everything but the Go cache goes, so a file deleted here is deleted there too.
find "$src" -mindepth 1 -maxdepth 1 ! -name .cache -exec rm -rf {} +
rm -f "$out"/pvediskcheck_* "$out"/pvediskcheck-dbgsym_*
# The work tree as `make build` sees it: tracked and new files, not ignored
# ones (bin/, vendor/, caches).
git ls-files -z --cached --others --exclude-standard |
	while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
	tar --null -T - -cf - | tar -xf - -C "$src"
# The modules, into the copy (not ./vendor, which would switch every go
# command in this tree to -mod=vendor): the last step that may download.
"${MAKE:-make}" --no-print-directory vendor VENDOR_DIR="$PWD/$src/vendor"

# --- build --------------------------------------------------------------------
start=$(date +%s)
(cd "$src" && dpkg-buildpackage -b -us -uc)
deb=$out/pvediskcheck_${version}_amd64.deb
echo "deb: built $deb in $(($(date +%s) - start)) s"
dpkg-deb --info "$deb" | sed -n '/Package:/,$p'
dpkg-deb --contents "$deb"

# --- lintian --------------------------------------------------------------------
# Errors fail the build; the overrides (O:) are shown with their reasons (N:),
# and every tag left is explained in debian/README.source.
echo "deb: lintian $(lintian --version | awk '{print $2}') --pedantic --display-info --show-overrides"
root_opt=()
[ "$(id -u)" -ne 0 ] || root_opt=(--allow-root)
report=$(lintian "${root_opt[@]}" --fail-on none --display-info --pedantic --show-overrides "$out/pvediskcheck_${version}_amd64.changes")
[ -z "$report" ] || printf '%s\n' "$report"
if grep -q '^E:' <<<"$report"; then
	echo "deb: lintian reports errors" >&2
	exit 1
fi
echo "deb: lintian: no errors"
