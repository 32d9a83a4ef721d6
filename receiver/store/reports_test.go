package store

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden/receiver/store/storetest"
)

// TestConcurrentReportsEachGetTheirOwnAnswer drives many workers' reports at once, as a pool
// draining a backlog does (on SQLite they share group commits): each report is recorded or
// refused on its own fence, whatever the others in its transaction do.
func TestConcurrentReportsEachGetTheirOwnAnswer(t *testing.T) {
	forEachSQLStore(t, func(t *testing.T, e *env) {
		const jobs = 60
		mustClaim(t, e.s, numberedEvents(jobs)...)
		leased, err := e.s.Lease(testCtx(t), jobs, t0, time.Hour)
		if err != nil || len(leased) != jobs {
			t.Fatalf("Lease: %d jobs, %v", len(leased), err)
		}
		errs := make([]error, jobs)
		var wg sync.WaitGroup
		for i, j := range leased {
			wg.Go(func() {
				switch i % 4 {
				case 0:
					errs[i] = e.s.Complete(testCtx(t), j, t0)
				case 1:
					errs[i] = e.s.Retry(testCtx(t), j, t0.Add(time.Minute), "503")
				case 2:
					errs[i] = e.s.Dead(testCtx(t), j, "410")
				case 3:
					j.Attempt++ // a lease this worker does not hold
					errs[i] = e.s.Complete(testCtx(t), j, t0)
				}
			})
		}
		wg.Wait()
		for i, err := range errs {
			if lost := errors.Is(err, ErrLeaseLost); (i%4 == 3) != lost || (!lost && err != nil) {
				t.Errorf("report %d (kind %d): %v", i, i%4, err)
			}
		}
		// Retried (15) and still running with a lease nobody reported on (15) stay queued.
		if n, err := e.s.Depth(testCtx(t)); err != nil || n != jobs/2 {
			t.Errorf("Depth = %d, %v; want %d", n, err, jobs/2)
		}
		if dead, err := e.s.DeadLetters(testCtx(t), jobs); err != nil || len(dead) != jobs/4 {
			t.Errorf("DeadLetters: %d, %v; want %d", len(dead), err, jobs/4)
		}
	})
}

// Leases run while reports are being recorded (on SQLite they join the reports' group
// commits): every job is leased once, and no report is lost or given to another.
func TestLeasesBesideReports(t *testing.T) {
	forEachSQLStore(t, func(t *testing.T, e *env) {
		const jobs, first, leasers, each = 120, 40, 8, 10
		mustClaim(t, e.s, numberedEvents(jobs)...)
		leased, err := e.s.Lease(testCtx(t), first, t0, time.Hour)
		if err != nil || len(leased) != first {
			t.Fatalf("Lease: %d jobs, %v", len(leased), err)
		}
		var mu sync.Mutex
		seen := map[int64]int{}
		for _, j := range leased {
			seen[j.ID]++
		}
		var wg sync.WaitGroup
		errs := make(chan error, first+leasers)
		for _, j := range leased {
			wg.Go(func() { errs <- e.s.Complete(testCtx(t), j, t0) })
		}
		for range leasers {
			wg.Go(func() {
				got, err := e.s.Lease(testCtx(t), each, t0, time.Hour)
				mu.Lock()
				defer mu.Unlock()
				for _, j := range got {
					seen[j.ID]++
					if j.Event.EventID == "" {
						err = errors.Join(err, errors.New("a leased job without its event"))
					}
				}
				errs <- err
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Error(err)
			}
		}
		for id, n := range seen {
			if n != 1 {
				t.Errorf("job %d leased %d times", id, n)
			}
		}
		if len(seen) != first+leasers*each {
			t.Errorf("%d jobs leased, want %d", len(seen), first+leasers*each)
		}
		// The completed ones are done; the rest are running.
		if n, err := e.s.Depth(testCtx(t)); err != nil || n != jobs-first {
			t.Errorf("Depth = %d, %v; want %d", n, err, jobs-first)
		}
	})
}

// A group whose transaction fails on one report is rolled back and each report runs alone: the
// others are recorded, the failing one gets its own error, and a Lease's scan, run in the
// rolled-back transaction first, ends with what its second run read.
func TestGroupCommitRollbackRunsEachReportAlone(t *testing.T) {
	db, err := sql.Open("sqlite", storetest.SQLitePath(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	db.SetMaxOpenConns(1) // as the store's writer: the transaction holds the one connection
	ctx := testCtx(t)
	if _, err := db.ExecContext(ctx, `CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	const insert = `INSERT INTO t (id, v) VALUES ($1, $2)`
	var counted []int64
	count := &report{q: `SELECT count(*) FROM t`, scan: func(rows *sql.Rows) error {
		defer func() { _ = rows.Close() }()
		counted = nil // replaces what a run before read, as a Lease's scan does
		for rows.Next() {
			var n int64
			if err := rows.Scan(&n); err != nil {
				return err
			}
			counted = append(counted, n)
		}
		return rows.Err()
	}}
	batch := []*report{
		{q: insert, args: []any{1, "a"}},
		count,
		{q: insert, args: []any{1, "twin"}}, // the primary key refuses it
		{q: insert, args: []any{2, "b"}},
	}
	for _, r := range batch {
		r.done = make(chan reportResult, 1)
	}
	commitReports(db, func(ctx context.Context, q string) (*sql.Stmt, error) { return db.PrepareContext(ctx, q) }, batch)

	for i, want := range []bool{true, true, false, true} {
		if res := <-batch[i].done; (res.err == nil) != want {
			t.Errorf("report %d: %+v, want ok %v", i, res, want)
		}
	}
	if len(counted) != 1 || counted[0] != 1 {
		t.Errorf("the scan read %v, want [1] (its run alone, after the first insert)", counted)
	}
	var got []string
	rows, err := db.QueryContext(ctx, `SELECT v FROM t ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rows.Close() }()
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		got = append(got, v)
	}
	if len(got) != 2 || got[0] != "a" || got[1] != "b" {
		t.Errorf("rows %v, want [a b]: the reports beside the failing one are recorded", got)
	}
}
