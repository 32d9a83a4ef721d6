package store

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hookwarden/hookwarden/receiver/store/storetest"
)

// mustSinkDepths is SinkDepths, failing the test on an error.
func mustSinkDepths(t *testing.T, s Store) []SinkDepth {
	t.Helper()
	d, err := s.SinkDepths(testCtx(t))
	if err != nil {
		t.Fatalf("SinkDepths: %v", err)
	}
	return d
}

// Issue 30: the backlog of each (subscription, sink): its jobs not yet completed or dead
// (pending, blocked behind their ordering key, running, waiting for a retry), and the receipt
// of the oldest one's event, which a retry does not move; a sink that drained is not listed,
// a replayed dead letter is again.
func TestSinkDepths(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		ctx := testCtx(t)
		if got := mustSinkDepths(t, e.s); len(got) != 0 {
			t.Errorf("SinkDepths of an empty store = %+v, want none", got)
		}
		ordered := func(ev Event) Event { ev.OrderKeys = map[string]string{"slow": "cus_1"}; return ev }
		mustClaim(t, e.s,
			ordered(sinkEvent("ns/a", "evt_1", t0, "ok", "slow")),
			ordered(sinkEvent("ns/a", "evt_2", t0.Add(time.Minute), "ok", "slow")),
			event("ns/b", "evt_3", t0.Add(2*time.Minute)))
		want := []SinkDepth{
			{Subscription: "ns/a", Sink: "ok", Jobs: 2, OldestReceived: t0},
			{Subscription: "ns/a", Sink: "slow", Jobs: 2, OldestReceived: t0}, // evt_2's job blocked behind evt_1's
			{Subscription: "ns/b", Sink: DefaultSink, Jobs: 1, OldestReceived: t0.Add(2 * time.Minute)},
		}
		if diff := cmp.Diff(want, mustSinkDepths(t, e.s)); diff != "" {
			t.Errorf("SinkDepths after the claims (-want +got):\n%s", diff)
		}

		now := t0.Add(3 * time.Minute)
		jobs := byJob(t, mustLease(t, e.s, 10, now, time.Minute))
		for _, k := range []string{"evt_1→ok", "evt_2→ok"} {
			if err := e.s.Complete(ctx, jobs[k], now); err != nil {
				t.Fatal(err)
			}
		}
		retryAt := now.Add(time.Hour)
		if err := e.s.Retry(ctx, jobs["evt_1→slow"], retryAt, "sink answered 503"); err != nil {
			t.Fatal(err)
		}
		if err := e.s.Dead(ctx, jobs["evt_3→"+DefaultSink], "sink answered 400"); err != nil {
			t.Fatal(err)
		}
		want = []SinkDepth{{Subscription: "ns/a", Sink: "slow", Jobs: 2, OldestReceived: t0}}
		if diff := cmp.Diff(want, mustSinkDepths(t, e.s)); diff != "" {
			t.Errorf("SinkDepths after ok drained, slow's retry and ns/b's dead letter (-want +got):\n%s", diff)
		}

		if err := e.s.Replay(ctx, jobs["evt_3→"+DefaultSink].ID, now); err != nil {
			t.Fatal(err)
		}
		again := byJob(t, mustLease(t, e.s, 10, retryAt, time.Minute))
		if err := e.s.Complete(ctx, again["evt_1→slow"], retryAt); err != nil {
			t.Fatal(err)
		}
		want = []SinkDepth{
			{Subscription: "ns/a", Sink: "slow", Jobs: 1, OldestReceived: t0.Add(time.Minute)},
			{Subscription: "ns/b", Sink: DefaultSink, Jobs: 1, OldestReceived: t0.Add(2 * time.Minute)},
		}
		if diff := cmp.Diff(want, mustSinkDepths(t, e.s)); diff != "" {
			t.Errorf("SinkDepths after the replay and slow's first delivery (-want +got):\n%s", diff)
		}
	})
}

// BenchmarkSinkDepths times SinkDepths (and Depth, for comparison) on a backlog of 100k live
// jobs, 25k events of 10 subscriptions to 4 sinks each, besides 100k completed ones it must not
// walk. ns/op is per call. go test -run '^$' -bench SinkDepths -benchtime 20x ./receiver/store/
func BenchmarkSinkDepths(b *testing.B) {
	for _, kind := range []string{"sqlite", "postgres", "redis"} {
		b.Run(kind, func(b *testing.B) {
			var dsn string
			switch kind {
			case "sqlite":
				dsn = "sqlite://" + storetest.SQLitePath(b)
			case "postgres":
				dsn = storetest.PostgresDSN(b)
			case "redis":
				dsn = storetest.StartRedis(b).URL()
			}
			ctx := b.Context()
			s, err := Open(ctx, dsn, WithMinPromise(PromiseBestEffort)) // no fsync per claim: the preload is not measured
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			sinks := []string{"http", "audit", "bus", "kafka"}
			for round, live := range []bool{false, true} {
				for n := 0; n < 25000; n += 500 {
					batch := make([]Event, 500)
					for i := range batch {
						batch[i] = sinkEvent(fmt.Sprintf("ns/sub-%d", i%10), fmt.Sprintf("evt_%d_%d", round, n+i), t0.Add(time.Duration(n+i)*time.Millisecond), sinks...)
					}
					if _, err := s.ClaimBatch(ctx, batch); err != nil {
						b.Fatal(err)
					}
				}
				for !live {
					jobs, err := s.Lease(ctx, 1000, t0.Add(time.Hour), time.Hour)
					if err != nil {
						b.Fatal(err)
					}
					if len(jobs) == 0 {
						break
					}
					for _, j := range jobs {
						if err := s.Complete(ctx, j, t0.Add(time.Hour)); err != nil {
							b.Fatal(err)
						}
					}
				}
			}
			start := time.Now()
			if n, err := s.Depth(ctx); err != nil || n != 100000 {
				b.Fatalf("Depth = %d, %v; want 100000", n, err)
			}
			b.Logf("REPORT %s: Depth on 100k live jobs took %s", kind, time.Since(start))
			for b.Loop() {
				d, err := s.SinkDepths(ctx)
				if err != nil || len(d) != 40 {
					b.Fatalf("SinkDepths = %d entries, %v; want 40", len(d), err)
				}
			}
		})
	}
}
