package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden/providers"
	"github.com/hookwarden/hookwarden/providers/stripe"
)

// TestGeneratedDeliveriesVerify checks that pooled, inline and re-signed deliveries are what
// the receiver's verifier accepts, with distinct Stripe-shaped ids.
func TestGeneratedDeliveriesVerify(t *testing.T) {
	g, err := newGenerator(secret, "127.0.0.1:1", 1024, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(g.tmpl) < 1024 || len(g.tmpl) > 1200 || !json.Valid(g.tmpl) {
		t.Fatalf("template: %d bytes, valid JSON %v", len(g.tmpl), json.Valid(g.tmpl))
	}
	p := newPool(g, 3, false)
	defer p.close()
	v := stripe.NewVerifier()
	seen := map[string]bool{}
	var buf buffers
	check := func(it item) {
		t.Helper()
		res, err := v.Verify(providers.Delivery{Header: http.Header{stripe.SignatureHeader: {string(it.sig)}}, Body: it.body, Now: time.Now()},
			[][]byte{[]byte(secret)})
		if err != nil {
			t.Fatalf("seq %d: %v", it.seq, err)
		}
		if !strings.HasPrefix(res.EventID, "evt_") || len(res.EventID) != 28 || res.EventType != "payment_intent.succeeded" {
			t.Fatalf("verified %+v", res)
		}
		if !strings.HasSuffix(string(it.raw), "\r\n\r\n"+string(it.body)) || !strings.Contains(string(it.raw), "Stripe-Signature: "+string(it.sig)+"\r\n") {
			t.Fatalf("raw request does not carry the body and signature:\n%s", it.raw)
		}
		seen[res.EventID] = true
	}
	for range 5 { // 3 pooled, then 2 signed inline
		check(p.take(&buf))
	}
	if len(seen) != 5 || p.inline.Load() != 2 {
		t.Fatalf("%d distinct ids, %d inline", len(seen), p.inline.Load())
	}
	check(g.resign(&buf, p.first)) // a retry: same id, fresh signature
	if len(seen) != 5 {
		t.Fatalf("a re-signed delivery changed the event id")
	}
}
