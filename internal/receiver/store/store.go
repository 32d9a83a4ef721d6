// Package store is the receiver's durable ledger and delivery queue.
//
// One table, hw_events, is both the dedupe ledger (unique on subscription + event id, kept for
// the dedupe window) and the delivery queue: each event row carries the state of its one job.
// A claim is therefore a single insert, and the receiver acknowledges a delivery only after its
// commit. Many concurrent claims are group-committed: one transaction, one multi-row statement.
//
// Implementations: SQLite (embedded default, pure Go) and PostgreSQL (several receivers).
package store

import (
	"context"
	"errors"
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
}

// Job states.
const (
	StatePending   = "pending"
	StateRunning   = "running" // leased by a worker until LeaseUntil
	StateRetryable = "retryable"
	StateCompleted = "completed"
	StateDead      = "dead"
)

// Job is one delivery of one event to the subscription's sink.
type Job struct {
	ID      int64
	Event   Event
	State   string
	Attempt int // attempts made, including the current leased one
	// LastError of the previous attempt (empty when none).
	LastError  string
	RunAt      time.Time
	LeaseUntil time.Time
}

// ErrLeaseLost is returned when a worker reports on a job whose lease it no longer holds
// (it expired and another worker took the job).
var ErrLeaseLost = errors.New("job lease lost")

// Store is the ledger and queue. All methods are safe for concurrent use, also from several
// processes sharing one database (PostgreSQL).
type Store interface {
	// ClaimBatch records events and enqueues one pending job per newly recorded event, all in
	// one transaction. duplicate[i] is true when events[i] (subscription, event id) was already
	// recorded, by an earlier claim or earlier in the same batch. On error nothing is recorded.
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
	// DeadLetters lists dead jobs, oldest first.
	DeadLetters(ctx context.Context, limit int) ([]Job, error)
	// Replay moves a dead job back to pending with a fresh attempt budget.
	Replay(ctx context.Context, jobID int64, now time.Time) error
	// Sweep deletes ledger entries received before cutoff whose job is completed (or dead and
	// also older than cutoff), and their jobs. It returns how many events it removed.
	Sweep(ctx context.Context, cutoff time.Time) (int, error)
	// Depth counts jobs not yet completed or dead.
	Depth(ctx context.Context) (int, error)
	Close() error
}
