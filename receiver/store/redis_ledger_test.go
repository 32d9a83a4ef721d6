package store

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// Issue 31: a filter that passes few events reads a bounded part of the index per page (Redis);
// the walk, page after page, lists the same events as an unbounded one, on every store.
func TestLedgerSparseFilterIsBounded(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		ledgerEvents(t, e.s)
		r, isRedis := e.s.(*Redis)
		if isRedis {
			r.ledgerScan = 2
		}
		got, pages := walk(t, ledgerOf(t, e), EventQuery{Type: "charge.failed", Limit: 10})
		if diff := cmp.Diff([]string{"ns/a/evt_1", "ns/a/evt_3"}, got); diff != "" {
			t.Errorf("charge.failed, -want +got:\n%s", diff)
		}
		if isRedis && pages < 3 {
			t.Errorf("%d pages with a bound of 2 entries per subscription and page: the bound is not applied", pages)
		}
		// ns/b's walk reads past where ns/a's stopped: the page ends where ns/a's walk did.
		got, _ = walk(t, ledgerOf(t, e), EventQuery{Type: "invoice.paid", Limit: 10})
		if diff := cmp.Diff([]string{"ns/a/evt_0", "ns/b/evt_b0", "ns/b/evt_b1", "ns/a/evt_2", "ns/a/evt_4"}, got); diff != "" {
			t.Errorf("invoice.paid, -want +got:\n%s", diff)
		}
		got, _ = walk(t, ledgerOf(t, e), EventQuery{Sink: "queue", Since: t0.Add(3 * time.Minute), Limit: 1})
		if diff := cmp.Diff([]string{"ns/a/evt_2", "ns/a/evt_3", "ns/a/evt_4"}, got); diff != "" {
			t.Errorf("sink queue since t0+3m, -want +got:\n%s", diff)
		}
	})
}

// Issue 31: events of several subscriptions received in the same microsecond are paged in one
// order, one at a time, each once.
func TestLedgerPagesThroughTiesOfSubscriptions(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		var events []Event
		for i := range 3 {
			for _, sub := range []string{"ns/a", "ns/b", "ns/c"} {
				events = append(events, event(sub, fmt.Sprintf("evt_%d", i), t0))
			}
		}
		mustClaim(t, e.s, events...)
		got, pages := walk(t, ledgerOf(t, e), EventQuery{Since: t0, Limit: 1})
		whole, _ := walk(t, ledgerOf(t, e), EventQuery{Since: t0, Limit: 100})
		if diff := cmp.Diff(whole, got); diff != "" || pages != 9 {
			t.Errorf("%d pages of 1 (want 9), -whole +paged:\n%s", pages, diff)
		}
		slices.Sort(got)
		if len(slices.Compact(got)) != 9 {
			t.Errorf("paged through %v, want the 9 events once each", got)
		}
	})
}

// Issue 31: a replay of events with an ordering key keeps their order: the older is due first,
// the next once it is done.
func TestLedgerRequeueKeepsTheOrder(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		ctx := testCtx(t)
		var events []Event
		for i := range 2 {
			ev := event("ns/a", fmt.Sprintf("evt_%d", i), t0.Add(time.Duration(i)*time.Second))
			ev.Sinks, ev.OrderKeys = []string{"web"}, map[string]string{"web": "cus_1"}
			events = append(events, ev)
		}
		mustClaim(t, e.s, events...)
		now := t0.Add(time.Minute)
		for range 2 {
			for _, j := range mustLease(t, e.s, 10, now, time.Minute) {
				if err := e.s.Complete(ctx, j, now); err != nil {
					t.Fatal(err)
				}
			}
		}
		res, err := ledgerOf(t, e).Requeue(ctx, []EventRef{{"ns/a", "evt_0"}, {"ns/a", "evt_1"}}, "", true, now)
		if err != nil || res.Requeued != 2 {
			t.Fatalf("requeue: %+v, %v", res, err)
		}
		later := now.Add(time.Minute)
		j := leaseOne(t, e.s, later, time.Minute, "evt_0")
		if err := e.s.Complete(ctx, j, later); err != nil {
			t.Fatal(err)
		}
		leaseOne(t, e.s, later, time.Minute, "evt_1")
	})
}

// Issue 31: on Redis, a replayed event's keys lose the TTL of a delivered event until it is
// delivered again, and Sweep drops the index entries of the events it removes.
func TestRedisLedgerKeys(t *testing.T) {
	forStores(t, []string{"redis", "redis-cluster"}, func(t *testing.T, e *env) {
		ctx := testCtx(t)
		r := e.s.(*Redis)
		ev, live := event("ns/a", "evt_0", t0), event("ns/a", "evt_live", t0.Add(time.Hour))
		mustClaim(t, e.s, ev, live)
		j := leaseOne(t, e.s, t0, time.Minute, "evt_0")
		if err := e.s.Complete(ctx, j, t0); err != nil {
			t.Fatal(err)
		}
		ttl := func() time.Duration {
			d, err := r.c.PTTL(ctx, r.subKey("ns/a", "e:evt_0")).Result()
			if err != nil {
				t.Fatal(err)
			}
			return d
		}
		if ttl() <= 0 {
			t.Fatalf("a delivered event's dedupe key has no TTL (%s)", ttl())
		}
		if _, err := r.Requeue(ctx, []EventRef{{"ns/a", "evt_0"}}, "", false, t0); err != nil {
			t.Fatal(err)
		}
		if d := ttl(); d != -1 {
			t.Errorf("a replayed event's dedupe key with a TTL (%s): it could expire on its way", d)
		}
		j = leaseOne(t, e.s, t0, time.Minute, "evt_0")
		if d, _ := r.c.PTTL(ctx, r.subKey("ns/a", fmt.Sprintf("j:%d", j.ID&seqMask))).Result(); d != -1 {
			t.Errorf("a replayed event's job with a TTL (%s)", d)
		}
		if err := e.s.Complete(ctx, j, t0); err != nil {
			t.Fatal(err)
		}
		if ttl() <= 0 {
			t.Errorf("delivered again, the dedupe key has no TTL (%s)", ttl())
		}

		if _, err := e.s.Sweep(ctx, t0.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		for _, set := range []string{"ev", "kept"} {
			m, err := r.c.ZRange(ctx, r.subKey("ns/a", set), 0, -1).Result()
			if err != nil {
				t.Fatal(err)
			}
			if len(m) != 1 {
				t.Errorf("%s after Sweep: %v, want only evt_live's entry", set, m)
			}
		}
		got, _ := walk(t, r, EventQuery{Limit: 10})
		if diff := cmp.Diff([]string{"ns/a/evt_live"}, got); diff != "" {
			t.Errorf("the ledger after Sweep, -want +got:\n%s", diff)
		}
	})
}
