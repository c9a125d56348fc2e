package cluster

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// Object is a JSON object that keeps its keys in the order they came, so a
// merged document reads like the documents it was made of.
type Object struct {
	keys []string
	vals map[string]json.RawMessage
}

// ParseObject reads one JSON object.
func ParseObject(b []byte) (*Object, error) {
	o := &Object{}
	if err := json.Unmarshal(b, o); err != nil {
		return nil, err
	}
	return o, nil
}

// UnmarshalJSON implements json.Unmarshaler.
func (o *Object) UnmarshalJSON(b []byte) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	t, err := d.Token()
	if err != nil {
		return err
	}
	if t != json.Delim('{') {
		return errors.New("not a JSON object")
	}
	o.keys, o.vals = nil, map[string]json.RawMessage{}
	for d.More() {
		t, err := d.Token()
		if err != nil {
			return err
		}
		k, _ := t.(string)
		var v json.RawMessage
		if err := d.Decode(&v); err != nil {
			return err
		}
		o.put(k, v, false)
	}
	_, err = d.Token() // the closing brace
	return err
}

// MarshalJSON implements json.Marshaler.
func (o Object) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range o.keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		b.Write(kb)
		b.WriteByte(':')
		b.Write(o.vals[k])
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// Keys lists the keys in order.
func (o *Object) Keys() []string { return o.keys }

// Get returns the raw value of k.
func (o *Object) Get(k string) (json.RawMessage, bool) {
	v, ok := o.vals[k]
	return v, ok
}

// Set gives k the value v: in place when k exists, else last (or first).
func (o *Object) Set(k string, v any, first bool) {
	raw, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("cluster: %v", err)) // only values of this package are set
	}
	o.put(k, raw, first)
}

func (o *Object) put(k string, raw json.RawMessage, first bool) {
	if o.vals == nil {
		o.vals = map[string]json.RawMessage{}
	}
	if _, ok := o.vals[k]; !ok {
		if first {
			o.keys = append([]string{k}, o.keys...)
		} else {
			o.keys = append(o.keys, k)
		}
	}
	o.vals[k] = raw
}
