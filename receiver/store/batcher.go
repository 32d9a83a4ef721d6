package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// ErrBatcherClosed is returned by Claim after Close.
var ErrBatcherClosed = errors.New("store: batcher closed")

// BatcherOptions tune a Batcher. Zero values select the defaults.
type BatcherOptions struct {
	// MaxBatch bounds the claims in one transaction (default 256).
	MaxBatch int
	// Committers is the number of transactions in flight at once. Default: the store's
	// Writers() when it has that method (1 for SQLite, 2 for PostgreSQL), else 1.
	Committers int
	// CommitTimeout bounds one ClaimBatch (default 10s). Commits do not use the callers'
	// contexts: one caller giving up must not fail the others' claims.
	CommitTimeout time.Duration
}

// Batcher group-commits claims: concurrent Claim calls share one ClaimBatch transaction, so the
// cost of a commit (an fsync) is paid once per batch instead of once per delivery.
//
// Batching is natural: a committer takes one waiting claim and everything already queued
// behind it (up to MaxBatch), without waiting for more. Under light load every claim commits
// alone with no added latency; under heavy load batches grow while the previous commit runs.
type Batcher struct {
	s         Store
	opts      BatcherOptions
	queue     chan *claim
	committed chan struct{}
	commits   atomic.Int64

	mu      sync.RWMutex
	closed  bool
	senders sync.WaitGroup // Claim calls between the closed check and their enqueue
	running sync.WaitGroup // committers
}

type claim struct {
	ctx    context.Context // the caller's; a claim whose caller left is not committed
	event  Event
	result chan claimResult // buffered: a committer never blocks on a caller who left
}

type claimResult struct {
	duplicate bool
	err       error
}

// NewBatcher starts the committers. The Batcher does not own s: Close it before s.
func NewBatcher(s Store, opts BatcherOptions) *Batcher {
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = 256
	}
	if opts.Committers <= 0 {
		opts.Committers = 1
		if w, ok := s.(interface{ Writers() int }); ok {
			opts.Committers = max(w.Writers(), 1)
		}
	}
	if opts.CommitTimeout <= 0 {
		opts.CommitTimeout = 10 * time.Second
	}
	b := &Batcher{
		s:         s,
		opts:      opts,
		queue:     make(chan *claim, opts.MaxBatch*opts.Committers),
		committed: make(chan struct{}, 1),
	}
	b.running.Add(opts.Committers)
	for range opts.Committers {
		go b.run()
	}
	return b
}

// Claim records e and enqueues its job. It returns once the transaction holding the claim has
// committed (duplicate reports whether e was recorded before) or failed: err wraps
// ErrInvalidEvent for an event CheckEvent refuses, and is otherwise the store's error for this
// claim (see commit: a failed batch is retried in parts, and an EachClaimer fails claims one
// by one, so a claim that can be recorded is not failed by one that cannot). When ctx ends
// first Claim returns ctx.Err(); the claim may still commit, and the provider's redelivery is
// then a duplicate.
func (b *Batcher) Claim(ctx context.Context, e Event) (duplicate bool, err error) {
	if err := CheckEvent(e); err != nil {
		// Refused before it joins a batch, where it would fail every claim of the commit.
		return false, fmt.Errorf("store: claim: %w", err)
	}
	c := &claim{ctx: ctx, event: e, result: make(chan claimResult, 1)}
	b.mu.RLock()
	if b.closed {
		b.mu.RUnlock()
		return false, ErrBatcherClosed
	}
	b.senders.Add(1)
	b.mu.RUnlock()
	select {
	case b.queue <- c:
		b.senders.Done()
	case <-ctx.Done():
		b.senders.Done()
		return false, fmt.Errorf("store: claim %s/%s: %w", e.Subscription, e.EventID, ctx.Err())
	}
	select {
	case r := <-c.result:
		return r.duplicate, r.err
	case <-ctx.Done():
		return false, fmt.Errorf("store: claim %s/%s: %w", e.Subscription, e.EventID, ctx.Err())
	}
}

// Committed is signalled (without blocking, coalesced) after a commit that enqueued at least
// one new job, so the delivery side can lease without polling.
func (b *Batcher) Committed() <-chan struct{} { return b.committed }

// Commits is the number of ClaimBatch transactions run so far, failed ones and the retries of
// a failed batch's parts included.
func (b *Batcher) Commits() int64 { return b.commits.Load() }

// Close stops accepting claims, commits the ones already queued and returns when the
// committers have exited.
func (b *Batcher) Close() {
	b.mu.Lock()
	first := !b.closed
	b.closed = true
	b.mu.Unlock()
	if first {
		// After this no claim can enter the queue; the committers are still draining it, so
		// blocked senders get through. Then the committers empty the closed queue and exit.
		b.senders.Wait()
		close(b.queue)
	}
	b.running.Wait()
}

func (b *Batcher) run() {
	defer b.running.Done()
	batch := make([]*claim, 0, b.opts.MaxBatch)
	for c := range b.queue {
		batch = b.drain(append(batch[:0], c))
		b.commit(batch)
	}
}

// drain adds the claims already queued, up to MaxBatch, without waiting for more.
func (b *Batcher) drain(batch []*claim) []*claim {
	for len(batch) < b.opts.MaxBatch {
		select {
		case c, ok := <-b.queue:
			if !ok {
				return batch
			}
			batch = append(batch, c)
		default:
			return batch
		}
	}
	return batch
}

// commit records the batch in one ClaimBatch (or ClaimEach) and answers its claims. When a
// ClaimBatch fails as a whole the batch is split in halves, each committed again, down to single claims: a claim the database
// refuses for its content (one CheckEvent did not foresee) then fails alone instead of
// failing every claim that shared its transaction. The normal case stays one transaction.
// A commit that timed out is not split: the database is slow, and more transactions would
// only slow it down further.
func (b *Batcher) commit(batch []*claim) {
	live := make([]*claim, 0, len(batch))
	events := make([]Event, 0, len(batch))
	for _, c := range batch {
		if err := c.ctx.Err(); err != nil {
			c.result <- claimResult{err: err}
			continue
		}
		live = append(live, c)
		events = append(events, c.event)
	}
	clear(batch) // drop references to answered claims
	if len(live) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), b.opts.CommitTimeout)
	results, batchErr := b.claim(ctx, events)
	cancel()
	b.commits.Add(1)
	if batchErr != nil && len(live) > 1 && !errors.Is(batchErr, context.DeadlineExceeded) {
		// Claims whose callers left meanwhile are dropped by the recursive commits.
		half := len(live) / 2
		b.commit(live[:half])
		b.commit(live[half:])
		return
	}
	if slices.ContainsFunc(results, func(r ClaimResult) bool { return r.Err == nil && !r.Duplicate }) {
		// Before answering, so that a caller who saw its claim accepted also finds the signal.
		select {
		case b.committed <- struct{}{}:
		default:
		}
	}
	for i, c := range live {
		if span := trace.SpanFromContext(c.ctx); span.IsRecording() {
			// The claim's commit span (receiver tracing): how many claims shared its transaction.
			span.SetAttributes(attribute.Int("hookwarden.ledger.batch_size", len(live)))
		}
		c.result <- claimResult{duplicate: results[i].Duplicate, err: results[i].Err}
	}
}

// claim runs one ClaimBatch (or ClaimEach) and gives every event its result. batchErr is the
// error of a ClaimBatch that failed as a whole (every result carries it).
func (b *Batcher) claim(ctx context.Context, events []Event) (results []ClaimResult, batchErr error) {
	results = make([]ClaimResult, len(events))
	if each, ok := b.s.(EachClaimer); ok {
		got := each.ClaimEach(ctx, events)
		if len(got) == len(events) {
			return got, nil
		}
		fail(results, fmt.Errorf("store: claim batch answered %d of %d claims", len(got), len(events)))
		return results, nil
	}
	dup, err := b.s.ClaimBatch(ctx, events)
	if err == nil && len(dup) != len(events) {
		err = fmt.Errorf("store: claim batch answered %d of %d claims", len(dup), len(events))
	}
	if err != nil {
		fail(results, err)
		return results, err
	}
	for i, d := range dup {
		results[i].Duplicate = d
	}
	return results, nil
}

func fail(results []ClaimResult, err error) {
	for i := range results {
		results[i] = ClaimResult{Err: err}
	}
}
