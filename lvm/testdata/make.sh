#!/bin/bash
# make.sh: how the real-* fixtures in this directory were produced (README.md).
# Real lvm2 (Debian 12: 2.03.16) on a loop device. This machine has no
# device-mapper, so lvcreate cannot make a thin pool ("thin-pool: Required
# device-mapper target(s) not detected"); the VG's metadata is written with the
# layout lvcreate would give (thin pool with _tdata/_tmeta/pmspare, thin volumes,
# a Proxmox-style read-only thin snapshot, a second pool with discards
# nopassdown) and loaded with `vgcfgrestore --force`. lvs then reads it like any
# VG: names, sizes, attributes, pool, origin, chunk size and discards mode are
# lvs's own output; the LVs are inactive, so data_percent/metadata_percent are
# empty and the state letters are "X" (unknown) instead of "a"/"o".
# Usage: lvm/testdata/make.sh [OUTDIR]   (root; needs lvm2 and a free loop device)
set -eu
out=${1:-$(cd "$(dirname "$0")" && pwd)}
export LVM_SUPPRESS_FD_WARNINGS=1
vg=pdclab
img=/tmp/pvediskcheck-lvm-fixture.img
fields=vg_name,lv_name,lv_size,lv_attr,pool_lv,origin,data_percent,metadata_percent,lv_metadata_size,chunk_size,discards
rm -f "$img" && truncate -s 2G "$img"
loop=$(losetup --find --show "$img")
cleanup() {
	vgremove --driverloaded n -ff $vg >/dev/null 2>&1 || true
	pvremove -ff -y "$loop" >/dev/null 2>&1 || true
	losetup -d "$loop"
	rm -f "$img"
}
trap cleanup EXIT
pvcreate -q "$loop" >/dev/null
vgcreate -q $vg "$loop" >/dev/null
meta=$(mktemp)
vgcfgbackup -q -f "$meta" $vg >/dev/null
# Everything up to the end of physical_volumes, then our logical_volumes.
sed -i '$d' "$meta" # the VG's closing brace
lv() { # name status flags segment-body
	cat <<LV

		$1 {
			id = "$(cat /proc/sys/kernel/random/uuid | tr -d - | cut -c1-32 | sed 's/\(......\)\(....\)\(....\)\(....\)\(....\)\(....\)\(......\)/\1-\2-\3-\4-\5-\6-\7/')"
			status = [$2]
			flags = [$3]
			creation_time = 1795985763
			creation_host = "desopve04"
			segment_count = 1

			segment1 {
				start_extent = 0
$4
			}
		}
LV
}
linear() { printf '\t\t\t\textent_count = %s\n\t\t\t\ttype = "striped"\n\t\t\t\tstripe_count = 1\n\t\t\t\tstripes = [\n\t\t\t\t\t"pv0", %s\n\t\t\t\t]' "$1" "$2"; }
pool() { printf '\t\t\t\textent_count = %s\n\t\t\t\ttype = "thin-pool"\n\t\t\t\tmetadata = "%s_tmeta"\n\t\t\t\tpool = "%s_tdata"\n\t\t\t\ttransaction_id = %s\n\t\t\t\tchunk_size = 128\n\t\t\t\tdiscards = "%s"\n\t\t\t\tzero_new_blocks = 1' "$1" "$2" "$2" "$3" "$4"; }
thin() { printf '\t\t\t\textent_count = %s\n\t\t\t\ttype = "thin"\n\t\t\t\tthin_pool = "%s"\n\t\t\t\ttransaction_id = 0\n\t\t\t\tdevice_id = %s%s' "$1" "$2" "$3" "${4:+
				origin = \"$4\"}"; }
rw='"READ", "WRITE", "VISIBLE"'
{
	echo '	logical_volumes {'
	lv data "$rw" "" "$(pool 256 data 6 passdown)"            # 1 GiB pool, 4 MiB extents
	lv vm-370-disk-0 "$rw" "" "$(thin 2048 data 1)"           # 8 GiB
	lv vm-370-disk-1 "$rw" "" "$(thin 1024 data 2)"           # 4 GiB
	lv vm-370-disk-2 "$rw" "" "$(thin 1024 data 3)"
	lv vm-370-disk-3 "$rw" "" "$(thin 1024 data 4)"
	# Proxmox's snapshot: lvcreate -n snap_<vol>_<name> -pr -s <vg>/<vol> (activation skip)
	lv snap_vm-370-disk-1_before '"READ", "VISIBLE"' '"ACTIVATION_SKIP"' "$(thin 1024 data 5 vm-370-disk-1)"
	# data2 errors when full (lvcreate --errorwhenfull y): a flag of the LV in lvm2's metadata
	lv data2 "$rw" '"ERROR_WHEN_FULL"' "$(pool 64 data2 1 nopassdown)"
	lv vm-371-disk-0 "$rw" "" "$(thin 256 data2 1)"
	lv lvol0_pmspare '"READ", "WRITE"' "" "$(linear 2 258)"
	lv data_tmeta '"READ", "WRITE"' "" "$(linear 2 256)"
	lv data_tdata '"READ", "WRITE"' "" "$(linear 256 0)"
	lv data2_tmeta '"READ", "WRITE"' "" "$(linear 1 324)"
	lv data2_tdata '"READ", "WRITE"' "" "$(linear 64 260)"
	echo '	}'
	echo '}'
} >>"$meta"
sed -i 's/^\(\s*seqno = \)[0-9]*/\1100/' "$meta"
vgcfgrestore -q --force -f "$meta" $vg
rm -f "$meta"

run() { # file argv...: stdout to file, exit status and stderr recorded beside it
	local f=$1
	shift
	set +e
	"$@" >"$out/$f.json" 2>"$out/$f.stderr"
	echo $? >"$out/$f.exit"
	set -e
	# The device-mapper complaints are this machine's, not lvs's normal output.
	sed -i '/device-mapper\|mapper\/control\|libdevmapper\|Activation disabled/d' "$out/$f.stderr"
	[ -s "$out/$f.stderr" ] || rm -f "$out/$f.stderr"
	[ "$(cat "$out/$f.exit")" != 0 ] || rm -f "$out/$f.exit"
}
run real-vg-inactive lvs --reportformat json --units b --nosuffix -o $fields $vg
run real-vg-all-inactive lvs --reportformat json --units b --nosuffix -a -o $fields $vg
run real-missing-lv lvs --reportformat json --units b --nosuffix -o $fields $vg/vm-370-disk-9
run real-missing-vg lvs --reportformat json --units b --nosuffix -o $fields pdcnosuchvg
# The fields issue 27 added (lvm.Fields): when full, the VG's free space, dmeventd
# monitoring, and with -a the PVs under each pool's hidden _tdata LV.
fill=$fields,lv_when_full,vg_free,seg_monitor,devices
run real-vg-fill lvs --reportformat json --units b --nosuffix -a -o $fill $vg
rm -f "$out/real-vg-fill.stderr"
# LVM's autoextend policy as lvmconfig prints it: lvm.conf's defaults (Debian's and
# Proxmox's lvm.conf leave both commented out), and a node that set a threshold.
lvmconfig --type full activation/thin_pool_autoextend_threshold activation/thin_pool_autoextend_percent >"$out/real-lvmconfig-default.txt"
lvmconfig --type full --config 'activation { thin_pool_autoextend_threshold = 80 thin_pool_autoextend_percent = 10 }' \
	activation/thin_pool_autoextend_threshold activation/thin_pool_autoextend_percent >"$out/real-lvmconfig-autoextend.txt"
lvs --version | head -1 | sed 's/^ *//' >"$out/real-lvs-version.txt"
