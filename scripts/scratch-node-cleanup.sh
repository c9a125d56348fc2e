#!/usr/bin/env bash
# scratch-node-cleanup.sh NODE_DIR: releases what a fake node under NODE_DIR
# (internal/fakenode) may have left when its owner was killed before it could
# clean up itself: QEMU processes whose command line points into NODE_DIR,
# loop devices backed by its local-lvm files, and /dev/<vg>. Used by the traps
# of demo.sh and deb-test.sh; harmless when everything is already gone.
set -u
node=${1:?usage: scratch-node-cleanup.sh NODE_DIR}
node=${node%/}
for f in "$node"/var/run/qemu-server/*.pid; do
	[ -f "$f" ] || continue
	pid=$(cat "$f" 2>/dev/null) || continue
	if [ -n "$pid" ] && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF "$node/"; then
		echo "cleanup: stopping QEMU $pid left behind"
		kill -TERM "$pid" 2>/dev/null || true
		for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
		kill -KILL "$pid" 2>/dev/null || true
	fi
done
for f in "$node"/var/lib/lvm-thin/*.img; do
	[ -f "$f" ] || continue
	for loop in $(losetup -n -O NAME -j "$f" 2>/dev/null); do
		echo "cleanup: detaching $loop left behind"
		losetup -d "$loop" 2>/dev/null || true
	done
done
# The harness names its volume group pdc<hex>: never anything else under /dev.
vg=$(sed -n 's/^[[:space:]]*vgname[[:space:]]\{1,\}\(pdc[0-9a-f]\{1,\}\)$/\1/p' "$node/etc/pve/storage.cfg" 2>/dev/null)
if [ -n "$vg" ] && [ -d "/dev/$vg" ]; then
	rm -rf "/dev/${vg:?}"
fi
exit 0
