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
}

// NewMetrics registers the receiver's metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hookwarden_receiver_requests_total",
			Help: "Incoming deliveries by result: accepted, duplicate, bad_signature, too_old, too_new, unknown_route, too_large, no_event_id, bad_request (body unreadable), store_error.",
		}, []string{"result"}),
		ackSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "hookwarden_receiver_ack_seconds",
			Help:    "Time from request to acknowledgement (including the durable commit).",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}),
		depth: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "hookwarden_receiver_queue_depth",
			Help: "Deliveries not yet completed or dead-lettered.",
		}),
	}
	reg.MustRegister(m.requests, m.ackSeconds, m.depth)
	return m
}

func (m *Metrics) observeRequest(result string, d time.Duration) {
	if m == nil {
		return
	}
	m.requests.WithLabelValues(result).Inc()
	m.ackSeconds.Observe(d.Seconds())
}

// SetDepth records the queue depth (polled from the store).
func (m *Metrics) SetDepth(n int) {
	if m != nil {
		m.depth.Set(float64(n))
	}
}
