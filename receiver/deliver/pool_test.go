package deliver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/hookwarden/hookwarden/receiver/store"
)

// eventually polls cond until it holds or a deadline passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	pollFor(t, 10*time.Second, time.Millisecond, what, cond)
}

// pollFor checks cond every interval until it holds, failing the test after patience.
func pollFor(t *testing.T, patience, interval time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(interval)
	}
}

// reply is one scripted sink response; a non-nil hold delays it until closed.
type reply struct {
	status int
	header map[string]string
	hold   chan struct{}
}

// fakeSink answers from a script (the last reply repeats) and records what it received.
type fakeSink struct {
	srv    *httptest.Server
	mu     sync.Mutex
	script []reply
	keys   []string // Idempotency-Key of each request, in order
}

func newFakeSink(t *testing.T, script ...reply) *fakeSink {
	s := &fakeSink{script: script}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Only a fully read body lets the server notice the client hanging up.
		_, _ = io.ReadAll(r.Body)
		s.mu.Lock()
		rep := s.script[min(len(s.keys), len(s.script)-1)]
		s.keys = append(s.keys, r.Header.Get("Idempotency-Key"))
		s.mu.Unlock()
		if rep.hold != nil {
			select {
			case <-rep.hold:
			case <-r.Context().Done():
				return
			}
		}
		for k, v := range rep.header {
			w.Header().Set(k, v)
		}
		w.WriteHeader(rep.status)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *fakeSink) received() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.keys...)
}

// logBuffer collects log lines for assertions.
type logBuffer struct {
	mu    sync.Mutex
	lines []string
}

func (b *logBuffer) logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.lines = append(b.lines, prefix+" "+args)
	}, funcr.Options{Verbosity: 1})
}

func (b *logBuffer) contains(s string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, l := range b.lines {
		if strings.Contains(l, s) {
			return true
		}
	}
	return false
}

// harness runs a Pool against a memStore and a fake sink.
type harness struct {
	st     *memStore
	clk    *clocktesting.FakeClock
	wake   chan struct{} // Options.Wake, unless the test brings its own
	sink   *fakeSink
	reg    *prometheus.Registry
	logs   *logBuffer
	pool   *Pool
	cancel context.CancelFunc
	done   chan error
}

type harnessOptions struct {
	resolve Resolver      // default: the fake sink, no MaxAttempts
	opts    Options       // store, clock, metrics and logger are filled in
	timeout time.Duration // the sender's timeout (default 5 s)
}

func newHarness(t *testing.T, ho harnessOptions, script ...reply) *harness {
	t.Helper()
	h := &harness{
		st:   newMemStore(),
		clk:  clocktesting.NewFakeClock(t0),
		wake: make(chan struct{}, 1),
		sink: newFakeSink(t, script...),
		reg:  prometheus.NewRegistry(),
		logs: &logBuffer{},
		done: make(chan error, 1),
	}
	m, err := NewMetrics(h.reg)
	if err != nil {
		t.Fatal(err)
	}
	resolve := ho.resolve
	if resolve == nil {
		resolve = func(sub, sink string) (Sink, bool) {
			return Sink{Name: sink, HTTP: &HTTPTarget{URL: h.sink.srv.URL}}, sub == testEvent().Subscription
		}
	}
	o := ho.opts
	o.Now, o.Metrics, o.Logger = h.clk.Now, m, h.logs.logger()
	if o.PollInterval == 0 {
		o.PollInterval = time.Millisecond
	}
	if o.Wake == nil {
		o.Wake = h.wake
	}
	if o.Backoff.Rand == nil {
		// Retries are due at once unless the sink asks for more, so tests need no clock moves.
		o.Backoff.Rand = func(int64) int64 { return 0 }
	}
	timeout := ho.timeout
	if timeout == 0 {
		timeout = 5 * time.Second
	}
	sender := NewSender(SenderOptions{Timeout: timeout, Now: h.clk.Now})
	h.pool = New(h.st, sender, resolve, o)
	return h
}

func (h *harness) start(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() { h.done <- h.pool.Run(ctx) }()
	t.Cleanup(func() { h.stop(t) })
}

// stop ends Run and waits for it; after it returns no delivery can happen.
func (h *harness) stop(t *testing.T) {
	t.Helper()
	if h.cancel == nil {
		return
	}
	h.cancel()
	h.cancel = nil
	select {
	case err := <-h.done:
		if err != nil {
			t.Errorf("Run() = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
}

// wakePool makes the pool check the queue now, as the receiver does after a commit.
func (h *harness) wakePool() {
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

// claim enqueues ev and returns its job id.
func (h *harness) claim(t *testing.T, ev store.Event) int64 {
	t.Helper()
	if _, err := h.st.ClaimBatch(context.Background(), []store.Event{ev}); err != nil {
		t.Fatal(err)
	}
	h.st.mu.Lock()
	defer h.st.mu.Unlock()
	return h.st.seen[[2]string{ev.Subscription, ev.EventID}]
}

func (h *harness) waitState(t *testing.T, id int64, state string) store.Job {
	t.Helper()
	eventually(t, fmt.Sprintf("job %d is %s", id, state), func() bool { return h.st.job(id).State == state })
	return h.st.job(id)
}

// metrics returns the delivery counters and the end-to-end histogram's count and sum.
func (h *harness) metrics(t *testing.T) map[string]float64 {
	t.Helper()
	mfs, err := h.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			name := mf.GetName()
			for _, l := range m.GetLabel() {
				name += fmt.Sprintf("{%s=%s}", l.GetName(), l.GetValue())
			}
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				got[name] = m.GetCounter().GetValue()
			case dto.MetricType_HISTOGRAM:
				got[name+"_count"] = float64(m.GetHistogram().GetSampleCount())
				got[name+"_sum"] = m.GetHistogram().GetSampleSum()
			}
		}
	}
	return got
}

func wantMetrics(delivered, retry, dead, deadLetters float64, e2eCount, e2eSum float64) map[string]float64 {
	m := map[string]float64{
		"hookwarden_receiver_delivery_attempts_total{result=delivered}": delivered,
		"hookwarden_receiver_delivery_attempts_total{result=retry}":     retry,
		"hookwarden_receiver_delivery_attempts_total{result=dead}":      dead,
		"hookwarden_receiver_delivery_attempts_total{result=filtered}":  0,
		"hookwarden_receiver_delivery_attempts_total{result=returned}":  0,
		"hookwarden_receiver_dead_letters_total":                        deadLetters,
		"hookwarden_receiver_end_to_end_seconds_count":                  e2eCount,
		"hookwarden_receiver_end_to_end_seconds_sum":                    e2eSum,
	}
	// The test event's subscription and its one sink count the same attempts, per sink.
	for result, n := range map[string]float64{ResultDelivered: delivered, ResultRetry: retry, ResultDead: dead} {
		if n > 0 {
			m["hookwarden_receiver_sink_attempts_total{name=payments}{namespace=shop}{result="+result+"}{sink="+store.DefaultSink+"}"] = n
		}
	}
	return m
}

func TestPoolRetriesUntilDelivered(t *testing.T) {
	h := newHarness(t, harnessOptions{}, reply{status: 500}, reply{status: 500}, reply{status: 500}, reply{status: 200})
	ev := testEvent()
	ev.ReceivedAt = t0.Add(-5 * time.Second)
	id := h.claim(t, ev)
	h.start(t)

	got := h.waitState(t, id, store.StateCompleted)
	h.stop(t)

	if got.Attempt != 4 {
		t.Errorf("Attempt = %d, want 4", got.Attempt)
	}
	key := IdempotencyKey(ev)
	if diff := cmp.Diff([]string{key, key, key, key}, h.sink.received()); diff != "" {
		t.Errorf("sink saw Idempotency-Keys (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantMetrics(1, 3, 0, 0, 1, 5), h.metrics(t)); diff != "" {
		t.Errorf("metrics (-want +got):\n%s", diff)
	}
}

func TestPoolHonoursRetryAfter(t *testing.T) {
	h := newHarness(t, harnessOptions{opts: Options{
		// The largest jitter is still below the sink's Retry-After, which must win.
		Backoff: Backoff{Rand: func(n int64) int64 { return n - 1 }},
	}}, reply{status: 429, header: map[string]string{"Retry-After": "120"}}, reply{status: 200})
	id := h.claim(t, testEvent())
	h.start(t)

	got := h.waitState(t, id, store.StateRetryable)
	if want := t0.Add(120 * time.Second); got.RunAt.Before(want) {
		t.Fatalf("RunAt = %s, want >= %s (Retry-After)", got.RunAt, want)
	}

	// Just before Retry-After the pool looks at the queue but leaves the sink alone.
	h.clk.Step(119 * time.Second)
	h.wakePool()
	eventually(t, "the pool leases at +119s", func() bool { return h.st.leasedAtOrAfter(t0.Add(119 * time.Second)) })
	if n := len(h.sink.received()); n != 1 {
		t.Fatalf("sink received %d requests before Retry-After passed, want 1", n)
	}

	h.clk.Step(time.Second)
	h.wakePool()
	got = h.waitState(t, id, store.StateCompleted)
	h.stop(t)
	if got.Attempt != 2 || len(h.sink.received()) != 2 {
		t.Errorf("Attempt = %d, sink requests = %d; want 2 and 2", got.Attempt, len(h.sink.received()))
	}
}

func TestPoolDeadLetters(t *testing.T) {
	cases := []struct {
		reason          string
		script          []reply
		eventMax        int
		sinkMax         int
		wantAttempt     int
		unsent          bool               // the sink gets no request
		event           func(*store.Event) // changes testEvent()
		wantLastErrPart string
	}{
		{
			reason:          "a 400 is permanent: dead after one attempt although more are allowed",
			script:          []reply{{status: 400}},
			eventMax:        5,
			wantAttempt:     1,
			wantLastErrPart: "400",
		},
		{
			reason:          "an event no request can carry (stored before the receiver checked) is dead at once, never sent",
			event:           func(ev *store.Event) { ev.ContentType = "application/json\r\nX-Injected: yes" },
			eventMax:        5,
			wantAttempt:     1,
			unsent:          true,
			wantLastErrPart: "request not sent (permanent): the event's Content-Type is not a valid HTTP header value",
		},
		{
			reason:          "a sink failing every time exhausts the event's attempts",
			script:          []reply{{status: 503}},
			eventMax:        3,
			wantAttempt:     3,
			wantLastErrPart: "gave up after 3 attempts",
		},
		{
			reason:          "the sink's MaxAttempts applies when the event carries none",
			script:          []reply{{status: 500}},
			sinkMax:         2,
			wantAttempt:     2,
			wantLastErrPart: "gave up after 2 attempts",
		},
		{
			reason:          "a sink's own maxAttempts wins over the event's (spec.delivery.maxAttempts)",
			script:          []reply{{status: 500}},
			eventMax:        4,
			sinkMax:         1,
			wantAttempt:     1,
			wantLastErrPart: "gave up after 1 attempts",
		},
	}
	for _, tc := range cases {
		t.Run(tc.reason, func(t *testing.T) {
			var h *harness
			h = newHarness(t, harnessOptions{resolve: func(_, sink string) (Sink, bool) {
				return Sink{Name: sink, HTTP: &HTTPTarget{URL: h.sink.srv.URL}, MaxAttempts: tc.sinkMax}, true
			}}, tc.script...)
			ev := testEvent()
			ev.MaxAttempts = tc.eventMax
			if tc.event != nil {
				tc.event(&ev)
			}
			id := h.claim(t, ev)
			h.start(t)

			got := h.waitState(t, id, store.StateDead)
			h.stop(t)

			wantSent := tc.wantAttempt
			if tc.unsent {
				wantSent = 0
			}
			if got.Attempt != tc.wantAttempt || len(h.sink.received()) != wantSent {
				t.Errorf("Attempt = %d, sink requests = %d; want %d and %d", got.Attempt, len(h.sink.received()), tc.wantAttempt, wantSent)
			}
			if !strings.Contains(got.LastError, tc.wantLastErrPart) {
				t.Errorf("LastError = %q, want it to mention %q", got.LastError, tc.wantLastErrPart)
			}
			if strings.Contains(got.LastError, "PAYLOAD-MARKER") {
				t.Errorf("LastError %q leaks the payload", got.LastError)
			}
			retries := float64(tc.wantAttempt - 1)
			if diff := cmp.Diff(wantMetrics(0, retries, 1, 1, 0, 0), h.metrics(t)); diff != "" {
				t.Errorf("metrics (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPoolWithoutSinkRetriesUntilOneAppears(t *testing.T) {
	var configured atomic.Bool
	var h *harness
	h = newHarness(t, harnessOptions{resolve: func(_, sink string) (Sink, bool) {
		return Sink{Name: sink, HTTP: &HTTPTarget{URL: h.sink.srv.URL}}, configured.Load()
	}}, reply{status: 200})
	ev := testEvent()
	ev.MaxAttempts = 1
	id := h.claim(t, ev)
	h.start(t)

	// The job is leased and given back without using up its single attempt.
	eventually(t, "the job was leased and released", func() bool {
		j := h.st.job(id)
		return j.LastError == "no sink configured" && j.State == store.StateRetryable
	})
	if got := h.st.job(id); got.Attempt != 0 {
		t.Fatalf("job attempt = %d while no sink was configured, want 0 (not counted)", got.Attempt)
	}
	if n := len(h.sink.received()); n != 0 {
		t.Fatalf("sink received %d requests while unconfigured", n)
	}

	configured.Store(true)
	h.waitState(t, id, store.StateCompleted)
	h.stop(t)
	if n := len(h.sink.received()); n != 1 {
		t.Errorf("sink received %d requests, want 1", n)
	}
	if got := h.st.job(id); got.Attempt != 1 {
		t.Errorf("completed at attempt %d, want 1: the single allowed attempt went to the sink", got.Attempt)
	}
}

func TestPoolRedeliversAfterCrashedWorker(t *testing.T) {
	h := newHarness(t, harnessOptions{opts: Options{Lease: 30 * time.Second}}, reply{status: 200})
	id := h.claim(t, testEvent())

	// A worker takes the job and dies without a word.
	crashed, err := h.st.Lease(context.Background(), 1, t0, 30*time.Second)
	if err != nil || len(crashed) != 1 {
		t.Fatalf("Lease() = %v, %v", crashed, err)
	}
	h.start(t)

	h.clk.Step(29 * time.Second)
	h.wakePool()
	eventually(t, "the pool leases within the dead worker's lease", func() bool { return h.st.leasedAtOrAfter(t0.Add(29 * time.Second)) })
	if n := len(h.sink.received()); n != 0 {
		t.Fatalf("sink received %d requests while the lease held, want 0", n)
	}

	h.clk.Step(2 * time.Second)
	h.wakePool()
	got := h.waitState(t, id, store.StateCompleted)

	// The dead worker's late report is fenced off.
	if err := h.st.Complete(context.Background(), crashed[0], h.clk.Now()); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("late Complete() = %v, want ErrLeaseLost", err)
	}
	h.stop(t)
	if got.Attempt != 2 || len(h.sink.received()) != 1 {
		t.Errorf("Attempt = %d, sink requests = %d; want 2 and exactly 1", got.Attempt, len(h.sink.received()))
	}
}

func TestPoolIgnoresLostLease(t *testing.T) {
	hold := make(chan struct{})
	// One worker, busy with the held delivery, so only the test can take the expired lease.
	h := newHarness(t, harnessOptions{opts: Options{Workers: 1, Lease: 30 * time.Second}},
		reply{status: 200, hold: hold}, reply{status: 200})
	id := h.claim(t, testEvent())
	h.start(t)
	eventually(t, "the sink holds the first delivery", func() bool { return len(h.sink.received()) == 1 })

	// The slow delivery outlives its lease and another worker takes the job.
	h.clk.Step(31 * time.Second)
	thief, err := h.st.Lease(context.Background(), 1, h.clk.Now(), 30*time.Second)
	if err != nil || len(thief) != 1 {
		t.Fatalf("Lease() = %v, %v", thief, err)
	}
	close(hold)
	eventually(t, "the pool logs the lost lease", func() bool { return h.logs.contains("Lease lost") })
	if got := h.st.job(id); got.State != store.StateRunning || got.Attempt != 2 {
		t.Errorf("job = %s attempt %d, want running attempt 2 (the new owner's)", got.State, got.Attempt)
	}
	if err := h.st.Complete(context.Background(), thief[0], h.clk.Now()); err != nil {
		t.Errorf("new owner's Complete() = %v", err)
	}

	// The pool carries on with other work.
	next := testEvent()
	next.EventID = "evt_2"
	id2 := h.claim(t, next)
	h.wakePool()
	h.waitState(t, id2, store.StateCompleted)
}

func TestPoolShutdown(t *testing.T) {
	t.Run("an in-flight delivery finishes and is recorded after the context ends", func(t *testing.T) {
		hold := make(chan struct{})
		h := newHarness(t, harnessOptions{}, reply{status: 200, hold: hold})
		id := h.claim(t, testEvent())
		h.start(t)
		eventually(t, "the sink holds the delivery", func() bool { return len(h.sink.received()) == 1 })

		h.cancel()
		close(hold)
		h.stop(t)
		if got := h.st.job(id); got.State != store.StateCompleted {
			t.Errorf("job state after Run returned = %s, want completed", got.State)
		}
	})
	t.Run("a delivery still running after the grace period is rescheduled at once", func(t *testing.T) {
		hold := make(chan struct{})
		defer close(hold)
		h := newHarness(t, harnessOptions{opts: Options{Grace: 10 * time.Millisecond}}, reply{status: 200, hold: hold})
		id := h.claim(t, testEvent())
		h.start(t)
		eventually(t, "the sink holds the delivery", func() bool { return len(h.sink.received()) == 1 })

		h.stop(t)
		got := h.st.job(id)
		if got.State != store.StateRetryable || !got.RunAt.Equal(h.clk.Now()) || !strings.Contains(got.LastError, "interrupted") {
			t.Errorf("job = %s at %s %q, want retryable now, interrupted", got.State, got.RunAt, got.LastError)
		}
	})
}

func TestPoolRejectsLeaseShorterThanTimeout(t *testing.T) {
	p := New(newMemStore(), NewSender(SenderOptions{Timeout: 10 * time.Second}),
		func(string, string) (Sink, bool) { return Sink{}, false }, Options{Lease: 5 * time.Second})
	if err := p.Run(context.Background()); err == nil {
		t.Error("Run() = nil, want an error: a lease shorter than a request redelivers slow sinks")
	}
}

func TestPoolWakesOnSignal(t *testing.T) {
	wake := make(chan struct{}, 1)
	// A poll interval the test will never reach: only the signal can start the delivery.
	h := newHarness(t, harnessOptions{opts: Options{PollInterval: time.Hour, Wake: wake}}, reply{status: 200})
	h.start(t)
	eventually(t, "the first, empty, lease", func() bool { return h.st.leasedAtOrAfter(t0) })

	id := h.claim(t, testEvent())
	wake <- struct{}{}
	h.waitState(t, id, store.StateCompleted)
}

func TestPoolDrainsBacklogWithoutPolling(t *testing.T) {
	// One worker and no polling within the test: after the first job, only the full batch it
	// came in can tell the pool that more work is waiting.
	h := newHarness(t, harnessOptions{opts: Options{Workers: 1, PollInterval: time.Hour}}, reply{status: 200})
	var ids []int64
	for _, id := range []string{"evt_a", "evt_b", "evt_c"} {
		ev := testEvent()
		ev.EventID = id
		ids = append(ids, h.claim(t, ev))
	}
	h.start(t)
	for _, id := range ids {
		h.waitState(t, id, store.StateCompleted)
	}
}
