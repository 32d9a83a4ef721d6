package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

var _ Ledger = (*SQL)(nil)

// ledgerColumns are the event columns a page lists (no payload), in scanLedgerEvent's order.
const ledgerColumns = `id, subscription, event_id, subscription_uid, event_type, content_type, trace_context, received_at, max_attempts, purged_at`

// eventsSQL is the page of Events for q: a walk of the (received_at, id) index from the cursor
// ($1, $2) up to $3, filtered as q asks, $4 rows.
func eventsSQL(q EventQuery) (string, []any, error) {
	c, err := checkQuery(q)
	if err != nil {
		return "", nil, err
	}
	until := int64(math.MaxInt64)
	if !q.Until.IsZero() {
		until = q.Until.UnixMicro()
	}
	args := []any{c.received, c.id, until, q.Limit + 1}
	var b strings.Builder
	b.WriteString(`SELECT ` + ledgerColumns + ` FROM hw_events WHERE (received_at, id) > ($1, $2) AND received_at < $3`)
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	if q.Type != "" {
		b.WriteString(` AND event_type = ` + arg(q.Type))
	}
	if len(q.Subscriptions) > 0 {
		in := make([]string, len(q.Subscriptions))
		for i, s := range q.Subscriptions {
			in[i] = arg(s)
		}
		b.WriteString(` AND subscription IN (` + strings.Join(in, ", ") + `)`)
	}
	if q.Sink != "" {
		b.WriteString(` AND EXISTS (SELECT 1 FROM hw_sink_jobs WHERE event = hw_events.id AND sink = ` + arg(q.Sink) + `)`)
	}
	b.WriteString(` ORDER BY received_at, id LIMIT $4`)
	return b.String(), args, nil
}

// Events implements Ledger, on the reader connection (a page never waits for a claim).
func (s *SQL) Events(ctx context.Context, q EventQuery) (EventPage, error) {
	text, args, err := eventsSQL(q)
	if err != nil {
		return EventPage{}, err
	}
	rows, err := s.reader.QueryContext(ctx, text, args...)
	if err != nil {
		return EventPage{}, fmt.Errorf("store: events: %w", err)
	}
	var page EventPage
	var ids []int64
	err = eachRow(rows, func(rows *sql.Rows) error {
		var e LedgerEvent
		var id int64
		if err := scanLedgerEvent(rows, &id, &e); err != nil {
			return err
		}
		page.Events, ids = append(page.Events, e), append(ids, id)
		return nil
	})
	if err != nil {
		return EventPage{}, fmt.Errorf("store: events: %w", err)
	}
	if len(page.Events) > q.Limit {
		page.Events, ids = page.Events[:q.Limit], ids[:q.Limit]
		last := page.Events[q.Limit-1]
		page.Next = cursor{received: last.ReceivedAt.UnixMicro(), id: ids[q.Limit-1]}.String()
	}
	if err := s.sinkRecords(ctx, ids, page.Events); err != nil {
		return EventPage{}, fmt.Errorf("store: events: %w", err)
	}
	return page, nil
}

// EventOf implements Ledger.
func (s *SQL) EventOf(ctx context.Context, subscription, eventID string) (LedgerEvent, bool, error) {
	rows, err := s.reader.QueryContext(ctx, `SELECT `+ledgerColumns+`, payload FROM hw_events WHERE subscription = $1 AND event_id = $2`, subscription, eventID)
	if err != nil {
		return LedgerEvent{}, false, fmt.Errorf("store: event: %w", err)
	}
	var e LedgerEvent
	var id int64
	found := false
	err = eachRow(rows, func(rows *sql.Rows) error {
		found = true
		return scanLedgerEvent(rows, &id, &e, &e.Payload)
	})
	if err == nil && found {
		events := []LedgerEvent{e}
		err = s.sinkRecords(ctx, []int64{id}, events)
		e = events[0]
	}
	if err != nil {
		return LedgerEvent{}, false, fmt.Errorf("store: event: %w", err)
	}
	return e, found, nil
}

func scanLedgerEvent(rows *sql.Rows, id *int64, e *LedgerEvent, more ...any) error {
	var received, maxAttempts, purged int64
	dest := append([]any{id, &e.Subscription, &e.EventID, &e.SubscriptionUID, &e.EventType, &e.ContentType, &e.Trace, &received, &maxAttempts, &purged}, more...)
	if err := rows.Scan(dest...); err != nil {
		return err
	}
	e.ReceivedAt, e.MaxAttempts, e.Forgotten = fromMicros(received), int(maxAttempts), fromMicros(purged)
	return nil
}

// sinkRecords fills in the jobs of events, whose row ids are ids (in the same order).
func (s *SQL) sinkRecords(ctx context.Context, ids []int64, events []LedgerEvent) error {
	if len(ids) == 0 {
		return nil
	}
	at := make(map[int64]int, len(ids))
	in := make([]string, len(ids))
	for i, id := range ids {
		at[id], in[i] = i, strconv.FormatInt(id, 10) // integers the database returned
	}
	rows, err := s.reader.QueryContext(ctx, `SELECT event, slot, sink, state, attempts, last_error, updated_at, replays
	FROM hw_sink_jobs WHERE event IN (`+strings.Join(in, ", ")+`) ORDER BY event, slot`)
	if err != nil {
		return err
	}
	return eachRow(rows, func(rows *sql.Rows) error {
		var r SinkRecord
		var event, slot, updated int64
		var state string
		if err := rows.Scan(&event, &slot, &r.Sink, &state, &r.Attempts, &r.LastError, &updated, &r.Replays); err != nil {
			return err
		}
		r.JobID = jobID(event, int(slot))
		r.settle(state, fromMicros(updated))
		e := &events[at[event]]
		e.Sinks = append(e.Sinks, r)
		return nil
	})
}

// eachRow calls f on each row and closes rows.
func eachRow(rows *sql.Rows, f func(*sql.Rows) error) (err error) {
	defer func() {
		if cerr := rows.Close(); err == nil {
			err = cerr
		}
	}()
	for rows.Next() {
		if err := f(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// requeueChunk bounds the events one Requeue transaction holds (the SQLite write lock).
const requeueChunk = 500

// requeueSQL puts the done jobs of event $1 (of sink $5 unless it is ”) back as a replay.
const requeueSQL = `UPDATE hw_sink_jobs SET state = CASE WHEN order_key = '' THEN 'pending' ELSE 'blocked' END,
	attempts = 0, run_at = $2, lease_until = 0, updated_at = $2, last_error = '', replays = replays + 1, fresh_key = $3
	WHERE event = $1 AND state IN ('completed', 'dead') AND ($4 = '' OR sink = $4) RETURNING order_key`

// Requeue implements Ledger, a transaction per requeueChunk events.
func (s *SQL) Requeue(ctx context.Context, refs []EventRef, sink string, freshKey bool, now time.Time) (RequeueResult, error) {
	var res RequeueResult
	for chunk := range slices.Chunk(refs, requeueChunk) {
		if err := s.requeue(ctx, chunk, sink, freshKey, now, &res); err != nil {
			return res, fmt.Errorf("store: requeue: %w", err)
		}
	}
	return res, nil
}

func (s *SQL) requeue(ctx context.Context, refs []EventRef, sink string, freshKey bool, now time.Time, res *RequeueResult) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	fresh := 0
	if freshKey {
		fresh = 1
	}
	var done RequeueResult
	var keys []string
	for _, ref := range refs {
		var id, purged int64
		var jobs int
		err := tx.QueryRowContext(ctx, `SELECT id, purged_at, (SELECT count(*) FROM hw_sink_jobs WHERE event = hw_events.id AND ($3 = '' OR sink = $3))
		FROM hw_events WHERE subscription = $1 AND event_id = $2`, ref.Subscription, ref.EventID, sink).Scan(&id, &purged, &jobs)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			done.Forgotten++ // swept meanwhile
			continue
		case err != nil:
			return err
		case purged != 0:
			done.Forgotten++
			continue
		case jobs == 0:
			done.NoSink++
			continue
		}
		rows, err := tx.QueryContext(ctx, requeueSQL, id, now.UnixMicro(), fresh, sink)
		if err != nil {
			return err
		}
		n := 0
		err = eachRow(rows, func(rows *sql.Rows) error {
			var k string
			n++
			if err := rows.Scan(&k); err != nil || k == "" || slices.Contains(keys, k) {
				return err
			}
			keys = append(keys, k)
			return nil
		})
		if err != nil {
			return err
		}
		done.Requeued += n
		done.Skipped += jobs - n
	}
	slices.Sort(keys)
	if err := s.promote(ctx, tx, keys); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	res.Requeued += done.Requeued
	res.Skipped += done.Skipped
	res.Forgotten += done.Forgotten
	res.NoSink += done.NoSink
	return nil
}

// forgetSQL drops the payloads of up to $5 events of subscription $2 received before $1 whose
// every job completed before $1: a walk of the kept events' (subscription, received_at) index.
const forgetSQL = `UPDATE hw_events SET payload = $4, purged_at = $3 WHERE id IN (
	SELECT id FROM hw_events WHERE subscription = $2 AND purged_at = 0 AND received_at < $1
	AND NOT EXISTS (SELECT 1 FROM hw_sink_jobs WHERE event = hw_events.id AND NOT (state = 'completed' AND updated_at < $1))
	ORDER BY received_at LIMIT $5)`

// Forget implements Ledger.
func (s *SQL) Forget(ctx context.Context, subscription string, cutoff time.Time, limit int) (int, error) {
	res, err := s.db.ExecContext(ctx, forgetSQL, cutoff.UnixMicro(), subscription, s.now().UnixMicro(), []byte{}, limit)
	if err != nil {
		return 0, fmt.Errorf("store: forget payloads of %s: %w", subscription, err)
	}
	n, err := res.RowsAffected()
	return int(n), err
}
