#!/bin/sh
# Installs what the test suite needs on a fresh Debian machine, only when
# missing: QEMU (qemu-system-x86, qemu-utils) for the real-QEMU tests.
set -eu
need=""
command -v qemu-system-x86_64 >/dev/null 2>&1 || need="$need qemu-system-x86"
command -v qemu-img >/dev/null 2>&1 || need="$need qemu-utils"
command -v losetup >/dev/null 2>&1 || need="$need mount"
if [ -n "$need" ]; then
	echo "test-deps: installing$need"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends $need >/dev/null
fi
