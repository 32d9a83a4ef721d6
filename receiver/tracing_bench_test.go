package receiver_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookwarden/hookwarden/internal/telemetry"
	"github.com/hookwarden/hookwarden/providers"
	"github.com/hookwarden/hookwarden/providers/stripe"
	"github.com/hookwarden/hookwarden/receiver"
	"github.com/hookwarden/hookwarden/receiver/store"
)

// BenchmarkAckPathTracing prints the ack path's CPU per request (verify, SQLite group commit,
// answer; the process's user+system CPU, so the span exporter's goroutine counts) with tracing
// off and with tracing on at 100 % sampling to a local OTLP/HTTP endpoint, side by side in one
// run. Goal (issue 31): on ≤ 1.15 × off. Run: go test ./receiver/ -run '^$' -bench AckPathTracing -benchtime 3000x
func BenchmarkAckPathTracing(b *testing.B) {
	otlp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = new(bytes.Buffer).ReadFrom(r.Body)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer otlp.Close()
	on := telemetry.Setup(context.Background(), telemetry.Options{Service: "bench", Log: logr.Discard(),
		Getenv: func(k string) string {
			return map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": otlp.URL, "OTEL_TRACES_SAMPLER": "always_on"}[k]
		}})
	if !on.Enabled() {
		b.Fatal("tracing did not start")
	}
	defer func() { _ = on.Shutdown(context.Background()) }()

	perReq := map[string]time.Duration{}
	for _, mode := range []struct {
		name    string
		tracing *telemetry.Tracing
	}{{"off", nil}, {"on", on}} {
		st, err := store.OpenSQLite(filepath.Join(b.TempDir(), "ledger.db"))
		if err != nil {
			b.Fatal(err)
		}
		batcher := store.NewBatcher(st, store.BatcherOptions{})
		routes := receiver.NewRoutes()
		routes.Set(receiver.Route{Namespace: "shop", Name: "orders", UID: "uid-1", Provider: "stripe", Secrets: [][]byte{[]byte("whsec_bench")},
			Sinks: receiver.OneHTTPSink("http://127.0.0.1:9/unused"), MaxAttempts: 5, DedupeWindow: time.Hour})
		h := (&receiver.Handler{Routes: routes, Verifiers: map[string]providers.Verifier{"stripe": stripe.NewVerifier()},
			Claims: batcher, MaxBody: 1 << 20, ClaimTimeout: 5 * time.Second, Metrics: receiver.NewMetrics(prometheus.NewRegistry()),
			Log: logr.Discard(), Now: time.Now, Tracing: mode.tracing}).Mux()
		reqs := make([]*http.Request, b.N)
		for i := range reqs {
			body := []byte(fmt.Sprintf(`{"id":"evt_%s_%d","object":"event","type":"invoice.paid"}`, mode.name, i))
			r := httptest.NewRequest(http.MethodPost, "/hooks/shop/orders", bytes.NewReader(body))
			r.Header.Set("Content-Type", "application/json")
			r.Header.Set(stripe.SignatureHeader, stripe.SignHeader("whsec_bench", time.Now(), body))
			reqs[i] = r
		}
		before := cpu()
		for _, r := range reqs {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != http.StatusAccepted {
				b.Fatalf("%s: status %d %s", mode.name, w.Code, w.Body)
			}
		}
		if mode.tracing != nil {
			// The exporter's work for these spans counts too.
			_ = mode.tracing.Shutdown(context.Background())
		}
		perReq[mode.name] = (cpu() - before) / time.Duration(b.N)
		batcher.Close()
		_ = st.Close()
	}
	ratio := float64(perReq["on"]) / float64(perReq["off"])
	b.ReportMetric(float64(perReq["off"].Microseconds()), "off-cpu-µs/req")
	b.ReportMetric(float64(perReq["on"].Microseconds()), "on-cpu-µs/req")
	b.ReportMetric(ratio, "on/off")
	met := "met"
	if ratio > 1.15 {
		met = "NOT met"
	}
	b.Logf("ack path CPU per request, %d requests each: tracing off %s | on (100%% sampled, OTLP/HTTP to a local endpoint) %s | ratio %.2f× (goal ≤ 1.15×: %s)",
		b.N, perReq["off"], perReq["on"], ratio, met)
}

// cpu is the process's user+system CPU time so far.
func cpu() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
