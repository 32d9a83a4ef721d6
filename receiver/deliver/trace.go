package deliver

import (
	"context"
	"net/http"
	"net/url"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/hookwarden/hookwarden/internal/telemetry"
	"github.com/hookwarden/hookwarden/receiver/store"
)

// Attributes of an attempt's span.
const (
	attrSink      = attribute.Key("hookwarden.sink")
	attrSinkType  = attribute.Key("hookwarden.sink.type")
	attrSinkReqID = attribute.Key("hookwarden.sink.request_id")
	attrAttempt   = attribute.Key("hookwarden.attempt")
	attrReplica   = attribute.Key("hookwarden.replica")
	attrOutcome   = attribute.Key("hookwarden.outcome")
	attrJobID     = attribute.Key("hookwarden.job_id")
	attrReplay    = attribute.Key("hookwarden.replay")
)

// startAttempt starts the span of one attempt at j, a child of the delivery that brought its
// event (the trace context kept in the ledger row), whichever replica makes it and however
// late. The attempt of a replay by hand (events replay, deadletters replay) starts a trace of
// its own instead, linked to the event's: the original trace stays the story of the first
// delivery, and the link leads from the replay to it. Tracing off, it returns ctx as it is and
// a no-op span.
func (p *Pool) startAttempt(ctx context.Context, j store.Job) (context.Context, trace.Span) {
	if !p.opts.Tracing.Enabled() {
		return ctx, trace.SpanFromContext(ctx)
	}
	var span trace.Span
	if j.Event.Replays > 0 {
		opts := []trace.SpanStartOption{trace.WithNewRoot()}
		if orig := trace.SpanContextFromContext(telemetry.Decode(context.Background(), j.Event.Trace)); orig.IsValid() {
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: orig, Attributes: []attribute.KeyValue{attrReplay.Int(j.Event.Replays)}}))
		}
		ctx, span = p.opts.Tracing.Start(ctx, "send "+j.Sink, trace.SpanKindClient, opts...)
		span.SetAttributes(attrReplay.Int(j.Event.Replays))
	} else {
		ctx, span = p.opts.Tracing.Start(telemetry.Decode(ctx, j.Event.Trace), "send "+j.Sink, trace.SpanKindClient)
	}
	span.SetAttributes(attrSink.String(j.Sink), attrAttempt.Int(j.Attempt), attrReplica.String(p.opts.Replica),
		telemetry.AttrSubscription.String(j.Event.Subscription), telemetry.AttrEventID.String(j.Event.EventID), attrJobID.Int64(j.ID))
	return ctx, span
}

// attempted counts an attempt's result and records it as the outcome on its span.
func (p *Pool) attempted(ctx context.Context, j store.Job, result string) {
	p.opts.Metrics.attempt(j, result)
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(attrOutcome.String(result))
		if result == ResultDead {
			span.SetStatus(codes.Error, "dead-lettered")
		}
	}
}

// spanError records why an attempt failed on its span.
func spanError(ctx context.Context, err error) {
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetStatus(codes.Error, err.Error())
	}
}

// spanHTTP describes an HTTP sink's request on the attempt's span (HTTP client conventions):
// the sink's URL without credentials or query, which may carry secrets.
func spanHTTP(ctx context.Context, target string) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	attrs := []attribute.KeyValue{attrSinkType.String("http"), semconv.HTTPRequestMethodKey.String(http.MethodPost)}
	if u, err := url.Parse(target); err == nil {
		u.User, u.RawQuery, u.Fragment = nil, "", ""
		attrs = append(attrs, semconv.URLFull(u.String()), semconv.ServerAddress(u.Hostname()))
	}
	span.SetAttributes(attrs...)
}

// spanHTTPResponse records the sink's answer: its status and its own request id, when it
// returns one.
func spanHTTPResponse(ctx context.Context, resp *http.Response) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(semconv.HTTPResponseStatusCode(resp.StatusCode))
	for _, h := range []string{"X-Request-Id", "X-Amzn-Requestid", "Request-Id"} {
		if id := resp.Header.Get(h); id != "" {
			span.SetAttributes(attrSinkReqID.String(truncate(id, 128)))
			break
		}
	}
}

// spanMessaging describes a broker sink's send on the attempt's span (messaging
// conventions; system is e.g. "nats", which the conventions do not list but allow).
func spanMessaging(ctx context.Context, system, destination, messageID string) {
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(attrSinkType.String(system), semconv.MessagingSystemKey.String(system),
			semconv.MessagingDestinationName(destination), semconv.MessagingOperationName("send"),
			semconv.MessagingOperationTypeSend, semconv.MessagingMessageID(messageID))
	}
}

// injectHTTP writes the attempt's traceparent (and tracestate) into an HTTP request's headers:
// the sink's span is then a child of the attempt.
func injectHTTP(ctx context.Context, h http.Header) {
	telemetry.Inject(ctx, propagation.HeaderCarrier(h))
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
