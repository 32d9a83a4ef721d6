package controllers

import (
	"context"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/decide"
	"github.com/hookwarden/hookwarden/decide/decidetest"
	"github.com/hookwarden/hookwarden/internal/telemetry"
	"github.com/hookwarden/hookwarden/providers"
)

// With tracing off (no Tracing, or a disabled one) the spans of a reconcile and of a recovery
// run are never started: no valid span context, and not one allocation for them.
func TestManagerSpansOffAllocateNothing(t *testing.T) {
	sub := &hookv1.WebhookSubscription{}
	sub.Namespace, sub.Name, sub.Spec.Provider.Type, sub.Status.EndpointID = "shop", "orders", hookv1.ProviderStripe, "we_1"
	req := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "shop", Name: "orders"}}
	plan := decide.Plan{Decision: decide.Create, Steps: []decide.Step{{Kind: decide.StepCreate}}}
	for _, tr := range []*telemetry.Tracing{nil, telemetry.New(nil)} {
		r := &Reconciler{Tracing: tr}
		x := &recoveryRunner{r: r, sub: sub, run: &hookv1.RecoveryRun{Result: hookv1.RecoverySucceeded}}
		valid := false
		allocs := testing.AllocsPerRun(100, func() {
			ctx, span := r.startReconcile(context.Background(), req)
			plans := newPlanTrace(ctx)
			plans.add(decide.PlanInput{}, plan)
			spanDecision(ctx, decisionCreated)
			spanResult(ctx, "ready", hookv1.ReasonSucceeded)
			rctx, run := x.startSpan(ctx)
			pctx, pg := x.startPage(rctx, 1)
			pg.asked("evt_1")
			pg.end()
			x.endSpan(run)
			endReconcile(span, sub, ctrl.Result{}, nil)
			valid = valid || trace.SpanContextFromContext(pctx).IsValid()
		})
		if allocs != 0 || valid {
			t.Errorf("tracing off (%v): %v allocations per reconcile for spans, a valid span context: %v", tr, allocs, valid)
		}
	}
}

// The reconcile span's decision follows the plans of its rounds, "adopted" by the plan's own
// predicate (what `hookwarden plan` prints as adopt): a registration kept that the status does
// not record yet that carries our marker or whose secret we hold is ours, not adopted.
func TestReconcileSpanDecision(t *testing.T) {
	caps := decidetest.StripeCaps
	input := func(recorded string, held []string, adoption hookv1.AdoptionPolicy, observed ...providers.Registration) decide.PlanInput {
		in := decide.PlanInput{Caps: caps, Desired: decidetest.Desired(decidetest.URL), Observed: observed, RecordedID: recorded,
			HeldSecrets: decidetest.HeldSet(held), Adoption: adoption}
		in.CurrentID = decidetest.CurrentOf("", recorded, held)
		return in
	}
	ours := decidetest.Reg("we_1", 0)
	cases := []struct {
		name   string
		rounds []decide.PlanInput
		want   string
	}{
		{"nothing observed: created", []decide.PlanInput{input("", nil, hookv1.AdoptionAdopt)}, decisionCreated},
		{"recorded, marked, held: nothing", []decide.PlanInput{input("we_1", []string{"we_1"}, hookv1.AdoptionAdopt, ours)}, decisionNothing},
		{"status cleared by hand, marked ours and held: kept, not adopted", []decide.PlanInput{input("", []string{"we_1"}, hookv1.AdoptionAdopt, ours)}, decisionNothing},
		{"events edited at the provider: updated", []decide.PlanInput{input("we_1", []string{"we_1"}, hookv1.AdoptionAdopt, decidetest.Reg("we_1", 0, decidetest.WithEvents("invoice.paid")))}, decisionUpdated},
		{"an unmarked endpoint under Adopt: adopted (Stripe replaces it to get a secret)", []decide.PlanInput{input("", nil, hookv1.AdoptionAdopt, decidetest.Reg("we_1", 0, decidetest.Unmarked))}, decisionAdopted},
		{"adopted in the first round, ours in the second: adopted", []decide.PlanInput{
			input("", nil, hookv1.AdoptionAdopt, decidetest.Reg("we_1", 0, decidetest.Unmarked)),
			input("we_1", []string{"we_1"}, hookv1.AdoptionAdopt, ours)}, decisionAdopted},
		{"an unmarked endpoint under Never: conflict", []decide.PlanInput{input("", nil, hookv1.AdoptionNever, decidetest.Reg("we_1", 0, decidetest.Unmarked))}, decisionConflict},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			exp := tracetest.NewInMemoryExporter()
			tr := telemetry.New(sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp)))
			ctx, span := tr.Start(context.Background(), "reconcile", trace.SpanKindInternal)
			plans := newPlanTrace(ctx)
			for _, in := range c.rounds {
				plans.add(in, decide.ComputePlan(in))
			}
			span.End()
			spans := exp.GetSpans()
			if len(spans) != 1 {
				t.Fatalf("%d spans, want 1", len(spans))
			}
			if got := stubAttrs(spans[0])["hookwarden.decision"]; got != c.want {
				t.Errorf("decision %q, want %q (steps %s)", got, c.want, stubAttrs(spans[0])["hookwarden.plan.steps"])
			}
		})
	}
}

// tracedHarness is a recovery harness whose reconciler writes spans to memory.
func tracedHarness(t *testing.T, f *fakeRecoverer) (*recHarness, *tracetest.InMemoryExporter) {
	exp := tracetest.NewInMemoryExporter()
	h := newRecHarness(t, f)
	h.r.Tracing = telemetry.New(sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp)))
	return h, exp
}

// runSpans are the recovery run's span and its pages' (in order) among spans.
func runSpans(t *testing.T, spans tracetest.SpanStubs) (run tracetest.SpanStub, pages []tracetest.SpanStub) {
	t.Helper()
	n := 0
	for _, s := range spans {
		if s.Name == "recovery run" {
			run, n = s, n+1
		}
	}
	if n != 1 {
		t.Fatalf("%d recovery run spans among %d, want 1", n, len(spans))
	}
	for _, s := range spans {
		if s.Name == "recovery page" {
			if s.Parent.SpanID() != run.SpanContext.SpanID() {
				t.Errorf("page span %v is not a child of the run's", s.Attributes)
			}
			pages = append(pages, s)
		}
	}
	return run, pages
}

func stubAttrs(s tracetest.SpanStub) map[string]string {
	out := map[string]string{}
	for _, a := range s.Attributes {
		out[string(a.Key)] = a.Value.String()
	}
	return out
}

func pageIDs(pages []tracetest.SpanStub) []string {
	var ids []string
	for _, p := range pages {
		for _, a := range p.Attributes {
			if a.Key == attrEventIDs {
				ids = append(ids, a.Value.AsStringSlice()...)
			}
		}
	}
	return ids
}

// A fetch run is one span with its trigger, mode, result and counts, and a child per page of
// the provider's listing naming the events handed to the receiver (a duplicate too: its trace
// in the receiver is found by the same id).
func TestRecoveryRunSpanFetch(t *testing.T) {
	e1, e2, e3, e4 := missedAt("evt_1", 40, "invoice.paid"), missedAt("evt_2", 30, "invoice.paid"), missedAt("evt_3", 20, "invoice.paid"), missedAt("evt_4", 10, "invoice.paid")
	f := newFakeRecoverer(decidetest.FetchCaps, e1, e2, e3, e4)
	f.pageCap = 2
	h, exp := tracedHarness(t, f)
	h.receiver.ledger["evt_2"] = true
	h.recover()

	run, pages := runSpans(t, exp.GetSpans())
	a := stubAttrs(run)
	want := map[string]string{"hookwarden.subscription": "shop/orders", "hookwarden.provider": "stripe", "hookwarden.recovery.trigger": string(hookv1.TriggerAuto),
		"hookwarden.recovery.mode": "fetch", "hookwarden.result": string(hookv1.RecoverySucceeded), "hookwarden.recovery.recovered": "3",
		"hookwarden.recovery.skipped": "1", "hookwarden.recovery.beyond_window": "0", "hookwarden.recovery.malformed": "0"}
	for k, v := range want {
		if a[k] != v {
			t.Errorf("run span %s=%q, want %q", k, a[k], v)
		}
	}
	if len(pages) < 2 {
		t.Fatalf("%d page spans, want one per page of 2 (at least 2)", len(pages))
	}
	for i, p := range pages {
		if got := stubAttrs(p)["hookwarden.recovery.page"]; got != strconv.Itoa(i+1) {
			t.Errorf("page span %d numbered %s", i, got)
		}
	}
	if diff := cmp.Diff([]string{"evt_1", "evt_2", "evt_3", "evt_4"}, pageIDs(pages)); diff != "" {
		t.Errorf("event ids on the page spans (-want +got):\n%s", diff)
	}
}

// A redeliver run's page names the deliveries whose redelivery the provider accepted; one it
// refused with a rate limit is not among them, and the run is Partial, an error span.
func TestRecoveryRunSpanRedeliver(t *testing.T) {
	e1, e2, e3 := missedAt("d1", 30, "invoice.paid"), missedAt("d2", 20, "invoice.paid"), missedAt("d3", 10, "invoice.paid")
	f := newFakeRecoverer(decidetest.RedeliverCaps, e1, e2, e3)
	f.report = &providers.DeliveryHealth{State: providers.HealthFailing, Failed: 3, Total: 3}
	f.redeliverErr["d2"] = &providers.Error{Kind: providers.RateLimited, StatusCode: 429}
	h, exp := tracedHarness(t, f)
	h.recover()

	run, pages := runSpans(t, exp.GetSpans())
	if a := stubAttrs(run); a["hookwarden.recovery.mode"] != "redeliver" || a["hookwarden.result"] != string(hookv1.RecoveryPartial) || run.Status.Code != codes.Error {
		t.Errorf("run span %v status %v, want mode redeliver, result Partial, an error", a, run.Status)
	}
	if len(pages) != 1 {
		t.Fatalf("%d page spans, want 1", len(pages))
	}
	if diff := cmp.Diff([]string{"d1"}, pageIDs(pages)); diff != "" {
		t.Errorf("event ids on the page span (-want +got):\n%s", diff)
	}
}
