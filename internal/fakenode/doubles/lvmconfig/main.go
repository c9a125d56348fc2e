// Command lvmconfig is the fake node's stand-in for lvm2's lvmconfig: it
// prints the activation/ settings asked for in lvmconfig's own format
// ("name=value" per line, lvm/testdata/real-lvmconfig-*.txt), with lvm2
// 2.03.16's defaults unless the test set them.
//
// Node state, below $PVEDISKCHECK_FAKENODE_ROOT/var/lib/lvm-thin:
//
//	lvmconfig   "name value" lines, e.g. "thin_pool_autoextend_threshold 80"
//
// Supported arguments: --type full, and activation/NAME settings (a name it
// does not know exits 5 with lvmconfig's message).
package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// defaults are lvm2 2.03.16's (lvmconfig --type full with lvm.conf's
// settings commented out, as Debian and Proxmox VE ship it).
var defaults = map[string]string{
	"thin_pool_autoextend_threshold": "100",
	"thin_pool_autoextend_percent":   "20",
	"monitoring":                     "1",
}

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	root := os.Getenv("PVEDISKCHECK_FAKENODE_ROOT")
	if root == "" {
		fmt.Fprintln(stderr, "  lvmconfig (fakenode double): PVEDISKCHECK_FAKENODE_ROOT is not set")
		return 3
	}
	set := map[string]string{}
	for k, v := range defaults {
		set[k] = v
	}
	if b, err := os.ReadFile(filepath.Join(root, "var/lib/lvm-thin/lvmconfig")); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(strings.TrimSpace(line), " "); ok {
				set[k] = strings.TrimSpace(v)
			}
		}
	}
	var out []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--type":
			i++
			if i >= len(args) || args[i] != "full" {
				fmt.Fprintln(stderr, "  lvmconfig (fakenode double): only --type full is supported")
				return 3
			}
		case strings.HasPrefix(a, "-"):
			fmt.Fprintf(stderr, "  lvmconfig (fakenode double): unsupported option %s\n", a)
			return 3
		default:
			name, ok := strings.CutPrefix(a, "activation/")
			v, known := set[name]
			if !ok || !known {
				fmt.Fprintf(stderr, "  Configuration node %s not found\n", a)
				return 5
			}
			out = append(out, name+"="+v)
		}
	}
	for _, l := range out {
		fmt.Fprintln(stdout, l)
	}
	return 0
}
