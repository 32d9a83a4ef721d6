package controllers

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
)

// TestEventBudget: Normal Events beyond the burst wait for the rate, the ones past it are
// counted and not sent; Warnings are always sent; a negative rate sends everything.
func TestEventBudget(t *testing.T) {
	sub := &hookv1.WebhookSubscription{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a"}}
	now := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	setup := func(b EventBudget) (*Reconciler, *events.FakeRecorder, *prometheus.Registry) {
		reg := prometheus.NewRegistry()
		m, err := NewMetrics(reg)
		if err != nil {
			t.Fatal(err)
		}
		rec := events.NewFakeRecorder(100)
		return &Reconciler{Recorder: rec, Metrics: m, Events: b, normalEvents: b.limiter(), Now: func() time.Time { return now }}, rec, reg
	}
	sent := func(rec *events.FakeRecorder) int {
		n := len(rec.Events)
		for range n {
			<-rec.Events
		}
		return n
	}

	r, rec, _ := setup(EventBudget{PerSecond: 2, Burst: 3})
	for range 5 {
		r.event(sub, corev1.EventTypeNormal, hookv1.ReasonCreated, "Create", "registered %s", "we_1")
	}
	if got := sent(rec); got != 3 {
		t.Fatalf("a burst of 5 Normal Events sent %d, want the burst of 3", got)
	}
	if got := testutil.ToFloat64(r.Metrics.eventsSuppressed.WithLabelValues(hookv1.ReasonCreated)); got != 2 {
		t.Errorf("hookwarden_events_suppressed_total{reason=Created} = %v, want 2", got)
	}
	r.event(sub, corev1.EventTypeWarning, hookv1.ReasonConflict, "Reconcile", "conflict")
	if got := sent(rec); got != 1 {
		t.Errorf("a Warning past the budget sent %d Events, want 1: Warnings are never budgeted", got)
	}
	now = now.Add(time.Second)
	for range 5 {
		r.event(sub, corev1.EventTypeNormal, hookv1.ReasonCreated, "Create", "registered %s", "we_2")
	}
	if got := sent(rec); got != 2 {
		t.Errorf("a second later 5 Normal Events sent %d, want the 2 a second the budget refills", got)
	}

	r, rec, _ = setup(EventBudget{PerSecond: -1})
	for range 100 {
		r.event(sub, corev1.EventTypeNormal, hookv1.ReasonCreated, "Create", "registered")
	}
	if got := sent(rec); got != 100 {
		t.Errorf("with no budget 100 Normal Events sent %d, want 100", got)
	}

	if (EventBudget{}).limiter().Burst() != DefaultEventBudget.Burst {
		t.Errorf("the zero budget is not DefaultEventBudget")
	}
}
