package telemetry

import (
	"net/http"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// AttrRateLimitWait is the time, in seconds, a request waited for its credential's pace
// before it was sent (set by whoever paces, on the request's span).
const AttrRateLimitWait = attribute.Key("hookwarden.rate_limit.wait")

// Transport is next with one client span per request (HTTP client conventions), a child of
// the span in the request's context. It writes no trace context into the request: the
// requests it carries go to third parties (a provider's API), which get none of our trace or
// span ids. Disabled, it returns next itself.
func (t *Tracing) Transport(next http.RoundTripper) http.RoundTripper {
	if !t.Enabled() {
		return next
	}
	if next == nil {
		next = http.DefaultTransport
	}
	return &tracedTransport{t: t, next: next}
}

type tracedTransport struct {
	t    *Tracing
	next http.RoundTripper
}

func (tt *tracedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, span := tt.t.Start(req.Context(), req.Method, trace.SpanKindClient)
	defer span.End()
	port, err := strconv.Atoi(req.URL.Port())
	if err != nil {
		port = defaultPort(req.URL.Scheme)
	}
	span.SetAttributes(
		semconv.HTTPRequestMethodKey.String(req.Method),
		semconv.URLScheme(req.URL.Scheme),
		semconv.URLPath(req.URL.Path), // no query: it may name what a list looks for
		semconv.ServerAddress(req.URL.Hostname()),
		semconv.ServerPort(port),
	)
	resp, err := tt.next.RoundTrip(req.WithContext(ctx))
	if err != nil {
		span.SetAttributes(semconv.ErrorTypeKey.String("transport"))
		span.SetStatus(codes.Error, err.Error())
		return resp, err
	}
	span.SetAttributes(semconv.HTTPResponseStatusCode(resp.StatusCode))
	if ra := resp.Header.Values("Retry-After"); len(ra) > 0 {
		// What the provider states it wants waited (a rate limit, an outage).
		span.SetAttributes(attribute.StringSlice("http.response.header.retry-after", ra))
	}
	if resp.StatusCode >= 400 {
		span.SetAttributes(semconv.ErrorTypeKey.String(strconv.Itoa(resp.StatusCode)))
		span.SetStatus(codes.Error, "")
	}
	return resp, nil
}

func defaultPort(scheme string) int {
	if scheme == "http" {
		return 80
	}
	return 443
}
