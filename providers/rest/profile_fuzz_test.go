package rest_test

import (
	"testing"

	"github.com/hookwarden/hookwarden/providers/rest"
)

// FuzzParseProfile checks that no input makes Parse panic, and that what Parse accepts
// validates again to the same answer.
func FuzzParseProfile(f *testing.F) {
	f.Add([]byte(tinyProfile))
	f.Add(profileWith(f, "list.pagination", "raw:{\"style\":\"cursor\",\"sizeParam\":\"l\",\"size\":1,\"cursorParam\":\"a\",\"next\":\"n\"}"))
	f.Add([]byte("apiVersion: [x"))
	f.Add([]byte(`{"apiVersion":"rest.hookwarden.io/v1alpha1","baseURL":"{{.Params.x}}"}`))
	for _, name := range shippedProfiles(f) {
		f.Add(sampleProfile(f, name))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := rest.Parse(data)
		if err != nil {
			return
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("Parse accepted a profile that Validate refuses: %v", err)
		}
	})
}
