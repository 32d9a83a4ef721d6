package fakeapi

import "testing"

func TestApplyQuirks(t *testing.T) {
	obj := []byte(`{"id":1,"config":{"url":"https://a.example.com","insecure_ssl":"0"},"events":["push"]}`)
	got := ApplyQuirks(obj, []Quirk{
		{Path: "config.url"},
		{Path: "config.insecure_ssl", Value: []byte("0")},
		{Path: "events", Value: []byte("null")},
		{Path: "last_response", Value: []byte("null")},
	})
	if want := `{"id":1,"config":{"insecure_ssl":0},"events":null,"last_response":null}`; string(got) != want {
		t.Errorf("ApplyQuirks = %s; want %s", got, want)
	}
	if string(ApplyQuirks(obj, nil)) != string(obj) {
		t.Error("no quirks changed the object")
	}
}
