package deliver

import (
	"context"
	"fmt"
	"sync"
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
