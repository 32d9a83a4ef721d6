package deliver

import (
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookwarden/hookwarden/receiver/store"
)

// Attempt results, the values of the result label.
const (
	ResultDelivered = "delivered"
	ResultRetry     = "retry"
	ResultDead      = "dead"
	// ResultReturned counts a leased job given back unsent and uncounted (not started in time,
	// held back for its sink's share, shutdown, a sink that is misconfigured or gone): not an
	// attempt, so not a retry.
	ResultReturned = "returned"
)

// Metrics are the delivery metrics. A nil *Metrics records nothing.
type Metrics struct {
	attempts    *prometheus.CounterVec
	sinks       *prometheus.CounterVec
	duplicates  *prometheus.CounterVec
	deadLetters prometheus.Counter
	endToEnd    prometheus.Histogram
}

// NewMetrics creates the delivery metrics and registers them on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hookwarden_receiver_delivery_attempts_total",
			Help: "Delivery attempts to sinks, by result (delivered, retry, dead; filtered: the sink's filter did not select the event).",
		}, []string{"result"}),
		// Labels stay bounded: a route's series (at most 8 sinks) go when the route does
		// (ForgetRoute).
		sinks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hookwarden_receiver_sink_attempts_total",
			Help: "Delivery attempts by subscription (namespace, name), sink and result (delivered, retry, dead, filtered).",
		}, []string{"namespace", "name", "sink", "result"}),
		duplicates: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hookwarden_receiver_sink_broker_duplicates_total",
			Help: "Events a broker sink acknowledged as a duplicate of one it already held (NATS JetStream's duplicate window), by subscription and sink.",
		}, []string{"namespace", "name", "sink"}),
		deadLetters: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hookwarden_receiver_dead_letters_total",
			Help: "Jobs moved to the dead-letter state.",
		}),
		endToEnd: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "hookwarden_receiver_end_to_end_seconds",
			Help: "Time from receiving an event to its successful delivery to the sink.",
			// 10 ms to about 12 h: retries with backoff stretch the tail far beyond a request.
			Buckets: prometheus.ExponentialBuckets(0.01, 4, 12),
		}),
	}
	for _, c := range []prometheus.Collector{m.attempts, m.sinks, m.duplicates, m.deadLetters, m.endToEnd} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	// Expose every result from the start so rate() sees the first increment.
	for _, r := range []string{ResultDelivered, ResultRetry, ResultDead, ResultFiltered, ResultReturned} {
		m.attempts.WithLabelValues(r)
	}
	return m, nil
}

func (m *Metrics) attempt(j store.Job, result string) {
	if m != nil {
		m.attempts.WithLabelValues(result).Inc()
		ns, name, _ := strings.Cut(j.Event.Subscription, "/")
		m.sinks.WithLabelValues(ns, name, j.Sink, result).Inc()
	}
}

func (m *Metrics) duplicate(j store.Job) {
	if m != nil {
		ns, name, _ := strings.Cut(j.Event.Subscription, "/")
		m.duplicates.WithLabelValues(ns, name, j.Sink).Inc()
	}
}

// ForgetRoute drops the per-sink series of a subscription that is gone.
func (m *Metrics) ForgetRoute(namespace, name string) {
	if m != nil {
		m.sinks.DeletePartialMatch(prometheus.Labels{"namespace": namespace, "name": name})
		m.duplicates.DeletePartialMatch(prometheus.Labels{"namespace": namespace, "name": name})
	}
}

func (m *Metrics) deadLetter() {
	if m != nil {
		m.deadLetters.Inc()
	}
}

func (m *Metrics) delivered(latency time.Duration) {
	if m != nil {
		m.endToEnd.Observe(latency.Seconds())
	}
}
