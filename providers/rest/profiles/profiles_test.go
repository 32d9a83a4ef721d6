package profiles_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/hookwarden/hookwarden/providers/rest"
	"github.com/hookwarden/hookwarden/providers/rest/profiles"
)

const samples = "../../../config/samples/rest"

// TestBuiltinsAreTheSamples: every profile of config/samples/rest is built in, byte for byte
// (make profiles-sync copies them), and nothing else is.
func TestBuiltinsAreTheSamples(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(samples, "*.profile.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no shipped profiles in %s: %v", samples, err)
	}
	var want []string
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".profile.yaml")
		want = append(want, name)
		sample, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := profiles.Get(name)
		if !ok {
			t.Errorf("%s is not built in (make profiles-sync)", name)
			continue
		}
		if string(got) != string(sample) {
			t.Errorf("built-in %s differs from %s (make profiles-sync)", name, f)
		}
		if _, err := rest.Parse(got); err != nil {
			t.Errorf("built-in %s: %v", name, err)
		}
	}
	sort.Strings(want)
	if diff := cmp.Diff(want, profiles.Names()); diff != "" {
		t.Errorf("built-in names (-samples +built in):\n%s", diff)
	}
}

func TestGetUnknown(t *testing.T) {
	for _, name := range []string{"", "gitlab", "../profiles", "gitlab-project-hooks.yaml", "GitLab-Project-Hooks"} {
		if _, ok := profiles.Get(name); ok {
			t.Errorf("Get(%q) found a profile", name)
		}
	}
}

// TestCRDListsTheBuiltins: spec.provider.rest.builtin's enum in the CRD (a marker in api/) is
// the built-in profiles, so kubectl refuses an unknown name and explain lists them.
func TestCRDListsTheBuiltins(t *testing.T) {
	raw, err := os.ReadFile("../../../config/crd/bases/hookwarden.io_webhooksubscriptions.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(raw, &crd); err != nil {
		t.Fatal(err)
	}
	schema := crd.Spec.Versions[0].Schema.OpenAPIV3Schema
	builtin := schema.Properties["spec"].Properties["provider"].Properties["rest"].Properties["builtin"]
	var enum []string
	for _, v := range builtin.Enum {
		var s string
		if err := json.Unmarshal(v.Raw, &s); err != nil {
			t.Fatal(err)
		}
		enum = append(enum, s)
	}
	sort.Strings(enum)
	if diff := cmp.Diff(profiles.Names(), enum); diff != "" {
		t.Errorf("the CRD's spec.provider.rest.builtin enum (api/v1alpha1 RESTProvider.Builtin) (-built in +enum):\n%s", diff)
	}
}
