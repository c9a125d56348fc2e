package fakerun

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"reflect"
	"testing"
	"time"

	"github.com/pvediskcheck/pvediskcheck/node"
)

var _ node.Runner = (*Runner)(nil)

func TestNode(t *testing.T) {
	r := &Runner{}
	n := node.New(node.NewPaths("/r", "", ""), time.Second)
	if got := r.Node(n); got.Runner != r || got.Paths != n.Paths || got.Timeout != time.Second {
		t.Errorf("%+v", got)
	}
	if _, ok := n.Runner.(node.Exec); !ok {
		t.Error("n itself changed")
	}
}

func TestAnswers(t *testing.T) {
	boom := errors.New("exit 5")
	r := (&Runner{
		Out: map[string]string{"zfs get rpool/data": "used\t1\n", "zfs get": "any\n", "qm showcmd": "kvm -id 390\n"},
		Err: map[string]error{"zfs get rpool/bad": boom, "qm": boom},
	}).Record(t, "lvs", "../../lvm/testdata/real-vg-inactive.json")
	rec, err := os.ReadFile("../../lvm/testdata/real-vg-inactive.json")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, c := range []struct {
		argv []string
		out  string
		err  error
	}{
		{[]string{"lvs", "--reportformat", "json", "pdclab"}, string(rec), nil},
		// The most words win, whatever lies between them.
		{[]string{"zfs", "get", "-Hp", "-o", "property,value", "used,available", "rpool/data"}, "used\t1\n", nil},
		{[]string{"zfs", "get", "-Hp", "rpool/other"}, "any\n", nil},
		{[]string{"zfs", "get", "-Hp", "rpool/bad"}, "", boom},
		{[]string{"qm", "showcmd", "390", "--pretty"}, "kvm -id 390\n", nil},
		{[]string{"qm", "set", "390"}, "", boom},
		// Words out of order, or another program, do not match.
		{[]string{"zfs", "rpool/data", "get"}, "any\n", nil},
		{[]string{"showcmd", "qm"}, "", exec.ErrNotFound},
	} {
		out, err := r.Run(ctx, c.argv...)
		if string(out) != c.out || !errors.Is(err, c.err) {
			t.Errorf("%v: %q, %v", c.argv, out, err)
		}
	}
	if n := r.Count("zfs get"); n != 4 {
		t.Errorf("zfs get ran %d times, want 4", n)
	}
	if n := r.Count("lvs pdclab"); n != 1 {
		t.Errorf("lvs pdclab ran %d times", n)
	}
	if got := r.Calls(); len(got) != 8 || got[0] != "lvs --reportformat json pdclab" || got[7] != "showcmd qm" {
		t.Errorf("calls %q", got)
	}
}

// A double acting as the program: given the argv, over Out and Err of no
// more words; a more specific Out still wins.
func TestDo(t *testing.T) {
	var got []string
	r := &Runner{
		Out: map[string]string{"qm": "out\n", "qm set 370": "recorded\n"},
		Err: map[string]error{"qm": errors.New("err")},
		Do: map[string]func([]string) ([]byte, error){"qm set": func(argv []string) ([]byte, error) {
			got = argv
			return []byte("update VM 371\n"), nil
		}},
	}
	if out, err := r.Run(context.Background(), "qm", "set", "371", "--scsi1", "x"); string(out) != "update VM 371\n" || err != nil || !reflect.DeepEqual(got, []string{"qm", "set", "371", "--scsi1", "x"}) {
		t.Errorf("do: %q %v %q", out, err, got)
	}
	if out, err := r.Run(context.Background(), "qm", "set", "370"); string(out) != "recorded\n" || err != nil {
		t.Errorf("a longer Out: %q %v", out, err)
	}
	if out, err := r.Run(context.Background(), "qm", "config", "370"); string(out) != "out\n" || err == nil {
		t.Errorf("no double: %q %v", out, err)
	}
	if n := r.Count("qm"); n != 3 {
		t.Errorf("%d qm calls recorded", n)
	}
}

// A command that printed and then failed; a deadline given is recorded.
func TestOutputAndError(t *testing.T) {
	fail := &node.CommandError{Argv: []string{"lvs"}, Status: 5, Stderr: "Volume group not found"}
	r := &Runner{Out: map[string]string{"lvs": "{}"}, Err: map[string]error{"lvs": fail}}
	out, err := r.RunTimeout(context.Background(), time.Minute, "lvs", "pdcnosuchvg")
	if string(out) != "{}" || !errors.Is(err, fail) {
		t.Errorf("%q, %v", out, err)
	}
	if got := r.Recorded(); !reflect.DeepEqual(got, []Call{{Argv: []string{"lvs", "pdcnosuchvg"}, Timeout: time.Minute}}) {
		t.Errorf("recorded %+v", got)
	}
	if _, err := r.Run(context.Background()); err == nil {
		t.Error("empty command ran")
	}
}

// An unanswered command fails exactly as node.Exec fails for a program
// that is not on PATH.
func TestMissingAsExec(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, want := node.Exec{}.Run(context.Background(), "lvs", "pve")
	_, got := (&Runner{}).Run(context.Background(), "lvs", "pve")
	if want == nil || got == nil || got.Error() != want.Error() || !errors.Is(got, os.ErrNotExist) != !errors.Is(want, os.ErrNotExist) {
		t.Errorf("got %v, want %v", got, want)
	}
}
