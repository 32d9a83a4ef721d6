package controllers

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookwarden/hookwarden/account"
	"github.com/hookwarden/hookwarden/providers"
)

// A rate-limit series exists, at 0, for every provider the manager knows before any request is
// made, so rate() and the RateLimited alert see the first one; the envtest metrics spec cannot
// show this, as its registry is shared with the specs that ran before it.
func TestRateLimitSeriesExistFromStart(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	account.NewAccounts(providers.Registry{"stripe": {}, "github": {}, "rest": {}}, account.AccountOptions{Metrics: m.Provider()})
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		if f.GetName() != "hookwarden_provider_rate_limited_total" {
			continue
		}
		for _, s := range f.GetMetric() {
			for _, l := range s.GetLabel() {
				if l.GetName() == "provider" {
					got[l.GetValue()] = s.GetCounter().GetValue()
				}
			}
		}
	}
	if d := cmp.Diff(map[string]float64{"github": 0, "rest": 0, "stripe": 0}, got); d != "" {
		t.Errorf("rate-limit series before any request (-want +got):\n%s", d)
	}
}
