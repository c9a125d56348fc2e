#!/bin/sh
# Installs what the test suite needs on a fresh Debian machine, only when
# missing:
#   qemu-system-x86, qemu-utils  the real-QEMU tests (QEMU 7.2 on Debian 12)
#   mount                        losetup: loop devices stand in for LVM-thin volumes
#   fio                          fio's own JSON fixtures are checked against a real run
#   cpio                         scripts/build-guest.sh packs the guest's initramfs
#   groff-base                   the man page must render without warnings
#   openssh-server, -client      cluster mode: a real sshd per node of the test
#                                cluster (127.0.0.2, 127.0.0.3), reached with ssh
#   tmux                         top's terminal mode is tested in a real pseudo-terminal
#   chromium                     bench --report: the HTML page is checked rendered in
#                                headless Chromium
#   prometheus                   metrics: promtool checks the exposition, and a real
#                                Prometheus (started by the test on loopback, its own
#                                config and data dir) scrapes metrics --listen
#   socat                        a leftover latency histogram is cleared with the
#                                command the tool prints, as on a Proxmox VE node
#                                (qemu-server's qm terminal needs socat)
#   staticcheck                  make lint, at the version scripts/staticcheck.sh pins
#                                (built from the Go module proxy into bin/tools/)
# QEMU 11.1 (make qemu11), the guest image (scripts/build-guest.sh) and the
# .deb tools (scripts/deb.sh) install what they need themselves.
set -eu
need=""
command -v qemu-system-x86_64 >/dev/null 2>&1 || need="$need qemu-system-x86"
command -v qemu-img >/dev/null 2>&1 || need="$need qemu-utils"
command -v losetup >/dev/null 2>&1 || need="$need mount"
command -v fio >/dev/null 2>&1 || need="$need fio"
command -v cpio >/dev/null 2>&1 || need="$need cpio"
command -v groff >/dev/null 2>&1 || need="$need groff-base"
[ -x /usr/sbin/sshd ] || need="$need openssh-server"
command -v ssh >/dev/null 2>&1 || need="$need openssh-client"
command -v ssh-keygen >/dev/null 2>&1 || need="$need openssh-client"
command -v tmux >/dev/null 2>&1 || need="$need tmux"
command -v chromium >/dev/null 2>&1 || need="$need chromium"
{ command -v promtool && command -v prometheus; } >/dev/null 2>&1 || need="$need prometheus"
command -v socat >/dev/null 2>&1 || need="$need socat"
if [ -n "$need" ]; then
	echo "test-deps: installing$need"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends $need >/dev/null
fi
"$(dirname "$0")/staticcheck.sh" --install
# Proxmox's own code beside the checkout (shared/pve-oracle in the nearest
# parent that has it, as the tests find it; read at test time, never copied):
# its Debian Perl packages, through its own idempotent installer. A checkout
# without it skips the tests that ask it.
oracle=${PVE_ORACLE_DIR:-}
if [ -z "$oracle" ]; then
	dir=$(cd "$(dirname "$0")/.." && pwd)
	for _ in 1 2 3 4 5 6; do
		if [ -f "$dir/shared/pve-oracle/install-deps.sh" ]; then oracle=$dir/shared/pve-oracle; break; fi
		dir=$(dirname "$dir")
	done
fi
if [ -n "$oracle" ] && [ -f "$oracle/install-deps.sh" ]; then
	sh "$oracle/install-deps.sh" >/dev/null
fi
