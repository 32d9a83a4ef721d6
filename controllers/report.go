package controllers

import (
	"context"
	"strings"
	"time"

	"golang.org/x/time/rate"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/hookwarden/hookwarden/account"
	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/decide"
	"github.com/hookwarden/hookwarden/providers"
)

// What a reconcile reports beside the conditions: pings, look-alikes left alone, the
// provider's view of deliveries, Events.

// ping asks the provider for a test delivery to a new registration and records the outcome in
// status; a failed ping leaves the registration as it is.
func (s *session) ping(ctx context.Context, id string) {
	ok, err := s.ops.Ping(ctx, id)
	if !ok {
		return
	}
	ps := &hookv1.PingStatus{EndpointID: id, Time: metav1.NewTime(s.r.Now()), Result: hookv1.PingRequested}
	if err != nil {
		ps.Result, ps.Message = hookv1.PingFailed, err.Error()
		s.r.event(s.sub, corev1.EventTypeWarning, hookv1.ReasonPinged, "Ping", "the provider refused to ping %s: %v", id, err)
	} else {
		s.r.event(s.sub, corev1.EventTypeNormal, hookv1.ReasonPinged, "Ping", "asked the provider to ping %s", id)
	}
	s.sub.Status.Ping = ps
}

func (r *Reconciler) reportNearTwins(sub *hookv1.WebhookSubscription, p decide.Plan) {
	var parts []string
	if len(p.NearTwins) > 0 {
		parts = append(parts, "foreign registrations that differ only by a trailing slash or scheme, left untouched: "+decide.RegistrationIDs(p.NearTwins))
	}
	if len(p.Unproven) > 0 {
		parts = append(parts, "registrations for this URL that cannot be proven ours (the provider stores no marker), left untouched: "+decide.RegistrationIDs(p.Unproven))
	}
	if len(p.KeptTwins) > 0 {
		parts = append(parts, "twins kept by policies.twins=Keep: "+decide.RegistrationIDs(p.KeptTwins))
	}
	r.reportCondition(sub, hookv1.ConditionTwinsFound, hookv1.ReasonNearTwinFound, strings.Join(parts, "; "))
}

// reportSettled reports what the last round of a reconcile left as it is: look-alikes of the
// kept registration, and its read-only fields that differ from the spec.
func (r *Reconciler) reportSettled(sub *hookv1.WebhookSubscription, in decide.PlanInput, p decide.Plan, kept providers.Registration) {
	r.reportNearTwins(sub, p)
	// ReadOnlyDrift while a field the provider's API cannot change (a GitHub App's events)
	// differs from the spec; removed once they agree.
	r.reportCondition(sub, hookv1.ConditionReadOnlyDrift, hookv1.ReasonReadOnlyFieldDiffers, decide.ReadOnlyDrift(in, kept))
}

// reportCondition sets the abnormal-true condition typ with msg, with a Warning Event when the
// message changes, or removes it when msg is empty.
func (r *Reconciler) reportCondition(sub *hookv1.WebhookSubscription, typ hookv1.ConditionType, reason hookv1.Reason, msg string) {
	if msg == "" {
		meta.RemoveStatusCondition(&sub.Status.Conditions, typ)
		return
	}
	if c := meta.FindStatusCondition(sub.Status.Conditions, typ); c == nil || c.Message != msg {
		r.event(sub, corev1.EventTypeWarning, reason, "Reconcile", "%s", msg)
	}
	setCondition(sub, typ, reason, msg)
}

func deliveryStatus(d *providers.DeliveryReport) *hookv1.DeliveryStatus {
	if d == nil {
		return nil
	}
	return &hookv1.DeliveryStatus{Code: int32(d.Code), Status: d.Status, Message: d.Message}
}

// EventBudget bounds the Normal Events the manager sends: Burst at once, then PerSecond. A
// busy start (a GitOps sync of thousands of subscriptions) would otherwise cost the API server
// one more write per new subscription, on top of the writes that make it Ready, each on a
// goroutine of the event broadcaster's. Past the budget a Normal Event is counted
// (hookwarden_events_suppressed_total) and not sent: what it would have said is in the
// subscription's status and the manager's log. Warnings are always sent.
type EventBudget struct {
	PerSecond float64
	Burst     int
}

// DefaultEventBudget lets a start of 50 subscriptions send every Event, and a bigger one about
// five a second after the first 50.
var DefaultEventBudget = EventBudget{PerSecond: 5, Burst: 50}

// limiter is the budget as a token bucket; nil (no budget: every Event is sent) for a
// negative rate.
func (b EventBudget) limiter() *rate.Limiter {
	if b == (EventBudget{}) {
		b = DefaultEventBudget
	}
	if b.PerSecond < 0 {
		return nil
	}
	return rate.NewLimiter(rate.Limit(b.PerSecond), max(b.Burst, 1))
}

// event sends an Event about sub, a Normal one only within the Event budget.
func (r *Reconciler) event(sub *hookv1.WebhookSubscription, typ, reason, action, note string, args ...any) {
	if r.Recorder == nil {
		return
	}
	if typ == corev1.EventTypeNormal && r.normalEvents != nil && !r.normalEvents.AllowN(r.clock(), 1) {
		r.Metrics.eventSuppressed(reason)
		return
	}
	r.Recorder.Eventf(sub, nil, typ, reason, action, note, args...)
}

// reportUnfit reports, once per account, each foreign registration whose object does not fit
// the provider's shape: an Event on the subscription that saw it first, a log line, a count.
// It is skipped as foreign; nothing else is done about it.
func (s *session) reportUnfit(ctx context.Context, p decide.Plan) {
	for _, r := range p.Unfit {
		if !s.ops.FirstSighting(r) {
			continue
		}
		id := r.ID
		if id == "" {
			id = "(id unreadable)"
		}
		log.FromContext(ctx).Info("skipped a foreign registration that does not fit the provider's shape", logSubscription, account.SubscriptionKey(s.sub),
			logProvider, string(s.sub.Spec.Provider.Type), logEndpointID, id, logReason, r.Unfit)
		s.r.event(s.sub, corev1.EventTypeWarning, hookv1.ReasonUnfitRegistration, "Reconcile",
			"skipped registration %s, which is not this subscription's and does not fit what the provider's client reads: %s", id, r.Unfit)
	}
}

// clock is the reconciler's time (Now, or the wall clock for a Reconciler not set up through
// SetupWithManager).
func (r *Reconciler) clock() time.Time {
	if r.Now == nil {
		return time.Now()
	}
	return r.Now()
}
