package deliver

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/hookwarden/hookwarden/receiver/store"
)

// clockSink is a Publisher that takes took of a fake clock per event and records when each
// event's delivery began. It moves the clock only once the previous event's job is no longer
// running (its outcome recorded), as a sink taking took per event would with outcomes that are
// recorded at once: a job's lease then cannot run out while its own record is being written.
type clockSink struct {
	clk   *clocktesting.FakeClock
	took  time.Duration
	st    *memStore
	mu    sync.Mutex
	last  string               // the event published before
	began map[string]time.Time // event id -> the clock when its publish began
	count map[string]int       // event id -> publishes
}

func newClockSink(h *harness, took time.Duration) *clockSink {
	return &clockSink{clk: h.clk, took: took, st: h.st, began: map[string]time.Time{}, count: map[string]int{}}
}

func (c *clockSink) Publish(ctx context.Context, ev store.Event) (Published, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.last != "" && c.st.running(c.last) {
		if ctx.Err() != nil {
			return Published{}, ctx.Err()
		}
		time.Sleep(time.Millisecond) // the pool records outcomes on its own goroutines
	}
	c.began[ev.EventID] = c.clk.Now()
	c.count[ev.EventID]++
	c.last = ev.EventID
	c.clk.Step(c.took)
	return Published{}, nil
}

func (c *clockSink) Close() {}

// claimMany enqueues n events of the test subscription and returns their job ids.
func (h *harness) claimMany(t *testing.T, n int) []int64 {
	t.Helper()
	var ids []int64
	for i := range n {
		ev := testEvent()
		ev.EventID = fmt.Sprintf("evt_%03d", i)
		ids = append(ids, h.claim(t, ev))
	}
	return ids
}

// Leasing ahead of the workers must not make a leased job wait past half its lease: the pool
// leases only what starts within it, so it never leases a job only to give it back. A sink
// taking 1 s per event, one worker, a 10 s lease and a 2 s sender timeout (a job may wait up to
// 8 s before the pool gives it back unsent, so waiting more than 5 s is seen here, not hidden by
// the give-back): no job waits more than 5 s, none is given back, each is published once.
func TestPoolLeasesOnlyWhatStartsWithinHalfTheLease(t *testing.T) {
	const lease = 10 * time.Second
	var sink *clockSink
	h := newHarness(t, harnessOptions{
		resolve: func(_, name string) (Sink, bool) { return Sink{Name: name, Publisher: sink}, true },
		opts:    Options{Workers: 1, Lease: lease},
		timeout: 2 * time.Second,
	})
	sink = newClockSink(h, time.Second)
	ids := h.claimMany(t, 30)
	leasedAt := map[string]time.Time{} // event id -> its lease's start (LeaseUntil - Lease)
	h.start(t)
	for _, id := range ids {
		j := h.waitState(t, id, store.StateCompleted)
		leasedAt[j.Event.EventID] = j.LeaseUntil.Add(-lease)
	}
	h.stop(t)
	if n := h.st.releases(); n != 0 {
		t.Errorf("%d leased jobs were given back, want 0; jobs per Lease: %v", n, h.st.leases())
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	for id, began := range sink.began {
		if wait := began.Sub(leasedAt[id]); wait > lease/2 {
			t.Errorf("%s waited %s for a worker after its lease began, more than half the lease", id, wait)
		}
		if sink.count[id] != 1 {
			t.Errorf("%s published %d times, want 1", id, sink.count[id])
		}
	}
	if len(sink.began) != len(ids) {
		t.Errorf("%d events published, want %d", len(sink.began), len(ids))
	}
}

// A fast sink's backlog is leased in batches of up to 8× the workers, not 2× (each Lease is a
// write transaction: an fsync on SQLite). 60 jobs, two workers, a sink the fake clock sees
// answer at once: the first Lease takes 2× the workers (no delivery timed yet), the next ones
// at least 8 (ready half of 16 ahead), so at most 1 + 56/8 Leases find jobs.
func TestPoolLeasesAFastSinksBacklogInLargeBatches(t *testing.T) {
	h := newHarness(t, harnessOptions{opts: Options{Workers: 2}}, reply{status: 200})
	ids := h.claimMany(t, 60)
	h.start(t)
	for _, id := range ids {
		h.waitState(t, id, store.StateCompleted)
	}
	h.stop(t)
	leases := h.st.leases()
	if len(leases) > 8 || leases[0] != 4 {
		t.Errorf("jobs per Lease = %v, want 4 then batches of at least 8 (at most 8 Leases)", leases)
	}
}

// A worker takes its next job while the outcome of its last one is still being recorded, so
// the records of several jobs can share one commit: with one worker and every record held,
// all three events reach the sink; released, all three are completed.
func TestPoolDeliversWhileOutcomesAreRecorded(t *testing.T) {
	h := newHarness(t, harnessOptions{opts: Options{Workers: 1}}, reply{status: 200})
	gate := make(chan struct{})
	h.st.recordGate = gate
	ids := h.claimMany(t, 3)
	h.start(t)
	open := sync.OnceFunc(func() { close(gate) })
	t.Cleanup(open) // before the harness stops the pool, should the test fail
	eventually(t, "all three events reached the sink while no outcome was recorded", func() bool { return len(h.sink.received()) == 3 })
	for _, id := range ids {
		if got := h.st.job(id).State; got != store.StateRunning {
			t.Fatalf("job %d is %s before its record was let through, want running", id, got)
		}
	}
	open()
	for _, id := range ids {
		h.waitState(t, id, store.StateCompleted)
	}
	h.stop(t)
	if diff := cmp.Diff(3, len(h.sink.received())); diff != "" {
		t.Errorf("sink requests (-want +got):\n%s", diff)
	}
}

// The pool must not lease again a job whose outcome it is still recording: once that job's
// lease has ended, a Lease would take it back and deliver it a second time. One worker, every
// record held, the clock moved past the delivered job's lease: the pool either delivers the job
// again (the defect) or says it holds its leases back; released, the job is completed once.
func TestPoolDoesNotLeaseAgainAJobItIsRecording(t *testing.T) {
	const lease = 10 * time.Second
	h := newHarness(t, harnessOptions{opts: Options{Workers: 1, Lease: lease}}, reply{status: 200})
	gate := make(chan struct{})
	h.st.recordGate = gate
	id := h.claim(t, testEvent())
	h.start(t)
	open := sync.OnceFunc(func() { close(gate) })
	t.Cleanup(open)
	eventually(t, "the event reached the sink", func() bool { return len(h.sink.received()) == 1 })
	h.clk.Step(lease + time.Second)
	h.wakePool()
	eventually(t, "the pool delivered the job again or paused its leases", func() bool {
		return len(h.sink.received()) > 1 || h.logs.contains("Leasing paused")
	})
	open()
	got := h.waitState(t, id, store.StateCompleted)
	h.stop(t)
	if n := len(h.sink.received()); n != 1 {
		t.Errorf("the sink received the event %d times, want 1", n)
	}
	if got.Attempt != 1 {
		t.Errorf("job completed at attempt %d, want 1", got.Attempt)
	}
}

// A job may wait for a worker only until its lease could end mid-delivery (Lease - the sender's
// timeout), which is less than half the lease when the timeout is more than half of it (a legal
// configuration): the pool leases no more ahead than starts within that, so it gives none back.
// Lease 6 s, timeout 5 s, a sink taking 1 s per event, one worker: one job may wait.
func TestPoolLeasesAheadOnlyWhatStartsBeforeTheSenderTimeoutWouldOutlastTheLease(t *testing.T) {
	var sink *clockSink
	h := newHarness(t, harnessOptions{
		resolve: func(_, name string) (Sink, bool) { return Sink{Name: name, Publisher: sink}, true },
		opts:    Options{Workers: 1, Lease: 6 * time.Second},
	})
	sink = newClockSink(h, time.Second)
	ids := h.claimMany(t, 20)
	h.start(t)
	for _, id := range ids {
		h.waitState(t, id, store.StateCompleted)
	}
	h.stop(t)
	if n := h.st.releases(); n != 0 {
		t.Errorf("%d leased jobs were given back unsent (they waited past Lease - Timeout), want 0; jobs per Lease: %v", n, h.st.leases())
	}
}

// countingPublisher takes every event at once and counts them.
type countingPublisher struct{ n atomic.Int64 }

func (c *countingPublisher) Publish(context.Context, store.Event) (Published, error) {
	c.n.Add(1)
	return Published{}, nil
}
func (*countingPublisher) Close() {}

// Two replicas on one store. Replica 1 has timed a fast sink, so it leases up to 8x its
// workers ahead; then the sink of subscription A hangs, holding both its workers, with 16 of
// subscription B's jobs leased behind A's. Those jobs must not wait for A's deliveries to time
// out while replica 2 is idle: replica 1 gives back what its held-up workers cannot start in
// time, and replica 2 delivers B's jobs while A's deliveries still hang.
func TestPoolGivesBackWhatAHungSinkHoldsUpForAnotherReplica(t *testing.T) {
	st := newMemStore()
	var hung atomic.Int64 // A's deliveries at the sink
	sinks := map[string]*countingPublisher{"r1": {}, "r2": {}}
	start := func(replica string) chan struct{} {
		resolve := func(sub, name string) (Sink, bool) {
			if sub == "ns/a" {
				return Sink{Name: name, Publisher: countHung{&hung}}, true
			}
			return Sink{Name: name, Publisher: sinks[replica]}, true
		}
		wake := make(chan struct{}, 1)
		// A's deliveries hang for 9 s: B's jobs, which may wait 1 s (Lease - Timeout), have
		// most of that to reach replica 2 on a loaded machine. Grace cuts them at the end.
		pool := New(st, NewSender(SenderOptions{Timeout: 9 * time.Second}), resolve,
			Options{Workers: 2, Lease: 10 * time.Second, PollInterval: 20 * time.Millisecond, Wake: wake, Replica: replica, Grace: 50 * time.Millisecond})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- pool.Run(ctx) }()
		t.Cleanup(func() { cancel(); <-done })
		return wake
	}
	at := time.Now().Add(-time.Hour)
	ev := func(sub string, i int) store.Event {
		at = at.Add(time.Millisecond)
		return store.Event{Subscription: sub, SubscriptionUID: "uid", EventID: fmt.Sprintf("e%03d", i), EventType: "t",
			ContentType: "application/json", Payload: []byte(`{}`), ReceivedAt: at, MaxAttempts: 5}
	}
	var warm []store.Event
	for i := range 20 {
		warm = append(warm, ev("ns/b", i))
	}
	if _, err := st.ClaimBatch(context.Background(), warm); err != nil {
		t.Fatal(err)
	}
	start("r1")
	eventually(t, "replica 1 delivered the warm-up", func() bool { return sinks["r1"].n.Load() == 20 })

	batch := []store.Event{ev("ns/a", 0), ev("ns/a", 1)}
	for i := range 16 {
		batch = append(batch, ev("ns/b", 100+i))
	}
	if _, err := st.ClaimBatch(context.Background(), batch); err != nil {
		t.Fatal(err)
	}
	eventually(t, "replica 1 is delivering A's two jobs (both its workers hang)", func() bool { return hung.Load() == 2 })
	wake2 := start("r2")
	wake2 <- struct{}{}
	// Replica 1 may keep as many as its two hung workers can start in time.
	pollFor(t, 30*time.Second, 10*time.Millisecond, "replica 2 delivered at least 14 of B's 16 jobs", func() bool { return sinks["r2"].n.Load() >= 14 })
	if n := hung.Load(); n != 2 {
		t.Errorf("%d of A's deliveries hang once replica 2 has delivered B's jobs, want 2 (B's jobs waited for A's to time out)", n)
	}
}

// countHung holds every publish until its context ends (a sink that stopped answering) and
// counts the publishes it holds.
type countHung struct{ n *atomic.Int64 }

func (c countHung) Publish(ctx context.Context, _ store.Event) (Published, error) {
	c.n.Add(1)
	defer c.n.Add(-1)
	<-ctx.Done()
	return Published{}, ctx.Err()
}
func (countHung) Close() {}

// cutShortStore commits every Lease, then, like a PostgreSQL or Redis Lease whose context ends
// before its answer arrives, returns an error instead of the jobs if that context has ended by
// the time the test lets the first Lease answer.
type cutShortStore struct {
	*memStore
	entered, answer chan struct{}
	once            sync.Once
}

func (s *cutShortStore) Lease(ctx context.Context, n int, now time.Time, lease time.Duration) ([]store.Job, error) {
	jobs, err := s.memStore.Lease(ctx, n, now, lease)
	s.once.Do(func() {
		close(s.entered)
		<-s.answer
	})
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return jobs, err
}

// A Lease under way when the pool shuts down is not cut short: its jobs come back to the pool,
// which gives them back, instead of staying leased to nobody until their leases end.
func TestPoolShutdownDuringALeaseStrandsNoJob(t *testing.T) {
	h := newHarness(t, harnessOptions{}, reply{status: 200})
	ids := h.claimMany(t, 4)
	st := &cutShortStore{memStore: h.st, entered: make(chan struct{}), answer: make(chan struct{})}
	h.pool.st = st
	h.start(t)
	<-st.entered
	h.cancel()
	h.cancel = nil
	close(st.answer)
	if err := <-h.done; err != nil {
		t.Fatalf("Run() = %v", err)
	}
	for _, id := range ids {
		if j := h.st.job(id); j.State == store.StateRunning {
			t.Errorf("job %d is still leased after shutdown, until %s; want it given back", id, j.LeaseUntil)
		}
	}
}

// The pool's grace leaves a whole ReportTimeout of the shutdown to the outcomes' records, or a
// quarter of a shorter shutdown to the deliveries.
func TestGraceWithin(t *testing.T) {
	for _, tc := range []struct {
		shutdown, want time.Duration
		reason         string
	}{
		{15 * time.Second, 5 * time.Second, "the default: ReportTimeout left for the records"},
		{60 * time.Second, 50 * time.Second, "a long shutdown"},
		{12 * time.Second, 3 * time.Second, "a quarter beats the 2 s left after ReportTimeout"},
		{4 * time.Second, time.Second, "shorter than ReportTimeout: a quarter"},
	} {
		if got := GraceWithin(tc.shutdown); got != tc.want {
			t.Errorf("GraceWithin(%s) = %s, want %s (%s)", tc.shutdown, got, tc.want, tc.reason)
		}
	}
}
