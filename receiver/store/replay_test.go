package store

import (
	"database/sql"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hookwarden/hookwarden/receiver/store/storetest"
)

// replayEvent is event() with a replay key: the digest of the signed bytes of a scheme that
// does not sign the id (GitHub).
func replayEvent(subscription, id, replayKey string, received time.Time) Event {
	e := event(subscription, id, received)
	e.ReplayKey = replayKey
	return e
}

// Issue 4: the same signed bytes under a fresh event id are a duplicate, within a batch and
// across batches, on every store; a batch is answered as if claimed one by one.
func TestClaimReplayKeys(t *testing.T) {
	cases := []claimCase{
		{
			name:    "fresh id, same signed bytes",
			reason:  "a captured delivery resent under a new id is a duplicate",
			batches: [][]string{{"a/R1"}, {"b/R1"}},
			want:    [][]bool{{false}, {true}},
		},
		{
			name:    "within a batch",
			reason:  "the first of two claims carrying the same key wins",
			batches: [][]string{{"a/R1", "b/R1", "c/R2", "d/R1"}},
			want:    [][]bool{{false, true, false, true}},
		},
		{
			name:    "redelivery",
			reason:  "the same id and bytes again: a duplicate by both keys",
			batches: [][]string{{"a/R1"}, {"a/R1", "a/R1"}},
			want:    [][]bool{{false}, {true, true}},
		},
		{
			name:    "a retry's new bytes are recorded",
			reason:  "a retry re-signed at a new time is a duplicate by its id, and its bytes cannot come back under another id",
			batches: [][]string{{"a/R1"}, {"a/R2"}, {"b/R2"}},
			want:    [][]bool{{false}, {true}, {true}},
		},
		{
			name:    "a retry's new bytes, within a batch",
			reason:  "the same, in one batch",
			batches: [][]string{{"a/R1", "a/R2", "b/R2"}},
			want:    [][]bool{{false, true, true}},
		},
		{
			name:    "a refused replay records nothing",
			reason:  "a delivery refused for its key does not take its id: the genuine event with that id and its own bytes is accepted after it",
			batches: [][]string{{"x/R1"}, {"a/R1", "a/R2"}, {"a/R3"}},
			want:    [][]bool{{false}, {true, false}, {true}},
		},
		{
			name:    "per subscription",
			reason:  "another subscription (an organization hook beside a repository hook) has its own keys",
			batches: [][]string{{"a/R1", "org:a/R1"}, {"org:b/R1"}},
			want:    [][]bool{{false, false}, {true}},
		},
		{
			name:    "events without a key",
			reason:  "an event whose id is signed has no replay key and dedupes on its id alone",
			batches: [][]string{{"a", "b/R1", "c"}, {"a/R1", "d"}},
			want:    [][]bool{{false, false, false}, {true, false}},
		},
	}
	forEachStore(t, func(t *testing.T, e *env) { runClaimCases(t, e, cases) })
}

// Concurrent claims of the same signed bytes under different ids, through Batchers on two
// stores sharing one database (two receivers), accept exactly one.
func TestBatchersAcceptOneOfManyReplays(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		const keys, idsPerKey = 5, 40
		var batchers []*Batcher
		for _, s := range []Store{e.s, e.open(t)} {
			b := NewBatcher(s, BatcherOptions{})
			defer b.Close()
			batchers = append(batchers, b)
		}
		var mu sync.Mutex
		acceptedByKey := map[string]int{}
		var wg sync.WaitGroup
		start := make(chan struct{})
		for k := range keys {
			key := fmt.Sprintf("R%d", k)
			for i := range idsPerKey {
				b := batchers[i%len(batchers)]
				ev := replayEvent("ns/a", fmt.Sprintf("guid-%d-%d", k, i), key, t0)
				wg.Go(func() {
					<-start
					dup, err := b.Claim(testCtx(t), ev)
					if err != nil {
						t.Errorf("Claim %s: %v", ev.EventID, err)
						return
					}
					if !dup {
						mu.Lock()
						acceptedByKey[key]++
						mu.Unlock()
					}
				})
			}
		}
		close(start)
		wg.Wait()
		for k := range keys {
			if n := acceptedByKey[fmt.Sprintf("R%d", k)]; n != 1 {
				t.Errorf("R%d: %d of %d concurrent claims accepted, want 1", k, n, idsPerKey)
			}
		}
		if got := mustDepth(t, e.s); got != keys {
			t.Errorf("Depth = %d, want %d", got, keys)
		}
	})
}

// Two receivers claim batches whose event ids and replay keys run in opposite orders: on
// PostgreSQL each claim locks both unique indexes, and neither batch may deadlock the other.
func TestOverlappingReplayBatchesDoNotDeadlock(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		a, b := e.s, e.open(t)
		const rounds, events = 10, 100
		accepted := 0
		for r := range rounds {
			var up, down []Event
			for i := range events {
				// The same ids and keys, paired differently, in opposite orders.
				up = append(up, replayEvent("ns/a", fmt.Sprintf("evt_%d_%03d", r, i), fmt.Sprintf("R%d_%03d", r, events-1-i), t0))
				down = append(down, replayEvent("ns/a", fmt.Sprintf("evt_%d_%03d", r, events-1-i), fmt.Sprintf("R%d_%03d", r, (i+events/2)%events), t0))
			}
			dupA, dupB := claimTogether(t, r, a, up, b, down)
			ids, keys := map[string]int{}, map[string]int{}
			for i, d := range dupA {
				if !d {
					ids[up[i].EventID]++
					keys[up[i].ReplayKey]++
				}
			}
			for i, d := range dupB {
				if !d {
					ids[down[i].EventID]++
					keys[down[i].ReplayKey]++
				}
			}
			for k, n := range ids {
				if n > 1 {
					t.Errorf("round %d: %s accepted %d times", r, k, n)
				}
			}
			for k, n := range keys {
				if n > 1 {
					t.Errorf("round %d: replay key %s accepted %d times", r, k, n)
				}
			}
			if len(ids) < events/2 {
				t.Errorf("round %d: %d events accepted, want at least %d: each accepted claim holds at most two others back", r, len(ids), events/2)
			}
			accepted += len(ids)
		}
		if got := mustDepth(t, a); got != accepted {
			t.Errorf("Depth = %d, want %d", got, accepted)
		}
	})
}

// A replay key is a dedupe record only: Sweep forgets it once its receipt is older than the
// cutoff, whatever became of its event (Redis: its TTL, the dedupe window from the receipt).
func TestReplayKeysAreForgottenAfterTheWindow(t *testing.T) {
	old, cutoff := t0.Add(-100*time.Hour), t0.Add(-72*time.Hour)
	forEachStore(t, func(t *testing.T, e *env) {
		ctx := testCtx(t)
		window := 72 * time.Hour
		if r, ok := e.s.(*Redis); ok {
			// Received 100 h ago with a 72 h window: expired already, TTL or not. A recent
			// one keeps the window from its receipt.
			recent := replayEvent("ns/a", "evt_recent", "R_recent", t0.Add(-time.Hour))
			mustClaim(t, e.s, replayEvent("ns/a", "evt_old", "R_old", old), recent)
			eventually(t, "the old replay key to expire", func() bool { return r.c.Exists(ctx, r.subKey("ns/a", "r:R_old")).Val() == 0 })
			ttl := r.c.PTTL(ctx, r.subKey("ns/a", "r:R_recent")).Val()
			if ttl <= window-time.Hour-time.Minute || ttl > window-time.Hour {
				t.Errorf("the recent replay key's TTL is %v, want the window less its age, %v", ttl, window-time.Hour)
			}
		} else {
			mustClaim(t, e.s, replayEvent("ns/a", "evt_old", "R_old", old), replayEvent("ns/a", "evt_recent", "R_recent", t0.Add(-time.Hour)))
			if n, err := e.s.Sweep(ctx, cutoff); err != nil || n != 0 {
				t.Fatalf("Sweep = %d, %v; want 0 events (both are undelivered)", n, err)
			}
		}
		dup := mustClaim(t, e.s, replayEvent("ns/a", "evt_old_again", "R_old", t0), replayEvent("ns/a", "evt_recent_again", "R_recent", t0))
		if diff := cmp.Diff([]bool{false, true}, dup); diff != "" {
			t.Errorf("the old key forgotten, the recent one held (-want +got):\n%s", diff)
		}
		// The event ids live on with their undelivered jobs.
		if dup := mustClaim(t, e.s, event("ns/a", "evt_old", t0)); !dup[0] {
			t.Errorf("the undelivered old event's id was forgotten with its replay key")
		}
	})
}

// The SQL stores keep the replay keys in a table of their own: a claim that fails records
// none, as it records no event.
func TestFailedClaimRecordsNoReplayKey(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		ctx := testCtx(t)
		unfail := injectClaimFailure(t, e, "ns/a", "evt_broken_2")
		batch := []Event{replayEvent("ns/a", "evt_broken", "R1", t0), replayEvent("ns/a", "evt_broken_2", "R2", t0)}
		if _, err := e.s.ClaimBatch(ctx, batch); err == nil {
			t.Fatal("ClaimBatch with a failing database succeeded, want an error")
		}
		unfail()
		dup := mustClaim(t, e.s, replayEvent("ns/a", "evt_retried", "R1", t0), replayEvent("ns/a", "evt_retried_2", "R2", t0))
		if diff := cmp.Diff([]bool{false, false}, dup); diff != "" {
			t.Errorf("after a failed claim, its replay keys are still free (-want +got):\n%s", diff)
		}
	})
}

func TestCheckEventBoundsTheReplayKey(t *testing.T) {
	ev := replayEvent("ns/a", "evt_1", strings.Repeat("f", MaxReplayKeyBytes+1), t0)
	if err := CheckEvent(ev); err == nil || !strings.Contains(err.Error(), "replay key") {
		t.Errorf("CheckEvent(%d-byte replay key) = %v, want an error naming the replay key", len(ev.ReplayKey), err)
	}
	ev.ReplayKey = strings.Repeat("f", 64)
	if err := CheckEvent(ev); err != nil {
		t.Errorf("CheckEvent(a SHA-256 in hex) = %v, want nil", err)
	}
}

// frozenDatabase creates a fresh SQLite file or PostgreSQL database (kind), writes into it a
// schema an earlier version created, frozen in testdata with its rows (schema-before-replay-keys:
// no hw_replays, one delivered and one undelivered event; schema-before-sinks: see the file), and
// returns its DSN.
func frozenDatabase(t *testing.T, kind, file string) string {
	t.Helper()
	dsn, driver, d := "sqlite://"+storetest.SQLitePath(t), "sqlite", dialectSQLite
	if kind == "postgres" {
		dsn, driver, d = storetest.PostgresDSN(t), "pgx", dialectPostgres
	}
	db, err := sql.Open(driver, strings.TrimPrefix(dsn, "sqlite://"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = db.Close() }()
	for _, q := range frozenSchema(t, d, file) {
		if _, err := db.ExecContext(testCtx(t), q); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
	}
	return dsn
}

// frozenSchema reads the statements of a schema frozen in testdata for d: {{id}}, {{blob}} and
// {{keyed}} are the dialect's, {{t0}} is t0 and {{later}} t0 + 1 h, in unix microseconds.
func frozenSchema(t *testing.T, d dialect, file string) []string {
	t.Helper()
	text, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	id, blob, keyed := "INTEGER PRIMARY KEY", "BLOB", " WITHOUT ROWID"
	if d == dialectPostgres {
		id, blob, keyed = "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY", "BYTEA", ""
	}
	at := fmt.Sprint(t0.UnixMicro())
	var code strings.Builder
	for line := range strings.Lines(string(text)) {
		if !strings.HasPrefix(line, "--") {
			code.WriteString(line)
		}
	}
	var stmts []string
	for stmt := range strings.SplitSeq(strings.NewReplacer("{{id}}", id, "{{blob}}", blob, "{{keyed}}", keyed, "{{t0}}", at, "{{later}}", fmt.Sprint(t0.Add(time.Hour).UnixMicro())).Replace(code.String()), ";") {
		if stmt = strings.TrimSpace(stmt); stmt != "" {
			stmts = append(stmts, stmt)
		}
	}
	return stmts
}

// A database the previous version created opens, gains the replay key table, and keeps its
// events: their ids stay duplicates, the queued one is still delivered.
func TestOpenMigratesThePreviousSchema(t *testing.T) {
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			ctx := testCtx(t)
			dsn := frozenDatabase(t, kind, "testdata/schema-before-replay-keys.sql")

			for round := range 2 { // and once more: the migration is idempotent
				s, err := Open(ctx, dsn)
				if err != nil {
					t.Fatalf("round %d: Open on the previous version's database: %v", round, err)
				}
				if round == 0 {
					dup := mustClaim(t, s, event("ns/a", "evt_delivered", t0), event("ns/a", "evt_queued", t0),
						replayEvent("ns/a", "guid-1", "R1", t0), replayEvent("ns/a", "guid-2", "R1", t0))
					if diff := cmp.Diff([]bool{true, true, false, true}, dup); diff != "" {
						t.Errorf("claims on the migrated database (-want +got):\n%s", diff)
					}
					if got := jobIDs(mustLease(t, s, 10, t0, time.Minute)); !slices.Equal(got, []string{"evt_queued", "guid-1"}) {
						t.Errorf("Lease = %v, want the queued event of the previous version and guid-1", got)
					}
				} else if dup := mustClaim(t, s, replayEvent("ns/a", "guid-3", "R1", t0)); !dup[0] {
					t.Errorf("after reopening, the replay key recorded before is not held")
				}
				if _, err := s.Sweep(ctx, t0.Add(-time.Hour)); err != nil {
					t.Errorf("Sweep on the migrated database: %v", err)
				}
				_ = s.Close()
			}
		})
	}
}
