package store

import (
	"context"
	"database/sql"
	"sync"
	"time"
)

// reportCommitTimeout bounds one transaction of grouped reports. It does not follow the
// callers' contexts: one worker giving up must not fail the others' reports.
const reportCommitTimeout = 10 * time.Second

// reportGroup group-commits the job reports (Complete, Retry, Release, Dead) of concurrent
// delivery workers on SQLite, and the Leases of the delivery loop with them. Every report and
// Lease is its own transaction otherwise, and SQLite has one writer and one fsync per commit:
// while a sink keeps up, the commits, not the sink, set the pace at which a backlog drains.
// Reports are single-row fenced updates, a Lease one update of a batch, so a group is one
// transaction of a few statements, and each returns only after the commit holding it.
//
// There is no committer goroutine: the first reporter to find none at work commits what is
// queued, its own report included, then hands the turn to the first report queued meanwhile.
type reportGroup struct {
	db *sql.DB
	// prepare is a report's statement prepared on db, once (SQL.stmt).
	prepare func(ctx context.Context, q string) (*sql.Stmt, error)
	mu      sync.Mutex
	queue   []*report
	running bool
}

type report struct {
	q    string
	args []any
	// scan, when set, reads the rows q returns (a Lease: UPDATE ... RETURNING). It may run
	// twice (see commitReports), so it must replace what it read before, not add to it.
	scan func(*sql.Rows) error
	lead chan struct{} // the reporter's turn to commit the queue
	done chan reportResult
}

type reportResult struct {
	rows int64
	err  error
}

// exec runs q with args as part of a group commit and returns its rows affected.
func (g *reportGroup) exec(ctx context.Context, q string, args ...any) (int64, error) {
	return g.run(ctx, &report{q: q, args: args})
}

// query runs q with args as part of a group commit and hands its rows to scan. It waits for
// the commit even when ctx ends first: what it leased is then the caller's to give back,
// rather than left to wait for its lease to end.
func (g *reportGroup) query(q string, scan func(*sql.Rows) error, args ...any) error {
	_, err := g.run(context.Background(), &report{q: q, args: args, scan: scan})
	return err
}

func (g *reportGroup) run(ctx context.Context, r *report) (int64, error) {
	r.lead, r.done = make(chan struct{}, 1), make(chan reportResult, 1)
	g.mu.Lock()
	g.queue = append(g.queue, r)
	lead := !g.running
	g.running = true
	g.mu.Unlock()
	if !lead {
		select {
		case res := <-r.done:
			return res.rows, res.err
		case <-r.lead:
		case <-ctx.Done():
			// The report stays queued and may still commit; a lost answer leaves the job to
			// its lease, as a failed report does.
			go g.abandon(r)
			return 0, ctx.Err()
		}
	}
	g.mu.Lock()
	batch := g.queue
	g.queue = nil
	g.mu.Unlock()
	g.commit(batch)
	res := <-r.done
	return res.rows, res.err
}

// abandon keeps the turn moving for a report whose caller left: if the turn comes to it, it
// commits the queue as its caller would have.
func (g *reportGroup) abandon(r *report) {
	select {
	case <-r.done:
	case <-r.lead:
		g.mu.Lock()
		batch := g.queue
		g.queue = nil
		g.mu.Unlock()
		g.commit(batch)
	}
}

// commit commits batch, then passes the turn to the first report queued meanwhile.
func (g *reportGroup) commit(batch []*report) {
	commitReports(g.db, g.prepare, batch)
	g.mu.Lock()
	if len(g.queue) > 0 {
		g.queue[0].lead <- struct{}{}
	} else {
		g.running = false
	}
	g.mu.Unlock()
}

// commitReports runs the batch in one transaction and answers each report. When anything
// fails the transaction is rolled back and each report runs alone, so a report that cannot
// be recorded fails by itself.
func commitReports(db *sql.DB, prepare func(context.Context, string) (*sql.Stmt, error), batch []*report) {
	ctx, cancel := context.WithTimeout(context.Background(), reportCommitTimeout)
	defer cancel()
	// The statements first: preparing needs the one connection the transaction will hold.
	stmts := map[string]*sql.Stmt{}
	for _, r := range batch {
		if stmts[r.q] == nil {
			st, err := prepare(ctx, r.q)
			if err != nil {
				for _, r := range batch {
					r.done <- reportResult{err: err}
				}
				return
			}
			stmts[r.q] = st
		}
	}
	if len(batch) == 1 {
		batch[0].done <- execReport(ctx, stmts[batch[0].q], batch[0])
		return
	}
	results := make([]reportResult, len(batch))
	err := func() error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback() }()
		for i, r := range batch {
			if results[i] = execReport(ctx, tx.StmtContext(ctx, stmts[r.q]), r); results[i].err != nil {
				return results[i].err
			}
		}
		return tx.Commit()
	}()
	for i, r := range batch {
		if err != nil {
			r.done <- execReport(ctx, stmts[r.q], r)
			continue
		}
		r.done <- results[i]
	}
}

func execReport(ctx context.Context, st *sql.Stmt, r *report) reportResult {
	if r.scan != nil {
		rows, err := st.QueryContext(ctx, r.args...)
		if err == nil {
			err = r.scan(rows)
		}
		return reportResult{err: err}
	}
	res, err := st.ExecContext(ctx, r.args...)
	if err != nil {
		return reportResult{err: err}
	}
	n, err := res.RowsAffected()
	return reportResult{rows: n, err: err}
}
