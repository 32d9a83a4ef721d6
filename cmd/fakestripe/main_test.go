package main

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden/internal/fakeapi/fakeapitest"
	"github.com/hookwarden/hookwarden/providers/stripe/fake"
)

// TestRunServesAndShutsDown checks the binary's contract: it logs the address, serves the
// API and the /_fake endpoints, and returns nil once its context is cancelled.
func TestRunServesAndShutsDown(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	base, done := fakeapitest.Start(ctx, t, "fakestripe", run, "-page-size", "1")

	form := url.Values{"url": {"https://example.com/h"}, "enabled_events[0]": {"*"}}
	req, _ := http.NewRequest("POST", base+"/v1/webhook_endpoints", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth("sk_test_cmd", "") // curl -u sk_test_cmd:
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("create: %d", resp.StatusCode)
	}

	var eps []fake.Endpoint
	fakeapitest.GetJSON(t, base+"/_fake/endpoints?key=sk_test_cmd", &eps)
	if len(eps) != 1 || eps[0].Secret == "" {
		t.Errorf("/_fake/endpoints = %+v, want one endpoint with its secret", eps)
	}
	var reqs []fake.Request
	fakeapitest.GetJSON(t, base+"/_fake/requests", &reqs)
	if len(reqs) != 1 || reqs[0].Account != fake.AccountLabel("sk_test_cmd") || reqs[0].Status != 200 {
		t.Errorf("/_fake/requests = %+v", reqs)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("run returned %v after cancel, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("run did not return after cancel")
	}
}

// TestRunFaultRate: with --fault-rate 1 every API request fails with one of chaos's answers,
// while the /_fake endpoints (seeding included) are never failed and count what was injected.
func TestRunFaultRate(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	base, done := fakeapitest.Start(ctx, t, "fakestripe", run, "-fault-rate", "1", "-fault-seed", "3", "-fault-hold", "1ms")

	seed, _ := http.NewRequest("POST", base+"/_fake/endpoints?key=sk_test_f", strings.NewReader(`{"url":"https://example.com/seeded","enabled_events":["*"]}`))
	resp, err := http.DefaultClient.Do(seed)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("seeding: %d", resp.StatusCode)
	}

	allowed := map[int]bool{429: true, 500: true, 502: true, 503: true, 504: true}
	for i := range 20 {
		req, _ := http.NewRequest("GET", base+"/v1/webhook_endpoints", nil)
		req.SetBasicAuth("sk_test_f", "")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if !allowed[resp.StatusCode] {
			t.Errorf("request %d answered %d, want an injected failure", i, resp.StatusCode)
		}
	}
	var counts struct {
		Requests int            `json:"requests"`
		Injected map[string]int `json:"injected"`
	}
	fakeapitest.GetJSON(t, base+"/_fake/chaos", &counts)
	total := 0
	for _, n := range counts.Injected {
		total += n
	}
	if counts.Requests != 20 || total != 20 {
		t.Errorf("/_fake/chaos = %+v, want 20 requests, all failed", counts)
	}
	var eps []fake.Endpoint
	fakeapitest.GetJSON(t, base+"/_fake/endpoints?key=sk_test_f", &eps)
	if len(eps) != 1 || eps[0].URL != "https://example.com/seeded" || eps[0].ID == "" || eps[0].Secret == "" {
		t.Errorf("after seeding: %+v, want the seeded endpoint with an id and a secret", eps)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("run: %v", err)
	}
}
