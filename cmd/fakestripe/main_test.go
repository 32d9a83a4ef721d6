package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
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

// TestRunEventsAndClock drives the event log from a shell's point of view: emit an event
// to a failing endpoint, move the clock, make the due retry, and see the event leave the API
// after 30 days.
func TestRunEventsAndClock(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	base, done := fakeapitest.Start(ctx, t, "fakestripe", run)
	var status atomic.Int64
	status.Store(http.StatusServiceUnavailable)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(int(status.Load())) }))
	defer hook.Close()

	post := func(path, body string, into any) int {
		t.Helper()
		resp, err := http.Post(base+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if into != nil && resp.StatusCode == http.StatusOK {
			if err := json.NewDecoder(resp.Body).Decode(into); err != nil {
				t.Fatal(err)
			}
		}
		return resp.StatusCode
	}
	if code := post("/_fake/endpoints?key=sk_test_ev", `{"url":"`+hook.URL+`","enabled_events":["invoice.paid"]}`, nil); code != 200 {
		t.Fatalf("seeding: %d", code)
	}
	var ev fake.Event
	if code := post("/_fake/events?key=sk_test_ev", `{"type":"invoice.paid","object":{"id":"in_1"}}`, &ev); code != 200 {
		t.Fatalf("emit: %d", code)
	}
	if len(ev.Deliveries) != 1 || ev.Deliveries[0].State != fake.DeliveryPending || ev.PendingWebhooks != 1 {
		t.Errorf("emitted event = %+v, want one pending delivery", ev)
	}
	for _, bad := range []string{`{"type":""}`, `{"kind":"invoice.paid"}`} {
		if code := post("/_fake/events?key=sk_test_ev", bad, nil); code != http.StatusBadRequest {
			t.Errorf("emit %s = %d, want 400", bad, code)
		}
	}

	var retried []fake.Attempt
	if post("/_fake/retry", "", &retried); len(retried) != 0 {
		t.Errorf("retry before the clock moved = %+v, want none", retried)
	}
	var before, after struct{ Now time.Time }
	fakeapitest.GetJSON(t, base+"/_fake/clock", &before)
	if code := post("/_fake/clock", `{"advance":"2m"}`, &after); code != 200 || after.Now.Sub(before.Now) < 2*time.Minute {
		t.Errorf("advance 2m: %d, clock %v -> %v", code, before.Now, after.Now)
	}
	if code := post("/_fake/clock", `{"advance":"-1h"}`, nil); code != http.StatusBadRequest {
		t.Errorf("advance -1h = %d, want 400", code)
	}
	status.Store(http.StatusOK)
	if post("/_fake/retry", "", &retried); len(retried) != 1 || !retried[0].OK || retried[0].N != 2 {
		t.Errorf("retry after 2m = %+v, want attempt 2, OK", retried)
	}
	var attempts []fake.Attempt
	fakeapitest.GetJSON(t, base+"/_fake/attempts", &attempts)
	if len(attempts) != 2 || attempts[0].Code != 503 || attempts[1].Code != 200 || attempts[0].Event != ev.ID {
		t.Errorf("/_fake/attempts = %+v", attempts)
	}
	var log []fake.Event
	fakeapitest.GetJSON(t, base+"/_fake/events?key=sk_test_ev", &log)
	if len(log) != 1 || log[0].PendingWebhooks != 0 || log[0].Deliveries[0].State != fake.DeliverySucceeded {
		t.Errorf("/_fake/events = %+v, want the event delivered", log)
	}

	listed := func() int {
		req, _ := http.NewRequest("GET", base+"/v1/events", nil)
		req.SetBasicAuth("sk_test_ev", "")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var l struct{ Data []json.RawMessage }
		_ = json.NewDecoder(resp.Body).Decode(&l)
		return len(l.Data)
	}
	if n := listed(); n != 1 {
		t.Errorf("GET /v1/events lists %d, want 1", n)
	}
	post("/_fake/clock", `{"advance":"721h"}`, nil)
	if n := listed(); n != 0 {
		t.Errorf("GET /v1/events 30 days later lists %d, want 0", n)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("run: %v", err)
	}
}
