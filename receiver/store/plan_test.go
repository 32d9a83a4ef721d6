package store

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden/receiver/store/storetest"
)

// TestSQLiteLeaseReadsTheBacklogInIndexOrder guards Lease's cost under a backlog: each state's
// branch must walk the (state, run_at) index in order and stop at the limit. Sorting happens
// once, over the at most 3×limit rows the branches return — never over the backlog.
func TestSQLiteLeaseReadsTheBacklogInIndexOrder(t *testing.T) {
	s, err := OpenSQLite(storetest.SQLitePath(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rows, err := s.db.QueryContext(testCtx(t), `EXPLAIN QUERY PLAN `+dueJobsSQLite, 1, 2, 3)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	text := strings.Join(plan, "\n")
	if n := strings.Count(text, "INDEX hw_sink_jobs_due"); n != 3 {
		t.Errorf("plan uses hw_sink_jobs_due %d times, want once per state:\n%s", n, text)
	}
	if n := strings.Count(text, "TEMP B-TREE"); n > 1 {
		t.Errorf("plan sorts %d times, want only the final merge:\n%s", n, text)
	}
	if strings.Contains(text, "SCAN hw_sink_jobs") {
		t.Errorf("plan scans the table:\n%s", text)
	}
}

// TestPostgresLeaseReadsTheBacklogInIndexOrder is the same guard on PostgreSQL, from the plan
// it really ran (EXPLAIN ANALYZE, rolled back) over a backlog of due jobs: each state's branch
// walks the (state, run_at) index and stops at the limit, nothing scans the table, and the one
// sort is pick's, over the branches' rows. The OR form seq-scanned and sorted the whole backlog.
func TestPostgresLeaseReadsTheBacklogInIndexOrder(t *testing.T) {
	s, err := OpenPostgres(testCtx(t), storetest.PostgresDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const backlog = 20000
	events := make([]Event, 0, 2000)
	for i := 0; i < backlog; i += cap(events) {
		events = events[:0]
		for k := range cap(events) {
			events = append(events, event("ns/a", fmt.Sprintf("evt_%06d", i+k), t0.Add(time.Duration(i+k)*time.Millisecond)))
		}
		mustClaim(t, s, events...)
	}
	for _, table := range []string{"hw_events", "hw_sink_jobs"} {
		if _, err := s.db.ExecContext(testCtx(t), `VACUUM (ANALYZE) `+table); err != nil {
			t.Fatal(err)
		}
	}
	plan, err := s.Explain(testCtx(t), PlanLease, t0.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Join(plan, "\n")
	if n := strings.Count(text, "Index Scan using hw_sink_jobs_due"); n != 3 {
		t.Errorf("plan walks hw_sink_jobs_due %d times, want once per state:\n%s", n, text)
	}
	if strings.Contains(text, "Seq Scan") || strings.Contains(text, "Bitmap Heap Scan") {
		t.Errorf("plan scans the table:\n%s", text)
	}
	if n := strings.Count(text, "Sort Key"); n != 1 {
		t.Errorf("plan sorts %d times, want only pick's:\n%s", n, text)
	}
	if !strings.Contains(text, "rows=8 loops=1") {
		t.Errorf("plan leased other than 8 rows:\n%s", text)
	}
}

// TestSQLiteSinkDepthsWalkTheLiveJobs guards SinkDepths' cost under a long history: it walks
// the (state, run_at) index's live states and looks each job's event up by its key, never
// scanning the jobs (most of them delivered) or the events.
func TestSQLiteSinkDepthsWalkTheLiveJobs(t *testing.T) {
	s, err := OpenSQLite(storetest.SQLitePath(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	plan, err := s.Explain(testCtx(t), PlanSinkDepths, t0)
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Join(plan, "\n")
	if !strings.Contains(text, "USING INDEX hw_sink_jobs_due (state=?)") || !strings.Contains(text, "USING INTEGER PRIMARY KEY (rowid=?)") {
		t.Errorf("plan does not walk the live states of hw_sink_jobs_due and look the events up by id:\n%s", text)
	}
	if strings.Contains(text, "SCAN ") {
		t.Errorf("plan scans a table:\n%s", text)
	}
}
