package receiver_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookwarden/hookwarden/providers"
	"github.com/hookwarden/hookwarden/providers/stripe"
	"github.com/hookwarden/hookwarden/receiver"
	"github.com/hookwarden/hookwarden/receiver/store"
	"github.com/hookwarden/hookwarden/receiver/store/storetest"
)

const (
	oldSecret = "whsec_old_0123456789abcdef"
	newSecret = "whsec_new_fedcba9876543210"
)

// harness is a receiver handler on real HTTP with a real SQLite store.
type harness struct {
	srv    *httptest.Server
	st     *store.SQL
	routes *receiver.Routes
	now    time.Time
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	st, err := store.OpenSQLite(storetest.SQLitePath(t))
	if err != nil {
		t.Fatal(err)
	}
	batcher := store.NewBatcher(st, store.BatcherOptions{})
	h := &harness{st: st, routes: receiver.NewRoutes(), now: time.Unix(1_800_000_000, 0)}
	h.routes.Set(receiver.Route{Namespace: "shop", Name: "orders", UID: "uid-1", Provider: "stripe",
		Secrets: [][]byte{[]byte(oldSecret)}, Sinks: receiver.OneHTTPSink("http://sink.invalid/"), MaxAttempts: 3, DedupeWindow: time.Hour})
	handler := &receiver.Handler{
		Routes: h.routes, Verifiers: map[string]providers.Verifier{"stripe": stripe.NewVerifier()}, Claims: batcher,
		MaxBody: 1 << 10, ClaimTimeout: 5 * time.Second, Metrics: receiver.NewMetrics(prometheus.NewRegistry()),
		Log: logr.Discard(), Now: func() time.Time { return h.now },
	}
	h.srv = httptest.NewServer(handler.Mux())
	t.Cleanup(func() { h.srv.Close(); batcher.Close(); st.Close() })
	return h
}

func event(id string) []byte {
	return []byte(fmt.Sprintf(`{"id":%q,"object":"event","type":"invoice.paid","data":{"object":{}}}`, id))
}

// post sends body to path with a Stripe-Signature made with secret at time ts.
func (h *harness) post(t *testing.T, path string, body []byte, secret string, ts time.Time) int {
	t.Helper()
	return h.send(t, path, body, stripe.SignHeader(secret, ts, body)).StatusCode
}

// send posts body to path with the given Stripe-Signature header.
func (h *harness) send(t *testing.T, path string, body []byte, signature string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, h.srv.URL+path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Stripe-Signature", signature)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

func (h *harness) depth(t *testing.T) int {
	t.Helper()
	n, err := h.st.Depth(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestAcceptThenDuplicate(t *testing.T) {
	h := newHarness(t)
	if got := h.post(t, "/hooks/shop/orders", event("evt_1"), oldSecret, h.now); got != http.StatusAccepted {
		t.Fatalf("first delivery: status %d, want 202", got)
	}
	if got := h.post(t, "/hooks/shop/orders", event("evt_1"), oldSecret, h.now.Add(time.Minute)); got != http.StatusOK {
		t.Fatalf("redelivery (new t, same event id): status %d, want 200", got)
	}
	if got := h.depth(t); got != 1 {
		t.Fatalf("queue depth %d, want 1: a duplicate must not enqueue a second delivery", got)
	}
}

func TestRefusedDeliveriesStoreNothing(t *testing.T) {
	h := newHarness(t)
	body := event("evt_refused")
	tampered := bytes.Replace(body, []byte("invoice.paid"), []byte("invoice.void"), 1)
	cases := []struct {
		reason string
		send   func() int
		want   int
	}{
		{"bad signature", func() int {
			return h.send(t, "/hooks/shop/orders", body, fmt.Sprintf("t=%d,v1=%s", h.now.Unix(), strings.Repeat("ab", 32))).StatusCode
		}, 401},
		{"expired timestamp (301 s old)", func() int { return h.post(t, "/hooks/shop/orders", body, oldSecret, h.now.Add(-301*time.Second)) }, 401},
		{"future timestamp (10 min ahead)", func() int { return h.post(t, "/hooks/shop/orders", body, oldSecret, h.now.Add(10*time.Minute)) }, 401},
		{"tampered body", func() int {
			return h.send(t, "/hooks/shop/orders", tampered, stripe.SignHeader(oldSecret, h.now, body)).StatusCode
		}, 401},
		{"wrong secret", func() int { return h.post(t, "/hooks/shop/orders", body, "whsec_someone_else", h.now) }, 401},
		{"unknown route", func() int { return h.post(t, "/hooks/shop/nope", body, oldSecret, h.now) }, 404},
		{"oversized body", func() int {
			big := event("evt_big" + strings.Repeat("x", 2<<10))
			return h.post(t, "/hooks/shop/orders", big, oldSecret, h.now)
		}, 413},
	}
	for _, c := range cases {
		if got := c.send(); got != c.want {
			t.Errorf("%s: status %d, want %d", c.reason, got, c.want)
		}
	}
	if got := h.depth(t); got != 0 {
		t.Fatalf("queue depth %d after refused deliveries, want 0", got)
	}
	// The refused event id is still unknown: a correct delivery of it is accepted, not a duplicate.
	if got := h.post(t, "/hooks/shop/orders", body, oldSecret, h.now); got != http.StatusAccepted {
		t.Fatalf("valid delivery after refusals: status %d, want 202", got)
	}
}

func TestSecretRotationOverlap(t *testing.T) {
	h := newHarness(t)
	route, _ := h.routes.Lookup("shop", "orders")
	route.Secrets = [][]byte{[]byte(oldSecret), []byte(newSecret)}
	h.routes.Set(route)
	if got := h.post(t, "/hooks/shop/orders", event("evt_old"), oldSecret, h.now); got != http.StatusAccepted {
		t.Errorf("old secret during the overlap: %d, want 202", got)
	}
	if got := h.post(t, "/hooks/shop/orders", event("evt_new"), newSecret, h.now); got != http.StatusAccepted {
		t.Errorf("new secret during the overlap: %d, want 202", got)
	}
	route.Secrets = [][]byte{[]byte(newSecret)}
	h.routes.Set(route)
	if got := h.post(t, "/hooks/shop/orders", event("evt_old2"), oldSecret, h.now); got != http.StatusUnauthorized {
		t.Errorf("old secret after removal: %d, want 401", got)
	}
	if got := h.post(t, "/hooks/shop/orders", event("evt_new2"), newSecret, h.now); got != http.StatusAccepted {
		t.Errorf("new secret after removal: %d, want 202", got)
	}
}

func TestStoreFailureIsNotAcknowledged(t *testing.T) {
	h := newHarness(t)
	if err := h.st.Close(); err != nil {
		t.Fatal(err)
	}
	body := event("evt_down")
	resp := h.send(t, "/hooks/shop/orders", body, stripe.SignHeader(oldSecret, h.now, body))
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("status %d with the store down, want 503", resp.StatusCode)
	}
	if resp.Header.Get("Retry-After") == "" {
		t.Error("a 503 should tell the provider when to retry")
	}
}

// failingClaimer fails every claim, as a store outage does.
type failingClaimer struct{}

func (failingClaimer) Claim(context.Context, store.Event) (bool, error) {
	return false, errors.New("store: claim: connection refused")
}

// countingSink counts error log entries.
type countingSink struct{ errors atomic.Int64 }

func (s *countingSink) Init(logr.RuntimeInfo)          {}
func (s *countingSink) Enabled(int) bool               { return true }
func (s *countingSink) Info(int, string, ...any)       {}
func (s *countingSink) Error(error, string, ...any)    { s.errors.Add(1) }
func (s *countingSink) WithValues(...any) logr.LogSink { return s }
func (s *countingSink) WithName(string) logr.LogSink   { return s }

// Under a burst of store failures the handler logs every one and counts every one: the
// production logger in cmd/receiver samples repeated messages, the counter does not.
func TestStoreErrorsAreCountedUnderABurst(t *testing.T) {
	const burst = 1000
	reg := prometheus.NewRegistry()
	logs := &countingSink{}
	now := time.Unix(1_800_000_000, 0)
	routes := receiver.NewRoutes()
	routes.Set(receiver.Route{Namespace: "shop", Name: "orders", UID: "uid-1", Provider: "stripe", Secrets: [][]byte{[]byte(oldSecret)}})
	h := &receiver.Handler{
		Routes: routes, Verifiers: map[string]providers.Verifier{"stripe": stripe.NewVerifier()}, Claims: failingClaimer{},
		MaxBody: 1 << 10, ClaimTimeout: time.Second, Metrics: receiver.NewMetrics(reg), Log: logr.New(logs),
		Now: func() time.Time { return now },
	}
	var wg sync.WaitGroup
	for i := range burst {
		wg.Go(func() {
			body := event(fmt.Sprintf("evt_%d", i))
			req := httptest.NewRequest(http.MethodPost, "/hooks/shop/orders", bytes.NewReader(body))
			req.Header.Set("Stripe-Signature", stripe.SignHeader(oldSecret, now, body))
			rec := httptest.NewRecorder()
			h.Mux().ServeHTTP(rec, req)
			if rec.Code != http.StatusServiceUnavailable {
				t.Errorf("status %d, want 503", rec.Code)
			}
		})
	}
	wg.Wait()
	if got := requestsByResult(t, reg)["store_error"]; got != burst {
		t.Errorf("requests_total{result=store_error} = %v, want %d", got, burst)
	}
	if got := logs.errors.Load(); got != burst {
		t.Errorf("%d error log entries, want %d", got, burst)
	}
}

func TestInvalidEventHasItsOwnResult(t *testing.T) {
	reg := prometheus.NewRegistry()
	st, err := store.OpenSQLite(storetest.SQLitePath(t))
	if err != nil {
		t.Fatal(err)
	}
	batcher := store.NewBatcher(st, store.BatcherOptions{})
	t.Cleanup(func() { batcher.Close(); st.Close() })
	now := time.Unix(1_800_000_000, 0)
	routes := receiver.NewRoutes()
	routes.Set(receiver.Route{Namespace: "shop", Name: "orders", UID: "uid-1", Provider: "stripe", Secrets: [][]byte{[]byte(oldSecret)}})
	h := &receiver.Handler{
		Routes: routes, Verifiers: map[string]providers.Verifier{"stripe": stripe.NewVerifier()}, Claims: batcher,
		MaxBody: 4 << 10, ClaimTimeout: time.Second, Metrics: receiver.NewMetrics(reg), Log: logr.Discard(),
		Now: func() time.Time { return now },
	}
	for _, id := range []string{`evt_\u0000`, "evt_" + strings.Repeat("x", store.MaxEventIDBytes)} {
		body := []byte(`{"id":"` + id + `","type":"invoice.paid"}`)
		req := httptest.NewRequest(http.MethodPost, "/hooks/shop/orders", bytes.NewReader(body))
		req.Header.Set("Stripe-Signature", stripe.SignHeader(oldSecret, now, body))
		rec := httptest.NewRecorder()
		h.Mux().ServeHTTP(rec, req)
		if rec.Code != http.StatusUnprocessableEntity || !strings.Contains(rec.Body.String(), `"invalid_event"`) {
			t.Errorf("id %.20q: %d %s, want 422 invalid_event", id, rec.Code, rec.Body)
		}
	}
	if got := requestsByResult(t, reg); got["invalid_event"] != 2 || len(got) != 1 {
		t.Errorf("requests by result = %v, want invalid_event 2 and nothing else", got)
	}
	if n, err := st.Depth(context.Background()); err != nil || n != 0 {
		t.Errorf("Depth = %d, %v; want 0: nothing stored", n, err)
	}
}

func requestsByResult(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "hookwarden_receiver_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if v := m.GetCounter().GetValue(); v != 0 { // every result's series exists from the start
				for _, l := range m.GetLabel() {
					if l.GetName() == "result" {
						got[l.GetValue()] += v
					}
				}
			}
		}
	}
	return got
}

// rawPost writes one POST with exactly target as its request target to the server at addr, so
// no client cleans or re-encodes the path, and returns the status and body of the answer.
func rawPost(t *testing.T, addr, target string, header http.Header, body []byte) (int, string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var req bytes.Buffer
	fmt.Fprintf(&req, "POST %s HTTP/1.1\r\nHost: receiver.test\r\nContent-Length: %d\r\nConnection: close\r\n", target, len(body))
	if err := header.Write(&req); err != nil {
		t.Fatal(err)
	}
	req.WriteString("\r\n")
	req.Write(body)
	if _, err := c.Write(req.Bytes()); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("%s: %v", target, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}

// Issue 5: a path with dot segments reached the route (ServeMux redirected it with a 307,
// which keeps the method and body), and a percent-encoded spelling of the route's path reached
// it directly. Every spelling but the canonical one is now 404 unknown_route, nothing stored.
func TestNonCanonicalPathsAreUnknownRoutes(t *testing.T) {
	h := newHarness(t)
	addr := h.srv.Listener.Addr().String()
	body := event("evt_path")
	header := http.Header{"Content-Type": {"application/json"}, "Stripe-Signature": {stripe.SignHeader(oldSecret, h.now, body)}}
	for _, target := range []string{
		"/hooks/shop/../shop/orders",
		"/hooks/shop/./orders",
		"/hooks/shop/x/../orders",
		"/hooks//shop/orders",
		"//hooks/shop/orders",
		"/hooks/shop/orders/",
		"/hooks/shop/orders/.",
		"/hooks/shop/%2e%2e/shop/orders",
		"/hooks/shop/%2E/orders",
		"/hooks/sh%6Fp/orders",
		"/hooks/shop/orders%2F",
		"/hooks/shop%2Forders",
		"http://receiver.test/hooks/shop/../shop/orders",
	} {
		status, answer := rawPost(t, addr, target, header, body)
		if status != http.StatusNotFound || answer != `{"result":"unknown_route"}` {
			t.Errorf("POST %s: %d %s, want 404 {\"result\":\"unknown_route\"}", target, status, answer)
		}
	}
	if got := h.depth(t); got != 0 {
		t.Fatalf("queue depth %d after non-canonical paths, want 0: none reached the route", got)
	}
	if status, answer := rawPost(t, addr, "/hooks/shop/orders", header, body); status != http.StatusAccepted {
		t.Fatalf("the canonical path: %d %s, want 202", status, answer)
	}
}

// Issue 30: an accepted delivery enqueues one job per sink of its route; its duplicate none.
func TestAcceptedDeliveryHasAJobPerSink(t *testing.T) {
	h := newHarness(t)
	sinks := append(receiver.OneHTTPSink("http://worker.invalid/"), receiver.OneHTTPSink("http://audit.invalid/")...)
	sinks[0].Name, sinks[1].Name = "worker", "audit"
	h.routes.Set(receiver.Route{Namespace: "shop", Name: "orders", UID: "uid-1", Provider: "stripe",
		Secrets: [][]byte{[]byte(oldSecret)}, Sinks: sinks, MaxAttempts: 3, DedupeWindow: time.Hour})
	for i, want := range []int{http.StatusAccepted, http.StatusOK} {
		if status := h.post(t, "/hooks/shop/orders", event("evt_fan"), oldSecret, h.now); status != want {
			t.Fatalf("delivery %d answered %d, want %d", i, status, want)
		}
		if got := h.depth(t); got != 2 {
			t.Errorf("after delivery %d: Depth = %d, want 2 (worker, audit)", i, got)
		}
	}
	jobs, err := h.st.Lease(context.Background(), 10, h.now.Add(time.Minute), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, j := range jobs {
		got = append(got, j.Sink)
	}
	slices.Sort(got)
	if diff := cmp.Diff([]string{"audit", "worker"}, got); diff != "" {
		t.Errorf("jobs' sinks (-want +got):\n%s", diff)
	}
}

// Issue 30: a sink with ordering PerKey gets each event's key recorded with its job: the
// second event of a key is not due before the first is done.
func TestOrderedSinkRecordsTheKey(t *testing.T) {
	h := newHarness(t)
	sinks := receiver.OneHTTPSink("http://worker.invalid/")
	sinks[0].Name, sinks[0].OrderBy = "worker", "data.object.customer"
	h.routes.Set(receiver.Route{Namespace: "shop", Name: "orders", UID: "uid-1", Provider: "stripe",
		Secrets: [][]byte{[]byte(oldSecret)}, Sinks: sinks, MaxAttempts: 3, DedupeWindow: time.Hour})
	for _, id := range []string{"evt_first", "evt_second"} {
		if status := h.post(t, "/hooks/shop/orders", event(id), oldSecret, h.now); status != http.StatusAccepted {
			t.Fatalf("%s answered %d", id, status)
		}
	}
	jobs, err := h.st.Lease(context.Background(), 10, h.now.Add(time.Minute), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 1 || jobs[0].Event.EventID != "evt_first" || h.depth(t) != 2 {
		t.Errorf("leased %d jobs (first %v), depth %d; want only evt_first's, evt_second's waiting behind it", len(jobs), jobs, h.depth(t))
	}
}
