package outfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
)

// Modes of what a folder holds (evidence: kernel stacks, config lines).
const (
	FolderMode = 0o700
	FileMode   = 0o600
)

// Parent is a directory a flag names, below which the run makes folders
// of its own (New), checked when the run starts.
type Parent struct {
	flag, path string
	fd         int // the directory, opened without following a link

	mu    sync.Mutex
	sizes map[string]int64 // Prune's sizes of the folders it saw, by name
}

// CheckParent checks path, named by flag, as the directory the run makes
// its folders in: it exists, is a directory and not a symbolic link, and
// a folder can be made in it (one is made and removed at once). Refusals
// are bad input (exit 2) naming the flag and the path.
func CheckParent(flag, path string) (*Parent, error) {
	if err := CheckDirectory(flag, path); err != nil {
		return nil, err
	}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, exitcode.Usagef("--%s %s: %v", flag, quoted(path), err)
	}
	p := &Parent{flag: flag, path: path, fd: fd}
	probe := "." + random() + ".probe"
	if err := unix.Mkdirat(fd, probe, FolderMode); err != nil {
		unix.Close(fd)
		return nil, exitcode.Usagef("--%s %s: cannot make a folder in it: %v", flag, quoted(path), err)
	}
	unix.Unlinkat(fd, probe, unix.AT_REMOVEDIR)
	return p, nil
}

// CheckDirectory checks that path, named by flag, is a directory and not
// a symbolic link to one (bad input, exit 2, naming both).
func CheckDirectory(flag, path string) error {
	if path == "" {
		return exitcode.Usagef(`--%s "": no directory named (name a DIR, or leave --%s out)`, flag, flag)
	}
	st, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return exitcode.Usagef("--%s %s: no such directory", flag, quoted(path))
	case err != nil:
		return exitcode.Usagef("--%s %s: %v", flag, quoted(path), bare(err))
	case st.Mode()&fs.ModeSymlink != 0:
		return exitcode.Usagef("--%s %s: is a symbolic link: refused (name the directory itself)", flag, quoted(path))
	case !st.IsDir():
		return exitcode.Usagef("--%s %s: is %s, not a directory", flag, quoted(path), Kind(st.Mode()))
	}
	return nil
}

// Path is the directory as given.
func (p *Parent) Path() string { return p.path }

// Close releases the directory.
func (p *Parent) Close() error { return unix.Close(p.fd) }

// ourName is the shape of New's names: PREFIX-...-<16 hex digits>.
var ourName = regexp.MustCompile(`-[0-9a-f]{16}$`)

// New makes a folder of its own below p, mode 0700: name, a dash and 16
// random hex digits, made with mkdir (a name someone made already, folder
// or link, is never used: another is drawn).
func (p *Parent) New(name string) (*Folder, error) {
	for i := 0; ; i++ {
		full := name + "-" + random()
		err := unix.Mkdirat(p.fd, full, FolderMode)
		if errors.Is(err, unix.EEXIST) && i < 100 {
			continue
		}
		if err != nil {
			return nil, exitcode.Unreachablef("--%s %s: cannot make a folder in it: %v", p.flag, quoted(p.path), err)
		}
		return openMade(p.flag, p.fd, full, filepath.Join(p.path, full))
	}
}

// Fresh is name with a dash and 16 random hex digits after it: a default
// name for a NewFolder no one can make beforehand.
func Fresh(name string) string { return name + "-" + random() }

// NewFolder is a folder a flag names exactly (bench --out DIR), which the
// run makes: it must not exist.
type NewFolder struct {
	flag, path string
}

// CheckNew checks path, named by flag, as a folder the run makes: nothing
// may be there yet (a folder someone made beforehand is never written
// into), and a folder can be made in its directory (one is made and
// removed at once).
func CheckNew(flag, path string) (*NewFolder, error) {
	if path == "" {
		return nil, exitcode.Usagef(`--%s "": no folder named (name a DIR that does not exist, or leave --%s out)`, flag, flag)
	}
	dir := filepath.Dir(path)
	if err := checkDir(flag, path, dir, "to make it in"); err != nil {
		return nil, err
	}
	if st, err := os.Lstat(path); err == nil {
		return nil, exitcode.Usagef("--%s %s: exists (%s): the results go to a new folder: name one that does not exist", flag, quoted(path), Kind(st.Mode()))
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, exitcode.Usagef("--%s %s: %v", flag, quoted(path), bare(err))
	}
	probe := filepath.Join(dir, "."+random()+".probe")
	if err := os.Mkdir(probe, FolderMode); err != nil {
		return nil, exitcode.Usagef("--%s %s: cannot make a folder in %s: %v", flag, quoted(path), quoted(dir), bare(err))
	}
	os.Remove(probe)
	return &NewFolder{flag: flag, path: path}, nil
}

// Path is the folder as given.
func (n *NewFolder) Path() string { return n.path }

// Create makes the folder, mode 0700; one made since CheckNew is refused.
func (n *NewFolder) Create() (*Folder, error) {
	dir, base := filepath.Dir(n.path), filepath.Base(n.path)
	pfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, exitcode.Unreachablef("--%s %s: %v", n.flag, quoted(n.path), err)
	}
	defer unix.Close(pfd)
	if err := unix.Mkdirat(pfd, base, FolderMode); err != nil {
		if errors.Is(err, unix.EEXIST) {
			return nil, exitcode.Usagef("--%s %s: exists: the results go to a new folder: name one that does not exist", n.flag, quoted(n.path))
		}
		return nil, exitcode.Unreachablef("--%s %s: %v", n.flag, quoted(n.path), err)
	}
	return openMade(n.flag, pfd, base, n.path)
}

// openMade opens the folder just made as name in the directory pfd,
// without following a link, and checks it is the one made: a directory of
// this user, mode 0700 (a folder swapped in between is refused).
func openMade(flag string, pfd int, name, path string) (*Folder, error) {
	fd, err := unix.Openat(pfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, exitcode.Unreachablef("--%s %s: %v", flag, quoted(path), err)
	}
	if err := ownFolder(fd); err != nil {
		unix.Close(fd)
		return nil, exitcode.Unreachablef("--%s %s: %v", flag, quoted(path), err)
	}
	return &Folder{Path: path, flag: flag, fd: fd, dirs: map[string]int{}}, nil
}

// ownFolder checks that fd is a directory of this user; its mode is set to
// 0700 exactly (mkdir's mode passes through the umask).
func ownFolder(fd int) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR || int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("not the folder just made (replaced meanwhile)")
	}
	return unix.Fchmod(fd, FolderMode)
}

// Folder is a folder the run made; its files are new files (WriteFile).
// Safe for one goroutine at a time.
type Folder struct {
	Path string
	flag string
	fd   int
	dirs map[string]int // subfolders made, by path inside the folder
}

// WriteFile writes b as a new file rel of the folder (subfolders of rel
// made as needed, mode 0700): created with O_CREAT|O_EXCL|O_NOFOLLOW, mode
// 0600. rel is a path inside the folder: an absolute one, "..", or a
// file that is there already is refused.
func (f *Folder) WriteFile(rel string, b []byte) error {
	if !filepath.IsLocal(rel) || filepath.Clean(rel) != rel {
		return fmt.Errorf("%s: not a name inside %s", quoted(rel), f.Path)
	}
	dfd := f.fd
	parts := strings.Split(rel, string(filepath.Separator))
	for i := range parts[:len(parts)-1] {
		sub := strings.Join(parts[:i+1], string(filepath.Separator))
		if fd, ok := f.dirs[sub]; ok {
			dfd = fd
			continue
		}
		if err := unix.Mkdirat(dfd, parts[i], FolderMode); err != nil {
			return fmt.Errorf("%s: %v", sub, err)
		}
		fd, err := unix.Openat(dfd, parts[i], unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("%s: %v", sub, err)
		}
		if err := ownFolder(fd); err != nil {
			unix.Close(fd)
			return fmt.Errorf("%s: %v", sub, err)
		}
		f.dirs[sub] = fd
		dfd = fd
	}
	fd, err := unix.Openat(dfd, parts[len(parts)-1], unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_NOCTTY|unix.O_CLOEXEC, FileMode)
	if err != nil {
		return fmt.Errorf("%s: %v", rel, err)
	}
	file := os.NewFile(uintptr(fd), filepath.Join(f.Path, rel))
	defer file.Close()
	if err := file.Chmod(FileMode); err != nil {
		return fmt.Errorf("%s: %v", rel, bare(err))
	}
	if _, err := file.Write(b); err != nil {
		return fmt.Errorf("%s: %v", rel, bare(err))
	}
	return nil
}

// Close releases the folder.
func (f *Folder) Close() error {
	for _, fd := range f.dirs {
		unix.Close(fd)
	}
	f.dirs = map[string]int{}
	return unix.Close(f.fd)
}

// Prune keeps, of the folders New made below p with name (a dash and
// random hex digits after it) and owned by this user, the newest ones
// within maxCount folders and maxBytes of their files together, and
// removes the others, oldest first; keep (a folder's path) is never
// removed. What another user made, a link, or a name of another shape is
// left alone. It returns the paths removed.
func (p *Parent) Prune(name string, maxCount int, maxBytes int64, keep string) ([]string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.sizes == nil {
		p.sizes = map[string]int64{}
	}
	ents, err := readDirAt(p.fd)
	if err != nil {
		return nil, err
	}
	type kept struct {
		name  string
		mtime int64
		size  int64
	}
	var ours []kept
	seen := map[string]bool{}
	for _, e := range ents {
		if !strings.HasPrefix(e, name+"-") || !ourName.MatchString(e) {
			continue
		}
		var st unix.Stat_t
		if err := unix.Fstatat(p.fd, e, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			continue
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR || int(st.Uid) != os.Geteuid() {
			continue
		}
		seen[e] = true
		size, ok := p.sizes[e]
		if !ok || filepath.Join(p.path, e) == keep {
			size = treeBytes(filepath.Join(p.path, e))
			p.sizes[e] = size
		}
		ours = append(ours, kept{e, st.Mtim.Nano(), size})
	}
	for n := range p.sizes {
		if !seen[n] {
			delete(p.sizes, n)
		}
	}
	sort.Slice(ours, func(i, j int) bool {
		if ours[i].mtime != ours[j].mtime {
			return ours[i].mtime > ours[j].mtime
		}
		return ours[i].name > ours[j].name
	})
	var removed []string
	var total int64
	count, over := 0, false
	for _, k := range ours {
		full := filepath.Join(p.path, k.name)
		over = over || count >= maxCount || total+k.size > maxBytes
		if full == keep || !over {
			count++
			total += k.size
			continue
		}
		if err := os.RemoveAll(full); err != nil {
			return removed, fmt.Errorf("%s: %v", full, bare(err))
		}
		delete(p.sizes, k.name)
		removed = append(removed, full)
	}
	return removed, nil
}

// readDirAt lists the names of the directory fd.
func readDirAt(fd int) ([]string, error) {
	dfd, err := unix.Openat(fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	d := os.NewFile(uintptr(dfd), ".")
	defer d.Close()
	return d.Readdirnames(-1)
}

// treeBytes is the size of the regular files below dir (links are not
// followed).
func treeBytes(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, e fs.DirEntry, err error) error {
		if err == nil && e.Type().IsRegular() {
			if info, err := e.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}
