package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"

	// Drivers: "pgx" (PostgreSQL) and "sqlite" (pure Go SQLite).
	_ "github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"
)

// dialect is the SQL flavour of the database behind a *SQL.
type dialect int

const (
	dialectSQLite dialect = iota + 1
	dialectPostgres
)

func (d dialect) String() string {
	if d == dialectPostgres {
		return "postgres"
	}
	return "sqlite"
}

// sqliteMaxParams is SQLite's SQLITE_MAX_VARIABLE_NUMBER: bound parameters per statement.
const sqliteMaxParams = 32766

// migrationLock is the pg_advisory_xact_lock key that serialises schema migrations of
// receivers starting together ("hookwrdn" in ASCII).
const migrationLock int64 = 0x686f6f6b7772646e

// openTimeout bounds connecting and migrating when the caller passes no context.
const openTimeout = 30 * time.Second

// Option configures OpenSQLite, OpenPostgres and Open.
type Option func(*options)

type options struct {
	now        func() time.Time
	maxConns   int
	password   string
	minPromise Promise
	retention  time.Duration
}

// WithClock sets the clock for the timestamps that no method receives from its caller (the
// updated_at of Retry and Dead, the received_at of an event without ReceivedAt).
func WithClock(now func() time.Time) Option {
	return func(o *options) { o.now = now }
}

// WithMaxConns sets the PostgreSQL connection pool size (default 8). SQLite always uses one
// connection: it has a single writer, and one connection in the process avoids SQLITE_BUSY
// between our own statements.
func WithMaxConns(n int) Option {
	return func(o *options) { o.maxConns = n }
}

// WithPassword sets the server password (Redis, PostgreSQL), overriding one in the DSN, so that it
// can come from a file or the environment instead of the command line.
func WithPassword(p string) Option {
	return func(o *options) { o.password = p }
}

// WithMinPromise sets the weakest promise Open accepts (default PromiseStrict): a Redis whose
// settings allow less fails to open with a *PromiseError. The SQL stores are always strict.
func WithMinPromise(p Promise) Option {
	return func(o *options) { o.minPromise = p }
}

// WithRetention sets how long Redis remembers a delivered event at least (its TTL when the
// event's own DedupeWindow is shorter); default 72h. The SQL stores sweep by the cutoff Sweep
// is given instead.
func WithRetention(d time.Duration) Option {
	return func(o *options) { o.retention = d }
}

func buildOptions(opts []Option) options {
	o := options{now: time.Now, maxConns: 8, minPromise: PromiseStrict, retention: 72 * time.Hour}
	for _, opt := range opts {
		opt(&o)
	}
	if o.maxConns < 1 {
		o.maxConns = 1
	}
	return o
}

// Open opens the store named by dsn: postgres:// or postgresql:// selects PostgreSQL;
// redis:// or rediss:// (TLS) selects Redis; sqlite:///path/file.db or a plain file path selects
// SQLite.
func Open(ctx context.Context, dsn string, opts ...Option) (Store, error) {
	switch {
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		return OpenPostgres(ctx, dsn, opts...)
	case strings.HasPrefix(dsn, "redis://"), strings.HasPrefix(dsn, "rediss://"):
		return OpenRedis(ctx, dsn, opts...)
	case strings.HasPrefix(dsn, "sqlite://"):
		return openSQLite(ctx, strings.TrimPrefix(dsn, "sqlite://"), opts)
	case strings.Contains(dsn, "://"):
		return nil, fmt.Errorf("store: unsupported DSN scheme in %q (want postgres://, postgresql://, redis://, rediss:// or sqlite://)", Redact(dsn))
	default:
		return openSQLite(ctx, dsn, opts)
	}
}

// OpenSQLite opens (creating if needed) the SQLite database file at path and migrates it. The
// database runs in WAL mode with synchronous=FULL, so a claim that returned is on disk and
// survives a killed process and a power cut.
func OpenSQLite(path string, opts ...Option) (*SQL, error) {
	ctx, cancel := context.WithTimeout(context.Background(), openTimeout)
	defer cancel()
	return openSQLite(ctx, path, opts)
}

func openSQLite(ctx context.Context, path string, opts []Option) (*SQL, error) {
	if path == "" {
		return nil, errors.New("store: empty SQLite path")
	}
	if strings.ContainsAny(path, "?#") {
		// The driver reads everything after '?' as its own parameters.
		return nil, fmt.Errorf("store: SQLite path %q must not contain '?' or '#'", path)
	}
	o := buildOptions(opts)
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)") // other processes on the same file
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(FULL)") // WAL + FULL: fsync the WAL on every commit
	q.Set("_txlock", "immediate")         // take the write lock at BEGIN, not at the first write
	db, err := sql.Open("sqlite", path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("store: open SQLite %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
	s := newSQL(db, dialectSQLite, o)
	if err := s.migrate(ctx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("store: open SQLite %s: %w", path, err)
	}
	// The reader opens after the migration, so it finds the file in WAL mode and the schema.
	r := url.Values{}
	r.Add("_pragma", "busy_timeout(10000)")
	r.Add("_pragma", "query_only(1)")
	if s.reader, err = sql.Open("sqlite", path+"?"+r.Encode()); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("store: open SQLite %s: %w", path, err)
	}
	s.reader.SetMaxOpenConns(1)
	s.reader.SetMaxIdleConns(1)
	s.reader.SetConnMaxLifetime(0)
	s.reader.SetConnMaxIdleTime(0)
	return s, nil
}

// OpenPostgres connects to PostgreSQL and migrates the schema. Several processes may open the
// same database at once: an advisory lock serialises their migrations.
func OpenPostgres(ctx context.Context, dsn string, opts ...Option) (*SQL, error) {
	o := buildOptions(opts)
	if o.password != "" {
		u, err := url.Parse(dsn)
		if err != nil {
			return nil, errors.New("store: open PostgreSQL: a password needs a URL-shaped DSN")
		}
		u.User = url.UserPassword(u.User.Username(), o.password)
		dsn = u.String()
	}
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return nil, fmt.Errorf("store: open PostgreSQL %s: %w", Redact(dsn), err)
	}
	db.SetMaxOpenConns(o.maxConns)
	db.SetMaxIdleConns(o.maxConns)
	db.SetConnMaxIdleTime(5 * time.Minute)
	s := newSQL(db, dialectPostgres, o)
	if err := s.migrate(ctx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("store: open PostgreSQL %s: %w", Redact(dsn), err)
	}
	return s, nil
}

func newSQL(db *sql.DB, d dialect, o options) *SQL {
	s := &SQL{db: db, reader: db, dialect: d, now: o.now, maxParams: sqliteMaxParams}
	if d == dialectSQLite {
		s.reports = &reportGroup{db: db, prepare: func(ctx context.Context, q string) (*sql.Stmt, error) { return s.stmt(ctx, db, q) }}
	}
	return s
}

// migrate creates the schema if it is missing, and brings the schema of an earlier version up
// to date. Every statement is idempotent.
//
// hw_events is the dedupe ledger: one row per event, unique on (subscription, event id), with
// the payload last so that reading a row's small columns does not walk it. hw_sink_jobs is the
// queue: one job per (event, sink), keyed by the event's row id and the sink's slot (its place
// in the event's sink list), without a rowid of its own, so a job's id is computed from its key
// (jobID) and a claim adds two index entries per job: its key and the due index.
func (s *SQL) migrate(ctx context.Context) error {
	// Not AUTOINCREMENT: its sqlite_sequence page costs each commit one more WAL frame (10–20 %
	// of a claim), and SQLite reuses an id only after the newest row was swept, i.e. after a
	// retention window without a single event; every job report is fenced by more than the id.
	id, blob, keyed := "INTEGER PRIMARY KEY", "BLOB", " WITHOUT ROWID"
	if s.dialect == dialectPostgres {
		id, blob, keyed = "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY", "BYTEA", ""
	}
	jobs := `CREATE TABLE IF NOT EXISTS hw_sink_jobs (
	event BIGINT NOT NULL,
	slot INTEGER NOT NULL,
	sink TEXT NOT NULL,
	state TEXT NOT NULL CHECK (state IN ('pending', 'running', 'retryable', 'completed', 'dead', 'blocked')),
	attempts INTEGER NOT NULL DEFAULT 0,
	run_at BIGINT NOT NULL,
	lease_until BIGINT NOT NULL DEFAULT 0,
	updated_at BIGINT NOT NULL,
	last_error TEXT NOT NULL DEFAULT '',
	order_key TEXT NOT NULL DEFAULT '',
	replays INTEGER NOT NULL DEFAULT 0,
	fresh_key INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (event, slot)
)` + keyed
	stmts := []string{
		`CREATE TABLE IF NOT EXISTS hw_events (
	id ` + id + `,
	subscription TEXT NOT NULL,
	event_id TEXT NOT NULL,
	max_attempts INTEGER NOT NULL,
	received_at BIGINT NOT NULL,
	subscription_uid TEXT NOT NULL DEFAULT '',
	event_type TEXT NOT NULL DEFAULT '',
	content_type TEXT NOT NULL DEFAULT '',
	trace_context TEXT NOT NULL DEFAULT '',
	purged_at BIGINT NOT NULL DEFAULT 0,
	payload ` + blob + ` NOT NULL,
	UNIQUE (subscription, event_id)
)`,
		jobs,
		// Due jobs by state and run_at; Sweep finds completed and dead jobs through it too.
		`CREATE INDEX IF NOT EXISTS hw_sink_jobs_due ON hw_sink_jobs (state, run_at)`,
		// The jobs of one ordering key (a sink's ordering PerKey), oldest first.
		`CREATE INDEX IF NOT EXISTS hw_sink_jobs_order ON hw_sink_jobs (order_key, event) WHERE order_key <> ''`,
		// The replay keys (Event.ReplayKey) of schemes that do not sign the event id, a second
		// dedupe key per subscription, swept by received_at. A database of an earlier version
		// gets the table on open; until then it had none to keep.
		`CREATE TABLE IF NOT EXISTS hw_replays (
	subscription TEXT NOT NULL,
	replay_key TEXT NOT NULL,
	received_at BIGINT NOT NULL,
	PRIMARY KEY (subscription, replay_key)
)` + keyed,
		`CREATE INDEX IF NOT EXISTS hw_replays_received ON hw_replays (received_at)`,
	}
	return s.migrateTx(ctx, jobs, stmts)
}

// migrateTx runs migrate's statements (jobs creates hw_sink_jobs, stmts everything else) in one
// transaction, serialised among receivers on PostgreSQL, and none when the schema is current.
func (s *SQL) migrateTx(ctx context.Context, jobs string, stmts []string) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	if s.dialect == dialectPostgres {
		// CREATE ... IF NOT EXISTS races with itself (unique violation in the catalog) when
		// several receivers start together.
		if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1)`, migrationLock); err != nil {
			return fmt.Errorf("migrate: lock: %w", err)
		}
	}
	if err := checkNoLegacySchema(ctx, tx, s.dialect); err != nil {
		return err
	}
	single, err := hasColumn(ctx, tx, s.dialect, "hw_events", "state")
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if single {
		if err := migrateSingleJob(ctx, tx, jobs); err != nil {
			return fmt.Errorf("migrate: one job per event to one job per sink: %w", err)
		}
	} else if current, err := schemaCurrent(ctx, tx, s.dialect, append(stmts, ledgerIndexes...)); err != nil || current {
		if err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		return tx.Commit()
	}
	for _, stmt := range stmts {
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
	}
	if err := addColumns(ctx, tx, s.dialect); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("migrate: commit: %w", err)
	}
	return nil
}

// migrateSingleJob moves the job of every event of a database written before sinks (each
// hw_events row carried its one job) into hw_sink_jobs, as the job of the sink named
// DefaultSink in slot 0, so its id (jobID) stays the event's row id: a dead letter keeps its id
// across the upgrade. The job columns then leave hw_events.
func migrateSingleJob(ctx context.Context, tx *sql.Tx, createJobs string) error {
	stmts := []string{
		createJobs,
		`INSERT INTO hw_sink_jobs (event, slot, sink, state, attempts, run_at, lease_until, updated_at, last_error)
	SELECT id, 0, '` + DefaultSink + `', state, attempts, run_at, lease_until, updated_at, last_error FROM hw_events`,
		`DROP INDEX IF EXISTS hw_events_due`,
	}
	for _, col := range []string{"state", "attempts", "run_at", "lease_until", "updated_at", "last_error"} {
		stmts = append(stmts, `ALTER TABLE hw_events DROP COLUMN `+col)
	}
	for _, stmt := range stmts {
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return err
		}
	}
	return nil
}

// ledgerIndexes are the ledger's (Ledger): the events by receipt, for a page of Events, and
// the events whose payload is kept by subscription and receipt, for Forget. Created after the
// columns an earlier version lacks (addColumns).
var ledgerIndexes = []string{
	`CREATE INDEX IF NOT EXISTS hw_events_received ON hw_events (received_at, id)`,
	`CREATE INDEX IF NOT EXISTS hw_events_kept ON hw_events (subscription, received_at) WHERE purged_at = 0`,
}

// laterColumns are the columns later versions added (addColumns).
var laterColumns = []struct{ table, column, def string }{
	{"hw_events", "trace_context", "TEXT NOT NULL DEFAULT ''"},
	{"hw_events", "purged_at", "BIGINT NOT NULL DEFAULT 0"},
	{"hw_sink_jobs", "replays", "INTEGER NOT NULL DEFAULT 0"},
	{"hw_sink_jobs", "fresh_key", "INTEGER NOT NULL DEFAULT 0"},
}

// createdName is the table or index a CREATE ... IF NOT EXISTS statement creates.
var createdName = regexp.MustCompile(`^CREATE (?:TABLE|INDEX) IF NOT EXISTS (\w+)`)

// schemaCurrent reports whether every table and index that creates makes, and every column of
// laterColumns, exists, from the catalog alone. A current schema then gets no DDL: CREATE INDEX
// IF NOT EXISTS takes a share lock on its table before it finds the index there, so a receiver
// starting beside others that serve would wait for their claims and, taking the tables' locks
// one after the other, deadlock with them (PostgreSQL aborts one: the starting replica exited).
func schemaCurrent(ctx context.Context, tx *sql.Tx, d dialect, creates []string) (bool, error) {
	q := `SELECT count(*) FROM sqlite_master WHERE name = $1`
	if d == dialectPostgres {
		q = `SELECT count(*) FROM (SELECT to_regclass($1) AS c) r WHERE c IS NOT NULL`
	}
	for _, stmt := range creates {
		m := createdName.FindStringSubmatch(stmt)
		if m == nil {
			return false, fmt.Errorf("no name in %.40q", stmt)
		}
		var n int
		if err := tx.QueryRowContext(ctx, q, m[1]).Scan(&n); err != nil || n == 0 {
			return false, err
		}
	}
	for _, c := range laterColumns {
		if has, err := hasColumn(ctx, tx, d, c.table, c.column); err != nil || !has {
			return false, err
		}
	}
	return true, nil
}

// addColumns adds the columns of later versions to a database written before them:
// hw_events.trace_context (Event.Trace; old rows get ”: their attempts start traces of their
// own) and purged_at (Ledger.Forget), hw_sink_jobs.replays and fresh_key (Ledger.Requeue). On
// SQLite they land after the payload, where a new database has them before. Then it creates
// ledgerIndexes, which index them.
func addColumns(ctx context.Context, tx *sql.Tx, d dialect) error {
	for _, c := range laterColumns {
		has, err := hasColumn(ctx, tx, d, c.table, c.column)
		if err != nil {
			return err
		}
		if has {
			continue
		}
		if _, err := tx.ExecContext(ctx, `ALTER TABLE `+c.table+` ADD COLUMN `+c.column+` `+c.def); err != nil {
			return fmt.Errorf("adding %s.%s: %w", c.table, c.column, err)
		}
	}
	for _, stmt := range ledgerIndexes {
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return err
		}
	}
	return nil
}

// hasColumn reports whether table has column.
func hasColumn(ctx context.Context, tx *sql.Tx, d dialect, table, column string) (bool, error) {
	q := `SELECT count(*) FROM pragma_table_info($1) WHERE name = $2`
	if d == dialectPostgres {
		q = `SELECT count(*) FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = $1 AND column_name = $2`
	}
	var n int
	if err := tx.QueryRowContext(ctx, q, table, column).Scan(&n); err != nil {
		return false, err
	}
	return n > 0, nil
}

// checkNoLegacySchema refuses a database written by a development build that kept jobs in a
// separate hw_jobs table: its pending deliveries would otherwise be silently ignored.
func checkNoLegacySchema(ctx context.Context, tx *sql.Tx, d dialect) error {
	q := `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'hw_jobs'`
	if d == dialectPostgres {
		q = `SELECT count(*) FROM pg_catalog.pg_tables WHERE schemaname = current_schema() AND tablename = 'hw_jobs'`
	}
	var n int
	if err := tx.QueryRowContext(ctx, q).Scan(&n); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if n > 0 {
		return errors.New("migrate: the database has the hw_events/hw_jobs schema of an earlier development build; " +
			"drain its queue with that build, or remove the database, then start again")
	}
	return nil
}

// Redact drops the password from a URL-shaped DSN so it can appear in logs and errors.
func Redact(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return "<unparsable DSN>"
	}
	if _, ok := u.User.Password(); !ok {
		return dsn
	}
	return u.Redacted()
}
