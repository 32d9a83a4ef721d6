package fake

import (
	"strings"
	"time"
)

// Fault makes matching requests slow or fail, to test the operator's handling of rate limits,
// outages and timeouts. Faults are applied after the request is logged and before
// authentication, as a load balancer or rate limiter in front of the API would.
type Fault struct {
	Method     string // "" matches any method
	PathPrefix string // "" matches any path
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

type faultEntry struct {
	id   uint64
	f    Fault
	left int // remaining uses when f.Times > 0
}

// Inject adds a fault and returns a function that removes it (safe to call more than once).
// All matching latency-only faults apply; of the faults with a Status, the earliest injected
// one that matches wins. Each applied fault uses up one of its Times.
func (s *Server) Inject(f Fault) (remove func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faultSeq++
	id := s.faultSeq
	s.faults = append(s.faults, &faultEntry{id: id, f: f, left: f.Times})
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.dropFault(id)
	}
}

// ClearFaults removes every injected fault.
func (s *Server) ClearFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = nil
}

func (s *Server) dropFault(id uint64) {
	for i, fe := range s.faults {
		if fe.id == id {
			s.faults = append(s.faults[:i:i], s.faults[i+1:]...)
			return
		}
	}
}

// takeFaults picks the faults for one request and uses them up. Callers hold s.mu.
func (s *Server) takeFaults(method, path string) (latency time.Duration, fail *Fault) {
	var used []uint64
	for _, fe := range s.faults {
		if !matches(fe.f.Method, fe.f.PathPrefix, method, path) {
			continue
		}
		if fe.f.Status != 0 {
			if fail != nil {
				continue
			}
			f := fe.f
			fail = &f
		}
		latency += fe.f.Latency
		if fe.f.Times > 0 {
			fe.left--
			if fe.left <= 0 {
				used = append(used, fe.id)
			}
		}
	}
	for _, id := range used {
		s.dropFault(id)
	}
	return latency, fail
}

func matches(wantMethod, prefix, method, path string) bool {
	return (wantMethod == "" || strings.EqualFold(wantMethod, method)) && strings.HasPrefix(path, prefix)
}
