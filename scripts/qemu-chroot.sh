#!/bin/sh
# qemu-chroot.sh: a cached Debian trixie chroot with QEMU 11.1 from trixie-backports.
#
# Why: the labs' Proxmox VE 9.2 nodes run QEMU 11.1.3; this machine (Debian 12) ships
# QEMU 7.2. Their QMP answers differ in ways the tool depends on (query-block's
# inserted.children exists only from 10.1 on, extra blockstats counters, -mon warns on
# 11.1), so the real-QEMU tests run on both. Debian trixie-backports carries 11.1.3,
# which runs here unchanged from a chroot; scripts/qemu-11.1 and scripts/qemu-img-11.1
# run it with the interface of qemu-system-x86_64 and qemu-img.
#
# What it installs:
#   - on the host, only when missing: debootstrap and debian-archive-keyring (apt-get)
#   - in CHROOT: `debootstrap --variant=minbase trixie` (about 40 s, ~160 MB download),
#     then `apt-get install -t trixie-backports --no-install-recommends
#     qemu-system-x86 qemu-utils` (QEMU plus the SeaBIOS/iPXE firmware it needs).
#     Nothing else on the host changes; nothing runs as a service.
#
# CHROOT is ${PVEDISKCHECK_CACHE:-/var/cache/pvediskcheck}/trixie-qemu11. It is built in
# a temporary sibling directory and renamed into place only when QEMU has started a VM
# from it, so a directory at CHROOT is always complete. CHROOT/.qemu-version records
# what was installed; its presence is what "already built" means (the second run takes
# a few milliseconds). Packages come from the mirror as of the day of the build: the
# build fails unless the result is QEMU $QEMU11_WANT.x, and CHROOT/.packages lists every
# package version for comparison between machines.
#
# Usage: qemu-chroot.sh            build if missing, print the QEMU version
#        qemu-chroot.sh --umount   undo the bind mounts scripts/qemu-11.1 made
#        qemu-chroot.sh --remove   --umount, then delete CHROOT
# Never `rm -rf` CHROOT yourself while VMs used it: the wrappers bind-mount the host's
# /tmp, /dev, /run, /proc and /sys into it, and rm would descend into them. --remove
# unmounts first and refuses to delete while anything is still mounted beneath.
#
# Environment: PVEDISKCHECK_CACHE (cache root), DEBIAN_MIRROR (default
# http://deb.debian.org/debian), QEMU11_WANT (version prefix to accept, default 11.1.).
set -eu

CACHE=${PVEDISKCHECK_CACHE:-/var/cache/pvediskcheck}
CHROOT=$CACHE/trixie-qemu11
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
QEMU11_WANT=${QEMU11_WANT:-11.1.}
STAMP=$CHROOT/.qemu-version

say() { echo "qemu-chroot: $*" >&2; }
die() { say "$*"; exit 1; }

# mounts_under DIR prints the mount points at or below DIR, deepest first.
mounts_under() {
	awk -v d="$1" '$2 == d || index($2, d "/") == 1 { print $2 }' /proc/self/mounts | sort -r
}

# users_of DIR prints the pids of processes whose root directory is DIR (QEMUs started
# by the wrappers). While one runs, the mounts must stay: a QEMU whose /tmp vanished
# could no longer remove its pid file and QMP socket at exit, leaving stale ones.
users_of() {
	for p in /proc/[0-9]*; do
		[ "$(readlink "$p/root" 2>/dev/null)" = "$1" ] && echo "${p#/proc/}"
	done
	return 0
}

# umount_under DIR unmounts everything mounted at or below DIR, refusing while
# processes still run in it; it fails when something stays mounted.
umount_under() {
	busy=$(users_of "$1")
	[ -z "$busy" ] || die "processes still run in $1 (stop these VMs first): $(echo $busy)"
	for m in $(mounts_under "$1"); do
		umount "$m" 2>/dev/null || true
	done
	left=$(mounts_under "$1")
	[ -z "$left" ] || die "still mounted under $1: $left"
}

# safe_rm DIR deletes a chroot (complete or not) without following bind mounts.
safe_rm() {
	[ -e "$1" ] || return 0
	umount_under "$1"
	rm -rf --one-file-system "$1"
}

case "${1:-}" in
--umount) umount_under "$CHROOT"; exit 0 ;;
--remove) safe_rm "$CHROOT"; say "removed $CHROOT"; exit 0 ;;
"") ;;
*) die "usage: $0 [--umount|--remove]" ;;
esac

# Fast path: already built.
if [ -f "$STAMP" ]; then
	cat "$STAMP"
	exit 0
fi

[ "$(id -u)" = 0 ] || die "must run as root (debootstrap, chroot)"
case "$CHROOT/" in
/tmp/* | /dev/* | /run/* | /proc/* | /sys/*)
	die "PVEDISKCHECK_CACHE must not be under /tmp, /dev, /run, /proc or /sys: the wrappers bind-mount those into the chroot" ;;
esac
mkdir -p "$CACHE"

# One build at a time (make -j, two test runs): the second waits, then finds the stamp.
exec 9>"$CACHE/.trixie-qemu11.lock"
flock 9
if [ -f "$STAMP" ]; then
	cat "$STAMP"
	exit 0
fi
# A directory without a stamp was not made by this script's rename; start over.
safe_rm "$CHROOT"

if ! command -v debootstrap >/dev/null 2>&1 || [ ! -e /usr/share/keyrings/debian-archive-keyring.gpg ]; then
	say "installing debootstrap on the host"
	DEBIAN_FRONTEND=noninteractive apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
		debootstrap debian-archive-keyring >/dev/null
fi

start=$(date +%s)
# Leftovers of interrupted builds: no build runs now (we hold the lock).
for old in "$CACHE"/.trixie-qemu11.tmp.*; do
	[ -e "$old" ] && safe_rm "$old"
done
TMP=$CACHE/.trixie-qemu11.tmp.$$
trap 'umount_under "$TMP" 2>/dev/null; rm -rf --one-file-system "$TMP"' EXIT
trap 'exit 130' INT TERM HUP

say "debootstrap trixie (minbase) into $TMP"
debootstrap --variant=minbase trixie "$TMP" "$MIRROR" >"$CACHE/.trixie-qemu11.debootstrap.log" 2>&1 ||
	die "debootstrap failed, see $CACHE/.trixie-qemu11.debootstrap.log"

echo "deb $MIRROR trixie-backports main" >"$TMP/etc/apt/sources.list.d/trixie-backports.list"
# Package scripts must not start services in the chroot.
printf '#!/bin/sh\nexit 101\n' >"$TMP/usr/sbin/policy-rc.d"
chmod 0755 "$TMP/usr/sbin/policy-rc.d"

in_chroot() { chroot "$TMP" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive LANG=C.UTF-8 "$@"; }
say "installing qemu-system-x86 qemu-utils from trixie-backports"
mount --bind /proc "$TMP/proc"
in_chroot apt-get update -qq
# Use-Pty=0: no /dev/pts in the chroot, and apt would complain about its log.
in_chroot apt-get install -y -qq -o Dpkg::Use-Pty=0 --no-install-recommends -t trixie-backports \
	qemu-system-x86 qemu-utils >/dev/null
in_chroot apt-get clean
umount "$TMP/proc"
rm -rf "$TMP"/var/lib/apt/lists/* "$TMP"/var/cache/apt/*.bin

# Check the result runs: version, and a guest-less q35 VM that answers QMP and quits
# (needs the firmware that --no-install-recommends must not have dropped).
ver=$(in_chroot qemu-system-x86_64 --version | head -n 1)
case "$ver" in
"QEMU emulator version $QEMU11_WANT"*) ;;
*) die "expected QEMU $QEMU11_WANT*, trixie-backports installed: $ver" ;;
esac
in_chroot qemu-img --version >/dev/null
qmp=$(printf '%s\n' '{"execute":"qmp_capabilities"}' '{"execute":"query-version"}' '{"execute":"quit"}' |
	timeout 60 chroot "$TMP" qemu-system-x86_64 -machine q35 -nodefaults -display none -accel tcg -m 64 -qmp stdio 2>&1) ||
	die "smoke VM failed: $qmp"
case "$qmp" in
*'"qemu"'*) ;;
*) die "smoke VM gave no query-version reply: $qmp" ;;
esac

in_chroot dpkg-query -W -f '${Package} ${Version}\n' >"$TMP/.packages"
{
	echo "$ver"
	echo "qemu-system-x86 $(in_chroot dpkg-query -W -f '${Version}' qemu-system-x86) from trixie-backports"
	echo "chroot $CHROOT built $(date -u +%Y-%m-%dT%H:%M:%SZ) from $MIRROR in $(($(date +%s) - start)) s"
} >"$TMP/.qemu-version"

mv "$CACHE/.trixie-qemu11.debootstrap.log" "$TMP/.debootstrap.log"
mv "$TMP" "$CHROOT"
trap - EXIT
cat "$STAMP"
