package receiver

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookwarden/hookwarden/receiver/store"
)

// Metrics of the receiving side. The delivery side has its own (package deliver).
type Metrics struct {
	requests   *prometheus.CounterVec
	ackSeconds prometheus.Histogram
	depth      prometheus.Gauge
	promise    *prometheus.GaugeVec
	// sinkDepth and sinkOldest are the backlog of each sink (PollStore).
	sinkDepth, sinkOldest *prometheus.GaugeVec

	mu sync.Mutex
	// routeSinks are the sinks of each route ("namespace/name"), whose series exist at 0 while
	// the route does; polled are the series the last poll found a backlog for.
	routeSinks map[string][]string
	polled     map[sinkSeries]bool
}

// sinkSeries names the backlog series of one sink of one subscription.
type sinkSeries struct{ namespace, name, sink string }

// NewMetrics registers the receiver's metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hookwarden_receiver_requests_total",
			Help: "Incoming deliveries by subscription (namespace, name; both empty for an unknown route) and result: accepted, duplicate, ping (a provider's authentic test delivery: answered, never delivered), bad_signature, too_old, too_new, unknown_route, too_large, no_event_id, invalid_event (authentic, but its event id, type or content type cannot be recorded, or its id or type is ambiguous), bad_request (body unreadable), store_error.",
		}, []string{"namespace", "name", "result"}),
		ackSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "hookwarden_receiver_ack_seconds",
			Help:    "Time from request to acknowledgement (including the durable commit).",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}),
		depth: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "hookwarden_receiver_queue_depth",
			Help: "Deliveries not yet completed or dead-lettered.",
		}),
		promise: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hookwarden_receiver_store_promise",
			Help: "1 for the promise the store keeps (strict: an acknowledged event is never lost and a redelivery inside the " +
				"dedupe window is a duplicate; at-least-once: never lost, a redelivery may reach the sink again; best-effort: " +
				"acknowledged events can be lost), by store kind.",
		}, []string{"store", "promise"}),
		sinkDepth: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hookwarden_receiver_sink_queue_depth",
			Help: "Deliveries to a subscription's sink not yet completed or dead-lettered (pending, waiting behind their ordering key, running, or waiting for a retry).",
		}, []string{"namespace", "name", "sink"}),
		sinkOldest: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hookwarden_receiver_sink_oldest_pending_seconds",
			Help: "Age of the oldest event a subscription's sink has not yet completed or dead-lettered, from its receipt: how far the sink lags behind (0 when nothing waits).",
		}, []string{"namespace", "name", "sink"}),
		routeSinks: map[string][]string{},
		polled:     map[sinkSeries]bool{},
	}
	reg.MustRegister(m.requests, m.ackSeconds, m.depth, m.promise, m.sinkDepth, m.sinkOldest)
	// Every result exists at 0 from the start (a route's, from when the route is known): an
	// alert on rate() or absent() of a result that has not happened yet would otherwise see no
	// series at all. A request for an unknown route is counted without its path: those labels
	// would be whatever a stranger sends.
	m.requests.WithLabelValues("", "", resultUnknownRoute)
	return m
}

// observeRequest counts one request for route namespace/name ("", "" for an unknown route).
func (m *Metrics) observeRequest(namespace, name, result string, d time.Duration) {
	if m == nil {
		return
	}
	m.requests.WithLabelValues(namespace, name, result).Inc()
	m.ackSeconds.Observe(d.Seconds())
}

// addRoute creates every result's series of a route at 0 (as many series as subscriptions
// times results: bounded by the subscriptions, never by what is sent), and the backlog series
// of each of its sinks (none: the store's default sink, where its events wait); a sink the
// route no longer has keeps its series only while the store holds a backlog for it.
func (m *Metrics) addRoute(namespace, name string, sinks []string) {
	if m == nil {
		return
	}
	for _, r := range Results() {
		m.requests.WithLabelValues(namespace, name, r)
	}
	if len(sinks) == 0 {
		sinks = []string{store.DefaultSink}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	key := namespace + "/" + name
	for _, old := range m.routeSinks[key] {
		if k := (sinkSeries{namespace, name, old}); !slices.Contains(sinks, old) && !m.polled[k] {
			m.deleteSink(k)
		}
	}
	m.routeSinks[key] = slices.Clone(sinks)
	for _, sink := range sinks {
		m.sinkDepth.WithLabelValues(namespace, name, sink)
		m.sinkOldest.WithLabelValues(namespace, name, sink)
	}
}

// forgetRoute drops the series of a route that is gone (a backlog the store still holds for
// it comes back with the next poll).
func (m *Metrics) forgetRoute(namespace, name string) {
	if m == nil {
		return
	}
	route := prometheus.Labels{"namespace": namespace, "name": name}
	m.requests.DeletePartialMatch(route)
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.routeSinks, namespace+"/"+name)
	m.sinkDepth.DeletePartialMatch(route)
	m.sinkOldest.DeletePartialMatch(route)
	for k := range m.polled {
		if k.namespace == namespace && k.name == name {
			delete(m.polled, k)
		}
	}
}

func (m *Metrics) deleteSink(k sinkSeries) {
	m.sinkDepth.DeleteLabelValues(k.namespace, k.name, k.sink)
	m.sinkOldest.DeleteLabelValues(k.namespace, k.name, k.sink)
}

// PollStore reads the queue depth and each sink's backlog from st into the gauges (the
// receiver calls it every few seconds). A sink whose backlog drained goes to 0 while its route
// has it, and its series goes otherwise: the series are bounded by the routes' sinks (at most
// store.MaxSinks each) and the sinks the store holds jobs for.
func (m *Metrics) PollStore(ctx context.Context, st store.Store, now time.Time) error {
	n, err := st.Depth(ctx)
	if err == nil {
		m.SetDepth(n)
	}
	depths, serr := st.SinkDepths(ctx)
	if serr == nil {
		m.setSinkDepths(depths, now)
	}
	return errors.Join(err, serr)
}

func (m *Metrics) setSinkDepths(depths []store.SinkDepth, now time.Time) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	next := make(map[sinkSeries]bool, len(depths))
	for _, d := range depths {
		namespace, name, ok := strings.Cut(d.Subscription, "/")
		if !ok {
			continue
		}
		k := sinkSeries{namespace, name, d.Sink}
		next[k] = true
		m.sinkDepth.WithLabelValues(namespace, name, d.Sink).Set(float64(d.Jobs))
		m.sinkOldest.WithLabelValues(namespace, name, d.Sink).Set(max(now.Sub(d.OldestReceived).Seconds(), 0))
	}
	for k := range m.polled {
		switch {
		case next[k]:
		case slices.Contains(m.routeSinks[k.namespace+"/"+k.name], k.sink):
			m.sinkDepth.WithLabelValues(k.namespace, k.name, k.sink).Set(0)
			m.sinkOldest.WithLabelValues(k.namespace, k.name, k.sink).Set(0)
		default:
			m.deleteSink(k)
		}
	}
	m.polled = next
}

// SetDepth records the queue depth (polled from the store).
func (m *Metrics) SetDepth(n int) {
	if m != nil {
		m.depth.Set(float64(n))
	}
}

// SetStorePromise records the promise the store keeps (read when it was opened).
func (m *Metrics) SetStorePromise(store, promise string) {
	if m != nil {
		m.promise.Reset()
		m.promise.WithLabelValues(store, promise).Set(1)
	}
}
