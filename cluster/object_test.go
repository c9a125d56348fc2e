package cluster

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestObject(t *testing.T) {
	o, err := ParseObject([]byte(` {"z": 1, "a": [1, 2], "m": {"x": null}, "a": "again"} `))
	if err != nil {
		t.Fatal(err)
	}
	// Keys keep their first position; a repeated key takes the last value.
	if !reflect.DeepEqual(o.Keys(), []string{"z", "a", "m"}) {
		t.Errorf("keys %v", o.Keys())
	}
	if v, ok := o.Get("a"); !ok || string(v) != `"again"` {
		t.Errorf("a = %s %v", v, ok)
	}
	if _, ok := o.Get("q"); ok {
		t.Error("q found")
	}
	o.Set("m", 2, true) // in place, even when asked first
	o.Set("first", "x", true)
	o.Set("last", []int{1}, false)
	b, _ := json.Marshal(o)
	if string(b) != `{"first":"x","z":1,"a":"again","m":2,"last":[1]}` {
		t.Errorf("marshal %s", b)
	}
	var empty Object
	empty.Set("k", true, false)
	if b, _ := json.Marshal(empty); string(b) != `{"k":true}` {
		t.Errorf("zero Object: %s", b)
	}
	if b, _ := json.Marshal(Object{}); string(b) != `{}` {
		t.Errorf("empty: %s", b)
	}
	for _, bad := range []string{`[1]`, `"x"`, ``, `{"a" 1}`, `{"a": 1`, `{"a": }`, `{1: 2}`} {
		if o, err := ParseObject([]byte(bad)); err == nil {
			t.Errorf("ParseObject(%q) = %v", bad, o.Keys())
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("Set of a value JSON cannot encode did not panic")
		}
	}()
	o.Set("bad", func() {}, false)
}
