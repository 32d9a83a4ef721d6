package fake_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stripe/stripe-go/v76"
	"github.com/stripe/stripe-go/v76/webhook"

	"github.com/hookwarden/hookwarden/internal/fakeapi"
	"github.com/hookwarden/hookwarden/providers/stripe/fake"
)

// receiver is a webhook endpoint that answers status and keeps what it was sent.
type receiver struct {
	*httptest.Server
	mu     sync.Mutex
	status int
	got    []delivered
}

type delivered struct {
	header http.Header
	body   []byte
}

func newReceiver(t *testing.T, status int) *receiver {
	t.Helper()
	r := &receiver{status: status}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		defer r.mu.Unlock()
		r.got = append(r.got, delivered{req.Header.Clone(), body})
		w.WriteHeader(r.status)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) answer(status int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.status = status
}

func (r *receiver) deliveries() []delivered {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]delivered(nil), r.got...)
}

// attemptsOf sums up attempts as "endpoint#n code".
func attemptsOf(as []fake.Attempt, names map[string]string) []string {
	var out []string
	for _, a := range as {
		out = append(out, fmt.Sprintf("%s#%d %d", names[a.Endpoint], a.N, a.Code))
	}
	return out
}

func TestEmitDeliversToSubscribedEnabledEndpointsSignedLikeStripe(t *testing.T) {
	clk := newClock()
	s, _ := start(t, fake.WithClock(clk.Now))
	up := newReceiver(t, http.StatusOK)
	exact := s.Seed(keyA, fake.Endpoint{URL: up.URL + "/exact", EnabledEvents: []string{"invoice.paid"}, Created: clk.Now()})
	all := s.Seed(keyA, fake.Endpoint{URL: up.URL + "/all", EnabledEvents: []string{"*"}, Created: clk.Now().Add(time.Second)})
	other := s.Seed(keyA, fake.Endpoint{URL: up.URL + "/other", EnabledEvents: []string{"charge.failed"}})
	off := s.Seed(keyA, fake.Endpoint{URL: up.URL + "/off", EnabledEvents: []string{"*"}, Status: "disabled"})
	s.Seed(keyB, fake.Endpoint{URL: up.URL + "/b", EnabledEvents: []string{"*"}})
	names := map[string]string{exact.ID: "exact", all.ID: "all", other.ID: "other", off.ID: "off"}

	clk.Add(time.Hour)
	ev := s.Emit(keyA, "invoice.paid", map[string]any{"id": "in_1", "object": "invoice"})

	if !strings.HasPrefix(ev.ID, "evt_") || !ev.Created.Equal(clk.Now()) || ev.APIVersion != fake.DefaultAPIVersion {
		t.Errorf("event = %+v, want an evt_ id, created now, api_version %s", ev, fake.DefaultAPIVersion)
	}
	if ev.PendingWebhooks != 0 {
		t.Errorf("pending_webhooks = %d after both endpoints answered 200, want 0", ev.PendingWebhooks)
	}
	if diff := cmp.Diff([]string{"exact#1 200", "all#1 200"}, attemptsOf(s.Attempts(), names)); diff != "" {
		t.Errorf("attempts (-want +got):\n%s\nreason: only enabled endpoints of the account subscribed to the type, oldest endpoint first", diff)
	}
	secrets := map[string]string{"/exact": exact.Secret, "/all": all.Secret}
	got := up.deliveries()
	if len(got) != 2 {
		t.Fatalf("receiver got %d deliveries, want 2", len(got))
	}
	for i, d := range got {
		path := []string{"/exact", "/all"}[i]
		if ua, ct := d.header.Get("User-Agent"), d.header.Get("Content-Type"); ua != "Stripe/1.0 (+https://stripe.com/docs/webhooks)" || ct != "application/json; charset=utf-8" {
			t.Errorf("delivery %d: User-Agent %q, Content-Type %q", i, ua, ct)
		}
		wantT := fmt.Sprintf("t=%d,", clk.Now().Unix())
		if sig := d.header.Get("Stripe-Signature"); !strings.HasPrefix(sig, wantT) {
			t.Errorf("delivery %d: Stripe-Signature %q, want t = the fake's clock (%s)", i, sig, wantT)
		}
		e, err := webhook.ConstructEventWithOptions(d.body, d.header.Get("Stripe-Signature"), secrets[path], webhook.ConstructEventOptions{IgnoreTolerance: true})
		if err != nil {
			t.Fatalf("delivery %d does not verify with its endpoint's secret: %v", i, err)
		}
		if e.ID != ev.ID || e.Type != "invoice.paid" || e.Data.Object["id"] != "in_1" || e.Created != clk.Now().Unix() {
			t.Errorf("delivery %d = %+v, want the emitted event", i, e)
		}
		if e.PendingWebhooks != 2 {
			t.Errorf("delivery %d: pending_webhooks %d, want 2 (pending when the first attempts were made)", i, e.PendingWebhooks)
		}
		if _, err := webhook.ConstructEventWithOptions(d.body, d.header.Get("Stripe-Signature"), other.Secret, webhook.ConstructEventOptions{IgnoreTolerance: true}); err == nil {
			t.Errorf("delivery %d verifies with another endpoint's secret", i)
		}
	}
	if evs := s.Events(keyB); len(evs) != 0 {
		t.Errorf("account B has events %v; events belong to the account they were emitted on", evs)
	}
}

func TestRetriesFollowTheScheduleUntilDelivered(t *testing.T) {
	clk := newClock()
	s, _ := start(t, fake.WithClock(clk.Now))
	down := newReceiver(t, http.StatusServiceUnavailable)
	ep := s.Seed(keyA, fake.Endpoint{URL: down.URL, EnabledEvents: []string{"*"}})
	names := map[string]string{ep.ID: "ep"}

	ev := s.Emit(keyA, "customer.created", nil)
	want := []fake.EventDelivery{{Endpoint: ep.ID, State: fake.DeliveryPending, Attempts: 1, NextAttempt: clk.Now().Add(time.Minute)}}
	if diff := cmp.Diff(want, ev.Deliveries); diff != "" || ev.PendingWebhooks != 1 {
		t.Errorf("after a 503 (pending %d) (-want +got):\n%s", ev.PendingWebhooks, diff)
	}
	if got := s.RetryDue(); len(got) != 0 {
		t.Errorf("RetryDue before the retry is due made %v", attemptsOf(got, names))
	}
	clk.Add(time.Minute)
	if diff := cmp.Diff([]string{"ep#2 503"}, attemptsOf(s.RetryDue(), names)); diff != "" {
		t.Errorf("RetryDue a minute later (-want +got):\n%s", diff)
	}
	down.answer(http.StatusNoContent)
	clk.Add(4 * time.Minute)
	if got := s.RetryDue(); len(got) != 0 {
		t.Errorf("RetryDue 4 minutes after the second attempt made %v; the second wait is 5 minutes", attemptsOf(got, names))
	}
	clk.Add(time.Minute)
	if diff := cmp.Diff([]string{"ep#3 204"}, attemptsOf(s.RetryDue(), names)); diff != "" {
		t.Errorf("RetryDue 5 minutes after the second attempt (-want +got):\n%s", diff)
	}
	got := s.Events(keyA)[0]
	if diff := cmp.Diff([]fake.EventDelivery{{Endpoint: ep.ID, State: fake.DeliverySucceeded, Attempts: 3}}, got.Deliveries); diff != "" || got.PendingWebhooks != 0 {
		t.Errorf("after the 204 (pending %d) (-want +got):\n%s", got.PendingWebhooks, diff)
	}
	clk.Add(24 * time.Hour)
	if got := s.RetryDue(); len(got) != 0 {
		t.Errorf("RetryDue after success made %v", attemptsOf(got, names))
	}
}

func TestRetriesStopAfterThreeDays(t *testing.T) {
	clk := newClock()
	s, _ := start(t, fake.WithClock(clk.Now))
	down := newReceiver(t, http.StatusInternalServerError)
	s.Seed(keyA, fake.Endpoint{URL: down.URL, EnabledEvents: []string{"*"}})
	created := s.Emit(keyA, "invoice.paid", nil).Created

	attempts := 1
	for i := 0; i < 100; i++ {
		d := s.Events(keyA)[0].Deliveries[0]
		if d.State != fake.DeliveryPending {
			break
		}
		clk.Add(d.NextAttempt.Sub(clk.Now()))
		attempts += len(s.RetryDue())
	}
	ev := s.Events(keyA)[0]
	if d := ev.Deliveries[0]; d.State != fake.DeliveryFailed || d.Attempts != attempts {
		t.Errorf("delivery after the retries = %+v, want failed after %d attempts", d, attempts)
	}
	last := s.Attempts()[len(s.Attempts())-1].Time
	if last.After(created.Add(fake.RetryWindow)) || last.Before(created.Add(fake.RetryWindow-10*time.Hour)) {
		t.Errorf("last attempt %v after creation; want within the last 10 hours of 3 days", last.Sub(created))
	}
	// 1 + (1m, 5m, 30m, 2h, 5h) + 10h waits while within 72h: 6 attempts by 7h36m, then 6 more.
	if attempts != 12 {
		t.Errorf("%d attempts in 3 days, want 12 on the fake's schedule", attempts)
	}
	if ev.PendingWebhooks != 1 {
		t.Errorf("pending_webhooks = %d after every attempt failed, want 1: the event stays undelivered", ev.PendingWebhooks)
	}
	clk.Add(24 * time.Hour)
	if got := s.RetryDue(); len(got) != 0 {
		t.Errorf("RetryDue on day 4 made %d attempts; retries stop after 3 days", len(got))
	}
	if st := s.Endpoints(keyA)[0].Status; st != "enabled" {
		t.Errorf("endpoint status = %s without WithAutoDisable, want enabled", st)
	}
}

func TestFourDaysLaterNoAttemptFailedAndAutoDisabled(t *testing.T) {
	clk := newClock()
	s, _ := start(t, fake.WithClock(clk.Now), fake.WithAutoDisable())
	down := newReceiver(t, http.StatusBadGateway)
	s.Seed(keyA, fake.Endpoint{URL: down.URL, EnabledEvents: []string{"*"}})
	s.Emit(keyA, "invoice.paid", nil)

	s.AdvanceClock(4 * 24 * time.Hour)
	if n := len(s.RetryDue()); n != 0 {
		t.Errorf("RetryDue four days later made %d attempts, want none: the 3-day window is over", n)
	}
	ev := s.Events(keyA)[0]
	if ev.Deliveries[0].State != fake.DeliveryFailed || ev.PendingWebhooks != 1 {
		t.Errorf("event = %+v, want its delivery failed and still pending", ev)
	}
	if st := s.Endpoints(keyA)[0].Status; st != "disabled" {
		t.Errorf("endpoint status = %s, want disabled (WithAutoDisable, nothing delivered for 3 days)", st)
	}
	later := s.Emit(keyA, "invoice.paid", nil)
	if later.PendingWebhooks != 0 || len(later.Deliveries) != 0 || len(down.deliveries()) != 1 {
		t.Errorf("event after the disable = %+v (%d deliveries in all); a disabled endpoint gets nothing and is not pending", later, len(down.deliveries()))
	}
	if !s.Now().Equal(clk.Now().Add(4 * 24 * time.Hour)) {
		t.Errorf("Now() = %v, want the clock advanced by 4 days", s.Now())
	}
}

func TestRetryStopsWhenTheEndpointIsDisabledOrDeleted(t *testing.T) {
	clk := newClock()
	s, _ := start(t, fake.WithClock(clk.Now))
	down := newReceiver(t, http.StatusInternalServerError)
	off := s.Seed(keyA, fake.Endpoint{URL: down.URL + "/off", EnabledEvents: []string{"*"}})
	gone := s.Seed(keyA, fake.Endpoint{URL: down.URL + "/gone", EnabledEvents: []string{"*"}})
	s.Emit(keyA, "invoice.paid", nil)
	s.Edit(keyA, off.ID, func(e *fake.Endpoint) { e.Status = "disabled" })
	s.Remove(keyA, gone.ID)
	clk.Add(time.Hour)
	if got := s.RetryDue(); len(got) != 0 {
		t.Errorf("RetryDue made %d attempts to a disabled and a deleted endpoint", len(got))
	}
	ev := s.Events(keyA)[0]
	for _, d := range ev.Deliveries {
		if d.State != fake.DeliveryStopped {
			t.Errorf("delivery %+v, want stopped", d)
		}
	}
	if ev.PendingWebhooks != 2 {
		t.Errorf("pending_webhooks = %d, want 2 (never delivered)", ev.PendingWebhooks)
	}
}

// eventList is a /v1/events answer.
type eventList struct {
	Object  string            `json:"object"`
	Data    []json.RawMessage `json:"data"`
	HasMore bool              `json:"has_more"`
	URL     string            `json:"url"`
}

func getEvents(t *testing.T, base, key, query string) (int, eventList, apiErr) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+"/v1/events?"+query, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	var l eventList
	var e struct {
		Error struct{ Type, Code, Param, Message string }
	}
	if res.StatusCode == http.StatusOK {
		if err := json.Unmarshal(body, &l); err != nil {
			t.Fatalf("decoding %s: %v", body, err)
		}
	} else if err := json.Unmarshal(body, &e); err != nil {
		t.Fatalf("decoding %s: %v", body, err)
	}
	return res.StatusCode, l, apiErr{res.StatusCode, e.Error.Type, e.Error.Code, e.Error.Param, e.Error.Message}
}

func ids(t *testing.T, l eventList) []string {
	t.Helper()
	out := []string{}
	for _, raw := range l.Data {
		out = append(out, rawFields(t, raw)["id"].(string))
	}
	return out
}

func TestListEventsFilters(t *testing.T) {
	clk := newClock()
	s, base := start(t, fake.WithClock(clk.Now))
	up, down := newReceiver(t, http.StatusOK), newReceiver(t, http.StatusInternalServerError)
	s.Seed(keyA, fake.Endpoint{URL: up.URL, EnabledEvents: []string{"invoice.paid", "charge.failed"}})
	s.Seed(keyA, fake.Endpoint{URL: down.URL, EnabledEvents: []string{"invoice.created"}})
	var e []string
	for i, typ := range []string{"invoice.paid", "invoice.created", "charge.failed", "invoice.paid", "customer.created"} {
		if i == 3 {
			up.answer(http.StatusInternalServerError) // e3 fails, e0 and e2 were delivered
		}
		e = append(e, s.Emit(keyA, typ, nil).ID)
		clk.Add(time.Second)
	}
	s.Emit(keyB, "invoice.paid", nil)
	t0 := newClock().Now().Unix()

	cases := []struct {
		query, reason string
		want          []string
	}{
		{"", "newest first, every event of the account, default limit 10", []string{e[4], e[3], e[2], e[1], e[0]}},
		{"type=invoice.paid", "one name", []string{e[3], e[0]}},
		{"type=invoice.*", "a group with *", []string{e[3], e[1], e[0]}},
		{"types[0]=charge.failed&types[1]=customer.created", "types as stripe-go encodes them", []string{e[4], e[2]}},
		{"types[]=invoice.created", "types as curl users send them", []string{e[1]}},
		{fmt.Sprintf("created=%d", t0+2), "created exactly", []string{e[2]}},
		{fmt.Sprintf("created[gte]=%d", t0+3), "created[gte] includes the second", []string{e[4], e[3]}},
		{fmt.Sprintf("created[gt]=%d&created[lte]=%d", t0+1, t0+3), "a range", []string{e[3], e[2]}},
		{fmt.Sprintf("created[lt]=%d", t0+1), "created[lt]", []string{e[0]}},
		{"delivery_success=false", "pending for some endpoint (e1, e3), not e4 which no endpoint wanted", []string{e[3], e[1]}},
		{"delivery_success=true", "delivered to every endpoint, or to none", []string{e[4], e[2], e[0]}},
		{fmt.Sprintf("delivery_success=false&types[0]=invoice.paid&created[gte]=%d", t0), "combined as the client sends it", []string{e[3]}},
	}
	for _, tc := range cases {
		t.Run(tc.query, func(t *testing.T) {
			status, l, ae := getEvents(t, base, keyA, tc.query)
			if status != http.StatusOK {
				t.Fatalf("GET /v1/events?%s = %d %+v", tc.query, status, ae)
			}
			if diff := cmp.Diff(tc.want, ids(t, l)); diff != "" {
				t.Errorf("ids (-want +got):\n%s\nreason: %s", diff, tc.reason)
			}
			if l.Object != "list" || l.URL != "/v1/events" || l.HasMore {
				t.Errorf("list envelope = %q %q has_more=%v", l.Object, l.URL, l.HasMore)
			}
		})
	}

	// The event object as Stripe renders it.
	_, l, _ := getEvents(t, base, keyA, "limit=1&type=invoice.paid")
	got := rawFields(t, l.Data[0])
	want := map[string]any{
		"id": e[3], "object": "event", "api_version": "2023-10-16", "created": float64(t0 + 3),
		"data": map[string]any{"object": map[string]any{}}, "livemode": false, "pending_webhooks": float64(1),
		"request": map[string]any{"id": nil, "idempotency_key": nil}, "type": "invoice.paid",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("event object (-want +got):\n%s", diff)
	}
}

func TestListEventsErrors(t *testing.T) {
	s, base := start(t)
	ev := s.Emit(keyA, "invoice.paid", nil)
	var many []string
	for i := range 21 {
		many = append(many, fmt.Sprintf("types[%d]=invoice.t%d", i, i))
	}
	var twenty []string
	for i := range 20 {
		twenty = append(twenty, fmt.Sprintf("types[%d]=invoice.t%d", i, i))
	}
	cases := []struct {
		query, reason string
		want          apiErr // Msg compared only when set
	}{
		{strings.Join(many, "&"), "types holds at most 20 names", apiErr{Status: 400, Type: "invalid_request_error", Param: "types"}},
		{"type=invoice.paid&types[0]=invoice.paid", "type or types, not both", apiErr{Status: 400, Type: "invalid_request_error", Param: "types", Msg: "You may pass either `type` or `types`, but not both."}},
		{"limit=0", "limit is 1-100", apiErr{Status: 400, Type: "invalid_request_error", Param: "limit", Msg: "This value must be greater than or equal to 1."}},
		{"limit=101", "limit is 1-100", apiErr{Status: 400, Type: "invalid_request_error", Param: "limit", Msg: "This value must be less than or equal to 100."}},
		{"limit=ten", "limit is an integer", apiErr{Status: 400, Type: "invalid_request_error", Code: "parameter_invalid_integer", Param: "limit"}},
		{"starting_after=evt_unknown", "a cursor must name an event", apiErr{Status: 400, Type: "invalid_request_error", Code: "resource_missing", Param: "starting_after", Msg: "No such event: 'evt_unknown'"}},
		{"ending_before=evt_unknown", "a cursor must name an event", apiErr{Status: 400, Type: "invalid_request_error", Code: "resource_missing", Param: "ending_before"}},
		{"starting_after=" + ev.ID + "&ending_before=" + ev.ID, "one cursor at a time", apiErr{Status: 400, Type: "invalid_request_error"}},
		{"created[since]=1", "created takes gt, gte, lt, lte", apiErr{Status: 400, Type: "invalid_request_error", Code: "parameter_unknown", Param: "created[since]"}},
		{"created[gte]=yesterday", "created is an integer", apiErr{Status: 400, Type: "invalid_request_error", Code: "parameter_invalid_integer", Param: "created[gte]"}},
		{"delivery_success=maybe", "a boolean", apiErr{Status: 400, Type: "invalid_request_error", Param: "delivery_success"}},
		{"status=failed", "unknown parameter", apiErr{Status: 400, Type: "invalid_request_error", Code: "parameter_unknown", Param: "status"}},
	}
	for _, tc := range cases {
		t.Run(tc.query, func(t *testing.T) {
			_, _, got := getEvents(t, base, keyA, tc.query)
			if tc.want.Msg == "" {
				got.Msg = ""
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("error (-want +got):\n%s\nreason: %s", diff, tc.reason)
			}
		})
	}
	if status, _, ae := getEvents(t, base, keyA, strings.Join(twenty, "&")); status != http.StatusOK {
		t.Errorf("20 types = %d %+v, want 200", status, ae)
	}
}

func TestListEventsPaging(t *testing.T) {
	clk := newClock()
	s, base := start(t, fake.WithClock(clk.Now))
	var newestFirst []string
	for i := range 25 {
		newestFirst = append([]string{s.Emit(keyA, "invoice.paid", nil).ID}, newestFirst...)
		if i%3 == 0 { // several events in one second: ties keep creation order
			clk.Add(time.Second)
		}
	}
	var got []string
	after := ""
	for pages := 0; ; pages++ {
		q := "limit=10"
		if after != "" {
			q += "&starting_after=" + after
		}
		_, l, ae := getEvents(t, base, keyA, q)
		if ae.Status != 0 && ae.Status != 200 {
			t.Fatalf("page %d: %+v", pages, ae)
		}
		page := ids(t, l)
		got = append(got, page...)
		if !l.HasMore {
			if pages != 2 || len(page) != 5 {
				t.Errorf("last page is page %d with %d events, want page 2 with 5", pages, len(page))
			}
			break
		}
		after = page[len(page)-1]
	}
	if diff := cmp.Diff(newestFirst, got); diff != "" {
		t.Errorf("starting_after paging (-want +got):\n%s", diff)
	}
	_, l, _ := getEvents(t, base, keyA, "limit=3&ending_before="+newestFirst[10])
	if diff := cmp.Diff(newestFirst[7:10], ids(t, l)); diff != "" || !l.HasMore {
		t.Errorf("ending_before (has_more %v) (-want +got):\n%s", l.HasMore, diff)
	}
	// The stripe-go iterator follows the same cursors.
	sc := newClient(base, keyA, nil)
	it := sc.Events.List(&stripe.EventListParams{ListParams: stripe.ListParams{Limit: stripe.Int64(7)}, Types: stripe.StringSlice([]string{"invoice.paid"})})
	var viaGo []string
	for it.Next() {
		viaGo = append(viaGo, it.Event().ID)
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(newestFirst, viaGo); diff != "" {
		t.Errorf("stripe-go iterator (-want +got):\n%s", diff)
	}
}

func TestEventsAreGoneAfterThirtyDays(t *testing.T) {
	clk := newClock()
	s, base := start(t, fake.WithClock(clk.Now))
	old := s.Emit(keyA, "invoice.paid", nil)
	clk.Add(24 * time.Hour)
	recent := s.Emit(keyA, "invoice.paid", nil)
	sc := newClient(base, keyA, nil)

	clk.Add(29 * 24 * time.Hour) // old is exactly 30 days old: still kept
	if _, l, _ := getEvents(t, base, keyA, ""); len(l.Data) != 2 {
		t.Errorf("at 30 days: %d events listed, want 2", len(l.Data))
	}
	clk.Add(time.Second)
	_, l, _ := getEvents(t, base, keyA, "")
	if diff := cmp.Diff([]string{recent.ID}, ids(t, l)); diff != "" {
		t.Errorf("past 30 days (-want +got):\n%s", diff)
	}
	_, err := sc.Events.Get(old.ID, nil)
	if diff := cmp.Diff(apiErr{404, "invalid_request_error", "resource_missing", "id", "No such event: '" + old.ID + "'"}, toAPIErr(t, err)); diff != "" {
		t.Errorf("GET /v1/events/{old} (-want +got):\n%s", diff)
	}
	if got, err := sc.Events.Get(recent.ID, nil); err != nil || got.ID != recent.ID {
		t.Errorf("GET /v1/events/{recent} = %v, %v", got, err)
	}
	if _, _, ae := getEvents(t, base, keyA, "starting_after="+old.ID); ae.Code != "resource_missing" {
		t.Errorf("starting_after an expired event = %+v, want resource_missing", ae)
	}
	if n := len(s.Events(keyA)); n != 2 {
		t.Errorf("Events (the log) holds %d, want both: only the API forgets", n)
	}
}

func TestEventRoutesMeetFaultsAndTheMeter(t *testing.T) {
	clk := newClock()
	m := fakeapi.NewMeter(fakeapi.MeterOptions{Rate: 1, Burst: 1, Now: clk.Now})
	s, base := start(t, fake.WithClock(clk.Now), fake.WithMeter(m))
	ev := s.Emit(keyA, "invoice.paid", nil)
	remove := s.Inject(fake.Fault{PathPrefix: "/v1/events", Status: http.StatusTooManyRequests, Code: "rate_limit", RetryAfter: 3 * time.Second, Times: 1})
	defer remove()
	sc := newClient(base, keyA, nil)

	_, err := sc.Events.Get(ev.ID, nil)
	var se *stripe.Error
	if !errors.As(err, &se) || se.HTTPStatusCode != 429 || se.LastResponse.Header.Get("Retry-After") != "3" {
		t.Errorf("with a fault on /v1/events: %v, want the injected 429 with Retry-After 3", err)
	}
	clk.Add(time.Second)
	if _, err := sc.Events.Get(ev.ID, nil); err != nil {
		t.Errorf("after the fault: %v", err)
	}
	if _, err := sc.Events.Get(ev.ID, nil); toAPIErr(t, err).Code != "rate_limit" {
		t.Errorf("beyond the meter's rate: %v, want 429 rate_limit", err)
	}
	var routes []string
	for _, c := range m.Counts() {
		routes = append(routes, c.Method+" "+c.Pattern)
	}
	if diff := cmp.Diff([]string{"GET /v1/events/{id}"}, routes); diff != "" {
		t.Errorf("meter routes (-want +got):\n%s", diff)
	}
}
