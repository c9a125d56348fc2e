package check

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// fleecingLeftovers reports fleecing images the config still records while
// no backup holds the VM (no lock: backup): vzdump records the images it
// allocates in [special:fleecing] for the time of a backup and removes
// them at its end; what it failed to remove stays recorded ("left-overs
// that failed to be removed", qemu-server's fleecing section schema) and
// keeps its space on the fleecing storage until the next backup of the
// VM, its migration or its removal tries again (PVE::QemuConfig's
// cleanup_fleecing_images).
func fleecingLeftovers(in *Input, out *VMResult) {
	v := in.v
	imgs := v.Config.FleecingImages
	if len(imgs) == 0 || v.Config.Main["lock"] == "backup" {
		return
	}
	var where []string
	for _, id := range imgs {
		st, _, _ := strings.Cut(id, ":")
		name := "storage " + st
		if s := v.Storages[st]; s != nil {
			name += " (" + s.Type + ")"
		}
		if !slices.Contains(where, name) {
			where = append(where, name)
		}
	}
	sort.Strings(where)
	vmid := strconv.Itoa(v.VMID)
	var free []string
	for _, id := range imgs {
		free = append(free, "pvesm free "+id)
	}
	out.add(Finding{Severity: Warning, Code: CodeFleecingLeftover,
		Message: fmt.Sprintf("the config records fleecing images (%s) and no backup holds the VM (no lock: backup): left over from a backup whose clean-up failed, they take space on %s until the next backup of VM %s removes them (vzdump clears left-overs first), or its migration or removal",
			strings.Join(imgs, ", "), strings.Join(where, " and "), vmid),
		Fix: "let the next backup of VM " + vmid + " remove them; where its log says it could not (\"error removing fleecing image\"), free them by hand (" + strings.Join(free, "; ") + ") and delete the fleecing-images line from the config's [special:fleecing] section"})
}
