package controllers

import (
	"errors"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/hookwarden/hookwarden/account/accounttest"
	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/decide"
)

// TestReadyThroughTransientFaults: a registration last found good stays Ready through transient
// provider faults (Reconciling says a retry is pending) until they have lasted the outage
// grace; a new spec, or one never found good, is not Ready meanwhile; success ends the streak.
func TestReadyThroughTransientFaults(t *testing.T) {
	clock := &accounttest.Clock{T: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	r := &Reconciler{Now: clock.Now, OutageGrace: 5 * time.Minute, Metrics: unregisteredMetrics()}
	sub := &hookv1.WebhookSubscription{}
	sub.Name, sub.Namespace, sub.Generation = "orders", "shop", 2
	outage := errors.New("listing registrations: Transient (HTTP 502)")
	rateLimited := decide.NewWait(hookv1.ReasonRateLimited, time.Second, "listing registrations: provider rate limit, retrying in 1s")
	ready := func() *metav1.Condition {
		return meta.FindStatusCondition(sub.Status.Conditions, hookv1.ConditionReady)
	}
	reconciling := func() *metav1.Condition {
		return meta.FindStatusCondition(sub.Status.Conditions, hookv1.ConditionReconciling)
	}
	record := func(err error) {
		t.Helper()
		_, _ = r.record(t.Context(), sub, ctrl.Result{}, err)
	}

	record(outage)
	if c := ready(); c == nil || c.Status != metav1.ConditionFalse || c.Reason != hookv1.ReasonProviderUnavailable {
		t.Fatalf("never found good, first fault: Ready %+v; want False/ProviderUnavailable", c)
	}
	record(nil)
	if c := ready(); c.Status != metav1.ConditionTrue || reconciling() != nil {
		t.Fatalf("after a success: Ready %+v, Reconciling %+v; want Ready True and no Reconciling", c, reconciling())
	}
	for i, step := range []struct {
		after time.Duration
		err   error
		ready metav1.ConditionStatus
	}{
		{0, outage, metav1.ConditionTrue},
		{time.Minute, rateLimited, metav1.ConditionTrue},
		{3 * time.Minute, outage, metav1.ConditionTrue},
		{59 * time.Second, outage, metav1.ConditionTrue}, // 4m59s into the streak
		{time.Second, outage, metav1.ConditionFalse},     // 5m: the grace is over
	} {
		clock.Advance(step.after)
		record(step.err)
		if c := ready(); c.Status != step.ready {
			t.Errorf("step %d (+%s, %v): Ready %s/%s; want %s", i, step.after, step.err, c.Status, c.Reason, step.ready)
		}
		if c := reconciling(); c == nil || c.Status != metav1.ConditionTrue {
			t.Errorf("step %d: Reconciling %+v; want True while a retry is pending", i, c)
		}
	}
	record(nil)
	clock.Advance(time.Hour)
	record(outage)
	if c := ready(); c.Status != metav1.ConditionTrue {
		t.Errorf("a new streak after a success: Ready %s; want True again", c.Status)
	}
	sub.Generation = 3 // a spec edit: not found good on it yet
	record(outage)
	if c := ready(); c.Status != metav1.ConditionFalse {
		t.Errorf("a fault on a new generation: Ready %s; want False", c.Status)
	}
}
