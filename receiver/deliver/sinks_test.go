package deliver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookwarden/hookwarden/receiver/store"
	"github.com/hookwarden/hookwarden/receiver/store/storetest"
)

// sinkRig is a pool on a real SQLite store delivering to named sinks, each a fakeSink, which a
// test may reconfigure while the pool runs.
type sinkRig struct {
	st    store.Store
	mu    sync.Mutex
	sinks map[string]Sink
	fakes map[string]*fakeSink
	reg   *prometheus.Registry
	logs  *logBuffer
	pool  *Pool
}

func newSinkRig(t *testing.T, o Options) *sinkRig {
	t.Helper()
	st, err := store.OpenSQLite(storetest.SQLitePath(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	r := &sinkRig{st: st, sinks: map[string]Sink{}, fakes: map[string]*fakeSink{}, reg: prometheus.NewRegistry(), logs: &logBuffer{}}
	m, err := NewMetrics(r.reg)
	if err != nil {
		t.Fatal(err)
	}
	o.Metrics, o.Logger = m, r.logs.logger()
	t.Cleanup(func() {
		if t.Failed() {
			r.logs.mu.Lock()
			defer r.logs.mu.Unlock()
			for _, l := range r.logs.lines[max(len(r.logs.lines)-40, 0):] {
				t.Log(l)
			}
		}
	})
	if o.PollInterval == 0 {
		o.PollInterval = 5 * time.Millisecond
	}
	if o.Backoff.Base == 0 {
		o.Backoff = Backoff{Base: time.Millisecond, Max: 20 * time.Millisecond}
	}
	r.pool = New(st, NewSender(SenderOptions{Timeout: 5 * time.Second}), r.resolve, o)
	return r
}

// add configures sink name answering from script, with filter (empty: none).
func (r *sinkRig) add(t *testing.T, name, filter string, script ...reply) *fakeSink {
	t.Helper()
	f := newFakeSink(t, script...)
	s := Sink{Name: name, HTTP: &HTTPTarget{URL: f.srv.URL}}
	if filter != "" {
		var err error
		if s.Filter, err = CompileFilter(filter); err != nil {
			t.Fatal(err)
		}
	}
	r.mu.Lock()
	r.sinks[name], r.fakes[name] = s, f
	r.mu.Unlock()
	return f
}

func (r *sinkRig) set(name string, change func(*Sink)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.sinks[name]
	change(&s)
	r.sinks[name] = s
}

func (r *sinkRig) resolve(sub, sink string) (Sink, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if sub != "shop/orders" {
		return Sink{}, false
	}
	s, ok := r.sinks[sink]
	if !ok {
		return Sink{Name: sink, Gone: true}, true
	}
	return s, true
}

// claim records events of shop/orders (type per event) for sinks.
func (r *sinkRig) claim(t *testing.T, sinks []string, types ...string) []string {
	t.Helper()
	var events []store.Event
	var ids []string
	for i, typ := range types {
		id := fmt.Sprintf("evt_%03d", i)
		ids = append(ids, id)
		events = append(events, store.Event{Subscription: "shop/orders", SubscriptionUID: "uid", EventID: id, EventType: typ,
			ContentType: "application/json", Payload: fmt.Appendf(nil, `{"id":%q,"type":%q,"data":{"object":{"id":"obj_%d"}}}`, id, typ, i%2),
			ReceivedAt: time.Now(), MaxAttempts: 3, Sinks: sinks})
	}
	if _, err := r.st.ClaimBatch(context.Background(), events); err != nil {
		t.Fatal(err)
	}
	return ids
}

func (r *sinkRig) run(t *testing.T) {
	t.Helper()
	t.Cleanup(r.start(t))
}

// start runs the pool until the returned function is called.
func (r *sinkRig) start(t *testing.T) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.pool.Run(ctx) }()
	return sync.OnceFunc(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

// accepted is the event ids a fake sink answered 2xx, in order (the Idempotency-Key ends with
// the id).
func accepted(f *fakeSink) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ids []string
	for i, k := range f.keys {
		if f.script[min(i, len(f.script)-1)].status < 300 {
			ids = append(ids, k[strings.LastIndexByte(k, ':')+1:])
		}
	}
	return ids
}

// invoiceIDs is every other id of ids, from the first: the invoice.paid events of a claim of
// alternating invoice.paid and charge.succeeded.
func invoiceIDs(ids []string) []string {
	var out []string
	for i, id := range ids {
		if i%2 == 0 {
			out = append(out, id)
		}
	}
	return out
}

func sorted(s []string) []string { return slices.Sorted(slices.Values(s)) }

func (r *sinkRig) depth(t *testing.T) int {
	t.Helper()
	n, err := r.st.Depth(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// Issue 30: each event goes to every sink whose filter selects it, once; the others complete
// its job without a request.
func TestFanOutWithFilters(t *testing.T) {
	r := newSinkRig(t, Options{Workers: 4})
	invoices := r.add(t, "invoices", "type.startsWith('invoice.')", reply{status: 200})
	charges := r.add(t, "charges", "type.startsWith('charge.') && data.data.object.id != 'obj_0'", reply{status: 200})
	all := r.add(t, "all", "", reply{status: 200})
	types := []string{"invoice.paid", "charge.succeeded", "customer.created"}
	var want = map[string][]string{}
	var seq []string
	for i := range 30 {
		typ := types[i%3]
		seq = append(seq, typ)
		id := fmt.Sprintf("evt_%03d", i)
		want["all"] = append(want["all"], id)
		if typ == "invoice.paid" {
			want["invoices"] = append(want["invoices"], id)
		}
		if typ == "charge.succeeded" && i%2 != 0 { // obj_0 is filtered out
			want["charges"] = append(want["charges"], id)
		}
	}
	r.claim(t, []string{"invoices", "charges", "all"}, seq...)
	r.run(t)
	eventually(t, "every job is done", func() bool { return r.depth(t) == 0 })
	for name, f := range map[string]*fakeSink{"invoices": invoices, "charges": charges, "all": all} {
		if diff := cmp.Diff(want[name], sorted(f.received2xx())); diff != "" {
			t.Errorf("sink %s received (-want +got):\n%s", name, diff)
		}
	}
	if got := counter(t, r.reg, "hookwarden_receiver_delivery_attempts_total", ResultFiltered); got != 90-30-10-5 {
		t.Errorf("filtered = %v, want 45 (jobs whose filter did not select the event)", got)
	}
	for sink, want := range map[string][2]float64{"invoices": {10, 20}, "charges": {5, 25}, "all": {30, -1}} {
		delivered := sinkCounter(t, r.reg, sink, ResultDelivered)
		filtered := sinkCounter(t, r.reg, sink, ResultFiltered)
		if delivered != want[0] || filtered != want[1] {
			t.Errorf("sink %s: delivered %v, filtered %v; want %v and %v", sink, delivered, filtered, want[0], want[1])
		}
	}
	r.pool.opts.Metrics.ForgetRoute("shop", "orders")
	if got := sinkCounter(t, r.reg, "all", ResultDelivered); got != -1 {
		t.Errorf("after ForgetRoute the sink series is still there (%v)", got)
	}
}

// received2xx is accepted() for a sink that always answers 2xx.
func (s *fakeSink) received2xx() []string { return accepted(s) }

// Issue 30: one sink down while the others keep receiving; when it is back it catches up,
// nothing lost on either.
func TestSinkDownThenCatchingUp(t *testing.T) {
	r := newSinkRig(t, Options{Workers: 4})
	up := r.add(t, "up", "", reply{status: 200})
	down := newFakeSink(t, reply{status: 503})
	r.set("down", func(s *Sink) { *s = Sink{Name: "down", HTTP: &HTTPTarget{URL: down.srv.URL}, MaxAttempts: 1000} })
	ids := r.claim(t, []string{"up", "down"}, slices.Repeat([]string{"invoice.paid"}, 20)...)
	r.run(t)
	eventually(t, "the sink that is up has every event", func() bool { return len(up.received2xx()) == 20 })
	if got := len(accepted(down)); got != 0 {
		t.Fatalf("the sink that is down accepted %d", got)
	}
	healthy := r.add(t, "down", "", reply{status: 200})
	eventually(t, "the sink that was down has caught up", func() bool { return r.depth(t) == 0 })
	if diff := cmp.Diff(ids, sorted(healthy.received2xx())); diff != "" {
		t.Errorf("the sink that came back received (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(ids, sorted(up.received2xx())); diff != "" {
		t.Errorf("the sink that stayed up received (-want +got):\n%s", diff)
	}
	if letters, _ := r.st.DeadLetters(context.Background(), 10); len(letters) != 0 {
		t.Errorf("dead letters: %d, want none", len(letters))
	}
}

// Issue 30: a slow sink holds at most its share of the workers while another sink has jobs:
// the fast sink gets every event while the slow one still holds its first requests.
func TestSlowSinkDoesNotHoldBackAnother(t *testing.T) {
	r := newSinkRig(t, Options{Workers: 4, Lease: time.Minute})
	hold := make(chan struct{})
	slow := r.add(t, "slow", "", reply{status: 200, hold: hold})
	fast := r.add(t, "fast", "", reply{status: 200})
	r.claim(t, []string{"slow", "fast"}, slices.Repeat([]string{"invoice.paid"}, 12)...)
	r.run(t)
	eventually(t, "the fast sink has every event", func() bool { return len(fast.received2xx()) == 12 })
	if n := len(slow.received()); n > 2 {
		t.Errorf("the slow sink holds %d requests while the fast one had jobs, want at most its share (2)", n)
	}
	close(hold)
	eventually(t, "the slow sink has caught up", func() bool { return r.depth(t) == 0 })
	if n := len(slow.received()); n != 12 {
		t.Errorf("the slow sink received %d requests, want 12", n)
	}
}

// Issue 30: a sink that cannot take events (a filter that does not compile) leaves its events
// waiting, uncounted, while the others are delivered; fixed, it gets them all.
func TestMisconfiguredSinkWaits(t *testing.T) {
	r := newSinkRig(t, Options{Workers: 2})
	ok := r.add(t, "ok", "", reply{status: 200})
	broken := r.add(t, "broken", "", reply{status: 200})
	_, compileErr := CompileFilter("typ == 'invoice.paid'")
	if compileErr == nil || !strings.Contains(compileErr.Error(), "undeclared reference to 'typ'") {
		t.Fatalf("CompileFilter(typo) = %v, want the CEL issue", compileErr)
	}
	r.set("broken", func(s *Sink) { s.Problem = compileErr.Error() })
	ids := r.claim(t, []string{"ok", "broken"}, "invoice.paid", "invoice.paid", "invoice.paid")
	stop := r.start(t)
	eventually(t, "the other sink has every event and the misconfigured sink's jobs were given back", func() bool {
		return len(ok.received2xx()) == 3 && counter(t, r.reg, "hookwarden_receiver_delivery_attempts_total", ResultReturned) >= 3
	})
	stop()
	jobs, err := r.st.Lease(context.Background(), 10, time.Now().Add(time.Hour), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		if j.Sink != "broken" || j.Attempt != 1 {
			t.Errorf("job %s→%s attempt %d; want the misconfigured sink's, no attempt counted", j.Event.EventID, j.Sink, j.Attempt)
		}
		if err := r.st.Release(context.Background(), j, time.Now(), "test"); err != nil {
			t.Fatal(err)
		}
	}
	if !r.logs.contains("sink broken cannot take events: filter does not compile: ERROR: <input>:1:1: undeclared reference to 'typ'") {
		t.Errorf("no log line says why the misconfigured sink's events wait")
	}
	if len(jobs) != 3 || len(broken.received()) != 0 {
		t.Fatalf("%d jobs waiting, the misconfigured sink received %d requests; want 3 and none", len(jobs), len(broken.received()))
	}
	r.run(t)
	r.set("broken", func(s *Sink) { s.Problem = "" })
	eventually(t, "the fixed sink has every event", func() bool { return r.depth(t) == 0 })
	if diff := cmp.Diff(ids, sorted(broken.received2xx())); diff != "" {
		t.Errorf("the fixed sink received (-want +got):\n%s", diff)
	}
}

// Issue 30: a filter failing at run time on one event (a field it does not have) is retried,
// then dead-lettered for that sink alone with a readable reason; the event it selects is
// delivered, and the sink without a filter gets both.
func TestFilterFailingOnOneEvent(t *testing.T) {
	r := newSinkRig(t, Options{Workers: 2})
	picky := r.add(t, "picky", "data.customer.startsWith('cus_')", reply{status: 200})
	all := r.add(t, "all", "", reply{status: 200})
	r.set("picky", func(s *Sink) { s.MaxAttempts = 2 })
	events := []store.Event{
		{Subscription: "shop/orders", SubscriptionUID: "uid", EventID: "evt_with", EventType: "invoice.paid", Payload: []byte(`{"customer":"cus_1"}`), ReceivedAt: time.Now(), Sinks: []string{"picky", "all"}},
		{Subscription: "shop/orders", SubscriptionUID: "uid", EventID: "evt_without", EventType: "invoice.paid", Payload: []byte(`{"id":"x"}`), ReceivedAt: time.Now(), Sinks: []string{"picky", "all"}},
	}
	if _, err := r.st.ClaimBatch(context.Background(), events); err != nil {
		t.Fatal(err)
	}
	r.run(t)
	eventually(t, "every job is done", func() bool { return r.depth(t) == 0 })
	if diff := cmp.Diff([]string{"evt_with"}, picky.received2xx()); diff != "" {
		t.Errorf("the filtered sink received (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"evt_with", "evt_without"}, sorted(all.received2xx())); diff != "" {
		t.Errorf("the sink without a filter received (-want +got):\n%s", diff)
	}
	letters, err := r.st.DeadLetters(context.Background(), 10)
	if err != nil || len(letters) != 1 {
		t.Fatalf("dead letters = %v, %v; want one", letters, err)
	}
	if l := letters[0]; l.Sink != "picky" || l.Event.EventID != "evt_without" || l.Attempt != 2 || !strings.Contains(l.LastError, "gave up after 2 attempts") ||
		!strings.Contains(l.LastError, "filter failed on this event: no such key: customer") {
		t.Errorf("dead letter = sink %s, event %s, attempt %d, %q; want picky's evt_without after 2 attempts, saying the filter failed on a missing key",
			l.Sink, l.Event.EventID, l.Attempt, l.LastError)
	}
}

// A job for a sink the subscription no longer has is dead-lettered with the reason, never
// dropped.
func TestJobOfARemovedSinkIsDeadLettered(t *testing.T) {
	r := newSinkRig(t, Options{Workers: 2})
	r.add(t, "kept", "", reply{status: 200})
	r.claim(t, []string{"kept", "removed"}, "invoice.paid")
	r.run(t)
	eventually(t, "every job is done", func() bool { return r.depth(t) == 0 })
	letters, err := r.st.DeadLetters(context.Background(), 10)
	if err != nil || len(letters) != 1 || letters[0].Sink != "removed" || !strings.Contains(letters[0].LastError, `no sink named "removed" any more`) {
		t.Errorf("dead letters = %+v, %v; want removed's job, saying why", letters, err)
	}
}

// publishOnce publishes event id through p (10 s at most) and returns the error, a *Error when
// not nil.
func publishOnce(t *testing.T, p Publisher, id string) (*Error, error) {
	t.Helper()
	return publishWithin(t, p, id, 10*time.Second)
}

// publishWithin is publishOnce with a deadline of limit: a Kafka connection the broker refuses
// is retried inside the produce until the deadline.
func publishWithin(t *testing.T, p Publisher, id string, limit time.Duration) (*Error, error) {
	t.Helper()
	ev := store.Event{Subscription: "shop/orders", SubscriptionUID: "uid", EventID: id, EventType: "invoice.paid", Payload: []byte("{}")}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	_, err := p.Publish(ctx, ev)
	if err == nil {
		return nil, nil
	}
	var de *Error
	if !errors.As(err, &de) {
		t.Fatalf("publishing %s: %v is not a *Error", id, err)
	}
	return de, err
}

// publishRefused publishes one event through p (3 s at most: a refused Kafka connection is
// retried inside the produce until then) and fails t unless the error is a misconfigured sink,
// retried, whose message contains each of want and not the password.
func publishRefused(t *testing.T, p Publisher, why, password string, want ...string) {
	t.Helper()
	de, err := publishWithin(t, p, "evt_refused", 3*time.Second)
	if de == nil || !de.Misconfigured || !de.Retryable {
		t.Errorf("%s: Publish = %v, want a misconfigured sink (its events wait)", why, err)
		return
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%s: error %q does not say %q", why, err, w)
		}
	}
	if password != "" && strings.Contains(err.Error(), password) {
		t.Errorf("%s: error %q shows the password", why, err)
	}
}

// refusedThenFixed runs a pool whose sink bus publishes with bad, which its broker refuses:
// each event is offered more often than its budget (maxAttempts 1) would allow and given back
// uncounted, with a message containing want, never dead-lettered; then bus gets good (the route
// Secret fixed) and every event arrives once, as arrived (the event ids at the broker) shows.
func refusedThenFixed(t *testing.T, bad, good Publisher, want string, arrived func() []string) {
	t.Helper()
	// Four workers for the sink (half of them): a Kafka attempt that is refused lasts until
	// the sender's timeout, so the three events are offered side by side.
	r := newSinkRig(t, Options{Workers: 8})
	r.set("bus", func(s *Sink) { *s = Sink{Name: "bus", Publisher: bad, MaxAttempts: 1} })
	ids := r.claim(t, []string{"bus"}, "invoice.paid", "invoice.paid", "invoice.paid")
	r.run(t)
	pollFor(t, time.Minute, 10*time.Millisecond, "the refused events were offered twice their budget and given back, saying why", func() bool {
		if letters, _ := r.st.DeadLetters(context.Background(), 10); len(letters) != 0 {
			t.Fatalf("%s dead-lettered while the broker refused the sink (%s), want it waiting", letters[0].Event.EventID, letters[0].LastError)
		}
		return sinkCounter(t, r.reg, "bus", ResultReturned) >= float64(2*len(ids)) && r.logs.contains("sink misconfigured") && r.logs.contains(want)
	})
	if n := max(sinkCounter(t, r.reg, "bus", ResultRetry), 0) + max(sinkCounter(t, r.reg, "bus", ResultDead), 0); n != 0 {
		t.Errorf("%v attempts counted while the broker refused the sink, want none", n)
	}
	r.set("bus", func(s *Sink) { s.Publisher = good })
	pollFor(t, time.Minute, 10*time.Millisecond, "with the fixed sink every event is published", func() bool { return r.depth(t) == 0 })
	if got := sorted(arrived()); !slices.Equal(got, ids) {
		t.Errorf("the broker holds %v, want each of %v once", got, ids)
	}
}

// sinkCounter is shop/orders' hookwarden_receiver_sink_attempts_total for sink and result, -1
// when the series does not exist.
func sinkCounter(t *testing.T, reg *prometheus.Registry, sink, result string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "hookwarden_receiver_sink_attempts_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["namespace"] == "shop" && labels["name"] == "orders" && labels["sink"] == sink && labels["result"] == result {
				return m.GetCounter().GetValue()
			}
		}
	}
	return -1
}

func counter(t *testing.T, reg *prometheus.Registry, name, result string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "result" && l.GetValue() == result {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return -1
}

// orderSink records the events it accepted, in order; it refuses (400) the events in refuse
// and answers 503 to the first attempt of those in flaky.
type orderSink struct {
	mu       sync.Mutex
	accepted []string
	tried    map[string]int
	refuse   map[string]bool
	flaky    map[string]bool
}

func (s *orderSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id := r.Header.Get("ce-id")
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tried[id]++
	switch {
	case s.refuse[id]:
		w.WriteHeader(http.StatusBadRequest)
	case s.flaky[id] && s.tried[id] == 1:
		w.WriteHeader(http.StatusServiceUnavailable)
	default:
		s.accepted = append(s.accepted, id)
		w.WriteHeader(http.StatusOK)
	}
}

// Issue 30: with ordering PerKey, events of one key reach the sink in arrival order through a
// retry and a dead letter (which releases its key), while the other key goes on.
func TestOrderPerKeyThroughRetriesAndADeadLetter(t *testing.T) {
	r := newSinkRig(t, Options{Workers: 4})
	sink := &orderSink{tried: map[string]int{}, refuse: map[string]bool{"evt_002": true}, flaky: map[string]bool{"evt_004": true, "evt_005": true}}
	srv := httptest.NewServer(sink)
	defer srv.Close()
	r.set("ordered", func(s *Sink) { *s = Sink{Name: "ordered", HTTP: &HTTPTarget{URL: srv.URL}, OrderBy: "data.customer"} })
	var events []store.Event
	keyOf := map[string]string{}
	for i := range 10 {
		id := fmt.Sprintf("evt_%03d", i)
		ev := store.Event{Subscription: "shop/orders", SubscriptionUID: "uid", EventID: id, EventType: "invoice.paid",
			Payload: fmt.Appendf(nil, `{"customer":"cus_%d"}`, i%2), ReceivedAt: time.Now(), MaxAttempts: 3, Sinks: []string{"ordered"}}
		keyOf[id] = OrderKey("data.customer", ev)
		ev.OrderKeys = map[string]string{"ordered": keyOf[id]}
		events = append(events, ev)
	}
	if _, err := r.st.ClaimBatch(context.Background(), events); err != nil {
		t.Fatal(err)
	}
	r.run(t)
	eventually(t, "every job is done", func() bool { return r.depth(t) == 0 })
	sink.mu.Lock()
	defer sink.mu.Unlock()
	perKey := map[string][]string{}
	for _, id := range sink.accepted {
		perKey[keyOf[id]] = append(perKey[keyOf[id]], id)
	}
	want := map[string][]string{
		"cus_0": {"evt_000", "evt_004", "evt_006", "evt_008"}, // evt_002 dead-lettered, evt_004 retried once
		"cus_1": {"evt_001", "evt_003", "evt_005", "evt_007", "evt_009"},
	}
	if diff := cmp.Diff(want, perKey); diff != "" {
		t.Errorf("accepted per key, in order (-want +got):\n%s", diff)
	}
	if sink.tried["evt_002"] != 1 || sink.tried["evt_004"] != 2 {
		t.Errorf("attempts: evt_002 %d, evt_004 %d; want 1 (refused for good) and 2 (one retry)", sink.tried["evt_002"], sink.tried["evt_004"])
	}
}
