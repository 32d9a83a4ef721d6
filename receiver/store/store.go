// Package store is the receiver's durable ledger and delivery queue.
//
// The ledger (hw_events: unique on subscription + event id, kept for the dedupe window) holds
// each event once; the queue holds one delivery job per (event, sink) (hw_sink_jobs), each with
// its own state, attempts, backoff and dead letter, so one sink failing never holds back
// another. An event's row and its jobs are recorded in one transaction, and the receiver
// acknowledges a delivery only after its commit; the event is done when every job is done.
// Many concurrent claims are group-committed: one transaction, one multi-row statement each.
//
// Implementations: SQLite (embedded default, pure Go), PostgreSQL (several receivers) and Redis
// (several receivers; see redis.go for its key layout and scripts).
package store

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Event is one verified delivery to record.
type Event struct {
	// Subscription is "namespace/name"; with EventID it is the dedupe key.
	Subscription    string
	SubscriptionUID string
	EventID         string
	EventType       string
	// ContentType of the provider's request, passed on to the sink.
	ContentType string
	Payload     []byte
	ReceivedAt  time.Time
	// MaxAttempts bounds deliveries before the job is dead-lettered.
	MaxAttempts int
	// DedupeWindow is how long the event id is remembered once its delivery has ended (the
	// route's dedupeWindow). Redis turns it into the TTL of the event's keys; the SQL stores
	// sweep by the receiver's longest window instead. Zero: the store's retention.
	DedupeWindow time.Duration
	// ReplayKey, when set, is a second dedupe key of the subscription: the digest of the signed
	// bytes, for schemes whose signature does not cover EventID (providers.Verified). A claim
	// whose replay key is already held is a duplicate, whatever its event id; a claim that is
	// a duplicate by its event id still records its replay key, so a retry's signed bytes
	// cannot come back under another id either. Replay keys are remembered for the dedupe
	// window from the receipt of the claim that brought them (Redis: a TTL; SQL: Sweep's
	// cutoff), whatever became of the event.
	ReplayKey string
	// Sinks names the sinks the event is delivered to, one job each (at most MaxSinks, each a
	// name of at most MaxSinkNameBytes, no two alike). Empty: one job for DefaultSink. A claim
	// reads it; the events of leased jobs and dead letters leave it empty (see Job.Sink).
	Sinks []string
	// OrderKeys holds, for each sink of Sinks that orders its events (ordering PerKey), the
	// key this event is ordered by (an event without the key's field has the empty key). Of the
	// jobs of one subscription, sink and key, only the oldest not yet done is due; the next
	// becomes due when it is completed or dead-lettered. A claim reads it.
	OrderKeys map[string]string
	// Trace is the span context of the delivery that brought the event, as
	// telemetry.Encode writes it ("" when tracing was off): every delivery attempt, later and
	// on any replica, starts its span from it, so the event's whole path is one trace.
	Trace string
	// Retention is how long the payload is kept once delivered (the route's
	// spec.delivery.retention; zero: its dedupe window). Redis keeps a delivered event's keys
	// for the longer of the two; the SQL stores forget payloads through Ledger.Forget.
	Retention time.Duration
	// Replays and FreshKey are the leased job's, not the event's: how many times the job was
	// replayed by hand (Ledger.Requeue, Replay), and whether its replay takes an
	// Idempotency-Key of its own. A claim ignores them.
	Replays  int
	FreshKey bool
}

// orderKeyOf is the stored key that orders e's job for sink, scoped to its subscription and
// sink (a digest: fixed length, any bytes), or "" when the sink does not order its events.
func orderKeyOf(e Event, sink string) string {
	key, ok := e.OrderKeys[sink]
	if !ok {
		return ""
	}
	sum := sha256.Sum256([]byte(e.Subscription + "\x00" + sink + "\x00" + key))
	return hex.EncodeToString(sum[:16])
}

// DefaultSink is the sink of an event claimed without Sinks, and of every job recorded before
// events had several sinks (spec.delivery.sink is the sink named "default").
const DefaultSink = "default"

// MaxSinks bounds the sinks of one event (spec.delivery.sinks holds at most 8).
const MaxSinks = 8

// sinksOf is the sinks e's claim enqueues a job for.
func sinksOf(e Event) []string {
	if len(e.Sinks) == 0 {
		return defaultSinks
	}
	return e.Sinks
}

var defaultSinks = []string{DefaultSink}

// SinkDepth is the backlog of one sink of one subscription: its jobs not yet completed or dead
// (pending, blocked behind their ordering key, running or waiting for a retry).
type SinkDepth struct {
	Subscription string // "namespace/name"
	Sink         string
	Jobs         int
	// OldestReceived is when the oldest of those jobs' events was received: how long ago is
	// how far the sink lags behind its subscription. Not run_at, which every retry moves
	// forward: a sink failing for an hour would look a few minutes behind at most.
	OldestReceived time.Time
}

// sortSinkDepths orders d by subscription and sink.
func sortSinkDepths(d []SinkDepth) {
	slices.SortFunc(d, func(a, b SinkDepth) int {
		return cmp.Or(cmp.Compare(a.Subscription, b.Subscription), cmp.Compare(a.Sink, b.Sink))
	})
}

// Job states.
const (
	StatePending   = "pending"
	StateRunning   = "running" // leased by a worker until LeaseUntil
	StateRetryable = "retryable"
	StateCompleted = "completed"
	StateDead      = "dead"
	// StatePurged is how the ledger shows a dead letter that was purged (Purger): completed in
	// the store, never delivered.
	StatePurged = "purged"
)

// Job is one delivery of one event to one of the subscription's sinks.
type Job struct {
	ID    int64
	Event Event
	// Sink is the name of the sink this job delivers to.
	Sink string
	// OrderKey is the stored key that orders the job among its sink's (empty: unordered); the
	// store reads it back with the job.
	OrderKey string
	State    string
	Attempt  int // attempts made, including the current leased one
	// LastError of the previous attempt (empty when none).
	LastError  string
	RunAt      time.Time
	LeaseUntil time.Time
}

// ClaimResult is one event's outcome of a claim.
type ClaimResult struct {
	Duplicate bool
	Err       error
}

// EachClaimer is a Store whose claims succeed or fail per event (Redis runs one script per
// subscription): the Batcher then answers each claim with its own result, so one failing event
// or subscription never fails the others of its batch. Results are in events' order.
type EachClaimer interface {
	ClaimEach(ctx context.Context, events []Event) []ClaimResult
}

// Promise is what a store guarantees for an acknowledged event, from strongest to weakest.
type Promise int

const (
	// PromiseBestEffort: an acknowledged event can be lost (a Redis without durable
	// persistence, or one that may evict any key).
	PromiseBestEffort Promise = iota + 1
	// PromiseAtLeastOnce: an acknowledged event is never lost, but a provider's redelivery of
	// a delivered event may reach the sink again (same Idempotency-Key) before the dedupe
	// window ends (a Redis that may evict keys with a TTL).
	PromiseAtLeastOnce
	// PromiseStrict: an acknowledged event is never lost and a redelivery inside the dedupe
	// window is a duplicate (SQLite, PostgreSQL, and a Redis with appendfsync always and no
	// eviction).
	PromiseStrict
)

func (p Promise) String() string {
	switch p {
	case PromiseStrict:
		return "strict"
	case PromiseAtLeastOnce:
		return "at-least-once"
	case PromiseBestEffort:
		return "best-effort"
	}
	return "unknown"
}

// ParsePromise reads a Promise from its String form.
func ParsePromise(s string) (Promise, error) {
	for _, p := range []Promise{PromiseStrict, PromiseAtLeastOnce, PromiseBestEffort} {
		if s == p.String() {
			return p, nil
		}
	}
	return 0, fmt.Errorf("unknown store promise %q (strict, at-least-once, best-effort)", s)
}

// PromiseOf is the promise st keeps: the Redis store's as its server's settings give it, every
// other store's strict.
func PromiseOf(st Store) Promise {
	if p, ok := st.(interface{ Promise() Promise }); ok {
		return p.Promise()
	}
	return PromiseStrict
}

// Purger is a Store that can discard a dead letter: it is never delivered, and its event stays
// in the ledger for dedupe until swept like a completed one. The job reads as completed, with
// purgedError as its last error. It returns ErrNotDead when the job is not dead-lettered (or
// does not exist). Every store of this package implements it.
type Purger interface {
	Purge(ctx context.Context, jobID int64, now time.Time) error
}

// purgedError is the last error of a purged dead letter, which the ledger shows.
const purgedError = "purged from the dead letters"

// ErrLeaseLost is returned when a worker reports on a job whose lease it no longer holds
// (it expired and another worker took the job).
var ErrLeaseLost = errors.New("job lease lost")

// Store is the ledger and queue. All methods are safe for concurrent use, also from several
// processes sharing one database (PostgreSQL, Redis).
type Store interface {
	// ClaimBatch records events and enqueues one pending job per sink of each newly recorded
	// event (Event.Sinks), all in one transaction. duplicate[i] is true when events[i] (subscription, event id) was already
	// recorded, by an earlier claim or earlier in the same batch, or when its replay key was
	// (see Event.ReplayKey): the batch is answered as if its events were claimed one by one. On error the SQL stores have
	// recorded nothing; Redis records per subscription, so some events may have been recorded
	// (a retry then finds them duplicates, which is still an acknowledgement of a stored event).
	ClaimBatch(ctx context.Context, events []Event) (duplicate []bool, err error)
	// Lease takes up to n jobs that are due (pending or retryable with RunAt <= now, or running
	// with an expired lease), marks them running until now+lease, increments Attempt.
	Lease(ctx context.Context, n int, now time.Time, lease time.Duration) ([]Job, error)
	// Complete marks a leased job delivered.
	Complete(ctx context.Context, j Job, now time.Time) error
	// Retry schedules another attempt of a leased job at `at`.
	Retry(ctx context.Context, j Job, at time.Time, lastErr string) error
	// Release gives a leased job back for another attempt at `at` without counting this one:
	// the event was never offered to a sink (no sink configured, or shutdown interrupted it).
	Release(ctx context.Context, j Job, at time.Time, reason string) error
	// Dead moves a leased job to the dead-letter state.
	Dead(ctx context.Context, j Job, lastErr string) error
	// DeadLetters lists dead jobs (one per event and sink), oldest first.
	DeadLetters(ctx context.Context, limit int) ([]Job, error)
	// Replay moves a dead job back to pending with a fresh attempt budget.
	Replay(ctx context.Context, jobID int64, now time.Time) error
	// Sweep deletes ledger entries received before cutoff whose every job is completed before
	// cutoff (or dead since before cutoff), and their jobs. It returns how many events it
	// removed.
	Sweep(ctx context.Context, cutoff time.Time) (int, error)
	// Depth counts jobs not yet completed or dead.
	Depth(ctx context.Context) (int, error)
	// SinkDepths counts the jobs not yet completed or dead of each (subscription, sink) that
	// has any, with the receipt of the oldest one's event; sorted by subscription and sink.
	// Its cost grows with those jobs (the SQL stores walk their state index; Redis reads one
	// sorted set per sink), never with the delivered ones.
	SinkDepths(ctx context.Context) ([]SinkDepth, error)
	// Ping checks that the store answers (the receiver's readiness): a round trip to the
	// server.
	Ping(ctx context.Context) error
	Close() error
}
