package account

import (
	"strings"
	"time"
	"unicode"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookwarden/hookwarden/providers"
)

// Metrics are the series of requests to provider APIs, counted by the accounts.
type Metrics struct {
	requests    *prometheus.CounterVec
	duration    *prometheus.HistogramVec
	rateLimited *prometheus.CounterVec
	unfit       *prometheus.CounterVec
}

// NewMetrics creates the provider request series and registers them with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hookwarden_provider_requests_total",
			Help: "Requests to provider APIs by provider, operation (list, create, update, delete, ping, fetch_secret; recovery's look, missed, events, redeliver, recover_since, reenable, health) and result (ok or the error class: transient, not_found, permanent, unauthorized, rate_limited, quota_exceeded, already_exists).",
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
	}
	for _, c := range []prometheus.Collector{m.requests, m.duration, m.rateLimited, m.unfit} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// UnregisteredMetrics count, never served.
func UnregisteredMetrics() *Metrics {
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
func (m *Metrics) rateLimitWait(provider string) {
	m.rateLimited.WithLabelValues(provider).Inc()
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
