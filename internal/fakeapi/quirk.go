package fakeapi

import (
	"encoding/json"
	"slices"

	"github.com/tidwall/sjson"
)

// Quirk changes one field of an object a fake renders, so that a test can seed an object as
// the real API renders one it did not make: a field missing, null, or of another type (a
// legacy service hook without config.url, insecure_ssl as a number). The fake's own state is
// untouched; only what it sends changes.
type Quirk struct {
	// Path is an sjson dot path into the rendered object ("config.url").
	Path string `json:"path"`
	// Value is the raw JSON put there ("null", "0", `"x"`); empty deletes the field.
	Value json.RawMessage `json:"value,omitempty"`
}

// CloneQuirks copies qs, values included.
func CloneQuirks(qs []Quirk) []Quirk {
	out := slices.Clone(qs)
	for i := range out {
		out[i].Value = slices.Clone(out[i].Value)
	}
	return out
}

// ApplyQuirks returns the JSON object obj with each quirk applied in order. A quirk that
// cannot be applied (a malformed path or value) panics: quirks are written by tests, and a
// typo should fail loudly.
func ApplyQuirks(obj []byte, qs []Quirk) json.RawMessage {
	var err error
	for _, q := range qs {
		if len(q.Value) == 0 {
			obj, err = sjson.DeleteBytes(obj, q.Path)
		} else {
			if !json.Valid(q.Value) {
				panic("fakeapi: quirk " + q.Path + ": the value is not JSON")
			}
			obj, err = sjson.SetRawBytes(obj, q.Path, q.Value)
		}
		if err != nil {
			panic("fakeapi: quirk " + q.Path + ": " + err.Error())
		}
	}
	return obj
}
