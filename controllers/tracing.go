package controllers

import (
	"context"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	ctrl "sigs.k8s.io/controller-runtime"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/decide"
	"github.com/hookwarden/hookwarden/internal/telemetry"
)

// The manager's spans: one per reconcile, a child per provider request (account's
// AccountOptions.Tracing: telemetry.Transport), and one per recovery run with a child per
// page. With tracing off none is started and nothing is allocated for them.

// Attributes of the manager's spans, beside telemetry.AttrSubscription and the HTTP client
// conventions of the provider requests.
const (
	attrProvider     = attribute.Key("hookwarden.provider")
	attrDecision     = attribute.Key("hookwarden.decision")
	attrSteps        = attribute.Key("hookwarden.plan.steps")
	attrResult       = attribute.Key("hookwarden.result")
	attrReason       = attribute.Key("hookwarden.reason")
	attrEndpointID   = attribute.Key("hookwarden.endpoint_id")
	attrRequeueAfter = attribute.Key("hookwarden.requeue_after")
	attrTrigger      = attribute.Key("hookwarden.recovery.trigger")
	attrMode         = attribute.Key("hookwarden.recovery.mode")
	attrSince        = attribute.Key("hookwarden.recovery.since")
	attrRecovered    = attribute.Key("hookwarden.recovery.recovered")
	attrSkipped      = attribute.Key("hookwarden.recovery.skipped")
	attrBeyond       = attribute.Key("hookwarden.recovery.beyond_window")
	attrMalformed    = attribute.Key("hookwarden.recovery.malformed")
	attrPage         = attribute.Key("hookwarden.recovery.page")
	attrEventIDs     = attribute.Key("hookwarden.recovery.event_ids")
)

// The reconcile span's hookwarden.decision: what the plan decided, over all its rounds.
const (
	decisionCreated   = "created"
	decisionReplaced  = "replaced"
	decisionAdopted   = "adopted"
	decisionUpdated   = "updated"
	decisionNothing   = "nothing"
	decisionStalled   = "stalled"
	decisionConflict  = "conflict"
	decisionSuspended = "suspended"
	decisionDeleted   = "deleted"
	decisionOrphaned  = "orphaned"
)

// startReconcile starts the span of one reconcile of req (tracing off: ctx as it is and a
// no-op span).
func (r *Reconciler) startReconcile(ctx context.Context, req ctrl.Request) (context.Context, trace.Span) {
	ctx, span := r.Tracing.Start(ctx, "reconcile", trace.SpanKindInternal)
	if span.IsRecording() {
		span.SetAttributes(telemetry.AttrSubscription.String(req.Namespace + "/" + req.Name))
	}
	return ctx, span
}

// endReconcile records what the reconcile left (provider, registration, requeue, error) and
// ends its span.
func endReconcile(span trace.Span, sub *hookv1.WebhookSubscription, res ctrl.Result, err error) {
	if !span.IsRecording() {
		return
	}
	if sub.Spec.Provider.Type != "" {
		span.SetAttributes(attrProvider.String(string(sub.Spec.Provider.Type)))
	}
	if sub.Status.EndpointID != "" {
		span.SetAttributes(attrEndpointID.String(sub.Status.EndpointID))
	}
	if res.RequeueAfter > 0 {
		span.SetAttributes(attrRequeueAfter.String(res.RequeueAfter.String()))
	}
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// spanDecision sets the reconcile span's decision.
func spanDecision(ctx context.Context, decision string) {
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(attrDecision.String(decision))
	}
}

// spanResult sets the reconcile's result as record classified it (ready, stalled, waiting,
// retrying) and the condition's reason; a stall is the decision too, whatever stalled.
func spanResult(ctx context.Context, result string, reason hookv1.Reason) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(attrResult.String(result), attrReason.String(string(reason)))
	if result == "stalled" {
		span.SetAttributes(attrDecision.String(decisionStalled))
	}
}

// planTrace folds the plans of one reconcile's rounds into the decision on its span; with the
// span not recording it keeps nothing.
type planTrace struct {
	span trace.Span
	// last is the decision of the last round's plan; adopted: a round's plan adopted the
	// registration it keeps (decide.Plan.Adopts).
	last    decide.Decision
	adopted bool
	ran     uint64 // a bit per step kind planned in any round
}

func newPlanTrace(ctx context.Context) planTrace {
	return planTrace{span: trace.SpanFromContext(ctx)}
}

// add folds in the plan of one round, made from in, and sets the span's decision and steps so
// far; it returns p.
func (t *planTrace) add(in decide.PlanInput, p decide.Plan) decide.Plan {
	if !t.span.IsRecording() {
		return p
	}
	t.last = p.Decision
	t.adopted = t.adopted || p.Adopts(in)
	for _, st := range p.Steps {
		t.ran |= 1 << uint(st.Kind)
	}
	t.report()
	return p
}

func (t *planTrace) planned(k decide.StepKind) bool { return t.ran&(1<<uint(k)) != 0 }

// report sets the decision and the steps planned.
func (t *planTrace) report() {
	var decision string
	switch { // a Stall plan ends as a stall error, which spanResult reports as the decision
	case t.last == decide.Conflict:
		decision = decisionConflict
	case t.planned(decide.StepCreate):
		decision = decisionCreated
	case t.adopted: // before replaced: adopting on a provider that cannot set a secret in place replaces it
		decision = decisionAdopted
	case t.planned(decide.StepReplace):
		decision = decisionReplaced
	case t.planned(decide.StepUpdate) || t.planned(decide.StepSetSecret):
		decision = decisionUpdated
	default:
		decision = decisionNothing
	}
	var steps []string
	for k := decide.StepCreate; k <= decide.StepPrune; k++ {
		if t.planned(k) {
			steps = append(steps, k.String())
		}
	}
	t.span.SetAttributes(attrDecision.String(decision), attrSteps.String(strings.Join(steps, ",")))
}

// startSpan starts the span of one recovery run.
func (x *recoveryRunner) startSpan(ctx context.Context) (context.Context, trace.Span) {
	ctx, span := x.r.Tracing.Start(ctx, "recovery run", trace.SpanKindInternal)
	if span.IsRecording() {
		span.SetAttributes(telemetry.AttrSubscription.String(x.sub.Namespace+"/"+x.sub.Name), attrProvider.String(string(x.sub.Spec.Provider.Type)),
			attrTrigger.String(string(x.d.Trigger)), attrMode.String(x.d.Mode.String()), attrSince.String(x.d.Since.UTC().Format(time.RFC3339)))
	}
	return ctx, span
}

// endSpan records the run's result and counts on its span and ends it.
func (x *recoveryRunner) endSpan(span trace.Span) {
	if !span.IsRecording() {
		return
	}
	run := x.run
	span.SetAttributes(attrResult.String(string(run.Result)), attrRecovered.Int64(run.Recovered), attrSkipped.Int64(run.Skipped),
		attrBeyond.Int64(run.BeyondWindow), attrMalformed.Int64(run.Malformed))
	if run.Result != hookv1.RecoverySucceeded {
		span.SetStatus(codes.Error, run.Message)
	}
	span.End()
}

// recoveryPage is the span of one page of a recovery run: the provider's listing and what the
// run did with it. ids are the events handed to the receiver (fetch) or whose redelivery the
// provider accepted (redeliver): the receiver's trace of each has the id as
// cloudevents.event_id.
type recoveryPage struct {
	span trace.Span
	ids  []string
}

func (x *recoveryRunner) startPage(ctx context.Context, n int) (context.Context, *recoveryPage) {
	ctx, span := x.r.Tracing.Start(ctx, "recovery page", trace.SpanKindInternal)
	if !span.IsRecording() {
		return ctx, nil
	}
	span.SetAttributes(attrPage.Int(n))
	return ctx, &recoveryPage{span: span}
}

// asked notes that event id was handed over or its redelivery asked for.
func (p *recoveryPage) asked(id string) {
	if p != nil {
		p.ids = append(p.ids, id)
	}
}

func (p *recoveryPage) end() {
	if p == nil {
		return
	}
	p.span.SetAttributes(attrEventIDs.StringSlice(p.ids))
	p.span.End()
}
