package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// The release workflow runs `make release` for each v* tag, to the registry the README tells
// users to install from.
func TestReleaseWorkflow(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", ".github", "workflows", "release.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var wf struct {
		On   map[string]map[string][]string `json:"on"`
		True map[string]map[string][]string `json:"true"` // YAML 1.1 reads the key on as true
		Jobs map[string]struct {
			Steps []struct {
				Run string `json:"run"`
			} `json:"steps"`
		} `json:"jobs"`
	}
	if err := yaml.Unmarshal(b, &wf); err != nil {
		t.Fatal(err)
	}
	on := wf.On
	if on == nil {
		on = wf.True
	}
	if !slices.Contains(on["push"]["tags"], "v*") {
		t.Errorf("the workflow runs on %v, want push of tags v*", on)
	}
	var registry string
	for _, j := range wf.Jobs {
		for _, s := range j.Steps {
			if m := regexp.MustCompile(`make release VERSION="\$GITHUB_REF_NAME" REGISTRY=(\S+) SIGNING_KEY=`).FindStringSubmatch(s.Run); m != nil {
				registry = m[1]
			}
		}
	}
	if registry == "" {
		t.Fatal("no step runs make release VERSION=\"$GITHUB_REF_NAME\" REGISTRY=... SIGNING_KEY=...")
	}
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"helm install hookwarden oci://" + registry + "/charts/hookwarden --version", registry + "/manager"} {
		if !strings.Contains(string(readme), want) {
			t.Errorf("the workflow publishes to %s; the README does not say %q", registry, want)
		}
	}
	t.Logf("REPORT release workflow: tags v* -> make release -> %s (README names oci://%s/charts/hookwarden)", registry, registry)
}
