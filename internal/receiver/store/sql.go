package store

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ErrNotDead is returned by Replay when the job does not exist or is not dead-lettered.
var ErrNotDead = errors.New("job is not dead-lettered")

// SQL is the Store on SQLite or PostgreSQL. Times are stored as unix microseconds so that both
// databases compare and round them the same way.
type SQL struct {
	db        *sql.DB
	dialect   dialect
	now       func() time.Time
	maxParams int

	// afterEvents, when set (tests only), runs inside ClaimBatch between the event and the job
	// inserts, to inject a failure half-way through the transaction.
	afterEvents func(ctx context.Context, tx *sql.Tx) error
}

var _ Store = (*SQL)(nil)

// Writers is the number of write transactions worth running at once: 1 on SQLite (one writer
// at a time), 2 on PostgreSQL (one commit in flight while the next batch forms; more only pays
// off with a remote database, see the receiver's --store-committers). NewBatcher uses it when
// BatcherOptions.Committers is zero.
func (s *SQL) Writers() int {
	if s.dialect == dialectPostgres {
		return 2
	}
	return 1
}

// Close closes the database.
func (s *SQL) Close() error { return s.db.Close() }

type eventKey struct{ subscription, eventID string }

// ClaimBatch implements Store. In one transaction it inserts the events with ON CONFLICT DO
// NOTHING RETURNING (the unique constraint decides between concurrent claims, also across
// processes) and then one pending job per returned row.
func (s *SQL) ClaimBatch(ctx context.Context, events []Event) ([]bool, error) {
	dup := make([]bool, len(events))
	if len(events) == 0 {
		return dup, nil
	}
	now := s.now()
	// First occurrence wins within the batch; later ones are duplicates without asking the
	// database. Inserting in key order makes concurrent PostgreSQL transactions take the
	// unique-index locks in the same order, so two overlapping batches cannot deadlock.
	first := make(map[eventKey]int, len(events))
	uniq := make([]int, 0, len(events))
	for i, e := range events {
		if e.Subscription == "" || e.EventID == "" {
			return nil, fmt.Errorf("store: claim: event %d has an empty subscription or event id", i)
		}
		k := eventKey{e.Subscription, e.EventID}
		if _, ok := first[k]; ok {
			dup[i] = true
			continue
		}
		first[k] = i
		uniq = append(uniq, i)
	}
	slices.SortFunc(uniq, func(a, b int) int {
		return cmp.Or(cmp.Compare(events[a].Subscription, events[b].Subscription),
			cmp.Compare(events[a].EventID, events[b].EventID))
	})

	if s.dialect == dialectPostgres && s.afterEvents == nil {
		return s.claimPostgres(ctx, events, dup, uniq, now)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("store: claim: begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }()

	type inserted struct {
		ref   int64
		event int // index into events
	}
	var fresh []inserted
	const eventCols = 7
	for chunk := range slices.Chunk(uniq, s.maxParams/eventCols) {
		var q strings.Builder
		q.WriteString(`INSERT INTO hw_events (subscription, event_id, subscription_uid, event_type, content_type, payload, received_at) VALUES `)
		args := make([]any, 0, len(chunk)*eventCols)
		for n, i := range chunk {
			e := events[i]
			if n > 0 {
				q.WriteByte(',')
			}
			writePlaceholders(&q, len(args), eventCols)
			payload := e.Payload
			if payload == nil {
				payload = []byte{}
			}
			received := e.ReceivedAt
			if received.IsZero() {
				received = now
			}
			args = append(args, e.Subscription, e.EventID, e.SubscriptionUID, e.EventType, e.ContentType, payload, received.UnixMicro())
		}
		q.WriteString(` ON CONFLICT (subscription, event_id) DO NOTHING RETURNING id, subscription, event_id`)
		rows, err := s.query(ctx, tx, q.String(), args...)
		if err != nil {
			return nil, fmt.Errorf("store: claim: insert events: %w", err)
		}
		for rows.Next() {
			var ref int64
			var k eventKey
			if err := rows.Scan(&ref, &k.subscription, &k.eventID); err != nil {
				_ = rows.Close()
				return nil, fmt.Errorf("store: claim: insert events: %w", err)
			}
			i, ok := first[k]
			if !ok {
				_ = rows.Close()
				return nil, fmt.Errorf("store: claim: insert events: unexpected row %d", ref)
			}
			fresh = append(fresh, inserted{ref: ref, event: i})
		}
		if err := rows.Close(); err != nil {
			return nil, fmt.Errorf("store: claim: insert events: %w", err)
		}
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("store: claim: insert events: %w", err)
		}
	}
	if s.afterEvents != nil {
		if err := s.afterEvents(ctx, tx); err != nil {
			return nil, fmt.Errorf("store: claim: %w", err)
		}
	}

	const jobCols = 4 // placeholders per row: SQLite counts a repeated one again
	for chunk := range slices.Chunk(fresh, s.maxParams/jobCols) {
		var q strings.Builder
		q.WriteString(`INSERT INTO hw_jobs (event_ref, state, attempts, max_attempts, run_at, updated_at) VALUES `)
		args := make([]any, 0, len(chunk)*jobCols)
		for n, f := range chunk {
			e := events[f.event]
			if n > 0 {
				q.WriteByte(',')
			}
			runAt := e.ReceivedAt
			if runAt.IsZero() {
				runAt = now
			}
			p := len(args)
			fmt.Fprintf(&q, "($%d, '%s', 0, $%d, $%d, $%d)", p+1, StatePending, p+2, p+3, p+4)
			args = append(args, f.ref, int64(e.MaxAttempts), runAt.UnixMicro(), runAt.UnixMicro())
		}
		if _, err := s.exec(ctx, tx, q.String(), args...); err != nil {
			return nil, fmt.Errorf("store: claim: insert jobs: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("store: claim: commit: %w", err)
	}
	accepted := make([]bool, len(events))
	for _, f := range fresh {
		accepted[f.event] = true
	}
	for _, i := range uniq {
		dup[i] = !accepted[i]
	}
	return dup, nil
}

// claimPostgresSQL records a batch in ONE statement: the events insert and the jobs insert are
// data-modifying CTEs over the same arrays, so the batch costs one round trip and one
// implicit transaction, and the text never changes with the batch size (pgx prepares it once
// per connection). Rows go in key order, so overlapping batches take the unique-index locks in
// the same order and cannot deadlock.
const claimPostgresSQL = `
WITH input AS (
	SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bytea[], $7::bigint[], $8::int[])
		AS t(subscription, event_id, subscription_uid, event_type, content_type, payload, received_at, max_attempts)
), ins AS (
	INSERT INTO hw_events (subscription, event_id, subscription_uid, event_type, content_type, payload, received_at)
	SELECT subscription, event_id, subscription_uid, event_type, content_type, payload, received_at
	FROM input ORDER BY subscription, event_id
	ON CONFLICT (subscription, event_id) DO NOTHING
	RETURNING id, subscription, event_id, received_at
), jobs AS (
	INSERT INTO hw_jobs (event_ref, state, attempts, max_attempts, run_at, updated_at)
	SELECT ins.id, 'pending', 0, input.max_attempts, ins.received_at, ins.received_at
	FROM ins JOIN input USING (subscription, event_id)
)
SELECT subscription, event_id FROM ins`

func (s *SQL) claimPostgres(ctx context.Context, events []Event, dup []bool, uniq []int, now time.Time) ([]bool, error) {
	n := len(uniq)
	subs, ids, uids, types, ctypes := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	payloads, received, attempts := make([][]byte, n), make([]int64, n), make([]int32, n)
	for k, i := range uniq {
		e := events[i]
		subs[k], ids[k], uids[k], types[k], ctypes[k] = e.Subscription, e.EventID, e.SubscriptionUID, e.EventType, e.ContentType
		payloads[k] = e.Payload
		if payloads[k] == nil {
			payloads[k] = []byte{}
		}
		at := e.ReceivedAt
		if at.IsZero() {
			at = now
		}
		received[k], attempts[k] = at.UnixMicro(), int32(e.MaxAttempts)
	}
	rows, err := s.db.QueryContext(ctx, claimPostgresSQL, subs, ids, uids, types, ctypes, payloads, received, attempts)
	if err != nil {
		return nil, fmt.Errorf("store: claim: %w", err)
	}
	fresh := make(map[eventKey]bool, n)
	for rows.Next() {
		var k eventKey
		if err := rows.Scan(&k.subscription, &k.eventID); err != nil {
			_ = rows.Close()
			return nil, fmt.Errorf("store: claim: %w", err)
		}
		fresh[k] = true
	}
	if err := rows.Close(); err != nil {
		return nil, fmt.Errorf("store: claim: %w", err)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: claim: %w", err)
	}
	for _, i := range uniq {
		dup[i] = !fresh[eventKey{events[i].Subscription, events[i].EventID}]
	}
	return dup, nil
}

// bind adapts a query written with PostgreSQL's $N placeholders to the dialect. For SQLite it
// rewrites each $N to an anonymous ? and lays the arguments out in order of appearance (a
// repeated $N repeats its argument). SQLite accepts $N and ?N too, but resolves both through a
// list searched linearly per parameter, so an insert with thousands of parameters took seconds
// instead of milliseconds.
func (s *SQL) bind(q string, args ...any) (string, []any) {
	if s.dialect != dialectSQLite {
		return q, args
	}
	var b strings.Builder
	b.Grow(len(q))
	out := make([]any, 0, len(args))
	for {
		i := strings.IndexByte(q, '$')
		if i < 0 {
			b.WriteString(q)
			return b.String(), out
		}
		j := i + 1
		n := 0
		for j < len(q) && q[j] >= '0' && q[j] <= '9' {
			n = n*10 + int(q[j]-'0')
			j++
		}
		b.WriteString(q[:i])
		b.WriteByte('?')
		if n >= 1 && n <= len(args) {
			out = append(out, args[n-1])
		}
		q = q[j:]
	}
}

// querier is a *sql.DB or a *sql.Tx.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

func (s *SQL) query(ctx context.Context, db querier, q string, args ...any) (*sql.Rows, error) {
	q, args = s.bind(q, args...)
	return db.QueryContext(ctx, q, args...)
}

func (s *SQL) exec(ctx context.Context, db querier, q string, args ...any) (sql.Result, error) {
	q, args = s.bind(q, args...)
	return db.ExecContext(ctx, q, args...)
}

// writePlaceholders writes "($p+1, ..., $p+n)".
func writePlaceholders(b *strings.Builder, p, n int) {
	b.WriteByte('(')
	for i := 1; i <= n; i++ {
		if i > 1 {
			b.WriteString(", ")
		}
		b.WriteByte('$')
		b.WriteString(strconv.Itoa(p + i))
	}
	b.WriteByte(')')
}

// dueJobs selects the jobs Lease may take, oldest first. $1 is now, $3 the limit.
const dueJobs = `SELECT id FROM hw_jobs
	WHERE (state IN ('pending', 'retryable') AND run_at <= $1) OR (state = 'running' AND lease_until < $1)
	ORDER BY run_at, id LIMIT $3`

const jobColumns = `id, event_ref, state, attempts, max_attempts, run_at, lease_until, last_error`

// Lease implements Store. On PostgreSQL concurrent leases skip each other's locked rows; the
// MATERIALIZED CTE makes the locking subselect run once, so LIMIT holds.
func (s *SQL) Lease(ctx context.Context, n int, now time.Time, lease time.Duration) ([]Job, error) {
	if n <= 0 {
		return nil, nil
	}
	var q string
	if s.dialect == dialectPostgres {
		q = `WITH due AS MATERIALIZED (` + dueJobs + ` FOR UPDATE SKIP LOCKED)
	UPDATE hw_jobs j SET state = 'running', attempts = j.attempts + 1, lease_until = $2, updated_at = $1
	FROM due WHERE j.id = due.id
	RETURNING j.id, j.event_ref, j.state, j.attempts, j.max_attempts, j.run_at, j.lease_until, j.last_error`
	} else {
		q = `UPDATE hw_jobs SET state = 'running', attempts = attempts + 1, lease_until = $2, updated_at = $1
	WHERE id IN (` + dueJobs + `)
	RETURNING ` + jobColumns
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("store: lease: begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	rows, err := s.query(ctx, tx, q, now.UnixMicro(), now.Add(lease).UnixMicro(), n)
	if err != nil {
		return nil, fmt.Errorf("store: lease: %w", err)
	}
	jobs, refs, err := scanJobs(rows, false)
	if err != nil {
		return nil, fmt.Errorf("store: lease: %w", err)
	}
	if len(jobs) == 0 {
		return nil, nil
	}
	events, err := s.loadEvents(ctx, tx, refs)
	if err != nil {
		return nil, fmt.Errorf("store: lease: %w", err)
	}
	for i := range jobs {
		maxAttempts := jobs[i].Event.MaxAttempts
		jobs[i].Event = events[refs[i]]
		jobs[i].Event.MaxAttempts = maxAttempts
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("store: lease: commit: %w", err)
	}
	// RETURNING has no order.
	slices.SortFunc(jobs, func(a, b Job) int {
		return cmp.Or(a.RunAt.Compare(b.RunAt), cmp.Compare(a.ID, b.ID))
	})
	return jobs, nil
}

// scanJobs reads rows of jobColumns (plus the event columns when withEvent) and closes rows.
// refs[i] is the event id of jobs[i].
func scanJobs(rows *sql.Rows, withEvent bool) (jobs []Job, refs []int64, err error) {
	defer func() {
		if cerr := rows.Close(); err == nil {
			err = cerr
		}
	}()
	for rows.Next() {
		var j Job
		var ref, runAt, leaseUntil int64
		var maxAttempts int64
		dest := []any{&j.ID, &ref, &j.State, &j.Attempt, &maxAttempts, &runAt, &leaseUntil, &j.LastError}
		var received int64
		if withEvent {
			e := &j.Event
			dest = append(dest, &e.Subscription, &e.EventID, &e.SubscriptionUID, &e.EventType, &e.ContentType, &e.Payload, &received)
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, nil, err
		}
		j.Event.MaxAttempts = int(maxAttempts)
		j.RunAt = fromMicros(runAt)
		j.LeaseUntil = fromMicros(leaseUntil)
		if withEvent {
			j.Event.ReceivedAt = fromMicros(received)
		}
		jobs = append(jobs, j)
		refs = append(refs, ref)
	}
	return jobs, refs, rows.Err()
}

// loadEvents reads the events with the given ids, keyed by id.
func (s *SQL) loadEvents(ctx context.Context, tx *sql.Tx, ids []int64) (map[int64]Event, error) {
	out := make(map[int64]Event, len(ids))
	for chunk := range slices.Chunk(ids, 1000) {
		var q strings.Builder
		q.WriteString(`SELECT id, subscription, event_id, subscription_uid, event_type, content_type, payload, received_at FROM hw_events WHERE id IN `)
		writePlaceholders(&q, 0, len(chunk))
		args := make([]any, len(chunk))
		for i, id := range chunk {
			args[i] = id
		}
		rows, err := s.query(ctx, tx, q.String(), args...)
		if err != nil {
			return nil, fmt.Errorf("load events: %w", err)
		}
		for rows.Next() {
			var id, received int64
			var e Event
			if err := rows.Scan(&id, &e.Subscription, &e.EventID, &e.SubscriptionUID, &e.EventType, &e.ContentType, &e.Payload, &received); err != nil {
				_ = rows.Close()
				return nil, fmt.Errorf("load events: %w", err)
			}
			e.ReceivedAt = fromMicros(received)
			out[id] = e
		}
		if err := rows.Close(); err != nil {
			return nil, fmt.Errorf("load events: %w", err)
		}
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("load events: %w", err)
		}
	}
	for _, id := range ids {
		if _, ok := out[id]; !ok {
			return nil, fmt.Errorf("load events: event %d of a leased job is missing", id)
		}
	}
	return out, nil
}

// Complete implements Store.
func (s *SQL) Complete(ctx context.Context, j Job, now time.Time) error {
	return s.report(ctx, "complete", j,
		`UPDATE hw_jobs SET state = 'completed', lease_until = 0, updated_at = $4`+fenced, now.UnixMicro())
}

// Retry implements Store.
func (s *SQL) Retry(ctx context.Context, j Job, at time.Time, lastErr string) error {
	return s.report(ctx, "retry", j,
		`UPDATE hw_jobs SET state = 'retryable', run_at = $4, last_error = $5, lease_until = 0, updated_at = $6`+fenced,
		at.UnixMicro(), lastErr, s.now().UnixMicro())
}

// Release implements Store.
func (s *SQL) Release(ctx context.Context, j Job, at time.Time, reason string) error {
	return s.report(ctx, "release", j,
		`UPDATE hw_jobs SET state = 'retryable', attempts = attempts - 1, run_at = $4, last_error = $5, lease_until = 0, updated_at = $6`+fenced,
		at.UnixMicro(), reason, s.now().UnixMicro())
}

// Dead implements Store.
func (s *SQL) Dead(ctx context.Context, j Job, lastErr string) error {
	return s.report(ctx, "dead", j,
		`UPDATE hw_jobs SET state = 'dead', last_error = $4, lease_until = 0, updated_at = $5`+fenced,
		lastErr, s.now().UnixMicro())
}

// fenced restricts a report to the lease the worker holds: the job is still running, with the
// attempt and lease deadline Lease handed out. The attempt alone would not do: Replay resets
// it, so a worker stalled since before the job died could otherwise report on the replay.
const fenced = ` WHERE id = $1 AND state = 'running' AND attempts = $2 AND lease_until = $3`

func (s *SQL) report(ctx context.Context, op string, j Job, q string, args ...any) error {
	args = append([]any{j.ID, int64(j.Attempt), j.LeaseUntil.UnixMicro()}, args...)
	res, err := s.exec(ctx, s.db, q, args...)
	if err != nil {
		return fmt.Errorf("store: %s job %d: %w", op, j.ID, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("store: %s job %d: %w", op, j.ID, err)
	}
	if n == 0 {
		return fmt.Errorf("store: %s job %d attempt %d: %w", op, j.ID, j.Attempt, ErrLeaseLost)
	}
	return nil
}

// DeadLetters implements Store: dead jobs with their events, in the order they died.
func (s *SQL) DeadLetters(ctx context.Context, limit int) ([]Job, error) {
	if limit <= 0 {
		return nil, nil
	}
	rows, err := s.query(ctx, s.db, `SELECT j.id, j.event_ref, j.state, j.attempts, j.max_attempts, j.run_at, j.lease_until, j.last_error,
	e.subscription, e.event_id, e.subscription_uid, e.event_type, e.content_type, e.payload, e.received_at
	FROM hw_jobs j JOIN hw_events e ON e.id = j.event_ref
	WHERE j.state = 'dead' ORDER BY j.updated_at, j.id LIMIT $1`, limit)
	if err != nil {
		return nil, fmt.Errorf("store: dead letters: %w", err)
	}
	jobs, _, err := scanJobs(rows, true)
	if err != nil {
		return nil, fmt.Errorf("store: dead letters: %w", err)
	}
	return jobs, nil
}

// Replay implements Store. It returns ErrNotDead when the job is not dead-lettered.
func (s *SQL) Replay(ctx context.Context, jobID int64, now time.Time) error {
	res, err := s.exec(ctx, s.db, `UPDATE hw_jobs SET state = 'pending', attempts = 0, run_at = $2, lease_until = 0, updated_at = $2
	WHERE id = $1 AND state = 'dead'`, jobID, now.UnixMicro())
	if err != nil {
		return fmt.Errorf("store: replay job %d: %w", jobID, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("store: replay job %d: %w", jobID, err)
	}
	if n == 0 {
		return fmt.Errorf("store: replay job %d: %w", jobID, ErrNotDead)
	}
	return nil
}

// sweepBatch bounds the events one Sweep statement deletes, so that no transaction holds the
// SQLite write lock (or many PostgreSQL row locks) for long.
const sweepBatch = 1000

// Sweep implements Store. A dead job's event goes only once the job also died before cutoff,
// so a dead letter stays replayable for the whole retention window.
func (s *SQL) Sweep(ctx context.Context, cutoff time.Time) (int, error) {
	// FOR UPDATE OF j makes PostgreSQL re-check the job's state after a concurrent Replay.
	lock := ""
	if s.dialect == dialectPostgres {
		lock = " FOR UPDATE OF j SKIP LOCKED"
	}
	q := `DELETE FROM hw_events WHERE id IN (SELECT e.id FROM hw_events e JOIN hw_jobs j ON j.event_ref = e.id
	WHERE e.received_at < $1 AND (j.state = 'completed' OR (j.state = 'dead' AND j.updated_at < $1))
	LIMIT $2` + lock + `)`
	total := 0
	for {
		res, err := s.exec(ctx, s.db, q, cutoff.UnixMicro(), sweepBatch)
		if err != nil {
			return total, fmt.Errorf("store: sweep: %w", err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return total, fmt.Errorf("store: sweep: %w", err)
		}
		total += int(n)
		if n < sweepBatch {
			return total, nil
		}
	}
}

// Depth implements Store.
func (s *SQL) Depth(ctx context.Context) (int, error) {
	var n int
	err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM hw_jobs WHERE state IN ('pending', 'running', 'retryable')`).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("store: depth: %w", err)
	}
	return n, nil
}

func fromMicros(us int64) time.Time {
	if us == 0 {
		return time.Time{}
	}
	return time.UnixMicro(us).UTC()
}
