package rest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/hookwarden/hookwarden/internal/fakeapi"
	"github.com/hookwarden/hookwarden/providers"
	"github.com/hookwarden/hookwarden/providers/rest"
	"github.com/hookwarden/hookwarden/providers/rest/fakes/gitlab"
	"github.com/hookwarden/hookwarden/providers/rest/fakes/pagerduty"
	"github.com/hookwarden/hookwarden/providers/rest/fakes/svix"
)

// at sets a fake's clock to t (a fixed time: moving it is another call).
func at(c *fakeapi.Clock, t time.Time) { c.Set(func() time.Time { return t }) }

// factoryClient builds a client as the manager does (Factory), with the fake's clock.
func factoryClient(t *testing.T, profile, apiURL string, params map[string]string, credential string, clock *fakeapi.Clock) providers.Client {
	t.Helper()
	c, err := rest.Factory().New(providers.Config{APIURL: apiURL, Target: rest.Target(params), Settings: sampleProfile(t, profile), Credential: credential, Timeout: 5 * time.Second, Now: clock.Now})
	if err != nil {
		t.Fatalf("rest.Factory().New(%s): %v", profile, err)
	}
	return c
}

// receiver is the endpoint deliveries go to: down (503) until up, recording what it accepts.
type receiver struct {
	*httptest.Server
	up   atomic.Bool
	mu   sync.Mutex
	got  []http.Header
	hits atomic.Int32
}

func newReceiver(t *testing.T) *receiver {
	rc := &receiver{}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc.hits.Add(1)
		if !rc.up.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		rc.mu.Lock()
		rc.got = append(rc.got, r.Header.Clone())
		rc.mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(rc.Close)
	return rc
}

func (rc *receiver) received(header string) []string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var out []string
	for _, h := range rc.got {
		out = append(out, h.Get(header))
	}
	return out
}

func TestRecoveryCapabilitiesFollowTheProfile(t *testing.T) {
	var clock fakeapi.Clock
	for _, tc := range []struct {
		profile            string
		mode               providers.RecoveryMode
		window             time.Duration
		recoverer, ranger  bool
		reenabler          bool
		redeliverPerMinute float64
	}{
		{"gitlab-project-hooks", providers.RecoveryRedeliver, 7 * 24 * time.Hour, true, false, false, 5},
		{"gitlab-group-hooks", providers.RecoveryRedeliver, 7 * 24 * time.Hour, true, false, false, 5},
		// Before 17.3 GitLab has no events API: the profile has no recover section.
		{"gitlab-project-hooks-pre-17.1", providers.RecoveryNone, 0, false, false, false, 0},
		{"svix-endpoints", providers.RecoveryRange, 90 * 24 * time.Hour, false, true, false, 0},
		{"pagerduty-webhook-subscriptions", providers.RecoveryNone, 0, false, false, true, 0},
		{"zendesk-webhooks", providers.RecoveryNone, 0, false, false, false, 0},
	} {
		t.Run(tc.profile, func(t *testing.T) {
			params := map[string]string{"project": "1", "group": "1", "app": "a", "subdomain": "x", "email": "ops@example.com"}
			p, err := rest.Parse(sampleProfile(t, tc.profile))
			if err != nil {
				t.Fatal(err)
			}
			declared := map[string]string{}
			for _, prm := range p.Parameters {
				if v, ok := params[prm.Name]; ok {
					declared[prm.Name] = v
				}
			}
			c := factoryClient(t, tc.profile, "https://api.example.com", declared, "k", &clock)
			rc := c.Capabilities().Recovery
			_, isRecoverer := c.(providers.Recoverer)
			_, isRanger := c.(providers.RangeRecoverer)
			_, isReenabler := c.(providers.Reenabler)
			if rc.Mode != tc.mode || rc.Window != tc.window || isRecoverer != tc.recoverer || isRanger != tc.ranger || isReenabler != tc.reenabler {
				t.Errorf("recovery %+v, Recoverer %v, RangeRecoverer %v, Reenabler %v; want mode %s window %s, %v, %v, %v",
					rc, isRecoverer, isRanger, isReenabler, tc.mode, tc.window, tc.recoverer, tc.ranger, tc.reenabler)
			}
			if got := rc.RedeliverRate.PerSecond * 60; (got-tc.redeliverPerMinute) > 1e-9 || (tc.redeliverPerMinute-got) > 1e-9 || (tc.redeliverPerMinute > 0 && rc.RedeliverRate.Burst != 1) {
				t.Errorf("RedeliverRate = %+v; want %g a minute, one at a time", rc.RedeliverRate, tc.redeliverPerMinute)
			}
			if _, ok := c.(providers.Pinger); ok != (p.Ping != nil) {
				t.Errorf("Pinger = %v; want it exactly when the profile has ping", ok)
			}
		})
	}
}

// mutate applies edit to the shipped profile as a generic document and parses the result.
func mutate(t *testing.T, profile string, edit func(doc map[string]any)) error {
	t.Helper()
	var doc map[string]any
	if err := yaml.Unmarshal(sampleProfile(t, profile), &doc); err != nil {
		t.Fatal(err)
	}
	edit(doc)
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	_, err = rest.Parse(b)
	return err
}

func obj(doc map[string]any, path ...string) map[string]any {
	for _, p := range path {
		doc = doc[p].(map[string]any)
	}
	return doc
}

func TestRecoverAndHealthSectionsAreValidated(t *testing.T) {
	for _, tc := range []struct {
		name, profile string
		edit          func(doc map[string]any)
		want          string
	}{
		{"unknown style", "gitlab-project-hooks", func(d map[string]any) { obj(d, "recover")["style"] = "resend" }, `recover.style: want redeliver or range, got "resend"`},
		{"no window", "gitlab-project-hooks", func(d map[string]any) { delete(obj(d, "recover"), "window") }, "recover.window: 0s is not between 0"},
		{"window too long", "svix-endpoints", func(d map[string]any) { obj(d, "recover")["window"] = "9000h" }, "recover.window: 9000h0m0s is not between"},
		{"redeliver missing", "gitlab-project-hooks", func(d map[string]any) { delete(obj(d, "recover"), "redeliver") }, "recover.redeliver: required for style redeliver"},
		{"range block on redeliver", "gitlab-project-hooks", func(d map[string]any) {
			obj(d, "recover")["range"] = map[string]any{"path": "/x/{{.ID}}", "since": "since"}
		}, "recover.range: only for style range"},
		{"resend without handle", "gitlab-project-hooks", func(d map[string]any) {
			obj(d, "recover", "redeliver", "resend")["path"] = "/projects/{{.ID}}/resend"
		}, "recover.redeliver.resend.path: \"/projects/{{.ID}}/resend\" does not name the log entry ({{.Handle}})"},
		{"resend template", "gitlab-project-hooks", func(d map[string]any) {
			obj(d, "recover", "redeliver", "resend")["path"] = "/p/{{.ID}}/{{.Handle}}/{{.Params.nope}}"
		}, "recover.redeliver.resend.path: template fails"},
		{"log not per registration", "gitlab-project-hooks", func(d map[string]any) { obj(d, "recover", "redeliver", "log")["path"] = "/events" }, `recover.redeliver.log.path: "/events" does not name the registration`},
		{"log paging", "gitlab-project-hooks", func(d map[string]any) {
			obj(d, "recover", "redeliver", "log")["pagination"] = map[string]any{"style": "page", "sizeParam": "per_page", "size": 20}
		}, "recover.redeliver.log.pagination.pageParam: required for style page"},
		{"no dedupe id", "gitlab-project-hooks", func(d map[string]any) { delete(obj(d, "recover", "redeliver", "entry"), "id") }, "recover.redeliver.entry.id: required"},
		{"bad status path", "gitlab-project-hooks", func(d map[string]any) { obj(d, "recover", "redeliver", "entry")["status"] = "response_status|@this" }, "recover.redeliver.entry.status: \"response_status|@this\": only plain dot paths"},
		{"types without type", "gitlab-project-hooks", func(d map[string]any) { delete(obj(d, "recover", "redeliver", "entry"), "type") }, "recover.redeliver.entry.types: needs entry.type"},
		{"rate", "gitlab-project-hooks", func(d map[string]any) {
			obj(d, "recover", "redeliver")["rate"] = map[string]any{"requests": 0, "period": "2h"}
		}, "recover.redeliver.rate.period: 2h0m0s is not between"},
		{"retryLater status", "gitlab-project-hooks", func(d map[string]any) {
			obj(d, "recover", "redeliver", "resend")["retryLater"] = []any{map[string]any{"status": 201}}
		}, "recover.redeliver.resend.retryLater[0].status: 201 is not an error status"},
		{"range without since", "svix-endpoints", func(d map[string]any) { delete(obj(d, "recover", "range"), "since") }, "recover.range.since: required"},
		{"range as GET", "svix-endpoints", func(d map[string]any) { obj(d, "recover", "range")["method"] = "GET" }, "recover.range.method: the range request is a POST"},
		{"empty health", "pagerduty-webhook-subscriptions", func(d map[string]any) { d["health"] = map[string]any{} }, "health: names no field"},
		{"condition without values", "pagerduty-webhook-subscriptions", func(d map[string]any) {
			obj(d, "health")["disabled"] = []any{map[string]any{"path": "delivery_method.temporarily_disabled"}}
		}, "health.disabled[0].values: required"},
		{"condition path", "gitlab-project-hooks", func(d map[string]any) {
			obj(d, "health")["healthy"] = []any{map[string]any{"path": "", "values": []any{"x"}}}
		}, "health.healthy[0].path: required"},
		{"reenable path", "pagerduty-webhook-subscriptions", func(d map[string]any) { obj(d, "health", "reenable")["path"] = "enable" }, `health.reenable.path: "enable" must start with /`},
		{"unknown field", "gitlab-project-hooks", func(d map[string]any) { obj(d, "recover")["windows"] = "1h" }, `unknown field "recover.windows"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := mutate(t, tc.profile, tc.edit)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Parse = %v; want a problem containing %q", err, tc.want)
			}
		})
	}
}

// TestGitLabRecoversFourDaysDown: the receiver is down for four days of fake time while 35
// push events happen. GitLab sends each once, disables the hook after its 4th failure in a row
// and sends nothing while it is disabled (those events are lost); once the receiver is back,
// Missed lists every failed delivery, oldest first, Redeliver paced by RedeliverRate brings
// each back once with its original Idempotency-Key and GitLab never answers 429.
func TestGitLabRecoversFourDaysDown(t *testing.T) {
	ctx := context.Background()
	srv := gitlab.New()
	srv.AddProject("42", "group/project")
	base, stop := srv.Start()
	t.Cleanup(stop)
	t0 := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	at(&srv.Clock, t0)
	c := factoryClient(t, "gitlab-project-hooks", base+"/api/v4", map[string]string{"project": "42"}, "glpat-test", &srv.Clock)
	rec := newReceiver(t)
	reg, err := c.Create(ctx, providers.Desired{URL: rec.URL + "/hooks/shop/orders", Events: []string{"push"}, Owner: owner, Secret: "tok"}, "k")
	if err != nil {
		t.Fatal(err)
	}

	const events = 35
	step := 96 * time.Hour / events
	var sent, skipped int
	for i := range events {
		at(&srv.Clock, t0.Add(time.Duration(i)*step))
		s, k := srv.Emit("42", "push_events", []byte(fmt.Sprintf(`{"object_kind":"push","n":%d}`, i)))
		sent, skipped = sent+s, skipped+k
	}
	if sent+skipped != events || skipped == 0 || sent < 4 {
		t.Fatalf("sent %d, skipped %d of %d; want the hook disabled partway (some never sent)", sent, skipped, events)
	}
	t.Logf("35 events over 4 days: %d sent (and failed), %d never sent (hook disabled)", sent, skipped)
	logged := srv.Events("42", 1)
	if len(logged) != sent || int(rec.hits.Load()) != sent {
		t.Fatalf("GitLab logged %d and the receiver saw %d requests; want %d (one per sent event, no retries)", len(logged), rec.hits.Load(), sent)
	}

	rec.up.Store(true)
	now := t0.Add(97 * time.Hour)
	at(&srv.Clock, now)
	hook := srv.Hooks("42")[0]
	regs, err := c.List(ctx)
	if err != nil || len(regs) != 1 || regs[0].Health == nil {
		t.Fatalf("List = %+v, %v", regs, err)
	}
	h := regs[0].Health
	switch {
	case hook.DisabledUntil != nil && hook.DisabledUntil.After(now):
		if h.State != providers.HealthDisabled || !h.DisabledUntil.Equal(hook.DisabledUntil.Truncate(time.Second)) {
			t.Errorf("health = %+v; want disabled until %s", h, hook.DisabledUntil)
		}
	default:
		if h.State != providers.HealthFailing {
			t.Errorf("health = %+v; want failing (paused until %v, sending again)", h, hook.DisabledUntil)
		}
	}

	t.Logf("back after 97h: health %s (%s)", h.State, h.Message)
	r := c.(providers.Recoverer)
	page, err := r.Missed(ctx, reg, []string{"push"}, t0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var wantIDs []string
	for _, e := range logged {
		wantIDs = append(wantIDs, e.IdempotencyKey())
	}
	var gotIDs []string
	for i, m := range page.Missed {
		gotIDs = append(gotIDs, m.ID)
		if m.Type != "push" || m.Expired || m.Handle == "" || (i > 0 && m.At.Before(page.Missed[i-1].At)) {
			t.Errorf("missed[%d] = %+v; want a push delivery within the window, oldest first", i, m)
		}
	}
	if !slices.Equal(gotIDs, wantIDs) || page.Malformed != 0 || page.More {
		t.Fatalf("Missed ids = %v (malformed %d, more %v); want the %d failed deliveries' Idempotency-Keys %v", gotIDs, page.Malformed, page.More, len(wantIDs), wantIDs)
	}
	if limited, err := r.Missed(ctx, reg, []string{"*"}, t0, 3); err != nil || len(limited.Missed) != 3 || !limited.More || limited.Missed[0].ID != wantIDs[0] {
		t.Errorf("Missed(limit 3) = %+v, %v; want the 3 oldest and More", limited, err)
	}
	if other, err := r.Missed(ctx, reg, []string{"merge_requests"}, t0, 0); err != nil || len(other.Missed) != 0 {
		t.Errorf("Missed(merge_requests) = %+v, %v; want none", other, err)
	}

	// While the hook is disabled GitLab refuses resends (422 Hook disabled): not now, not never.
	if hook.DisabledUntil != nil && hook.DisabledUntil.After(now) {
		before := rec.hits.Load()
		if err := r.Redeliver(ctx, reg, page.Missed[0]); providers.KindOf(err) != providers.Transient || rec.hits.Load() != before {
			t.Errorf("Redeliver while disabled = %v (%d sent); want Transient, nothing sent", err, rec.hits.Load()-before)
		}
		now = hook.DisabledUntil.Add(time.Second)
	}

	// Paced by RedeliverRate, one request every 12 s of fake time: GitLab never says 429.
	rate := c.Capabilities().Recovery.RedeliverRate
	interval := time.Duration(float64(time.Second) / rate.PerSecond)
	for _, m := range page.Missed {
		now = now.Add(interval)
		at(&srv.Clock, now)
		if err := r.Redeliver(ctx, reg, m); err != nil {
			t.Fatalf("Redeliver(%s) at %s = %v", m.ID, now, err)
		}
	}
	for _, req := range srv.Requests() {
		if req.Status == http.StatusTooManyRequests {
			t.Errorf("%s %s answered 429 although paced by RedeliverRate", req.Method, req.Path)
		}
	}
	if got := rec.received("Idempotency-Key"); !slices.Equal(got, wantIDs) {
		t.Errorf("the receiver got Idempotency-Keys %v; want each failed delivery's own key once, in order: %v", got, wantIDs)
	}
	if again, err := r.Missed(ctx, reg, []string{"push"}, t0, 0); err != nil || len(again.Missed) != 0 {
		t.Errorf("Missed after recovery = %+v, %v; want none (each id later succeeded)", again, err)
	}
	if regs, _ := c.List(ctx); len(regs) != 1 || regs[0].Health.State != providers.HealthHealthy {
		t.Errorf("health after recovery = %+v; want healthy (a success enables the hook)", regs)
	}
}

// TestGitLabResendLimit: without pacing, the sixth resend in a minute is refused with 429 and
// Retry-After: 60, which the client reports as RateLimited with that wait; the next minute
// it goes through.
func TestGitLabResendLimit(t *testing.T) {
	ctx := context.Background()
	srv := gitlab.New()
	srv.AddProject("42", "group/project")
	base, stop := srv.Start()
	t.Cleanup(stop)
	t0 := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	at(&srv.Clock, t0)
	c := factoryClient(t, "gitlab-project-hooks", base+"/api/v4", map[string]string{"project": "42"}, "glpat-test", &srv.Clock)
	rec := newReceiver(t)
	reg, err := c.Create(ctx, providers.Desired{URL: rec.URL, Events: []string{"push"}, Owner: owner, Secret: "tok"}, "k")
	if err != nil {
		t.Fatal(err)
	}
	for range 3 { // three failures: not yet disabled
		srv.Emit("42", "push_events", []byte(`{}`))
	}
	rec.up.Store(true)
	r := c.(providers.Recoverer)
	page, err := r.Missed(ctx, reg, []string{"*"}, time.Time{}, 0)
	if err != nil || len(page.Missed) != 3 {
		t.Fatalf("Missed = %+v, %v", page, err)
	}
	for i := range 5 {
		if err := r.Redeliver(ctx, reg, page.Missed[i%3]); err != nil {
			t.Fatalf("resend %d: %v", i+1, err)
		}
	}
	err = r.Redeliver(ctx, reg, page.Missed[0])
	var pe *providers.Error
	if providers.KindOf(err) != providers.RateLimited || !errorAs(err, &pe) || pe.RetryAfter != time.Minute {
		t.Fatalf("sixth resend in a minute = %v; want RateLimited with GitLab's Retry-After (1m)", err)
	}
	at(&srv.Clock, t0.Add(time.Minute))
	if err := r.Redeliver(ctx, reg, page.Missed[0]); err != nil {
		t.Errorf("resend in the next minute = %v", err)
	}
}

// TestGitLabLogWindow: GitLab lists 7 days of events (from the start of the day); an entry
// listed but older than 7 days is Expired and never requested; older ones are gone.
func TestGitLabLogWindow(t *testing.T) {
	ctx := context.Background()
	srv := gitlab.New()
	srv.AddProject("42", "g/p")
	base, stop := srv.Start()
	t.Cleanup(stop)
	t0 := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	at(&srv.Clock, t0)
	c := factoryClient(t, "gitlab-project-hooks", base+"/api/v4", map[string]string{"project": "42"}, "glpat-test", &srv.Clock)
	rec := newReceiver(t)
	reg, err := c.Create(ctx, providers.Desired{URL: rec.URL, Events: []string{"push"}, Owner: owner, Secret: "tok"}, "k")
	if err != nil {
		t.Fatal(err)
	}
	srv.Emit("42", "push_events", []byte(`{}`))
	at(&srv.Clock, t0.Add(3*24*time.Hour))
	srv.Emit("42", "push_events", []byte(`{}`))
	rec.up.Store(true)
	r := c.(providers.Recoverer)

	at(&srv.Clock, t0.Add(7*24*time.Hour+2*time.Hour)) // the first: listed (same day), past 7 days
	page, err := r.Missed(ctx, reg, []string{"*"}, time.Time{}, 0)
	if err != nil || len(page.Missed) != 2 || !page.Missed[0].Expired || page.Missed[1].Expired {
		t.Fatalf("Missed = %+v, %v; want the first Expired, the second not", page, err)
	}
	before := rec.hits.Load()
	if err := r.Redeliver(ctx, reg, page.Missed[0]); providers.KindOf(err) != providers.Permanent || rec.hits.Load() != before {
		t.Errorf("Redeliver(expired) = %v, %d sent; want Permanent, nothing sent", err, rec.hits.Load()-before)
	}
	at(&srv.Clock, t0.Add(9*24*time.Hour)) // the first is no longer listed at all
	if page, err := r.Missed(ctx, reg, []string{"*"}, time.Time{}, 0); err != nil || len(page.Missed) != 1 {
		t.Errorf("Missed nine days later = %+v, %v; want only the second", page, err)
	}
}

func TestGitLabHealthFromTheHook(t *testing.T) {
	srv, c := gitlabClient(t, "42")
	now := time.Now().UTC()
	until := now.Add(time.Hour)
	for _, tc := range []struct {
		name     string
		failures int
		until    *time.Time
		want     providers.HealthState
	}{
		{"executable", 0, nil, providers.HealthHealthy},
		{"temporarily disabled", 5, &until, providers.HealthDisabled},
		{"permanently disabled", 40, nil, providers.HealthDisabled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := srv.Seed("42", gitlab.Hook{URL: "https://x.example.com/" + tc.name, RecentFailures: tc.failures, DisabledUntil: tc.until})
			regs, err := c.List(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range regs {
				if r.ID == fmt.Sprint(id) && (r.Health == nil || r.Health.State != tc.want || (tc.until != nil && !r.Health.DisabledUntil.Equal(tc.until.Truncate(time.Second)))) {
					t.Errorf("health = %+v; want %s", r.Health, tc.want)
				}
			}
		})
	}
}

func TestPagerDutyHealthAndReenable(t *testing.T) {
	ctx := context.Background()
	srv := pagerduty.New()
	base, stop := srv.Start()
	t.Cleanup(stop)
	var clock fakeapi.Clock
	c := factoryClient(t, "pagerduty-webhook-subscriptions", base, nil, "pd-key", &clock)
	id := srv.Seed("pd-key", pagerduty.Subscription{URL: "https://hooks.example.com/pd", Events: []string{"incident.triggered"}})
	health := func() *providers.DeliveryHealth {
		regs, err := c.List(ctx)
		if err != nil || len(regs) != 1 {
			t.Fatalf("List = %+v, %v", regs, err)
		}
		return regs[0].Health
	}
	if h := health(); h == nil || h.State != providers.HealthHealthy {
		t.Errorf("health = %+v; want healthy", h)
	}
	srv.Edit("pd-key", id, func(s *pagerduty.Subscription) { s.TemporarilyDisabled = true })
	h := health()
	if h == nil || h.State != providers.HealthDisabled || h.Message != "delivery_method.temporarily_disabled is true" {
		t.Fatalf("health = %+v; want disabled, saying which field", h)
	}
	if err := c.(providers.Reenabler).Reenable(ctx, providers.Registration{ID: id}); err != nil {
		t.Fatal(err)
	}
	if subs := srv.Subscriptions("pd-key"); subs[0].Enables != 1 || subs[0].TemporarilyDisabled {
		t.Errorf("after Reenable: %+v; want one POST /enable", subs[0])
	}
	if h := health(); h.State != providers.HealthHealthy {
		t.Errorf("health after Reenable = %+v", h)
	}
}

// TestSvixRecoverSince: Svix resends, in one request, every message whose delivery failed
// since a time; delivered messages and older ones are not sent, and each keeps its svix-id
// and a signature the profile's verifier accepts.
func TestSvixRecoverSince(t *testing.T) {
	ctx := context.Background()
	srv := svix.New()
	srv.AddApp("sk-test", "app_orders")
	base, stop := srv.Start()
	t.Cleanup(stop)
	t0 := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	at(&srv.Clock, t0.Add(-2*time.Hour))
	c := factoryClient(t, "svix-endpoints", base, map[string]string{"app": "app_orders"}, "sk-test", &srv.Clock)
	rec := newReceiver(t)
	reg, err := c.Create(ctx, providers.Desired{URL: rec.URL, Events: []string{"*"}, Owner: owner}, "k")
	if err != nil {
		t.Fatal(err)
	}
	rec.up.Store(true)
	delivered := srv.Send("sk-test", "app_orders", "invoice.paid", []byte(`{"type":"invoice.paid","n":0}`))
	rec.up.Store(false)
	var failed []string
	for i := range 3 {
		at(&srv.Clock, t0.Add(time.Duration(i)*time.Hour))
		failed = append(failed, srv.Send("sk-test", "app_orders", "invoice.paid", []byte(fmt.Sprintf(`{"type":"invoice.paid","n":%d}`, i+1))))
	}
	rec.up.Store(true)
	at(&srv.Clock, t0.Add(4*time.Hour))
	rr := c.(providers.RangeRecoverer)
	if err := rr.RecoverSince(ctx, reg, t0.Add(30*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if got := rec.received("svix-id"); !slices.Equal(got, []string{delivered, failed[1], failed[2]}) {
		t.Fatalf("the receiver got %v; want %s, then the failed %v since the time", got, delivered, failed[1:])
	}
	v, err := rest.NewVerifierFromSpec(c.(providers.VerifierDescriber).VerifierSpec())
	if err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	last := rec.got[len(rec.got)-1]
	rec.mu.Unlock()
	if got, err := v.Verify(providers.Delivery{Header: last, Body: []byte(`{"type":"invoice.paid","n":3}`), Now: t0.Add(4 * time.Hour)}, [][]byte{[]byte(srv.Endpoints("sk-test", "app_orders")[0].Secret)}); err != nil || got.EventID != failed[2] {
		t.Errorf("a recovered message verifies as %+v, %v; want svix-id %s", got, err, failed[2])
	}
	if err := rr.RecoverSince(ctx, reg, t0.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	if got := rec.received("svix-id"); !slices.Equal(got[3:], []string{failed[0]}) {
		t.Errorf("second recover sent %v; want only %s (the rest were delivered)", got[3:], failed[0])
	}
	// A since beyond recover.window is moved up to the window's start.
	if err := rr.RecoverSince(ctx, reg, t0.Add(-200*24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	reqs := srv.Requests()
	want := fmt.Sprintf(`{"since":"%s"}`, t0.Add(4*time.Hour-90*24*time.Hour).Format(time.RFC3339))
	if b := string(reqs[len(reqs)-1].Body); b != want {
		t.Errorf("recover body %s; want %s", b, want)
	}
}

func errorAs(err error, target **providers.Error) bool {
	pe, ok := err.(*providers.Error) //nolint:errorlint // the boundary returns a *providers.Error itself, not wrapped
	if ok {
		*target = pe
	}
	return ok
}
