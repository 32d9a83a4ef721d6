package deliver

import (
	"math/rand/v2"
	"time"
)

// Defaults for Backoff.
const (
	DefaultBackoffBase = time.Second
	DefaultBackoffMax  = time.Hour
)

// Backoff is exponential backoff with full jitter: attempt n waits a uniformly random duration in
// [0, min(Max, Base·2^(n-1))], but never less than the sink's Retry-After (itself capped by Max).
// Full jitter spreads the retries of many events that failed together, such as during a sink
// outage, instead of sending them back in waves. The zero value uses the defaults.
type Backoff struct {
	// Base is the ceiling of the first retry's wait (default 1 s).
	Base time.Duration
	// Max caps every wait, Retry-After included (default 1 h).
	Max time.Duration
	// Rand returns a uniform value in [0, n); it must be safe for concurrent use.
	// Default: math/rand/v2.Int64N.
	Rand func(n int64) int64
}

// ceiling is the longest wait (Max, or its default).
func (b Backoff) ceiling() time.Duration {
	if b.Max <= 0 {
		return DefaultBackoffMax
	}
	return b.Max
}

// Delay is how long to wait after failed attempt n (1-based) before trying again.
func (b Backoff) Delay(attempt int, retryAfter time.Duration) time.Duration {
	base, maxWait := b.Base, b.Max
	if base <= 0 {
		base = DefaultBackoffBase
	}
	if maxWait <= 0 {
		maxWait = DefaultBackoffMax
	}
	randN := b.Rand
	if randN == nil {
		randN = rand.Int64N
	}

	ceiling := maxWait
	if attempt < 1 {
		attempt = 1
	}
	// Doubling base (attempt-1) times stays below maxWait only while it does not overflow.
	if shift := attempt - 1; shift < 63 && base <= maxWait>>shift {
		ceiling = base << shift
	}
	d := maxWait
	if ceiling < maxDuration {
		d = time.Duration(randN(int64(ceiling) + 1))
	}

	floor := min(retryAfter, maxWait)
	return max(d, floor)
}
