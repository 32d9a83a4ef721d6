package store

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/redis/go-redis/v9"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/hookwarden/hookwarden/receiver/store/storetest"
)

// t0 is the tests' "now"; every timestamp is derived from it.
var t0 = time.Date(2026, 11, 2, 10, 0, 0, 0, time.UTC)

// env is one test's database: a store on it and a way to open more stores on it.
type env struct {
	kind  string // "sqlite", "postgres", "redis" or "redis-cluster"
	dsn   string
	clock *clocktesting.FakePassiveClock // the stores' clock (updated_at of Retry and Dead)
	s     Store
}

// open opens another store on the same database, closed when the test ends.
func (e *env) open(t *testing.T) Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := Open(ctx, e.dsn, WithClock(e.clock.Now))
	if err != nil {
		t.Fatalf("Open(%s): %v", e.kind, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// sql is the test's SQL store, nil on Redis.
func (e *env) sql() *SQL {
	s, _ := e.s.(*SQL)
	return s
}

// storeKinds are the stores forEachStore runs a test against.
var storeKinds = []string{"sqlite", "postgres", "redis", "redis-cluster"}

// forEachStore runs f against a fresh SQLite file, a fresh PostgreSQL database, a Redis server of
// the test's own (appendfsync always) and a fresh key prefix on the package's Redis Cluster.
func forEachStore(t *testing.T, f func(t *testing.T, e *env)) {
	t.Helper()
	forStores(t, storeKinds, f)
}

// forEachSQLStore runs f against SQLite and PostgreSQL only.
func forEachSQLStore(t *testing.T, f func(t *testing.T, e *env)) {
	t.Helper()
	forStores(t, []string{"sqlite", "postgres"}, f)
}

func forStores(t *testing.T, kinds []string, f func(t *testing.T, e *env)) {
	t.Helper()
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			e := &env{kind: kind, clock: clocktesting.NewFakePassiveClock(t0)}
			switch kind {
			case "sqlite":
				e.dsn = "sqlite://" + storetest.SQLitePath(t)
			case "postgres":
				e.dsn = storetest.PostgresDSN(t)
			case "redis":
				e.dsn = storetest.StartRedis(t, storetest.DurableRedis()...).URL()
			case "redis-cluster":
				e.dsn = clusterDSN(t)
			}
			e.s = e.open(t)
			f(t, e)
		})
	}
}

// setRowsPerStatement makes s split claims into statements (SQL) or scripts (Redis) of n events.
func setRowsPerStatement(s Store, n int) {
	switch s := s.(type) {
	case *SQL:
		s.maxParams = n * claimCols
	case *Redis:
		s.chunkEvents = n
	}
}

// countEvents counts the recorded events (ledger rows, Redis dedupe keys).
func (e *env) countEvents(t *testing.T) int {
	t.Helper()
	ctx := testCtx(t)
	if s := e.sql(); s != nil {
		var n int
		if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM hw_events`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	r := e.s.(*Redis)
	keys, err := redisKeys(ctx, r, r.prefix+":{s:*}:e:*")
	if err != nil {
		t.Fatal(err)
	}
	return len(keys)
}

// redisKeys lists the keys matching pattern, on every master of a cluster.
func redisKeys(ctx context.Context, r *Redis, pattern string) ([]string, error) {
	scan := func(ctx context.Context, c *redis.Client) ([]string, error) {
		var keys []string
		it := c.Scan(ctx, 0, pattern, 1000).Iterator()
		for it.Next(ctx) {
			keys = append(keys, it.Val())
		}
		return keys, it.Err()
	}
	switch c := r.c.(type) {
	case *redis.ClusterClient:
		var mu sync.Mutex
		var all []string
		err := c.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
			keys, err := scan(ctx, n)
			mu.Lock()
			all = append(all, keys...)
			mu.Unlock()
			return err
		})
		return all, err
	case *redis.Client:
		return scan(ctx, c)
	}
	return nil, fmt.Errorf("unsupported client %T", r.c)
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// numberedEvents are n events of ns/a, evt_0 to evt_<n-1>, received at t0.
func numberedEvents(n int) []Event {
	events := make([]Event, n)
	for i := range events {
		events[i] = event("ns/a", fmt.Sprintf("evt_%d", i), t0)
	}
	return events
}

func event(subscription, id string, received time.Time) Event {
	return Event{
		Subscription:    subscription,
		SubscriptionUID: "uid-" + subscription,
		EventID:         id,
		EventType:       "invoice.paid",
		ContentType:     "application/json",
		Payload:         []byte(`{"id":"` + id + `"}`),
		ReceivedAt:      received,
		MaxAttempts:     5,
	}
}

// claimCase is a table case of claims: batches of event specs, "[sub:]id[/replay key]" (sub:
// another subscription), and the duplicates each ClaimBatch should answer.
type claimCase struct {
	name, reason string
	batches      [][]string
	want         [][]bool
}

// runClaimCases claims every case's batches in order, each event of subscription "ns/<name>"
// (or "ns/<name>-<sub>") with "batch <i> position <n>" as its payload, checks the answers, and
// checks that Depth counts one job per accepted event.
func runClaimCases(t *testing.T, e *env, cases []claimCase) {
	t.Helper()
	accepted := 0
	for _, tc := range cases {
		for i, batch := range tc.batches {
			var events []Event
			for n, spec := range batch {
				sub := "ns/" + tc.name
				if s, rest, ok := strings.Cut(spec, ":"); ok {
					sub, spec = sub+"-"+s, rest
				}
				id, replayKey, _ := strings.Cut(spec, "/")
				ev := event(sub, id, t0)
				ev.ReplayKey = replayKey
				ev.Payload = fmt.Appendf(nil, "batch %d position %d", i, n)
				events = append(events, ev)
			}
			got := mustClaim(t, e.s, events...)
			if diff := cmp.Diff(tc.want[i], got); diff != "" {
				t.Errorf("%s: %s: batch %d duplicates (-want +got):\n%s", tc.name, tc.reason, i, diff)
			}
			for _, d := range got {
				if !d {
					accepted++
				}
			}
		}
	}
	if got := mustDepth(t, e.s); got != accepted {
		t.Errorf("Depth = %d, want one job per accepted event (%d)", got, accepted)
	}
}

// claimTogether claims batch x on store a and batch y on store b at the same time, as two
// receivers do, and fails the test if either claim fails.
func claimTogether(t *testing.T, round int, a Store, x []Event, b Store, y []Event) (dupX, dupY []bool) {
	t.Helper()
	var errX, errY error
	var wg sync.WaitGroup
	wg.Go(func() { dupX, errX = a.ClaimBatch(testCtx(t), x) })
	wg.Go(func() { dupY, errY = b.ClaimBatch(testCtx(t), y) })
	wg.Wait()
	if errX != nil || errY != nil {
		t.Fatalf("round %d: concurrent claims failed: %v / %v", round, errX, errY)
	}
	return dupX, dupY
}

// jobOpts compares jobs without their database ids.
var jobOpts = cmp.Options{cmpopts.IgnoreFields(Job{}, "ID"), cmpopts.EquateEmpty()}

func mustClaim(t *testing.T, s Store, events ...Event) []bool {
	t.Helper()
	dup, err := s.ClaimBatch(testCtx(t), events)
	if err != nil {
		t.Fatalf("ClaimBatch: %v", err)
	}
	return dup
}

func mustLease(t *testing.T, s Store, n int, now time.Time, lease time.Duration) []Job {
	t.Helper()
	jobs, err := s.Lease(testCtx(t), n, now, lease)
	if err != nil {
		t.Fatalf("Lease: %v", err)
	}
	return jobs
}

// leaseOne leases the single due job and checks it is the expected event.
func leaseOne(t *testing.T, s Store, now time.Time, lease time.Duration, eventID string) Job {
	t.Helper()
	jobs := mustLease(t, s, 10, now, lease)
	if len(jobs) != 1 || jobs[0].Event.EventID != eventID {
		t.Fatalf("Lease(%v) = %d jobs %v, want exactly event %s", now, len(jobs), jobIDs(jobs), eventID)
	}
	return jobs[0]
}

func jobIDs(jobs []Job) []string {
	var ids []string
	for _, j := range jobs {
		ids = append(ids, j.Event.EventID)
	}
	return ids
}

func mustDepth(t *testing.T, s Store) int {
	t.Helper()
	n, err := s.Depth(testCtx(t))
	if err != nil {
		t.Fatalf("Depth: %v", err)
	}
	return n
}

// claimAtOnce claims the event ("ns/a", id) for each of ids through each of batchers, all claims
// released together, and counts per id the claims that were accepted (not duplicates).
func claimAtOnce(t *testing.T, batchers []*Batcher, ids []string) map[string]int {
	t.Helper()
	var mu sync.Mutex
	accepted := map[string]int{}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for _, b := range batchers {
		for _, id := range ids {
			wg.Go(func() {
				<-start
				dup, err := b.Claim(testCtx(t), event("ns/a", id, t0))
				if err != nil {
					t.Errorf("Claim %s: %v", id, err)
					return
				}
				mu.Lock()
				defer mu.Unlock()
				if !dup {
					accepted[id]++
				}
			})
		}
	}
	close(start)
	wg.Wait()
	return accepted
}

// eventually polls cond until it holds or 10 s have passed.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
