package store

import (
	"strings"
	"testing"

	"github.com/hookwarden/hookwarden/internal/receiver/store/storetest"
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
	if n := strings.Count(text, "INDEX hw_events_due"); n != 3 {
		t.Errorf("plan uses hw_events_due %d times, want once per state:\n%s", n, text)
	}
	if n := strings.Count(text, "TEMP B-TREE"); n > 1 {
		t.Errorf("plan sorts %d times, want only the final merge:\n%s", n, text)
	}
	if strings.Contains(text, "SCAN hw_events") {
		t.Errorf("plan scans the table:\n%s", text)
	}
}
