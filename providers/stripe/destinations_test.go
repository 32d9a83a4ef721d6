package stripe_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden/internal/fakeapi"
	"github.com/hookwarden/hookwarden/providers"
	"github.com/hookwarden/hookwarden/providers/providerstest"
	"github.com/hookwarden/hookwarden/providers/stripe"
	"github.com/hookwarden/hookwarden/providers/stripe/fake"
)

var v2Owner = providers.Owner{Cluster: "prod", Namespace: "shop", Name: "orders", UID: "uid-1"}

// v2Env is the fake Stripe behind the v2 contract check, and a client of the given settings.
type v2Env struct {
	srv      *fake.Server
	contract *providerstest.Contract
	base     string
}

func newV2Env(t *testing.T, opts ...fake.Option) *v2Env {
	t.Helper()
	srv := fake.New(opts...)
	contract := newV2Contract(srv)
	base, stop := fakeapi.Start(contract)
	t.Cleanup(stop)
	t.Cleanup(func() { contract.Result(t) })
	return &v2Env{srv: srv, contract: contract, base: base}
}

func (e *v2Env) client(t *testing.T, settings string) providers.Client {
	t.Helper()
	c, err := stripe.Factory().New(providers.Config{APIURL: e.base, Credential: testKey, Settings: []byte(settings), Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

const (
	thinSettings     = `{"apiVersion":"v2","eventPayload":"thin"}`
	snapshotSettings = `{"apiVersion":"v2","eventPayload":"snapshot"}`
)

func TestDestinationsLifeCycle(t *testing.T) {
	ctx := context.Background()
	e := newV2Env(t)
	c := e.client(t, thinSettings)
	caps := c.Capabilities()
	if caps.Variant != stripe.VariantThin || !caps.Markers || caps.Secret != providers.SecretReturnedOnCreate || caps.ReplayableCreate || caps.Recovery.Mode != providers.RecoveryNone {
		t.Fatalf("capabilities = %+v", caps)
	}
	d := providers.Desired{URL: "https://hooks.example.com/v2", Events: []string{"v1.billing.meter.error_report_triggered", "v2.core.event_destination.ping"}, Description: "meters", Owner: v2Owner}
	reg, err := c.Create(ctx, d, "create-key-1")
	if err != nil {
		t.Fatal(err)
	}
	stored := e.srv.Destinations(testKey)
	if len(stored) != 1 || reg.Secret == "" || reg.Secret != stored[0].Secret || reg.URL != d.URL || reg.Variant != stripe.VariantThin || reg.Owner != v2Owner || reg.CreateKey != "create-key-1" {
		t.Fatalf("create = %+v; stored %+v; want the secret from the create answer, the URL, the marker", reg, stored)
	}
	last := e.srv.Requests()[len(e.srv.Requests())-1]
	if last.IdempotencyKey != "create-key-1" || !bytes.Contains(last.JSON, []byte(`"webhook_endpoint.signing_secret"`)) || bytes.Contains(last.JSON, []byte("snapshot_api_version")) {
		t.Errorf("create sent %s with key %q; want the secret included, the key, no snapshot version for thin", last.JSON, last.IdempotencyKey)
	}

	// Made elsewhere: a Workbench destination (listed, unmarked) and an EventBridge one (not a
	// webhook: left out).
	e.srv.SeedDestination(testKey, fake.Destination{URL: "https://other.example.com", EnabledEvents: []string{"v1.billing.meter.no_meter_found"}})
	e.srv.SeedDestination(testKey, fake.Destination{Type: "amazon_eventbridge", AWSAccountID: "123456789012", EnabledEvents: []string{"v1.billing.meter.no_meter_found"}})
	regs, err := c.List(ctx)
	if err != nil || len(regs) != 2 {
		t.Fatalf("List = %+v, %v; want ours and the Workbench one", regs, err)
	}
	for _, r := range regs {
		if r.Unfit != "" || r.Secret != "" || r.URL == "" || r.Variant != stripe.VariantThin {
			t.Errorf("listed %+v; want fit, with its URL, no secret, thin", r)
		}
	}

	d.Events, d.Description, d.Disabled = []string{"v1.billing.meter.no_meter_found"}, "", true
	u, err := c.Update(ctx, reg.ID, d)
	if err != nil || !u.Disabled || u.URL != d.URL || u.Description != "" || !slices.Equal(u.Events, d.Events) || u.Owner != v2Owner {
		t.Fatalf("Update = %+v, %v", u, err)
	}
	if got := e.srv.Destinations(testKey); got[len(got)-1].Status != "disabled" || got[len(got)-1].Description != "" {
		t.Errorf("stored after update %+v", got[len(got)-1])
	}
	d.Disabled = false
	if u, err := c.Update(ctx, reg.ID, d); err != nil || u.Disabled {
		t.Errorf("enable by Update = %+v, %v", u, err)
	}
	if err := c.Delete(ctx, reg.ID); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, reg.ID); err != nil {
		t.Errorf("second Delete = %v; want nil", err)
	}
	seen := e.contract.Result(t)
	for _, want := range []string{"create 200", "list 200", "update 200", "disable 200", "enable 200", "delete 200", "delete 404"} {
		if seen[want] == 0 {
			t.Errorf("no %q exchange was checked (checked %v)", want, seen)
		}
	}
}

// A v1 endpoint and a v2 destination on one URL are two registrations: each client lists its
// own, and where Stripe shows v1 endpoints among the destinations the variant tells them apart.
func TestV1AndV2OnOneURL(t *testing.T) {
	ctx := context.Background()
	for _, v1InV2 := range []bool{false, true} {
		t.Run(fmt.Sprintf("v1 endpoints in the v2 list: %v", v1InV2), func(t *testing.T) {
			var opts []fake.Option
			if v1InV2 {
				opts = append(opts, fake.WithV1InV2List())
			}
			e := newV2Env(t, opts...)
			v1, v2 := e.client(t, ""), e.client(t, thinSettings)
			url := "https://hooks.example.com/stripe"
			if _, err := v1.Create(ctx, providers.Desired{URL: url, Events: []string{"invoice.paid"}, Owner: v2Owner}, "k-v1"); err != nil {
				t.Fatal(err)
			}
			if _, err := v2.Create(ctx, providers.Desired{URL: url, Events: []string{"v1.billing.meter.no_meter_found"}, Owner: v2Owner}, "k-v2"); err != nil {
				t.Fatal(err)
			}
			l1, err := v1.List(ctx)
			if err != nil || len(l1) != 1 || l1[0].Variant != stripe.VariantV1 {
				t.Fatalf("v1 List = %+v, %v; want the endpoint alone", l1, err)
			}
			l2, err := v2.List(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var variants []string
			for _, r := range l2 {
				variants = append(variants, r.Variant)
			}
			want := []string{stripe.VariantThin}
			if v1InV2 {
				want = []string{stripe.VariantThin, stripe.VariantV1}
			}
			if !slices.Equal(variants, want) {
				t.Errorf("v2 List variants = %q; want %q: only the destination is v2's", variants, want)
			}
		})
	}
}

func TestDestinationsSnapshotAndPages(t *testing.T) {
	ctx := context.Background()
	e := newV2Env(t, fake.WithPageSize(3), fake.WithMaxEndpoints(100))
	c := e.client(t, snapshotSettings)
	reg, err := c.Create(ctx, providers.Desired{URL: "https://hooks.example.com/snap", Events: []string{"invoice.paid"}, Owner: v2Owner}, "k1")
	if err != nil || reg.Variant != stripe.VariantSnapshot {
		t.Fatalf("Create = %+v, %v", reg, err)
	}
	if d := e.srv.Destinations(testKey)[0]; d.SnapshotAPIVersion == "" || d.EventPayload != "snapshot" {
		t.Errorf("stored %+v; want a snapshot destination pinned to an API version", d)
	}
	for i := range 7 {
		e.srv.SeedDestination(testKey, fake.Destination{URL: fmt.Sprintf("https://other.example.com/%d", i), EnabledEvents: []string{"invoice.paid"}, EventPayload: "snapshot"})
	}
	regs, err := c.List(ctx)
	if err != nil || len(regs) != 8 {
		t.Fatalf("List over pages of 3 = %d, %v; want 8", len(regs), err)
	}
	pages := 0
	for _, r := range e.srv.Requests() {
		if r.Method == http.MethodGet && r.Path == "/v2/core/event_destinations" {
			pages++
			if r.Query.Get("include[0]") != "webhook_endpoint.url" {
				t.Errorf("a page without include: %v", r.Query)
			}
		}
	}
	if pages != 3 {
		t.Errorf("%d pages asked; want 3", pages)
	}
}

func TestDestinationsErrors(t *testing.T) {
	ctx := context.Background()
	e := newV2Env(t, fake.WithMaxEndpoints(1))
	c := e.client(t, thinSettings)
	d := providers.Desired{URL: "https://hooks.example.com/e", Events: []string{"v1.billing.meter.no_meter_found"}, Owner: v2Owner}
	if _, err := c.Create(ctx, d, "k1"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create(ctx, d, "k2"); providers.KindOf(err) != providers.Permanent || !strings.Contains(err.Error(), "maximum of 1 event destinations") {
		t.Errorf("a create past the cap = %v", err)
	}
	e.srv.Inject(fake.Fault{Status: 429, Code: "rate_limit", RetryAfter: 2 * time.Second, Times: 1})
	if _, err := c.List(ctx); providers.KindOf(err) != providers.RateLimited || providers.RetryAfter(err) != 2*time.Second {
		t.Errorf("List under a rate limit = %v", err)
	}
	e.srv.RestrictKey(testKey)
	_, err := c.List(ctx)
	if providers.KindOf(err) != providers.Unauthorized || !strings.Contains(err.Error(), "v2 event destinations") || strings.Contains(err.Error(), testKey) {
		t.Errorf("a key without v2 access = %v; want Unauthorized naming v2, without the key", err)
	}
	if _, err := e.client(t, "").List(ctx); err != nil {
		t.Errorf("the same key on v1 = %v; want v1 unaffected", err)
	}
}

func TestStripeScopeAndFactory(t *testing.T) {
	scope := stripe.Provider().Scope
	for _, tc := range []struct {
		reason, block, settings, err string
	}{
		{"no block is v1, the account as before", "", "", ""},
		{"v1 explicitly is the same account", `{"apiVersion":"v1"}`, "", ""},
		{"v2 defaults to thin", `{"apiVersion":"v2"}`, thinSettings, ""},
		{"v2 snapshot", `{"apiVersion":"v2","eventPayload":"snapshot"}`, snapshotSettings, ""},
		{"a payload on v1 is refused", `{"eventPayload":"thin"}`, "", "for apiVersion v2"},
		{"an unknown version is refused", `{"apiVersion":"v3"}`, "", "v1 or v2"},
		{"an unknown field is refused", `{"apiVersion":"v2","payload":"thin"}`, "", "unknown field"},
	} {
		s, err := scope([]byte(tc.block), nil)
		if (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) || string(s.Settings) != tc.settings {
			t.Errorf("%s: Scope = %s, %v; want %s, %q", tc.reason, s.Settings, err, tc.settings, tc.err)
		}
	}
	for settings, want := range map[string]string{"": "*stripe.Client", thinSettings: "*stripe.Destinations"} {
		c, err := stripe.Factory().New(providers.Config{Credential: testKey, Settings: []byte(settings)})
		if err != nil || fmt.Sprintf("%T", c) != want {
			t.Errorf("Factory(%q) = %T, %v; want %s", settings, c, err, want)
		}
	}
}

// TestDestinationsRequestsPerRound records what a v2 subscription's first reconcile sends (the
// list, then the create) and what a steady resync sends (the list alone).
func TestDestinationsRequestsPerRound(t *testing.T) {
	ctx := context.Background()
	e := newV2Env(t)
	c := e.client(t, thinSettings)
	e.srv.SeedDestination(testKey, fake.Destination{URL: "https://other.example.com", EnabledEvents: []string{"v1.billing.meter.no_meter_found"}})
	round := func(create bool) []string {
		e.srv.ResetRequests()
		if _, err := c.List(ctx); err != nil {
			t.Fatal(err)
		}
		if create {
			if _, err := c.Create(ctx, providers.Desired{URL: "https://hooks.example.com/r", Events: []string{"v1.billing.meter.no_meter_found"}, Owner: v2Owner}, "k"); err != nil {
				t.Fatal(err)
			}
		}
		var out []string
		for _, r := range e.srv.Requests() {
			out = append(out, fmt.Sprintf("%s %s %d", r.Method, r.Path, r.Status))
		}
		return out
	}
	first, steady := round(true), round(false)
	if !slices.Equal(first, []string{"GET /v2/core/event_destinations 200", "POST /v2/core/event_destinations 200"}) || !slices.Equal(steady, []string{"GET /v2/core/event_destinations 200"}) {
		t.Errorf("first %v, steady %v", first, steady)
	}
	t.Logf("REPORT stripe v2 thin: first reconcile %v; steady resync %v", first, steady)
}

// TestVerifyThinEvents: a v2 thin notification is signed as v1 events are; its id is the dedupe
// key, or, for a thin event standing in for a snapshot event, the snapshot event's id.
func TestVerifyThinEvents(t *testing.T) {
	v := stripe.NewVerifier()
	now := time.Now()
	for _, tc := range []struct {
		reason, body, id, typ string
	}{
		{"a thin event", `{"id":"evt_test_65R9","object":"v2.core.event","type":"v1.billing.meter.error_report_triggered","created":"2026-12-07T09:00:00.000Z","livemode":false,"related_object":{"id":"mtr_1","type":"billing.meter","url":"/v1/billing/meters/mtr_1"}}`, "evt_test_65R9", "v1.billing.meter.error_report_triggered"},
		{"a thin event for a snapshot event", `{"id":"evt_test_65RA","object":"v2.core.event","type":"v1.customer.created","snapshot_event":"evt_1Snap","related_object":{"id":"cus_1","type":"customer","url":"/v1/customers/cus_1"}}`, "evt_1Snap", "v1.customer.created"},
		{"a v1 event keeps its id", `{"id":"evt_1V1","object":"event","type":"customer.created","snapshot_event":"evt_other"}`, "evt_1V1", "customer.created"},
	} {
		h := http.Header{}
		h.Set(stripe.SignatureHeader, stripe.SignHeader("whsec_thin", now, []byte(tc.body)))
		got, err := v.Verify(providers.Delivery{Header: h, Body: []byte(tc.body), Now: now}, [][]byte{[]byte("whsec_thin")})
		if err != nil || got.EventID != tc.id || got.EventType != tc.typ {
			t.Errorf("%s: Verify = %+v, %v; want id %s type %s", tc.reason, got, err, tc.id, tc.typ)
		}
	}
	body := []byte(`{"id":"evt_a","object":"v2.core.event","type":"x","snapshot_event":"evt_b","Snapshot_Event":"evt_c"}`)
	h := http.Header{}
	h.Set(stripe.SignatureHeader, stripe.SignHeader("whsec_thin", now, body))
	if _, err := v.Verify(providers.Delivery{Header: h, Body: body, Now: now}, [][]byte{[]byte("whsec_thin")}); err == nil || !strings.Contains(err.Error(), "snapshot_event") {
		t.Errorf("a snapshot_event given twice = %v; want ErrAmbiguous naming it", err)
	}
}

// Stripe's next_page_url is followed on Stripe's own host only.
func TestDestinationsNextPageElsewhere(t *testing.T) {
	api := newFakeAPI(t, func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"data": []any{}, "next_page_url": "https://elsewhere.example.com/v2/core/event_destinations?page=2"})
	})
	c, err := stripe.NewDestinations(providers.Config{APIURL: api.URL, Credential: testKey, Settings: []byte(thinSettings)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.List(context.Background()); err == nil || !strings.Contains(err.Error(), "elsewhere") {
		t.Errorf("List = %v; want a refusal to follow another host", err)
	}
}

// TestDestinationDeliversThinEvents: a thin event the fake sends to a destination verifies with
// the secret the create answer showed, and dedupes on its id.
func TestDestinationDeliversThinEvents(t *testing.T) {
	var got struct {
		header http.Header
		body   []byte
	}
	rv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.header = r.Header.Clone()
		got.body, _ = io.ReadAll(r.Body)
	}))
	t.Cleanup(rv.Close)
	e := newV2Env(t, fake.WithDeliveryClient(rv.Client()))
	reg, err := e.client(t, thinSettings).Create(context.Background(), providers.Desired{URL: rv.URL + "/hooks/v2", Events: []string{"v1.billing.meter.error_report_triggered"}, Owner: v2Owner}, "k")
	if err != nil {
		t.Fatal(err)
	}
	id, status, err := e.srv.DeliverThin(testKey, reg.ID, "v1.billing.meter.error_report_triggered", map[string]string{"id": "mtr_1", "type": "billing.meter", "url": "/v1/billing/meters/mtr_1"}, "")
	if err != nil || status != http.StatusOK {
		t.Fatalf("DeliverThin = %d, %v", status, err)
	}
	v, err := stripe.NewVerifier().Verify(providers.Delivery{Header: got.header, Body: got.body, Now: time.Now()}, [][]byte{[]byte(reg.Secret)})
	if err != nil || v.EventID != id || v.EventType != "v1.billing.meter.error_report_triggered" {
		t.Errorf("Verify = %+v, %v; want the thin event's id %s", v, err, id)
	}
}

// A destination disabled with status_details.disabled.reason user (in Workbench or by the API:
// the one reason Stripe's description gives a webhook destination) is a drift the plan may
// repair, not the provider's pause; any other reason, or none, is read as the provider's pause.
func TestDisabledDestinationsHealth(t *testing.T) {
	ctx := context.Background()
	e := newV2Env(t)
	c := e.client(t, thinSettings)
	reg, err := c.Create(ctx, providers.Desired{URL: "https://hooks.example.com/v2/disabled", Events: []string{"v1.billing.meter.error_report_triggered"}, Owner: v2Owner}, "k-disabled")
	if err != nil {
		t.Fatal(err)
	}
	if !e.srv.EditDestination(testKey, reg.ID, func(d *fake.Destination) { d.Status = "disabled" }) {
		t.Fatal("no destination to disable")
	}
	regs, err := c.List(ctx)
	if err != nil || len(regs) != 1 {
		t.Fatalf("List = %v, %v", regs, err)
	}
	if !regs[0].Disabled || regs[0].Health != nil {
		t.Errorf("disabled by a user: Disabled %v, Health %+v; want disabled with no provider health (a drift)", regs[0].Disabled, regs[0].Health)
	}

	for _, reason := range []string{"", "no_aws_event_source_exists"} {
		details := `null`
		if reason != "" {
			details = `{"disabled":{"reason":"` + reason + `"}}`
		}
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"data":[{"id":"ed_1","object":"v2.core.event_destination","type":"webhook_endpoint","event_payload":"thin","enabled_events":["v1.billing.meter.error_report_triggered"],"status":"disabled","status_details":%s,"metadata":{},"webhook_endpoint":{"url":"https://hooks.example.com/v2/disabled"}}],"next_page_url":null}`, details)
		}))
		c, err := stripe.Factory().New(providers.Config{APIURL: srv.URL, Credential: testKey, Settings: []byte(thinSettings), Timeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		regs, err := c.List(ctx)
		srv.Close()
		if err != nil || len(regs) != 1 {
			t.Fatalf("reason %q: List = %v, %v", reason, regs, err)
		}
		if h := regs[0].Health; !regs[0].Disabled || h == nil || h.State != providers.HealthDisabled {
			t.Errorf("reason %q: Disabled %v, Health %+v; want the provider's pause", reason, regs[0].Disabled, h)
		}
	}
}
