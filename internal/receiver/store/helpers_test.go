package store

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/hookwarden/hookwarden/internal/receiver/store/storetest"
)

// t0 is the tests' "now"; every timestamp is derived from it.
var t0 = time.Date(2026, 11, 2, 10, 0, 0, 0, time.UTC)

// env is one test's database: a store on it and a way to open more stores on it.
type env struct {
	kind  string // "sqlite" or "postgres"
	dsn   string
	clock *clocktesting.FakePassiveClock // the stores' clock (updated_at of Retry and Dead)
	s     *SQL
}

// open opens another store on the same database, closed when the test ends.
func (e *env) open(t *testing.T) *SQL {
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

// forEachStore runs f against a fresh SQLite file and a fresh PostgreSQL database.
func forEachStore(t *testing.T, f func(t *testing.T, e *env)) {
	t.Helper()
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			e := &env{kind: kind, clock: clocktesting.NewFakePassiveClock(t0)}
			if kind == "sqlite" {
				e.dsn = "sqlite://" + storetest.SQLitePath(t)
			} else {
				e.dsn = storetest.PostgresDSN(t)
			}
			e.s = e.open(t)
			f(t, e)
		})
	}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
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
