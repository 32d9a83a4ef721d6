package deliver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"

	"github.com/hookwarden/hookwarden/internal/logkeys"
	"github.com/hookwarden/hookwarden/internal/telemetry"
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

// ReportTimeout bounds one Lease, Complete, Retry, Release or Dead call. It does not follow
// Run's context, so the outcome of a delivery that finished during shutdown is still recorded;
// a store must stay open this long after Grace.
const ReportTimeout = 10 * time.Second

// GraceWithin is the Grace that lets Run return within shutdown: the deliveries' grace plus
// the recording of their outcomes (each up to ReportTimeout), so that a store closed after
// shutdown is still open for them. A shutdown shorter than that leaves the deliveries a
// quarter of it (most records take far less than ReportTimeout).
func GraceWithin(shutdown time.Duration) time.Duration {
	return max(shutdown-ReportTimeout, shutdown/4)
}

// errNoSink retries a job whose subscription, or its delivery spec, is gone: the user may be
// recreating it, and a dead letter would need a manual replay.
var errNoSink = errors.New("no sink configured")

// misconfiguredWait is how long the jobs of a sink that cannot take events wait before they are
// looked at again (at most the backoff's ceiling).
const misconfiguredWait = 10 * time.Second

// ResultFiltered counts a job completed without a delivery: its sink's filter does not select
// the event.
const ResultFiltered = "filtered"

// Resolver looks up the current sink named sink of a subscription ("namespace/name"); ok is
// false when the subscription has no route or no delivery spec. It is called once per attempt,
// so a changed sink applies to the next attempt.
type Resolver func(subscription, sink string) (s Sink, ok bool)

// Options configure a Pool; zero values take the defaults.
type Options struct {
	// Workers bounds concurrent deliveries (default 8).
	Workers int
	// SinkWorkers is one sink's share of the workers (default: half of Workers, at least 1):
	// while other sinks of its subscription have jobs, a sink with this many deliveries in
	// flight waits, so a slow sink never takes every worker from the others.
	SinkWorkers int
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
	// Tracing gives each attempt a span, a child of its event's delivery (nil: off).
	Tracing *telemetry.Tracing
	// Replica names this receiver on attempt spans (the pod's name).
	Replica string
}

// Pool leases due jobs from the store and delivers each to its sink.
type Pool struct {
	st      store.Store
	sender  *Sender
	resolve Resolver
	opts    Options
	log     logr.Logger
}

// New returns a Pool delivering to the sinks resolve finds.
func New(st store.Store, sender *Sender, resolve Resolver, opts Options) *Pool {
	if opts.Workers <= 0 {
		opts.Workers = DefaultWorkers
	}
	if opts.SinkWorkers <= 0 {
		opts.SinkWorkers = max(opts.Workers/2, 1)
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
// and the recording of their outcomes, and returns. Store errors are logged and retried at the
// next poll; Run returns an error only for an unusable configuration.
//
//nolint:funlen,gocognit // the poll loop and its shutdown share the in-flight bookkeeping
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
	news := make(chan workerNews, 2*p.opts.Workers)
	w := workers{perSink: map[sinkKey]int{}, pending: map[int64]time.Time{}, since: map[int64]time.Time{}}
	// A worker is free for the next job as soon as its sink has answered; the outcome is
	// recorded meanwhile. Concurrent records share a commit (the SQLite store groups them), so
	// the records of a fast sink's jobs take one transaction for many jobs instead of one per
	// worker. Up to maxRecording jobs may be waiting for their records: beyond that the
	// workers wait, so a slow ledger slows the deliveries instead of piling up outcomes.
	maxRecording := maxLeaseAhead * p.opts.Workers

	ticker := time.NewTicker(p.opts.PollInterval)
	defer ticker.Stop()

	// Leased jobs wait in ready until a worker is free. The pool leases ahead of its workers
	// (see ahead) and leases again only once ready has fallen to half of that: each Lease is a
	// commit, and leasing one job per freed worker made the leases, not the sink, set the pace
	// at which a backlog drains. Jobs start in the order they were leased, which is the
	// queue's order.
	var ready []store.Job
	// want is set when the queue may hold due jobs.
	want := true
	// A job held back for its sink's share waits this long: about when one of the sink's
	// deliveries may have ended, so a slow sink's jobs are not leased and given back on every
	// poll.
	capWait := max(p.opts.PollInterval, min(p.sender.Timeout()/4, time.Second))
	// giveBack records a leased job as not started, without holding up the loop (the
	// records of several share a commit).
	giveBack := func(j store.Job, wait time.Duration, cause error) {
		w.record(j)
		go func() {
			p.release(workCtx, p.jobLog(j), j, wait, cause, nil)
			news <- workerNews{recorded: true, id: j.ID}
		}()
	}
	// paused is set while leasing waits for the record of a job whose lease has ended.
	paused := false
	for {
		// Deliveries that ended free their workers first: a run of leases must not starve them.
		for more := true; more; {
			select {
			case n := <-news:
				w.heard(n)
			default:
				more = false
			}
		}
		for len(ready) > 0 && w.busy < p.opts.Workers && w.recording < maxRecording && ctx.Err() == nil {
			j := ready[0]
			ready = ready[1:]
			k := sinkKey{j.Event.Subscription, j.Sink}
			switch {
			case p.opts.Now().Add(p.sender.Timeout()).After(j.LeaseUntil):
				// Waited so long that its lease could end mid-delivery: give it back.
				giveBack(j, 0, errors.New("lease too close to its end to start the delivery"))
				continue
			case w.perSink[k] >= p.opts.SinkWorkers && othersBusy(w.perSink, ready, k):
				// Its sink has its share of the workers while other sinks have work (a slow
				// sink): back to the queue for a moment, so that the jobs behind it are leased
				// and go first. Alone, a sink may use every worker.
				giveBack(j, capWait, errors.New("its sink has its share of the workers busy"))
				continue
			}
			started := p.opts.Now()
			w.start(k, j, started)
			go func() {
				free := sync.OnceFunc(func() { news <- workerNews{k: k, id: j.ID, took: p.opts.Now().Sub(started)} })
				p.deliver(workCtx, j, free)
				free() // in case no outcome was recorded
				news <- workerNews{recorded: true, id: j.ID}
			}()
		}
		// A delivery running longer than the average (a sink that stopped answering) slows
		// the workers as much as the average would: leases follow it before it ends.
		slot, stuck := w.slot, false
		if age := w.oldest(p.opts.Now()); w.measured && age > slot {
			slot, stuck = age, age > 2*w.slot
		}
		ahead := p.ahead(slot, w.measured)
		if stuck && len(ready) > ahead && ctx.Err() == nil {
			// More jobs wait than will start in time: the tail goes back to the queue at once,
			// so another replica can deliver it instead of it waiting here for its lease to
			// run out. Only when a delivery is well over the average, so that the average's
			// wobble does not give jobs back and lease them again.
			for _, j := range ready[ahead:] {
				giveBack(j, 0, errors.New("the workers are held up by a slow delivery"))
			}
			ready = ready[:ahead:ahead]
		}
		leasing := want && len(ready) <= ahead/2 && ctx.Err() == nil
		// A job whose outcome or give-back this pool is still writing stays its own only while
		// its lease lasts: once that has ended, a Lease would take it back and deliver it again
		// (its record then finds the lease lost). Lease once the record is written.
		switch {
		case leasing && w.leaseEnded(p.opts.Now()):
			if !paused {
				p.log.V(1).Info("Leasing paused: recording the outcome of a job whose lease has ended", "recording", w.recording)
			}
			paused, leasing = true, false
		case leasing:
			paused = false
		}
		if leasing {
			n := p.opts.Workers + ahead - w.busy - len(ready)
			jobs, err := p.lease(ctx, n)
			if err != nil {
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
				giveBack(j, 0, errors.New("not started before shutdown"))
			}
			p.drain(&w, news, cancelWork)
			return nil
		case n := <-news:
			w.heard(n)
		case <-p.opts.Wake:
			want = true
		case <-ticker.C:
			want = true
		}
	}
}

// lease leases up to n due jobs. The Lease does not follow ctx: cut short, a PostgreSQL or
// Redis Lease may commit and still return an error, leaving its jobs leased to nobody until
// their leases end; finished, its jobs are given back at once when ctx has ended (Run).
func (p *Pool) lease(ctx context.Context, n int) ([]store.Job, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ReportTimeout)
	defer cancel()
	return p.st.Lease(ctx, n, p.opts.Now(), p.opts.Lease)
}

// maxLeaseAhead bounds the jobs a pool leases ahead of its workers, in multiples of Workers:
// one Lease is one write transaction (an fsync on SQLite) for the whole batch, so the more
// jobs it takes the less each costs; but a leased job is nobody else's until its lease ends
// (another replica sharing the store cannot take it), so a batch is not the whole backlog.
const maxLeaseAhead = 8

// ahead is how many leased jobs may wait for a worker. A job waiting in ready must start
// before half its lease is gone, and before its lease could end mid-delivery (Run gives back
// a job that waited past Lease minus the sender's timeout): with Workers workers each busy for
// about slot per job, the last of ahead jobs starts after ahead/Workers slots, so ahead is
// Workers times the slots that fit into the shorter of the two, between 1 and maxLeaseAhead.
// Run passes as slot the age of the longest-running delivery when that is longer than the
// average, so a sink that stops answering shrinks the budget before its deliveries end. Until
// a delivery has been timed it is Workers. Should the sink slow down more than the average
// follows, a job that waited until its lease could end mid-delivery is given back unsent (Run),
// never sent twice.
func (p *Pool) ahead(slot time.Duration, measured bool) int {
	k := int64(1)
	switch {
	case measured && slot <= 0:
		k = maxLeaseAhead
	case measured:
		k = min(maxLeaseAhead, max(1, int64(min(p.opts.Lease/2, p.opts.Lease-p.sender.Timeout())/slot)))
	}
	return int(k) * p.opts.Workers
}

// workerNews is a worker's news to Run: its delivery ended (k is free for the next job; took
// is how long it was busy with job id), or, later, the outcome of job id is recorded.
type workerNews struct {
	k        sinkKey
	took     time.Duration
	recorded bool
	id       int64
}

// workers is Run's bookkeeping of its deliveries.
type workers struct {
	busy      int // deliveries at their sinks
	recording int // jobs started or given back whose outcome is not recorded yet
	// pending holds the lease end of each of those jobs, by id.
	pending map[int64]time.Time
	// since holds when each delivery at its sink began, by job id.
	since   map[int64]time.Time
	perSink map[sinkKey]int
	// slot is a moving average of how long a worker is busy with one job (measured: at least
	// one timed).
	slot     time.Duration
	measured bool
}

func (w *workers) start(k sinkKey, j store.Job, at time.Time) {
	w.busy++
	w.record(j)
	w.perSink[k]++
	w.since[j.ID] = at
}

// oldest is how long the longest-running delivery has been at its sink (0: none is).
func (w *workers) oldest(now time.Time) time.Duration {
	var age time.Duration
	for _, at := range w.since {
		age = max(age, now.Sub(at))
	}
	return age
}

// record notes that j's outcome or give-back is on its way to the store.
func (w *workers) record(j store.Job) {
	w.recording++
	w.pending[j.ID] = j.LeaseUntil
}

// leaseEnded reports whether a job whose record is on its way has a lease a Lease at now would
// take back.
func (w *workers) leaseEnded(now time.Time) bool {
	for _, until := range w.pending {
		if !until.After(now) {
			return true
		}
	}
	return false
}

func (w *workers) heard(n workerNews) {
	if n.recorded {
		w.recording--
		delete(w.pending, n.id)
		return
	}
	w.busy--
	delete(w.since, n.id)
	if w.perSink[n.k]--; w.perSink[n.k] == 0 {
		delete(w.perSink, n.k)
	}
	if !w.measured {
		w.slot, w.measured = n.took, true
	} else {
		w.slot += (n.took - w.slot) / 8
	}
}

// sinkKey is one sink of one subscription.
type sinkKey struct{ subscription, sink string }

// othersBusy reports whether another sink of k's subscription has deliveries in flight or jobs
// ready. Sinks of other subscriptions do not count: the share keeps a subscription's slow sink
// from holding back its other sinks, and leaves the queue's order across subscriptions alone.
func othersBusy(perSink map[sinkKey]int, ready []store.Job, k sinkKey) bool {
	for o := range perSink {
		if o.subscription == k.subscription && o.sink != k.sink {
			return true
		}
	}
	return slices.ContainsFunc(ready, func(j store.Job) bool { return j.Event.Subscription == k.subscription && j.Sink != k.sink })
}

// drain waits for the deliveries in flight, interrupting them once the grace period is over,
// then for the recording of every outcome (each bounded by ReportTimeout).
func (p *Pool) drain(w *workers, news <-chan workerNews, cancelWork context.CancelFunc) {
	if w.busy > 0 {
		p.log.Info("Waiting for in-flight deliveries", "count", w.busy, "grace", p.opts.Grace)
	}
	grace := time.NewTimer(p.opts.Grace)
	defer grace.Stop()
	for w.busy > 0 || w.recording > 0 {
		select {
		case n := <-news:
			w.heard(n)
		case <-grace.C:
			if w.busy > 0 {
				p.log.Info("Grace period over, interrupting deliveries", "count", w.busy)
			}
			cancelWork()
		}
	}
}

// jobLog is the pool's logger with j's identifiers.
func (p *Pool) jobLog(j store.Job) logr.Logger {
	return p.log.WithValues("jobID", j.ID, logkeys.Subscription, j.Event.Subscription, "sink", j.Sink, logkeys.EventID, j.Event.EventID, logkeys.Attempt, j.Attempt)
}

// deliver makes one attempt at j and records its outcome; it calls free once the sink is done
// with the attempt, before the outcome is recorded.
func (p *Pool) deliver(ctx context.Context, j store.Job, free func()) {
	ctx, span := p.startAttempt(ctx, j)
	defer span.End()
	ev := j.Event
	log := telemetry.Log(ctx, p.jobLog(j))

	sink, ok := p.resolve(ev.Subscription, j.Sink)
	switch {
	case !ok:
		// Not an attempt: the event was never offered to a sink, so it must not use up the
		// budget and be dead-lettered once the sink is back.
		p.release(ctx, log, j, p.opts.Backoff.Delay(j.Attempt, 0), errNoSink, free)
		return
	case sink.Gone:
		p.dead(ctx, log, j, fmt.Errorf("the subscription has no sink named %q any more (spec.delivery.sinks)", j.Sink), free)
		return
	case sink.Problem != "":
		// Misconfigured: the event waits, uncounted, until the sink is fixed.
		p.release(ctx, log, j, min(misconfiguredWait, p.opts.Backoff.ceiling()), fmt.Errorf("sink %s cannot take events: %s", j.Sink, sink.Problem), free)
		return
	}
	maxAttempts := cmp.Or(sink.MaxAttempts, ev.MaxAttempts, DefaultMaxAttempts)

	if sink.Filter != nil {
		match, err := sink.Filter.Match(ev, Source(ev))
		if err != nil {
			// The event's own failure: retried (the filter may be fixed), then dead-lettered,
			// for this sink alone.
			p.failed(ctx, log, j, maxAttempts, &Error{Retryable: true, Unsent: true, Err: err}, free)
			return
		}
		if !match {
			p.attempted(ctx, j, ResultFiltered)
			if p.report(ctx, log, free, func(ctx context.Context) error { return p.st.Complete(ctx, j, p.opts.Now()) }) {
				log.V(1).Info("Not for this sink: its filter does not select the event")
			}
			return
		}
	}
	var status int
	var err error
	switch {
	case sink.Publisher != nil:
		var pub Published
		pctx, cancel := context.WithTimeout(ctx, p.sender.Timeout())
		pub, err = sink.Publisher.Publish(pctx, ev)
		cancel()
		if err == nil && pub.Duplicate {
			// The broker already held it (a repeat after a crash or a lost report): counted,
			// and done.
			p.opts.Metrics.duplicate(j)
			log = log.WithValues("brokerDuplicate", true)
		}
	case sink.HTTP != nil:
		status, err = p.sender.Send(ctx, sink.HTTP, ev)
	default:
		p.release(ctx, log, j, p.opts.Backoff.Delay(j.Attempt, 0), fmt.Errorf("sink %s has no kind this receiver can send to", j.Sink), free)
		return
	}
	if status != 0 {
		log = log.WithValues("status", status)
	}
	if err == nil {
		now := p.opts.Now()
		p.attempted(ctx, j, ResultDelivered)
		p.opts.Metrics.delivered(now.Sub(ev.ReceivedAt))
		if p.report(ctx, log, free, func(ctx context.Context) error { return p.st.Complete(ctx, j, now) }) {
			log.V(1).Info("Delivered")
		}
		return
	}

	p.failed(ctx, log, j, maxAttempts, err, free)
}

// failed records a failed attempt: retried with backoff, or dead-lettered when it cannot
// succeed or the budget is spent; an attempt cut short by shutdown is given back uncounted.
func (p *Pool) failed(ctx context.Context, log logr.Logger, j store.Job, maxAttempts int, err error, free func()) {
	spanError(ctx, err)
	var de *Error
	if !errors.As(err, &de) {
		de = &Error{Retryable: true, Err: err}
	}
	switch {
	case ctx.Err() != nil:
		// Shutdown cut the attempt short; not the sink's fault, so let another worker go now
		// without counting it.
		p.release(ctx, log, j, 0, fmt.Errorf("delivery interrupted by shutdown: %w", err), free)
	case de.Misconfigured:
		// Nothing the event can change: it waits, uncounted, until the sink is fixed.
		p.release(ctx, log, j, min(misconfiguredWait, p.opts.Backoff.ceiling()), err, free)
	case !de.Retryable:
		p.dead(ctx, log, j, err, free)
	case j.Attempt >= maxAttempts:
		p.dead(ctx, log, j, fmt.Errorf("gave up after %d attempts: %w", j.Attempt, err), free)
	default:
		p.retry(ctx, log, j, p.opts.Backoff.Delay(j.Attempt, de.RetryAfter), err, free)
	}
}

func (p *Pool) retry(ctx context.Context, log logr.Logger, j store.Job, wait time.Duration, cause error, free func()) {
	p.attempted(ctx, j, ResultRetry)
	at := p.opts.Now().Add(wait)
	if p.report(ctx, log, free, func(ctx context.Context) error { return p.st.Retry(ctx, j, at, cause.Error()) }) {
		log.Info("Delivery failed, will retry", "error", cause.Error(), "retryAt", at)
	}
}

func (p *Pool) release(ctx context.Context, log logr.Logger, j store.Job, wait time.Duration, cause error, free func()) {
	p.attempted(ctx, j, ResultReturned)
	at := p.opts.Now().Add(wait)
	if p.report(ctx, log, free, func(ctx context.Context) error { return p.st.Release(ctx, j, at, cause.Error()) }) {
		log.Info("Delivery postponed, not counted as an attempt", logkeys.Reason, cause.Error(), "retryAt", at)
	}
}

func (p *Pool) dead(ctx context.Context, log logr.Logger, j store.Job, cause error, free func()) {
	p.attempted(ctx, j, ResultDead)
	if p.report(ctx, log, free, func(ctx context.Context) error { return p.st.Dead(ctx, j, cause.Error()) }) {
		p.opts.Metrics.deadLetter()
		log.Info("Delivery failed, dead-lettered", "error", cause.Error())
	}
}

// report calls free (when not nil: the worker may take its next job), then records an outcome
// and tells whether the store took it. A lost lease means another worker owns the job now and
// will record its own outcome; any other failure leaves the job to be leased again when its
// lease expires.
func (p *Pool) report(ctx context.Context, log logr.Logger, free func(), record func(context.Context) error) bool {
	if free != nil {
		free()
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ReportTimeout)
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
