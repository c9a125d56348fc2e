package advisory

import (
	"context"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/pvediskcheck/pvediskcheck/dpkg"
	"github.com/pvediskcheck/pvediskcheck/node"
)

// Build is the QEMU build a VM runs, from the package string QEMU states
// (QMP's greeting and query-version: VersionInfo.package, the same object,
// docs/interop/qmp-spec "Server Greeting").
type Build struct {
	// Raw is the package string as QEMU states it: "pve-qemu-kvm_11.0.0-1"
	// (pve-qemu's debian/rules: --with-pkgversion=
	// ${DEB_SOURCE}_${DEB_VERSION_UPSTREAM_REVISION}), "Debian
	// 1:7.2+dfsg-7+deb12u18+b3" (Debian's qemu), "" when QEMU states none.
	Raw string
	// Package is the Debian package the binary comes from (pve-qemu-kvm;
	// qemu-system-x86 for Debian's build, whose string names only the
	// vendor); "" when the string names none.
	Package string
	// Version is the build's version; nil when the string holds none dpkg
	// would take.
	Version *dpkg.Version
	// Exact: the version names its revision. pve-qemu-kvm before 7.0.0-4
	// stated its upstream version alone (pve-qemu commit 2b259b7).
	Exact bool
}

// pkgName is a Debian package name (Debian Policy 5.6.7).
var pkgName = regexp.MustCompile(`^[a-z0-9][a-z0-9+.-]+$`)

// DebianPackage is the package of Debian's own x86-64 system emulator,
// whose QEMU states "Debian VERSION": the vendor, not the package.
const DebianPackage = "qemu-system-x86"

// ParseBuild reads a package string. Anything else than
// PACKAGE_VERSION or "Debian VERSION" (a build of one's own, a string
// without a version) is a Build with Raw alone: nothing is matched to it.
func ParseBuild(raw string) Build {
	b := Build{Raw: raw}
	s := strings.TrimSpace(raw)
	var name, ver string
	if v, ok := strings.CutPrefix(s, "Debian "); ok {
		name, ver = DebianPackage, v
	} else if i := strings.IndexByte(s, '_'); i > 0 {
		name, ver = s[:i], s[i+1:]
	}
	if !pkgName.MatchString(name) {
		return b
	}
	v, err := dpkg.ParseVersion(ver)
	if err != nil {
		return b
	}
	b.Package, b.Version, b.Exact = name, &v, v.Revision != ""
	return b
}

// String is the build as findings name it: "pve-qemu-kvm 11.0.0-1", or the
// raw string for one that parses to no package version.
func (b Build) String() string {
	if b.Version == nil {
		if b.Raw == "" {
			return "an unnamed build"
		}
		return "build " + b.Raw
	}
	return b.Package + " " + b.Version.String()
}

// deletedSuffix is what procfs appends to /proc/PID/exe when the file the
// process runs was unlinked (fs/d_path.c: d_path of an unlinked dentry):
// a package upgrade replaces the binary by a new file and unlinks the old.
const deletedSuffix = " (deleted)"

// Binary is what the node shows of the QEMU binary a VM runs (cache
// --json qemu, check --json qemu).
type Binary struct {
	// Package is the package string the running QEMU states (Build.Raw).
	Package string `json:"package"`
	// Name and Version are the package and version read from it; "" when
	// it names none.
	Name    string `json:"name,omitempty"`
	Version string `json:"version,omitempty"`
	// Pid is the QEMU process's (0 when not known).
	Pid int `json:"pid,omitempty"`
	// Exe is the binary the process runs (/proc/PID/exe), " (deleted)" cut;
	// "" when it could not be read (a copied tree).
	Exe string `json:"exe,omitempty"`
	// Replaced: the file the process runs has been unlinked since it
	// started (/proc/PID/exe ends in " (deleted)"): an upgrade or
	// reinstall put a new binary in its place.
	Replaced bool `json:"replaced"`
	// Installed is the version of the package installed now (dpkg's
	// status below --root); "" with InstalledUnknown saying why.
	Installed        string `json:"installed_version,omitempty"`
	InstalledUnknown string `json:"installed_unknown,omitempty"`
}

// Build is the running build the binary states.
func (b *Binary) Build() Build { return ParseBuild(b.Package) }

// Outdated: the binary the VM runs is not the one installed now: it was
// replaced, or the running version differs from the installed one.
func (b *Binary) Outdated() bool {
	return b.Replaced || b.Differs() != 0
}

// Differs compares the running version with the installed one: -1 older,
// 1 newer, 0 the same or either unknown.
func (b *Binary) Differs() int {
	run, inst := b.Build().Version, b.InstalledVersion()
	if run == nil || inst == nil {
		return 0
	}
	return dpkg.Compare(*run, *inst)
}

// String is the binary in a few words, as cache's heading shows it: the
// build, and where it is not the installed one, how it differs.
func (b *Binary) String() string {
	s := b.Build().String()
	if b.Package == "" {
		s = "build not stated"
	}
	var why []string
	if b.Replaced {
		why = append(why, "its binary was replaced since the start")
	}
	if d := b.Differs(); d < 0 {
		why = append(why, b.Installed+" installed")
	} else if d > 0 {
		why = append(why, "older "+b.Installed+" installed")
	} else if b.Replaced && b.Installed != "" {
		why = append(why, "reinstalled at the same version")
	}
	if len(why) > 0 {
		s += " (" + strings.Join(why, ", ") + ": the installed one runs after a full stop and start, qm reboot)"
	}
	return s
}

// InstalledVersion is Installed parsed (nil when unknown).
func (b *Binary) InstalledVersion() *dpkg.Version {
	if b.Installed == "" {
		return nil
	}
	v, err := dpkg.ParseVersion(b.Installed)
	if err != nil {
		return nil
	}
	return &v
}

// ReadBinary measures what a running VM's QEMU runs: the build its
// package string names (from the QMP greeting, vm.VM.QEMUPackage), the
// binary of the process (/proc/PID/exe, where the process runs on this
// host: alive), and the version of that build's package installed now,
// from dpkg's status file below the node root (dpkg.Packages: read once
// per run). pkgs may be nil: then the status file is read here.
func ReadBinary(ctx context.Context, n node.Node, pid int, alive bool, pkgString string, pkgs *dpkg.Packages) Binary {
	b := Binary{Package: pkgString, Pid: max(pid, 0)}
	if build := ParseBuild(pkgString); build.Version != nil {
		b.Name, b.Version = build.Package, build.Version.String()
	}
	if alive && pid > 0 {
		if exe, err := n.Readlink(ctx, filepath.Join(n.Paths.ProcPid(pid), "exe")); err == nil {
			b.Exe, b.Replaced = strings.CutSuffix(exe, deletedSuffix)
		}
	}
	if pkgString == "" {
		b.InstalledUnknown = "the running build is not known: QEMU's greeting was not read"
		return b
	}
	if b.Name == "" {
		b.InstalledUnknown = "the running build names no package"
		return b
	}
	if pkgs == nil {
		pkgs = dpkg.NewPackages(n)
	}
	if v, err := pkgs.Installed(ctx, b.Name); err != nil {
		b.InstalledUnknown = err.Error()
	} else {
		b.Installed = v.String()
	}
	return b
}
