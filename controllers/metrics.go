package controllers

import (
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hookwarden/hookwarden/account"
	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/providers"
)

// Metrics are the manager's own series. main registers them with controller-runtime's
// registry, so they are served on --metrics-bind-address beside its reconcile metrics; tests
// pass a registry of their own. Label names and values follow the receiver's: result, in
// snake_case.
type Metrics struct {
	// provider are the provider request series, which the accounts count (AccountOptions.Metrics).
	provider *account.Metrics
	ready    *prometheus.GaugeVec
	// Recovery of missed deliveries, per subscription (recovery.go).
	recoveryRuns   *prometheus.CounterVec
	recoveryEvents *prometheus.CounterVec
	recoveryGaps   *prometheus.CounterVec
	deliveryHealth *prometheus.GaugeVec
	watermarkAge   *prometheus.GaugeVec
	// eventsSuppressed counts Normal Events past the Event budget (EventBudget).
	eventsSuppressed *prometheus.CounterVec

	mu sync.Mutex
	// readyProvider is the provider label of each subscription's ready series, so a changed
	// provider type replaces the series instead of leaving the old one behind.
	readyProvider map[string]string
	// recoveryProvider is the same for the recovery series.
	recoveryProvider map[string]string
}

// NewMetrics creates the manager's metrics and registers them with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		ready: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hookwarden_subscription_ready",
			Help: "1 when the subscription's Ready condition is True, else 0; no series while it is suspended. Served by the leader only.",
		}, []string{"namespace", "name", "provider"}),
		recoveryRuns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hookwarden_recovery_runs_total",
			Help: "Recovery runs of missed deliveries by subscription and result (succeeded, partial, failed).",
		}, []string{"namespace", "name", "provider", "result"}),
		recoveryEvents: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hookwarden_recovery_events_total",
			Help: "Missed deliveries handled by recovery runs, by result (the label is result, as everywhere in both binaries): recovered, skipped (the receiver already held it), beyond_window (past what the provider keeps: lost), malformed (an entry of the provider's answer that lacks an id).",
		}, []string{"namespace", "name", "provider", "result"}),
		recoveryGaps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hookwarden_recovery_gaps_total",
			Help: "Spans of possibly missed deliveries (how many is unknown) that cannot be recovered, by reason: beyond_window (before what the provider keeps), provider_disabled (the provider had the registration disabled and sent nothing).",
		}, []string{"namespace", "name", "provider", "reason"}),
		deliveryHealth: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hookwarden_delivery_health",
			Help: "The provider's view of deliveries to the subscription's registration: 1 for the current state (healthy, failing, disabled, unknown), 0 for the others.",
		}, []string{"namespace", "name", "provider", "state"}),
		watermarkAge: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hookwarden_recovery_watermark_age_seconds",
			Help: "Age of the subscription's recovery watermark (everything before it was recovered or reported), as of its last reconcile.",
		}, []string{"namespace", "name", "provider"}),
		eventsSuppressed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hookwarden_events_suppressed_total",
			Help: "Normal Events not sent because they came faster than the Event budget (--event-qps, --event-burst), by reason; what they would have said is in the subscriptions' status and the manager's log.",
		}, []string{"reason"}),
		readyProvider:    map[string]string{},
		recoveryProvider: map[string]string{},
	}
	provider, err := account.NewMetrics(reg)
	if err != nil {
		return nil, err
	}
	m.provider = provider
	for _, c := range []prometheus.Collector{m.ready, m.recoveryRuns, m.recoveryEvents, m.recoveryGaps, m.deliveryHealth, m.watermarkAge, m.eventsSuppressed} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Provider are the provider request series, for account.AccountOptions.Metrics (nil for nil:
// the accounts then count without serving).
func (m *Metrics) Provider() *account.Metrics {
	if m == nil {
		return nil
	}
	return m.provider
}

// unregisteredMetrics are the metrics of a component given none: counted, never served.
func unregisteredMetrics() *Metrics {
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		panic(err) // a fresh registry refuses nothing
	}
	return m
}

// eventSuppressed counts a Normal Event past the Event budget.
func (m *Metrics) eventSuppressed(reason string) { m.eventsSuppressed.WithLabelValues(reason).Inc() }

// setReady records whether a subscription is Ready.
func (m *Metrics) setReady(namespace, name, provider string, ready bool) {
	key := namespace + "/" + name
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.readyProvider[key]; ok && old != provider {
		m.ready.DeleteLabelValues(namespace, name, old)
	}
	m.readyProvider[key] = provider
	v := 0.0
	if ready {
		v = 1
	}
	m.ready.WithLabelValues(namespace, name, provider).Set(v)
}

// forget drops a subscription's ready series: it is gone, or suspended.
func (m *Metrics) forget(namespace, name string) {
	key := namespace + "/" + name
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.readyProvider[key]; ok {
		m.ready.DeleteLabelValues(namespace, name, old)
		delete(m.readyProvider, key)
	}
}

// healthStates are the states of hookwarden_delivery_health, each a series per subscription.
var healthStates = []providers.HealthState{providers.HealthHealthy, providers.HealthFailing, providers.HealthDisabled, providers.HealthUnknown}

// setDeliveryHealth sets the subscription's health series: 1 for state, 0 for the others. It
// also creates the subscription's recovery counters at 0, so increase() and the alerts see the
// first run's counts.
func (m *Metrics) setDeliveryHealth(namespace, name, provider string, state providers.HealthState) {
	m.dropOtherProvider(namespace, name, provider)
	for _, outcome := range []string{"recovered", "skipped", "beyond_window", "malformed"} {
		m.recoveryEvents.WithLabelValues(namespace, name, provider, outcome)
	}
	for _, reason := range gapReasons {
		m.recoveryGaps.WithLabelValues(namespace, name, provider, reason)
	}
	for _, s := range healthStates {
		v := 0.0
		if s == state {
			v = 1
		}
		m.deliveryHealth.WithLabelValues(namespace, name, provider, s.String()).Set(v)
	}
}

// setWatermark sets the watermark's age (no series while there is none).
func (m *Metrics) setWatermark(namespace, name, provider string, watermark *metav1.Time, now time.Time) {
	if watermark == nil {
		m.watermarkAge.DeletePartialMatch(prometheus.Labels{"namespace": namespace, "name": name})
		return
	}
	m.watermarkAge.WithLabelValues(namespace, name, provider).Set(max(now.Sub(watermark.Time).Seconds(), 0))
}

// dropOtherProvider deletes the subscription's recovery series under the provider label it had
// before, when its provider type changed.
func (m *Metrics) dropOtherProvider(namespace, name, provider string) {
	key := namespace + "/" + name
	m.mu.Lock()
	old, ok := m.recoveryProvider[key]
	m.recoveryProvider[key] = provider
	m.mu.Unlock()
	if ok && old != provider {
		l := prometheus.Labels{"namespace": namespace, "name": name, "provider": old}
		for _, v := range m.recoverySeries() {
			v.DeletePartialMatch(l)
		}
	}
}

func (m *Metrics) recoverySeries() []interface {
	DeletePartialMatch(prometheus.Labels) int
} {
	return []interface {
		DeletePartialMatch(prometheus.Labels) int
	}{m.recoveryRuns, m.recoveryEvents, m.recoveryGaps, m.deliveryHealth, m.watermarkAge}
}

// recoveryRun counts one ended run and what it handled.
func (m *Metrics) recoveryRun(namespace, name, provider string, run *hookv1.RecoveryRun) {
	m.recoveryRuns.WithLabelValues(namespace, name, provider, strings.ToLower(string(run.Result))).Inc()
	for outcome, n := range map[string]int64{"recovered": run.Recovered, "skipped": run.Skipped, "beyond_window": run.BeyondWindow, "malformed": run.Malformed} {
		m.recoveryEvents.WithLabelValues(namespace, name, provider, outcome).Add(float64(n))
	}
}

// gapReasons are the reason labels of hookwarden_recovery_gaps_total.
var gapReasons = []string{"beyond_window", "provider_disabled"}

// gapReason is the metric label of a gap's reason.
func gapReason(r hookv1.RecoveryGapReason) string {
	if r == hookv1.GapProviderDisabled {
		return gapReasons[1]
	}
	return gapReasons[0]
}

// recoveryGap counts a span of possibly missed deliveries that cannot be recovered.
func (m *Metrics) recoveryGap(namespace, name, provider string, reason hookv1.RecoveryGapReason) {
	m.recoveryGaps.WithLabelValues(namespace, name, provider, gapReason(reason)).Inc()
}

// forgetRecovery drops a deleted subscription's recovery series.
func (m *Metrics) forgetRecovery(namespace, name string) {
	m.mu.Lock()
	delete(m.recoveryProvider, namespace+"/"+name)
	m.mu.Unlock()
	l := prometheus.Labels{"namespace": namespace, "name": name}
	for _, v := range m.recoverySeries() {
		v.DeletePartialMatch(l)
	}
}
