// Package telemetry sets up OpenTelemetry tracing from the standard OTEL_* environment
// variables, and carries trace context across the receiver's hops (a ledger row, an HTTP
// request, a broker message).
//
// Tracing is off unless configured: without OTEL_TRACES_EXPORTER=otlp or an OTLP endpoint, the
// Tracing is disabled, starts no exporter goroutine and allocates nothing per span (Start
// hands back the caller's context and a no-op span). A malformed setting is reported once and
// leaves tracing off: a process never refuses work because its tracing is misconfigured.
package telemetry

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Options set up a Tracing.
type Options struct {
	// Service is the service.name when OTEL_SERVICE_NAME does not set one.
	Service string
	// Version is the service.version.
	Version string
	// Getenv reads the environment (default os.Getenv).
	Getenv func(string) string
	// Registerer gets hookwarden_trace_spans_dropped_total (nil: not registered).
	Registerer prometheus.Registerer
	// Log gets the one line that says whether, and where, spans are exported.
	Log logr.Logger
}

// Tracing is a process's tracer provider. The zero value and nil are disabled.
type Tracing struct {
	provider *sdktrace.TracerProvider // nil when disabled
	tracer   trace.Tracer
	dropped  prometheus.Counter
}

// Enabled reports whether spans are recorded and exported.
func (t *Tracing) Enabled() bool { return t != nil && t.provider != nil }

// TracerProvider is the provider for instrumentation libraries: a no-op one when disabled.
func (t *Tracing) TracerProvider() trace.TracerProvider {
	if !t.Enabled() {
		return noop.NewTracerProvider()
	}
	return t.provider
}

// Propagator is the W3C Trace Context propagator (traceparent, tracestate).
func Propagator() propagation.TextMapPropagator { return propagation.TraceContext{} }

// noopSpan is handed out when tracing is off: a value, so returning it allocates nothing.
var noopSpan = trace.SpanFromContext(context.Background())

// Start starts a span named name of kind under ctx's span (opts: links, a new root). Disabled,
// it returns ctx itself and a no-op span, without allocating: callers guard attribute work with
// span.IsRecording().
func (t *Tracing) Start(ctx context.Context, name string, kind trace.SpanKind, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if !t.Enabled() {
		return ctx, noopSpan
	}
	return t.tracer.Start(ctx, name, append(opts, trace.WithSpanKind(kind))...)
}

// Shutdown flushes the spans not yet exported and stops the exporter (a no-op when disabled).
func (t *Tracing) Shutdown(ctx context.Context) error {
	if !t.Enabled() {
		return nil
	}
	return t.provider.Shutdown(ctx)
}

// Setup reads the OTEL_* environment and returns the process's Tracing. It never fails: a
// malformed setting is logged once and tracing stays off.
//
// Read here: OTEL_SDK_DISABLED, OTEL_TRACES_EXPORTER (otlp or none), OTEL_EXPORTER_OTLP_ENDPOINT
// and OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, OTEL_EXPORTER_OTLP(_TRACES)_PROTOCOL (http/protobuf or
// grpc), OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG. The OTel SDK and exporters read the
// rest themselves: OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES, OTEL_EXPORTER_OTLP_HEADERS,
// _INSECURE, _CERTIFICATE, _COMPRESSION, _TIMEOUT, OTEL_BSP_*.
func Setup(ctx context.Context, o Options) *Tracing {
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	cfg, err := readConfig(o.Getenv)
	if err != nil {
		o.Log.Info("Tracing off: malformed OpenTelemetry setting", "error", err.Error())
		return &Tracing{}
	}
	if !cfg.enabled {
		return &Tracing{}
	}
	t, err := start(ctx, cfg, o)
	if err != nil {
		o.Log.Info("Tracing off: the OpenTelemetry exporter could not be set up", "error", err.Error())
		return &Tracing{}
	}
	o.Log.Info("Tracing on", "endpoint", cfg.endpoint, "protocol", cfg.protocol, "sampler", cfg.samplerName)
	return t
}

// config is what Setup reads from the environment.
type config struct {
	enabled  bool
	protocol string // http/protobuf or grpc
	endpoint string // for the log line
	// url is the exporter's endpoint URL ("": the exporter's default, localhost).
	url         string
	sampler     sdktrace.Sampler
	samplerName string
	// attrs are OTEL_RESOURCE_ATTRIBUTES, then service.name from OTEL_SERVICE_NAME.
	attrs []attribute.KeyValue
}

// resourceAttributes parses OTEL_RESOURCE_ATTRIBUTES: key=value pairs separated by commas,
// values percent-encoded. The SDK parses it too but drops a malformed list with an error only
// the global handler sees.
func resourceAttributes(v string) ([]attribute.KeyValue, error) {
	var attrs []attribute.KeyValue
	for _, member := range strings.Split(v, ",") {
		if strings.TrimSpace(member) == "" {
			continue
		}
		key, value, ok := strings.Cut(member, "=")
		key = strings.TrimSpace(key)
		if !ok || key == "" {
			return nil, fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES: %q is not key=value", member)
		}
		decoded, err := url.PathUnescape(strings.TrimSpace(value))
		if err != nil {
			return nil, fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES: the value of %s is not percent-encoded", key)
		}
		attrs = append(attrs, attribute.String(key, decoded))
	}
	return attrs, nil
}

func readConfig(getenv func(string) string) (config, error) {
	var c config
	if v := strings.TrimSpace(getenv("OTEL_SDK_DISABLED")); v != "" {
		off, err := strconv.ParseBool(v)
		if err != nil {
			return c, fmt.Errorf("OTEL_SDK_DISABLED=%q is not true or false", v)
		}
		if off {
			return c, nil
		}
	}
	endpoint := firstSet(getenv, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
	switch exp := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); exp {
	case "none":
		return c, nil
	case "":
		// Off unless configured: an endpoint alone is a request to export there.
		if endpoint == "" {
			return c, nil
		}
	case "otlp":
	default:
		return c, fmt.Errorf("OTEL_TRACES_EXPORTER=%q: this build exports otlp or none", exp)
	}
	if endpoint != "" {
		if u, err := url.Parse(endpoint); err != nil || u.Host == "" {
			return c, fmt.Errorf("the OTLP endpoint %q is not a URL with a host (http://collector:4318)", endpoint)
		}
	}
	c.protocol = firstSet(getenv, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
	switch c.protocol {
	case "":
		c.protocol = "http/protobuf"
	case "http/protobuf", "grpc":
	default:
		return c, fmt.Errorf("OTLP protocol %q: use http/protobuf or grpc", c.protocol)
	}
	c.endpoint, c.url = endpoint, endpoint
	if base := firstSet(getenv, "OTEL_EXPORTER_OTLP_ENDPOINT"); base != "" && c.protocol == "http/protobuf" &&
		firstSet(getenv, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
		// The base endpoint names the collector; OTLP/HTTP appends the signal's path.
		c.url = strings.TrimSuffix(base, "/") + "/v1/traces"
	}
	if c.endpoint == "" {
		c.endpoint = "(default)"
	}
	var err error
	c.samplerName, c.sampler, err = sampler(getenv)
	if err != nil {
		return c, err
	}
	if c.attrs, err = resourceAttributes(getenv("OTEL_RESOURCE_ATTRIBUTES")); err != nil {
		return c, err
	}
	if name := strings.TrimSpace(getenv("OTEL_SERVICE_NAME")); name != "" {
		c.attrs = append(c.attrs, semconv.ServiceName(name))
	}
	c.enabled = true
	return c, nil
}

// sampler reads OTEL_TRACES_SAMPLER(_ARG). The SDK reads them too, but only logs a bad value
// through the global error handler; here a bad value is a malformed setting like any other.
func sampler(getenv func(string) string) (string, sdktrace.Sampler, error) {
	name := strings.TrimSpace(getenv("OTEL_TRACES_SAMPLER"))
	arg := strings.TrimSpace(getenv("OTEL_TRACES_SAMPLER_ARG"))
	ratio := func() (float64, error) {
		if arg == "" {
			return 1, nil
		}
		r, err := strconv.ParseFloat(arg, 64)
		if err != nil || r < 0 || r > 1 {
			return 0, fmt.Errorf("OTEL_TRACES_SAMPLER_ARG=%q is not a ratio between 0 and 1", arg)
		}
		return r, nil
	}
	switch name {
	case "", "parentbased_always_on":
		return "parentbased_always_on", sdktrace.ParentBased(sdktrace.AlwaysSample()), nil
	case "always_on":
		return name, sdktrace.AlwaysSample(), nil
	case "always_off":
		return name, sdktrace.NeverSample(), nil
	case "parentbased_always_off":
		return name, sdktrace.ParentBased(sdktrace.NeverSample()), nil
	case "traceidratio", "parentbased_traceidratio":
		r, err := ratio()
		if err != nil {
			return "", nil, err
		}
		s := sdktrace.TraceIDRatioBased(r)
		if name == "parentbased_traceidratio" {
			s = sdktrace.ParentBased(s)
		}
		return fmt.Sprintf("%s(%g)", name, r), s, nil
	}
	return "", nil, fmt.Errorf("OTEL_TRACES_SAMPLER=%q is not a known sampler (always_on, always_off, traceidratio, parentbased_*)", name)
}

func firstSet(getenv func(string) string, keys ...string) string {
	for _, k := range keys {
		if v := strings.TrimSpace(getenv(k)); v != "" {
			return v
		}
	}
	return ""
}

func start(ctx context.Context, cfg config, o Options) (*Tracing, error) {
	var exp sdktrace.SpanExporter
	var err error
	// A short retry: with the collector down, a batch is given up (and counted) in seconds
	// instead of the exporter's default minute, during which the queue fills.
	if cfg.protocol == "grpc" {
		opts := []otlptracegrpc.Option{otlptracegrpc.WithRetry(otlptracegrpc.RetryConfig{
			Enabled: true, InitialInterval: time.Second, MaxInterval: 5 * time.Second, MaxElapsedTime: 10 * time.Second})}
		if cfg.url != "" {
			opts = append(opts, otlptracegrpc.WithEndpointURL(cfg.url))
		}
		exp, err = otlptracegrpc.New(ctx, opts...)
	} else {
		opts := []otlptracehttp.Option{otlptracehttp.WithRetry(otlptracehttp.RetryConfig{
			Enabled: true, InitialInterval: time.Second, MaxInterval: 5 * time.Second, MaxElapsedTime: 10 * time.Second})}
		if cfg.url != "" {
			opts = append(opts, otlptracehttp.WithEndpointURL(cfg.url))
		}
		exp, err = otlptracehttp.New(ctx, opts...)
	}
	if err != nil {
		return nil, err
	}
	res, err := resource.Merge(
		resource.NewSchemaless(semconv.ServiceName(o.Service), semconv.ServiceVersion(o.Version)),
		// Later wins: OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME over the defaults.
		resource.NewSchemaless(cfg.attrs...),
	)
	if err != nil {
		return nil, err
	}
	dropped := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "hookwarden_trace_spans_dropped_total",
		Help: "Spans that could not be exported (the collector unreachable or refusing them); deliveries are not affected.",
	})
	if o.Registerer != nil {
		if err := o.Registerer.Register(dropped); err != nil {
			return nil, err
		}
	}
	counted := &countingExporter{SpanExporter: exp, dropped: dropped, log: o.Log}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithSampler(cfg.sampler),
		sdktrace.WithResource(res),
		sdktrace.WithBatcher(counted),
	)
	return &Tracing{provider: tp, tracer: tp.Tracer("github.com/hookwarden/hookwarden"), dropped: dropped}, nil
}

// countingExporter counts the spans of failed exports instead of handing the error to the
// global OTel error handler: with the collector down, every batch would log a line. The first
// failure after a success is logged; the counter says the rest.
type countingExporter struct {
	sdktrace.SpanExporter
	dropped prometheus.Counter
	log     logr.Logger
	failing bool // touched by the batch processor's one goroutine only
	last    time.Time
}

func (e *countingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	err := e.SpanExporter.ExportSpans(ctx, spans)
	if err == nil {
		e.failing = false
		return nil
	}
	e.dropped.Add(float64(len(spans)))
	if !e.failing || time.Since(e.last) > 10*time.Minute {
		e.log.Info("Exporting spans failed; spans are dropped and counted in hookwarden_trace_spans_dropped_total until the collector answers",
			"error", err.Error(), "spans", len(spans))
		e.last = time.Now()
	}
	e.failing = true
	return nil
}

// Dropped is the counter of spans lost to failed exports (nil when disabled); tests read it.
func (t *Tracing) Dropped() prometheus.Counter {
	if !t.Enabled() {
		return nil
	}
	return t.dropped
}

// New is a Tracing over tp, an SDK provider set up by the caller (tests: one with an in-memory
// exporter); nil is disabled. Setup is how a process gets its own.
func New(tp *sdktrace.TracerProvider) *Tracing {
	if tp == nil {
		return &Tracing{}
	}
	return &Tracing{provider: tp, tracer: tp.Tracer("github.com/hookwarden/hookwarden")}
}
