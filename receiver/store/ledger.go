package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Ledger is a Store whose events can be browsed and replayed by time (hookwarden events). Every
// store implements it: an index on (received_at, id) (Redis: a sorted set per subscription,
// see redis_ledger.go) makes a page an index walk from the cursor, whatever the size of the
// ledger.
type Ledger interface {
	// Events lists the events received in [q.Since, q.Until) that match q, oldest first, one
	// page of at most q.Limit (1..MaxEventPage), each with its sinks' jobs and without its
	// payload. EventPage.Next continues the walk ("" after the last page). A page may hold
	// fewer events than q.Limit, even none, and still a Next: Redis bounds the index entries
	// a filtered page reads.
	Events(ctx context.Context, q EventQuery) (EventPage, error)
	// EventOf is one event of subscription with its payload and its sinks' jobs; ok is false
	// when the ledger does not hold it.
	EventOf(ctx context.Context, subscription, eventID string) (e LedgerEvent, ok bool, err error)
	// Requeue puts the done (completed or dead) jobs of refs for sink ("" every sink) back on
	// the delivery path as a replay: pending, a fresh attempt budget, Replays one more, and
	// FreshKey as asked. Jobs still on their way are left as they are (Skipped), and so is
	// an event whose payload was forgotten.
	Requeue(ctx context.Context, refs []EventRef, sink string, freshKey bool, now time.Time) (RequeueResult, error)
	// Forget drops the payloads of up to limit events of subscription received before cutoff
	// whose every job was completed before it (spec.delivery.retention): the rows stay, for
	// dedupe, until Sweep. It returns how many it forgot.
	Forget(ctx context.Context, subscription string, cutoff time.Time, limit int) (int, error)
}

// MaxEventPage bounds one page of Events.
const MaxEventPage = 1000

// EventQuery selects the events of one page of Events.
type EventQuery struct {
	// Since and Until bound the receipt: Since <= received < Until (zero Until: no bound).
	Since, Until time.Time
	// Type, when set, is the only event type listed.
	Type string
	// Sink, when set, lists only the events with a job for the sink of that name.
	Sink string
	// Subscriptions, when set, are the only subscriptions ("namespace/name") listed.
	Subscriptions []string
	// After is the cursor of the previous page (EventPage.Next); "" starts at Since.
	After string
	Limit int
}

// EventPage is one page of Events.
type EventPage struct {
	Events []LedgerEvent
	// Next is the cursor of the next page, "" when this one is the last.
	Next string
}

// LedgerEvent is an event as the ledger keeps it, with where it went.
type LedgerEvent struct {
	Event
	// Forgotten is when its payload was dropped (spec.delivery.retention); zero while kept.
	Forgotten time.Time
	Sinks     []SinkRecord
}

// SinkRecord is the job of one event for one sink.
type SinkRecord struct {
	JobID     int64
	Sink      string
	State     string
	Attempts  int
	LastError string
	// DeliveredAt is when the job completed (zero unless State is completed; a purged job was
	// never delivered).
	DeliveredAt time.Time
	// Replays counts the replays by hand (events replay, deadletters replay).
	Replays int
}

// EventRef names one event of the ledger.
type EventRef struct {
	Subscription, EventID string
}

// RequeueResult is what Requeue did.
type RequeueResult struct {
	// Requeued counts the jobs put back on the delivery path, Skipped the matching jobs still
	// on their way; Forgotten the events whose payload is gone, NoSink those without a job
	// for the sink asked for.
	Requeued, Skipped, Forgotten, NoSink int
}

// ErrBadCursor is returned by Events for a cursor it did not hand out.
var ErrBadCursor = errors.New("store: not a cursor of this ledger")

// cursor is the position after an event in the (received_at, id) walk.
type cursor struct {
	received int64 // unix microseconds
	id       int64
}

func (c cursor) String() string {
	return strconv.FormatInt(c.received, 36) + "." + strconv.FormatInt(c.id, 36)
}

func parseCursor(s string) (cursor, error) {
	a, b, ok := strings.Cut(s, ".")
	r, err1 := strconv.ParseInt(a, 36, 64)
	id, err2 := strconv.ParseInt(b, 36, 64)
	if !ok || err1 != nil || err2 != nil {
		return cursor{}, fmt.Errorf("%w: %q", ErrBadCursor, s)
	}
	return cursor{r, id}, nil
}

// checkQuery bounds q's limit and reads its cursor.
func checkQuery(q EventQuery) (cursor, error) {
	if q.Limit < 1 || q.Limit > MaxEventPage {
		return cursor{}, fmt.Errorf("store: events: a page holds 1..%d events, not %d", MaxEventPage, q.Limit)
	}
	if q.After == "" {
		return cursor{received: q.Since.UnixMicro() - 1, id: 1<<63 - 1}, nil
	}
	return parseCursor(q.After)
}

// settle sets r's State and DeliveredAt as a reader sees them from the store's state and the
// job's last update: a purged dead letter shows as purged, not delivered; a job waiting behind
// its ordering key as pending.
func (r *SinkRecord) settle(state string, updated time.Time) {
	r.State = state
	switch {
	case state == StateCompleted && r.LastError == purgedError:
		r.State = StatePurged
	case state == StateCompleted:
		r.DeliveredAt = updated
	case state == stateBlocked:
		r.State = StatePending
	}
}
