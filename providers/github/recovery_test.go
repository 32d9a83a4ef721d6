package github_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hookwarden/hookwarden/providers"
	"github.com/hookwarden/hookwarden/providers/github"
	"github.com/hookwarden/hookwarden/providers/github/fake"
)

// clock is the fake's and the client's settable clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// sink is a receiver that answers status and records the event id (X-GitHub-Delivery) of each
// delivery whose signature verifies.
type sink struct {
	*httptest.Server
	mu     sync.Mutex
	status int
	ids    []string
	bad    int
}

func sinkHandler(secret string, k *sink) http.Handler {
	v := github.NewVerifier()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		ver, err := v.Verify(providers.Delivery{Header: r.Header, Body: body}, [][]byte{[]byte(secret)})
		k.mu.Lock()
		defer k.mu.Unlock()
		if err != nil {
			k.bad++
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		k.ids = append(k.ids, ver.EventID)
		w.WriteHeader(k.status)
	})
}

func newSink(t *testing.T, secret string) *sink {
	k := &sink{status: http.StatusOK}
	k.Server = httptest.NewServer(sinkHandler(secret, k))
	t.Cleanup(k.Close)
	return k
}

// sinkAt serves a sink on addr, which was free: the receiver back where it was.
func sinkAt(t *testing.T, addr, secret string) *sink {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listening on %s again: %v", addr, err)
	}
	k := &sink{status: http.StatusOK}
	k.Server = httptest.NewUnstartedServer(sinkHandler(secret, k))
	k.Listener.Close()
	k.Listener = ln
	k.Start()
	t.Cleanup(k.Close)
	return k
}

func (k *sink) answer(status int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.status = status
}

func (k *sink) received() ([]string, int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.ids), k.bad
}

// freeAddr is a loopback address nobody listens on (yet).
func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func emit(t *testing.T, e *env, target, event string, payload string) fake.Delivery {
	t.Helper()
	ds, err := e.srv.Emit(target, event, []byte(payload))
	if err != nil || len(ds) != 1 {
		t.Fatalf("Emit %s = %+v, %v; want one delivery", event, ds, err)
	}
	return ds[0]
}

// TestReceiverDownForFourDays: 35 events over four fake days to a receiver that does not
// answer. Missed reports all 35, oldest first, those first delivered more than 3 days ago
// Expired; redelivering the others makes GitHub send each once more, under its guid, to the
// receiver back at its address; afterwards only the expired ones are still missed. Every
// exchange is checked against GitHub's description.
func TestReceiverDownForFourDays(t *testing.T) {
	for _, tc := range []struct{ target, prefix string }{{repo, "repos/"}, {org, "orgs/"}} {
		t.Run(tc.target, func(t *testing.T) {
			ctx := context.Background()
			clk := newClock()
			e := newEnv(t, tc.target, withNow(clk.Now))
			addr := freeAddr(t)
			d := desired("http://"+addr+"/github", "push", "issues")
			reg, err := e.client.Create(ctx, d, "")
			if err != nil {
				t.Fatal(err)
			}

			const n = 35
			step := 96 * time.Hour / n
			var sent []fake.Delivery
			for i := range n {
				ev := []string{"push", "issues"}[i%2]
				dl := emit(t, e, tc.target, ev, `{"n":`+strconv.Itoa(i)+`}`)
				if dl.Code != 0 {
					t.Fatalf("delivery %d answered %d, want no answer", i, dl.Code)
				}
				sent = append(sent, dl)
				clk.Add(step)
			}

			page, err := e.client.Missed(ctx, reg, []string{"push", "issues"}, clk.Now().Add(-5*24*time.Hour), 0)
			if err != nil {
				t.Fatal(err)
			}
			edge := clk.Now().Add(-72 * time.Hour)
			var want []providers.Missed
			expired := 0
			for _, dl := range sent {
				m := providers.Missed{ID: dl.GUID, At: dl.Time, Type: dl.Event, Handle: strconv.FormatInt(dl.ID, 10), Expired: dl.Time.Before(edge)}
				if m.Expired {
					expired++
				}
				want = append(want, m)
			}
			// The log reaches back four days, not the five asked for: it answers from its oldest.
			if d := cmp.Diff(providers.MissedPage{Missed: want, Covers: sent[0].Time}, page); d != "" {
				t.Fatalf("Missed (-want +got):\n%s", d)
			}
			if expired != 9 {
				t.Fatalf("%d of the 35 are older than 3 days, want 9 (the first day's)", expired)
			}

			rv := sinkAt(t, addr, d.Secret)
			var redelivered []string
			before := e.srv.Stats().Redeliveries
			for _, m := range page.Missed {
				err := e.client.Redeliver(ctx, reg, m)
				switch {
				case m.Expired && (err == nil || asError(t, err).Kind != providers.Permanent):
					t.Errorf("Redeliver of expired %s = %v, want Permanent", m.ID, err)
				case !m.Expired && err != nil:
					t.Errorf("Redeliver of %s = %v", m.ID, err)
				case !m.Expired:
					redelivered = append(redelivered, m.ID)
				}
			}
			e.srv.WaitDeliveries()
			if got := e.srv.Stats().Redeliveries - before; got != n-expired {
				t.Errorf("%d POST .../attempts, want %d: expired deliveries are never requested", got, n-expired)
			}
			got, bad := rv.received()
			slices.Sort(got) // GitHub redelivers in the background, in no promised order
			slices.Sort(redelivered)
			if d := cmp.Diff(redelivered, got); d != "" || bad != 0 {
				t.Errorf("the receiver verified (-want +got, each once):\n%s\n%d refused", d, bad)
			}

			// GitHub itself refuses one past its window, should a caller ask anyway.
			old := page.Missed[0]
			old.Expired = false
			if err := e.client.Redeliver(ctx, reg, old); asError(t, err).Kind != providers.Permanent {
				t.Errorf("Redeliver past the window, not marked Expired = %v, want Permanent (GitHub's 422)", err)
			}

			again, err := e.client.Missed(ctx, reg, []string{"*"}, clk.Now().Add(-5*24*time.Hour), 0)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(want[:expired], again.Missed); d != "" {
				t.Errorf("Missed after the redeliveries (-want +got): only the expired ones\n%s", d)
			}

			ops := e.v.Operations()
			for _, op := range []string{"list-webhook-deliveries", "redeliver-webhook-delivery"} {
				if ops[tc.prefix+op] == 0 {
					t.Errorf("no validated %s%s exchange (validated: %v)", tc.prefix, op, ops)
				}
			}
		})
	}
}

// TestMissedAcrossPages: 130 unanswered deliveries and a few answered ones take two pages of
// 100; an event answered 200, and one that failed and later succeeded on redelivery, are not
// missed; one answered 502 and those not answered at all are. limit cuts the oldest first and
// says More; since stops the paging.
func TestMissedAcrossPages(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	e := newEnv(t, repo, withNow(clk.Now))
	rv := newSink(t, "whsec-github-test-secret")
	reg, err := e.client.Create(ctx, desired(rv.URL+"/github", "*"), "")
	if err != nil {
		t.Fatal(err)
	}
	id, _ := strconv.ParseInt(reg.ID, 10, 64)
	tick := func() { clk.Add(time.Minute) }

	emit(t, e, repo, "push", `{}`) // answered 200
	tick()
	rv.answer(http.StatusBadGateway)
	flaky := emit(t, e, repo, "issues", `{"action":"opened"}`)
	tick()
	failed := emit(t, e, repo, "issues", `{"action":"closed"}`)
	tick()
	rv.answer(http.StatusOK)
	if err := e.client.Redeliver(ctx, reg, providers.Missed{ID: flaky.GUID, Handle: strconv.FormatInt(flaky.ID, 10)}); err != nil {
		t.Fatal(err)
	}
	e.srv.WaitDeliveries()
	down := "http://" + freeAddr(t) + "/down"
	e.srv.Edit(repo, id, func(h *fake.Hook) { h.Config.URL = down })
	want := []string{failed.GUID}
	var times []time.Time
	for i := range 130 {
		dl := emit(t, e, repo, "push", `{"n":`+strconv.Itoa(i)+`}`)
		want = append(want, dl.GUID)
		times = append(times, dl.Time)
		tick()
	}

	e.srv.ResetRequests()
	page, err := e.client.Missed(ctx, reg, []string{"*"}, time.Time{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range page.Missed {
		got = append(got, m.ID)
	}
	if d := cmp.Diff(want, got); d != "" || page.More || page.Malformed != 0 {
		t.Errorf("Missed (-want +got):\n%s\nMore %t, Malformed %d", d, page.More, page.Malformed)
	}
	reqs := e.srv.Requests()
	if len(reqs) != 2 || reqs[0].Query.Get("per_page") != "100" || reqs[1].Query.Get("cursor") == "" {
		t.Errorf("requests %+v, want two pages of 100, the second by cursor", reqs)
	}

	page, err = e.client.Missed(ctx, reg, []string{"*"}, time.Time{}, 50)
	if err != nil || len(page.Missed) != 50 || !page.More || page.Missed[0].ID != want[0] || page.Missed[49].ID != want[49] {
		t.Errorf("Missed with limit 50 = %d entries, More %t, %v; want the oldest 50 and More", len(page.Missed), page.More, err)
	}

	// Since the 81st newest delivery: the first page (100) reaches past it, so no second page.
	e.srv.ResetRequests()
	since := times[len(times)-81]
	page, err = e.client.Missed(ctx, reg, []string{"*"}, since, 0)
	if err != nil || len(page.Missed) != 81 || !page.Missed[0].At.Equal(since) {
		t.Errorf("Missed since %v = %d entries, %v; want 81 (since is inclusive)", since, len(page.Missed), err)
	}
	if n := e.srv.Stats().DeliveryLists; n != 1 {
		t.Errorf("%d pages read for a since within the first page, want 1", n)
	}
}

// TestMissedEvents: only the events asked for; "*" is every event but ping (a missed ping is no
// event to recover), which must be named.
func TestMissedEvents(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, repo)
	reg, err := e.client.Create(ctx, desired("http://"+freeAddr(t)+"/x", "*"), "")
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range []string{"push", "issues", github.PingEvent} {
		emit(t, e, repo, ev, `{}`)
	}
	for _, tc := range []struct {
		events []string
		want   []string
	}{
		{[]string{"push"}, []string{"push"}},
		{[]string{"*"}, []string{"issues", "push"}},
		{[]string{"ping"}, []string{"ping"}},
		{[]string{"pull_request"}, nil},
	} {
		page, err := e.client.Missed(ctx, reg, tc.events, time.Time{}, 0)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, m := range page.Missed {
			got = append(got, m.Type)
		}
		slices.Sort(got)
		if d := cmp.Diff(tc.want, got); d != "" {
			t.Errorf("Missed(%v) types (-want +got):\n%s", tc.events, d)
		}
	}
}

// TestMissedSkipsMalformed: entries without what GitHub's description promises are skipped and
// counted; the rest of the page still counts.
func TestMissedSkipsMalformed(t *testing.T) {
	body := `[
		{"id":7,"guid":"g-ok","delivered_at":"2026-05-01T10:00:00Z","status":"OK","status_code":200,"event":"push"},
		{"id":6,"guid":"g-missed","delivered_at":"2026-05-01T09:00:00Z","status":"Invalid HTTP Response: 503","status_code":503,"event":"push"},
		{"id":5,"delivered_at":"2026-05-01T08:00:00Z","status_code":502,"event":"push"},
		{"id":0,"guid":"g-no-id","delivered_at":"2026-05-01T08:00:00Z","status_code":502,"event":"push"},
		{"id":4,"guid":"g-bad-time","delivered_at":"yesterday","status_code":502,"event":"push"},
		{"id":3,"guid":"g-bad-code","delivered_at":"2026-05-01T08:00:00Z","status_code":"502","event":"push"},
		"not an object"
	]`
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/repos/octo-org/hello-world/hooks/12/deliveries" || r.URL.Query().Get("per_page") != "100" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, body)
	}))
	defer hs.Close()
	c := newClient(t, hs.URL, repo, time.Second)
	page, err := c.Missed(context.Background(), providers.Registration{ID: "12"}, []string{"*"}, time.Time{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := providers.MissedPage{Malformed: 5, Missed: []providers.Missed{
		{ID: "g-missed", At: time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC), Type: "push", Handle: "6", Expired: true},
	}, Covers: time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)} // the oldest delivery it could read
	if d := cmp.Diff(want, page); d != "" {
		t.Errorf("Missed (-want +got):\n%s", d)
	}
}

// TestRecoveryHonoursRateLimits: Missed, Redeliver and Health classify GitHub's rate-limit
// answers as every request does: the primary limit waits for x-ratelimit-reset, the secondary
// for retry-after, or states no wait (the reconciler's backoff from a minute).
func TestRecoveryHonoursRateLimits(t *testing.T) {
	calls := map[string]func(c *github.Client, reg providers.Registration) error{
		"Missed": func(c *github.Client, reg providers.Registration) error {
			_, err := c.Missed(context.Background(), reg, []string{"*"}, time.Time{}, 0)
			return err
		},
		"Redeliver": func(c *github.Client, reg providers.Registration) error {
			return c.Redeliver(context.Background(), reg, providers.Missed{ID: "g", Handle: "1"})
		},
		"Health": func(c *github.Client, reg providers.Registration) error {
			_, err := c.Health(context.Background(), reg)
			return err
		},
	}
	for _, tc := range []struct {
		name   string
		status int
		limit  func(e *env, clk *clock)
		wait   time.Duration
	}{
		{"429 secondary with retry-after", 429, func(e *env, _ *clock) {
			e.srv.Inject(fake.SecondaryLimit(http.StatusTooManyRequests, 30*time.Second))
		}, 30 * time.Second},
		{"403 secondary without retry-after", 403, func(e *env, _ *clock) {
			e.srv.Inject(fake.SecondaryLimit(http.StatusForbidden, 0))
		}, 0},
		{"primary exhausted", 403, func(e *env, _ *clock) { e.srv.SetRateLimitRemaining(token, 0) }, time.Hour},
	} {
		for name, call := range calls {
			t.Run(tc.name+"/"+name, func(t *testing.T) {
				clk := newClock()
				e := newEnv(t, repo, withNow(clk.Now))
				reg, err := e.client.Create(context.Background(), desired("https://example.com/h", "push"), "")
				if err != nil {
					t.Fatal(err)
				}
				tc.limit(e, clk)
				pe := asError(t, call(e.client, reg))
				if pe.Kind != providers.RateLimited || pe.RetryAfter != tc.wait || pe.StatusCode != tc.status {
					t.Errorf("err = %+v, want RateLimited %d after %v", pe, tc.status, tc.wait)
				}
			})
		}
	}
}

func TestRedeliverAnswers(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, org)
	reg, err := e.client.Create(ctx, desired("http://"+freeAddr(t)+"/x", "push"), "")
	if err != nil {
		t.Fatal(err)
	}
	dl := emit(t, e, org, "push", `{}`)
	handle := strconv.FormatInt(dl.ID, 10)
	cases := []struct {
		name, reason string
		reg          providers.Registration
		m            providers.Missed
		kind         providers.Kind
		requests     int
	}{
		{"unknown delivery", "GitHub answers 404 for a delivery it does not have", reg, providers.Missed{ID: "g", Handle: "999999"}, providers.NotFound, 1},
		{"unknown hook", "a hook deleted since", providers.Registration{ID: "42"}, providers.Missed{ID: dl.GUID, Handle: handle}, providers.NotFound, 1},
		{"bad handle", "refused before any request", reg, providers.Missed{ID: dl.GUID, Handle: "x1"}, providers.Permanent, 0},
		{"expired", "never requested", reg, providers.Missed{ID: dl.GUID, Handle: handle, Expired: true}, providers.Permanent, 0},
	}
	for _, k := range cases {
		t.Run(k.name, func(t *testing.T) {
			e.srv.ResetRequests()
			pe := asError(t, e.client.Redeliver(ctx, k.reg, k.m))
			if pe.Kind != k.kind || len(e.srv.Requests()) != k.requests {
				t.Errorf("%s: err %v after %d requests, want %v after %d", k.reason, pe, len(e.srv.Requests()), k.kind, k.requests)
			}
		})
	}
	if err := e.client.Redeliver(ctx, reg, providers.Missed{ID: dl.GUID, Handle: handle}); err != nil {
		t.Errorf("Redeliver = %v", err)
	}
}

// TestHealth: the failure ratio of the hook's recent deliveries, its state from the newest.
func TestHealth(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	e := newEnv(t, repo, withNow(clk.Now))
	rv := newSink(t, "whsec-github-test-secret")
	reg, err := e.client.Create(ctx, desired(rv.URL+"/github", "push"), "")
	if err != nil {
		t.Fatal(err)
	}
	id, _ := strconv.ParseInt(reg.ID, 10, 64)

	h, err := e.client.Health(ctx, reg)
	if err != nil || h.State != providers.HealthUnknown || h.Total != 0 {
		t.Errorf("Health without deliveries = %+v, %v; want unknown", h, err)
	}
	start := clk.Now()
	for i := range 20 {
		if i >= 17 {
			rv.answer(http.StatusBadGateway)
		}
		emit(t, e, repo, "push", `{}`)
		clk.Add(time.Minute)
	}
	check := func(want providers.DeliveryHealth) {
		t.Helper()
		got, err := e.client.Health(ctx, reg)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("Health (-want +got):\n%s", d)
		}
	}
	check(providers.DeliveryHealth{State: providers.HealthFailing, Failed: 3, Total: 20, Since: start, Message: "3 of 20 recent deliveries failed; last answered 502"})
	rv.answer(http.StatusOK)
	emit(t, e, repo, "push", `{}`)
	check(providers.DeliveryHealth{State: providers.HealthHealthy, Failed: 3, Total: 21, Since: start, Message: "3 of 21 recent deliveries failed; last answered 200"})
	e.srv.Edit(repo, id, func(h *fake.Hook) { h.Config.URL = "http://" + freeAddr(t) + "/down" })
	emit(t, e, repo, "push", `{}`)
	check(providers.DeliveryHealth{State: providers.HealthFailing, Failed: 4, Total: 22, Since: start, Message: "4 of 22 recent deliveries failed; last got no answer (failed to connect to host)"})
}

// TestListHealth: a repository hook's last_response becomes Registration.Health at no extra
// request.
func TestListHealth(t *testing.T) {
	for _, tc := range []struct {
		name string
		lr   fake.LastResponse
		want *providers.DeliveryHealth
	}{
		{"answered", fake.LastResponse{Code: 200, Status: "active", Message: "OK"}, &providers.DeliveryHealth{State: providers.HealthHealthy, Message: "last response 200"}},
		{"unused", fake.LastResponse{Status: "unused"}, &providers.DeliveryHealth{State: providers.HealthUnknown, Message: "nothing delivered yet"}},
		{"error", fake.LastResponse{Code: 503, Status: "failed", Message: "Invalid HTTP Response: 503"}, &providers.DeliveryHealth{State: providers.HealthFailing, Message: "last response 503: Invalid HTTP Response: 503"}},
		{"no answer", fake.LastResponse{Status: "failed", Message: "failed to connect to host"}, &providers.DeliveryHealth{State: providers.HealthFailing, Message: "last delivery got no answer: failed to connect to host"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, repo)
			e.srv.Seed(repo, fake.Hook{Active: true, Config: fake.Config{URL: "https://example.com/h", ContentType: "json"}, LastResponse: tc.lr})
			e.srv.ResetRequests()
			regs, err := e.client.List(context.Background())
			if err != nil || len(regs) != 1 {
				t.Fatalf("List = %v, %v", regs, err)
			}
			if d := cmp.Diff(tc.want, regs[0].Health); d != "" || len(e.srv.Requests()) != 1 {
				t.Errorf("Health (-want +got) after %d requests:\n%s", len(e.srv.Requests()), d)
			}
		})
	}
}
