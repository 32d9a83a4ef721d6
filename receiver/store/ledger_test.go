package store

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// ledgerOf is e's store as a Ledger.
func ledgerOf(t *testing.T, e *env) Ledger {
	t.Helper()
	l, ok := e.s.(Ledger)
	if !ok {
		t.Fatalf("%s: not a Ledger", e.kind)
	}
	return l
}

// walk lists every page of q and returns the events' "subscription/id", in order, and the
// number of pages.
func walk(t *testing.T, l Ledger, q EventQuery) ([]string, int) {
	t.Helper()
	var got []string
	pages := 0
	for {
		page, err := l.Events(testCtx(t), q)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, e := range page.Events {
			if e.Payload != nil {
				t.Errorf("%s: a page carries the payload", e.EventID)
			}
			got = append(got, e.Subscription+"/"+e.EventID)
		}
		if page.Next == "" {
			return got, pages
		}
		if pages > 1000 {
			t.Fatalf("the walk does not end: %d pages, the last cursor %q", pages, page.Next)
		}
		q.After = page.Next
	}
}

// ledgerEvents claims, a minute apart from t0: ns/a evt_0..evt_4 (sinks web and queue, types
// alternating invoice.paid, charge.failed) and ns/b evt_b0, evt_b1 (sink web), interleaved.
func ledgerEvents(t *testing.T, s Store) {
	t.Helper()
	var events []Event
	for i := range 5 {
		e := event("ns/a", fmt.Sprintf("evt_%d", i), t0.Add(time.Duration(2*i)*time.Minute))
		e.Sinks = []string{"web", "queue"}
		if i%2 == 1 {
			e.EventType = "charge.failed"
		}
		events = append(events, e)
	}
	for i := range 2 {
		e := event("ns/b", fmt.Sprintf("evt_b%d", i), t0.Add(time.Duration(2*i+1)*time.Minute))
		e.Sinks = []string{"web"}
		events = append(events, e)
	}
	mustClaim(t, s, events...)
}

// Issue 31: the ledger lists by time, page by page from a cursor, narrowed by type, sink and
// subscription; the same walk whatever the page size.
func TestLedgerEventsByTime(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		ledgerEvents(t, e.s)
		l := ledgerOf(t, e)
		all := []string{"ns/a/evt_0", "ns/b/evt_b0", "ns/a/evt_1", "ns/b/evt_b1", "ns/a/evt_2", "ns/a/evt_3", "ns/a/evt_4"}
		cases := []struct {
			name, reason string
			q            EventQuery
			want         []string
			pages        int
		}{
			{"all, pages of 2", "a page ends where the next starts: nothing twice, nothing left out",
				EventQuery{Limit: 2}, all, 4},
			{"one page", "a page that holds everything has no next", EventQuery{Limit: MaxEventPage}, all, 1},
			{"since, until", "since is inclusive, until exclusive",
				EventQuery{Since: t0.Add(time.Minute), Until: t0.Add(4 * time.Minute), Limit: 1}, []string{"ns/b/evt_b0", "ns/a/evt_1", "ns/b/evt_b1"}, 3},
			{"type", "only invoice.paid", EventQuery{Type: "charge.failed", Limit: 10}, []string{"ns/a/evt_1", "ns/a/evt_3"}, 1},
			{"sink", "only the events with a job for queue", EventQuery{Sink: "queue", Limit: 3}, []string{"ns/a/evt_0", "ns/a/evt_1", "ns/a/evt_2", "ns/a/evt_3", "ns/a/evt_4"}, 2},
			{"subscriptions", "only ns/b's", EventQuery{Subscriptions: []string{"ns/b", "ns/c"}, Limit: 10}, []string{"ns/b/evt_b0", "ns/b/evt_b1"}, 1},
			{"unknown sink", "no event has a job for it", EventQuery{Sink: "nope", Limit: 10}, nil, 1},
		}
		for _, c := range cases {
			got, pages := walk(t, l, c.q)
			if diff := cmp.Diff(c.want, got); diff != "" || pages != c.pages {
				t.Errorf("%s (%s): %d pages (want %d), -want +got:\n%s", c.name, c.reason, pages, c.pages, diff)
			}
		}
		if _, err := l.Events(testCtx(t), EventQuery{Limit: MaxEventPage + 1}); err == nil {
			t.Errorf("a page of %d: no error", MaxEventPage+1)
		}
		if _, err := l.Events(testCtx(t), EventQuery{Limit: 1, After: "not-a-cursor"}); !errors.Is(err, ErrBadCursor) {
			t.Errorf("a foreign cursor: %v, want ErrBadCursor", err)
		}
	})
}

// Issue 31: an event shows where it went, per sink; a replay puts its done jobs back on the
// delivery path (marked, with the key as asked), leaves those on their way alone, and a sink it
// never had is reported, not invented.
func TestLedgerShowAndRequeue(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		ctx := testCtx(t)
		ledgerEvents(t, e.s)
		l := ledgerOf(t, e)
		now := t0.Add(time.Hour)
		// evt_0: web delivered, queue dead; the other jobs stay leased (running).
		jobs := mustLease(t, e.s, 100, now, time.Hour)
		for _, j := range jobs {
			switch {
			case j.Event.EventID == "evt_0" && j.Sink == "web":
				if err := e.s.Complete(ctx, j, now); err != nil {
					t.Fatal(err)
				}
			case j.Event.EventID == "evt_0" && j.Sink == "queue":
				if err := e.s.Dead(ctx, j, "refused"); err != nil {
					t.Fatal(err)
				}
			}
		}
		ev, ok, err := l.EventOf(ctx, "ns/a", "evt_0")
		if err != nil || !ok {
			t.Fatalf("EventOf: %v, %v", ok, err)
		}
		sinks := func(ev LedgerEvent) []SinkRecord {
			out := ev.Sinks
			for i := range out {
				out[i].JobID = 0
			}
			return out
		}
		want := []SinkRecord{{Sink: "web", State: StateCompleted, Attempts: 1, DeliveredAt: now}, {Sink: "queue", State: StateDead, Attempts: 1, LastError: "refused"}}
		if diff := cmp.Diff(want, sinks(ev)); diff != "" || string(ev.Payload) != `{"id":"evt_0"}` {
			t.Errorf("show evt_0: payload %q, sinks -want +got:\n%s", ev.Payload, diff)
		}
		if _, ok, err := l.EventOf(ctx, "ns/a", "evt_none"); ok || err != nil {
			t.Errorf("an unknown event: %v, %v", ok, err)
		}

		refs := []EventRef{{"ns/a", "evt_0"}, {"ns/a", "evt_1"}, {"ns/b", "evt_b0"}}
		res, err := l.Requeue(ctx, refs, "queue", true, now)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(RequeueResult{Requeued: 1, Skipped: 1, NoSink: 1}, res); diff != "" {
			t.Errorf("requeue to queue: -want +got:\n%s", diff)
		}
		res, err = l.Requeue(ctx, refs[:1], "", false, now)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(RequeueResult{Requeued: 1, Skipped: 1}, res); diff != "" {
			t.Errorf("requeue to every sink: -want +got:\n%s", diff)
		}
		again := mustLease(t, e.s, 100, now.Add(time.Minute), time.Hour)
		var got []string
		for _, j := range again {
			got = append(got, fmt.Sprintf("%s %s replays=%d fresh=%v attempt=%d", j.Event.EventID, j.Sink, j.Event.Replays, j.Event.FreshKey, j.Attempt))
		}
		// Lease orders by run_at: both at now.
		wantJobs := []string{"evt_0 web replays=1 fresh=false attempt=1", "evt_0 queue replays=1 fresh=true attempt=1"}
		if diff := cmp.Diff(wantJobs, got); diff != "" {
			t.Errorf("the replayed jobs as leased: -want +got:\n%s", diff)
		}
	})
}

// Issue 31: spec.delivery.retention: Forget drops the payloads of events delivered before the
// cutoff, of one subscription, a bounded batch at a time; the row stays for dedupe, a dead or
// live job keeps its payload, and a forgotten event cannot be replayed.
func TestLedgerForget(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		ctx := testCtx(t)
		ledgerEvents(t, e.s)
		l := ledgerOf(t, e)
		now := t0.Add(time.Hour)
		for _, j := range mustLease(t, e.s, 100, now, time.Hour) {
			switch {
			case j.Event.EventID == "evt_3":
				// running: kept
			case j.Event.EventID == "evt_4" && j.Sink == "queue":
				if err := e.s.Dead(ctx, j, "refused"); err != nil {
					t.Fatal(err)
				}
			default:
				if err := e.s.Complete(ctx, j, now); err != nil {
					t.Fatal(err)
				}
			}
		}
		if n, err := l.Forget(ctx, "ns/a", now, 10); err != nil || n != 0 {
			t.Fatalf("forget before the cutoff passed the deliveries: %d, %v", n, err)
		}
		cutoff := now.Add(time.Second)
		n, err := l.Forget(ctx, "ns/a", cutoff, 2)
		if err != nil || n != 2 {
			t.Fatalf("forget, a batch of 2: %d, %v", n, err)
		}
		n, err = l.Forget(ctx, "ns/a", cutoff, 10)
		if err != nil || n != 1 {
			t.Fatalf("forget, the rest: %d, %v", n, err)
		}
		var kept []string
		for _, id := range []string{"evt_0", "evt_1", "evt_2", "evt_3", "evt_4"} {
			ev, ok, err := l.EventOf(ctx, "ns/a", id)
			if err != nil || !ok {
				t.Fatalf("%s: %v, %v", id, ok, err)
			}
			if ev.Forgotten.IsZero() && len(ev.Payload) > 0 {
				kept = append(kept, id)
			}
		}
		if diff := cmp.Diff([]string{"evt_3", "evt_4"}, kept); diff != "" {
			t.Errorf("payloads kept: -want +got:\n%s", diff)
		}
		if b, ok, _ := l.EventOf(ctx, "ns/b", "evt_b0"); !ok || len(b.Payload) == 0 {
			t.Errorf("ns/b's payload forgotten with ns/a's")
		}
		if dup := mustClaim(t, e.s, event("ns/a", "evt_0", now)); !dup[0] {
			t.Errorf("a forgotten event's redelivery is not a duplicate")
		}
		res, err := l.Requeue(ctx, []EventRef{{"ns/a", "evt_0"}, {"ns/a", "evt_gone"}}, "", false, now)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(RequeueResult{Forgotten: 2}, res); diff != "" {
			t.Errorf("requeue of forgotten events: -want +got:\n%s", diff)
		}
	})
}

// Issue 31: a dead letter's replay (deadletters replay) is a replay by hand too: its job is
// leased with Replays counted and the original key (FreshKey false).
func TestDeadLetterReplayIsCounted(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		ctx := testCtx(t)
		mustClaim(t, e.s, event("ns/a", "evt_dead", t0))
		j := leaseOne(t, e.s, t0, time.Minute, "evt_dead")
		if j.Event.Replays != 0 {
			t.Fatalf("a first attempt with Replays %d", j.Event.Replays)
		}
		if err := e.s.Dead(ctx, j, "refused"); err != nil {
			t.Fatal(err)
		}
		if err := e.s.Replay(ctx, j.ID, t0.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		j = leaseOne(t, e.s, t0.Add(time.Minute), time.Minute, "evt_dead")
		if j.Event.Replays != 1 || j.Event.FreshKey {
			t.Errorf("the replayed dead letter leased with Replays %d, FreshKey %v; want 1, false", j.Event.Replays, j.Event.FreshKey)
		}
	})
}

// Issue 31: events received in the same microsecond are paged by their row: a page boundary
// between two of them loses neither.
func TestLedgerPagesThroughTies(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		mustClaim(t, e.s, numberedEvents(5)...) // all received at t0
		got, pages := walk(t, ledgerOf(t, e), EventQuery{Since: t0, Limit: 2})
		if len(got) != 5 || pages != 3 {
			t.Errorf("%d pages of %v, want 3 pages of the 5 events", pages, got)
		}
	})
}
