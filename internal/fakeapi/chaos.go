package fakeapi

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"time"
)

// ChaosKind is the failure chaos answers a request with.
type ChaosKind string

// The kinds of failure chaos injects. RateLimited is answered before the request is applied,
// as a rate limiter in front of the API answers; the others are as likely after applying it as
// before (the "created, but the answer was lost" case).
const (
	ChaosRateLimited ChaosKind = "429"
	ChaosInternal    ChaosKind = "500"
	ChaosBadGateway  ChaosKind = "502"
	ChaosUnavailable ChaosKind = "503"
	// ChaosTimeout holds the request until the client gives up (or Hold passes, then 504).
	ChaosTimeout ChaosKind = "timeout"
)

// Status is the HTTP status k answers with: its own for the server errors, 429 for a rate
// limit (each fake adds its provider's body and headers), and 504 for a timeout that outlives
// its hold, as a gateway in front would send.
func (k ChaosKind) Status() int {
	switch k {
	case ChaosRateLimited:
		return http.StatusTooManyRequests
	case ChaosInternal:
		return http.StatusInternalServerError
	case ChaosBadGateway:
		return http.StatusBadGateway
	case ChaosUnavailable:
		return http.StatusServiceUnavailable
	}
	return http.StatusGatewayTimeout
}

// chaosMix is the share of each kind among the failed requests.
var chaosMix = []struct {
	kind   ChaosKind
	weight int
}{
	{ChaosRateLimited, 30},
	{ChaosInternal, 15},
	{ChaosBadGateway, 10},
	{ChaosUnavailable, 15},
	{ChaosTimeout, 30},
}

// ChaosOptions configure Chaos.
type ChaosOptions struct {
	// Rate is the share of requests that fail, 0 to 1.
	Rate float64
	// Seed makes the sequence of decisions repeatable (the requests' order is not).
	Seed uint64
	// Hold is the longest a timeout holds a request (default 30s): longer than the client's
	// timeout, so the client is the one that gives up.
	Hold time.Duration
}

// Decision is what chaos chose for one request. The zero value injects nothing.
type Decision struct {
	Kind ChaosKind
	// AfterApply: the request is applied (state changes, idempotent result stored) before it
	// fails.
	AfterApply bool
	// Hold is how long a timeout holds the request at most.
	Hold time.Duration
}

// String names the decision for counters: "503 after apply", "timeout before apply".
func (d Decision) String() string {
	when := "before apply"
	if d.AfterApply {
		when = "after apply"
	}
	return string(d.Kind) + " " + when
}

// Chaos fails a random share of requests with the failures a real API and the network
// between produce. It is safe for concurrent use; a nil *Chaos injects nothing.
type Chaos struct {
	opts ChaosOptions

	mu       sync.Mutex
	rng      *rand.Rand
	requests int
	counts   map[string]int
}

// NewChaos returns a Chaos failing o.Rate of the requests.
func NewChaos(o ChaosOptions) (*Chaos, error) {
	if o.Rate < 0 || o.Rate > 1 {
		return nil, fmt.Errorf("fault rate %v is not between 0 and 1", o.Rate)
	}
	if o.Hold <= 0 {
		o.Hold = 30 * time.Second
	}
	return &Chaos{opts: o, rng: rand.New(rand.NewPCG(o.Seed, o.Seed^0x9e3779b97f4a7c15)), counts: map[string]int{}}, nil
}

// Decide picks the fate of one request and counts it.
func (c *Chaos) Decide() Decision {
	if c == nil {
		return Decision{}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.requests++
	if c.rng.Float64() >= c.opts.Rate {
		return Decision{}
	}
	total := 0
	for _, m := range chaosMix {
		total += m.weight
	}
	n := c.rng.IntN(total)
	d := Decision{Hold: c.opts.Hold}
	for _, m := range chaosMix {
		if n < m.weight {
			d.Kind = m.kind
			break
		}
		n -= m.weight
	}
	d.AfterApply = d.Kind != ChaosRateLimited && c.rng.IntN(2) == 0
	c.counts[d.String()]++
	return d
}

// ChaosCounts is what chaos did so far.
type ChaosCounts struct {
	Rate     float64 `json:"rate"`
	Seed     uint64  `json:"seed"`
	Requests int     `json:"requests"`
	// Injected counts failures by decision ("503 after apply").
	Injected map[string]int `json:"injected"`
}

// Counts returns a copy of the counters.
func (c *Chaos) Counts() ChaosCounts {
	if c == nil {
		return ChaosCounts{Injected: map[string]int{}}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return ChaosCounts{Rate: c.opts.Rate, Seed: c.opts.Seed, Requests: c.requests, Injected: maps.Clone(c.counts)}
}

// Total is the number of injected failures.
func (cc ChaosCounts) Total() int {
	n := 0
	for _, v := range cc.Injected {
		n += v
	}
	return n
}

// Keys returns the decisions counted, sorted.
func (cc ChaosCounts) Keys() []string {
	return slices.Sorted(maps.Keys(cc.Injected))
}

// ServeChaos answers one request as d says. apply processes it; fail renders the provider's
// answer for d (a timeout that outlives its Hold answers through fail too, as a gateway's 504
// would). ok is false when the client gave up during a timeout, which is what a timeout is for.
// A zero d just applies.
func ServeChaos[R any](ctx context.Context, d Decision, apply func() R, fail func(Decision) R) (res R, ok bool) {
	if d.Kind == "" {
		return apply(), true
	}
	if d.AfterApply {
		res = apply()
	}
	if d.Kind == ChaosTimeout {
		t := time.NewTimer(d.Hold)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return res, false
		case <-t.C:
		}
	}
	return fail(d), true
}

// ChaosFlags defines the fake binaries' --fault-rate, --fault-seed and --fault-hold on fs; the
// function it returns builds the Chaos they describe once fs is parsed.
func ChaosFlags(fs *flag.FlagSet) func() (*Chaos, error) {
	rate := fs.Float64("fault-rate", 0, "share of API requests (0 to 1) failed at random: rate limited, 500/502/503, or held until the client times out, before or after applying them")
	seed := fs.Uint64("fault-seed", 1, "seed of --fault-rate's choices")
	hold := fs.Duration("fault-hold", 30*time.Second, "longest an injected timeout holds a request (then 504); make it longer than the client's timeout")
	return func() (*Chaos, error) {
		return NewChaos(ChaosOptions{Rate: *rate, Seed: *seed, Hold: *hold})
	}
}
