package qemuserver

import (
	"bufio"
	"bytes"
	"regexp"
	"strings"
)

// Snapshots are a VM config's snapshot sections ([snapname]), each a map
// of its keys, as qemu-server's parse_vm_config reads them: the main
// section's `parent` names the newest snapshot, each section's `parent`
// the one before. [PENDING] and [special:...] sections are not snapshots.
type Snapshots map[string]map[string]string

// snapNameRe is a snapshot section's name as parse_vm_config takes it
// (pve-configid-like: a letter, then letters, digits, _ and -).
var snapNameRe = regexp.MustCompile(`(?i)^[a-z][a-z0-9_\-]+$`)

// ParseSnapshots reads the snapshot sections of a VM config file: lines
// up to MaxLineBytes as ParseConfig reads them (a longer one ends the
// reading there; ParseConfig refuses such a file), [PENDING] in any case
// and [special:...] are no snapshots, nor is a section whose name is no
// snapshot name.
func ParseSnapshots(b []byte) Snapshots {
	out := Snapshots{}
	var cur map[string]string
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64*1024), MaxLineBytes)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]") {
			name := line[1 : len(line)-1]
			cur = nil
			if !strings.EqualFold(name, "PENDING") && snapNameRe.MatchString(name) {
				cur = map[string]string{}
				out[name] = cur
			}
			continue
		}
		if cur == nil || strings.HasPrefix(line, "#") {
			continue
		}
		if k, v, ok := strings.Cut(line, ":"); ok {
			cur[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	return out
}

// Lineage is the snapshots from parent (the main section's `parent`) back
// to the oldest, newest first, following each section's `parent`; it stops
// at a name with no section or one seen before.
func (s Snapshots) Lineage(parent string) []string {
	var out []string
	seen := map[string]bool{}
	for parent != "" && !seen[parent] {
		sec, ok := s[parent]
		if !ok {
			break
		}
		seen[parent] = true
		out = append(out, parent)
		parent = sec["parent"]
	}
	return out
}
