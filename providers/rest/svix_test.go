package rest_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden/providers"
	"github.com/hookwarden/hookwarden/providers/rest"
	"github.com/hookwarden/hookwarden/providers/rest/fakes/svix"
)

func svixClient(t *testing.T) (*svix.Server, *rest.Client) {
	t.Helper()
	srv := svix.New()
	srv.AddApp("sk-test", "app_orders")
	base, stop := srv.Start()
	t.Cleanup(stop)
	return srv, newClient(t, "svix-endpoints", base, map[string]string{"app": "app_orders"}, "sk-test")
}

func TestSvixProfile(t *testing.T) {
	ctx := context.Background()
	srv, c := svixClient(t)
	d := providers.Desired{URL: "https://hooks.example.com/svix", Events: []string{"*"}, Owner: owner}
	reg, err := c.Create(ctx, d, "create-key-1")
	if err != nil {
		t.Fatal(err)
	}
	eps := srv.Endpoints("sk-test", "app_orders")
	if len(eps) != 1 || eps[0].FilterTypes != nil || eps[0].Metadata["hookwarden_uid"] != owner.UID {
		t.Fatalf("endpoints %+v; want one for every event type (filterTypes null) with the marker in metadata", eps)
	}
	if !strings.HasPrefix(reg.Secret, "whsec_") || reg.Secret != eps[0].Secret || len(reg.Events) != 1 || reg.Events[0] != "*" {
		t.Errorf("created %+v; want Svix's secret and events [*]", reg)
	}
	// The create carries an Idempotency-Key: a retried create does not make a second endpoint.
	if again, err := c.Create(ctx, d, "create-key-1"); err != nil || again.ID != reg.ID || len(srv.Endpoints("sk-test", "app_orders")) != 1 {
		t.Errorf("replayed create = %+v, %v", again, err)
	}
	d.Events = []string{"invoice.paid"}
	d.Disabled = true
	if u, err := c.Update(ctx, reg.ID, d); err != nil || !u.Disabled || len(u.Events) != 1 || u.Events[0] != "invoice.paid" {
		t.Errorf("Update = %+v, %v", u, err)
	}
}

func TestSvixProfilePagesByIterator(t *testing.T) {
	srv, c := svixClient(t)
	for range 501 {
		srv.Seed("sk-test", "app_orders", svix.Endpoint{URL: "https://seeded.example.com"})
	}
	regs, err := c.List(context.Background())
	if err != nil || len(regs) != 501 {
		t.Fatalf("List = %d, %v; want 501 over three pages", len(regs), err)
	}
}

func TestSvixProfileVerifiesDeliveries(t *testing.T) {
	_, c := svixClient(t)
	v, err := rest.NewVerifierFromSpec(c.VerifierSpec())
	if err != nil {
		t.Fatal(err)
	}
	// As Svix signs: base64 HMAC-SHA256 of "{svix-id}.{svix-timestamp}.{body}" keyed with the
	// base64-decoded secret after whsec_.
	key := []byte("0123456789abcdef0123456789abcdef")
	secret := "whsec_" + base64.StdEncoding.EncodeToString(key)
	body := []byte(`{"type":"invoice.paid"}`)
	now := time.Unix(1_700_000_000, 0)
	ts := strconv.FormatInt(now.Unix(), 10)
	m := hmac.New(sha256.New, key)
	m.Write([]byte("msg_1." + ts + "."))
	m.Write(body)
	h := http.Header{}
	h.Set("svix-id", "msg_1")
	h.Set("svix-timestamp", ts)
	h.Set("svix-signature", "v1,"+base64.StdEncoding.EncodeToString(m.Sum(nil)))
	got, err := v.Verify(providers.Delivery{Header: h, Body: body, Now: now}, [][]byte{[]byte(secret)})
	if err != nil || got.EventID != "msg_1" {
		t.Errorf("Verify = %+v, %v", got, err)
	}
}
