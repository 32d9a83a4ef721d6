package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/time/rate"

	"github.com/hookwarden/hookwarden/receiver/deliver"
	"github.com/hookwarden/hookwarden/receiver/store"
)

// preloadBatch is the events per ClaimBatch while preloading: one SQLite transaction (one
// statement within its parameter limit) or one PostgreSQL statement each.
const preloadBatch = 3000

// backlogEvent is event i of a backlog of subs subscriptions: round-robin over the
// subscriptions, so that each one's events are interleaved with the others' as they arrived,
// and numbered per subscription in order of arrival (the number is in the id, which the sink
// reads back from ce-id).
func backlogEvent(i, subs int, payload []byte, received time.Time) store.Event {
	sub, seq := i%subs, i/subs
	return store.Event{
		Subscription: backlogSub(sub), SubscriptionUID: fmt.Sprintf("00000000-0000-4000-8000-%012d", sub),
		EventID: fmt.Sprintf("evt_backlog_%010d", seq), EventType: "payment_intent.succeeded",
		ContentType: "application/json; charset=utf-8", Payload: payload, ReceivedAt: received,
		MaxAttempts: deliver.DefaultMaxAttempts,
	}
}

func backlogSub(i int) string { return fmt.Sprintf("backlog/sub-%02d", i) }

// backlogSeq reads an event's number back from its id ("" and -1 when it is not a backlog event).
func backlogSeq(id string) int {
	n, err := strconv.Atoi(strings.TrimPrefix(id, "evt_backlog_"))
	if err != nil || !strings.HasPrefix(id, "evt_backlog_") {
		return -1
	}
	return n
}

// preload records n undelivered events through the store's own ClaimBatch, preloadBatch per
// transaction: the rows are exactly what acknowledged deliveries leave behind while the sink
// is down (pending jobs, due since they arrived). They arrived evenly over the span before
// until: event i at until - span + i·span/n.
func preload(ctx context.Context, st store.Store, n, subs int, payload []byte, until time.Time, span time.Duration) error {
	start := until.Add(-span)
	step := span / time.Duration(max(n, 1))
	batch := make([]store.Event, 0, preloadBatch)
	for i := 0; i < n; {
		batch = batch[:0]
		for ; i < n && len(batch) < preloadBatch; i++ {
			batch = append(batch, backlogEvent(i, subs, payload, start.Add(time.Duration(i)*step)))
		}
		dup, err := st.ClaimBatch(ctx, batch)
		if err != nil {
			return fmt.Errorf("preload: %w", err)
		}
		for k, d := range dup {
			if d {
				return fmt.Errorf("preload: event %s/%s already recorded", batch[k].Subscription, batch[k].EventID)
			}
		}
	}
	return nil
}

// drainResult is what the sink saw while the pool drained the backlog.
type drainResult struct {
	pace     float64 // the sink's accepted deliveries per second
	workers  int
	window   time.Duration
	attempts int // requests the sink received
	accepted int // answered 2xx (the failFirst 503s aside, every other request)
	// perSecond counts the attempts that reached the sink in each second of the window.
	perSecond []int
	// maxInflight is the most attempts the sink held at once.
	maxInflight int
	// outOfOrder counts, per subscription, backlog events that reached the sink after a later
	// one of the same subscription; maxBehind is how far behind (in events) the worst came.
	outOfOrder map[string]int
	maxBehind  int
	// redelivered counts backlog events the sink received more than once.
	redelivered       int
	depthBefore, left int
}

func (r *drainResult) totalOutOfOrder() int {
	n := 0
	for _, v := range r.outOfOrder {
		n += v
	}
	return n
}

// pacedSink accepts one delivery per 1/pace seconds (a sink that is back but has a fixed
// capacity: requests queue at its door, none is refused) and records what reached it. Its
// first failFirst requests are answered 503 at once (the end of the outage).
type pacedSink struct {
	lim       *rate.Limiter
	inflight  atomic.Int64
	failFirst int

	mu          sync.Mutex
	start       time.Time
	perSecond   []int
	maxInflight int
	attempts    int
	accepted    int
	last        map[string]int // subscription → highest backlog number seen
	seen        map[string]map[int]bool
	outOfOrder  map[string]int
	maxBehind   int
	redelivered int
}

func newPacedSink(pace float64, failFirst int) *pacedSink {
	return &pacedSink{lim: rate.NewLimiter(rate.Limit(pace), 1), failFirst: failFirst, last: map[string]int{},
		seen: map[string]map[int]bool{}, outOfOrder: map[string]int{}}
}

func (s *pacedSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := int(s.inflight.Add(1))
	defer s.inflight.Add(-1)
	_, _ = io.Copy(io.Discard, r.Body)
	// ce-source and ce-id are percent-encoded (deliver.HeaderValue); one decode gives them back.
	source, _ := url.PathUnescape(r.Header.Get("ce-source"))
	id, _ := url.PathUnescape(r.Header.Get("ce-id"))
	sub, seq := strings.TrimPrefix(source, "hookwarden/"), backlogSeq(id)
	s.mu.Lock()
	s.attempts++
	s.maxInflight = max(s.maxInflight, n)
	if s.attempts <= s.failFirst {
		s.mu.Unlock()
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	if !s.start.IsZero() {
		sec := int(time.Since(s.start) / time.Second)
		for len(s.perSecond) <= sec {
			s.perSecond = append(s.perSecond, 0)
		}
		s.perSecond[sec]++
	}
	if seq >= 0 {
		if s.seen[sub] == nil {
			s.seen[sub] = map[int]bool{}
		}
		if s.seen[sub][seq] {
			s.redelivered++
		}
		s.seen[sub][seq] = true
		if last, ok := s.last[sub]; ok && seq < last {
			s.outOfOrder[sub]++
			s.maxBehind = max(s.maxBehind, last-seq)
		} else {
			s.last[sub] = seq
		}
	}
	s.mu.Unlock()
	if err := s.lim.Wait(r.Context()); err != nil {
		return
	}
	s.mu.Lock()
	s.accepted++
	s.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// drainOptions describe the returning sink and the pool draining the backlog.
type drainOptions struct {
	workers   int
	pace      float64       // deliveries per second the sink accepts
	window    time.Duration // the longest the drain runs
	failFirst int           // the sink's first requests answered 503
	backoff   deliver.Backoff
}

// drain runs a delivery pool (cmd/receiver's defaults but o's) on st against a pacedSink,
// until the queue is empty or o.window has passed.
func drain(ctx context.Context, st store.Store, o drainOptions) (*drainResult, error) {
	workers, pace, window := o.workers, o.pace, o.window
	sink := newPacedSink(pace, o.failFirst)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: sink, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer func() { _ = srv.Close() }()
	url := "http://" + ln.Addr().String() + "/events"

	res := &drainResult{pace: pace, workers: workers}
	if res.depthBefore, err = st.Depth(ctx); err != nil {
		return nil, err
	}
	pool := deliver.New(st, deliver.NewSender(deliver.SenderOptions{}),
		func(_, sink string) (deliver.Sink, bool) {
			return deliver.Sink{Name: sink, HTTP: &deliver.HTTPTarget{URL: url}}, true
		},
		deliver.Options{Workers: workers, Backoff: o.backoff, Logger: logr.Discard()})
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	sink.mu.Lock()
	began := time.Now()
	sink.start = began
	sink.mu.Unlock()
	done := make(chan error, 1)
	go func() { done <- pool.Run(runCtx) }()

	// Done when the sink has accepted as many deliveries as there were jobs (the store's count
	// of a large backlog is too costly to poll; the count at the end checks it).
	deadline := began.Add(window)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for ctx.Err() == nil && time.Now().Before(deadline) {
		<-tick.C
		sink.mu.Lock()
		all := sink.accepted >= res.depthBefore
		sink.mu.Unlock()
		if all {
			break
		}
	}
	res.window = time.Since(began)
	stop()
	if err := <-done; err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if res.left, err = st.Depth(ctx); err != nil {
		return nil, err
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	res.attempts, res.accepted, res.maxInflight = sink.attempts, sink.accepted, sink.maxInflight
	res.perSecond = append([]int(nil), sink.perSecond...)
	res.outOfOrder, res.maxBehind, res.redelivered = sink.outOfOrder, sink.maxBehind, sink.redelivered
	return res, nil
}
