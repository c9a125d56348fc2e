package main

import (
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/pvediskcheck/pvediskcheck/internal/fakenode"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
)

// showcmd is `qm showcmd VMID [--pretty]`: the command line the next start
// would run, generated from the config on disk with [PENDING] applied, in
// qm's shell-quoted format (--pretty: one option group per line).
func showcmd(r string, args []string, stdout, stderr io.Writer) int {
	vmid, err := strconv.Atoi(args[0])
	if err != nil {
		fmt.Fprintln(stderr, "400 Parameter verification failed.\nvmid: invalid format")
		return 255
	}
	pretty := len(args) > 1 && args[1] == "--pretty"
	cfg, err := qemuserver.LoadConfig(filepath.Join(r, "etc/pve/qemu-server", args[0]+".conf"), vmid)
	if err != nil {
		fmt.Fprintf(stderr, "Configuration file 'nodes/localhost/qemu-server/%d.conf' does not exist\n", vmid)
		return 2
	}
	st, err := qemuserver.LoadStorages(filepath.Join(r, "etc/pve/storage.cfg"))
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 255
	}
	argv, err := fakenode.Argv("/usr/bin/kvm", cfg, st, fakenode.ArgvOptions{VMID: vmid, RunDir: "/var/run/qemu-server", Next: true})
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 255
	}
	var b strings.Builder
	b.WriteString(argv[0])
	for i := 1; i < len(argv); i++ {
		a := argv[i]
		if pretty && strings.HasPrefix(a, "-") {
			b.WriteString(" \\\n  ")
		} else {
			b.WriteString(" ")
		}
		b.WriteString(shellQuote(a))
	}
	fmt.Fprintln(stdout, b.String())
	return 0
}

func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:=+") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'"'"'`) + "'"
}
