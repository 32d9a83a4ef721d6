package github_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/hookwarden/hookwarden/internal/fakeapi"
	"github.com/hookwarden/hookwarden/providers"
	"github.com/hookwarden/hookwarden/providers/github/fake"
)

// One hook GitHub renders in a shape the client does not expect (a retired GitHub Service's
// hook has a config without url; a tool left events null) used to fail the page decode, and so
// every subscription on the repository. Now every other hook is listed intact and the odd one
// marked; shapes GitHub's description allows (insecure_ssl as a number, last_response null) are
// no problem at all. The quirks break GitHub's description on purpose: unvalidated.
func TestListKeepsEveryHookWhenOneDoesNotFit(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, repo, unvalidated())
	ours, err := e.client.Create(ctx, desired("https://hooks.example.com/ours", "push"), "")
	if err != nil {
		t.Fatal(err)
	}
	service := e.srv.Seed(repo, fake.LegacyServiceHook())
	numeric := e.srv.Seed(repo, fake.Hook{Active: true, Config: fake.Config{URL: "https://ci.example.com", ContentType: "json"}, Quirks: []fakeapi.Quirk{
		{Path: "config.insecure_ssl", Value: []byte("0")},
		{Path: "last_response", Value: []byte("null")},
		{Path: "active", Value: []byte("null")},
	}})
	noEvents := e.srv.Seed(repo, fake.Hook{Active: true, Config: fake.Config{URL: "https://tool.example.com", ContentType: "json"}, Quirks: []fakeapi.Quirk{
		{Path: "events", Value: []byte("null")},
	}})
	e.srv.Seed(repo, fake.Hook{Active: true, Config: fake.Config{URL: "https://noid.example.com", ContentType: "json"}, Quirks: []fakeapi.Quirk{
		{Path: "id", Value: []byte(`"h-1"`)},
	}})

	regs, err := e.client.List(ctx)
	if err != nil {
		t.Fatalf("List: %v; want every hook, the odd ones marked", err)
	}
	if len(regs) != 5 {
		t.Fatalf("List = %d hooks; want 5: %+v", len(regs), regs)
	}
	byID := map[string]providers.Registration{}
	for _, r := range regs {
		byID[r.ID] = r
	}
	id := func(h fake.Hook) string { return strconv.FormatInt(h.ID, 10) }
	if r := byID[ours.ID]; r.Unfit != "" || r.URL != "https://hooks.example.com/ours" || len(r.Misconfigured) != 0 {
		t.Errorf("our hook = %+v; want it intact", r)
	}
	if r := byID[id(service)]; r.Unfit != "config.url is missing" || r.URL != "" || r.LastDelivery != nil {
		t.Errorf("service hook = %+v; want config.url reported", r)
	}
	if r := byID[id(numeric)]; r.Unfit != "" || r.URL != "https://ci.example.com" || len(r.Misconfigured) != 0 || !r.Disabled || r.LastDelivery != nil {
		t.Errorf("hook with a numeric insecure_ssl, null last_response and null active = %+v; want it read (active null is off)", r)
	}
	if r := byID[id(noEvents)]; r.Unfit != "events is null" || r.URL != "https://tool.example.com" {
		t.Errorf("hook with null events = %+v; want events reported, the URL read", r)
	}
	if r := byID[""]; r.Unfit != "id is not a positive integer" || r.URL != "https://noid.example.com" {
		t.Errorf("hook with an unreadable id = %+v; want it listed without id", r)
	}
	for _, r := range regs {
		if strings.Contains(r.Unfit, "travis") || strings.Contains(r.Unfit, "h-1") {
			t.Errorf("Unfit shows a value: %q", r.Unfit)
		}
	}
	// A second List is served from the ETag cache: the same answer.
	again, err := e.client.List(ctx)
	if err != nil || len(again) != 5 || e.srv.Stats().NotModified == 0 {
		t.Errorf("second List = %d, %v (%d not modified)", len(again), err, e.srv.Stats().NotModified)
	}
}

// Every request carries Hookwarden's User-Agent with its version, not the HTTP library's.
func TestRequestsCarryHookwardensUserAgent(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, repo)
	reg, err := e.client.Create(ctx, desired("https://hooks.example.com/a", "push"), "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.List(ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.client.Delete(ctx, reg.ID); err != nil {
		t.Fatal(err)
	}
	reqs := e.srv.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests; want 3", len(reqs))
	}
	for _, r := range reqs {
		if !strings.HasPrefix(r.UserAgent, "hookwarden/") || !strings.HasSuffix(r.UserAgent, "(+https://github.com/hookwarden/hookwarden)") {
			t.Errorf("%s %s: User-Agent %q", r.Method, r.Path, r.UserAgent)
		}
		if r.UserAgent != providers.UserAgent() {
			t.Errorf("%s %s: User-Agent %q; want %q", r.Method, r.Path, r.UserAgent, providers.UserAgent())
		}
	}
}
