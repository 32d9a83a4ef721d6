package fake

import (
	"github.com/hookwarden/hookwarden/internal/fakeapi"
)

// WithChaos fails a random share of API requests as c decides (cmd/fakestripe --fault-rate):
// 429 rate_limit, 500/502/503 api_error, or a timeout, before or after applying the request.
// Faults injected with Inject take precedence.
func WithChaos(c *fakeapi.Chaos) Option { return func(s *Server) { s.chaos = c } }

// Chaos returns what chaos injected so far (zero counts without WithChaos).
func (s *Server) Chaos() fakeapi.ChaosCounts { return s.chaos.Counts() }

// chaosResult is Stripe's answer for an injected failure. A rate limit is Stripe's 429 with
// code rate_limit and no Retry-After (Stripe sends none, and stripe-go would not read it).
func chaosResult(d fakeapi.Decision) result {
	f := Fault{Status: d.Kind.Status()}
	if d.Kind == fakeapi.ChaosRateLimited {
		f.Code = "rate_limit"
	}
	return faultResult(&f)
}
