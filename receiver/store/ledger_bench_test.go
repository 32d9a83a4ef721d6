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
// events (default 1,000,000; 4 subscriptions, 10 types, one delivered job each), SQLite,
// PostgreSQL and Redis (claimed through its claim script; its jobs left pending): a page from the middle of the ledger with no filter, by type (a tenth of the
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
	for _, kind := range []string{"sqlite", "postgres", "redis"} {
		b.Run(kind, func(b *testing.B) {
			ctx := context.Background()
			var s Ledger
			var err error
			start := time.Now()
			switch kind {
			case "sqlite":
				var sq *SQL
				if sq, err = OpenSQLite(storetest.SQLitePath(b)); err == nil {
					defer sq.Close()
					fillLedger(b, sq, rows)
				}
				s = sq
			case "postgres":
				var sq *SQL
				if sq, err = OpenPostgres(ctx, storetest.PostgresDSN(b)); err == nil {
					defer sq.Close()
					fillLedger(b, sq, rows)
				}
				s = sq
			case "redis":
				var st Store
				if st, err = Open(ctx, storetest.StartRedis(b).URL(), WithMinPromise(PromiseBestEffort)); err == nil { // a benchmark: no fsync
					defer st.Close()
					fillRedisLedger(b, st, rows)
				}
				s, _ = st.(Ledger)
			}
			if err != nil {
				b.Fatal(err)
			}
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
					plan := "a walk of each subscription's index (P:{s:S}:ev) from the cursor, one script per subscription"
					if sq, ok := s.(*SQL); ok {
						plan = planOf(b, sq, c.q)
					}
					fmt.Printf("REPORT ledger-page store=%s events=%d filter=%s page=100: %.0f µs/page; plan: %s\n", kind, rows, c.name, float64(perPage.Microseconds()), plan)
				})
			}
		})
	}
}

// fillRedisLedger claims n events a millisecond apart from t0 as fillLedger writes them (their
// jobs stay pending: a page reads a job hash whatever its state), through the store's own claim
// script, in batches of 10,000.
func fillRedisLedger(b *testing.B, s Store, n int) {
	b.Helper()
	payload := []byte(`{"object":"event"}`)
	for from := 0; from < n; from += 10_000 {
		events := make([]Event, 0, 10_000)
		for x := from; x < min(from+10_000, n); x++ {
			events = append(events, Event{Subscription: "ns/s" + strconv.Itoa(x%4), SubscriptionUID: "uid", EventID: "evt_" + strconv.Itoa(x),
				EventType: "type." + strconv.Itoa(x%10), Payload: payload, ReceivedAt: t0.Add(time.Duration(x) * time.Millisecond), MaxAttempts: 5})
		}
		if _, err := s.ClaimBatch(context.Background(), events); err != nil {
			b.Fatal(err)
		}
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
