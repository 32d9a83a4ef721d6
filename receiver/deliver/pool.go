package deliver

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"

	"github.com/hookwarden/hookwarden/internal/logkeys"
	"github.com/hookwarden/hookwarden/receiver/store"
)

// Defaults for Options, and for a job whose event and sink both leave MaxAttempts unset.
const (
	DefaultWorkers      = 8
	DefaultLease        = 30 * time.Second
	DefaultPollInterval = 100 * time.Millisecond
	DefaultGrace        = 15 * time.Second
	DefaultMaxAttempts  = 10
)

// reportTimeout bounds one Complete, Retry or Dead call. It does not follow Run's context, so
// the outcome of a delivery that finished during shutdown is still recorded.
const reportTimeout = 10 * time.Second

// errNoSink retries a job whose subscription, or its sink, is gone: the user may be recreating
// it, and a dead letter would need a manual replay.
var errNoSink = errors.New("no sink configured")

// Sink is where a subscription's events go.
type Sink struct {
	URL string
	// MaxAttempts applies only to jobs whose event does not carry its own.
	MaxAttempts int
}

// Options configure a Pool; zero values take the defaults.
type Options struct {
	// Workers bounds concurrent deliveries (default 8).
	Workers int
	// Lease is how long a job stays with its worker (default 30 s). A crashed worker's job is
	// delivered again once its lease expires, so Lease must exceed the Sender's timeout.
	Lease time.Duration
	// PollInterval is how often the queue is checked for due jobs (default 100 ms).
	PollInterval time.Duration
	// Wake, when set, makes the pool check the queue at once; the receiver signals it after
	// committing new claims.
	Wake <-chan struct{}
	// Grace is how long Run waits for in-flight deliveries when its context ends (default 15 s);
	// after it they are cancelled and rescheduled.
	Grace   time.Duration
	Backoff Backoff
	// Now is the clock for leases, retry times and latency (default time.Now).
	Now     func() time.Time
	Logger  logr.Logger
	Metrics *Metrics
}

// Pool leases due jobs from the store and delivers them to their subscription's sink.
type Pool struct {
	st      store.Store
	sender  *Sender
	resolve func(subscription string) (Sink, bool)
	opts    Options
	log     logr.Logger
}

// New returns a Pool. resolve looks up the current sink of a subscription ("namespace/name");
// it is called once per attempt, so a changed sink URL applies to the next attempt.
func New(st store.Store, sender *Sender, resolve func(subscription string) (Sink, bool), opts Options) *Pool {
	if opts.Workers <= 0 {
		opts.Workers = DefaultWorkers
	}
	if opts.Lease <= 0 {
		opts.Lease = DefaultLease
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = DefaultPollInterval
	}
	if opts.Grace <= 0 {
		opts.Grace = DefaultGrace
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Pool{
		st:      st,
		sender:  sender,
		resolve: resolve,
		opts:    opts,
		log:     opts.Logger,
	}
}

// Run delivers jobs until ctx ends, then waits for in-flight deliveries (up to Options.Grace)
// and returns. Store errors are logged and retried at the next poll; Run returns an error only
// for an unusable configuration.
func (p *Pool) Run(ctx context.Context) error {
	switch {
	case p.st == nil || p.sender == nil || p.resolve == nil:
		return errors.New("deliver: pool needs a store, a sender and a sink resolver")
	case p.opts.Lease <= p.sender.Timeout():
		return fmt.Errorf("deliver: lease %s must exceed the sender timeout %s, or a slow delivery is leased twice",
			p.opts.Lease, p.sender.Timeout())
	}

	// Deliveries outlive ctx by up to the grace period.
	workCtx, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()
	done := make(chan struct{}, p.opts.Workers)
	inflight := 0

	ticker := time.NewTicker(p.opts.PollInterval)
	defer ticker.Stop()

	// Leased jobs wait in ready until a worker is free. The pool leases ahead, up to Workers
	// jobs beyond those in flight, and leases again only once ready has fallen to half of
	// that: each Lease is a commit, and leasing one job per freed worker made the leases, not
	// the sink, set the pace at which a backlog drains. Jobs start in the order they were
	// leased, which is the queue's order.
	var ready []store.Job
	// want is set when the queue may hold due jobs.
	want := true
	for {
		for len(ready) > 0 && inflight < p.opts.Workers && ctx.Err() == nil {
			j := ready[0]
			ready = ready[1:]
			if p.opts.Now().Add(p.sender.Timeout()).After(j.LeaseUntil) {
				// Waited so long that its lease could end mid-delivery: give it back.
				p.release(workCtx, p.jobLog(j), j, 0, errors.New("lease too close to its end to start the delivery"))
				continue
			}
			inflight++
			go func() {
				p.deliver(workCtx, j)
				done <- struct{}{}
			}()
		}
		if want && len(ready) <= p.opts.Workers/2 && ctx.Err() == nil {
			n := 2*p.opts.Workers - inflight - len(ready)
			jobs, err := p.st.Lease(ctx, n, p.opts.Now(), p.opts.Lease)
			if err != nil && ctx.Err() == nil {
				p.log.Error(err, "Leasing jobs failed")
			}
			ready = append(ready, jobs...)
			// A full batch suggests more due jobs behind it.
			want = err == nil && len(jobs) == n
			if len(jobs) > 0 {
				continue // start them
			}
		}

		select {
		case <-ctx.Done():
			for _, j := range ready {
				// Leased but never offered to the sink: back to the queue, not counted.
				p.release(workCtx, p.jobLog(j), j, 0, errors.New("not started before shutdown"))
			}
			p.drain(inflight, done, cancelWork)
			return nil
		case <-done:
			inflight--
		case <-p.opts.Wake:
			want = true
		case <-ticker.C:
			want = true
		}
	}
}

func (p *Pool) drain(inflight int, done <-chan struct{}, cancelWork context.CancelFunc) {
	if inflight == 0 {
		return
	}
	p.log.Info("Waiting for in-flight deliveries", "count", inflight, "grace", p.opts.Grace)
	grace := time.NewTimer(p.opts.Grace)
	defer grace.Stop()
	for inflight > 0 {
		select {
		case <-done:
			inflight--
		case <-grace.C:
			p.log.Info("Grace period over, interrupting deliveries", "count", inflight)
			cancelWork()
		}
	}
}

// jobLog is the pool's logger with j's identifiers.
func (p *Pool) jobLog(j store.Job) logr.Logger {
	return p.log.WithValues("jobID", j.ID, logkeys.Subscription, j.Event.Subscription, logkeys.EventID, j.Event.EventID, logkeys.Attempt, j.Attempt)
}

// deliver makes one attempt at j and records its outcome.
func (p *Pool) deliver(ctx context.Context, j store.Job) {
	ev := j.Event
	log := p.jobLog(j)

	sink, ok := p.resolve(ev.Subscription)
	if !ok || sink.URL == "" {
		// Not an attempt: the event was never offered to a sink, so it must not use up the
		// budget and be dead-lettered once the sink is back.
		p.release(ctx, log, j, p.opts.Backoff.Delay(j.Attempt, 0), errNoSink)
		return
	}
	maxAttempts := ev.MaxAttempts
	if maxAttempts <= 0 {
		maxAttempts = sink.MaxAttempts
	}
	if maxAttempts <= 0 {
		maxAttempts = DefaultMaxAttempts
	}

	status, err := p.sender.Send(ctx, sink.URL, ev)
	if status != 0 {
		log = log.WithValues("status", status)
	}
	if err == nil {
		now := p.opts.Now()
		p.opts.Metrics.attempt(ResultDelivered)
		p.opts.Metrics.delivered(now.Sub(ev.ReceivedAt))
		if p.report(ctx, log, func(ctx context.Context) error { return p.st.Complete(ctx, j, now) }) {
			log.V(1).Info("Delivered")
		}
		return
	}

	var de *Error
	if !errors.As(err, &de) {
		de = &Error{Retryable: true, Err: err}
	}
	switch {
	case ctx.Err() != nil:
		// Shutdown cut the attempt short; not the sink's fault, so let another worker go now
		// without counting it.
		p.release(ctx, log, j, 0, fmt.Errorf("delivery interrupted by shutdown: %w", err))
	case !de.Retryable:
		p.dead(ctx, log, j, err)
	case j.Attempt >= maxAttempts:
		p.dead(ctx, log, j, fmt.Errorf("gave up after %d attempts: %w", j.Attempt, err))
	default:
		p.retry(ctx, log, j, p.opts.Backoff.Delay(j.Attempt, de.RetryAfter), err)
	}
}

func (p *Pool) retry(ctx context.Context, log logr.Logger, j store.Job, wait time.Duration, cause error) {
	p.opts.Metrics.attempt(ResultRetry)
	at := p.opts.Now().Add(wait)
	if p.report(ctx, log, func(ctx context.Context) error { return p.st.Retry(ctx, j, at, cause.Error()) }) {
		log.Info("Delivery failed, will retry", "error", cause.Error(), "retryAt", at)
	}
}

func (p *Pool) release(ctx context.Context, log logr.Logger, j store.Job, wait time.Duration, cause error) {
	p.opts.Metrics.attempt(ResultRetry)
	at := p.opts.Now().Add(wait)
	if p.report(ctx, log, func(ctx context.Context) error { return p.st.Release(ctx, j, at, cause.Error()) }) {
		log.Info("Delivery postponed, not counted as an attempt", logkeys.Reason, cause.Error(), "retryAt", at)
	}
}

func (p *Pool) dead(ctx context.Context, log logr.Logger, j store.Job, cause error) {
	p.opts.Metrics.attempt(ResultDead)
	if p.report(ctx, log, func(ctx context.Context) error { return p.st.Dead(ctx, j, cause.Error()) }) {
		p.opts.Metrics.deadLetter()
		log.Info("Delivery failed, dead-lettered", "error", cause.Error())
	}
}

// report records an outcome and tells whether the store took it. A lost lease means another
// worker owns the job now and will record its own outcome; any other failure leaves the job to
// be leased again when its lease expires.
func (p *Pool) report(ctx context.Context, log logr.Logger, record func(context.Context) error) bool {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), reportTimeout)
	defer cancel()
	err := record(ctx)
	switch {
	case err == nil:
		return true
	case errors.Is(err, store.ErrLeaseLost):
		log.Info("Lease lost before the outcome was recorded; another worker owns the job")
	default:
		log.Error(err, "Recording the delivery outcome failed; the job runs again after its lease")
	}
	return false
}
