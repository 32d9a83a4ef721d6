package account

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"
	"golang.org/x/time/rate"

	"github.com/hookwarden/hookwarden/internal/telemetry"
	"github.com/hookwarden/hookwarden/providers"
)

// paced takes a token of bucket for one HTTP request; on a traced request (the client span of
// telemetry.Transport in ctx) a wait for it of minPaceWait or more goes on the span.
func paced(ctx context.Context, bucket *rate.Limiter) error {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return bucket.Wait(ctx)
	}
	start := time.Now()
	err := bucket.Wait(ctx)
	if waited := time.Since(start); waited >= minPaceWait {
		span.SetAttributes(telemetry.AttrRateLimitWait.Float64(waited.Seconds()))
	}
	return err
}

// minPaceWait is the shortest wait for a token a span reports: a token at hand takes
// microseconds, which is no wait.
const minPaceWait = time.Millisecond

// limiter paces the requests made with one credential: a token bucket, and after a rate-limit
// answer a wait that every account using the credential honours (the provider limits the
// credential, not the account). A credential belongs to one provider, so one backoff policy,
// the provider's, serves the limiter.
type limiter struct {
	bucket *rate.Limiter
	policy providers.Backoff
	now    func() time.Time
	jitter func() float64

	mu sync.Mutex
	// until is when the provider may be asked again; streak counts rate limits in a row.
	until  time.Time
	streak int
	// redeliver is the provider's own pace for redelivery requests (RedeliverRate), made on
	// first use.
	redeliver *rate.Limiter
}

// newLimiter paces at r and backs off by policy (providers.DefaultRateLimitBackoff if zero).
func newLimiter(r providers.Rate, policy providers.Backoff, now func() time.Time, jitter func() float64) *limiter {
	if policy.IsZero() {
		policy = providers.DefaultRateLimitBackoff
	}
	return &limiter{bucket: rate.NewLimiter(rate.Limit(r.PerSecond), r.Burst), policy: policy, now: now, jitter: jitter}
}

// blocked returns a RateLimited error while the provider's last rate limit is still in force:
// asking again would only spend quota. (The token bucket paces each HTTP request, through the
// client's providers.Config.Pace.)
func (l *limiter) blocked() error {
	l.mu.Lock()
	left := l.until.Sub(l.now())
	l.mu.Unlock()
	if left > 0 {
		return &providers.Error{Kind: providers.RateLimited, Message: "waiting out the provider's rate limit for this credential", RetryAfter: left}
	}
	return nil
}

// observe records the outcome of a request: a rate limit sets the credential's wait (what the
// provider stated, exactly, or the provider's backoff for the streak so far); a success ends
// the streak. It returns err, with a RateLimited error's RetryAfter set to the wait decided here.
func (l *limiter) observe(err error) error {
	var pe *providers.Error
	l.mu.Lock()
	defer l.mu.Unlock()
	if !errors.As(err, &pe) || pe.Kind != providers.RateLimited {
		if err == nil {
			l.streak = 0
		}
		return err
	}
	wait := pe.RetryAfter
	if wait <= 0 {
		wait = l.backoff()
	}
	l.streak++
	l.until = l.now().Add(wait)
	out := *pe
	out.RetryAfter = wait
	return &out
}

// backoff is the wait for the next rate limit of the streak that states none: the policy's step
// for it, plus jitter (so credentials refused together do not come back in step) of up to a
// quarter of it, less when the policy grows by less than that, so waits never shrink within a
// streak, and never past the policy's cap.
func (l *limiter) backoff() time.Duration {
	p := l.policy
	d := p.Step(l.streak)
	spread := min(0.25, max(p.Factor, 1)-1)
	j := time.Duration(float64(d) * spread * min(max(l.jitter(), 0), 1))
	return min(d+j, max(p.Max, p.First))
}
