package fake

import (
	"time"

	"github.com/hookwarden/hookwarden/internal/fakeapi"
)

// Fault makes matching requests slow or fail: outages, timeouts, GitHub's secondary rate
// limits. Faults are applied after the request is logged and before authentication, as a load
// balancer or abuse detector in front of the API would; they cost no rate limit.
type Fault struct {
	Method string // "" matches any method
	// PathPrefix matches the request path without a GitHub Enterprise /api/v3 prefix,
	// case-insensitively; "" matches any path.
	PathPrefix string
	// Status is the HTTP status to fail with; 0 means no failure (a latency-only fault).
	Status int
	// Message defaults to GitHub's secondary-limit message when Secondary, else the status text.
	Message string
	// Secondary answers as GitHub's secondary rate limit does (use Status 403 or 429).
	Secondary bool
	// RetryAfter, if positive, is sent as retry-after (whole seconds, rounded up).
	RetryAfter time.Duration
	// HTML answers with an HTML page instead of JSON, like a proxy in front of GitHub.
	HTML bool
	// Latency delays the request; the delay ends early if the client gives up, and then the
	// request is not processed at all.
	Latency time.Duration
	// Times is how many requests the fault applies to; 0 means until removed.
	Times int
	// AfterApply processes the request normally and only then answers with the failure: the
	// "response lost" case (the hook was created, the client saw a 502).
	AfterApply bool
}

// SecondaryLimit is a fault that answers like GitHub's secondary rate limit with status 403 or
// 429, with a retry-after header when retryAfter > 0.
func SecondaryLimit(status int, retryAfter time.Duration) Fault {
	return Fault{Status: status, Secondary: true, RetryAfter: retryAfter}
}

// Inject adds a fault and returns a function that removes it (safe to call more than once).
// All matching latency-only faults apply; of the faults with a Status, the earliest injected
// one that matches wins. Each applied fault uses up one of its Times.
func (s *Server) Inject(f Fault) (remove func()) {
	rule := fakeapi.Rule{Method: f.Method, PathPrefix: f.PathPrefix, Latency: f.Latency, Times: f.Times, AfterApply: f.AfterApply}
	var fail *Fault
	if f.Status != 0 {
		fail = &f
	}
	return s.faults.Inject(rule, fail)
}

// ClearFaults removes every injected fault.
func (s *Server) ClearFaults() { s.faults.Clear() }
