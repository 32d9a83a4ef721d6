package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/providers/stripe"
	stripefake "github.com/hookwarden/hookwarden/providers/stripe/fake"
)

const (
	stripeEndpoints = "/v1/webhook_endpoints"
	stripeUserAgent = "Stripe/1.0 (+https://stripe.com/docs/webhooks)"
)

// stripeProvider plays Stripe with bin/fakestripe: one account per API key, created on first
// use.
type stripeProvider struct{ f fakeServer }

var _ provider = (*stripeProvider)(nil)

func newStripeProvider() *stripeProvider {
	return &stripeProvider{fakeServer{kind: hookv1.ProviderStripe, title: "Stripe", binary: "fakestripe",
		credentialName: "API key", credentialPrefix: "sk_test_demo_"}}
}

func (p *stripeProvider) fake() *fakeServer { return &p.f }

// grant has nothing to do: the fake opens an account for an API key on first use.
func (p *stripeProvider) grant(context.Context) (string, error) { return "", nil }

func (p *stripeProvider) registrations(ctx context.Context) ([]registration, error) {
	var eps []stripefake.Endpoint
	if err := p.f.api.getJSON(ctx, "/_fake/endpoints?key="+url.QueryEscape(p.f.credential), &eps); err != nil {
		return nil, err
	}
	out := make([]registration, len(eps))
	for i, ep := range eps {
		out[i] = registration{noun: "endpoint", id: ep.ID, url: ep.URL, events: ep.EnabledEvents, secret: ep.Secret, active: ep.Status == "enabled"}
	}
	return out, nil
}

func (p *stripeProvider) columns() []string { return []string{"ENDPOINT", "URL", "EVENTS"} }

func (p *stripeProvider) row(r registration) []string {
	return []string{r.id, r.url, strings.Join(r.events, ",")}
}

func (p *stripeProvider) verify(context.Context, *demo, subRef, registration) ([]string, error) {
	return nil, nil
}

func (p *stripeProvider) calls(ctx context.Context, from int) ([]call, error) {
	var all []stripefake.Request
	if err := p.f.api.getJSON(ctx, "/_fake/requests", &all); err != nil {
		return nil, err
	}
	if from > len(all) {
		return nil, fmt.Errorf("the fake Stripe's request log shrank from %d to %d entries", from, len(all))
	}
	label := stripefake.AccountLabel(p.f.credential)
	var out []call
	for _, r := range all[from:] {
		if r.Account != label {
			continue
		}
		c := call{}
		switch {
		case r.Method == http.MethodGet && r.Path == stripeEndpoints:
			c.op, c.firstPage = opList, r.Query.Get("starting_after") == ""
		case r.Method == http.MethodPost && r.Path == stripeEndpoints:
			c.op = opCreate
		case r.Method == http.MethodPost && strings.HasPrefix(r.Path, stripeEndpoints+"/"):
			c.op = opUpdate
		case r.Method == http.MethodDelete:
			c.op = opDelete
		}
		out = append(out, c)
	}
	return out, nil
}

func (p *stripeProvider) eventTypes(spec []string) []string {
	if len(spec) == 0 || (len(spec) == 1 && spec[0] == "*") {
		return []string{"invoice.paid"}
	}
	return spec
}

func (p *stripeProvider) eventID(sub string, n int, _ *rand.Rand) string {
	return fmt.Sprintf("evt_demo_%s_%02d", sub, n)
}

// event is a Stripe event as Stripe would send it; the event id is in the body.
func (p *stripeProvider) event(id, typ string, s subRef) delivery {
	obj := "in_demo_" + strings.TrimPrefix(id, "evt_demo_")
	b, _ := json.Marshal(map[string]any{
		"id": id, "object": "event", "api_version": "2023-10-16", "created": time.Now().Unix(), "livemode": false,
		"pending_webhooks": 1, "type": typ,
		"request": map[string]any{"id": nil, "idempotency_key": nil},
		"data":    map[string]any{"object": map[string]any{"id": obj, "object": "demo", "description": "hookwarden demo (" + s.name + ")"}},
	})
	return delivery{id: id, typ: typ, body: b}
}

func (p *stripeProvider) probe() delivery {
	return delivery{typ: "demo.route_probe", body: []byte(`{"object":"event","type":"demo.route_probe"}`)}
}

// sign sets a Stripe-Signature made with secret at the current time: a redelivered copy
// carries a fresh t, as Stripe's retries do.
func (p *stripeProvider) sign(h http.Header, d delivery, secret string, _ *target) {
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("User-Agent", stripeUserAgent)
	h.Set(stripe.SignatureHeader, stripe.SignHeader(secret, time.Now(), d.body))
}

// emit creates n events of s's types on the demo's account at the fake Stripe, which sends each
// to every enabled endpoint subscribed to its type: r only (the samples' types do not overlap).
func (p *stripeProvider) emit(ctx context.Context, s subRef, r registration, n int) ([]string, error) {
	types := p.eventTypes(s.events)
	var ids []string
	for i := range n {
		typ := types[i%len(types)]
		obj := map[string]any{"id": fmt.Sprintf("in_missed_%s_%02d", s.name, i), "object": "demo", "description": "hookwarden demo, missed (" + s.name + ")"}
		var ev stripefake.Event
		if err := p.f.api.postJSON(ctx, "/_fake/events?key="+url.QueryEscape(p.f.credential), map[string]any{"type": typ, "object": obj}, &ev); err != nil {
			return nil, err
		}
		if len(ev.Deliveries) != 1 || ev.Deliveries[0].Endpoint != r.id {
			return nil, fmt.Errorf("the fake Stripe sent event %s (%s) to %d endpoints, want only %s's endpoint %s", ev.ID, typ, len(ev.Deliveries), s.name, r.id)
		}
		ids = append(ids, ev.ID)
	}
	return ids, nil
}

func (p *stripeProvider) failedAttempts(ctx context.Context, _ subRef, r registration, ids []string) (int, error) {
	var all []stripefake.Attempt
	if err := p.f.api.getJSON(ctx, "/_fake/attempts", &all); err != nil {
		return 0, err
	}
	n := 0
	for _, a := range all {
		if a.Endpoint == r.id && !a.OK && slices.Contains(ids, a.Event) {
			n++
		}
	}
	return n, nil
}
