package receiver

import (
	"context"
	"net"
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/hookwarden/hookwarden/internal/telemetry"
)

// Span attributes of a delivery, beside the HTTP semantic conventions.
const (
	attrProvider  = attribute.Key("hookwarden.provider")
	attrResult    = attribute.Key("hookwarden.result")
	attrReason    = attribute.Key("hookwarden.refused.reason")
	attrEventType = attribute.Key("cloudevents.event_type")
	attrDuplicate = attribute.Key("hookwarden.duplicate")
	attrVia       = attribute.Key("hookwarden.delivery.via")
)

// viaRecovery is hookwarden.delivery.via of a delivery the manager's recovery run handed over.
const viaRecovery = "recovery"

// routePattern is the http.route of every delivery.
const routePattern = "/hooks/{namespace}/{name}"

// startServer starts the delivery's server span, the root of the event's trace: a traceparent
// on the request is not continued, whoever sent it (a provider's or a proxy's ids are not ours
// to join, and its sampled flag would decide ours); a recovery hand-over is linked to its run
// once verified (spanHandover). Tracing off, it returns r as it is and a no-op span.
func (h *Handler) startServer(r *http.Request) (*http.Request, trace.Span) {
	if !h.Tracing.Enabled() {
		return r, trace.SpanFromContext(r.Context())
	}
	ctx, span := h.Tracing.Start(r.Context(), http.MethodPost+" "+routePattern, trace.SpanKindServer)
	attrs := []attribute.KeyValue{
		semconv.HTTPRequestMethodKey.String(r.Method),
		semconv.HTTPRoute(routePattern),
		semconv.URLPath(r.URL.Path),
		semconv.URLScheme(scheme(r)),
		semconv.NetworkProtocolVersion(protoVersion(r)),
	}
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		attrs = append(attrs, semconv.ClientAddress(host))
	}
	if ua := r.UserAgent(); ua != "" {
		attrs = append(attrs, semconv.UserAgentOriginal(ua))
	}
	span.SetAttributes(attrs...)
	return r.WithContext(ctx), span
}

// spanHandover links the delivery's span to the recovery page span that handed it over, when
// the request is a hand-over the manager signed (telemetry.Handover) for one of the route's
// secrets; route is looked up again for a secret a refresh during verify brought in. Any
// other request, a traceparent or not, gets no link.
func (h *Handler) spanHandover(r *http.Request, route Route, body []byte) {
	span := trace.SpanFromContext(r.Context())
	if !span.IsRecording() || r.Header.Get(telemetry.HeaderRecovery) == "" {
		return
	}
	sc, ok := telemetry.Handover(r.Header, route.Secrets, body)
	if !ok {
		if fresh, found := h.Routes.Lookup(route.Namespace, route.Name); found {
			sc, ok = telemetry.Handover(r.Header, fresh.Secrets, body)
		}
	}
	if ok {
		span.AddLink(trace.Link{SpanContext: sc})
		span.SetAttributes(attrVia.String(viaRecovery))
	}
}

// endServer records the delivery's result and status on its server span and ends it.
func endServer(span trace.Span, result string, status int) {
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(attrResult.String(result), semconv.HTTPResponseStatusCode(status))
	if status >= 500 {
		span.SetStatus(codes.Error, result)
	}
	span.End()
}

// spanRoute names the route on the delivery's span.
func spanRoute(ctx context.Context, route Route) {
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(telemetry.AttrSubscription.String(route.Key()), attrProvider.String(route.Provider))
	}
}

// spanRefused says why a delivery was refused, on its span and the child's (verify).
func spanRefused(ctx context.Context, child trace.Span, reason string) {
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(attrReason.String(reason))
	}
	if child.IsRecording() {
		child.SetStatus(codes.Error, reason)
	}
}

// spanEvent tags the delivery's span and the commit's with the event.
func spanEvent(ctx context.Context, commit trace.Span, eventID, eventType string) {
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(telemetry.AttrEventID.String(eventID), attrEventType.String(eventType))
		commit.SetAttributes(telemetry.AttrEventID.String(eventID))
	}
}

// endCommit ends the ledger commit's span with its outcome.
func endCommit(span trace.Span, duplicate bool, err error) {
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(attrDuplicate.Bool(duplicate))
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

func scheme(r *http.Request) string {
	if r.TLS != nil {
		return "https"
	}
	return "http"
}

func protoVersion(r *http.Request) string {
	switch r.ProtoMajor {
	case 2:
		return "2"
	case 3:
		return "3"
	}
	return "1.1"
}
