#!/bin/bash
# build-guest.sh: builds the Linux guest the end-to-end tests boot under QEMU
# (a kernel and an uncompressed initramfs "initrd.cpio"), from Debian packages
# only, and caches it.
#
# The kernel to boot is "vmlinux": the ELF inside Debian's vmlinuz, which QEMU
# starts at its PVH entry point. Under TCG that skips the bzImage's real-mode
# setup and xz decompression, which take 5-10 s of every boot (measured: agent
# ready after 6-10 s instead of 13-20 s on a loaded 2-CPU host). "vmlinuz" is
# kept next to it and boots too; the script falls back to it if the ELF cannot
# be extracted.
#
# What goes into the guest, and why:
#   linux-image-6.1.0-N-amd64  Debian's *generic* kernel and its modules: virtio-pci,
#                              virtio-blk, virtio-scsi, sd_mod, AHCI (SATA), ext4 and
#                              virtio_console (the guest agent's channel). The -cloud-
#                              flavour has no AHCI, so no SATA disks. N is whatever
#                              linux-image-amd64 points at in the archive (apt-cache).
#   busybox-static             /init's shell and the small tools (mount, insmod, grep, dd,
#                              sync, cat...): one static binary, no libraries.
#   fio                        the I/O load the tests drive and measure.
#   qemu-guest-agent           qemu-ga: the only way tests talk to the guest (guest-exec,
#                              guest-fstrim, guest-get-fsinfo), as an admin's tool would.
#   e2fsprogs                  mkfs.ext4 / e2fsck (busybox's mke2fs makes ext2 only).
#   util-linux                 fstrim and blkdiscard (discard tests), lsblk and blkid.
#   + every shared library those binaries load (found with ldd), each taken from its
#     own Debian package as the archive has it now, never from the host's files.
# Not included: udev (so no /dev/disk/by-id; find disks via /sys), systemd, networking.
#
# Usage: scripts/build-guest.sh [--check|--force]
#   (no option)  build unless the cache is up to date; print the kernel and
#                initrd paths, one a line
#   --check      exit 0 when the cache is up to date, 1 when a build is needed
#   --force      rebuild even when the cache is up to date
# Output: ${PVEDISKCHECK_CACHE:-/var/cache/pvediskcheck}/guest/: vmlinux (if extracted),
# vmlinuz, initrd.cpio, stamp, kernel-version, modules.load.
# The stamp holds a hash of this script and the version of every package used; the
# guest is rebuilt when either changes. Downloaded .deb files are kept in ../debs.
# Needs: apt-get, apt-cache, dpkg-deb, cpio, ldd, flock, sha256sum (Debian host).
set -euo pipefail
export LC_ALL=C

# Packages whose binaries go in (the kernel is added by resolve_kernel).
PACKAGES="busybox-static fio qemu-guest-agent e2fsprogs util-linux"
# Binaries copied into the guest: path inside the extracted packages.
BINARIES="bin/busybox usr/bin/fio usr/sbin/qemu-ga sbin/mke2fs sbin/e2fsck
  sbin/fstrim sbin/blkdiscard bin/lsblk sbin/blkid"
# Modules, in load order (QEMU-FACTS.md). Their hard dependencies (modinfo "depends")
# are added before them automatically; the crc/crypto helpers are soft dependencies
# (loaded by name at run time), which is why they are listed explicitly.
MODULES="virtio_ring virtio virtio_pci_legacy_dev virtio_pci_modern_dev virtio_pci
  virtio_blk virtio_console scsi_common scsi_mod crct10dif_common crct10dif_generic
  crc-t10dif crc64 crc64_rocksoft_generic crc64-rocksoft t10-pi sd_mod virtio_scsi
  libata libahci ahci crc32c_generic libcrc32c crc16 mbcache jbd2 ext4"
# Without these the guest is useless; any other module may be missing or built in.
REQUIRED_MODULES="virtio_pci virtio_blk virtio_console sd_mod virtio_scsi ahci ext4"
# The line /init prints on the serial console once qemu-ga holds its port open.
READY_MARKER="PVEDISKCHECK-GUEST-READY"

CACHE="${PVEDISKCHECK_CACHE:-/var/cache/pvediskcheck}"
OUT="$CACHE/guest"
DEBS="$CACHE/debs"
SCRIPT="$(readlink -f "$0")"
MODE="${1:-}"
APT_OPTS=(-o APT::Sandbox::User=root -q)

log() { echo "build-guest: [${SECONDS}s] $*" >&2; }
die() { log "error: $*"; exit 2; }

case "$MODE" in "" | --check | --force) ;; *) die "usage: $0 [--check|--force]" ;; esac
for t in apt-get apt-cache dpkg-deb dpkg-query cpio ldd flock sha256sum; do
	command -v "$t" >/dev/null 2>&1 || die "$t not found (a Debian host is needed)"
done

# candidate_versions PKG... prints "PKG VERSION" per package; VERSION is "(none)" when
# the archive does not have it.
candidate_versions() {
	apt-cache policy "$@" 2>/dev/null | awk '
		/^[^ ].*:$/ { name = substr($0, 1, length($0) - 1); next }
		/^  Candidate:/ { print name, $2 }'
}

# resolve_kernel prints the generic kernel package the archive has: the one the
# linux-image-amd64 metapackage depends on, else the newest linux-image-6.1.0-N-amd64.
resolve_kernel() {
	local k
	k=$(apt-cache depends linux-image-amd64 2>/dev/null |
		sed -n 's/^ *Depends: \(linux-image-[0-9.]*-[0-9]*-amd64\)$/\1/p' | head -n1)
	if [ -z "$k" ]; then
		k=$(apt-cache search --names-only '^linux-image-6\.1\.0-[0-9]+-amd64$' 2>/dev/null |
			awk '{print $1}' | sort -V | tail -n1)
	fi
	echo "$k"
}

# expected_stamp KERNELPKG [LIBPKG...] prints the stamp a build made now would have.
expected_stamp() {
	echo "script $(sha256sum "$SCRIPT" | cut -d' ' -f1)"
	# shellcheck disable=SC2086
	candidate_versions $(printf '%s\n' "$@" $PACKAGES | sort -u) | sort | sed 's/^/package /'
}

# stamp_is_current: the cache exists and matches this script and the archive.
stamp_is_current() {
	[ -f "$OUT/stamp" ] && [ -f "$OUT/vmlinuz" ] && [ -f "$OUT/initrd.cpio" ] || return 1
	local kernel libs want
	kernel=$(resolve_kernel)
	if [ -z "$kernel" ]; then
		# Archive lists unavailable (offline, no apt-get update): trust the cache when
		# it was built by this very script.
		log "warning: cannot query the archive; using the cached guest as is"
		grep -qx "script $(sha256sum "$SCRIPT" | cut -d' ' -f1)" "$OUT/stamp"
		return
	fi
	libs=$(awk '$1 == "package" {print $2}' "$OUT/stamp" | grep -v '^linux-image-' || true)
	# shellcheck disable=SC2086
	want=$(expected_stamp "$kernel" $libs)
	[ "$want" = "$(cat "$OUT/stamp")" ]
}

mkdir -p "$CACHE" "$DEBS" 2>/dev/null || die "cannot create $CACHE (run as root, or set PVEDISKCHECK_CACHE)"
exec 9>"$CACHE/.build-guest.lock"
flock 9

# print_paths: the kernel to boot (vmlinux when there is one) and the initrd.
print_paths() {
	if [ -f "$OUT/vmlinux" ]; then echo "$OUT/vmlinux"; else echo "$OUT/vmlinuz"; fi
	echo "$OUT/initrd.cpio"
}

if [ "$MODE" != --force ] && stamp_is_current; then
	[ "$MODE" = --check ] && exit 0
	print_paths
	exit 0
fi
[ "$MODE" = --check ] && exit 1

KERNEL_PKG=$(resolve_kernel)
if [ -z "$KERNEL_PKG" ]; then
	log "no kernel package in the apt lists; running apt-get update"
	apt-get "${APT_OPTS[@]}" update >/dev/null
	KERNEL_PKG=$(resolve_kernel)
fi
[ -n "$KERNEL_PKG" ] || die "no linux-image-6.1.0-N-amd64 in the archive (check /etc/apt/sources.list)"
KVER=${KERNEL_PKG#linux-image-}
log "kernel package $KERNEL_PKG"

TMP=$(mktemp -d "$CACHE/.guest-build.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
X="$TMP/x"    # every userland package, extracted
K="$TMP/k"    # the kernel package, extracted
R="$TMP/root" # the initramfs tree
mkdir -p "$X" "$K" "$R"
declare -A VERSION=() # package -> version used

# fetch PKG...: download the archive's candidate versions into $DEBS (once, in one
# apt-get call) and record the versions. Dies when the archive lacks one of them.
fetch() {
	local p v want=() get=()
	for p in "$@"; do [ -n "${VERSION[$p]:-}" ] || want+=("$p"); done
	if [ ${#want[@]} -gt 0 ]; then
		while read -r p v; do VERSION[$p]=$v; done < <(candidate_versions "${want[@]}")
	fi
	for p in "$@"; do
		v=${VERSION[$p]:-}
		[ -n "$v" ] && [ "$v" != "(none)" ] || die "package $p is not in the archive"
		deb_of "$p" >/dev/null || get+=("$p=$v")
	done
	if [ ${#get[@]} -gt 0 ]; then
		(cd "$DEBS" && apt-get "${APT_OPTS[@]}" download "${get[@]}" >/dev/null) ||
			die "apt-get download ${get[*]} failed"
	fi
}
deb_of() { # the downloaded .deb of PKG's recorded version
	local v=${VERSION[$1]}
	ls "$DEBS/${1}_${v//:/%3a}_"*.deb 2>/dev/null | head -n1 | grep .
}

declare -A EXTRACTED=()
extract() { # extract PKG... into $X (once each)
	local p todo=()
	for p in "$@"; do [ -n "${EXTRACTED[$p]:-}" ] || todo+=("$p"); done
	[ ${#todo[@]} -gt 0 ] || return 0
	fetch "${todo[@]}"
	for p in "${todo[@]}"; do
		dpkg-deb -x "$(deb_of "$p")" "$X"
		EXTRACTED[$p]=1
	done
}

# shellcheck disable=SC2086
extract $PACKAGES
log "extracting $KERNEL_PKG"
fetch "$KERNEL_PKG"
dpkg-deb -x "$(deb_of "$KERNEL_PKG")" "$K"

# --- Shared libraries --------------------------------------------------------------
log "resolving shared libraries"
declare -A LIBS=() # path relative to $X -> 1
# ldd runs each binary's loader with the extracted trees first on the library path.
# A library still found on the host (or not found at all) names a package that is not
# extracted yet: find it, extract it, and look again, until everything resolves in $X.

# owners_of HOSTPATH...: the Debian packages that own these host files (one
# dpkg-query; merged-/usr hosts record /lib/..., ldd may print /usr/lib/...).
owners_of() {
	local p args=()
	for p in "$@"; do args+=("$p" "$(readlink -f "$p")" "${p#/usr}" "/usr$p"); done
	dpkg-query -S "${args[@]}" 2>/dev/null | sed -n 's/^\([^:, ]*\)\(:[a-z0-9]*\)\{0,1\}: .*/\1/p' | sort -u
}

# provider_of SONAME: sets PROVIDER to the dependency (of an extracted package) that
# ships the file.
provider_of() {
	local so=$1 p d
	for p in "${!EXTRACTED[@]}"; do
		for d in $(apt-cache depends --important "$p" 2>/dev/null |
			sed -n 's/^ *|\{0,1\}Depends: \([^ <>]*\).*/\1/p' | sed 's/:any$//'); do
			[ -n "${EXTRACTED[$d]:-}" ] && continue
			fetch "$d" 2>/dev/null || continue
			if dpkg-deb -c "$(deb_of "$d")" 2>/dev/null | grep -q "/$so\( \|$\)"; then
				PROVIDER=$d
				return 0
			fi
		done
	done
	return 1
}

# in_x REL: REL with symlinks followed inside $X (package links may be absolute).
in_x() {
	local rel=$1 t n=0
	while [ -L "$X/$rel" ] && [ $n -lt 20 ]; do
		t=$(readlink "$X/$rel")
		case "$t" in
		/*) rel=${t#/} ;;
		*) rel=${rel%/*}/$t ;;
		esac
		rel=$(realpath -m -s "/$rel")
		rel=${rel#/}
		n=$((n + 1))
	done
	echo "$rel"
}

# Each round runs ldd on every file not settled yet. A file settles when all it loads
# resolves inside $X; what resolves on the host names a package to extract, what is not
# found at all is looked up among the extracted packages' dependencies.
declare -A PENDING=()
for b in $BINARIES; do
	[ -f "$X/$b" ] || die "$b is not in the extracted packages"
	PENDING[$b]=1
done
for round in $(seq 1 20); do
	[ ${#PENDING[@]} -gt 0 ] || break
	[ "$round" = 20 ] && die "library resolution did not settle: ${!PENDING[*]}"
	libpath=$(find "$X" -name '*.so*' \( -type f -o -type l \) -printf '%h\n' | sort -u | paste -sd:)
	host=()
	missing=()
	for e in "${!PENDING[@]}"; do
		settled=1
		# "statically linked"/"not a dynamic executable" print no "=>" lines.
		out=$(LD_LIBRARY_PATH="$libpath" ldd "$X/$e" 2>&1 || true)
		while read -r line; do
			case "$line" in
			*"=> not found"*)
				missing+=("${line%% *}")
				settled=0
				;;
			*"=> /"* | /*)
				if [[ $line == *"=> /"* ]]; then path=${line#*=> }; else path=$line; fi
				path=${path%% (*}
				if [[ $path == "$X"/* ]]; then
					rel=${path#"$X"/}
				elif [ -e "$X$path" ]; then
					# The loader (/lib64/ld-linux-x86-64.so.2) always prints its own path.
					rel=${path#/}
				else
					host+=("$path")
					settled=0
					continue
				fi
				if [ -z "${LIBS[$rel]:-}" ]; then
					LIBS[$rel]=1
					PENDING[$rel]=1
				fi
				;;
			esac
		done <<<"$out"
		[ $settled = 1 ] && unset "PENDING[$e]"
	done
	if [ ${#host[@]} -gt 0 ]; then
		mapfile -t pkgs < <(owners_of "${host[@]}")
		[ ${#pkgs[@]} -gt 0 ] || die "no package owns ${host[*]}"
		extract "${pkgs[@]}"
	fi
	for so in $(printf '%s\n' "${missing[@]}" | sort -u); do
		provider_of "$so" || die "no package provides $so"
		log "$so comes from $PROVIDER"
		extract "$PROVIDER"
	done
done

# --- The initramfs tree ------------------------------------------------------------
log "assembling the initramfs"
# Merged /usr, as Debian has it now: /bin, /sbin, /lib, /lib64 are links into /usr.
mkdir -p "$R"/usr/{bin,sbin,lib,lib64} "$R"/{dev,proc,sys,run,tmp,mnt,etc,var}
for d in bin sbin lib lib64; do ln -s "usr/$d" "$R/$d"; done
ln -s ../run "$R/var/run"
ln -s /proc/self/mounts "$R/etc/mtab"
[ "$(id -u)" = 0 ] && mknod -m 600 "$R/dev/console" c 5 1

# install REL: copy $X/REL (following links) to the same path in the merged tree.
install_file() {
	local rel=$1 dest
	dest="$R/$(echo "$rel" | sed -E 's#^(bin|sbin|lib|lib64)/#usr/\1/#')"
	mkdir -p "$(dirname "$dest")"
	cp "$X/$(in_x "$rel")" "$dest"
}
for b in $BINARIES; do install_file "$b"; done
for l in "${!LIBS[@]}"; do install_file "$l"; done
cp "$X/etc/mke2fs.conf" "$R/etc/"
ln -s mke2fs "$R/usr/sbin/mkfs.ext4"
ln -s e2fsck "$R/usr/sbin/fsck.ext4"
# busybox applets, except where a real tool of that name is installed.
"$R/usr/bin/busybox" --list-full | while read -r a; do
	n=${a##*/}
	[ -e "$R/usr/bin/$n" ] || [ -e "$R/usr/sbin/$n" ] || [ -L "$R/usr/sbin/$n" ] && continue
	ln -s /usr/bin/busybox "$R/usr/${a#usr/}"
done
printf '%s\n' /usr/lib/x86_64-linux-gnu /usr/lib/x86_64-linux-gnu/ceph >"$R/etc/ld.so.conf"
ldconfig -r "$R" 2>/dev/null || log "warning: ldconfig -r failed (the loader's default paths remain)"

log "kernel modules"
# Kernel modules: each listed module after its hard dependencies.
MODDIR="$K/lib/modules/$KVER"
[ -d "$MODDIR" ] || die "$KERNEL_PKG has no lib/modules/$KVER"
declare -A MODPATH=() SEEN=()
while read -r f; do
	n=${f##*/}; n=${n%%.ko*}; MODPATH[${n//-/_}]=$f
done < <(find "$MODDIR/kernel" -name '*.ko*')
declare -A BUILTIN=()
while read -r f; do
	n=${f##*/}; n=${n%%.ko*}; BUILTIN[${n//-/_}]=1
done <"$MODDIR/modules.builtin"
mkdir -p "$R/usr/lib/modules/$KVER"
: >"$R/etc/modules.load"
add_module() {
	local m=${1//-/_} f dest deps d
	[ -n "${SEEN[$m]:-}" ] && return 0
	SEEN[$m]=1
	[ -n "${BUILTIN[$m]:-}" ] && return 0
	f=${MODPATH[$m]:-}
	if [ -z "$f" ]; then
		case " $(echo $REQUIRED_MODULES | tr - _) " in
		*" $m "*) die "module $m is neither in $KERNEL_PKG nor built in" ;;
		esac
		log "warning: module $m not in $KERNEL_PKG, skipped"
		return 0
	fi
	dest="$R/usr/lib/modules/$KVER/$m.ko"
	case "$f" in
	*.ko.xz) xz -dc "$f" >"$dest" ;;
	*.ko.zst) zstd -qdc "$f" >"$dest" ;;
	*.ko.gz) gzip -dc "$f" >"$dest" ;;
	*) cp "$f" "$dest" ;;
	esac
	deps=$(tr '\0' '\n' <"$dest" | sed -n 's/^depends=//p' | head -n1)
	for d in ${deps//,/ }; do add_module "$d"; done
	echo "$m" >>"$R/etc/modules.load"
}
for m in $MODULES; do add_module "$m"; done

cat >"$R/init" <<EOF
#!/bin/sh
# /init of the pvediskcheck test guest (generated by scripts/build-guest.sh).
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tmpfs tmpfs /run
mount -t tmpfs tmpfs /tmp
exec </dev/console >/dev/console 2>&1
echo "pvediskcheck-guest: kernel \$(uname -r) up at \$(cut -d' ' -f1 /proc/uptime)s"
kver=\$(uname -r)
while read -r m; do
	insmod "/lib/modules/\$kver/\$m.ko" || echo "pvediskcheck-guest: insmod \$m failed"
done </etc/modules.load
echo "pvediskcheck-guest: modules loaded at \$(cut -d' ' -f1 /proc/uptime)s"

# The guest agent's port: the virtio-serial port QEMU named org.qemu.guest_agent.0.
port=
i=0
while [ \$i -lt 300 ]; do
	for n in /sys/class/virtio-ports/*/name; do
		[ -f "\$n" ] && [ "\$(cat "\$n")" = org.qemu.guest_agent.0 ] || continue
		p=/dev/\$(basename "\$(dirname "\$n")")
		[ -c "\$p" ] && port=\$p
	done
	[ -n "\$port" ] && break
	sleep 0.1
	i=\$((i + 1))
done
if [ -z "\$port" ]; then
	echo "pvediskcheck-guest: no virtio-serial port named org.qemu.guest_agent.0"
	ls -l /sys/class/virtio-ports/ 2>&1
	exec sh
fi

# qemu-ga in the foreground of a respawn loop keeps the guest up. Ready means it holds
# the port open.
while :; do
	qemu-ga -m virtio-serial -p "\$port" -t /run &
	pid=\$!
	i=0
	while [ \$i -lt 100 ] && kill -0 \$pid 2>/dev/null; do
		ls -l /proc/\$pid/fd 2>/dev/null | grep -q "\$port" && break
		sleep 0.1
		i=\$((i + 1))
	done
	echo "$READY_MARKER port=\$port pid=\$pid uptime=\$(cut -d' ' -f1 /proc/uptime)s"
	wait \$pid
	echo "pvediskcheck-guest: qemu-ga exited with status \$?, restarting"
	sleep 1
done
EOF
chmod 755 "$R/init"

# --- Output --------------------------------------------------------------------------
log "writing initrd.cpio"
NEW="$TMP/guest"
mkdir -p "$NEW"
cp "$K/boot/vmlinuz-$KVER" "$NEW/vmlinuz"
# vmlinux: the payload of the bzImage, decompressed, when the kernel has a PVH
# entry (CONFIG_PVH; Debian's amd64 kernels do). xz for Debian 12, zstd later.
extract_vmlinux() {
	local off
	grep -q '^CONFIG_PVH=y' "$K/boot/config-$KVER" 2>/dev/null || return 1
	off=$(grep -aboUP '\xfd\x37\x7a\x58\x5a\x00' "$NEW/vmlinuz" | head -n1 | cut -d: -f1)
	if [ -n "$off" ]; then
		tail -c +$((off + 1)) "$NEW/vmlinuz" | xz -dcq --single-stream >"$NEW/vmlinux" 2>/dev/null || true
	else
		off=$(grep -aboUP '\x28\xb5\x2f\xfd' "$NEW/vmlinuz" | head -n1 | cut -d: -f1)
		[ -n "$off" ] || return 1
		tail -c +$((off + 1)) "$NEW/vmlinuz" | zstd -dcq 2>/dev/null >"$NEW/vmlinux" || true
	fi
	[ "$(head -c 4 "$NEW/vmlinux" | od -An -tx1 | tr -d ' ')" = 7f454c46 ]
}
if ! extract_vmlinux; then
	rm -f "$NEW/vmlinux"
	log "warning: no vmlinux extracted from vmlinuz; guests boot the slower bzImage"
fi
(cd "$R" && find . | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet) >"$NEW/initrd.cpio"
{ # the same form as expected_stamp
	echo "script $(sha256sum "$SCRIPT" | cut -d' ' -f1)"
	for p in "$KERNEL_PKG" "${!EXTRACTED[@]}"; do echo "$p ${VERSION[$p]}"; done |
		sort | sed 's/^/package /'
} >"$NEW/stamp"
cp "$R/etc/modules.load" "$NEW/modules.load"
echo "$KVER" >"$NEW/kernel-version"

# $OUT is a symlink to guest-<stamp hash>, switched atomically (rename), so a test
# that starts QEMU during a rebuild finds either the old or the new guest, never none.
ID=guest-$(sha256sum "$NEW/stamp" | cut -c1-12)
rm -rf "${CACHE:?}/$ID"
mv "$NEW" "$CACHE/$ID"
ln -sfn "$ID" "$CACHE/.guest.link"
[ -L "$OUT" ] || rm -rf "$OUT" # a directory left by an older version of this script
mv -T "$CACHE/.guest.link" "$OUT"
for d in "$CACHE"/guest-*; do
	[ "$d" = "$CACHE/$ID" ] || rm -rf "$d"
done
# Keep only the .deb files this guest was built from.
declare -A USED=()
for p in "$KERNEL_PKG" "${!EXTRACTED[@]}"; do USED[$(deb_of "$p")]=1; done
for f in "$DEBS"/*.deb; do
	[ -n "${USED[$f]:-}" ] || rm -f "$f"
done
log "guest for kernel $KVER: initrd $(du -m "$OUT/initrd.cpio" | cut -f1) MiB, $(grep -c '^package' "$OUT/stamp") packages"
print_paths
