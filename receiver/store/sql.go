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

// ErrNotDead is returned by Replay and Purge when the job does not exist or is not
// dead-lettered.
var ErrNotDead = errors.New("job is not dead-lettered")

// SQL is the Store on SQLite or PostgreSQL. Times are stored as unix microseconds so that both
// databases compare and round them the same way. Queries use PostgreSQL's $N placeholders, which
// the SQLite driver binds by number too.
type SQL struct {
	db *sql.DB
	// reader runs the statements that only read and may take long (Depth counts the whole
	// queue). On SQLite it is a connection of its own, so a count of a large backlog does not
	// hold the one writing connection that every claim waits for (WAL readers do not block
	// the writer); on PostgreSQL it is db.
	reader *sql.DB
	// reports group-commits job reports, and the Leases beside them, on SQLite (nil on
	// PostgreSQL, whose connections commit concurrently).
	reports *reportGroup
	dialect dialect
	now     func() time.Time
	// maxParams bounds the parameters of one SQLite claim statement.
	maxParams int

	// stmts caches the SQLite statements prepared once, by database and text (see stmt):
	// the claims' inserts for each batch size and the delivery loop's statements. stmtMu
	// guards the map only: nothing is prepared while it is held.
	stmtMu sync.Mutex
	stmts  map[stmtKey]*sql.Stmt
}

type stmtKey struct {
	db *sql.DB
	q  string
}

var (
	_ Store  = (*SQL)(nil)
	_ Purger = (*SQL)(nil)
)

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

// Ping implements Store.
func (s *SQL) Ping(ctx context.Context) error { return s.db.PingContext(ctx) }

// Close closes the database.
func (s *SQL) Close() error {
	s.stmtMu.Lock()
	for _, st := range s.stmts {
		_ = st.Close()
	}
	s.stmts = nil
	s.stmtMu.Unlock()
	if s.reader != s.db {
		_ = s.reader.Close()
	}
	return s.db.Close()
}

type eventKey struct{ subscription, eventID string }

// ClaimBatch implements Store. One INSERT ... ON CONFLICT DO NOTHING RETURNING records the
// batch: the unique constraint decides between concurrent claims, also across processes; then
// each inserted event gets a pending job per sink, in the same transaction (on PostgreSQL in
// the same statement). An event CheckEvent refuses fails the batch before the database sees it.
//
// Events with a replay key take one more statement first, in the same transaction: their keys
// go into hw_replays (unique on subscription + replay key), and only the events whose key was
// not held yet go on to hw_events. Both statements insert in their unique index's order, and
// every transaction finishes its replay keys before its first event, so overlapping batches
// still cannot deadlock.
func (s *SQL) ClaimBatch(ctx context.Context, events []Event) ([]bool, error) {
	dup := make([]bool, len(events))
	if len(events) == 0 {
		return dup, nil
	}
	// Every event is a duplicate until the database returns its row as inserted.
	all := make([]int, len(events))
	for i, e := range events {
		if err := CheckEvent(e); err != nil {
			return nil, fmt.Errorf("store: claim: event %d: %w", i, err)
		}
		dup[i] = true
		all[i] = i
	}
	c := &sqlClaim{s: s, events: events, dup: dup, now: s.now(), replays: firstReplays(events)}
	var err error
	switch {
	case len(c.replays) > 0 || s.dialect == dialectPostgres && ordered(events):
		err = c.withReplays(ctx)
	case s.dialect == dialectPostgres:
		// One statement, its own transaction: one round trip.
		err = c.insertEvents(ctx, s.db, all)
	default:
		err = c.sqlite(ctx, all)
	}
	if err != nil {
		return nil, err
	}
	return dup, nil
}

// ordered reports whether an event of events goes to a sink that orders its events.
func ordered(events []Event) bool {
	return slices.ContainsFunc(events, func(e Event) bool { return len(e.OrderKeys) > 0 })
}

// jobState is the state a new job starts in: pending, or blocked behind the jobs of its
// ordering key until promote finds it the oldest.
func jobState(orderKey string) string {
	if orderKey == "" {
		return StatePending
	}
	return stateBlocked
}

// stateBlocked is a job of an ordering key waiting for the older jobs of its key.
const stateBlocked = "blocked"

// promoteSQL makes the oldest blocked job of the ordering key $1 pending, when no job of the
// key is pending, running or retryable.
const promoteSQL = `UPDATE hw_sink_jobs SET state = 'pending' WHERE (event, slot) IN (
	SELECT event, slot FROM hw_sink_jobs WHERE order_key = $1 AND state = 'blocked'
	AND NOT EXISTS (SELECT 1 FROM hw_sink_jobs WHERE order_key = $1 AND state IN ('pending', 'running', 'retryable'))
	ORDER BY event LIMIT 1)`

// promote runs promoteSQL for each of keys, in order, through q (a claim's transaction, or
// one of its own). On PostgreSQL it first takes each key's transaction-scoped advisory lock:
// a claim and a report promoting the same key at once run one after the other, and each sees
// what the other committed, so a key never ends with blocked jobs and none ahead of them.
func (s *SQL) promote(ctx context.Context, q interface {
	ExecContext(context.Context, string, ...any) (sql.Result, error)
}, keys []string) error {
	for _, k := range keys {
		if s.dialect == dialectPostgres {
			if _, err := q.ExecContext(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, k); err != nil {
				return err
			}
		}
		if _, err := q.ExecContext(ctx, promoteSQL, k); err != nil {
			return err
		}
	}
	return nil
}

// promoteAlone runs promote for keys in a transaction of its own (after a report).
func (s *SQL) promoteAlone(ctx context.Context, keys ...string) error {
	if len(keys) == 0 || keys[0] == "" {
		return nil
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	if err := s.promote(ctx, tx, keys); err != nil {
		return err
	}
	return tx.Commit()
}

// sqlClaim is one ClaimBatch in progress.
type sqlClaim struct {
	s       *SQL
	events  []Event
	dup     []bool
	now     time.Time
	replays []int // events whose replay key comes first in the batch
}

// querier is a *sql.DB or a *sql.Tx.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// firstReplays returns the events with a replay key that no earlier event of the batch has.
func firstReplays(events []Event) []int {
	var first []int
	var seen map[eventKey]bool // allocated only for a batch with replay keys
	for i, e := range events {
		if e.ReplayKey == "" {
			continue
		}
		if seen == nil {
			seen = map[eventKey]bool{}
		}
		if k := (eventKey{e.Subscription, e.ReplayKey}); !seen[k] {
			seen[k] = true
			first = append(first, i)
		}
	}
	return first
}

func (c *sqlClaim) received(e Event) int64 {
	if e.ReceivedAt.IsZero() {
		return c.now.UnixMicro()
	}
	return e.ReceivedAt.UnixMicro()
}

// sqlite records events (indexes into c.events) in one transaction, with statements prepared
// before it begins: the transaction holds SQLite's one connection.
func (c *sqlClaim) sqlite(ctx context.Context, idx []int) error {
	uniq, first := firstByID(c.events, idx)
	chunks := slices.Collect(slices.Chunk(uniq, c.s.maxParams/claimCols))
	stmts := make([]*sql.Stmt, len(chunks))
	for k, chunk := range chunks {
		st, err := c.s.claimStmt(ctx, len(chunk))
		if err != nil {
			return fmt.Errorf("store: claim: prepare: %w", err)
		}
		stmts[k] = st
	}
	tx, err := c.s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: claim: begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	warm, err := c.insertSQLiteEvents(ctx, tx, chunks, stmts, first)
	if err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: claim: commit: %w", err)
	}
	c.s.warm(ctx, warm)
	return nil
}

// warm prepares the statements a claim ran unprepared (sizes known only inside its
// transaction), for the next claim; a failure only leaves them unprepared.
func (s *SQL) warm(ctx context.Context, w warmup) {
	for _, n := range w.claims {
		_, _ = s.claimStmt(ctx, n)
	}
	for _, n := range w.jobs {
		_, _ = s.jobStmt(ctx, n)
	}
}

// warmup lists the row counts of statements run unprepared.
type warmup struct{ claims, jobs []int }

// withReplays records the replay keys, then the events whose key was new or who have none, in
// one transaction.
func (c *sqlClaim) withReplays(ctx context.Context) error {
	var replayStmts []*sql.Stmt
	var replayChunks [][]int
	if c.s.dialect == dialectSQLite {
		replayChunks = slices.Collect(slices.Chunk(c.replays, c.s.maxParams/replayCols))
		for _, chunk := range replayChunks {
			st, err := c.s.replayStmt(ctx, len(chunk))
			if err != nil {
				return fmt.Errorf("store: claim: prepare: %w", err)
			}
			replayStmts = append(replayStmts, st)
		}
	}
	tx, err := c.s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: claim: begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }()

	held := map[eventKey]bool{} // replay keys recorded before this claim
	for _, i := range c.replays {
		held[eventKey{c.events[i].Subscription, c.events[i].ReplayKey}] = true
	}
	fresh := func(k eventKey) { delete(held, k) }
	if c.s.dialect == dialectPostgres {
		err = c.insertPostgresReplays(ctx, tx, fresh)
	} else {
		err = c.insertSQLiteReplays(ctx, tx, replayChunks, replayStmts, fresh)
	}
	if err != nil {
		return err
	}
	// As if claimed one by one: an event whose key was held, or came earlier in the batch,
	// is a duplicate and records nothing more; the others go on to their event id.
	first := map[int]bool{}
	for _, i := range c.replays {
		first[i] = true
	}
	var next []int
	for i, e := range c.events {
		if e.ReplayKey == "" || first[i] && !held[eventKey{e.Subscription, e.ReplayKey}] {
			next = append(next, i)
		}
	}
	var warm warmup
	if c.s.dialect == dialectPostgres {
		err = c.insertEvents(ctx, tx, next)
	} else {
		// The statements' sizes are known only now: a cached one is used, any other runs
		// unprepared and is prepared for next time after the commit.
		uniq, firstIDs := firstByID(c.events, next)
		chunks := slices.Collect(slices.Chunk(uniq, c.s.maxParams/claimCols))
		stmts := make([]*sql.Stmt, len(chunks))
		for k, chunk := range chunks {
			if stmts[k] = c.s.cached(claimSQL(len(chunk))); stmts[k] == nil {
				warm.claims = append(warm.claims, len(chunk))
			}
		}
		var jobs warmup
		jobs, err = c.insertSQLiteEvents(ctx, tx, chunks, stmts, firstIDs)
		warm.jobs = jobs.jobs
	}
	if err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: claim: commit: %w", err)
	}
	c.s.warm(ctx, warm)
	return nil
}

// firstByID returns the events of idx whose (subscription, event id) no earlier one of idx
// has, and where each key first occurs.
func firstByID(events []Event, idx []int) ([]int, map[eventKey]int) {
	first := make(map[eventKey]int, len(idx))
	uniq := make([]int, 0, len(idx))
	for _, i := range idx {
		k := eventKey{events[i].Subscription, events[i].EventID}
		if _, ok := first[k]; !ok {
			first[k] = i
			uniq = append(uniq, i)
		}
	}
	return uniq, first
}

// claimCols is the number of placeholders in claimRow.
const claimCols = 9

const claimRow = `(?, ?, ?, ?, ?, ?, ?, ?, ?)`

// claimSQL is the SQLite claim insert for n rows. Anonymous ? placeholders: SQLite resolves a
// $N or ?N through a list searched linearly per parameter, so an insert with thousands of them
// took seconds instead of milliseconds.
func claimSQL(n int) string {
	return `INSERT INTO hw_events (subscription, event_id, subscription_uid, event_type, content_type, payload, received_at, max_attempts, trace_context) VALUES ` +
		strings.Repeat(claimRow+",", n-1) + claimRow +
		` ON CONFLICT (subscription, event_id) DO NOTHING RETURNING id, subscription, event_id`
}

// jobCols is the number of placeholders in jobRow.
const jobCols = 7

const jobRow = `(?, ?, ?, ?, ?, ?, ?)`

// jobsSQL is the SQLite insert of n new jobs.
func jobsSQL(n int) string {
	return `INSERT INTO hw_sink_jobs (event, slot, sink, state, order_key, run_at, updated_at) VALUES ` +
		strings.Repeat(jobRow+",", n-1) + jobRow
}

// replayCols is the number of placeholders in a replay key row.
const replayCols = 3

// replaySQL is the SQLite replay key insert for n rows.
func replaySQL(n int) string {
	return `INSERT INTO hw_replays (subscription, replay_key, received_at) VALUES ` +
		strings.Repeat("(?, ?, ?),", n-1) + "(?, ?, ?)" +
		` ON CONFLICT (subscription, replay_key) DO NOTHING RETURNING subscription, replay_key`
}

// maxCachedClaim bounds the row counts whose SQLite statement is kept prepared: the Batcher's
// batches (256 by default) reuse them; larger ones are prepared per call.
const maxCachedClaim = 256

// claimStmt returns the prepared SQLite claim statement for n rows, preparing it on first use,
// or nil for more than maxCachedClaim rows. It must run outside a transaction: SQLite has one
// connection, which the transaction holds. Parsing a multi-row INSERT costs more than running
// it, so each batch size is parsed once.
func (s *SQL) claimStmt(ctx context.Context, n int) (*sql.Stmt, error) {
	return s.sized(ctx, n, claimSQL)
}

// jobStmt is claimStmt for the job insert.
func (s *SQL) jobStmt(ctx context.Context, n int) (*sql.Stmt, error) {
	return s.sized(ctx, n, jobsSQL)
}

// replayStmt is claimStmt for the replay key insert.
func (s *SQL) replayStmt(ctx context.Context, n int) (*sql.Stmt, error) {
	return s.sized(ctx, n, replaySQL)
}

func (s *SQL) sized(ctx context.Context, n int, text func(int) string) (*sql.Stmt, error) {
	if n > maxCachedClaim {
		return nil, nil
	}
	return s.stmt(ctx, s.db, text(n))
}

// cached is the writer's prepared statement for q without preparing it: nil unless it is
// prepared already. A claim's transaction, which holds the one connection, may call it.
func (s *SQL) cached(q string) *sql.Stmt {
	s.stmtMu.Lock()
	defer s.stmtMu.Unlock()
	return s.stmts[stmtKey{s.db, q}]
}

// stmt is q prepared on db, once: on SQLite the claims' inserts and the statements the
// delivery loop runs for every batch of jobs (Lease, the events of its jobs, the reports) are
// prepared on first use and kept until Close. modernc's SQLite parses and compiles a statement
// each time it runs one otherwise, a third of the CPU of delivering to a fast sink (make
// bench-sinks). On PostgreSQL it returns nil: pgx keeps its own statement cache per
// connection. It must not be called while a transaction holds db's one SQLite connection
// (preparing waits for that connection); inside one, cached finds what is prepared.
func (s *SQL) stmt(ctx context.Context, db *sql.DB, q string) (*sql.Stmt, error) {
	if s.dialect != dialectSQLite {
		return nil, nil
	}
	k := stmtKey{db, q}
	s.stmtMu.Lock()
	st := s.stmts[k]
	s.stmtMu.Unlock()
	if st != nil {
		return st, nil
	}
	// Prepared without the lock: preparing waits for the connection, which a claim's
	// transaction may hold while it looks up a statement (cached). Holding the lock here
	// deadlocked the two.
	st, err := db.PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	s.stmtMu.Lock()
	defer s.stmtMu.Unlock()
	if kept := s.stmts[k]; kept != nil {
		_ = st.Close() // prepared meanwhile by another caller
		return kept, nil
	}
	if s.stmts == nil {
		s.stmts = map[stmtKey]*sql.Stmt{}
	}
	s.stmts[k] = st
	return st, nil
}

// query runs q on db, prepared once on SQLite (see stmt).
func (s *SQL) query(ctx context.Context, db *sql.DB, q string, args ...any) (*sql.Rows, error) {
	st, err := s.stmt(ctx, db, q)
	switch {
	case err != nil:
		return nil, err
	case st == nil:
		return db.QueryContext(ctx, q, args...)
	}
	return st.QueryContext(ctx, args...)
}

// insertSQLiteEvents inserts the chunks of events with their statements (nil: unprepared),
// marks each inserted event accepted and inserts its jobs. It returns the sizes of job
// statements it ran unprepared.
func (c *sqlClaim) insertSQLiteEvents(ctx context.Context, tx *sql.Tx, chunks [][]int, stmts []*sql.Stmt, first map[eventKey]int) (warmup, error) {
	var jobs []any    // jobCols values per job
	var keys []string // the ordering keys of the new jobs
	for k, chunk := range chunks {
		args := make([]any, 0, len(chunk)*claimCols)
		for _, i := range chunk {
			e := c.events[i]
			payload := e.Payload
			if payload == nil {
				payload = []byte{}
			}
			args = append(args, e.Subscription, e.EventID, e.SubscriptionUID, e.EventType, e.ContentType, payload, c.received(e), int64(e.MaxAttempts), e.Trace)
		}
		rows, err := queryRows(ctx, tx, stmts[k], claimSQL(len(chunk)), args)
		if err == nil {
			err = scanInserted(rows, func(id int64, key eventKey) {
				i := first[key]
				c.dup[i] = false
				at := c.received(c.events[i])
				for slot, sink := range sinksOf(c.events[i]) {
					key := orderKeyOf(c.events[i], sink)
					if key != "" && !slices.Contains(keys, key) {
						keys = append(keys, key)
					}
					jobs = append(jobs, id, slot, sink, jobState(key), key, at, at)
				}
			})
		}
		if err != nil {
			return warmup{}, fmt.Errorf("store: claim: %w", err)
		}
	}
	var warm warmup
	for chunk := range slices.Chunk(jobs, c.s.maxParams/jobCols*jobCols) {
		n := len(chunk) / jobCols
		st := c.s.cached(jobsSQL(n))
		if st == nil {
			warm.jobs = append(warm.jobs, n)
		}
		if err := execIn(ctx, tx, st, jobsSQL(n), chunk); err != nil {
			return warmup{}, fmt.Errorf("store: claim: jobs: %w", err)
		}
	}
	if err := c.s.promote(ctx, tx, keys); err != nil {
		return warmup{}, fmt.Errorf("store: claim: ordering: %w", err)
	}
	return warm, nil
}

// insertSQLiteReplays inserts the chunks of replay keys and calls fresh for each new one.
func (c *sqlClaim) insertSQLiteReplays(ctx context.Context, tx *sql.Tx, chunks [][]int, stmts []*sql.Stmt, fresh func(eventKey)) error {
	for k, chunk := range chunks {
		args := make([]any, 0, len(chunk)*replayCols)
		for _, i := range chunk {
			e := c.events[i]
			args = append(args, e.Subscription, e.ReplayKey, c.received(e))
		}
		rows, err := queryRows(ctx, tx, stmts[k], replaySQL(len(chunk)), args)
		if err == nil {
			err = scanClaimed(rows, fresh)
		}
		if err != nil {
			return fmt.Errorf("store: claim: replay keys: %w", err)
		}
	}
	return nil
}

// queryRows runs st (or q when st is nil) in tx.
func queryRows(ctx context.Context, tx *sql.Tx, st *sql.Stmt, q string, args []any) (*sql.Rows, error) {
	if st != nil {
		return tx.StmtContext(ctx, st).QueryContext(ctx, args...)
	}
	return tx.QueryContext(ctx, q, args...)
}

// execIn runs st (or q when st is nil) in tx.
func execIn(ctx context.Context, tx *sql.Tx, st *sql.Stmt, q string, args []any) error {
	var err error
	if st != nil {
		_, err = tx.StmtContext(ctx, st).ExecContext(ctx, args...)
	} else {
		_, err = tx.ExecContext(ctx, q, args...)
	}
	return err
}

// scanInserted calls inserted for each (id, subscription, event id) row and closes rows.
func scanInserted(rows *sql.Rows, inserted func(id int64, k eventKey)) (err error) {
	defer func() {
		if cerr := rows.Close(); err == nil {
			err = cerr
		}
	}()
	for rows.Next() {
		var id int64
		var k eventKey
		if err := rows.Scan(&id, &k.subscription, &k.eventID); err != nil {
			return err
		}
		inserted(id, k)
	}
	return rows.Err()
}

// scanClaimed calls inserted for each (subscription, key) row and closes rows.
func scanClaimed(rows *sql.Rows, inserted func(eventKey)) (err error) {
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
		inserted(k)
	}
	return rows.Err()
}

// claimPostgresSQL records a batch in ONE statement over arrays, so the batch costs one round
// trip and one implicit transaction, and the text never changes with the batch size (pgx
// prepares it once per connection): the events, then a job per sink of each inserted one
// ($9–$14: each job's subscription, event id, slot, sink, state and ordering key; $15 is the
// events' trace context). Rows go in key order, so
// overlapping batches take the unique-index locks in the same order and cannot deadlock.
const claimPostgresSQL = `
WITH ev AS (
INSERT INTO hw_events (subscription, event_id, subscription_uid, event_type, content_type, payload, received_at, max_attempts, trace_context)
SELECT subscription, event_id, subscription_uid, event_type, content_type, payload, received_at, max_attempts, trace_context
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bytea[], $7::bigint[], $8::int[], $15::text[])
	AS t(subscription, event_id, subscription_uid, event_type, content_type, payload, received_at, max_attempts, trace_context)
ORDER BY subscription, event_id
ON CONFLICT (subscription, event_id) DO NOTHING
RETURNING id, subscription, event_id, received_at
), jobs AS (
INSERT INTO hw_sink_jobs (event, slot, sink, state, order_key, run_at, updated_at)
SELECT ev.id, j.slot, j.sink, j.state, j.order_key, ev.received_at, ev.received_at
FROM ev JOIN unnest($9::text[], $10::text[], $11::int[], $12::text[], $13::text[], $14::text[])
	AS j(subscription, event_id, slot, sink, state, order_key)
	ON j.subscription = ev.subscription AND j.event_id = ev.event_id
)
SELECT subscription, event_id FROM ev`

// replayPostgresSQL records replay keys, in key order like claimPostgresSQL.
const replayPostgresSQL = `
INSERT INTO hw_replays (subscription, replay_key, received_at)
SELECT subscription, replay_key, received_at FROM unnest($1::text[], $2::text[], $3::bigint[]) AS t(subscription, replay_key, received_at)
ORDER BY subscription, replay_key
ON CONFLICT (subscription, replay_key) DO NOTHING
RETURNING subscription, replay_key`

// insertEvents records the events of idx on PostgreSQL through q (the database, or the claim's
// transaction) and marks each inserted one accepted.
func (c *sqlClaim) insertEvents(ctx context.Context, q querier, idx []int) error {
	uniq, first := firstByID(c.events, idx)
	if len(uniq) == 0 {
		return nil
	}
	n := len(uniq)
	subs, ids, uids, types, ctypes, traces := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	payloads, received, attempts := make([][]byte, n), make([]int64, n), make([]int32, n)
	for k, i := range uniq {
		e := c.events[i]
		subs[k], ids[k], uids[k], types[k], ctypes[k], traces[k] = e.Subscription, e.EventID, e.SubscriptionUID, e.EventType, e.ContentType, e.Trace
		payloads[k] = e.Payload
		if payloads[k] == nil {
			payloads[k] = []byte{}
		}
		received[k], attempts[k] = c.received(e), int32(e.MaxAttempts)
	}
	var jSubs, jIDs, jSinks, jStates, jKeys, keys []string
	var jSlots []int32
	for _, i := range uniq {
		e := c.events[i]
		for slot, sink := range sinksOf(e) {
			key := orderKeyOf(e, sink)
			jSubs, jIDs, jSlots, jSinks = append(jSubs, e.Subscription), append(jIDs, e.EventID), append(jSlots, int32(slot)), append(jSinks, sink)
			jStates, jKeys = append(jStates, jobState(key)), append(jKeys, key)
			if key != "" {
				keys = append(keys, key)
			}
		}
	}
	rows, err := q.QueryContext(ctx, claimPostgresSQL, subs, ids, uids, types, ctypes, payloads, received, attempts, jSubs, jIDs, jSlots, jSinks, jStates, jKeys, traces)
	if err != nil {
		return fmt.Errorf("store: claim: %w", err)
	}
	if err := scanClaimed(rows, func(k eventKey) { c.dup[first[k]] = false }); err != nil {
		return fmt.Errorf("store: claim: %w", err)
	}
	if len(keys) == 0 {
		return nil
	}
	// An ordered batch runs in a transaction (ClaimBatch): q is it. Keys in order, so that
	// concurrent claims take their locks in the same order.
	slices.Sort(keys)
	tx, ok := q.(*sql.Tx)
	if !ok {
		return errors.New("store: claim: ordered jobs outside a transaction")
	}
	if err := c.s.promote(ctx, tx, slices.Compact(keys)); err != nil {
		return fmt.Errorf("store: claim: ordering: %w", err)
	}
	return nil
}

// insertPostgresReplays records the batch's replay keys and calls fresh for each new one.
func (c *sqlClaim) insertPostgresReplays(ctx context.Context, tx *sql.Tx, fresh func(eventKey)) error {
	n := len(c.replays)
	subs, keys, received := make([]string, n), make([]string, n), make([]int64, n)
	for k, i := range c.replays {
		e := c.events[i]
		subs[k], keys[k], received[k] = e.Subscription, e.ReplayKey, c.received(e)
	}
	rows, err := tx.QueryContext(ctx, replayPostgresSQL, subs, keys, received)
	if err != nil {
		return fmt.Errorf("store: claim: replay keys: %w", err)
	}
	if err := scanClaimed(rows, fresh); err != nil {
		return fmt.Errorf("store: claim: replay keys: %w", err)
	}
	return nil
}

// jobID is the id of the job in slot of the event whose row id is event: the slot above bit 40,
// so a job in slot 0 has its event's row id (the id its job had when an event had one job).
func jobID(event int64, slot int) int64 { return int64(slot)<<jobIDSlotShift | event }

// jobKey is the (event, slot) key of the job whose id is id.
func jobKey(id int64) (event int64, slot int64) {
	return id & (1<<jobIDSlotShift - 1), id >> jobIDSlotShift
}

const jobIDSlotShift = 40

// dueBranches are the three ways a job is due, one state each: pending or retryable with
// run_at <= $1, or running with a lease that ended before $1. Each reads its first $3 rows
// straight from the (state, run_at) index, in order, and stops there; the callers join them
// with UNION ALL and sort the at most 3×$3 rows they return. The OR of the three made both
// databases read and sort the whole backlog on every Lease (a sink outage's backlog, on every
// poll). order is each branch's ORDER BY, which the index must provide as it is; suffix
// follows each LIMIT (PostgreSQL's row locks).
func dueBranches(order, suffix string) []string {
	var b []string
	for _, cond := range []string{`state = 'pending' AND run_at <= $1`, `state = 'retryable' AND run_at <= $1`, `state = 'running' AND lease_until < $1`} {
		b = append(b, `SELECT event, slot, run_at FROM hw_sink_jobs WHERE `+cond+` ORDER BY `+order+` LIMIT $3`+suffix)
	}
	return b
}

// dueJobsSQLite selects the jobs Lease may take, oldest first. A compound member may have its
// own ORDER BY and LIMIT only as a subquery. The index entries of a table without rowid end
// with its key, so the (state, run_at) index is in (run_at, event, slot) order within a state.
var dueJobsSQLite = func() string {
	b := dueBranches("run_at, event, slot", "")
	for i := range b {
		b[i] = `SELECT * FROM (` + b[i] + `)`
	}
	return `SELECT event, slot FROM (
	` + strings.Join(b, "\n\tUNION ALL\n\t") + `
	) ORDER BY run_at, event, slot LIMIT $3`
}()

// jobColumns are the job columns scanJobs reads, in its order, then eventColumns.
const (
	jobColumns   = `event, slot, sink, state, attempts, run_at, lease_until, last_error, order_key, replays, fresh_key`
	eventColumns = `id, max_attempts, subscription, event_id, subscription_uid, event_type, content_type, trace_context, payload, received_at`
)

// leasePostgresSQL is Lease's statement on PostgreSQL. FOR UPDATE is not allowed in a UNION, so each
// branch is a CTE of its own; MATERIALIZED makes each locking subselect run once, so its LIMIT
// holds. The branches lock the rows they return, up to 3×$3, of which $3 are leased; the others
// are free again when the statement commits (a concurrent Lease skips them meanwhile). The
// branches order by run_at alone, which the (state, run_at) index gives without a sort (with
// the key too the planner may sort the whole state's range); among jobs due at the same
// microsecond the branch's pick is arbitrary, and pick orders what they return by key too.
// The leased jobs come back joined with their events.
var leasePostgresSQL = func() string {
	b := dueBranches("run_at", " FOR UPDATE SKIP LOCKED")
	return `WITH due_pending AS MATERIALIZED (` + b[0] + `),
	due_retryable AS MATERIALIZED (` + b[1] + `),
	due_running AS MATERIALIZED (` + b[2] + `),
	pick AS MATERIALIZED (SELECT event, slot FROM (
		SELECT * FROM due_pending UNION ALL SELECT * FROM due_retryable UNION ALL SELECT * FROM due_running
	) due ORDER BY run_at, event, slot LIMIT $3),
	leased AS (UPDATE hw_sink_jobs SET state = 'running', attempts = attempts + 1, lease_until = $2, updated_at = $1
	WHERE (event, slot) IN (SELECT event, slot FROM pick)
	RETURNING ` + jobColumns + `)
	SELECT leased.*, ` + eventColumns + ` FROM leased JOIN hw_events ON hw_events.id = leased.event`
}()

// leaseSQLite marks the due jobs running: $1 is now, $2 the lease deadline, $3 the limit.
// SQLite has no data-modifying CTE: the events of the leased jobs are read next (eventsOf).
var leaseSQLite = `UPDATE hw_sink_jobs SET state = 'running', attempts = attempts + 1, lease_until = $2, updated_at = $1
	WHERE (event, slot) IN (` + dueJobsSQLite + `)
	RETURNING ` + jobColumns

// leaseSQL is Lease's statement on d.
func leaseSQL(d dialect) string {
	if d == dialectPostgres {
		return leasePostgresSQL
	}
	return leaseSQLite
}

// Lease implements Store. On SQLite the lease commits with the reports queued meanwhile (see
// reportGroup), and it waits for that commit even when ctx ends first: jobs it leased are then
// returned, for the caller to give back, instead of waiting out their lease.
func (s *SQL) Lease(ctx context.Context, n int, now time.Time, lease time.Duration) ([]Job, error) {
	if n <= 0 {
		return nil, nil
	}
	args := []any{now.UnixMicro(), now.Add(lease).UnixMicro(), n}
	var jobs []Job
	var err error
	if s.reports != nil {
		// SQLite: in the transaction of the reports queued meanwhile, one commit for both.
		err = s.reports.query(leaseSQLite, func(rows *sql.Rows) (err error) {
			jobs, err = scanJobs(rows, false)
			return err
		}, args...)
		if err == nil {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), reportCommitTimeout)
			err = s.eventsOf(rctx, jobs)
			cancel()
		}
	} else {
		var rows *sql.Rows
		if rows, err = s.db.QueryContext(ctx, leasePostgresSQL, args...); err == nil {
			jobs, err = scanJobs(rows, true)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("store: lease: %w", err)
	}
	// RETURNING has no order.
	slices.SortFunc(jobs, func(a, b Job) int {
		return cmp.Or(a.RunAt.Compare(b.RunAt), cmp.Compare(a.ID&(1<<jobIDSlotShift-1), b.ID&(1<<jobIDSlotShift-1)), cmp.Compare(a.ID, b.ID))
	})
	return jobs, nil
}

// eventsOf fills in the events of jobs that hold only their event's row id. An event row never
// changes, and stays while a job of it is running, so the reader connection may read it.
func (s *SQL) eventsOf(ctx context.Context, jobs []Job) error {
	if len(jobs) == 0 {
		return nil
	}
	ids := make([]any, 0, len(jobs))
	seen := map[int64]bool{}
	for _, j := range jobs {
		if ev, _ := jobKey(j.ID); !seen[ev] {
			seen[ev] = true
			ids = append(ids, ev)
		}
	}
	q := `SELECT ` + eventColumns + ` FROM hw_events WHERE id IN (?` + strings.Repeat(", ?", len(ids)-1) + `)`
	var rows *sql.Rows
	var err error
	if len(ids) > maxCachedClaim {
		// A size not worth keeping prepared (more than 2× the workers of a large pool).
		rows, err = s.reader.QueryContext(ctx, q, ids...)
	} else {
		rows, err = s.query(ctx, s.reader, q, ids...)
	}
	if err != nil {
		return err
	}
	defer rows.Close()
	events := map[int64]Event{}
	for rows.Next() {
		var id int64
		var e Event
		if err := scanEvent(rows, &id, &e); err != nil {
			return err
		}
		events[id] = e
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for k := range jobs {
		ev, _ := jobKey(jobs[k].ID)
		e, ok := events[ev]
		if !ok {
			return fmt.Errorf("job %d: its event is gone", jobs[k].ID)
		}
		e.Replays, e.FreshKey = jobs[k].Event.Replays, jobs[k].Event.FreshKey // the job's own
		jobs[k].Event = e
	}
	return nil
}

// scanEvent reads eventColumns.
func scanEvent(rows *sql.Rows, id *int64, e *Event, more ...any) error {
	var received, maxAttempts int64
	dest := slices.Concat(more, []any{id, &maxAttempts, &e.Subscription, &e.EventID, &e.SubscriptionUID, &e.EventType, &e.ContentType, &e.Trace, &e.Payload, &received})
	if err := rows.Scan(dest...); err != nil {
		return err
	}
	e.MaxAttempts = int(maxAttempts)
	e.ReceivedAt = fromMicros(received)
	return nil
}

// scanJobs reads rows of jobColumns (and eventColumns after them when withEvents) and closes
// rows.
func scanJobs(rows *sql.Rows, withEvents bool) (jobs []Job, err error) {
	defer func() {
		if cerr := rows.Close(); err == nil {
			err = cerr
		}
	}()
	for rows.Next() {
		var j Job
		var event, slot, runAt, leaseUntil int64
		var replays, fresh int64
		cols := []any{&event, &slot, &j.Sink, &j.State, &j.Attempt, &runAt, &leaseUntil, &j.LastError, &j.OrderKey, &replays, &fresh}
		if withEvents {
			var id int64
			err = scanEvent(rows, &id, &j.Event, cols...)
		} else {
			err = rows.Scan(cols...)
		}
		if err != nil {
			return nil, err
		}
		j.ID = jobID(event, int(slot))
		j.Event.Replays, j.Event.FreshKey = int(replays), fresh != 0
		j.RunAt = fromMicros(runAt)
		j.LeaseUntil = fromMicros(leaseUntil)
		jobs = append(jobs, j)
	}
	return jobs, rows.Err()
}

// Complete implements Store. The next job of an ordered job's key becomes due.
func (s *SQL) Complete(ctx context.Context, j Job, now time.Time) error {
	return s.ended(ctx, j, s.report(ctx, "complete", j,
		`UPDATE hw_sink_jobs SET state = 'completed', lease_until = 0, updated_at = $5`+fenced, now.UnixMicro()))
}

// ended promotes the next job of j's ordering key once j's report (err) was recorded. Should
// the promotion fail, or the process die before it, the key waits for Sweep's repair.
func (s *SQL) ended(ctx context.Context, j Job, err error) error {
	if err != nil || j.OrderKey == "" {
		return err
	}
	if err := s.promoteAlone(ctx, j.OrderKey); err != nil {
		return fmt.Errorf("store: job %d done; the next of its key waits for the sweeper: %w", j.ID, err)
	}
	return nil
}

// Retry implements Store.
func (s *SQL) Retry(ctx context.Context, j Job, at time.Time, lastErr string) error {
	return s.report(ctx, "retry", j,
		`UPDATE hw_sink_jobs SET state = 'retryable', run_at = $5, last_error = $6, lease_until = 0, updated_at = $7`+fenced,
		at.UnixMicro(), lastErr, s.now().UnixMicro())
}

// Release implements Store.
func (s *SQL) Release(ctx context.Context, j Job, at time.Time, reason string) error {
	return s.report(ctx, "release", j,
		`UPDATE hw_sink_jobs SET state = 'retryable', attempts = attempts - 1, run_at = $5, last_error = $6, lease_until = 0, updated_at = $7`+fenced,
		at.UnixMicro(), reason, s.now().UnixMicro())
}

// Dead implements Store. A dead letter releases its ordering key: the next job becomes due.
func (s *SQL) Dead(ctx context.Context, j Job, lastErr string) error {
	return s.ended(ctx, j, s.report(ctx, "dead", j,
		`UPDATE hw_sink_jobs SET state = 'dead', last_error = $5, lease_until = 0, updated_at = $6`+fenced,
		lastErr, s.now().UnixMicro()))
}

// fenced restricts a report to the lease the worker holds: the job is still running, with the
// attempt and lease deadline Lease handed out. The attempt alone would not do: Replay resets
// it, so a worker stalled since before the job died could otherwise report on the replay.
const fenced = ` WHERE event = $1 AND slot = $2 AND state = 'running' AND attempts = $3 AND lease_until = $4`

func (s *SQL) report(ctx context.Context, op string, j Job, q string, args ...any) error {
	event, slot := jobKey(j.ID)
	args = append([]any{event, slot, int64(j.Attempt), j.LeaseUntil.UnixMicro()}, args...)
	var n int64
	var err error
	if s.reports != nil {
		n, err = s.reports.exec(ctx, q, args...)
	} else {
		// PostgreSQL: pgx prepares and caches it per connection.
		var res sql.Result
		if res, err = s.db.ExecContext(ctx, q, args...); err == nil {
			n, err = res.RowsAffected()
		}
	}
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
	rows, err := s.db.QueryContext(ctx, `SELECT `+jobColumns+`, `+eventColumns+` FROM hw_sink_jobs JOIN hw_events ON hw_events.id = hw_sink_jobs.event
	WHERE state = 'dead' ORDER BY updated_at, event, slot LIMIT $1`, limit)
	if err != nil {
		return nil, fmt.Errorf("store: dead letters: %w", err)
	}
	jobs, err := scanJobs(rows, true)
	if err != nil {
		return nil, fmt.Errorf("store: dead letters: %w", err)
	}
	return jobs, nil
}

// Replay implements Store. It returns ErrNotDead when the job is not dead-lettered. An ordered
// job goes back behind the jobs of its key that are not done.
func (s *SQL) Replay(ctx context.Context, jobID int64, now time.Time) error {
	event, slot := jobKey(jobID)
	var key string
	err := s.db.QueryRowContext(ctx, `UPDATE hw_sink_jobs SET state = CASE WHEN order_key = '' THEN 'pending' ELSE 'blocked' END,
	attempts = 0, run_at = $3, lease_until = 0, updated_at = $3, replays = replays + 1
	WHERE event = $1 AND slot = $2 AND state = 'dead' RETURNING order_key`, event, slot, now.UnixMicro()).Scan(&key)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("store: replay job %d: %w", jobID, ErrNotDead)
	case err != nil:
		return fmt.Errorf("store: replay job %d: %w", jobID, err)
	}
	if err := s.promoteAlone(ctx, key); err != nil {
		return fmt.Errorf("store: replay job %d: ordering: %w", jobID, err)
	}
	return nil
}

// Purge implements Purger: the dead job is marked completed (never delivered: last_error says
// purged), so its event keeps answering redeliveries as duplicates until it is swept. It
// returns ErrNotDead when the job is not dead-lettered.
func (s *SQL) Purge(ctx context.Context, jobID int64, now time.Time) error {
	return s.fromDead(ctx, "purge", jobID, `UPDATE hw_sink_jobs SET state = 'completed', last_error = '`+purgedError+`', lease_until = 0, updated_at = $3
	WHERE event = $1 AND slot = $2 AND state = 'dead'`, now)
}

// fromDead runs q ($1 event, $2 slot, $3 now) on a dead job.
func (s *SQL) fromDead(ctx context.Context, op string, jobID int64, q string, now time.Time) error {
	event, slot := jobKey(jobID)
	res, err := s.db.ExecContext(ctx, q, event, slot, now.UnixMicro())
	if err != nil {
		return fmt.Errorf("store: %s job %d: %w", op, jobID, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("store: %s job %d: %w", op, jobID, err)
	}
	if n == 0 {
		return fmt.Errorf("store: %s job %d: %w", op, jobID, ErrNotDead)
	}
	return nil
}

// sweepBatch bounds the events one Sweep transaction deletes, so that no transaction holds the
// SQLite write lock (or many PostgreSQL row locks) for long.
const sweepBatch = 1000

// Sweep implements Store. An event goes once every job of it is done: completed before cutoff,
// or dead since before cutoff, so a dead letter stays replayable for the whole retention
// window. The due-job index finds the candidates: a job ran at or after its event was received
// and died after it ran, so run_at < cutoff narrows the scan without changing the answer.
//
// Replay keys received before cutoff go too, whatever became of their event: they are dedupe
// records only. They are not counted.
func (s *SQL) Sweep(ctx context.Context, cutoff time.Time) (int, error) {
	if err := s.repairOrder(ctx); err != nil {
		return 0, fmt.Errorf("store: sweep: ordering: %w", err)
	}
	total := 0
	for {
		n, err := s.sweepEvents(ctx, cutoff)
		total += n
		if err != nil {
			return total, fmt.Errorf("store: sweep: %w", err)
		}
		if n < sweepBatch {
			break
		}
	}
	if err := s.sweepReplays(ctx, cutoff); err != nil {
		return total, fmt.Errorf("store: sweep replay keys: %w", err)
	}
	return total, nil
}

// repairOrder promotes the oldest blocked job of every ordering key that has nothing ahead of
// it: the promotion after a report runs in a transaction of its own, and a process that died
// between the two left its key waiting.
func (s *SQL) repairOrder(ctx context.Context) error {
	rows, err := s.db.QueryContext(ctx, `SELECT DISTINCT order_key FROM hw_sink_jobs WHERE state = 'blocked'`)
	if err != nil {
		return err
	}
	var keys []string
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			_ = rows.Close()
			return err
		}
		keys = append(keys, k)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return err
	}
	for _, k := range keys {
		if err := s.promoteAlone(ctx, k); err != nil {
			return err
		}
	}
	return nil
}

// sweepable is the condition on a job (of hw_sink_jobs, or the alias j) under which its event
// may go: done before the cutoff $1.
const sweepable = `((state = 'completed' AND run_at < $1) OR (state = 'dead' AND updated_at < $1))`

// sweepSQL selects up to $2 events received before $1 whose every job is done before it.
func sweepSQL(d dialect) string {
	lock := ""
	if d == dialectPostgres {
		lock = " FOR UPDATE SKIP LOCKED"
	}
	return `SELECT id FROM hw_events WHERE id IN (
		SELECT event FROM hw_sink_jobs WHERE state = 'completed' AND run_at < $1
		UNION SELECT event FROM hw_sink_jobs WHERE state = 'dead' AND run_at < $1)
	AND received_at < $1
	AND NOT EXISTS (SELECT 1 FROM hw_sink_jobs WHERE event = hw_events.id AND NOT ` + sweepable + `)
	LIMIT $2` + lock
}

// sweepEvents deletes one batch of sweepable events and their jobs, in one transaction. On
// PostgreSQL a job replayed while the batch was chosen makes it roll back (the jobs are
// deleted, and checked, after the events were chosen): the next sweep chooses again.
func (s *SQL) sweepEvents(ctx context.Context, cutoff time.Time) (int, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer func() { _ = tx.Rollback() }()
	rows, err := tx.QueryContext(ctx, sweepSQL(s.dialect), cutoff.UnixMicro(), sweepBatch)
	if err != nil {
		return 0, err
	}
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			_ = rows.Close()
			return 0, err
		}
		ids = append(ids, id)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return 0, err
	}
	if len(ids) == 0 {
		return 0, nil
	}
	// The ids are integers the database just returned: written into the text, one statement
	// text serves both dialects.
	in := make([]string, len(ids))
	for k, id := range ids {
		in[k] = strconv.FormatInt(id, 10)
	}
	list := `(` + strings.Join(in, ", ") + `)`
	if _, err := tx.ExecContext(ctx, `DELETE FROM hw_sink_jobs WHERE event IN `+list+` AND `+sweepable, cutoff.UnixMicro()); err != nil {
		return 0, err
	}
	var live int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM hw_sink_jobs WHERE event IN `+list).Scan(&live); err != nil {
		return 0, err
	}
	if live > 0 {
		return 0, nil // a job came back to life (Replay) since the batch was chosen
	}
	res, err := tx.ExecContext(ctx, `DELETE FROM hw_events WHERE id IN `+list)
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, err
	}
	return int(n), tx.Commit()
}

// sweepReplaysSQL deletes up to $2 replay keys received before $1, through their index.
func sweepReplaysSQL(d dialect) string {
	lock := ""
	if d == dialectPostgres {
		lock = " FOR UPDATE SKIP LOCKED"
	}
	return `DELETE FROM hw_replays WHERE (subscription, replay_key) IN (SELECT subscription, replay_key FROM hw_replays
	WHERE received_at < $1 LIMIT $2` + lock + `)`
}

// sweepReplays deletes the replay keys received before cutoff, a batch per statement.
func (s *SQL) sweepReplays(ctx context.Context, cutoff time.Time) error {
	for {
		res, err := s.db.ExecContext(ctx, sweepReplaysSQL(s.dialect), cutoff.UnixMicro(), sweepBatch)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if n < sweepBatch {
			return nil
		}
	}
}

const depthSQL = `SELECT count(*) FROM hw_sink_jobs WHERE state IN ('pending', 'running', 'retryable', 'blocked')`

// Depth implements Store.
func (s *SQL) Depth(ctx context.Context) (int, error) {
	var n int
	err := s.reader.QueryRowContext(ctx, depthSQL).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("store: depth: %w", err)
	}
	return n, nil
}

// sinkDepthsSQL groups the live jobs (the state index's live ranges) by subscription and sink,
// each joined to its event for both.
const sinkDepthsSQL = `SELECT e.subscription, j.sink, count(*), min(e.received_at)
	FROM hw_sink_jobs j JOIN hw_events e ON e.id = j.event
	WHERE j.state IN ('pending', 'running', 'retryable', 'blocked')
	GROUP BY e.subscription, j.sink`

// SinkDepths implements Store, on the reader connection like Depth.
func (s *SQL) SinkDepths(ctx context.Context) ([]SinkDepth, error) {
	rows, err := s.reader.QueryContext(ctx, sinkDepthsSQL)
	if err != nil {
		return nil, fmt.Errorf("store: sink depths: %w", err)
	}
	defer func() { _ = rows.Close() }()
	var out []SinkDepth
	for rows.Next() {
		var d SinkDepth
		var oldest int64
		if err := rows.Scan(&d.Subscription, &d.Sink, &d.Jobs, &oldest); err != nil {
			return nil, fmt.Errorf("store: sink depths: %w", err)
		}
		d.OldestReceived = fromMicros(oldest)
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: sink depths: %w", err)
	}
	sortSinkDepths(out)
	return out, nil
}

func fromMicros(us int64) time.Time {
	if us == 0 {
		return time.Time{}
	}
	return time.UnixMicro(us).UTC()
}
