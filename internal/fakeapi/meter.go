package fakeapi

import (
	"cmp"
	"flag"
	"slices"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Meter makes a fake cost what its provider costs, for benchmarks: every credential gets a
// token bucket at the provider's documented rate (a request beyond it is refused with the
// provider's own rate-limit answer, which the fake supplies), every request waits a fixed
// latency, and requests are counted per route so a benchmark can read how many calls an
// operator made of each kind. A nil *Meter meters nothing. It is safe for concurrent use.
type Meter struct {
	limit   rate.Limit
	burst   int
	latency time.Duration
	now     func() time.Time
	observe func(credential string, rt Route, at time.Time, limited bool)
	only    map[Route]bool // nil: the rate limits every route

	mu      sync.Mutex
	buckets map[string]*rate.Limiter
	counts  map[Route]*RouteCount
}

// MeterOptions configure a Meter.
type MeterOptions struct {
	// Rate is the requests per second one credential may make; 0 means unlimited.
	Rate float64
	// Burst is how many requests a credential may make at once; 0 means one second's worth
	// (at least one).
	Burst int
	// Latency is added to every request, as the provider's round trip would be.
	Latency time.Duration
	// Now is the clock of the token buckets; nil means time.Now.
	Now func() time.Time
	// Observe, when set, is told of every request the meter counts: the credential that made
	// it ("" for none), its route, when it came (by Now) and whether it was refused for the
	// rate. It lets a benchmark tell whose requests fell when, which the counts by route cannot
	// say; the meter's table still keeps no credential, and what Observe keeps of one is the
	// caller's business. It is called outside the meter's lock, from many requests at once.
	Observe func(credential string, rt Route, at time.Time, limited bool)
	// Routes, when set, are the only routes the rate limits, for a provider that limits one
	// kind of request on its own (GitLab: hook creation, 5 a minute per project); requests to
	// the others are counted, observed and delayed, never refused, and spend no rate.
	Routes []Route
}

// Route names the requests a Meter counts together: a method and a path pattern with the ids
// taken out (each fake chooses its patterns).
type Route struct {
	Method  string `json:"method"`
	Pattern string `json:"pattern"`
}

// RouteCount is what a Meter saw of one route: requests received, and how many of them it
// refused for the credential's rate.
type RouteCount struct {
	Route
	Requests int `json:"requests"`
	Limited  int `json:"limited"`
}

// NewMeter returns a Meter with empty counters.
func NewMeter(o MeterOptions) *Meter {
	m := &Meter{limit: rate.Inf, burst: o.Burst, latency: o.Latency, now: o.Now, observe: o.Observe, buckets: map[string]*rate.Limiter{}, counts: map[Route]*RouteCount{}}
	if o.Rate > 0 {
		m.limit = rate.Limit(o.Rate)
		if m.burst <= 0 {
			m.burst = max(1, int(o.Rate))
		}
	}
	if m.now == nil {
		m.now = time.Now
	}
	if len(o.Routes) > 0 {
		m.only = map[Route]bool{}
		for _, rt := range o.Routes {
			m.only[rt] = true
		}
	}
	return m
}

// admit counts one request and reports whether its credential may make it now; when not, wait
// is how long until it may. Requests without a credential are counted and never limited (the
// fake refuses them anyway).
func (m *Meter) admit(credential string, rt Route) (wait time.Duration, ok bool) {
	now := m.now()
	wait, ok = m.take(credential, rt, now)
	if m.observe != nil {
		m.observe(credential, rt, now, !ok)
	}
	return wait, ok
}

// take is admit's part under the lock: the count and the credential's bucket.
func (m *Meter) take(credential string, rt Route, now time.Time) (wait time.Duration, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := m.counts[rt]
	if c == nil {
		c = &RouteCount{Route: rt}
		m.counts[rt] = c
	}
	c.Requests++
	if credential == "" || m.limit == rate.Inf || (m.only != nil && !m.only[rt]) {
		return 0, true
	}
	id := Label("", credential) // the table never keeps a credential itself
	b := m.buckets[id]
	if b == nil {
		b = rate.NewLimiter(m.limit, m.burst)
		m.buckets[id] = b
	}
	if b.AllowN(now, 1) {
		return 0, true
	}
	c.Limited++
	missing := 1 - b.TokensAt(now)
	return time.Duration(missing / float64(m.limit) * float64(time.Second)), false
}

// Counts returns the counters, sorted by pattern and method.
func (m *Meter) Counts() []RouteCount {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]RouteCount, 0, len(m.counts))
	for _, c := range m.counts {
		out = append(out, *c)
	}
	slices.SortFunc(out, func(a, b RouteCount) int {
		return cmp.Or(cmp.Compare(a.Pattern, b.Pattern), cmp.Compare(a.Method, b.Method))
	})
	return out
}

// Metered applies m to one request after the injected faults t were taken: it adds m's latency
// and, when the credential has spent its rate, fails the request with limited(wait), the
// provider's rate-limit answer (wait: until the credential may ask again). A failure already
// chosen by a fault wins, but the request still spends rate, as it would at the provider.
func Metered[F any](m *Meter, t Taken[F], credential string, rt Route, limited func(wait time.Duration) *F) Taken[F] {
	if m == nil {
		return t
	}
	t.Latency += m.latency
	if wait, ok := m.admit(credential, rt); !ok && t.Fail == nil {
		t.Fail, t.AfterApply = limited(wait), false
	}
	return t
}

// MeterFlags defines the fake binaries' -rate, -burst and -latency flags on fs; build returns
// the Meter they describe (counting only, when all are zero).
func MeterFlags(fs *flag.FlagSet) (build func() *Meter) {
	var o MeterOptions
	fs.Float64Var(&o.Rate, "rate", 0, "requests per second allowed per credential, answered with the provider's rate-limit response beyond it (0 = unlimited)")
	fs.IntVar(&o.Burst, "burst", 0, "requests a credential may make at once (0 = one second's worth of -rate)")
	fs.DurationVar(&o.Latency, "latency", 0, "added to every request, like the provider's round trip (e.g. 20ms)")
	return func() *Meter { return NewMeter(o) }
}
