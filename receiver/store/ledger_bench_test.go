package store

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden/receiver/store/storetest"
)

// BenchmarkLedgerPage prints the cost of one page of Events on a ledger of LEDGER_BENCH_ROWS
// events (default 1,000,000; 4 subscriptions, 10 types, one delivered job each), SQLite and
// PostgreSQL: a page from the middle of the ledger with no filter, by type (a tenth of the
// events) and by subscription and sink. A page is a walk of the (received_at, id) index from
// its cursor, so its cost follows the page (and how many rows a filter passes over), never the
// ledger's size. Printed, not asserted.
//
//	go test ./receiver/store/ -run '^$' -bench LedgerPage -benchtime 200x -count=1
func BenchmarkLedgerPage(b *testing.B) {
	rows := 1_000_000
	if v := os.Getenv("LEDGER_BENCH_ROWS"); v != "" {
		rows, _ = strconv.Atoi(v)
	}
	for _, kind := range []string{"sqlite", "postgres"} {
		b.Run(kind, func(b *testing.B) {
			ctx := context.Background()
			var s *SQL
			var err error
			if kind == "sqlite" {
				s, err = OpenSQLite(storetest.SQLitePath(b))
			} else {
				s, err = OpenPostgres(ctx, storetest.PostgresDSN(b))
			}
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			start := time.Now()
			fillLedger(b, s, rows)
			b.Logf("%s: %d events written in %s", kind, rows, time.Since(start).Round(time.Millisecond))
			mid := t0.Add(time.Duration(rows/2) * time.Millisecond)
			queries := []struct {
				name string
				q    EventQuery
			}{
				{"none", EventQuery{Since: mid, Limit: 100}},
				{"type", EventQuery{Since: mid, Type: "type.3", Limit: 100}},
				{"subscription+sink", EventQuery{Since: mid, Subscriptions: []string{"ns/s1"}, Sink: "default", Limit: 100}},
			}
			for _, c := range queries {
				b.Run(c.name, func(b *testing.B) {
					var page EventPage
					for b.Loop() {
						if page, err = s.Events(ctx, c.q); err != nil {
							b.Fatal(err)
						}
					}
					if len(page.Events) != 100 || page.Next == "" {
						b.Fatalf("a page of %d events, next %q", len(page.Events), page.Next)
					}
					perPage := b.Elapsed() / time.Duration(b.N)
					fmt.Printf("REPORT ledger-page store=%s events=%d filter=%s page=100: %.0f µs/page; plan: %s\n", kind, rows, c.name, float64(perPage.Microseconds()), planOf(b, s, c.q))
				})
			}
		})
	}
}

// fillLedger writes n events a millisecond apart from t0, each with a completed job for sink
// default, in statements of the database's own (a claim per event would take an hour).
func fillLedger(b *testing.B, s *SQL, n int) {
	b.Helper()
	ctx := context.Background()
	base := t0.UnixMicro()
	gen := `WITH RECURSIVE c(x) AS (SELECT 0 UNION ALL SELECT x + 1 FROM c WHERE x < $1 - 1) SELECT x FROM c`
	if s.dialect == dialectPostgres {
		gen = `SELECT x FROM generate_series(0, $1 - 1) AS x`
	}
	stmts := []string{
		`INSERT INTO hw_events (subscription, event_id, max_attempts, received_at, event_type, subscription_uid, payload)
		SELECT 'ns/s' || (x % 4), 'evt_' || x, 5, CAST($2 AS BIGINT) + x * 1000, 'type.' || (x % 10), 'uid', $3 FROM (` + gen + `) g`,
		`INSERT INTO hw_sink_jobs (event, slot, sink, state, run_at, updated_at) SELECT id, 0, 'default', 'completed', received_at, received_at FROM hw_events`,
	}
	for i, q := range stmts {
		var err error
		if i == 0 {
			_, err = s.db.ExecContext(ctx, q, n, base, []byte(`{"object":"event"}`))
		} else {
			_, err = s.db.ExecContext(ctx, q)
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	if s.dialect == dialectPostgres {
		if _, err := s.db.ExecContext(ctx, `ANALYZE hw_events; ANALYZE hw_sink_jobs`); err != nil {
			b.Fatal(err)
		}
	} else if _, err := s.db.ExecContext(ctx, `ANALYZE`); err != nil {
		b.Fatal(err)
	}
}

// planOf is the database's plan for q's page, on one line.
func planOf(b *testing.B, s *SQL, q EventQuery) string {
	b.Helper()
	text, args, err := eventsSQL(q)
	if err != nil {
		b.Fatal(err)
	}
	explain, col := `EXPLAIN QUERY PLAN `, 3 // SQLite: id, parent, notused, detail
	if s.dialect == dialectPostgres {
		explain, col = `EXPLAIN (COSTS OFF) `, 0
	}
	rows, err := s.reader.QueryContext(context.Background(), explain+text, args...)
	if err != nil {
		b.Fatal(err)
	}
	var lines []string
	err = eachRow(rows, func(rows *sql.Rows) error {
		cols, err := rows.Columns()
		if err != nil {
			return err
		}
		v := make([]any, len(cols))
		var detail string
		for i := range v {
			v[i] = new(any)
			if i == col {
				v[i] = &detail
			}
		}
		if err := rows.Scan(v...); err != nil {
			return err
		}
		lines = append(lines, strings.TrimSpace(detail))
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return strings.Join(lines, " | ")
}
