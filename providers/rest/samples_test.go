package rest_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/hookwarden/hookwarden/providers"
	"github.com/hookwarden/hookwarden/providers/rest"
)

// sampleProfile reads a shipped profile from config/samples/rest.
func sampleProfile(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "config", "samples", "rest", name+".profile.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// shippedProfiles names every profile in config/samples/rest.
func shippedProfiles(t testing.TB) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "..", "config", "samples", "rest", "*.profile.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		names = append(names, strings.TrimSuffix(filepath.Base(f), ".profile.yaml"))
	}
	return names
}

func newClient(t testing.TB, profile, apiURL string, params map[string]string, credential string) *rest.Client {
	t.Helper()
	c, err := rest.New(providers.Config{APIURL: apiURL, Target: rest.Target(params), Settings: sampleProfile(t, profile), Credential: credential, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("rest.New(%s): %v", profile, err)
	}
	return c
}

// TestSubscriptionSamplesFitTheirProfiles checks each shipped subscription sample against the
// built-in profile it names (read through Scope, as the manager reads spec.provider.rest): the
// parameters are accepted and, for a flags API, the events exist.
func TestSubscriptionSamplesFitTheirProfiles(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("..", "..", "config", "samples", "rest", "*.subscription.yaml"))
	if len(files) < 4 {
		t.Fatalf("found %d subscription samples", len(files))
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var sub struct {
			Spec struct {
				Provider struct {
					Type string          `json:"type"`
					REST json.RawMessage `json:"rest"`
				} `json:"provider"`
				Events []string `json:"events"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal(raw, &sub); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		var block struct{ Builtin string }
		_ = json.Unmarshal(sub.Spec.Provider.REST, &block)
		if want := strings.TrimSuffix(filepath.Base(f), ".subscription.yaml"); sub.Spec.Provider.Type != "rest" || block.Builtin != want {
			t.Errorf("%s: provider %s, builtin %q (want rest, %q)", f, sub.Spec.Provider.Type, block.Builtin, want)
			continue
		}
		scope, err := rest.Scope(sub.Spec.Provider.REST, sub.Spec.Events)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		c, err := rest.New(providers.Config{APIURL: "https://api.example.com", Target: scope.Target, Settings: scope.Settings, Credential: "token", Timeout: 5 * time.Second})
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if p := c.Profile(); p.Events.Style == rest.EventsFlags {
			for _, e := range sub.Spec.Events {
				if _, ok := p.Events.Flags[e]; !ok {
					t.Errorf("%s: event %q is not one of %s's flags", f, e, block.Builtin)
				}
			}
		}
	}
}
