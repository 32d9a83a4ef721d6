package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestValidateProfile(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("apiVersion: rest.hookwarden.io/v1alpha1\nkind: Profile\nname: bad\nlist: {paginaton: {}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	good, _ := filepath.Glob("../../config/samples/rest/*.profile.yaml")
	if len(good) < 4 {
		t.Fatalf("found %d shipped profiles", len(good))
	}

	var out, errOut bytes.Buffer
	if code := validateProfiles(good, &out, &errOut); code != 0 {
		t.Errorf("shipped profiles: exit %d, %s", code, errOut.String())
	}
	if strings.Count(out.String(), "is valid") != len(good) {
		t.Errorf("output %q; want one line per profile", out.String())
	}

	out.Reset()
	errOut.Reset()
	if code := validateProfiles(append(good[:1:1], bad), &out, &errOut); code != 1 {
		t.Errorf("a bad profile: exit %d; want 1", code)
	}
	for _, want := range []string{`unknown field "list.paginaton"`, "bad.yaml"} {
		if !strings.Contains(errOut.String(), want) {
			t.Errorf("messages %q lack %q", errOut.String(), want)
		}
	}
	if code := validateProfiles(nil, &out, &errOut); code != 2 {
		t.Errorf("no files: exit %d; want 2 (usage)", code)
	}
}
