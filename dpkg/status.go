package dpkg

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/pvediskcheck/pvediskcheck/node"
)

// StatusFile is dpkg's database of what is installed, below the node root.
const StatusFile = "/var/lib/dpkg/status"

// ErrNotInstalled: the status file has no stanza of the package whose files
// are on disk.
var ErrNotInstalled = errors.New("not installed")

// onDisk are the states (the third word of Status:) in which the
// package's files of Version are unpacked on the node (dpkg(1) "Package
// states"): installed and configured, awaiting or holding triggers,
// half-configured, or unpacked but not configured. half-installed (an
// unpack that did not finish), config-files and not-installed are not.
var onDisk = map[string]bool{"installed": true, "triggers-awaited": true, "triggers-pending": true, "half-configured": true, "unpacked": true}

// Installed is the version of pkg whose files are on the node: the
// Version of its stanza in the status text, where its state has them
// unpacked. A package of several architectures (multiarch) installed at
// different versions is refused: which one holds a given binary is not
// known from here.
func Installed(status []byte, pkg string) (Version, error) {
	var found []string
	for _, st := range stanzas(status, pkg) {
		words := strings.Fields(field(st, "Status"))
		if len(words) != 3 || !onDisk[words[2]] {
			continue
		}
		v := field(st, "Version")
		if !contains(found, v) {
			found = append(found, v)
		}
	}
	switch len(found) {
	case 0:
		return Version{}, fmt.Errorf("%s: %w", pkg, ErrNotInstalled)
	case 1:
		return ParseVersion(found[0])
	}
	return Version{}, fmt.Errorf("%s is installed at several versions (%s)", pkg, strings.Join(found, ", "))
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// stanzas are the paragraphs of the status text whose Package is pkg. A
// stanza starts with its Package: line (dpkg writes it first), so the text
// is searched for that line rather than split whole: a node's status file
// is a few MiB and the tool wants one package of it.
func stanzas(status []byte, pkg string) [][]byte {
	var out [][]byte
	key := []byte("Package: " + pkg + "\n")
	for off := 0; off < len(status); {
		i := bytes.Index(status[off:], key)
		if i < 0 {
			break
		}
		start := off + i
		off = start + len(key)
		if start > 0 && status[start-1] != '\n' {
			continue // "Package: x" inside another field's text
		}
		end := bytes.Index(status[start:], []byte("\n\n"))
		if end < 0 {
			end = len(status) - start
		}
		out = append(out, status[start:start+end])
		off = start + end
	}
	return out
}

// field is a single-line field of a stanza ("" when absent).
func field(st []byte, name string) string {
	for _, line := range bytes.Split(st, []byte("\n")) {
		if k, v, ok := bytes.Cut(line, []byte(":")); ok && string(k) == name {
			return strings.TrimSpace(string(v))
		}
	}
	return ""
}

// Packages reads the node's status file at most once for all the packages
// a run asks about (check --all asks once per running VM); safe for
// concurrent use. The zero value is not usable: NewPackages.
type Packages struct {
	n    node.Node
	once sync.Once
	b    []byte
	err  error
}

// NewPackages is a reader of the node's dpkg status below its root.
func NewPackages(n node.Node) *Packages { return &Packages{n: n} }

// Installed is the installed version of pkg, or why it is not known: the
// status file missing (not a Debian system, or a copied tree without it),
// unreadable, or without the package.
func (p *Packages) Installed(ctx context.Context, pkg string) (Version, error) {
	p.once.Do(func() {
		p.b, p.err = p.n.ReadFile(ctx, p.n.Paths.Join(StatusFile))
		if errors.Is(p.err, os.ErrNotExist) {
			p.err = fmt.Errorf("no %s", p.n.Paths.Join(StatusFile))
		}
	})
	if p.err != nil {
		return Version{}, p.err
	}
	return Installed(p.b, pkg)
}
