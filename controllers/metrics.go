package controllers

import (
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookwarden/hookwarden/providers"
)

// Metrics are the manager's own series. main registers them with controller-runtime's
// registry, so they are served on --metrics-bind-address beside its reconcile metrics; tests
// pass a registry of their own. Label names and values follow the receiver's: result, in
// snake_case.
type Metrics struct {
	requests    *prometheus.CounterVec
	duration    *prometheus.HistogramVec
	rateLimited *prometheus.CounterVec
	unfit       *prometheus.CounterVec
	ready       *prometheus.GaugeVec

	mu sync.Mutex
	// readyProvider is the provider label of each subscription's ready series, so a changed
	// provider type replaces the series instead of leaving the old one behind.
	readyProvider map[string]string
}

// NewMetrics creates the manager's metrics and registers them with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hookwarden_provider_requests_total",
			Help: "Requests to provider APIs by provider, operation (list, create, update, delete, ping, fetch_secret) and result (ok or the error class: transient, not_found, permanent, unauthorized, rate_limited, quota_exceeded, already_exists).",
		}, []string{"provider", "operation", "result"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "hookwarden_provider_request_duration_seconds",
			Help: "Duration of provider API requests (all pages of a list are one request), by provider, operation and result.",
			// From a fast local fake to a provider at its timeout (--provider-timeout, 20s).
			Buckets: []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30},
		}, []string{"provider", "operation", "result"}),
		rateLimited: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hookwarden_provider_rate_limited_total",
			Help: "Provider requests answered with a rate limit, or not sent because the credential's last rate limit was still in force.",
		}, []string{"provider"}),
		unfit: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hookwarden_provider_unfit_registrations_total",
			Help: "Registrations seen at a provider whose object does not fit the shape its client reads (a null flag, a missing field), counted once per registration and problem: foreign ones are skipped, one of a subscription's own stalls it.",
		}, []string{"provider"}),
		ready: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hookwarden_subscription_ready",
			Help: "1 when the subscription's Ready condition is True, else 0; no series while it is suspended. Served by the leader only.",
		}, []string{"namespace", "name", "provider"}),
		readyProvider: map[string]string{},
	}
	for _, c := range []prometheus.Collector{m.requests, m.duration, m.rateLimited, m.unfit, m.ready} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// unregisteredMetrics are the metrics of a component given none: counted, never served.
func unregisteredMetrics() *Metrics {
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		panic(err) // a fresh registry refuses nothing
	}
	return m
}

// knowProviders creates the rate-limit series of each provider at 0, so rate() and alerts see
// the first rate limit.
func (m *Metrics) knowProviders(types []string) {
	for _, t := range types {
		m.rateLimited.WithLabelValues(t)
		m.unfit.WithLabelValues(t)
	}
}

// observeRequest records one request to the provider.
func (m *Metrics) observeRequest(provider, op string, took time.Duration, err error) {
	result := resultLabel(err)
	m.requests.WithLabelValues(provider, op, result).Inc()
	m.duration.WithLabelValues(provider, op, result).Observe(took.Seconds())
	if err != nil && providers.KindOf(err) == providers.RateLimited {
		m.rateLimited.WithLabelValues(provider).Inc()
	}
}

// rateLimitWait records a request not sent because the credential's rate limit is in force.
func (m *Metrics) rateLimitWait(provider string) { m.rateLimited.WithLabelValues(provider).Inc() }

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

// resultLabel is "ok" or the error's class in snake_case (rate_limited), as the receiver
// writes its results.
func resultLabel(err error) string {
	if err == nil {
		return "ok"
	}
	return snakeCase(providers.KindOf(err).String())
}

func snakeCase(s string) string {
	var b strings.Builder
	for i, r := range s {
		if unicode.IsUpper(r) {
			if i > 0 {
				b.WriteByte('_')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}
