package fake

import (
	"time"

	"github.com/hookwarden/hookwarden/internal/fakeapi"
)

// WithChaos fails a random share of API requests as c decides (cmd/fakegithub --fault-rate):
// GitHub's secondary rate limit (429 with retry-after), 500/502/503, or a timeout, before or
// after applying the request. Faults injected with Inject take precedence.
func WithChaos(c *fakeapi.Chaos) Option { return func(s *Server) { s.chaos = c } }

// Chaos returns what chaos injected so far (zero counts without WithChaos).
func (s *Server) Chaos() fakeapi.ChaosCounts { return s.chaos.Counts() }

// chaosFault is the fault that answers for a chaos decision; a rate limit is GitHub's
// secondary limit with retry-after.
func chaosFault(d fakeapi.Decision) *Fault {
	if d.Kind == fakeapi.ChaosRateLimited {
		f := SecondaryLimit(d.Kind.Status(), time.Second)
		return &f
	}
	return &Fault{Status: d.Kind.Status()}
}
