package store

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// sinkEvent is event() delivered to sinks.
func sinkEvent(subscription, id string, received time.Time, sinks ...string) Event {
	e := event(subscription, id, received)
	e.Sinks = sinks
	return e
}

// sinkJobs are jobs as "<event id>→<sink>".
func sinkJobs(jobs []Job) []string {
	var out []string
	for _, j := range jobs {
		out = append(out, j.Event.EventID+"→"+j.Sink)
	}
	return out
}

// byJob maps leased jobs by "<event id>→<sink>".
func byJob(t *testing.T, jobs []Job) map[string]Job {
	t.Helper()
	m := map[string]Job{}
	for _, j := range jobs {
		m[j.Event.EventID+"→"+j.Sink] = j
	}
	return m
}

// Issue 30: an event claimed for several sinks is recorded once (one ledger row, the dedupe
// unit) and enqueued once per sink; each job carries the whole event and its sink's name.
func TestClaimEnqueuesAJobPerSink(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		ev := sinkEvent("ns/a", "evt_1", t0, "worker", "audit", "bus")
		if dup := mustClaim(t, e.s, ev, event("ns/a", "evt_2", t0.Add(time.Second))); !slices.Equal(dup, []bool{false, false}) {
			t.Fatalf("claims = %v, want both accepted", dup)
		}
		if got := mustDepth(t, e.s); got != 4 {
			t.Errorf("Depth = %d, want 4: three sinks of evt_1 and evt_2's default sink", got)
		}
		if got := e.countEvents(t); got != 2 {
			t.Errorf("%d events recorded, want 2: an event is recorded once, whatever its sinks", got)
		}
		jobs := mustLease(t, e.s, 10, t0.Add(time.Second), time.Minute)
		got := sinkJobs(jobs)
		slices.Sort(got)
		if diff := cmp.Diff([]string{"evt_1→audit", "evt_1→bus", "evt_1→worker", "evt_2→" + DefaultSink}, got); diff != "" {
			t.Errorf("leased jobs (-want +got):\n%s", diff)
		}
		ids := map[int64]bool{}
		for _, j := range jobs {
			ids[j.ID] = true
			want := event(j.Event.Subscription, j.Event.EventID, j.Event.ReceivedAt)
			if diff := cmp.Diff(want, j.Event); diff != "" {
				t.Errorf("job %s carries the event (-want +got):\n%s", j.Sink, diff)
			}
		}
		if len(ids) != len(jobs) {
			t.Errorf("job ids %v are not distinct", ids)
		}
		// A provider's redelivery is a duplicate of the event, whatever sinks it names now.
		if dup := mustClaim(t, e.s, sinkEvent("ns/a", "evt_1", t0, "worker", "another")); !dup[0] {
			t.Errorf("redelivery of evt_1 accepted, want a duplicate")
		}
		if got := mustDepth(t, e.s); got != 4 {
			t.Errorf("Depth after a duplicate = %d, want 4", got)
		}
	})
}

// Issue 30: retries, backoff and dead letters belong to one (event, sink): one sink failing
// never holds back another, a dead letter names its sink and is replayed alone, and the
// event's ledger row stays (its redelivery a duplicate) until every job is done.
func TestSinksFailIndependently(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		ctx := testCtx(t)
		mustClaim(t, e.s, sinkEvent("ns/a", "evt_1", t0, "ok", "slow", "broken"))
		jobs := byJob(t, mustLease(t, e.s, 10, t0, time.Minute))
		if err := e.s.Complete(ctx, jobs["evt_1→ok"], t0); err != nil {
			t.Fatal(err)
		}
		retryAt := t0.Add(time.Hour)
		if err := e.s.Retry(ctx, jobs["evt_1→slow"], retryAt, "sink answered 503"); err != nil {
			t.Fatal(err)
		}
		if err := e.s.Dead(ctx, jobs["evt_1→broken"], "sink answered 400"); err != nil {
			t.Fatal(err)
		}
		if got := mustDepth(t, e.s); got != 1 {
			t.Errorf("Depth = %d, want 1 (slow's retry)", got)
		}
		letters, err := e.s.DeadLetters(ctx, 10)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"evt_1→broken"}, sinkJobs(letters)); diff != "" {
			t.Fatalf("dead letters (-want +got):\n%s", diff)
		}
		if letters[0].LastError != "sink answered 400" || letters[0].ID != jobs["evt_1→broken"].ID {
			t.Errorf("dead letter = %+v, want broken's job with its own error", letters[0])
		}
		// Nothing is due before slow's retry; the event is not done, so nothing is swept.
		if got := mustLease(t, e.s, 10, t0.Add(time.Minute), time.Minute); len(got) != 0 {
			t.Errorf("Lease before the retry = %v, want none", sinkJobs(got))
		}
		if n, err := e.s.Sweep(ctx, t0.Add(1000*time.Hour)); err != nil || n != 0 {
			t.Errorf("Sweep while a sink's job is live = %d, %v; want 0", n, err)
		}

		if err := e.s.Replay(ctx, letters[0].ID, t0.Add(time.Minute)); err != nil {
			t.Fatalf("Replay of broken's dead letter: %v", err)
		}
		again := mustLease(t, e.s, 10, t0.Add(time.Minute), time.Minute)
		if diff := cmp.Diff([]string{"evt_1→broken"}, sinkJobs(again)); diff != "" {
			t.Fatalf("Lease after replaying broken (-want +got):\n%s", diff)
		}
		if err := e.s.Complete(ctx, again[0], t0.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"evt_1→slow"}, sinkJobs(mustLease(t, e.s, 10, retryAt, time.Minute))); diff != "" {
			t.Errorf("Lease at slow's retry (-want +got):\n%s", diff)
		}
		if dup := mustClaim(t, e.s, sinkEvent("ns/a", "evt_1", t0, "ok", "slow", "broken")); !dup[0] {
			t.Errorf("redelivery while jobs are live accepted, want a duplicate")
		}
	})
}

// Issue 30: the ledger row is done, and can be swept, only when every sink's job is: completed
// before the cutoff, or dead since before it.
func TestSweepWaitsForEverySink(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		ctx := testCtx(t)
		old := t0.Add(-100 * time.Hour)
		cutoff := t0.Add(-72 * time.Hour)
		mustClaim(t, e.s,
			sinkEvent("ns/a", "all-done", old, "a", "b"),
			sinkEvent("ns/a", "one-pending", old, "a", "b"),
			sinkEvent("ns/a", "dead-lately", old, "a", "b"),
			sinkEvent("ns/a", "dead-long-ago", old, "a", "b"))
		jobs := byJob(t, mustLease(t, e.s, 10, old, time.Minute))
		for _, k := range []string{"all-done→a", "all-done→b", "one-pending→a", "dead-lately→a", "dead-long-ago→a"} {
			if err := e.s.Complete(ctx, jobs[k], old); err != nil {
				t.Fatal(err)
			}
		}
		if err := e.s.Retry(ctx, jobs["one-pending→b"], t0.Add(time.Hour), "503"); err != nil {
			t.Fatal(err)
		}
		e.clock.SetTime(t0.Add(-90 * time.Hour))
		if err := e.s.Dead(ctx, jobs["dead-long-ago→b"], "400"); err != nil {
			t.Fatal(err)
		}
		e.clock.SetTime(t0.Add(-time.Hour))
		if err := e.s.Dead(ctx, jobs["dead-lately→b"], "400"); err != nil {
			t.Fatal(err)
		}
		// Redis's Sweep may need a second pass for an event whose head waits for its other
		// jobs; the answer is the same once it is done.
		total := 0
		for range 2 {
			n, err := e.s.Sweep(ctx, cutoff)
			if err != nil {
				t.Fatalf("Sweep: %v", err)
			}
			total += n
		}
		if total != 2 {
			t.Errorf("Sweep removed %d events, want 2 (all-done, dead-long-ago)", total)
		}
		for id, swept := range map[string]bool{"all-done": true, "dead-long-ago": true, "one-pending": false, "dead-lately": false} {
			dup := mustClaim(t, e.s, sinkEvent("ns/a", id, t0, "a", "b"))
			if got := !dup[0]; got != swept {
				t.Errorf("%s: swept = %t, want %t", id, got, swept)
			}
		}
	})
}

// An event's sinks are checked before anything is stored: at most MaxSinks, each named, no
// two alike.
func TestCheckEventBoundsTheSinks(t *testing.T) {
	many := make([]string, MaxSinks+1)
	for i := range many {
		many[i] = fmt.Sprintf("s%d", i)
	}
	for _, tc := range []struct {
		sinks []string
		want  string
	}{
		{many, "9 sinks"},
		{[]string{"a", "b", "a"}, "sink 2 has the name of an earlier one"},
		{[]string{"a", ""}, "sink 1 has no name"},
		{[]string{"a b"}, "sink 0 has no name"},
		{[]string{strings.Repeat("a", MaxSinkNameBytes+1)}, "sink 0 has no name"},
	} {
		err := CheckEvent(sinkEvent("ns/a", "evt_1", t0, tc.sinks...))
		if !errors.Is(err, ErrInvalidEvent) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("CheckEvent(sinks %q) = %v, want ErrInvalidEvent saying %q", tc.sinks, err, tc.want)
		}
	}
	if err := CheckEvent(sinkEvent("ns/a", "evt_1", t0, many[:MaxSinks]...)); err != nil {
		t.Errorf("CheckEvent(%d sinks) = %v, want nil", MaxSinks, err)
	}
}

// A database written when each event had one job opens with each job moved to the sink named
// default, under the same id: delivered events stay duplicates, the queued and retrying ones
// are still delivered, and the dead letter is replayed by the id it had.
func TestOpenMigratesOneJobPerEvent(t *testing.T) {
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			ctx := testCtx(t)
			dsn := frozenDatabase(t, kind, "testdata/schema-before-sinks.sql")

			for round := range 2 { // and once more: the migration is idempotent
				s, err := Open(ctx, dsn)
				if err != nil {
					t.Fatalf("round %d: Open on a database from before sinks: %v", round, err)
				}
				defer s.Close()
				if round == 1 {
					break
				}
				letters, err := s.DeadLetters(ctx, 10)
				if err != nil {
					t.Fatal(err)
				}
				want := []Job{{ID: 3, Sink: DefaultSink, State: StateDead, Attempt: 5, LastError: "sink answered 400", RunAt: t0,
					Event: Event{Subscription: "ns/a", EventID: "evt_dead", MaxAttempts: 5, Payload: []byte("{}"), ReceivedAt: t0}}}
				if diff := cmp.Diff(want, letters); diff != "" {
					t.Errorf("dead letters after the migration (-want +got):\n%s", diff)
				}
				if got := mustDepth(t, s); got != 2 {
					t.Errorf("Depth = %d, want 2 (queued, retrying)", got)
				}
				dup := mustClaim(t, s, event("ns/a", "evt_delivered", t0), event("ns/a", "evt_new", t0), sinkEvent("ns/a", "evt_new2", t0, "a", "b"))
				if diff := cmp.Diff([]bool{true, false, false}, dup); diff != "" {
					t.Errorf("claims on the migrated database (-want +got):\n%s", diff)
				}
				if err := s.Replay(ctx, 3, t0); err != nil {
					t.Errorf("Replay(3), the dead letter's id before the migration: %v", err)
				}
				got := sinkJobs(mustLease(t, s, 10, t0.Add(time.Hour), time.Minute))
				slices.Sort(got)
				wantJobs := []string{"evt_dead→default", "evt_new2→a", "evt_new2→b", "evt_new→default", "evt_queued→default", "evt_retry→default"}
				if diff := cmp.Diff(wantJobs, got); diff != "" {
					t.Errorf("Lease on the migrated database (-want +got):\n%s", diff)
				}
			}
		})
	}
}

// orderedEvent is sinkEvent to sinks "ordered" (ordering PerKey, key) and "plain".
func orderedEvent(id string, received time.Time, key string) Event {
	e := sinkEvent("ns/a", id, received, "ordered", "plain")
	e.OrderKeys = map[string]string{"ordered": key}
	return e
}

// keys are the sorted "<event id>→<sink>" of jobs.
func keys(jobs []Job) []string { return slices.Sorted(slices.Values(sinkJobs(jobs))) }

// Issue 30: with ordering PerKey, the jobs of one (subscription, sink, key) are due one at a
// time in arrival order, retries included: a failing event holds back only its own key, a
// dead-lettered one releases it, and a replayed one goes behind the key's live jobs. The
// sink's other keys, and the event's other sinks, go on.
func TestOrderPerKey(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		ctx := testCtx(t)
		at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
		mustClaim(t, e.s, orderedEvent("e1", at(1), "K"), orderedEvent("e2", at(2), "K"), orderedEvent("e3", at(3), "L"))
		mustClaim(t, e.s, orderedEvent("e4", at(4), "K"))
		if got := mustDepth(t, e.s); got != 8 {
			t.Errorf("Depth = %d, want 8: the blocked jobs count too", got)
		}
		jobs := byJob(t, mustLease(t, e.s, 20, at(10), time.Hour))
		want := []string{"e1→ordered", "e1→plain", "e2→plain", "e3→ordered", "e3→plain", "e4→plain"}
		if diff := cmp.Diff(want, slices.Sorted(maps.Keys(jobs))); diff != "" {
			t.Fatalf("first lease: only the oldest job of each key is due (-want +got):\n%s", diff)
		}
		for _, k := range []string{"e1→plain", "e2→plain", "e3→plain", "e4→plain", "e3→ordered"} {
			if err := e.s.Complete(ctx, jobs[k], at(10)); err != nil {
				t.Fatal(err)
			}
		}
		retryAt := at(100)
		if err := e.s.Retry(ctx, jobs["e1→ordered"], retryAt, "503"); err != nil {
			t.Fatal(err)
		}
		if got := mustLease(t, e.s, 20, at(50), time.Hour); len(got) != 0 {
			t.Errorf("lease while e1 waits for its retry = %v, want none: e2 and e4 are behind it", keys(got))
		}
		again := mustLease(t, e.s, 20, retryAt, time.Hour)
		if diff := cmp.Diff([]string{"e1→ordered"}, keys(again)); diff != "" {
			t.Fatalf("lease at e1's retry (-want +got):\n%s", diff)
		}
		if err := e.s.Dead(ctx, again[0], "gave up"); err != nil {
			t.Fatal(err)
		}
		next := mustLease(t, e.s, 20, retryAt, time.Hour)
		if diff := cmp.Diff([]string{"e2→ordered"}, keys(next)); diff != "" {
			t.Fatalf("lease after e1 was dead-lettered: it releases its key (-want +got):\n%s", diff)
		}
		if err := e.s.Complete(ctx, next[0], retryAt); err != nil {
			t.Fatal(err)
		}
		last := mustLease(t, e.s, 20, retryAt, time.Hour)
		if diff := cmp.Diff([]string{"e4→ordered"}, keys(last)); diff != "" {
			t.Fatalf("lease after e2 (-want +got):\n%s", diff)
		}
		// Replayed while e4 is in flight, e1 goes behind it.
		if err := e.s.Replay(ctx, again[0].ID, retryAt); err != nil {
			t.Fatal(err)
		}
		if got := mustLease(t, e.s, 20, at(200), time.Hour); len(got) != 0 {
			t.Errorf("lease while e4 is in flight = %v, want none: the replayed e1 waits behind it", keys(got))
		}
		if err := e.s.Complete(ctx, last[0], at(200)); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"e1→ordered"}, keys(mustLease(t, e.s, 20, at(200), time.Hour))); diff != "" {
			t.Errorf("lease after e4 (-want +got):\n%s", diff)
		}
	})
}

// Claims of one ordering key from two receivers at once never leave two of its jobs due, nor
// the key without a due job while it has any: draining it hands out one job at a time, each
// once.
func TestConcurrentClaimsOfOneKey(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		ctx := testCtx(t)
		other := e.open(t)
		const rounds = 40
		for i := range rounds {
			a := orderedEvent(fmt.Sprintf("a_%02d", i), t0, "K")
			a.Sinks, a.OrderKeys = []string{"ordered"}, map[string]string{"ordered": "K"}
			b := orderedEvent(fmt.Sprintf("b_%02d", i), t0, "K")
			b.Sinks, b.OrderKeys = []string{"ordered"}, map[string]string{"ordered": "K"}
			claimTogether(t, i, e.s, []Event{a}, other, []Event{b})
		}
		seen := map[string]bool{}
		for len(seen) < 2*rounds {
			jobs := mustLease(t, e.s, 10, t0.Add(time.Hour), time.Minute)
			if len(jobs) != 1 {
				t.Fatalf("after %d delivered, lease handed out %d jobs of the key (%v), want exactly 1", len(seen), len(jobs), keys(jobs))
			}
			if seen[jobs[0].Event.EventID] {
				t.Fatalf("%s handed out twice", jobs[0].Event.EventID)
			}
			seen[jobs[0].Event.EventID] = true
			store := []Store{e.s, other}[len(seen)%2] // reports from either receiver
			if err := store.Complete(ctx, jobs[0], t0.Add(time.Hour)); err != nil {
				t.Fatal(err)
			}
		}
		if got := mustDepth(t, e.s); got != 0 {
			t.Errorf("Depth after the drain = %d, want 0", got)
		}
	})
}
