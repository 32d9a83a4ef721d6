package rest_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden/providers"
	"github.com/hookwarden/hookwarden/providers/rest"
	"github.com/hookwarden/hookwarden/providers/rest/fakes/zendesk"
)

func zendeskClient(t *testing.T) (*zendesk.Server, *rest.Client) {
	t.Helper()
	srv := zendesk.New()
	base, stop := srv.Start()
	t.Cleanup(stop)
	return srv, newClient(t, "zendesk-webhooks", base+"/api/v2", map[string]string{"subdomain": "acme", "email": "ops@acme.example"}, "zd-api-token")
}

func TestZendeskProfile(t *testing.T) {
	ctx := context.Background()
	srv, c := zendeskClient(t)
	if caps := c.Capabilities(); caps.Secret != providers.SecretFetched || !caps.Markers || !caps.Has(providers.FieldDisabled) {
		t.Fatalf("capabilities = %+v", caps)
	}
	d := providers.Desired{URL: "https://hooks.example.com/zd", Events: []string{"zen:event-type:ticket.created"}, Owner: owner}
	reg, err := c.Create(ctx, d, "k1")
	if err != nil {
		t.Fatal(err)
	}
	hooks := srv.Webhooks("ops@acme.example")
	if len(hooks) != 1 {
		t.Fatalf("%d webhooks; want 1", len(hooks))
	}
	if reg.Secret == "" || reg.Secret != hooks[0].Secret {
		t.Errorf("Create returned secret %q; want the one Zendesk generated (fetched from signing_secret)", reg.Secret)
	}
	if got := hooks[0].CustomHeaders["X-Hookwarden-Owner"]; got != "hookwarden:prod/shop/orders/0b7c-uid" {
		t.Errorf("marker header = %q", got)
	}

	// PUT answers 204 without a body: the update is read back.
	d.Disabled = true
	d.Events = []string{"zen:event-type:ticket.created", "zen:event-type:user.created"}
	u, err := c.Update(ctx, reg.ID, d)
	if err != nil {
		t.Fatal(err)
	}
	if !u.Disabled || len(u.Events) != 2 || u.Owner != owner || srv.Webhooks("ops@acme.example")[0].Status != "inactive" {
		t.Errorf("after update: %+v; want disabled (status inactive), two events, the marker kept", u)
	}

	// A webhook edited to another request format is reported as misconfigured.
	srv.Seed("ops@acme.example", zendesk.Webhook{Endpoint: "https://hooks.example.com/xml", RequestFormat: "xml", HTTPMethod: "POST", Subscriptions: []string{"conditional_ticket_events"}})
	regs, err := c.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range regs {
		if r.URL == "https://hooks.example.com/xml" && (len(r.Misconfigured) != 1 || r.Misconfigured[0] != "request_format") {
			t.Errorf("an xml webhook reports misconfigured %v; want [request_format]", r.Misconfigured)
		}
	}

	secret, err := c.FetchSecret(ctx, reg.ID)
	if err != nil || secret != reg.Secret {
		t.Errorf("FetchSecret = %q, %v", secret, err)
	}
}

func TestZendeskProfilePagesByCursor(t *testing.T) {
	srv, c := zendeskClient(t)
	for range 250 {
		srv.Seed("ops@acme.example", zendesk.Webhook{Endpoint: "https://seeded.example.com", Subscriptions: []string{"zen:event-type:ticket.created"}})
	}
	regs, err := c.List(context.Background())
	if err != nil || len(regs) != 250 {
		t.Fatalf("List = %d registrations, %v; want 250 over three pages", len(regs), err)
	}
}

func TestZendeskProfileVerifiesDeliveries(t *testing.T) {
	_, c := zendeskClient(t)
	v, err := rest.NewVerifierFromSpec(c.VerifierSpec())
	if err != nil {
		t.Fatal(err)
	}
	// As Zendesk documents: base64(HMACSHA256(TIMESTAMP + BODY)), the timestamp in RFC 3339.
	body := []byte(`{"id":"01HZX","type":"zen:event-type:ticket.created"}`)
	ts := "2021-03-25T05:09:27Z"
	m := hmac.New(sha256.New, []byte("zd-signing-secret"))
	m.Write([]byte(ts))
	m.Write(body)
	h := http.Header{}
	h.Set("X-Zendesk-Webhook-Signature", base64.StdEncoding.EncodeToString(m.Sum(nil)))
	h.Set("X-Zendesk-Webhook-Signature-Timestamp", ts)
	got, err := v.Verify(providers.Delivery{Header: h, Body: body, Now: time.Now()}, [][]byte{[]byte("zd-signing-secret")})
	if err != nil || got.EventID != "01HZX" {
		t.Errorf("Verify = %+v, %v; want id 01HZX from the body", got, err)
	}
}
