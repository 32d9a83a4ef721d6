package controllers

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookwarden/hookwarden/providers"
)

// providerMetrics count what the manager asks of providers. They join controller-runtime's
// registry, served on --metrics-bind-address next to its reconcile metrics.
type providerMetrics struct {
	requests *prometheus.CounterVec
}

func newProviderMetrics(reg prometheus.Registerer) *providerMetrics {
	return &providerMetrics{
		requests: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hookwarden_provider_requests_total",
			Help: "Requests to provider APIs by provider, operation (list, create, update, delete) and outcome (ok or the error class).",
		}, []string{"provider", "operation", "outcome"})),
	}
}

// register adds c to reg, or returns the collector already registered under the same name
// (several managers in one test process share controller-runtime's registry).
func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
		panic(err)
	}
	return c
}

func (m *providerMetrics) observe(provider, op string, err error) {
	outcome := "ok"
	if err != nil {
		outcome = providers.KindOf(err).String()
	}
	m.requests.WithLabelValues(provider, op, outcome).Inc()
}
