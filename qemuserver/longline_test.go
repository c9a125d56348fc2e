package qemuserver

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
)

// A line beyond MaxLineBytes is one error naming the file and the line,
// exit 2 (not a raw "bufio.Scanner: token too long"); one below the bound
// is read.
func TestLongLine(t *testing.T) {
	for _, c := range []struct {
		name  string
		parse func(string) error
		head  string
	}{
		{"100.conf", func(s string) error { _, err := ParseConfig(strings.NewReader(s), "100.conf"); return err }, "memory: 512\n\n"},
		{"storage.cfg", func(s string) error { _, err := ParseStorages(strings.NewReader(s), "storage.cfg"); return err }, "dir: local\n\tpath /var/lib/vz\n\n"},
	} {
		for _, size := range []int{MaxLineBytes - 1, MaxLineBytes, 5 << 20} {
			line := "# " + strings.Repeat("x", size-2) // a comment both parsers skip
			err := c.parse(c.head + line + "\n")
			if size < MaxLineBytes {
				if err != nil {
					t.Errorf("%s, a line of %d bytes: %v", c.name, size, err)
				}
				continue
			}
			want := fmt.Sprintf("%s line %d: longer than 4 MiB: not a file Proxmox wrote", c.name, strings.Count(c.head, "\n")+1)
			if !errors.Is(err, ErrLineTooLong) || errors.Is(err, ErrParse) || err.Error() != want || exitcode.Of(err) != exitcode.Usage {
				t.Errorf("%s, a line of %d bytes: %v, want %q", c.name, size, err, want)
			}
		}
	}
}
