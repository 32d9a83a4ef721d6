package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/hookwarden/hookwarden/receiver/store/storetest"
)

func TestClaimLeaseComplete(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		ctx := testCtx(t)
		ev := event("shop/stripe", "evt_1", t0)
		if diff := cmp.Diff([]bool{false}, mustClaim(t, e.s, ev)); diff != "" {
			t.Fatalf("ClaimBatch duplicates (-want +got):\n%s", diff)
		}
		if got := mustDepth(t, e.s); got != 1 {
			t.Errorf("Depth after claim = %d, want 1", got)
		}

		jobs := mustLease(t, e.s, 10, t0, 30*time.Second)
		want := []Job{{Event: ev, Sink: DefaultSink, State: StateRunning, Attempt: 1, RunAt: t0, LeaseUntil: t0.Add(30 * time.Second)}}
		if diff := cmp.Diff(want, jobs, jobOpts); diff != "" {
			t.Fatalf("Lease (-want +got):\n%s", diff)
		}
		if again := mustLease(t, e.s, 10, t0.Add(time.Second), 30*time.Second); len(again) != 0 {
			t.Errorf("second Lease while the lease runs = %v, want none", jobIDs(again))
		}
		if err := e.s.Complete(ctx, jobs[0], t0.Add(time.Second)); err != nil {
			t.Fatalf("Complete: %v", err)
		}
		if got := mustDepth(t, e.s); got != 0 {
			t.Errorf("Depth after Complete = %d, want 0", got)
		}
		if err := e.s.Complete(ctx, jobs[0], t0.Add(2*time.Second)); !errors.Is(err, ErrLeaseLost) {
			t.Errorf("second Complete = %v, want ErrLeaseLost", err)
		}
		if later := mustLease(t, e.s, 10, t0.Add(time.Hour), time.Minute); len(later) != 0 {
			t.Errorf("Lease after Complete = %v, want none", jobIDs(later))
		}
	})
}

func TestClaimDuplicates(t *testing.T) {
	cases := []claimCase{
		{
			name:    "new",
			reason:  "events never seen are accepted",
			batches: [][]string{{"a", "b"}},
			want:    [][]bool{{false, false}},
		},
		{
			name:    "across batches",
			reason:  "an event recorded by an earlier claim is a duplicate",
			batches: [][]string{{"a"}, {"a", "b"}, {"b", "a"}},
			want:    [][]bool{{false}, {true, false}, {true, true}},
		},
		{
			name:    "within a batch",
			reason:  "the first occurrence in a batch wins, later ones are duplicates",
			batches: [][]string{{"a", "a", "b", "a", "b"}},
			want:    [][]bool{{false, true, false, true, true}},
		},
		{
			name:    "per subscription",
			reason:  "the dedupe key is (subscription, event id): two subscriptions may share an id",
			batches: [][]string{{"a", "other:a"}, {"other:a"}},
			want:    [][]bool{{false, false}, {true}},
		},
	}
	forEachStore(t, func(t *testing.T, e *env) {
		runClaimCases(t, e, cases)
		// The recorded payload is the first occurrence's.
		for _, j := range mustLease(t, e.s, 100, t0, time.Minute) {
			if j.Event.Subscription == "ns/within a batch" && j.Event.EventID == "a" {
				if got, want := string(j.Event.Payload), "batch 0 position 0"; got != want {
					t.Errorf("within a batch: recorded payload %q, want the first occurrence's %q", got, want)
				}
			}
		}
	})
}

func TestClaimLargeBatches(t *testing.T) {
	cases := []struct {
		name   string
		reason string
		rows   int // events per statement or script; 0: the store's own limit
		events int
	}{
		{name: "small chunks", reason: "batches split into many statements keep first-wins and per-event flags", rows: 2, events: 40},
		{name: "over the parameter limit", reason: "10000 events need 70000 parameters, over both databases' limits (and 40 Redis scripts)", events: 10000},
	}
	forEachStore(t, func(t *testing.T, e *env) {
		for _, tc := range cases {
			s := e.open(t)
			if tc.rows > 0 {
				setRowsPerStatement(s, tc.rows)
			}
			var events []Event
			var want []bool
			for i := range tc.events {
				events = append(events, event("ns/"+tc.name, fmt.Sprintf("evt_%d", i), t0))
				want = append(want, false)
				if i%4 == 3 { // and a repeat of an earlier event
					events = append(events, event("ns/"+tc.name, fmt.Sprintf("evt_%d", i/2), t0))
					want = append(want, true)
				}
			}
			before := mustDepth(t, s)
			if diff := cmp.Diff(want, mustClaim(t, s, events...)); diff != "" {
				t.Errorf("%s: %s (-want +got):\n%s", tc.name, tc.reason, diff)
			}
			if got := mustDepth(t, s) - before; got != tc.events {
				t.Errorf("%s: %d jobs enqueued, want %d", tc.name, got, tc.events)
			}
		}
	})
}

func TestLeaseTakesOldestDueJobs(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		mustClaim(t, e.s,
			event("ns/a", "future", t0.Add(time.Hour)),
			event("ns/a", "second", t0.Add(time.Second)),
			event("ns/a", "first", t0),
			event("ns/a", "third", t0.Add(2*time.Second)),
		)
		now := t0.Add(10 * time.Second)
		if diff := cmp.Diff([]string{"first", "second"}, jobIDs(mustLease(t, e.s, 2, now, time.Minute))); diff != "" {
			t.Errorf("Lease(2) takes the oldest due jobs (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"third"}, jobIDs(mustLease(t, e.s, 10, now, time.Minute))); diff != "" {
			t.Errorf("Lease(10) takes the rest of the due jobs, not the future one (-want +got):\n%s", diff)
		}
	})
}

func TestConcurrentLeasesNeverShareAJob(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		const jobs = 120
		mustClaim(t, e.s, numberedEvents(jobs)...)
		stores := []Store{e.s, e.open(t), e.s, e.open(t)} // two processes, two workers each
		var mu sync.Mutex
		seen := map[string]int{}
		var wg sync.WaitGroup
		for _, s := range stores {
			wg.Go(func() {
				for {
					got, err := s.Lease(testCtx(t), 7, t0, time.Hour)
					if err != nil {
						t.Errorf("Lease: %v", err)
						return
					}
					if len(got) == 0 {
						return
					}
					mu.Lock()
					for _, j := range got {
						seen[j.Event.EventID]++
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if len(seen) != jobs {
			t.Errorf("leased %d distinct jobs, want %d", len(seen), jobs)
		}
		for id, n := range seen {
			if n != 1 {
				t.Errorf("job %s leased %d times, want once", id, n)
			}
		}
	})
}

func TestLeaseExpiry(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		ctx := testCtx(t)
		mustClaim(t, e.s, event("ns/a", "evt_1", t0))
		first := leaseOne(t, e.s, t0, 30*time.Second, "evt_1")
		if got := mustLease(t, e.s, 10, t0.Add(30*time.Second), 30*time.Second); len(got) != 0 {
			t.Errorf("Lease at the lease deadline = %v, want none (expired only after it)", jobIDs(got))
		}
		// The first worker crashed (or stalls); another takes the job over.
		second := leaseOne(t, e.s, t0.Add(31*time.Second), 30*time.Second, "evt_1")
		if second.Attempt != 2 || second.ID != first.ID {
			t.Errorf("re-leased job %d attempt %d, want job %d attempt 2", second.ID, second.Attempt, first.ID)
		}
		for name, report := range map[string]func() error{
			"Complete": func() error { return e.s.Complete(ctx, first, t0.Add(40*time.Second)) },
			"Retry":    func() error { return e.s.Retry(ctx, first, t0.Add(time.Hour), "late") },
			"Dead":     func() error { return e.s.Dead(ctx, first, "late") },
		} {
			if err := report(); !errors.Is(err, ErrLeaseLost) {
				t.Errorf("%s by the expired holder = %v, want ErrLeaseLost", name, err)
			}
		}
		if err := e.s.Complete(ctx, second, t0.Add(40*time.Second)); err != nil {
			t.Errorf("Complete by the current holder: %v", err)
		}
	})
}

func TestRetrySchedule(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		ctx := testCtx(t)
		ev := event("ns/a", "evt_1", t0)
		mustClaim(t, e.s, ev)
		j := leaseOne(t, e.s, t0, 30*time.Second, "evt_1")
		at := t0.Add(time.Minute)
		if err := e.s.Retry(ctx, j, at, "sink answered 503"); err != nil {
			t.Fatalf("Retry: %v", err)
		}
		if got := mustDepth(t, e.s); got != 1 {
			t.Errorf("Depth of a retryable job = %d, want 1", got)
		}
		if got := mustLease(t, e.s, 10, at.Add(-time.Second), time.Minute); len(got) != 0 {
			t.Errorf("Lease before run_at = %v, want none", jobIDs(got))
		}
		got := mustLease(t, e.s, 10, at, 30*time.Second)
		want := []Job{{Event: ev, Sink: DefaultSink, State: StateRunning, Attempt: 2, LastError: "sink answered 503", RunAt: at, LeaseUntil: at.Add(30 * time.Second)}}
		if diff := cmp.Diff(want, got, jobOpts); diff != "" {
			t.Errorf("Lease at run_at (-want +got):\n%s", diff)
		}
	})
}

func TestReleaseDoesNotCountTheAttempt(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		ctx := testCtx(t)
		ev := event("ns/a", "evt_1", t0)
		mustClaim(t, e.s, ev)
		j := leaseOne(t, e.s, t0, 30*time.Second, "evt_1")
		at := t0.Add(time.Second)
		if err := e.s.Release(ctx, j, at, "no sink configured"); err != nil {
			t.Fatalf("Release: %v", err)
		}
		if err := e.s.Release(ctx, j, at, "again"); !errors.Is(err, ErrLeaseLost) {
			t.Errorf("second Release with the same lease = %v, want ErrLeaseLost", err)
		}
		got := mustLease(t, e.s, 10, at, 30*time.Second)
		want := []Job{{Event: ev, Sink: DefaultSink, State: StateRunning, Attempt: 1, LastError: "no sink configured", RunAt: at, LeaseUntil: at.Add(30 * time.Second)}}
		if diff := cmp.Diff(want, got, jobOpts); diff != "" {
			t.Errorf("Lease after Release (-want +got):\n%s", diff)
		}
	})
}

func TestDeadLetterReplay(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		ctx := testCtx(t)
		bad, good := event("ns/a", "evt_bad", t0), event("ns/a", "evt_good", t0.Add(time.Second))
		mustClaim(t, e.s, bad, good)
		jobs := mustLease(t, e.s, 10, t0.Add(time.Second), 30*time.Second)
		if diff := cmp.Diff([]string{"evt_bad", "evt_good"}, jobIDs(jobs)); diff != "" {
			t.Fatalf("Lease (-want +got):\n%s", diff)
		}
		died := jobs[0]
		if err := e.s.Dead(ctx, died, "sink answered 400"); err != nil {
			t.Fatalf("Dead: %v", err)
		}
		if err := e.s.Complete(ctx, jobs[1], t0.Add(2*time.Second)); err != nil {
			t.Fatalf("Complete: %v", err)
		}

		letters, err := e.s.DeadLetters(ctx, 10)
		if err != nil {
			t.Fatalf("DeadLetters: %v", err)
		}
		want := []Job{{Event: bad, Sink: DefaultSink, State: StateDead, Attempt: 1, LastError: "sink answered 400", RunAt: t0}}
		if diff := cmp.Diff(want, letters, jobOpts); diff != "" {
			t.Errorf("DeadLetters (-want +got):\n%s", diff)
		}
		if got := mustDepth(t, e.s); got != 0 {
			t.Errorf("Depth with only a dead job = %d, want 0", got)
		}
		if got := mustLease(t, e.s, 10, t0.Add(time.Hour), time.Minute); len(got) != 0 {
			t.Errorf("Lease with only a dead job = %v, want none", jobIDs(got))
		}
		if err := e.s.Replay(ctx, jobs[1].ID, t0.Add(time.Hour)); !errors.Is(err, ErrNotDead) {
			t.Errorf("Replay of a completed job = %v, want ErrNotDead", err)
		}

		replayAt := t0.Add(time.Hour)
		if err := e.s.Replay(ctx, died.ID, replayAt); err != nil {
			t.Fatalf("Replay: %v", err)
		}
		if letters, err := e.s.DeadLetters(ctx, 10); err != nil || len(letters) != 0 {
			t.Errorf("DeadLetters after Replay = %v, %v; want none", jobIDs(letters), err)
		}
		again := leaseOne(t, e.s, replayAt, 30*time.Second, "evt_bad")
		if again.Attempt != 1 || again.LastError != "sink answered 400" {
			t.Errorf("replayed job attempt %d last error %q, want a fresh budget (attempt 1) and the old error", again.Attempt, again.LastError)
		}
		// A worker stalled since before the job died holds attempt 1 too; it must not report
		// on the replay.
		if err := e.s.Complete(ctx, died, replayAt); !errors.Is(err, ErrLeaseLost) {
			t.Errorf("Complete by the pre-replay holder = %v, want ErrLeaseLost", err)
		}
		if err := e.s.Complete(ctx, again, replayAt); err != nil {
			t.Errorf("Complete of the replay: %v", err)
		}
		if err := e.s.Complete(ctx, again, replayAt); !errors.Is(err, ErrLeaseLost) {
			t.Errorf("second Complete of the replay = %v, want ErrLeaseLost", err)
		}
	})
}

func TestSweep(t *testing.T) {
	old, recent := t0.Add(-100*time.Hour), t0
	cutoff := t0.Add(-72 * time.Hour)
	cases := []struct {
		id     string
		reason string
		swept  bool
	}{
		{"old-completed", "delivered and past the dedupe window", true},
		{"old-dead-long-ago", "dead-lettered before the cutoff too", true},
		{"old-dead-lately", "dead-lettered after the cutoff: still visible for replay", false},
		{"old-running", "never delete a job in flight", false},
		{"old-retryable", "never delete a job waiting for its retry", false},
		{"recent-completed", "inside the dedupe window: a redelivery must stay a duplicate", false},
		{"old-pending", "never delete an undelivered job", false},
	}
	forEachStore(t, func(t *testing.T, e *env) {
		ctx := testCtx(t)
		s := e.s
		// Drive each event to its state before claiming the next, so that each Lease sees
		// exactly one due job.
		mustClaim(t, s, event("ns/a", "old-completed", old))
		if err := s.Complete(ctx, leaseOne(t, s, old, time.Minute, "old-completed"), old); err != nil {
			t.Fatal(err)
		}
		mustClaim(t, s, event("ns/a", "old-dead-long-ago", old))
		e.clock.SetTime(t0.Add(-90 * time.Hour))
		if err := s.Dead(ctx, leaseOne(t, s, old, time.Minute, "old-dead-long-ago"), "400"); err != nil {
			t.Fatal(err)
		}
		mustClaim(t, s, event("ns/a", "old-dead-lately", old))
		e.clock.SetTime(t0.Add(-time.Hour))
		if err := s.Dead(ctx, leaseOne(t, s, old, time.Minute, "old-dead-lately"), "400"); err != nil {
			t.Fatal(err)
		}
		mustClaim(t, s, event("ns/a", "old-running", old))
		leaseOne(t, s, old, 1000*time.Hour, "old-running")
		mustClaim(t, s, event("ns/a", "old-retryable", old))
		if err := s.Retry(ctx, leaseOne(t, s, old, time.Minute, "old-retryable"), t0.Add(time.Hour), "503"); err != nil {
			t.Fatal(err)
		}
		mustClaim(t, s, event("ns/a", "recent-completed", recent))
		if err := s.Complete(ctx, leaseOne(t, s, recent, time.Minute, "recent-completed"), recent); err != nil {
			t.Fatal(err)
		}
		mustClaim(t, s, event("ns/a", "old-pending", old))

		n, err := s.Sweep(ctx, cutoff)
		if err != nil {
			t.Fatalf("Sweep: %v", err)
		}
		if n != 2 {
			t.Errorf("Sweep removed %d events, want 2", n)
		}
		if rows := e.countEvents(t); rows != len(cases)-2 {
			t.Errorf("%d events left, want %d", rows, len(cases)-2)
		}
		if got := mustDepth(t, s); got != 3 {
			t.Errorf("Depth after Sweep = %d, want 3 (running, retryable, pending)", got)
		}
		// A swept event is forgotten: claiming it again is accepted, not a duplicate.
		for _, tc := range cases {
			dup := mustClaim(t, s, event("ns/a", tc.id, t0))
			if swept := !dup[0]; swept != tc.swept {
				t.Errorf("%s: swept = %t, want %t: %s", tc.id, swept, tc.swept, tc.reason)
			}
		}
		if n, err := s.Sweep(ctx, cutoff); err != nil || n != 0 {
			t.Errorf("second Sweep = %d, %v; want 0", n, err)
		}
	})
}

func TestClaimFailureRecordsNothing(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		ctx := testCtx(t)

		closed := e.open(t)
		if err := closed.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := closed.ClaimBatch(ctx, []Event{event("ns/a", "evt_closed", t0)}); err == nil {
			t.Errorf("ClaimBatch on a closed store succeeded, want an error")
		}

		// The database fails on the batch's second row, after the first one was inserted. On
		// SQLite each row is its own statement of the claim's transaction; on Redis both events
		// are one script, which checks everything before its first write.
		broken := e.open(t)
		if e.sql() != nil {
			setRowsPerStatement(broken, 1)
		}
		unfail := injectClaimFailure(t, e, "ns/a", "evt_broken_2")
		if _, err := broken.ClaimBatch(ctx, []Event{event("ns/a", "evt_broken", t0), event("ns/a", "evt_broken_2", t0)}); err == nil {
			t.Errorf("ClaimBatch with a failing database succeeded, want an error")
		}
		unfail()

		if got := mustDepth(t, e.s); got != 0 {
			t.Errorf("Depth after failed claims = %d, want 0", got)
		}
		// Nothing was recorded: the provider's redelivery is accepted, not a duplicate.
		dup := mustClaim(t, broken, event("ns/a", "evt_closed", t0), event("ns/a", "evt_broken", t0), event("ns/a", "evt_broken_2", t0))
		if diff := cmp.Diff([]bool{false, false, false}, dup); diff != "" {
			t.Errorf("redelivery after failed claims (-want +got):\n%s", diff)
		}
	})
}

func TestSQLiteIsDurable(t *testing.T) {
	s, err := OpenSQLite(storetest.SQLitePath(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := testCtx(t)
	for _, tc := range []struct {
		pragma, want, reason string
	}{
		{"journal_mode", "wal", "readers do not block the writer"},
		{"synchronous", "2", "FULL: every commit is fsynced, an acknowledged claim survives a power cut"},
		{"busy_timeout", "10000", "another process holding the write lock is waited for"},
	} {
		var got string
		if err := s.db.QueryRowContext(ctx, "PRAGMA "+tc.pragma).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("PRAGMA %s = %s, want %s: %s", tc.pragma, got, tc.want, tc.reason)
		}
	}
}

func TestOpen(t *testing.T) {
	dir := t.TempDir()
	redisURL := storetest.StartRedis(t, storetest.DurableRedis()...).URL()
	cases := []struct {
		name, dsn string
		reason    string
		wantErr   bool
	}{
		{name: "sqlite URL", dsn: "sqlite://" + dir + "/url.db", reason: "sqlite:///path selects SQLite"},
		{name: "plain path", dsn: dir + "/plain.db", reason: "a file path selects SQLite"},
		{name: "reopen", dsn: dir + "/plain.db", reason: "migrations are idempotent"},
		{name: "postgres", dsn: storetest.PostgresDSN(t), reason: "postgres:// selects PostgreSQL"},
		{name: "postgres again", dsn: "postgresql://" + strings.TrimPrefix(storetest.PostgresDSN(t), "postgres://"), reason: "postgresql:// selects PostgreSQL"},
		{name: "redis", dsn: redisURL, reason: "redis:// selects Redis"},
		{name: "redis again", dsn: redisURL, reason: "reopening finds the events"},
		{name: "redis prefix", dsn: redisURL + "?prefix=other", reason: "another prefix is another store on the same server"},
		{name: "redis bad option", dsn: redisURL + "?no_such_option=1", reason: "go-redis refuses unknown options", wantErr: true},
		{name: "redis brace prefix", dsn: redisURL + "?prefix=a{b}", reason: "a brace would change the hash tags", wantErr: true},
		{name: "unknown scheme", dsn: "mysql://localhost/db", reason: "no such store", wantErr: true},
		{name: "query in path", dsn: dir + "/x.db?mode=ro", reason: "the driver would read it as its parameters", wantErr: true},
	}
	for _, tc := range cases {
		s, err := Open(testCtx(t), tc.dsn)
		if (err != nil) != tc.wantErr {
			t.Errorf("%s: Open error = %v, want error %t: %s", tc.name, err, tc.wantErr, tc.reason)
		}
		if err != nil {
			continue
		}
		if dup := mustClaim(t, s, event("ns/a", "evt_1", t0)); tc.name != "reopen" && tc.name != "redis again" && dup[0] {
			t.Errorf("%s: first claim on a new database is a duplicate", tc.name)
		}
		_ = s.Close()
	}
}

func TestRedact(t *testing.T) {
	cases := []struct{ dsn, want, reason string }{
		{"postgres://hw:s3cret@db:5432/hw?sslmode=disable", "postgres://hw:xxxxx@db:5432/hw?sslmode=disable", "the password never reaches logs or errors"},
		{"postgres://hw@db/hw", "postgres://hw@db/hw", "nothing to hide"},
		{"/var/lib/hookwarden/receiver.db", "/var/lib/hookwarden/receiver.db", "a SQLite path is shown as given"},
		{"rediss://hw:s3cret@redis:6380/0?prefix=hw", "rediss://hw:xxxxx@redis:6380/0?prefix=hw", "Redis DSNs are URLs too"},
		{"postgres://hw:s3cret@db:%zz/hw", "<unparsable DSN>", "an unparsable DSN may hold a password where the parser cannot find it"},
	}
	for _, tc := range cases {
		if got := Redact(tc.dsn); got != tc.want {
			t.Errorf("Redact(%q) = %q, want %q: %s", tc.dsn, got, tc.want, tc.reason)
		}
	}
}

func TestProcessesClaimEachEventOnce(t *testing.T) {
	forStores(t, []string{"postgres", "redis", "redis-cluster"}, func(t *testing.T, e *env) {
		const processes, events = 3, 50

		// Started together: on PostgreSQL their migrations race on the empty database.
		stores := make([]Store, processes)
		var wg sync.WaitGroup
		for i := range stores {
			wg.Go(func() {
				s, err := Open(testCtx(t), e.dsn)
				if err != nil {
					t.Errorf("Open: %v", err)
					return
				}
				stores[i] = s
			})
		}
		wg.Wait()
		for _, s := range stores {
			if s == nil {
				t.FailNow()
			}
			defer s.Close()
		}

		var batchers []*Batcher
		for _, s := range stores {
			b := NewBatcher(s, BatcherOptions{})
			defer b.Close()
			batchers = append(batchers, b)
		}
		var ids []string
		for i := range events {
			ids = append(ids, fmt.Sprintf("evt_%d", i))
		}
		accepted := claimAtOnce(t, batchers, ids)
		for _, id := range ids {
			if accepted[id] != 1 {
				t.Errorf("%s accepted %d times across %d processes, want exactly once", id, accepted[id], processes)
			}
		}
		if got := mustDepth(t, stores[0]); got != events {
			t.Errorf("Depth = %d, want %d (one job per event)", got, events)
		}
	})
}

func TestOverlappingBatchesDoNotDeadlock(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		// Two processes claim the same events in opposite orders at the same time, as two
		// receivers behind a load balancer do when a provider retries a burst.
		a, b := e.s, e.open(t)
		const rounds, events = 10, 100
		for r := range rounds {
			var up, down []Event
			for i := range events {
				up = append(up, event("ns/a", fmt.Sprintf("evt_%d_%d", r, i), t0))
				down = append(down, event("ns/a", fmt.Sprintf("evt_%d_%d", r, events-1-i), t0))
			}
			dupA, dupB := claimTogether(t, r, a, up, b, down)
			for i := range events {
				if dupA[i] == dupB[events-1-i] {
					t.Errorf("round %d: evt_%d accepted by both or neither", r, i)
				}
			}
		}
		if got := mustDepth(t, a); got != rounds*events {
			t.Errorf("Depth = %d, want %d", got, rounds*events)
		}
	})
}

func TestOpenRefusesTheTwoTableSchema(t *testing.T) {
	forEachSQLStore(t, func(t *testing.T, e *env) {
		// A database from a development build that kept jobs in hw_jobs: its pending jobs
		// would be silently ignored by this schema, so Open must say so instead.
		if _, err := e.sql().db.ExecContext(testCtx(t), `CREATE TABLE hw_jobs (id BIGINT PRIMARY KEY)`); err != nil {
			t.Fatal(err)
		}
		_, err := Open(testCtx(t), e.dsn)
		if err == nil || !strings.Contains(err.Error(), "hw_jobs") {
			t.Fatalf("Open on a database with hw_jobs: err = %v, want one naming hw_jobs", err)
		}
	})
}

func TestSQLiteClaimStatementsArePreparedOncePerBatchSize(t *testing.T) {
	s, err := OpenSQLite(storetest.SQLitePath(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	next := 0
	for range 5 {
		for _, n := range []int{1, 3, 3, 7} {
			var batch []Event
			for range n {
				next++
				batch = append(batch, event("ns/a", fmt.Sprintf("evt_%d", next), t0))
			}
			if dup := mustClaim(t, s, batch...); slices.Contains(dup, true) {
				t.Fatalf("fresh batch of %d answered duplicates %v", n, dup)
			}
		}
	}
	var sizes []int
	for n := 1; n <= maxCachedClaim; n++ {
		if s.cached(claimSQL(n)) != nil {
			sizes = append(sizes, n)
		}
	}
	if diff := cmp.Diff([]int{1, 3, 7}, sizes); diff != "" {
		t.Errorf("prepared claim statements by row count (-want +got):\n%s", diff)
	}
	if got := mustDepth(t, s); got != 5*(1+3+3+7) {
		t.Errorf("Depth = %d, want %d", got, 5*(1+3+3+7))
	}
}

// The delivery loop's statements (Lease on the writer, the events of its jobs on the reader,
// a report) are prepared on first use and reused: a second round of the same shapes prepares
// nothing more.
func TestSQLiteDeliveryStatementsArePreparedOnce(t *testing.T) {
	s, err := OpenSQLite(storetest.SQLitePath(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	now := t0.Add(time.Minute)
	round := func(r int) {
		mustClaim(t, s, event("ns/a", fmt.Sprintf("evt_%d_a", r), t0), event("ns/a", fmt.Sprintf("evt_%d_b", r), t0))
		jobs := mustLease(t, s, 2, now, time.Minute)
		if len(jobs) != 2 {
			t.Fatalf("round %d: leased %d jobs, want 2", r, len(jobs))
		}
		for _, j := range jobs {
			if err := s.Complete(testCtx(t), j, now); err != nil {
				t.Fatalf("round %d: Complete: %v", r, err)
			}
		}
	}
	prepared := func() map[stmtKey]*sql.Stmt {
		s.stmtMu.Lock()
		defer s.stmtMu.Unlock()
		return maps.Clone(s.stmts)
	}
	round(0)
	first := prepared()
	if len(first) != 5 {
		t.Errorf("after one round %d statements are prepared, want 5 (the claim of two events and of their two jobs, lease, the events of two jobs, complete)", len(first))
	}
	round(1)
	if got := prepared(); !maps.Equal(first, got) {
		t.Errorf("a second round prepared again: %d statements before, %d after (or other ones)", len(first), len(got))
	}
}

// injectClaimFailure makes the store fail a claim that records eventID of sub (with others of
// the same subscription before it) and returns the undo: a trigger on SQL; on Redis a key in
// the way of the second job the next claim creates.
func injectClaimFailure(t *testing.T, e *env, sub, eventID string) (undo func()) {
	t.Helper()
	ctx := testCtx(t)
	if s := e.sql(); s != nil {
		fail := []string{`CREATE TRIGGER hw_fail BEFORE INSERT ON hw_events WHEN NEW.event_id = '` + eventID + `'
			BEGIN SELECT RAISE(ABORT, 'injected failure'); END`}
		unfail := `DROP TRIGGER hw_fail`
		if e.kind == "postgres" {
			fail = []string{
				`CREATE FUNCTION hw_fail() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'injected failure'; END $$`,
				`CREATE TRIGGER hw_fail BEFORE INSERT ON hw_events FOR EACH ROW WHEN (NEW.event_id = '` + eventID + `') EXECUTE FUNCTION hw_fail()`,
			}
			unfail = `DROP TRIGGER hw_fail ON hw_events`
		}
		for _, q := range fail {
			if _, err := s.db.ExecContext(ctx, q); err != nil {
				t.Fatal(err)
			}
		}
		return func() {
			if _, err := s.db.ExecContext(ctx, unfail); err != nil {
				t.Fatal(err)
			}
		}
	}
	r := e.s.(*Redis)
	last, err := r.c.Get(ctx, r.subKey(sub, "seq")).Int64()
	if err != nil && !errors.Is(err, redis.Nil) {
		t.Fatal(err)
	}
	key := r.subKey(sub, "j:"+strconv.FormatInt(last+2, 10))
	if err := r.c.Set(ctx, key, "in the way", 0).Err(); err != nil {
		t.Fatal(err)
	}
	return func() {
		if err := r.c.Del(ctx, key).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDeadLetterPurge: a purged dead letter is never delivered and leaves the dead letters, its
// event still answers a redelivery as a duplicate, and the ledger shows its job completed with
// the purge as its last error, until Sweep removes the event as a delivered one; only dead jobs
// can be purged, and an unknown id is not dead. Every store runs it.
func TestDeadLetterPurge(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		p, ok := e.s.(Purger)
		if !ok {
			t.Fatalf("%T does not implement Purger", e.s)
		}
		ctx := testCtx(t)
		bad, good := event("ns/a", "evt_bad", t0), event("ns/a", "evt_good", t0.Add(time.Second))
		mustClaim(t, e.s, bad, good)
		jobs := mustLease(t, e.s, 10, t0.Add(time.Second), 30*time.Second)
		if err := e.s.Dead(ctx, jobs[0], "sink answered 400"); err != nil {
			t.Fatalf("Dead: %v", err)
		}
		if err := p.Purge(ctx, jobs[1].ID, t0.Add(time.Hour)); !errors.Is(err, ErrNotDead) {
			t.Errorf("Purge of a leased job = %v, want ErrNotDead", err)
		}
		if err := p.Purge(ctx, 999999, t0.Add(time.Hour)); !errors.Is(err, ErrNotDead) {
			t.Errorf("Purge of an unknown id = %v, want ErrNotDead", err)
		}
		if err := e.s.Complete(ctx, jobs[1], t0.Add(2*time.Second)); err != nil {
			t.Fatalf("Complete: %v", err)
		}
		if err := p.Purge(ctx, jobs[0].ID, t0.Add(time.Hour)); err != nil {
			t.Fatalf("Purge: %v", err)
		}
		if letters, err := e.s.DeadLetters(ctx, 10); err != nil || len(letters) != 0 {
			t.Errorf("DeadLetters after Purge = %v, %v; want none", jobIDs(letters), err)
		}
		if got := mustLease(t, e.s, 10, t0.Add(2*time.Hour), time.Minute); len(got) != 0 {
			t.Errorf("Lease after Purge = %v, want none", jobIDs(got))
		}
		dup, err := e.s.ClaimBatch(ctx, []Event{bad})
		if err != nil || len(dup) != 1 || !dup[0] {
			t.Errorf("redelivery of a purged event: duplicate %v, %v; want a duplicate", dup, err)
		}
		if err := e.s.Replay(ctx, jobs[0].ID, t0.Add(3*time.Hour)); !errors.Is(err, ErrNotDead) {
			t.Errorf("Replay after Purge = %v, want ErrNotDead", err)
		}
		if err := p.Purge(ctx, jobs[0].ID, t0.Add(3*time.Hour)); !errors.Is(err, ErrNotDead) {
			t.Errorf("Purge of a purged job = %v, want ErrNotDead", err)
		}
		le, found, err := ledgerOf(t, e).EventOf(ctx, "ns/a", "evt_bad")
		if err != nil || !found {
			t.Fatalf("EventOf(evt_bad) = %v, %v; want the purged event", found, err)
		}
		// Purged, never delivered: no delivery time.
		want := []SinkRecord{{JobID: jobs[0].ID, Sink: DefaultSink, State: StatePurged, Attempts: 1,
			LastError: "purged from the dead letters"}}
		if diff := cmp.Diff(want, le.Sinks); diff != "" {
			t.Errorf("the purged event's jobs in the ledger, -want +got:\n%s", diff)
		}
		// Swept like a delivered event once the cutoff passes its last run.
		if n, err := e.s.Sweep(ctx, t0.Add(2*time.Hour)); err != nil || n != 2 {
			t.Errorf("Sweep after Purge = %d, %v; want both events removed", n, err)
		}
	})
}

// Claims of new batch sizes prepare their statements outside any transaction, while a claim
// with replay keys looks its statements up inside its own (it holds SQLite's one connection):
// preparing under the lock those look-ups take deadlocked the two. Concurrent claims of both
// kinds, every size new, must all finish.
func TestSQLiteConcurrentClaimsPreparingStatementsDoNotDeadlock(t *testing.T) {
	s, err := OpenSQLite(storetest.SQLitePath(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := testCtx(t)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var batch []Event
			for i := range g%16 + 1 {
				e := event("ns/a", fmt.Sprintf("evt_%d_%d", g, i), t0)
				if g%2 == 0 {
					e.ReplayKey = fmt.Sprintf("sig_%d_%d", g, i)
				}
				batch = append(batch, e)
			}
			_, err := s.ClaimBatch(ctx, batch)
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("ClaimBatch: %v (a deadlock ends when the test's context does)", err)
		}
	}
}

// A replica that starts while the others serve takes no lock on the store's tables when the
// schema is current: its migration is catalog reads only. Before, its CREATE INDEX IF NOT
// EXISTS statements took a share lock on each table in turn and deadlocked with the claims of
// the running replicas (receiver chaos: "migrate: ERROR: deadlock detected", the replica
// exited). Here a transaction holds the lock a claim holds; the second open must not wait.
func TestOpenTakesNoTableLockOnACurrentSchema(t *testing.T) {
	dsn := storetest.PostgresDSN(t)
	first, err := OpenPostgres(testCtx(t), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = first.Close() })
	claim, err := first.db.BeginTx(testCtx(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = claim.Rollback() }()
	for _, table := range []string{"hw_events", "hw_sink_jobs", "hw_replays"} {
		if _, err := claim.ExecContext(testCtx(t), `LOCK TABLE `+table+` IN ROW EXCLUSIVE MODE`); err != nil {
			t.Fatal(err)
		}
	}
	// Blocked, the open would wait for the lock until this context ends.
	ctx, cancel := context.WithTimeout(testCtx(t), 20*time.Second)
	defer cancel()
	second, err := OpenPostgres(ctx, dsn)
	if err != nil {
		t.Fatalf("opening the store while a claim holds its tables: %v", err)
	}
	_ = second.Close()
}
