package cluster

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

func compact(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

func answered(name, ip, version string, exit int, stdout string) Answer {
	return Answer{Node: Member{Name: name, IP: ip, Online: true}, Status: Answered, Reply: &Reply{Node: name, Version: version, Exit: exit, Stdout: stdout}}
}

// check --all --cluster: each VM carries its node, the summaries add up,
// a node that did not answer contributes its config-only results marked as
// such, an offline node none, and a node whose JSON cannot be read becomes
// an error of its own.
func TestMergeCheck(t *testing.T) {
	answers := []Answer{
		answered("pve1", "10.0.0.1", "0.1", 1, `{"vms": [{"vmid": 370, "running": true, "findings": []}], "summary": {"vms": 1, "errors": 0, "warnings": 1, "infos": 0}}`),
		answered("pve2", "10.0.0.2", "0.2", 0, `{"vms": [{"vmid": 380, "running": false}], "summary": {"vms": 1, "errors": 1, "warnings": 0, "infos": 2}, "extra": "first"}`),
		{Node: Member{Name: "pve3"}, Status: Unreachable, Err: &NodeError{Node: "pve3", Status: Unreachable, Msg: "refused"},
			ConfigOnly: &Reply{Node: "pve1", Version: "0.1", Stdout: `{"vms": [{"vmid": 390}], "summary": {"vms": 1, "errors": 0, "warnings": 2, "infos": 0}, "extra": "late"}`}},
		{Node: Member{Name: "pve4"}, Status: Offline, Err: &NodeError{Node: "pve4", Status: Offline, Msg: "offline"}},
		answered("pve5", "", "0.1", 0, "garbage"),
		{Node: Member{Name: "pve6"}, Status: Unreachable, Err: &NodeError{Node: "pve6", Status: Unreachable, Msg: "timeout"},
			ConfigOnly: &Reply{Stdout: "not json"}},
	}
	answers[0].Elapsed = 250400 * time.Microsecond
	got := compact(t, Merge(answers, "0.1"))
	want := `{"vms":[{"node":"pve1","vmid":370,"running":true,"findings":[]},{"node":"pve2","vmid":380,"running":false},{"node":"pve3","config_only":true,"vmid":390}],` +
		`"summary":{"vms":3,"errors":1,"warnings":3,"infos":2},"extra":"first",` +
		`"nodes":[{"node":"pve1","ip":"10.0.0.1","status":"ok","version":"0.1","exit":1,"elapsed_s":0.25,"summary":{"vms":1,"errors":0,"warnings":1,"infos":0}},` +
		`{"node":"pve2","ip":"10.0.0.2","status":"ok","version":"0.2","exit":0,"elapsed_s":0,"version_differs":true,"summary":{"vms":1,"errors":1,"warnings":0,"infos":2}},` +
		`{"node":"pve3","status":"unreachable","exit":null,"error":"refused","elapsed_s":0,"config_only":true,"summary":{"vms":1,"errors":0,"warnings":2,"infos":0}},` +
		`{"node":"pve4","status":"offline","exit":null,"error":"offline","elapsed_s":0},` +
		`{"node":"pve5","status":"bad-reply","version":"0.1","exit":0,"error":"printed JSON that cannot be read (invalid character 'g' looking for beginning of value): \"garbage\"","elapsed_s":0},` +
		`{"node":"pve6","status":"unreachable","exit":null,"error":"timeout","elapsed_s":0}]}`
	if got != want {
		t.Errorf("merged:\n got %s\nwant %s", got, want)
	}
	if answers[4].Status != BadReply || answers[5].ConfigOnly != nil || answers[0].Status != Answered {
		t.Errorf("statuses after Merge: %s %v %s", answers[4].Status, answers[5].ConfigOnly, answers[0].Status)
	}
}

// thin --cluster: pools carry their node, notes are prefixed with it.
func TestMergeThin(t *testing.T) {
	answers := []Answer{
		answered("pve1", "", "1", 0, `{"pools": [], "notes": ["no lvmthin or zfspool storage"]}`),
		answered("pve2", "", "1", 1, `{"pools": [{"storage": "local-lvm", "volumes": [{"name": "vm-380-disk-0"}]}], "notes": ["x", 7]}`),
	}
	got := compact(t, Merge(answers, "1"))
	want := `{"pools":[{"node":"pve2","storage":"local-lvm","volumes":[{"name":"vm-380-disk-0"}]}],"notes":["pve1: no lvmthin or zfspool storage","pve2: x",7],` +
		`"nodes":[{"node":"pve1","status":"ok","version":"1","exit":0,"elapsed_s":0},{"node":"pve2","status":"ok","version":"1","exit":1,"elapsed_s":0}]}`
	if got != want {
		t.Errorf("merged:\n got %s\nwant %s", got, want)
	}
}

// Values that do not fit together keep the first node's.
func TestMergeConflicts(t *testing.T) {
	answers := []Answer{
		answered("a", "", "1", 0, `{"notes": "text", "summary": {"n": 1, "t": 0.5}, "counts": {"x": 1}, "list": [1, {"k": 1}]}`),
		answered("b", "", "1", 0, `{"notes": ["y"], "summary": {"t": 1, "n": 2, "m": -3}, "counts": {"x": "one"}, "list": "x", "flag": true}`),
		answered("c", "", "1", 0, `{"notes": ["z"], "list": [2], "flag": false, "counts": {"x": 2}}`),
	}
	got := compact(t, Merge(answers, "1"))
	want := `{"notes":"text","summary":{"n":3,"t":1.5,"m":-3},"counts":{"x":3},"list":[1,{"node":"a","k":1},2],"flag":true,"nodes":[`
	if len(got) < len(want) || got[:len(want)] != want {
		t.Errorf("merged:\n got %s\nwant %s...", got, want)
	}
}

// A node that did not answer still has its version named when it was
// learnt (a pvediskcheck too old to answer), and a reply's version wins.
func TestReports(t *testing.T) {
	got := Reports([]Answer{
		{Node: Member{Name: "a"}, Status: OtherVersion, Err: &NodeError{Node: "a", Status: OtherVersion, Msg: "old", Version: "0.0.9"}},
		{Node: Member{Name: "b"}, Status: Failed, Reply: &Reply{Version: "1", Exit: 3}, Err: &NodeError{Node: "b", Status: Failed, Msg: "x", Version: "2"}},
		{Node: Member{Name: "c"}, Status: Unreachable, Err: &NodeError{Node: "c", Status: Unreachable, Msg: "y"}},
	}, "1")
	if r := got[0]; r.Version != "0.0.9" || !r.VersionDiffers || r.Exit != nil || r.Error != "old" {
		t.Errorf("a: %+v", r)
	}
	if r := got[1]; r.Version != "1" || r.VersionDiffers || *r.Exit != 3 {
		t.Errorf("b: %+v", r)
	}
	if r := got[2]; r.Version != "" || r.VersionDiffers {
		t.Errorf("c: %+v", r)
	}
}

func TestSumNumbers(t *testing.T) {
	cases := []struct{ a, b, want string }{
		{`{"x": 1}`, `{"x": 2}`, `{"x":3}`},
		{`{"x": 9007199254740993}`, `{"x": 1}`, `{"x":9007199254740994}`},
		{`{"x": 1e2}`, `{"x": 1}`, `{"x":101}`},
		{`{"x": -0.25}`, `{"y": 1}`, `{"x":-0.25,"y":1}`},
	}
	for _, c := range cases {
		got, ok := sumNumbers(json.RawMessage(c.a), json.RawMessage(c.b))
		if !ok || string(got) != c.want {
			t.Errorf("%s + %s = %s %v, want %s", c.a, c.b, got, ok, c.want)
		}
	}
	for _, c := range [][2]string{{`{"x": 1}`, `{"x": null}`}, {`{"x": 1}`, `[1]`}, {`{"x": true}`, `{"x": 1}`}, {`{"x": "1"}`, `{}`}} {
		if got, ok := sumNumbers(json.RawMessage(c[0]), json.RawMessage(c[1])); ok {
			t.Errorf("%s + %s = %s", c[0], c[1], got)
		}
	}
}

func TestKind(t *testing.T) {
	for in, want := range map[string]byte{` {"a":1}`: '{', "[]": '[', `"s"`: '"', "-1": '0', "0.5": '0', "9": '0', "true": 0, "null": 0, "": 0, "  ": 0} {
		if got := kind(json.RawMessage(in)); got != want {
			t.Errorf("kind(%q) = %q, want %q", in, got, want)
		}
	}
	if !isCounts(json.RawMessage(`{"a": 1, "b": -2.5}`)) || !isCounts(json.RawMessage(`{}`)) {
		t.Error("counts not recognised")
	}
	for _, in := range []string{`{"a": 1, "b": "2"}`, `[1]`, `1`, `{"a": {"b": 1}}`} {
		if isCounts(json.RawMessage(in)) {
			t.Errorf("isCounts(%s)", in)
		}
	}
}

func TestTagDocument(t *testing.T) {
	cases := []struct{ in, version, want string }{
		{`{"vmid": 380, "disks": [{"id": "scsi0"}]}`, "", `{"node":"pve2","vmid":380,"disks":[{"id":"scsi0"}]}`},
		{`{"vmid": 380}`, "0.9", `{"node":"pve2","node_version":"0.9","vmid":380}`},
		{`[{"disk": "scsi0"}, {"disk": "scsi1"}]`, "", `[{"node":"pve2","disk":"scsi0"},{"node":"pve2","disk":"scsi1"}]`},
		{`[]`, "", `[]`},
	}
	for _, c := range cases {
		got, err := TagDocument([]byte(c.in), "pve2", c.version)
		if err != nil || compact(t, got) != c.want {
			t.Errorf("TagDocument(%s) = %s, %v; want %s", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{`[1]`, `"x"`, `{"a": `, `[{"a": 1}`, ``, `null`} {
		if got, err := TagDocument([]byte(bad), "pve2", ""); err == nil {
			t.Errorf("TagDocument(%q) = %s", bad, got)
		}
	}
}

// A merged document read back: each object with its node and whether it
// was judged from configs only, its own fields as the node's type, and the
// nodes with their counts.
func TestDecode(t *testing.T) {
	type vm struct {
		VMID     int `json:"vmid"`
		Findings []struct {
			Code string `json:"code"`
		} `json:"findings"`
	}
	type counts struct{ VMs, Errors int }
	answers := []Answer{
		answered("pve1", "10.0.0.1", "0.1", 1, `{"vms": [{"vmid": 370, "findings": [{"code": "drift"}]}, {"vmid": 371}], "summary": {"vms": 2, "errors": 1}}`),
		{Node: Member{Name: "pve3"}, Status: Unreachable, Err: &NodeError{Node: "pve3", Status: Unreachable, Msg: "refused"},
			ConfigOnly: &Reply{Stdout: `{"vms": [{"vmid": 390}], "summary": {"vms": 1, "errors": 0}}`}},
	}
	var d struct {
		VMs     []Tagged[vm] `json:"vms"`
		Summary counts       `json:"summary"`
		Nodes   []struct {
			NodeReport
			Summary *counts `json:"summary"`
		} `json:"nodes"`
	}
	if err := Decode(Merge(answers, "0.1"), &d); err != nil {
		t.Fatal(err)
	}
	got := ""
	for _, v := range d.VMs {
		got += fmt.Sprintf("%d@%s config-only=%v findings=%d; ", v.Item.VMID, v.Node, v.ConfigOnly, len(v.Item.Findings))
	}
	if want := "370@pve1 config-only=false findings=1; 371@pve1 config-only=false findings=0; 390@pve3 config-only=true findings=0; "; got != want {
		t.Errorf("VMs:\n got %s\nwant %s", got, want)
	}
	if d.Summary != (counts{3, 1}) || len(d.Nodes) != 2 || d.Nodes[0].Node != "pve1" || *d.Nodes[0].Summary != (counts{2, 1}) ||
		d.Nodes[1].Status != Unreachable || !d.Nodes[1].ConfigOnly || *d.Nodes[1].Summary != (counts{1, 0}) {
		t.Errorf("summary %+v, nodes %+v", d.Summary, d.Nodes)
	}
	var bad struct {
		VMs []Tagged[vm] `json:"vms"`
	}
	for _, doc := range []string{`{"vms": [{"vmid": "370"}]}`, `{"vms": [{"node": 1, "vmid": 370}]}`, `{"vms": [7]}`} {
		o, err := ParseObject([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		if err := Decode(o, &bad); err == nil {
			t.Errorf("%s: decoded %+v", doc, bad)
		}
	}
}
