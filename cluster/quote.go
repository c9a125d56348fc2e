package cluster

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/units"
)

// ssh joins the remote command's arguments with spaces into one string and
// the remote sshd hands that string to root's login shell (`$SHELL -c`).
// Every argument therefore travels as one single-quoted word: inside single
// quotes a POSIX shell (and bash) gives no character a meaning except the
// closing quote, which is written as '\'' (close, escaped quote, reopen).

// Quote returns s as one word for a POSIX shell.
func Quote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// QuoteArgs validates and quotes a remote command line: every argument must
// be printable text (no control character, no invalid UTF-8: a newline or a
// NUL cannot be quoted for every shell) and becomes one quoted word.
func QuoteArgs(args []string) ([]string, error) {
	out := make([]string, len(args))
	for i, a := range args {
		if err := printable(a); err != nil {
			return nil, err
		}
		out[i] = Quote(a)
	}
	return out, nil
}

func printable(s string) error {
	if !utf8.ValidString(s) {
		return fmt.Errorf("argument %s is not valid UTF-8", units.Clip(s, 40))
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return fmt.Errorf("argument %s holds a control character", units.Clip(s, 40))
		}
	}
	return nil
}

// nodeNameRe is pve-common's pve_verify_node_name.
var nodeNameRe = regexp.MustCompile(`^[a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?$`)

// ValidateNodeName accepts what Proxmox accepts as a node name.
func ValidateNodeName(s string) error {
	if !nodeNameRe.MatchString(s) {
		return fmt.Errorf("node name %s is not a valid Proxmox node name", units.Clip(s, 40))
	}
	return nil
}

// storageIDRe is pve-common's parse_id for pve-storage-id (at least 2
// characters, checked apart).
var storageIDRe = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9\-_.]*[a-zA-Z0-9]$`)

// ValidateStorageID accepts what Proxmox accepts as a storage ID.
func ValidateStorageID(s string) error {
	if !storageIDRe.MatchString(s) {
		return fmt.Errorf("storage %s is not a valid storage ID", units.Clip(s, 40))
	}
	return nil
}

// ValidateDisk accepts a disk key of a VM config (scsi0-30, virtio0-15,
// sata0-5, ide0-3, efidisk0, tpmstate0).
func ValidateDisk(s string) error {
	if !qemuserver.IsDiskKey(s) {
		return fmt.Errorf("disk %s is not a disk key (scsi0, virtio1, sata2, ...)", units.Clip(s, 40))
	}
	return nil
}

// ValidateVMID accepts a VMID as Proxmox does (qemuserver.ParseVMID).
func ValidateVMID(s string) error {
	_, err := qemuserver.ParseVMID(s)
	return err
}

// wordRe is a flag value that is a word (--fail-on error).
var wordRe = regexp.MustCompile(`^[a-z][a-z0-9-]{0,31}$`)

// ValidateValue accepts a flag value that goes to another node: a finite
// number as strconv reads it (the limit flags: 20, 0.5, 1e3) or a
// lower-case word (an enumerated value). Whatever the flag means, the node
// that runs the command checks it again.
func ValidateValue(s string) error {
	if wordRe.MatchString(s) {
		return nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return errValue(s)
	}
	return nil
}

func errValue(s string) error {
	return fmt.Errorf("%s is neither a number nor a word", units.Clip(s, 40))
}

// Args is what a command's positional arguments are, as the command
// declares it: what ValidateArgs checks each of them as before it goes to
// another node.
type Args int

const (
	// VMThenDisks: a VM command's VMID, then disk keys.
	VMThenDisks Args = iota
	// VMIDs: VMIDs only (check).
	VMIDs
	// StorageIDs: storage IDs only (thin).
	StorageIDs
)

// ValidateArgs checks the positional arguments of a command sent to
// another node, each as what it is.
func ValidateArgs(kind Args, pos []string) error {
	for i, a := range pos {
		validate := ValidateDisk // a VM command's disks
		if kind == StorageIDs {
			validate = ValidateStorageID
		} else if kind == VMIDs || i == 0 {
			validate = ValidateVMID
		}
		if err := validate(a); err != nil {
			return exitcode.Usagef("%v", err)
		}
	}
	return nil
}
