package deliver

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden/receiver/store"
	"github.com/hookwarden/hookwarden/receiver/store/storetest"
)

// replicaSink is a Publisher shared by two replicas' pools: each publish takes a moment (a
// broker's round trip) and records which replica made it.
type replicaSink struct {
	mu  sync.Mutex
	by  map[string][]string // event id -> the replicas that published it
	per map[string]int      // replica -> events published
}

type replicaPublisher struct {
	sink    *replicaSink
	replica string
}

func (p replicaPublisher) Publish(ctx context.Context, ev store.Event) (Published, error) {
	select {
	case <-time.After(2 * time.Millisecond):
	case <-ctx.Done():
		return Published{}, ctx.Err()
	}
	p.sink.mu.Lock()
	defer p.sink.mu.Unlock()
	p.sink.by[ev.EventID] = append(p.sink.by[ev.EventID], p.replica)
	p.sink.per[p.replica]++
	return Published{}, nil
}

func (replicaPublisher) Close() {}

// Two receiver replicas on one store share a backlog: every event is published once, and
// neither replica starves while the other leases ahead (a Lease takes at most 8× the workers
// and 2× until a delivery was timed, never the whole backlog).
func TestReplicasShareTheBacklog(t *testing.T) {
	for name, open := range map[string]func(t testing.TB) string{
		"PostgreSQL": storetest.PostgresDSN,
		"Redis":      func(t testing.TB) string { return storetest.StartRedis(t, storetest.DurableRedis()...).URL() },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dsn := open(t)
			const events = 800
			sink := &replicaSink{by: map[string][]string{}, per: map[string]int{}}
			var stores []store.Store
			var wakes []chan struct{}
			for _, replica := range []string{"a", "b"} {
				st, err := store.Open(context.Background(), dsn)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = st.Close() })
				stores = append(stores, st)
				wake := make(chan struct{}, 1)
				wakes = append(wakes, wake)
				pub := replicaPublisher{sink: sink, replica: replica}
				pool := New(st, NewSender(SenderOptions{Timeout: 5 * time.Second}),
					func(_, name string) (Sink, bool) { return Sink{Name: name, Publisher: pub}, true },
					Options{Workers: 4, PollInterval: time.Second, Wake: wake, Replica: replica})
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error, 1)
				go func() { done <- pool.Run(ctx) }()
				t.Cleanup(func() {
					cancel()
					if err := <-done; err != nil {
						t.Errorf("replica %s: Run: %v", replica, err)
					}
				})
			}
			var batch []store.Event
			for i := range events {
				batch = append(batch, store.Event{Subscription: "shop/orders", SubscriptionUID: "uid", EventID: fmt.Sprintf("evt_%04d", i),
					EventType: "invoice.paid", ContentType: "application/json", Payload: []byte(`{}`), ReceivedAt: time.Now(), MaxAttempts: 3})
			}
			if _, err := stores[0].ClaimBatch(context.Background(), batch); err != nil {
				t.Fatal(err)
			}
			for _, w := range wakes {
				w <- struct{}{}
			}
			pollFor(t, 2*time.Minute, 10*time.Millisecond, "the backlog is delivered", func() bool {
				n, err := stores[0].Depth(context.Background())
				return err == nil && n == 0
			})
			sink.mu.Lock()
			defer sink.mu.Unlock()
			for i := range events {
				id := fmt.Sprintf("evt_%04d", i)
				if got := sink.by[id]; len(got) != 1 {
					t.Errorf("%s published by %v, want once", id, got)
				}
			}
			t.Logf("events published per replica: %v", sink.per)
			for _, replica := range []string{"a", "b"} {
				if sink.per[replica] < events/10 {
					t.Errorf("replica %s published %d of %d events, want at least a tenth: %v", replica, sink.per[replica], events, sink.per)
				}
			}
		})
	}
}
