package main

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
)

// shippedSamples are the folders `make demo` reads.
var shippedSamples = []string{filepath.Join("..", "..", "config", "samples"), filepath.Join("..", "..", "config", "samples", "github")}

// testRewriting points the samples at test addresses.
func testRewriting() rewriting {
	return rewriting{
		apiURLs:      map[hookv1.ProviderType]string{hookv1.ProviderStripe: "http://stripe.test", hookv1.ProviderGitHub: "http://github.test"},
		sinkBase:     "http://sink.test",
		receiverBase: "http://receiver.test",
		resync:       "10s",
	}
}

// appliedSubscriptions decodes the documents of manifest as WebhookSubscriptions, by name.
func appliedSubscriptions(t *testing.T, manifest []byte) map[string]hookv1.WebhookSubscription {
	t.Helper()
	applied := map[string]hookv1.WebhookSubscription{}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(manifest)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return applied
		}
		if err != nil {
			t.Fatal(err)
		}
		var sub hookv1.WebhookSubscription
		if err := yaml.Unmarshal(doc, &sub); err != nil {
			t.Fatal(err)
		}
		applied[sub.Name] = sub
	}
}

// TestLoadSamples reads the shipped Stripe and GitHub samples as `make demo` does and checks
// what the demo learns from them and what it applies.
func TestLoadSamples(t *testing.T) {
	manifest, subs, err := loadSamples(shippedSamples, testRewriting())
	if err != nil {
		t.Fatal(err)
	}
	want := []subRef{
		{name: "orders", provider: hookv1.ProviderStripe, signingSecret: "orders-signing", credsName: "stripe-api", credsKey: "apiKey",
			events: []string{"checkout.session.completed", "invoice.paid"}, receiver: true,
			sample: "http://orders-worker.default.svc/events", sink: "http://sink.test/orders/events"},
		{name: "refunds", provider: hookv1.ProviderStripe, signingSecret: "refunds-signing", credsName: "stripe-api", credsKey: "apiKey",
			events: []string{"charge.refunded", "charge.dispute.created"}, receiver: true, endpoint: "https://hooks.example.com/hooks/default/refunds",
			sample: "http://refunds-worker.default.svc/events", sink: "http://sink.test/refunds/events"},
		{name: "shop-pushes", provider: hookv1.ProviderGitHub, target: "repos/acme/shop", signingSecret: "shop-pushes-signing", credsName: "github-api", credsKey: "token",
			events: []string{"push", "pull_request"}, receiver: true,
			sample: "http://ci-worker.default.svc/events", sink: "http://sink.test/shop-pushes/events"},
		{name: "acme-org", provider: hookv1.ProviderGitHub, target: "orgs/acme", signingSecret: "acme-org-signing", credsName: "github-api", credsKey: "token",
			events: []string{"*"}, receiver: true, endpoint: "https://hooks.example.com/hooks/default/acme-org",
			sample: "http://audit-worker.default.svc/events", sink: "http://sink.test/acme-org/events"},
	}
	if diff := cmp.Diff(want, subs, cmp.AllowUnexported(subRef{})); diff != "" {
		t.Errorf("subscriptions (-want +got):\n%s", diff)
	}

	applied := appliedSubscriptions(t, manifest)
	type seen struct {
		APIURL, Endpoint, Sink, Resync, Recovery string
		Insecure, Receiver                       bool
	}
	got := map[string]seen{}
	for name, s := range applied {
		v := seen{APIURL: s.Spec.Provider.APIURL, Endpoint: s.Spec.Endpoint.URL, Insecure: s.Spec.Endpoint.AllowInsecureHTTP,
			Receiver: s.Spec.Endpoint.Receiver != nil, Resync: s.Spec.ResyncInterval.Duration.String(), Recovery: string(s.Spec.Recovery.Mode)}
		if s.Spec.Recovery.Lookback != nil {
			v.Recovery += " " + s.Spec.Recovery.Lookback.Duration.String()
		}
		if s.Spec.Delivery != nil && s.Spec.Delivery.Sink != nil {
			v.Sink = s.Spec.Delivery.Sink.URL
		}
		got[name] = v
	}
	wantApplied := map[string]seen{
		"orders":      {APIURL: "http://stripe.test", Receiver: true, Sink: "http://sink.test/orders/events", Resync: "10s", Recovery: "Auto 72h0m0s"},
		"refunds":     {APIURL: "http://stripe.test", Endpoint: "http://receiver.test/hooks/default/refunds", Insecure: true, Sink: "http://sink.test/refunds/events", Resync: "10s", Recovery: "Manual 24h0m0s"},
		"shop-pushes": {APIURL: "http://github.test", Receiver: true, Sink: "http://sink.test/shop-pushes/events", Resync: "10s"},
		"acme-org":    {APIURL: "http://github.test", Endpoint: "http://receiver.test/hooks/default/acme-org", Insecure: true, Sink: "http://sink.test/acme-org/events", Resync: "10s", Recovery: "Manual"},
	}
	if diff := cmp.Diff(wantApplied, got); diff != "" {
		t.Errorf("applied manifest (-want +got):\n%s", diff)
	}
}

// TestLoadSamplesRefusesProviderWithoutFake: a sample for a provider the demo cannot fake is an
// error, not a subscription that never becomes Ready.
func TestLoadSamplesRefusesProviderWithoutFake(t *testing.T) {
	dirs := []string{filepath.Join("..", "..", "config", "samples", "github")}
	rw := rewriting{apiURLs: map[hookv1.ProviderType]string{hookv1.ProviderStripe: "http://stripe.test"}, sinkBase: "http://sink.test", receiverBase: "http://receiver.test", resync: "10s"}
	if _, _, err := loadSamples(dirs, rw); err == nil {
		t.Fatal("loadSamples accepted GitHub samples without a fake GitHub")
	}
}

// TestLoadSamplesFanOut: with a NATS server to fan out to, the first subscription with a sink
// (orders) gets spec.delivery.sinks: its HTTP sink, named default, and a JetStream sink whose
// filter takes the last of its event types; the others keep their one sink.
func TestLoadSamplesFanOut(t *testing.T) {
	rw := testRewriting()
	rw.natsURL = "nats://127.0.0.1:4222"
	manifest, subs, err := loadSamples(shippedSamples, rw)
	if err != nil {
		t.Fatal(err)
	}
	type fan struct{ subject, typ string }
	gotRefs := map[string]fan{}
	for _, s := range subs {
		gotRefs[s.name] = fan{s.natsSubject, s.natsType}
	}
	wantRefs := map[string]fan{"orders": {"orders.events", "invoice.paid"}, "refunds": {}, "shop-pushes": {}, "acme-org": {}}
	if diff := cmp.Diff(wantRefs, gotRefs, cmp.AllowUnexported(fan{})); diff != "" {
		t.Errorf("subscriptions' NATS sinks (-want +got):\n%s", diff)
	}

	got := map[string][]hookv1.Sink{}
	for name, sub := range appliedSubscriptions(t, manifest) {
		if d := sub.Spec.Delivery; d != nil && d.Sink != nil && d.Sinks != nil {
			t.Errorf("%s sets both spec.delivery.sink and sinks", name)
		}
		got[name] = sub.Spec.Delivery.EffectiveSinks()
	}
	httpSink := func(url string) hookv1.Sink {
		return hookv1.Sink{Name: hookv1.DefaultSinkName, HTTP: &hookv1.HTTPSink{URL: url}}
	}
	want := map[string][]hookv1.Sink{
		"orders": {httpSink("http://sink.test/orders/events"),
			{Name: "jetstream", NATS: &hookv1.NATSSink{URLs: []string{"nats://127.0.0.1:4222"}, Subject: "orders.events"}, Filter: "type == 'invoice.paid'"}},
		"refunds":     {httpSink("http://sink.test/refunds/events")},
		"shop-pushes": {httpSink("http://sink.test/shop-pushes/events")},
		"acme-org":    {httpSink("http://sink.test/acme-org/events")},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("applied sinks (-want +got):\n%s", diff)
	}
}
