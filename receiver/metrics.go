package receiver

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics of the receiving side. The delivery side has its own (package deliver).
type Metrics struct {
	requests   *prometheus.CounterVec
	ackSeconds prometheus.Histogram
	depth      prometheus.Gauge
	promise    *prometheus.GaugeVec
}

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
	}
	reg.MustRegister(m.requests, m.ackSeconds, m.depth, m.promise)
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
// times results: bounded by the subscriptions, never by what is sent).
func (m *Metrics) addRoute(namespace, name string) {
	if m == nil {
		return
	}
	for _, r := range Results() {
		m.requests.WithLabelValues(namespace, name, r)
	}
}

// forgetRoute drops the series of a route that is gone.
func (m *Metrics) forgetRoute(namespace, name string) {
	if m != nil {
		m.requests.DeletePartialMatch(prometheus.Labels{"namespace": namespace, "name": name})
	}
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
