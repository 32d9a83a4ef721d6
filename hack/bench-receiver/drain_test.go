package main

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden/receiver/deliver"
	"github.com/hookwarden/hookwarden/receiver/store"
	"github.com/hookwarden/hookwarden/receiver/store/storetest"
)

// leaseLog is a Store that records what Lease handed out and when each job was retried to.
type leaseLog struct {
	store.Store
	mu     sync.Mutex
	leased []store.Job
	at     []time.Time         // when each leased job was leased (the pool's now)
	retry  map[int64]time.Time // job → the run_at of its pending retry
	early  int                 // jobs leased before their retry's run_at
}

func (l *leaseLog) Lease(ctx context.Context, n int, now time.Time, lease time.Duration) ([]store.Job, error) {
	jobs, err := l.Store.Lease(ctx, n, now, lease)
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, j := range jobs {
		if at, ok := l.retry[j.ID]; ok && now.Before(at) {
			l.early++
		}
		delete(l.retry, j.ID)
		l.leased = append(l.leased, j)
		l.at = append(l.at, now)
	}
	return jobs, err
}

func (l *leaseLog) Retry(ctx context.Context, j store.Job, at time.Time, lastErr string) error {
	l.mu.Lock()
	l.retry[j.ID] = at
	l.mu.Unlock()
	return l.Store.Retry(ctx, j, at, lastErr)
}

// TestBacklogDrain is bench-receiver -backlog's drain in small: a backlog of 2,000 undelivered
// events over 3 subscriptions, preloaded as the benchmark does, drained by a pool of 8 workers
// into a sink that refuses its first 100 requests (the end of the outage) and then accepts at a
// fixed pace. Facts, not timings: every event is delivered once; the pool never has more
// attempts at the sink than workers; a failed attempt is retried no earlier than its backoff
// says, and only it is attempted twice (no wave of retries); first attempts begin in order of
// arrival within each subscription.
func TestBacklogDrain(t *testing.T) {
	const events, subs, workers, failFirst = 2000, 3, 8, 100
	open := map[string]func(t *testing.T) store.Store{
		"sqlite": func(t *testing.T) store.Store {
			st, err := store.OpenSQLite(storetest.SQLitePath(t))
			if err != nil {
				t.Fatal(err)
			}
			return st
		},
		"postgres": func(t *testing.T) store.Store {
			st, err := store.OpenPostgres(t.Context(), storetest.PostgresDSN(t))
			if err != nil {
				t.Fatal(err)
			}
			return st
		},
	}
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			st := open[kind](t)
			defer st.Close()
			ctx := t.Context()
			if err := preload(ctx, st, events, subs, []byte(`{"id":"evt"}`), time.Now(), time.Hour); err != nil {
				t.Fatal(err)
			}
			log := &leaseLog{Store: st, retry: map[int64]time.Time{}}
			res, err := drain(ctx, log, drainOptions{workers: workers, pace: 5000, window: 2 * time.Minute, failFirst: failFirst,
				backoff: deliver.Backoff{Base: 20 * time.Millisecond, Max: 200 * time.Millisecond}})
			if err != nil {
				t.Fatal(err)
			}
			if res.left != 0 || res.accepted != events || res.redelivered != 0 {
				t.Errorf("left %d undelivered, sink accepted %d (want %d), %d twice", res.left, res.accepted, events, res.redelivered)
			}
			if res.attempts != events+failFirst {
				t.Errorf("%d attempts, want %d (one per event and one more per refused attempt)", res.attempts, events+failFirst)
			}
			if res.maxInflight > workers {
				t.Errorf("the sink held %d attempts at once, more than the %d workers", res.maxInflight, workers)
			}
			log.mu.Lock()
			defer log.mu.Unlock()
			if log.early != 0 {
				t.Errorf("%d retries leased before the run_at their backoff gave", log.early)
			}
			last := map[string]int{}
			firsts := 0
			for _, j := range log.leased {
				if j.Attempt != 1 {
					continue
				}
				firsts++
				seq := backlogSeq(j.Event.EventID)
				if prev, ok := last[j.Event.Subscription]; ok && seq <= prev {
					t.Errorf("%s: first attempt of event %d leased after event %d's", j.Event.Subscription, seq, prev)
				}
				last[j.Event.Subscription] = seq
			}
			if firsts != events || len(log.leased) != events+failFirst {
				t.Errorf("leased %d first attempts and %d in all, want %d and %d", firsts, len(log.leased), events, events+failFirst)
			}
			t.Logf("%s: %d attempts, at most %d at once; %d deliveries reached the sink out of arrival order within their subscription (at most %d behind)",
				kind, res.attempts, res.maxInflight, res.totalOutOfOrder(), res.maxBehind)
		})
	}
}
