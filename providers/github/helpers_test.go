package github_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden/providers"
	"github.com/hookwarden/hookwarden/providers/github"
	"github.com/hookwarden/hookwarden/providers/github/fake"
	"github.com/hookwarden/hookwarden/providers/github/internal/openapitest"
)

// token is a leak canary: no error, log or label may contain it.
const token = "ghp_hookwardenLeakCanary0123456789abcdef"

const (
	repo = "repos/octo-org/hello-world"
	org  = "orgs/octo-org"
)

type env struct {
	srv    *fake.Server
	v      *openapitest.Validator // nil without validation
	url    string
	client *github.Client
}

type envOption func(*envConfig)

type envConfig struct {
	fake     []fake.Option
	validate bool
	prefix   string
	timeout  time.Duration
	now      func() time.Time
}

func withFake(o ...fake.Option) envOption {
	return func(c *envConfig) { c.fake = append(c.fake, o...) }
}

// unvalidated serves the fake without the OpenAPI validator, for answers GitHub's description
// cannot describe (an HTML error page).
func unvalidated() envOption { return func(c *envConfig) { c.validate = false } }

func withPrefix(p string) envOption { return func(c *envConfig) { c.prefix = p } }

func withTimeout(d time.Duration) envOption { return func(c *envConfig) { c.timeout = d } }

// withNow gives the fake and the client one clock (delivered_at, the redelivery window).
func withNow(now func() time.Time) envOption {
	return func(c *envConfig) { c.now = now; c.fake = append(c.fake, fake.WithClock(now)) }
}

// newEnv serves a fake GitHub (through the OpenAPI validator unless unvalidated) where token
// administers target, and a client for target. Violations fail the test at its end.
func newEnv(t *testing.T, target string, opts ...envOption) *env {
	t.Helper()
	cfg := envConfig{validate: true, timeout: 10 * time.Second}
	for _, o := range opts {
		o(&cfg)
	}
	e := &env{srv: fake.New(cfg.fake...)}
	var h http.Handler = e.srv
	if cfg.validate {
		v, err := openapitest.New()
		if err != nil {
			t.Fatal(err)
		}
		e.v, h = v, v.Handler(e.srv)
		t.Cleanup(func() {
			for _, s := range v.Violations() {
				t.Errorf("OpenAPI: %s", s)
			}
		})
	}
	hs := httptest.NewServer(h)
	t.Cleanup(func() {
		hs.Close()
		e.srv.WaitDeliveries()
	})
	e.url = hs.URL
	e.srv.Grant(token, target)
	c, err := github.New(providers.Config{APIURL: hs.URL + cfg.prefix, Target: target, Credential: token, Timeout: cfg.timeout, Now: cfg.now})
	if err != nil {
		t.Fatal(err)
	}
	e.client = c
	return e
}

func newClient(t *testing.T, apiURL, target string, timeout time.Duration) *github.Client {
	t.Helper()
	c, err := github.New(providers.Config{APIURL: apiURL, Target: target, Credential: token, Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// kindOf asserts err is a *providers.Error that does not leak the token and returns it.
func asError(t *testing.T, err error) *providers.Error {
	t.Helper()
	if err == nil {
		t.Fatal("err = nil, want a *providers.Error")
	}
	pe, ok := err.(*providers.Error) //nolint:errorlint // the boundary returns a *providers.Error itself, not wrapped
	if !ok {
		t.Fatalf("err is %T (%v), want *providers.Error", err, err)
	}
	if strings.Contains(err.Error(), token) {
		t.Fatalf("error leaks the token: %v", err)
	}
	return pe
}

func desired(url string, events ...string) providers.Desired {
	return providers.Desired{URL: url, Events: events, Secret: "whsec-github-test-secret"}
}
