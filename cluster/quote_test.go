package cluster

import (
	"strings"
	"testing"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
)

func TestQuote(t *testing.T) {
	cases := map[string]string{
		"":                    `''`,
		"370":                 `'370'`,
		"a b":                 `'a b'`,
		"it's":                `'it'\''s'`,
		"'":                   `''\'''`,
		"$(reboot)":           `'$(reboot)'`,
		"`id`;rm -rf / &":     "'`id`;rm -rf / &'",
		`"\*?[a]~{x,y}|<>#!%`: `'"\*?[a]~{x,y}|<>#!%'`,
	}
	for in, want := range cases {
		if got := Quote(in); got != want {
			t.Errorf("Quote(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestQuoteArgs(t *testing.T) {
	got, err := QuoteArgs([]string{"pvediskcheck", "--json", "it's"})
	if err != nil || strings.Join(got, " ") != `'pvediskcheck' '--json' 'it'\''s'` {
		t.Errorf("QuoteArgs = %q, %v", got, err)
	}
	for _, bad := range []string{"a\nb", "a\x00b", "\x1b[31m", "a\tb", "\xff\xfe", "a\u0085b"} {
		if out, err := QuoteArgs([]string{"ok", bad}); err == nil {
			t.Errorf("QuoteArgs accepted %q: %q", bad, out)
		}
	}
}

func TestValidators(t *testing.T) {
	type tc struct {
		in string
		ok bool
	}
	check := func(name string, f func(string) error, cases []tc) {
		t.Helper()
		for _, c := range cases {
			err := f(c.in)
			if (err == nil) != c.ok {
				t.Errorf("%s(%q) = %v, want ok=%v", name, c.in, err, c.ok)
			}
			if err != nil && !strings.Contains(err.Error(), strings.Trim(c.in[:min(len(c.in), 10)], " ")) {
				t.Errorf("%s(%q): error %q does not name the input", name, c.in, err)
			}
		}
	}
	check("ValidateNodeName", ValidateNodeName, []tc{
		{"pve1", true}, {"a", true}, {"A-9", true}, {"node-01", true}, {"9", true},
		{"", false}, {"a-", false}, {"-a", false}, {"a.b", false}, {"a_b", false}, {"a b", false}, {"a;b", false},
	})
	check("ValidateStorageID", ValidateStorageID, []tc{
		{"local-lvm", true}, {"ab", true}, {"a_b.c-d", true}, {"Local2", true},
		{"a", false}, {"1a", false}, {"a.", false}, {"a-", false}, {"", false}, {"a b", false}, {"a;b", false},
	})
	check("ValidateDisk", ValidateDisk, []tc{
		{"scsi0", true}, {"scsi30", true}, {"virtio15", true}, {"sata5", true}, {"ide3", true}, {"efidisk0", true}, {"tpmstate0", true},
		{"scsi31", false}, {"virtio16", false}, {"sata6", false}, {"ide4", false}, {"net0", false}, {"scsi1;x", false}, {"", false}, {"unused0", false},
	})
	check("ValidateVMID", ValidateVMID, []tc{
		{"100", true}, {"999999999", true},
		{"99", false}, {"1000000000", false}, {"abc", false}, {"+100", false}, {" 100", false}, {"", false},
	})
	check("ValidateValue", ValidateValue, []tc{
		{"20", true}, {"0", true}, {"0.5", true}, {"1e3", true}, {"-5", true}, {"error", true}, {"warning", true}, {"a-b9", true},
		{strings.Repeat("a", 32), true},
		{strings.Repeat("a", 33), false}, {"", false}, {"inf", true}, {"Inf", false}, {"NaN", false}, {"1e400", false}, {"Error", false},
		{"a;b", false}, {"$(x)", false}, {"9a", false}, {" 5", false}, {"-a", false},
	})
}

// The arguments sent to another node, each validated as what it is.
func TestValidateArgs(t *testing.T) {
	cases := []struct {
		kind Args
		pos  []string
		ok   bool
	}{
		{VMIDs, nil, true},
		{VMIDs, []string{"370", "100", "999999999"}, true},
		{VMIDs, []string{"370", "scsi0"}, false},
		{VMIDs, []string{"370", "371"}, true},
		{StorageIDs, []string{"local-lvm", "local-zfs"}, true},
		{StorageIDs, []string{"local;reboot"}, false},
		{StorageIDs, []string{"370"}, false},
		{VMThenDisks, []string{"370"}, true},
		{VMThenDisks, []string{"370", "scsi0", "virtio15", "efidisk0"}, true},
		{VMThenDisks, []string{"scsi0"}, false},
		{VMThenDisks, []string{"370", "370"}, false},
		{VMThenDisks, []string{"370", "sata0;touch x"}, false},
		{VMThenDisks, []string{"abc"}, false},
	}
	for _, c := range cases {
		err := ValidateArgs(c.kind, c.pos)
		if (err == nil) != c.ok || err != nil && exitcode.Of(err) != exitcode.Usage {
			t.Errorf("%d %q: %v (exit %d), want ok=%v", c.kind, c.pos, err, exitcode.Of(err), c.ok)
		}
	}
	if err := ValidateArgs(StorageIDs, []string{"local-lvm", "x"}); err == nil || !strings.Contains(err.Error(), `storage "x" is not a valid storage ID`) {
		t.Errorf("the error names the argument: %v", err)
	}
}
