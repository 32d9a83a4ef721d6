package rest_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"
	"testing"

	"github.com/hookwarden/hookwarden/providers"
	"github.com/hookwarden/hookwarden/providers/rest"
	"github.com/hookwarden/hookwarden/providers/rest/fakes/pagerduty"
)

func pagerdutyClient(t *testing.T) (*pagerduty.Server, providers.Client, *rest.Client) {
	t.Helper()
	srv := pagerduty.New()
	base, stop := srv.Start()
	t.Cleanup(stop)
	settings := sampleProfile(t, "pagerduty-webhook-subscriptions")
	pc, err := rest.Factory().New(providers.Config{APIURL: base, Settings: settings, Credential: "pd-key"})
	if err != nil {
		t.Fatal(err)
	}
	return srv, pc, newClient(t, "pagerduty-webhook-subscriptions", base, nil, "pd-key")
}

func TestPagerDutyProfile(t *testing.T) {
	ctx := context.Background()
	srv, pc, c := pagerdutyClient(t)
	caps := c.Capabilities()
	if caps.Secret != providers.SecretReturnedOnCreate || caps.Recreate != providers.FieldURL || !caps.Markers {
		t.Fatalf("capabilities = %+v; want the secret on create only, a URL change that recreates, markers", caps)
	}
	d := providers.Desired{URL: "https://hooks.example.com/pd", Events: []string{"incident.triggered"}, Description: "paging", Owner: owner}
	reg, err := c.Create(ctx, d, "k1")
	if err != nil {
		t.Fatal(err)
	}
	subs := srv.Subscriptions("pd-key")
	if len(subs) != 1 || reg.Secret == "" || reg.Secret != subs[0].Secret {
		t.Fatalf("create: secret %q, subscriptions %+v; want PagerDuty's secret from the create response", reg.Secret, subs)
	}
	if subs[0].FilterType != "account_reference" || !strings.HasSuffix(subs[0].Description, "[hookwarden:prod/shop/orders/0b7c-uid]") {
		t.Errorf("stored %+v; want an account filter and the marker after the description", subs[0])
	}
	listed, err := c.List(ctx)
	if err != nil || len(listed) != 1 || listed[0].Secret != "" || listed[0].Owner != owner || listed[0].Description != "paging" {
		t.Fatalf("List = %+v, %v; want no secret (null on read), the marker decoded, the description without it", listed, err)
	}

	d.Events = []string{"incident.triggered", "incident.resolved"}
	d.Disabled = true
	if u, err := c.Update(ctx, reg.ID, d); err != nil || !u.Disabled || len(u.Events) != 2 {
		t.Fatalf("Update = %+v, %v", u, err)
	}
	if s := srv.Subscriptions("pd-key")[0]; s.Active || s.Secret != reg.Secret {
		t.Errorf("after update %+v; want inactive, same secret", s)
	}

	// The delivery URL cannot change in place: refused before anything is sent.
	before := len(srv.Requests())
	d.URL = "https://hooks.example.com/pd2"
	_, err = c.Update(ctx, reg.ID, d)
	if providers.KindOf(err) != providers.Permanent || !strings.Contains(err.Error(), "recreated") {
		t.Errorf("URL update = %v; want Permanent asking for a recreate", err)
	}
	for _, r := range srv.Requests()[before:] {
		if r.Method == http.MethodPut {
			t.Errorf("a PUT was sent for an immutable URL")
		}
	}

	if err := pc.(providers.Pinger).Ping(ctx, reg.ID); err != nil || srv.Subscriptions("pd-key")[0].Pings != 1 {
		t.Errorf("Ping = %v", err)
	}
	if _, ok := providers.Client(c).(providers.Pinger); ok {
		t.Error("rest.New's Client pings; only the factory's client for a profile with ping should")
	}
}

func TestPagerDutyProfilePagesByOffset(t *testing.T) {
	srv, _, c := pagerdutyClient(t)
	for range 230 {
		srv.Seed("pd-key", pagerduty.Subscription{URL: "https://seeded.example.com", Events: []string{"incident.triggered"}})
	}
	regs, err := c.List(context.Background())
	if err != nil || len(regs) != 230 {
		t.Fatalf("List = %d, %v; want 230", len(regs), err)
	}
}

func TestPagerDutyProfileVerifiesDeliveries(t *testing.T) {
	_, _, c := pagerdutyClient(t)
	v, err := rest.NewVerifierFromSpec(c.VerifierSpec())
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"event":{"id":"01DEN","event_type":"incident.triggered"}}`)
	sig := func(secret string) string {
		m := hmac.New(sha256.New, []byte(secret))
		m.Write(body)
		return "v1=" + hex.EncodeToString(m.Sum(nil))
	}
	// Two signatures during PagerDuty's rotation; either secret verifies.
	h := http.Header{}
	h.Set("X-PagerDuty-Signature", sig("old-secret")+","+sig("new-secret"))
	h.Set("X-Webhook-Id", "wh-1")
	got, err := v.Verify(providers.Delivery{Header: h, Body: body}, [][]byte{[]byte("new-secret")})
	if err != nil || got.EventID != "wh-1" {
		t.Errorf("Verify = %+v, %v", got, err)
	}
}
