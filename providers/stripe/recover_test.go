package stripe_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	stripego "github.com/stripe/stripe-go/v76"
	"github.com/stripe/stripe-go/v76/webhook"

	"github.com/hookwarden/hookwarden/internal/fakeapi"
	"github.com/hookwarden/hookwarden/providers"
	"github.com/hookwarden/hookwarden/providers/stripe"
	"github.com/hookwarden/hookwarden/providers/stripe/fake"
)

const recoverKey = "sk_test_recover"

// settable is a fake clock a test moves by hand.
type settable struct {
	mu sync.Mutex
	t  time.Time
}

func (c *settable) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *settable) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// recoverySetup is a fake Stripe on a settable clock, a client for recoverKey whose every
// request is counted by its Pace, and an endpoint that answers down's status.
type recoverySetup struct {
	srv   *fake.Server
	c     *stripe.Client
	clk   *settable
	paced *atomic.Int64
	pace  func() // called before each request, after counting it
	ep    fake.Endpoint
	down  *atomic.Int64 // the status the endpoint answers
}

func newRecoverySetup(t *testing.T, opts ...fake.Option) *recoverySetup {
	t.Helper()
	s := &recoverySetup{clk: &settable{t: time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC)}, paced: &atomic.Int64{}, down: &atomic.Int64{}}
	s.down.Store(http.StatusServiceUnavailable)
	endpoint := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(int(s.down.Load())) }))
	t.Cleanup(endpoint.Close)
	s.srv = fake.New(append([]fake.Option{fake.WithClock(s.clk.Now)}, opts...)...)
	base, stop := s.srv.Start()
	t.Cleanup(stop)
	c, err := stripe.New(providers.Config{APIURL: base, Credential: recoverKey, Timeout: 5 * time.Second, Now: s.clk.Now,
		Pace: func(context.Context) error {
			s.paced.Add(1)
			if s.pace != nil {
				s.pace()
			}
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	s.c = c
	s.ep = s.srv.Seed(recoverKey, fake.Endpoint{URL: endpoint.URL + "/hook", EnabledEvents: []string{"*"}, APIVersion: stripego.APIVersion})
	return s
}

// eventQueries are the queries of the /v1/events requests the fake saw.
func (s *recoverySetup) eventQueries() []string {
	var out []string
	for _, r := range s.srv.Requests() {
		if r.Path == "/v1/events" {
			out = append(out, r.Query.Encode())
		}
	}
	return out
}

func missedIDs(m []providers.Missed) []string {
	out := []string{}
	for _, e := range m {
		out = append(out, e.ID)
	}
	return out
}

func TestMissedSplitsMoreThanTwentyTypesAndMergesOldestFirst(t *testing.T) {
	s := newRecoverySetup(t)
	var types, want []string
	for i := range 25 {
		types = append(types, fmt.Sprintf("invoice.t%02d", i))
	}
	// Emitted in an order unlike the batches (t24 first), one second apart.
	for i := 24; i >= 0; i-- {
		want = append(want, s.srv.Emit(recoverKey, types[i], nil).ID)
		s.clk.Add(time.Second)
	}
	s.srv.Emit(recoverKey, "customer.created", nil) // pending, but not asked for
	since := s.clk.Now().Add(-time.Hour)

	page, err := s.c.Missed(t.Context(), providers.Registration{ID: s.ep.ID}, append(types, types[3]), since, 0)
	if err != nil {
		t.Fatalf("Missed: %v", err)
	}
	if diff := cmp.Diff(want, missedIDs(page.Missed)); diff != "" || page.More || page.Malformed != 0 {
		t.Errorf("Missed (more %v, malformed %d) (-want +got):\n%s", page.More, page.Malformed, diff)
	}
	qs := s.eventQueries()
	if len(qs) != 2 {
		t.Fatalf("/v1/events requests = %q, want 2 (20 types, then 5)", qs)
	}
	for i, q := range qs {
		n := strings.Count(q, "types%5B")
		if wantN := []int{20, 5}[i]; n != wantN {
			t.Errorf("request %d carries %d types, want %d: %s", i, n, wantN, q)
		}
		for _, p := range []string{"delivery_success=false", "limit=100", "created%5Bgte%5D=" + strconv.FormatInt(since.Unix(), 10)} {
			if !strings.Contains(q, p) {
				t.Errorf("request %d lacks %s: %s", i, p, q)
			}
		}
	}
	if got := s.paced.Load(); got != 2 {
		t.Errorf("Pace called %d times, want once per request (2)", got)
	}

	// "*" means no type filter at all: one listing, every pending type.
	s.srv.ResetRequests()
	all, err := s.c.Missed(t.Context(), providers.Registration{}, []string{"*"}, since, 0)
	if err != nil || len(all.Missed) != 26 {
		t.Errorf("Missed(*) = %d events, %v; want 26", len(all.Missed), err)
	}
	if qs := s.eventQueries(); len(qs) != 1 || strings.Contains(qs[0], "type") {
		t.Errorf("Missed(*) requests = %q, want one without a type filter", qs)
	}
}

func TestMissedPagesPastOneHundredAndHonoursLimit(t *testing.T) {
	s := newRecoverySetup(t)
	var want []string
	for i := range 230 {
		want = append(want, s.srv.Emit(recoverKey, "invoice.paid", nil).ID)
		if i%7 == 0 {
			s.clk.Add(time.Second) // several events share a second
		}
	}
	since := s.clk.Now().Add(-time.Hour)

	page, err := s.c.Missed(t.Context(), providers.Registration{}, []string{"invoice.paid"}, since, 0)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, missedIDs(page.Missed)); diff != "" || page.More {
		t.Errorf("Missed (more %v) (-want +got):\n%s", page.More, diff)
	}
	qs := s.eventQueries()
	if len(qs) != 3 || strings.Contains(qs[0], "starting_after") || !strings.Contains(qs[1], "starting_after="+want[130]) || !strings.Contains(qs[2], "starting_after="+want[30]) {
		t.Errorf("requests = %q, want 3 pages of 100 following starting_after", qs)
	}

	limited, err := s.c.Missed(t.Context(), providers.Registration{}, []string{"invoice.paid"}, since, 50)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want[:50], missedIDs(limited.Missed)); diff != "" || !limited.More {
		t.Errorf("Missed limit 50 (more %v) (-want +got):\n%s\nreason: the oldest 50, More set", limited.More, diff)
	}
	if exact, _ := s.c.Missed(t.Context(), providers.Registration{}, []string{"invoice.paid"}, since, 230); exact.More || len(exact.Missed) != 230 {
		t.Errorf("Missed limit 230 = %d, more %v; want all 230 and More false", len(exact.Missed), exact.More)
	}
}

// A busy account creates far more events in one second than a page holds: a page never ends
// inside a second, so the next page (from NextSince) starts after every event already listed
// and none is passed over.
func TestMissedKeepsEverySecondWhole(t *testing.T) {
	s := newRecoverySetup(t)
	var crowded, after []string
	for range 1000 {
		crowded = append(crowded, s.srv.Emit(recoverKey, "invoice.paid", nil).ID)
	}
	s.clk.Add(time.Second)
	for range 30 {
		after = append(after, s.srv.Emit(recoverKey, "invoice.paid", nil).ID)
	}
	since := s.clk.Now().Add(-time.Hour)

	first, err := s.c.Missed(t.Context(), providers.Registration{}, []string{"invoice.paid"}, since, 100)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(crowded, missedIDs(first.Missed)); diff != "" || !first.More {
		t.Fatalf("first page (more %v) (-want +got):\n%s\nreason: the limit falls inside a second of 1,000 events: all of them, More set", first.More, diff)
	}
	next := first.NextSince()
	if want := first.Missed[0].At.Add(time.Second); !next.Equal(want) {
		t.Fatalf("NextSince = %s, want the second after the crowded one (%s)", next, want)
	}
	second, err := s.c.Missed(t.Context(), providers.Registration{}, []string{"invoice.paid"}, next, 100)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(after, missedIDs(second.Missed)); diff != "" || second.More {
		t.Errorf("second page (more %v) (-want +got):\n%s", second.More, diff)
	}
}

func TestMissedSkipsAndCountsMalformedEvents(t *testing.T) {
	s := newRecoverySetup(t)
	var ids []string
	for range 6 {
		ids = append(ids, s.srv.Emit(recoverKey, "invoice.paid", map[string]any{"id": "in_1"}).ID)
		s.clk.Add(time.Second)
	}
	quirks := map[string][]fakeapi.Quirk{
		ids[1]: {{Path: "id"}},                          // no id
		ids[2]: {{Path: "id", Value: []byte(`"ch_1"`)}}, // not an event id
		ids[3]: {{Path: "id", Value: []byte(`42`)}},     // not a string
		ids[4]: {{Path: "created", Value: []byte(`null`)}},
	}
	for id, q := range quirks {
		s.srv.EditEvent(recoverKey, id, func(e *fake.Event) { e.Quirks = q })
	}
	page, err := s.c.Missed(t.Context(), providers.Registration{}, []string{"invoice.paid"}, time.Time{}, 0)
	if err != nil {
		t.Fatalf("Missed: %v", err)
	}
	if diff := cmp.Diff([]string{ids[0], ids[5]}, missedIDs(page.Missed)); diff != "" || page.Malformed != 4 {
		t.Errorf("Missed (malformed %d, want 4) (-want +got):\n%s", page.Malformed, diff)
	}
	if q := s.eventQueries(); len(q) != 1 || strings.Contains(q[0], "created") {
		t.Errorf("requests = %q: a zero since sends no created filter", q)
	}
}

func TestMissedHonoursSince(t *testing.T) {
	s := newRecoverySetup(t)
	var ids []string
	for range 5 {
		ids = append(ids, s.srv.Emit(recoverKey, "invoice.paid", nil).ID)
		s.clk.Add(12 * time.Hour)
	}
	since := s.srv.Events(recoverKey)[2].Created // inclusive
	page, err := s.c.Missed(t.Context(), providers.Registration{}, []string{"invoice.paid"}, since.Add(999*time.Millisecond), 0)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(ids[2:], missedIDs(page.Missed)); diff != "" {
		t.Errorf("Missed since the third event (-want +got):\n%s", diff)
	}
	for i, m := range page.Missed {
		if want := s.srv.Events(recoverKey)[i+2].Created; !m.At.Equal(want) || m.Type != "invoice.paid" {
			t.Errorf("missed %d = At %v type %q, want %v invoice.paid", i, m.At, m.Type, want)
		}
	}
}

// A rate-limit storm during recovery: each 429 ends Missed with a RateLimited error carrying
// the stated wait (or none), and no request follows it within the call; the reconciler's
// limiter, not the client, waits.
func TestMissedStopsAtARateLimitAndReportsItsWait(t *testing.T) {
	s := newRecoverySetup(t)
	for range 150 {
		s.srv.Emit(recoverKey, "invoice.paid", nil)
	}
	// The storm starts on the second page.
	var remove func()
	s.pace = func() {
		if s.paced.Load() == 2 {
			remove = s.srv.Inject(fake.Fault{PathPrefix: "/v1/events", Status: http.StatusTooManyRequests, Code: "rate_limit", RetryAfter: 7 * time.Second, Times: 3})
		}
	}
	_, err := s.c.Missed(t.Context(), providers.Registration{}, []string{"invoice.paid"}, time.Time{}, 0)
	var pe *providers.Error
	if !errors.As(err, &pe) || pe.Kind != providers.RateLimited || pe.RetryAfter != 7*time.Second {
		t.Fatalf("Missed in a storm = %v, want RateLimited with RetryAfter 7s", err)
	}
	if n := len(s.eventQueries()); n != 2 {
		t.Errorf("%d requests, want 2: nothing after the 429 within the call", n)
	}
	s.pace = nil
	for range 2 {
		if _, err := s.c.Missed(t.Context(), providers.Registration{}, []string{"invoice.paid"}, time.Time{}, 0); providers.KindOf(err) != providers.RateLimited {
			t.Errorf("Missed while the storm lasts = %v, want RateLimited", err)
		}
	}
	remove()
	page, err := s.c.Missed(t.Context(), providers.Registration{}, []string{"invoice.paid"}, time.Time{}, 0)
	if err != nil || len(page.Missed) != 150 {
		t.Errorf("after the storm: %d events, %v; want all 150", len(page.Missed), err)
	}

	// Stripe's own 429 states no wait: RateLimited with none, for the credential's backoff.
	s.srv.Inject(fake.Fault{PathPrefix: "/v1/events", Status: http.StatusTooManyRequests, Code: "rate_limit", Times: 1})
	_, err = s.c.Missed(t.Context(), providers.Registration{}, nil, time.Time{}, 0)
	if !errors.As(err, &pe) || pe.Kind != providers.RateLimited || pe.RetryAfter != 0 || strings.Contains(err.Error(), recoverKey) {
		t.Errorf("a 429 without Retry-After = %v, want RateLimited with no wait and no key", err)
	}
}

// The receiver is down for four days: every event Stripe failed to deliver in that time comes
// back, oldest first, and each one signed with SignDelivery is accepted by stripe-go as a
// delivery of that endpoint.
func TestMissedAfterFourDaysDown(t *testing.T) {
	s := newRecoverySetup(t)
	s.down.Store(http.StatusOK)
	delivered := []string{s.srv.Emit(recoverKey, "invoice.paid", nil).ID, s.srv.Emit(recoverKey, "charge.failed", nil).ID}
	if evs := s.srv.Events(recoverKey); evs[0].PendingWebhooks+evs[1].PendingWebhooks != 0 {
		t.Fatalf("events before the outage were not delivered: %+v", evs)
	}
	s.clk.Add(time.Hour)

	s.down.Store(http.StatusBadGateway) // the receiver goes down
	downAt := s.clk.Now()
	var want []string
	types := []string{"invoice.paid", "charge.failed", "customer.subscription.updated"}
	for i := range 35 {
		want = append(want, s.srv.Emit(recoverKey, types[i%3], map[string]any{"n": i}).ID)
		s.clk.Add(4 * 24 * time.Hour / 35)
		s.srv.RetryDue()
	}
	s.srv.Emit(recoverKey, "payout.paid", nil) // not subscribed by the subscription
	for range 4 {
		s.clk.Add(time.Hour)
		s.srv.RetryDue()
	}
	s.down.Store(http.StatusOK) // back, four days and a bit later
	if failed := len(s.srv.Attempts()) - len(delivered) - 36; failed < 35*3 {
		t.Errorf("only %d retries were made while down; the scenario should include Stripe's retries", failed)
	}

	// Since reaches back before the outage: the events delivered then are not missed.
	since := downAt.Add(-time.Hour)
	page, err := s.c.Missed(t.Context(), providers.Registration{ID: s.ep.ID}, types, since, 0)
	if err != nil {
		t.Fatalf("Missed: %v", err)
	}
	if diff := cmp.Diff(want, missedIDs(page.Missed)); diff != "" {
		t.Errorf("missed events (-want +got):\n%s\nreason: exactly the 35 undelivered since the receiver went down, oldest first", diff)
	}
	for _, m := range page.Missed {
		if m.At.Before(downAt.Truncate(time.Second)) || slices.Contains(delivered, m.ID) {
			t.Errorf("missed %s at %v: delivered before the receiver went down", m.ID, m.At)
		}
	}

	now := s.clk.Now()
	for _, m := range page.Missed {
		h, err := s.c.SignDelivery(m.Payload, s.ep.Secret, now)
		if err != nil {
			t.Fatal(err)
		}
		ev, err := webhook.ConstructEventWithOptions(m.Payload, h.Get("Stripe-Signature"), s.ep.Secret, webhook.ConstructEventOptions{IgnoreTolerance: true} /* t is the fake clock, weeks from the real one */)
		if err != nil {
			t.Fatalf("stripe-go refuses recovered %s: %v", m.ID, err)
		}
		if ev.ID != m.ID || string(ev.Type) != m.Type || ev.Created != m.At.Unix() || ev.APIVersion != stripego.APIVersion {
			t.Errorf("stripe-go read %s %s %d %s, want %s %s %d", ev.ID, ev.Type, ev.Created, ev.APIVersion, m.ID, m.Type, m.At.Unix())
		}
		if _, err := webhook.ConstructEventWithOptions(m.Payload, h.Get("Stripe-Signature"), "whsec_other", webhook.ConstructEventOptions{IgnoreTolerance: true}); err == nil {
			t.Errorf("recovered %s verifies with another secret", m.ID)
		}
	}
}

func TestSignDeliveryHeadersAreStripes(t *testing.T) {
	c := newClient(t, "http://127.0.0.1:1")
	now := time.Unix(1_790_000_000, 0)
	payload := []byte(`{"id":"evt_1","object":"event"}`)
	h, err := c.SignDelivery(payload, "whsec_test", now)
	if err != nil {
		t.Fatal(err)
	}
	signed := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: payload, Secret: "whsec_test", Timestamp: now})
	want := http.Header{
		"Stripe-Signature": {signed.Header},
		"Content-Type":     {"application/json; charset=utf-8"},
		"User-Agent":       {"Stripe/1.0 (+https://stripe.com/docs/webhooks)"},
	}
	if diff := cmp.Diff(want, h); diff != "" {
		t.Errorf("SignDelivery (-want +got):\n%s", diff)
	}
	if _, err := c.SignDelivery(payload, "", now); providers.KindOf(err) != providers.Permanent {
		t.Errorf("SignDelivery without a secret = %v, want Permanent", err)
	}
}

func TestRecoveryCapabilitiesAndRedeliver(t *testing.T) {
	c := newClient(t, "http://127.0.0.1:1")
	want := providers.RecoveryCapabilities{Mode: providers.RecoveryFetch, Window: 30 * 24 * time.Hour, AccountWide: true}
	if diff := cmp.Diff(want, c.Capabilities().Recovery); diff != "" {
		t.Errorf("Capabilities().Recovery (-want +got):\n%s", diff)
	}
	if err := c.Redeliver(t.Context(), providers.Registration{ID: "we_1"}, providers.Missed{ID: "evt_1"}); providers.KindOf(err) != providers.Permanent {
		t.Errorf("Redeliver = %v, want Permanent (Stripe has no redelivery API)", err)
	}
}

// An endpoint Stripe disabled is listed Disabled with Health disabled; Reenable (an update
// that sends disabled=false and nothing else) enables it again, and deliveries resume.
func TestDisabledEndpointHealthAndReenable(t *testing.T) {
	s := newRecoverySetup(t)
	s.srv.Edit(recoverKey, s.ep.ID, func(e *fake.Endpoint) { e.Status = "disabled" })

	regs, err := s.c.List(t.Context())
	if err != nil || len(regs) != 1 {
		t.Fatalf("List = %v, %v", regs, err)
	}
	if r := regs[0]; !r.Disabled || r.Health == nil || r.Health.State != providers.HealthDisabled || r.Health.Message == "" {
		t.Errorf("disabled endpoint listed as Disabled %v, Health %+v; want Disabled and HealthDisabled with a message", r.Disabled, r.Health)
	}
	if ev := s.srv.Emit(recoverKey, "invoice.paid", nil); len(ev.Deliveries) != 0 {
		t.Errorf("a disabled endpoint was sent %+v", ev.Deliveries)
	}

	if err := s.c.Reenable(t.Context(), providers.Registration{ID: s.ep.ID}); err != nil {
		t.Fatal(err)
	}
	var form []string
	for _, r := range s.srv.Requests() {
		if r.Method == http.MethodPost && r.Path == "/v1/webhook_endpoints/"+s.ep.ID {
			form = append(form, r.Form.Encode())
		}
	}
	if len(form) != 1 || form[0] != "disabled=false" {
		t.Errorf("Reenable sent %q, want one update with disabled=false alone", form)
	}
	regs, err = s.c.List(t.Context())
	if err != nil || len(regs) != 1 || regs[0].Disabled || regs[0].Health != nil || s.srv.Endpoints(recoverKey)[0].Status != "enabled" {
		t.Errorf("after Reenable: %+v (%v); want enabled and no health report", regs, err)
	}
	s.down.Store(http.StatusOK)
	if ev := s.srv.Emit(recoverKey, "invoice.paid", nil); len(ev.Deliveries) != 1 || ev.Deliveries[0].State != fake.DeliverySucceeded {
		t.Errorf("after re-enabling: %+v, want one delivery that succeeded", ev.Deliveries)
	}
}

// Stripe sends nothing to a disabled endpoint, so an event created while ours was disabled
// never counted it as pending: delivery_success=false does not list it (unless another
// endpoint of the account failed it too). Here the fake disables the endpoint after three days
// of failures (WithAutoDisable); the events of the fourth day are not missed as far as the
// listing can tell. The reconciler must cover that stretch otherwise (see the report).
func TestMissedDoesNotListEventsCreatedWhileTheEndpointWasDisabled(t *testing.T) {
	s := newRecoverySetup(t, fake.WithAutoDisable())
	since := s.clk.Now()
	var beforeDisable, whileDisabled []string
	for range 32 { // every 3 hours for 4 days
		ev := s.srv.Emit(recoverKey, "invoice.paid", nil)
		if len(ev.Deliveries) == 0 {
			whileDisabled = append(whileDisabled, ev.ID)
		} else {
			beforeDisable = append(beforeDisable, ev.ID)
		}
		s.clk.Add(3 * time.Hour)
		s.srv.RetryDue()
	}
	if s.srv.Endpoints(recoverKey)[0].Status != "disabled" || len(whileDisabled) == 0 || len(beforeDisable) == 0 {
		t.Fatalf("scenario: status %s, %d events before and %d while disabled; want the endpoint disabled on day 3",
			s.srv.Endpoints(recoverKey)[0].Status, len(beforeDisable), len(whileDisabled))
	}
	page, err := s.c.Missed(t.Context(), providers.Registration{ID: s.ep.ID, Disabled: true}, []string{"invoice.paid"}, since, 0)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(beforeDisable, missedIDs(page.Missed)); diff != "" {
		t.Errorf("Missed (-want +got):\n%s\nreason: only events created before the disable count the endpoint as pending", diff)
	}
	// What recovery lists for the time the endpoint was disabled: every event, delivered or not.
	all, err := s.c.Events(t.Context(), []string{"invoice.paid"}, since, 0)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(append(append([]string{}, beforeDisable...), whileDisabled...), missedIDs(all.Missed)); diff != "" {
		t.Errorf("Events (-want +got):\n%s\nreason: without delivery_success every event of the type since since is listed, oldest first", diff)
	}
}
