package controllers

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/hookwarden/hookwarden/account"
	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/providers"
)

// The provider's view of deliveries to the kept registration, and the Delivering condition.

// deliveryHealth is the provider's view of deliveries to reg: what its list says, and what a
// HealthReporter says, asked at most once per resync interval. A list that says disabled wins.
func (r *Reconciler) deliveryHealth(ctx context.Context, sub *hookv1.WebhookSubscription, ro account.RecoveryOps, reg providers.Registration, now time.Time) providers.DeliveryHealth {
	var h providers.DeliveryHealth
	if reg.Health != nil {
		h = *reg.Health
		if listSuffices(sub, h) {
			return h
		}
	}
	key := account.SubscriptionKey(sub) + "\x00" + reg.ID
	report, ok := r.health.get(key, now, resyncInterval(sub))
	if !ok {
		var err error
		var reporter bool
		report, reporter, err = ro.Health(ctx, reg)
		if !reporter {
			return h
		}
		if err != nil {
			log.FromContext(ctx).Info("the provider's report of deliveries failed; using what its list says", logSubscription, account.SubscriptionKey(sub), logEndpointID, reg.ID, "error", err.Error())
			return h
		}
		r.health.put(key, now, report)
	}
	return report
}

// listSuffices reports whether what the list says about deliveries needs no report of recent
// deliveries: nothing delivered yet, disabled, or healthy when the last word was healthy too. A
// steady, healthy fleet then costs one list per page and no request per registration. Failing,
// or healthy again after failures (the receiver is back: how many failed decides whether a
// recovery runs), asks the provider.
func listSuffices(sub *hookv1.WebhookSubscription, h providers.DeliveryHealth) bool {
	switch h.State {
	case providers.HealthFailing:
		return false
	case providers.HealthHealthy:
		c := meta.FindStatusCondition(sub.Status.Conditions, hookv1.ConditionDelivering)
		return c != nil && c.Status == metav1.ConditionTrue
	}
	return true
}

// setDelivering sets the Delivering condition from the provider's view of deliveries.
func setDelivering(sub *hookv1.WebhookSubscription, id string, h providers.DeliveryHealth) {
	status, reason := metav1.ConditionUnknown, hookv1.ReasonUnknown
	msg := "the provider reports nothing about deliveries to " + id
	switch h.State {
	case providers.HealthHealthy:
		status, reason, msg = metav1.ConditionTrue, hookv1.ReasonHealthy, "the provider reports recent deliveries to "+id+" succeeding"
	case providers.HealthFailing:
		status, reason, msg = metav1.ConditionFalse, hookv1.ReasonFailing, "the provider reports recent deliveries to "+id+" failing"
	case providers.HealthDisabled:
		status, reason, msg = metav1.ConditionFalse, hookv1.ReasonDisabledByProvider, "the provider stopped delivering to "+id+" after failed deliveries"
		if !h.DisabledUntil.IsZero() {
			msg += " until " + h.DisabledUntil.UTC().Format(time.RFC3339)
		}
	}
	if h.Total > 0 {
		msg += fmt.Sprintf(" (%d of %d recent deliveries failed)", h.Failed, h.Total)
	}
	if h.Message != "" {
		msg += ": " + h.Message
	}
	meta.SetStatusCondition(&sub.Status.Conditions, metav1.Condition{Type: hookv1.ConditionDelivering, Status: status, Reason: reason, Message: msg, ObservedGeneration: sub.Generation})
}
