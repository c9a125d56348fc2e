package bench

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/qmp"
)

// GuardRefused is the exit status of bench's guest scripts when what they
// check does not hold (fio exits 0 or 1).
const GuardRefused = 97

// folderScript checks, for file mode, the mount point in $1 and the folder
// $2 in it: the mount point is root's and nobody else may rename in it
// (not group- or other-writable, or sticky), so a folder bench creates
// there stays bench's; then, with $3 = 1, creates the folder (mkdir: it
// fails on anything there, a symlink too), else says whether something is
// there already.
const folderScript = `m=$1; d=$2; claim=$3
set -- $(stat -c '%u %a' -- "$m" 2>/dev/null)
u=$1; a=$2
case "$a" in ''|*[!0-7]*) echo "pvediskcheck-folder=unreadable"; exit 97;; esac
if [ "$u" != 0 ]; then echo "pvediskcheck-folder=owner $u"; exit 97; fi
if [ $((0$a & 022)) -ne 0 ] && [ $((0$a & 01000)) -eq 0 ]; then echo "pvediskcheck-folder=writable $a"; exit 97; fi
if [ "$claim" = 1 ]; then
  mkdir -m 0700 -- "$d" || { echo "pvediskcheck-folder=exists"; exit 97; }
elif [ -e "$d" ] || [ -L "$d" ]; then echo "pvediskcheck-folder=exists"; exit 97
fi
echo "pvediskcheck-folder=ok"`

// CheckFolder checks file mode's folder in the guest (folderScript):
// with claim, creates it. Refusals are exit 2 naming the disk.
func CheckFolder(ctx context.Context, a qmp.Agent, t Target, claim bool) error {
	c := "0"
	if claim {
		c = "1"
	}
	fctx, cancel := context.WithTimeout(ctx, ProbeTimeout)
	defer cancel()
	st, err := a.Run(fctx, "sh", []string{"-c", folderScript, "sh", t.Mount, t.Dir, c}, nil, 100*time.Millisecond)
	if err != nil {
		return exitcode.Wrap(exitcode.Unreachable, fmt.Sprintf("%s: checking %s in the guest", t.Disk, t.Mount), err)
	}
	out := strings.TrimSpace(string(st.Stdout))
	why, _ := strings.CutPrefix(out[strings.LastIndex(out, "\n")+1:], "pvediskcheck-folder=")
	switch {
	case st.OK() && why == "ok":
		return nil
	case st.ExitCode != GuardRefused:
		return exitcode.Unreachablef("%s: checking %s in the guest: sh exited %d: %s", t.Disk, t.Mount, st.ExitCode, clip(append(st.Stderr, st.Stdout...)))
	case why == "exists":
		return exitcode.Usagef("%s: %s is already there in the guest (left by a bench that was killed, or put there): bench writes only a folder it creates; look at it, remove it (rm -r %s in the guest), then run again (nothing written)",
			t.Disk, t.Dir, t.Dir)
	case strings.HasPrefix(why, "owner"), strings.HasPrefix(why, "writable"):
		return exitcode.Usagef("%s: the mount point %s is %s: another user could swap bench's folder there for a link to something else; make it root's and not writable by others (or sticky), or test another filesystem (nothing written)",
			t.Disk, t.Mount, map[bool]string{true: "not root's (" + why + ")", false: "writable by others without the sticky bit (mode " + strings.TrimPrefix(why, "writable ") + ")"}[strings.HasPrefix(why, "owner")])
	}
	return exitcode.Unreachablef("%s: %s in the guest could not be checked (%s): nothing written", t.Disk, t.Mount, why)
}

// guardScript runs before each fio run, in the same guest-exec, and
// execs fio only when what bench proved still holds; else it prints what
// it found and exits GuardRefused. Raw ($1 = raw): the device $2 shows no
// probe line (probeFn) but those accepted ($3, a line each: --destroy's),
// and with $4 = 1 (nothing written to it yet) its first MiB is still all
// zeroes and read whole. File ($1 = file): the folder $2 is still a folder
// of root's, mode 0700, not a link, and the test file $3 in it is absent
// or a regular file (not a link). Then "$@" after the four is fio.
const guardScript = probeFn + `
mode=$1; x=$2; y=$3; first=$4; shift 4
nl='
'
if [ "$mode" = file ]; then
  if [ -L "$x" ] || [ ! -d "$x" ] || [ "$(stat -c '%u %a' -- "$x")" != "0 700" ] || [ -L "$y" ] || { [ -e "$y" ] && [ ! -f "$y" ]; }; then
    echo "pvediskcheck-guard=folder"; exit 97
  fi
  exec "$@"
fi
out=$(probe "$x")
bad=
while IFS= read -r l; do
  case "$l" in
  pvediskcheck-blkid-exit=0|pvediskcheck-blkid-exit=2) continue;;
  TYPE=*|PTTYPE=*|pvediskcheck-*) ;;
  *) continue;;
  esac
  case "$nl$y$nl" in *"$nl$l$nl"*) ;; *) bad=1;; esac
done <<EOF
$out
EOF
if [ -z "$bad" ] && [ "$first" = 1 ]; then
  t=$(( $(head -c 1048576 -- "$x" | wc -c) ))
  z=$(( $(head -c 1048576 -- "$x" | tr -d '\000' | wc -c) ))
  if [ "$t" -ne 1048576 ]; then echo "pvediskcheck-head=short $t"; bad=1
  elif [ "$z" -ne 0 ]; then echo "pvediskcheck-head=data"; bad=1; fi
fi
if [ -n "$bad" ]; then printf '%s\n' "$out"; echo "pvediskcheck-guard=changed"; exit 97; fi
exec "$@"`

// GuardArgv is the guest command line of one fio run on t: guardScript,
// then fio (argv). first: nothing has been written to t yet (a raw
// disk's first MiB is checked again).
func GuardArgv(t Target, first bool, argv []string) []string {
	f := "0"
	if first {
		f = "1"
	}
	x, y := t.Device, strings.Join(t.Accepted, "\n")
	mode := "raw"
	if t.Mode == File {
		mode, x, y = "file", t.Dir, t.Path
	}
	return append([]string{"sh", "-c", guardScript, "sh", mode, x, y, f}, argv...)
}

// guardRefusal says what a run's guard found (exit 2): the disk changed
// since bench checked it, and nothing more was written to it.
func guardRefusal(d *Disk, s Step, out string) error {
	t := d.Target
	if t.Mode == File {
		return exitcode.Usagef("%s: %s in the guest is no longer bench's folder of root's, mode 0700, or the test file there is not a regular file: "+
			"stopped before %s, nothing more written (look at it in the guest)", d.ID, t.Dir, s.File())
	}
	var found []string
	for _, l := range strings.Split(out, "\n") {
		switch l = strings.TrimSpace(l); {
		case l == "pvediskcheck-head=data":
			found = append(found, "data in its first MiB")
		case strings.HasPrefix(l, "pvediskcheck-head=short"):
			found = append(found, "its first MiB could not be read whole ("+strings.TrimPrefix(l, "pvediskcheck-head=short ")+" bytes)")
		}
	}
	found = append(ProbeFindings(out), found...)
	return exitcode.Usagef("%s (%s in the guest) changed since bench checked it: %s. Stopped before %s: nothing more was written to it",
		d.ID, t.Device, strings.Join(found, "; "), s.File())
}

// cleanScript removes file mode's test file and folder (rmdir: a folder
// someone else filled is left, and said).
const cleanScript = `rm -f -- "$2" && rmdir -- "$1"`
