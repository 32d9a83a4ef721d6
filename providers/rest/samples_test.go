package rest_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

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

func newClient(t testing.TB, profile, apiURL string, params map[string]string, credential string) *rest.Client {
	t.Helper()
	c, err := rest.New(providers.Config{APIURL: apiURL, Target: rest.Target(params), Settings: sampleProfile(t, profile), Credential: credential, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("rest.New(%s): %v", profile, err)
	}
	return c
}
