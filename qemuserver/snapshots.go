package qemuserver

import (
	"bufio"
	"bytes"
	"strings"
)

// Snapshots are a VM config's snapshot sections ([snapname]), each a map
// of its keys, as qemu-server's parse_vm_config reads them: the main
// section's `parent` names the newest snapshot, each section's `parent`
// the one before. [PENDING] and [special:...] sections are not snapshots.
type Snapshots map[string]map[string]string

// ParseSnapshots reads the snapshot sections of a VM config file.
func ParseSnapshots(b []byte) Snapshots {
	out := Snapshots{}
	var cur map[string]string
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]") {
			name := line[1 : len(line)-1]
			cur = nil
			if name != "PENDING" && !strings.HasPrefix(name, "special:") && name != "" {
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
