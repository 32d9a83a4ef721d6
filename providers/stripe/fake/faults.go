package fake

import (
	"time"

	"github.com/hookwarden/hookwarden/internal/fakeapi"
)

// Fault makes matching requests slow or fail, to test the operator's handling of rate limits,
// outages and timeouts. Faults are applied after the request is logged and before
// authentication, as a load balancer or rate limiter in front of the API would.
type Fault struct {
	Method     string // "" matches any method
	PathPrefix string // "" matches any path
	// APIKey, when set, limits the fault to requests made with that key (every account of the
	// fake shares Stripe's paths).
	APIKey string
	// Status is the HTTP status to fail with; 0 means no failure (a latency-only fault).
	Status int
	// Type defaults to "api_error" for 5xx and "invalid_request_error" otherwise.
	Type    string
	Code    string // e.g. "rate_limit" or "lock_timeout" with 429
	Message string // defaults to a Stripe-like message
	// RetryAfter, if positive, is sent as a Retry-After header (whole seconds, rounded up).
	// stripe-go v76 ignores it; the operator may not.
	RetryAfter time.Duration
	// Latency delays the request. The delay ends early if the client gives up, and then the
	// request is not processed at all.
	Latency time.Duration
	// Times is how many requests the fault applies to; 0 means until removed.
	Times int
	// AfterApply processes the request normally (state changes, idempotent result stored) and
	// only then answers with the fault: the "response lost" case, where a retry with the same
	// Idempotency-Key must get the original result back.
	AfterApply bool
}

// Inject adds a fault and returns a function that removes it (safe to call more than once).
// All matching latency-only faults apply; of the faults with a Status, the earliest injected
// one that matches wins. Each applied fault uses up one of its Times.
func (s *Server) Inject(f Fault) (remove func()) {
	rule := fakeapi.Rule{Method: f.Method, PathPrefix: f.PathPrefix, Credential: f.APIKey, Latency: f.Latency, Times: f.Times, AfterApply: f.AfterApply}
	var fail *Fault
	if f.Status != 0 {
		fail = &f
	}
	return s.faults.Inject(rule, fail)
}

// ClearFaults removes every injected fault.
func (s *Server) ClearFaults() { s.faults.Clear() }
