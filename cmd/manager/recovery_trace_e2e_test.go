package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/internal/otlptest"
)

// Issue 31: a Stripe event missed while the receiver was down, recovered by a requested run,
// followed through both real binaries over OTLP: the manager's run span has a page span naming
// the event; the receiver's server span of that event is the root of its own trace, marked
// delivered via recovery and linked to that page span (the hand-over's signed trace context);
// its children deliver it to each of the two sinks.
func stripeRecoveredTraced(e *recEnv) {
	t := e.h.t
	col := otlptest.NewCollector(e.root)
	e.otel = col.URL
	defer func() { e.otel = "" }()
	if _, err := e.manager.Stop(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	e.startManager()

	const name, key = "stripe-traced", "sk_test_recovery_traced"
	e.secret(name+"-credentials", "apiKey", key)
	e.subscriptionTo(name, stripeProvider(e, name+"-credentials"), []string{"invoice.paid", "charge.failed"}, hookv1.RecoveryManual, 24*time.Hour,
		&hookv1.DeliverySpec{Sinks: []hookv1.Sink{
			{Name: "ledger", HTTP: &hookv1.HTTPSink{URL: e.sink.url(name + "-ledger")}},
			{Name: "audit", HTTP: &hookv1.HTTPSink{URL: e.sink.url(name + "-audit")}},
		}})
	e.waitReady(name)
	live := e.stripe.Emit(key, "invoice.paid", nil).ID
	e.waitAllOnce(name+"-ledger", []string{live}, time.Minute)

	e.stopReceiver()
	ids := e.stripeOutage(key, 2, time.Minute)
	if failed, attempts := e.failedAtStripe(ids); failed != len(ids) {
		t.Fatalf("%d of %d events failed at the fake while the receiver was down (%d attempts)", failed, len(ids), attempts)
	}
	e.startReceiver()
	st := e.waitHandled(name, e.requestRecovery(name))
	if st.LastRun.Result != hookv1.RecoverySucceeded || st.LastRun.Recovered < int64(len(ids)) {
		t.Fatalf("the requested run: %+v, want %d recovered", st.LastRun, len(ids))
	}
	e.waitAllOnce(name+"-ledger", ids, time.Minute)
	e.waitAllOnce(name+"-audit", ids, time.Minute)

	subscription := chaosNamespace + "/" + name
	var run, page, server *tracepb.Span
	var spans []*tracepb.Span
	e.h.eventually("the spans of the run and of the recovered event", time.Minute, func(context.Context) error {
		spans = col.All()
		run, page, server = nil, nil, nil
		for _, s := range spans {
			if s.Name == "recovery run" && otlptest.Attr(s, "hookwarden.subscription") == subscription && otlptest.Attr(s, "hookwarden.recovery.trigger") == string(hookv1.TriggerRequested) {
				run = s
			}
		}
		if run == nil {
			return errors.New("no span of the requested run")
		}
		for _, p := range otlptest.Children(run, spans) {
			if p.Name == "recovery page" && strings.Contains(otlptest.Attr(p, "hookwarden.recovery.event_ids"), ids[0]) {
				page = p
			}
		}
		if page == nil {
			return fmt.Errorf("no page span of the run names %s", ids[0])
		}
		for _, s := range spans {
			if s.Kind == tracepb.Span_SPAN_KIND_SERVER && otlptest.Attr(s, "cloudevents.event_id") == ids[0] && otlptest.Attr(s, "hookwarden.result") == "accepted" {
				server = s
			}
		}
		if server == nil {
			return fmt.Errorf("no receiver span accepted %s", ids[0])
		}
		var sinks []string
		for _, c := range otlptest.Children(server, spans) {
			if otlptest.Attr(c, "hookwarden.outcome") == "delivered" {
				sinks = append(sinks, otlptest.Attr(c, "hookwarden.sink"))
			}
		}
		if slices.Sort(sinks); !slices.Equal(sinks, []string{"audit", "ledger"}) {
			return fmt.Errorf("attempts delivered to %v", sinks)
		}
		return nil
	})
	if !col.Services("manager-under-test") || !col.Services("receiver-under-test") {
		t.Error("spans from the manager and the receiver under their OTEL_SERVICE_NAME")
	}
	if len(server.ParentSpanId) != 0 {
		t.Errorf("the receiver's span of %s has a parent (%x): want the root of the event's trace", ids[0], server.ParentSpanId)
	}
	if !otlptest.LinksTo(server, page) {
		t.Errorf("the receiver's span of %s links %v, want the run's page span %s", ids[0], server.Links, otlptest.Traceparent(page))
	}
	if via := otlptest.Attr(server, "hookwarden.delivery.via"); via != "recovery" {
		t.Errorf("the receiver's span of %s says delivery via %q, want recovery", ids[0], via)
	}
	fmt.Printf("REPORT trace of a recovered Stripe event: the manager's run\n%s", otlptest.Render(run, spans, "  "))
	fmt.Printf("REPORT trace of a recovered Stripe event: the receiver (linked to the page span %s)\n%s", otlptest.ID(page.SpanId), otlptest.Render(server, spans, "  "))
}
