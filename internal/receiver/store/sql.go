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
	"sync"
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

	// claimStmts caches the SQLite claim statement by row count (see claimStmt).
	claimMu    sync.Mutex
	claimStmts map[int]*sql.Stmt

	// beforeCommit, when set (tests only), runs inside ClaimBatch after the insert and before
	// the commit, to inject a failure half-way through the transaction. It sends PostgreSQL
	// through the explicit transaction too.
	beforeCommit func(ctx context.Context, tx *sql.Tx) error
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
func (s *SQL) Close() error {
	s.claimMu.Lock()
	for _, st := range s.claimStmts {
		_ = st.Close()
	}
	s.claimStmts = nil
	s.claimMu.Unlock()
	return s.db.Close()
}

type eventKey struct{ subscription, eventID string }

// ClaimBatch implements Store. One INSERT ... ON CONFLICT DO NOTHING RETURNING records the
// batch: the unique constraint decides between concurrent claims, also across processes, and
// each inserted row is its event's pending job.
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

	var fresh map[eventKey]bool
	var err error
	if s.dialect == dialectPostgres && s.beforeCommit == nil {
		fresh, err = s.claimPostgres(ctx, events, uniq, now)
	} else {
		fresh, err = s.claimTx(ctx, events, uniq, now)
	}
	if err != nil {
		return nil, err
	}
	for _, i := range uniq {
		dup[i] = !fresh[eventKey{events[i].Subscription, events[i].EventID}]
	}
	return dup, nil
}

// claimCols is the number of placeholders per row of claimSQL.
const claimCols = 10

// claimSQL is the claim insert for n rows, with $N placeholders.
func claimSQL(n int) string {
	var q strings.Builder
	q.WriteString(`INSERT INTO hw_events (subscription, event_id, subscription_uid, event_type, content_type, payload, received_at, max_attempts, run_at, updated_at, state) VALUES `)
	for i := range n {
		if i > 0 {
			q.WriteByte(',')
		}
		p := i * claimCols
		writePlaceholders(&q, p, claimCols, `'`+StatePending+`'`)
	}
	q.WriteString(` ON CONFLICT (subscription, event_id) DO NOTHING RETURNING subscription, event_id`)
	return q.String()
}

// maxCachedClaim bounds the row counts whose SQLite statement is kept prepared: the Batcher's
// batches (256 by default) reuse them; larger ones are prepared per call.
const maxCachedClaim = 256

// claimStmt returns the prepared SQLite claim statement for n rows, preparing it on first use.
// It must run outside a transaction: SQLite has one connection, which the transaction holds.
// Parsing a multi-row INSERT costs more than running it, so each batch size is parsed once.
func (s *SQL) claimStmt(ctx context.Context, n int) (*sql.Stmt, error) {
	if s.dialect != dialectSQLite || n > maxCachedClaim {
		return nil, nil
	}
	s.claimMu.Lock()
	defer s.claimMu.Unlock()
	if st := s.claimStmts[n]; st != nil {
		return st, nil
	}
	q, _ := s.bind(claimSQL(n))
	st, err := s.db.PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	if s.claimStmts == nil {
		s.claimStmts = map[int]*sql.Stmt{}
	}
	s.claimStmts[n] = st
	return st, nil
}

// claimTx records the batch in an explicit transaction, in chunks that fit the parameter limit.
func (s *SQL) claimTx(ctx context.Context, events []Event, uniq []int, now time.Time) (map[eventKey]bool, error) {
	chunks := slices.Collect(slices.Chunk(uniq, s.maxParams/claimCols))
	stmts := make([]*sql.Stmt, len(chunks))
	for c, chunk := range chunks {
		st, err := s.claimStmt(ctx, len(chunk))
		if err != nil {
			return nil, fmt.Errorf("store: claim: prepare: %w", err)
		}
		stmts[c] = st
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("store: claim: begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	fresh := make(map[eventKey]bool, len(uniq))
	for c, chunk := range chunks {
		args := make([]any, 0, len(chunk)*claimCols)
		for _, i := range chunk {
			e := events[i]
			payload := e.Payload
			if payload == nil {
				payload = []byte{}
			}
			received := e.ReceivedAt
			if received.IsZero() {
				received = now
			}
			at := received.UnixMicro()
			args = append(args, e.Subscription, e.EventID, e.SubscriptionUID, e.EventType, e.ContentType, payload, at, int64(e.MaxAttempts), at, at)
		}
		var rows *sql.Rows
		if st := stmts[c]; st != nil {
			rows, err = tx.StmtContext(ctx, st).QueryContext(ctx, args...)
		} else {
			rows, err = s.query(ctx, tx, claimSQL(len(chunk)), args...)
		}
		if err != nil {
			return nil, fmt.Errorf("store: claim: %w", err)
		}
		if err := scanClaimed(rows, fresh); err != nil {
			return nil, fmt.Errorf("store: claim: %w", err)
		}
	}
	if s.beforeCommit != nil {
		if err := s.beforeCommit(ctx, tx); err != nil {
			return nil, fmt.Errorf("store: claim: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("store: claim: commit: %w", err)
	}
	return fresh, nil
}

// scanClaimed adds the (subscription, event_id) rows to fresh and closes rows.
func scanClaimed(rows *sql.Rows, fresh map[eventKey]bool) (err error) {
	defer func() {
		if cerr := rows.Close(); err == nil {
			err = cerr
		}
	}()
	for rows.Next() {
		var k eventKey
		if err := rows.Scan(&k.subscription, &k.eventID); err != nil {
			return err
		}
		fresh[k] = true
	}
	return rows.Err()
}

// claimPostgresSQL records a batch in ONE statement over arrays, so the batch costs one round
// trip and one implicit transaction, and the text never changes with the batch size (pgx
// prepares it once per connection). Rows go in key order, so overlapping batches take the
// unique-index locks in the same order and cannot deadlock.
const claimPostgresSQL = `
INSERT INTO hw_events (subscription, event_id, subscription_uid, event_type, content_type, payload, received_at, max_attempts, run_at, updated_at, state)
SELECT subscription, event_id, subscription_uid, event_type, content_type, payload, received_at, max_attempts, received_at, received_at, 'pending'
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bytea[], $7::bigint[], $8::int[])
	AS t(subscription, event_id, subscription_uid, event_type, content_type, payload, received_at, max_attempts)
ORDER BY subscription, event_id
ON CONFLICT (subscription, event_id) DO NOTHING
RETURNING subscription, event_id`

func (s *SQL) claimPostgres(ctx context.Context, events []Event, uniq []int, now time.Time) (map[eventKey]bool, error) {
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
	if err := scanClaimed(rows, fresh); err != nil {
		return nil, fmt.Errorf("store: claim: %w", err)
	}
	return fresh, nil
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

// writePlaceholders writes "($p+1, ..., $p+n, literals...)".
func writePlaceholders(b *strings.Builder, p, n int, literals ...string) {
	b.WriteByte('(')
	for i := 1; i <= n; i++ {
		if i > 1 {
			b.WriteString(", ")
		}
		b.WriteByte('$')
		b.WriteString(strconv.Itoa(p + i))
	}
	for _, l := range literals {
		b.WriteString(", ")
		b.WriteString(l)
	}
	b.WriteByte(')')
}

// dueJobs selects the jobs Lease may take, oldest first. $1 is now, $3 the limit.
const dueJobs = `SELECT id FROM hw_events
	WHERE (state IN ('pending', 'retryable') AND run_at <= $1) OR (state = 'running' AND lease_until < $1)
	ORDER BY run_at, id LIMIT $3`

// dueJobsSQLite is dueJobs for SQLite. With one condition per state each branch reads its first
// rows straight from the (state, run_at) index, in order, and stops at the limit: the OR form
// made SQLite sort the whole backlog on every Lease (a sink outage's backlog, on every poll).
const dueJobsSQLite = `SELECT id FROM (
	SELECT * FROM (SELECT id, run_at FROM hw_events WHERE state = 'pending' AND run_at <= $1 ORDER BY run_at, id LIMIT $3)
	UNION ALL
	SELECT * FROM (SELECT id, run_at FROM hw_events WHERE state = 'retryable' AND run_at <= $1 ORDER BY run_at, id LIMIT $3)
	UNION ALL
	SELECT * FROM (SELECT id, run_at FROM hw_events WHERE state = 'running' AND lease_until < $1 ORDER BY run_at, id LIMIT $3)
	) ORDER BY run_at, id LIMIT $3`

// jobColumns are the columns scanJobs reads, in its order.
const jobColumns = `id, state, attempts, max_attempts, run_at, lease_until, last_error,
	subscription, event_id, subscription_uid, event_type, content_type, payload, received_at`

// Lease implements Store. On PostgreSQL concurrent leases skip each other's locked rows; the
// MATERIALIZED CTE makes the locking subselect run once, so LIMIT holds.
func (s *SQL) Lease(ctx context.Context, n int, now time.Time, lease time.Duration) ([]Job, error) {
	if n <= 0 {
		return nil, nil
	}
	q := `UPDATE hw_events SET state = 'running', attempts = attempts + 1, lease_until = $2, updated_at = $1
	WHERE id IN (` + dueJobsSQLite + `)
	RETURNING ` + jobColumns
	if s.dialect == dialectPostgres {
		q = `WITH due AS MATERIALIZED (` + dueJobs + ` FOR UPDATE SKIP LOCKED)
	UPDATE hw_events SET state = 'running', attempts = hw_events.attempts + 1, lease_until = $2, updated_at = $1
	FROM due WHERE hw_events.id = due.id
	RETURNING ` + qualify("hw_events", jobColumns)
	}
	rows, err := s.query(ctx, s.db, q, now.UnixMicro(), now.Add(lease).UnixMicro(), n)
	if err != nil {
		return nil, fmt.Errorf("store: lease: %w", err)
	}
	jobs, err := scanJobs(rows)
	if err != nil {
		return nil, fmt.Errorf("store: lease: %w", err)
	}
	// RETURNING has no order.
	slices.SortFunc(jobs, func(a, b Job) int {
		return cmp.Or(a.RunAt.Compare(b.RunAt), cmp.Compare(a.ID, b.ID))
	})
	return jobs, nil
}

// qualify prefixes each of the comma-separated columns with table.
func qualify(table, columns string) string {
	cols := strings.Split(columns, ",")
	for i, c := range cols {
		cols[i] = table + "." + strings.TrimSpace(c)
	}
	return strings.Join(cols, ", ")
}

// scanJobs reads rows of jobColumns and closes rows.
func scanJobs(rows *sql.Rows) (jobs []Job, err error) {
	defer func() {
		if cerr := rows.Close(); err == nil {
			err = cerr
		}
	}()
	for rows.Next() {
		var j Job
		var runAt, leaseUntil, received, maxAttempts int64
		e := &j.Event
		if err := rows.Scan(&j.ID, &j.State, &j.Attempt, &maxAttempts, &runAt, &leaseUntil, &j.LastError,
			&e.Subscription, &e.EventID, &e.SubscriptionUID, &e.EventType, &e.ContentType, &e.Payload, &received); err != nil {
			return nil, err
		}
		e.MaxAttempts = int(maxAttempts)
		e.ReceivedAt = fromMicros(received)
		j.RunAt = fromMicros(runAt)
		j.LeaseUntil = fromMicros(leaseUntil)
		jobs = append(jobs, j)
	}
	return jobs, rows.Err()
}

// Complete implements Store.
func (s *SQL) Complete(ctx context.Context, j Job, now time.Time) error {
	return s.report(ctx, "complete", j,
		`UPDATE hw_events SET state = 'completed', lease_until = 0, updated_at = $4`+fenced, now.UnixMicro())
}

// Retry implements Store.
func (s *SQL) Retry(ctx context.Context, j Job, at time.Time, lastErr string) error {
	return s.report(ctx, "retry", j,
		`UPDATE hw_events SET state = 'retryable', run_at = $4, last_error = $5, lease_until = 0, updated_at = $6`+fenced,
		at.UnixMicro(), lastErr, s.now().UnixMicro())
}

// Release implements Store.
func (s *SQL) Release(ctx context.Context, j Job, at time.Time, reason string) error {
	return s.report(ctx, "release", j,
		`UPDATE hw_events SET state = 'retryable', attempts = attempts - 1, run_at = $4, last_error = $5, lease_until = 0, updated_at = $6`+fenced,
		at.UnixMicro(), reason, s.now().UnixMicro())
}

// Dead implements Store.
func (s *SQL) Dead(ctx context.Context, j Job, lastErr string) error {
	return s.report(ctx, "dead", j,
		`UPDATE hw_events SET state = 'dead', last_error = $4, lease_until = 0, updated_at = $5`+fenced,
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
	rows, err := s.query(ctx, s.db, `SELECT `+jobColumns+` FROM hw_events
	WHERE state = 'dead' ORDER BY updated_at, id LIMIT $1`, limit)
	if err != nil {
		return nil, fmt.Errorf("store: dead letters: %w", err)
	}
	jobs, err := scanJobs(rows)
	if err != nil {
		return nil, fmt.Errorf("store: dead letters: %w", err)
	}
	return jobs, nil
}

// Replay implements Store. It returns ErrNotDead when the job is not dead-lettered.
func (s *SQL) Replay(ctx context.Context, jobID int64, now time.Time) error {
	res, err := s.exec(ctx, s.db, `UPDATE hw_events SET state = 'pending', attempts = 0, run_at = $2, lease_until = 0, updated_at = $2
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
// so a dead letter stays replayable for the whole retention window. The due-job index finds
// the candidates: a completed job ran at or after it was received (run_at >= received_at), so
// run_at < cutoff narrows the scan without changing the answer.
func (s *SQL) Sweep(ctx context.Context, cutoff time.Time) (int, error) {
	// FOR UPDATE makes PostgreSQL re-check the row's state after a concurrent Replay.
	lock := ""
	if s.dialect == dialectPostgres {
		lock = " FOR UPDATE SKIP LOCKED"
	}
	q := `DELETE FROM hw_events WHERE id IN (SELECT id FROM hw_events
	WHERE received_at < $1 AND ((state = 'completed' AND run_at < $1) OR (state = 'dead' AND updated_at < $1))
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
	err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM hw_events WHERE state IN ('pending', 'running', 'retryable')`).Scan(&n)
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
