package fake

import (
	"net/http"
	"strconv"
	"time"

	"github.com/hookwarden/hookwarden/internal/fakeapi"
)

// WithChaos fails a random share of API requests as c decides (cmd/fakegithub --fault-rate):
// GitHub's secondary rate limit (429 with retry-after), 500/502/503, or a timeout, before or
// after applying the request. Faults injected with Inject take precedence.
func WithChaos(c *fakeapi.Chaos) Option { return func(s *Server) { s.chaos = c } }

// Chaos returns what chaos injected so far (zero counts without WithChaos).
func (s *Server) Chaos() fakeapi.ChaosCounts { return s.chaos.Counts() }

// chaosFault is the fault that answers for a chaos decision. A timeout that outlives its hold
// gets the 504 a gateway in front would send.
func chaosFault(d fakeapi.Decision) *Fault {
	switch d.Kind {
	case fakeapi.ChaosRateLimited:
		f := SecondaryLimit(http.StatusTooManyRequests, time.Second)
		return &f
	case fakeapi.ChaosTimeout:
		return &Fault{Status: http.StatusGatewayTimeout}
	}
	status, err := strconv.Atoi(string(d.Kind))
	if err != nil {
		status = http.StatusInternalServerError
	}
	return &Fault{Status: status}
}
