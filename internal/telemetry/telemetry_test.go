package telemetry

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.opentelemetry.io/otel/trace"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestReadConfig(t *testing.T) {
	cases := []struct {
		name    string
		env     map[string]string
		enabled bool
		err     string
	}{
		{name: "nothing set: off, no exporter", env: nil},
		{name: "exporter none wins over an endpoint", env: map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}},
		{name: "SDK disabled", env: map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}},
		{name: "an endpoint alone turns it on", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, enabled: true},
		{name: "exporter otlp with the default endpoint", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, enabled: true},
		{name: "the traces endpoint, grpc", env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, enabled: true},
		{name: "ratio sampler", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.25"}, enabled: true},
		{name: "unknown exporter", env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, err: "OTEL_TRACES_EXPORTER"},
		{name: "unknown protocol", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, err: "protocol"},
		{name: "endpoint without a host", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4318"}, err: "endpoint"},
		{name: "sampler arg out of range", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "2"}, err: "OTEL_TRACES_SAMPLER_ARG"},
		{name: "unknown sampler", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_TRACES_SAMPLER": "sometimes"}, err: "OTEL_TRACES_SAMPLER"},
		{name: "resource attributes that do not parse", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_RESOURCE_ATTRIBUTES": "no-equals-sign"}, err: "OTEL_RESOURCE_ATTRIBUTES"},
		{name: "SDK_DISABLED not a bool", env: map[string]string{"OTEL_SDK_DISABLED": "maybe"}, err: "OTEL_SDK_DISABLED"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := readConfig(env(c.env))
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error = %v, want one naming %s", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.enabled != c.enabled {
				t.Fatalf("enabled = %v, want %v", got.enabled, c.enabled)
			}
		})
	}
}

// A malformed setting is one log line, and the process goes on without tracing.
func TestSetupMalformedLogsOnceAndRunsOff(t *testing.T) {
	var lines []string
	log := funcr.New(func(prefix, args string) { lines = append(lines, args) }, funcr.Options{})
	tr := Setup(context.Background(), Options{Service: "x", Log: log, Getenv: env(map[string]string{"OTEL_TRACES_EXPORTER": "jaeger"})})
	if tr.Enabled() {
		t.Fatal("tracing is on after a malformed setting")
	}
	if len(lines) != 1 || !strings.Contains(lines[0], "jaeger") {
		t.Fatalf("log lines = %q, want one naming the bad value", lines)
	}
	if _, span := tr.Start(context.Background(), "x", trace.SpanKindServer); span.IsRecording() {
		t.Fatal("a disabled Tracing recorded a span")
	}
}

// Off, Start neither allocates nor changes the context.
func TestStartDisabledAllocatesNothing(t *testing.T) {
	tr := &Tracing{}
	ctx := context.Background()
	allocs := testing.AllocsPerRun(100, func() {
		c, span := tr.Start(ctx, "x", trace.SpanKindServer)
		if span.IsRecording() {
			span.SetAttributes()
		}
		span.End()
		_ = Encode(c)
		_ = c
	})
	if allocs != 0 {
		t.Fatalf("allocations per disabled span = %v, want 0", allocs)
	}
}

// An unreachable collector: spans are dropped and counted, nothing blocks.
func TestUnreachableCollectorCountsDropped(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	reg := prometheus.NewRegistry()
	tr := Setup(context.Background(), Options{Service: "x", Log: logr.Discard(), Registerer: reg, Getenv: env(map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": "http://" + addr, "OTEL_EXPORTER_OTLP_TIMEOUT": "500",
	})})
	if !tr.Enabled() {
		t.Fatal("tracing is off")
	}
	for range 3 {
		_, span := tr.Start(context.Background(), "x", trace.SpanKindServer)
		span.End()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := tr.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	if got := testutil.ToFloat64(tr.Dropped()); got != 3 {
		t.Fatalf("dropped = %v, want 3", got)
	}
}

func TestEncodeDecode(t *testing.T) {
	tid, _ := trace.TraceIDFromHex("0af7651916cd43dd8448eb211c80319c")
	sid, _ := trace.SpanIDFromHex("b7ad6b7169203331")
	ts, _ := trace.ParseTraceState("hw=1,other=x")
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, TraceState: ts})
	ctx := trace.ContextWithSpanContext(context.Background(), sc)
	s := Encode(ctx)
	if want := "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\nhw=1,other=x"; s != want {
		t.Fatalf("Encode = %q, want %q", s, want)
	}
	got := trace.SpanContextFromContext(Decode(context.Background(), s))
	if !got.Equal(sc.WithRemote(true)) {
		t.Fatalf("Decode = %+v, want %+v", got, sc)
	}
	if Encode(context.Background()) != "" {
		t.Fatal("Encode without a span is not empty")
	}
	if trace.SpanContextFromContext(Decode(context.Background(), "garbage")).IsValid() {
		t.Fatal("a malformed stored value gave a span context")
	}
}
