package rest_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden/providers"
	"github.com/hookwarden/hookwarden/providers/rest"
	"github.com/hookwarden/hookwarden/providers/rest/fakes/gitlab"
)

var owner = providers.Owner{Cluster: "prod", Namespace: "shop", Name: "orders", UID: "0b7c-uid"}

func gitlabClient(t *testing.T, project string) (*gitlab.Server, *rest.Client) {
	t.Helper()
	srv := gitlab.New()
	srv.AddProject("42", "group/project")
	base, stop := srv.Start()
	t.Cleanup(stop)
	return srv, newClient(t, "gitlab-project-hooks", base+"/api/v4", map[string]string{"project": project}, "glpat-test-token")
}

func TestGitLabProfile(t *testing.T) {
	ctx := context.Background()
	srv, c := gitlabClient(t, "group/project")
	caps := c.Capabilities()
	if caps.Secret != providers.SecretClientChosen || !caps.UpdateNeedsSecret || !caps.Markers {
		t.Fatalf("capabilities = %+v; want a client-chosen secret sent on every update, and markers", caps)
	}

	d := providers.Desired{URL: "https://hooks.example.com/gl", Events: []string{"push", "merge_requests"}, Description: "orders", Owner: owner, Secret: "tok-1"}
	reg, err := c.Create(ctx, d, "k1")
	if err != nil {
		t.Fatal(err)
	}
	hooks := srv.Hooks("42")
	if len(hooks) != 1 {
		t.Fatalf("GitLab holds %d hooks; want 1 (the project path resolves to project 42)", len(hooks))
	}
	h := hooks[0]
	if h.Token != "tok-1" || !h.Flags["push_events"] || !h.Flags["merge_requests_events"] || h.Flags["tag_push_events"] || !strings.Contains(h.Name, "hookwarden:prod/shop/orders/0b7c-uid") || h.Description != "orders" {
		t.Errorf("stored hook = %+v; want the token, exactly the push and merge request flags, the marker in name", h)
	}
	if reg.Owner != owner || reg.Description != "orders" || len(reg.Events) != 2 || reg.Secret != "" {
		t.Errorf("created registration = %+v", reg)
	}

	// A URL change with the token resent keeps a token: GitLab resets it otherwise.
	d.URL = "https://hooks.example.com/gl2"
	d.Events = []string{"pipeline"}
	if _, err := c.Update(ctx, reg.ID, d); err != nil {
		t.Fatal(err)
	}
	h = srv.Hooks("42")[0]
	if h.URL != d.URL || h.Token != "tok-1" || h.Flags["push_events"] || !h.Flags["pipeline_events"] {
		t.Errorf("after update: %+v; want the new URL, the token kept, only pipeline", h)
	}

	// An event GitLab has no flag for is refused before anything is sent.
	before := len(srv.Requests())
	if _, err := c.Create(ctx, providers.Desired{URL: "https://x.example.com", Events: []string{"push_hook"}, Owner: owner, Secret: "s"}, "k"); providers.KindOf(err) != providers.Permanent || len(srv.Requests()) != before {
		t.Errorf("unknown event: %v, %d requests sent", err, len(srv.Requests())-before)
	}
	// "*" cannot be expressed with flags.
	if _, err := c.Create(ctx, providers.Desired{URL: "https://x.example.com", Events: []string{"*"}, Owner: owner, Secret: "s"}, "k"); providers.KindOf(err) != providers.Permanent {
		t.Errorf("events * on a flags API: %v; want Permanent", err)
	}

	// GitLab answers a bad URL with 422 {"error": ...}: shown to the user.
	_, err = c.Create(ctx, providers.Desired{URL: "ftp://nope", Events: []string{"push"}, Owner: owner, Secret: "s"}, "k")
	if providers.KindOf(err) != providers.Permanent || !strings.Contains(err.Error(), "Invalid url given") {
		t.Errorf("create with a bad URL = %v; want Permanent naming GitLab's message", err)
	}

	if err := c.Delete(ctx, reg.ID); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, reg.ID); err != nil {
		t.Errorf("second delete = %v; want nil (404 is gone)", err)
	}
}

func TestGitLabProfilePagesByLink(t *testing.T) {
	srv, c := gitlabClient(t, "42")
	for range 205 {
		srv.Seed("42", gitlab.Hook{URL: "https://seeded.example.com"})
	}
	regs, err := c.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(regs) != 205 {
		t.Errorf("listed %d hooks; want 205 over three pages", len(regs))
	}
	var pages int
	for _, r := range srv.Requests() {
		if r.Method == http.MethodGet {
			pages++
		}
	}
	if pages != 3 {
		t.Errorf("%d list requests; want 3 (per_page 100, then Link rel=next)", pages)
	}
}

func TestGitLabProfileVerifiesDeliveries(t *testing.T) {
	_, c := gitlabClient(t, "42")
	v, err := rest.NewVerifierFromSpec(c.VerifierSpec())
	if err != nil {
		t.Fatal(err)
	}
	// GitLab sends the token verbatim, and Idempotency-Key as the delivery's stable id.
	h := http.Header{}
	h.Set("X-Gitlab-Token", "tok-1")
	h.Set("Idempotency-Key", "6f1c-idem")
	h.Set("X-Gitlab-Event-UUID", "recycled")
	got, err := v.Verify(providers.Delivery{Header: h, Body: []byte(`{"object_kind":"push"}`), Now: time.Now()}, [][]byte{[]byte("old"), []byte("tok-1")})
	if err != nil || got.EventID != "6f1c-idem" {
		t.Errorf("Verify = %+v, %v; want id 6f1c-idem", got, err)
	}
	h.Set("X-Gitlab-Token", "tok-2")
	if _, err := v.Verify(providers.Delivery{Header: h, Body: []byte(`{}`)}, [][]byte{[]byte("tok-1")}); err == nil {
		t.Error("a wrong token verified")
	}
}

// TLS verification switched off by hand is drift the update repairs (the profile expects it
// on, and a partial update sends it again).
func TestGitLabProfileRepairsTLSVerification(t *testing.T) {
	ctx := context.Background()
	srv, c := gitlabClient(t, "42")
	d := providers.Desired{URL: "https://hooks.example.com/gl", Events: []string{"push"}, Owner: owner, Secret: "tok-1"}
	reg, err := c.Create(ctx, d, "k1")
	if err != nil {
		t.Fatal(err)
	}
	regs, err := c.List(ctx)
	if err != nil || len(regs) != 1 || len(regs[0].Misconfigured) != 0 {
		t.Fatalf("List = %+v, %v; want one hook, nothing misconfigured", regs, err)
	}
	srv.Edit("42", srv.Hooks("42")[0].ID, func(h *gitlab.Hook) { h.SSL = false })
	regs, err = c.List(ctx)
	if err != nil || len(regs) != 1 || len(regs[0].Misconfigured) != 1 || regs[0].Misconfigured[0] != "enable_ssl_verification" {
		t.Fatalf("List = %+v, %v; want enable_ssl_verification misconfigured", regs, err)
	}
	if _, err := c.Update(ctx, reg.ID, d); err != nil {
		t.Fatal(err)
	}
	if h := srv.Hooks("42")[0]; !h.SSL || h.Token != "tok-1" {
		t.Errorf("after update: %+v; want TLS verification on and the token kept", h)
	}
}
