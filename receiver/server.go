package receiver

import (
	"context"
	"errors"
	"io"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel/trace"

	"github.com/hookwarden/hookwarden/internal/logkeys"
	"github.com/hookwarden/hookwarden/internal/telemetry"
	"github.com/hookwarden/hookwarden/providers"
	"github.com/hookwarden/hookwarden/receiver/store"
)

// Claimer records a verified event and enqueues its delivery; duplicate reports an event that
// was already recorded. store.Batcher implements it with group commits.
type Claimer interface {
	Claim(ctx context.Context, e store.Event) (duplicate bool, err error)
}

// Handler serves POST /hooks/{namespace}/{name}.
type Handler struct {
	Routes    *Routes
	Verifiers map[string]providers.Verifier // by provider type
	Claims    Claimer
	// MaxBody bounds a delivery's body (413 above it).
	MaxBody int64
	// ClaimTimeout bounds the wait for the commit; past it the provider gets 503 and retries.
	ClaimTimeout time.Duration
	Metrics      *Metrics
	Log          logr.Logger
	Now          func() time.Time
	// Refresher, when set, re-reads a route whose delivery no secret verifies (refresh.go).
	Refresher Refresher
	// Tracing gives each delivery a server span with verify and ledger-commit children, and
	// the event its trace context (nil: off, see tracing.go).
	Tracing *telemetry.Tracing
}

// Results of one delivery request, as counted in metrics.
const (
	resultAccepted     = "accepted"
	resultPing         = "ping"
	resultDuplicate    = "duplicate"
	resultBadSignature = "bad_signature"
	resultTooOld       = "too_old"
	resultTooNew       = "too_new"
	resultBadRequest   = "bad_request"
	resultUnknownRoute = "unknown_route"
	resultTooLarge     = "too_large"
	resultNoEventID    = "no_event_id"
	// resultInvalidEvent is an authentic delivery whose event the ledger cannot record (see
	// store.CheckEvent): answered 422, nothing stored.
	resultInvalidEvent = "invalid_event"
	resultStoreError   = "store_error"
)

// Results lists every value of the result label of hookwarden_receiver_requests_total.
func Results() []string {
	return []string{resultAccepted, resultPing, resultDuplicate, resultBadSignature, resultTooOld, resultTooNew,
		resultUnknownRoute, resultTooLarge, resultNoEventID, resultBadRequest, resultInvalidEvent, resultStoreError}
}

// Mux returns the receiver's HTTP routes. A request whose path is not canonical is refused
// (404 unknown_route) before routing: ServeMux would redirect a path with dot segments or
// empty ones (307, which keeps the method and body) and decode percent-escapes, so a
// delivery could reach a route under a spelling other than the URL registered for it.
func (h *Handler) Mux() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("POST /hooks/{namespace}/{name}", h)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if start := time.Now(); !canonicalPath(requestPath(r)) {
			h.Metrics.observeRequest("", "", resultUnknownRoute, time.Since(start))
			writeJSON(w, http.StatusNotFound, resultUnknownRoute)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// requestPath is the path of the request target exactly as sent, escapes included.
func requestPath(r *http.Request) string {
	if strings.HasPrefix(r.RequestURI, "/") {
		p, _, _ := strings.Cut(r.RequestURI, "?")
		return p
	}
	return r.URL.EscapedPath() // absolute-form, or a request built in-process
}

// canonicalPath reports whether p is the only spelling of its path: absolute, no dot or empty
// segments, no trailing slash, and no percent-escapes at all (a route's path is made of
// Kubernetes names, which never need one).
func canonicalPath(p string) bool {
	return strings.HasPrefix(p, "/") && !strings.Contains(p, "%") && path.Clean(p) == p
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	r, span := h.startServer(r)
	result, status := h.serve(w, r)
	endServer(span, result, status)
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	if result == resultUnknownRoute {
		ns, name = "", "" // not a route: the path is a stranger's
	}
	h.Metrics.observeRequest(ns, name, result, time.Since(start))
	writeJSON(w, status, result)
}

//nolint:funlen // the ack path in order (route, verify, dedupe, commit, answer) with its span; split, it would pass the span and request state around
func (h *Handler) serve(w http.ResponseWriter, r *http.Request) (string, int) {
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	// The logger is built only when something is logged: this is the hot path.
	log := func() logr.Logger {
		return telemetry.Log(r.Context(), h.Log.WithValues(logkeys.Subscription, ns+"/"+name))
	}
	route, ok := h.Routes.Lookup(ns, name)
	if !ok {
		return resultUnknownRoute, http.StatusNotFound
	}
	spanRoute(r.Context(), route)
	verifier := route.Verifier
	if verifier == nil {
		if verifier, ok = h.Verifiers[route.Provider]; !ok {
			log().Info("no verifier for provider", logkeys.Provider, route.Provider)
			return resultUnknownRoute, http.StatusNotFound
		}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.MaxBody))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return resultTooLarge, http.StatusRequestEntityTooLarge
		}
		return resultBadRequest, http.StatusBadRequest
	}
	now := h.Now()
	vctx, vspan := h.Tracing.Start(r.Context(), "verify", trace.SpanKindInternal)
	v, err := h.verify(vctx, route, verifier, providers.Delivery{Header: r.Header, Body: body, Now: now})
	if err != nil {
		spanRefused(r.Context(), vspan, err.Error())
	}
	vspan.End()
	if errors.Is(err, providers.ErrAmbiguous) {
		// Authentic, but deduping on one reading of the id would be a guess: refused like an
		// event the ledger cannot record, and a retry is refused alike.
		log().Info("delivery refused: its event id or type is ambiguous", logkeys.Reason, err.Error())
		return resultInvalidEvent, http.StatusUnprocessableEntity
	}
	if err != nil {
		result := resultBadSignature
		switch {
		case errors.Is(err, providers.ErrTooOld):
			result = resultTooOld
		case errors.Is(err, providers.ErrTooNew):
			result = resultTooNew
		case errors.Is(err, providers.ErrNoEventID):
			result = resultNoEventID
		}
		if h.Log.V(1).Enabled() {
			log().V(1).Info("delivery refused", logkeys.Reason, err.Error())
		}
		return result, http.StatusUnauthorized
	}
	h.spanHandover(r, route, body)
	if v.Ping {
		// The provider checking the endpoint: authentic, answered, counted, not an event.
		return resultPing, http.StatusOK
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.ClaimTimeout)
	defer cancel()
	ev := store.Event{
		Subscription:    route.Key(),
		SubscriptionUID: route.UID,
		EventID:         v.EventID,
		EventType:       v.EventType,
		ContentType:     r.Header.Get("Content-Type"),
		Payload:         body,
		ReceivedAt:      now,
		MaxAttempts:     route.MaxAttempts,
		DedupeWindow:    route.DedupeWindow,
		Retention:       route.retention(),
		// Set when the signature does not cover the id: the same signed bytes under a fresh
		// id are then a duplicate too.
		ReplayKey: v.ReplayKey,
		// One job per sink; each sink's filter is applied when its job runs.
		Sinks: route.sinkNames,
		// The delivery's span: each attempt to each sink is its child.
		Trace: telemetry.Encode(r.Context()),
	}
	ev.OrderKeys = orderKeys(route.Sinks, ev)
	ctx, cspan := h.Tracing.Start(ctx, "ledger commit", trace.SpanKindInternal)
	spanEvent(r.Context(), cspan, v.EventID, v.EventType)
	dup, err := h.Claims.Claim(ctx, ev)
	endCommit(cspan, dup, err)
	if errors.Is(err, store.ErrInvalidEvent) {
		// No retry can store it, so no 503; the provider sees its own request refused. The
		// message names the rule broken, not the value; the id is logged cut short.
		log().Info("delivery refused: the event cannot be recorded", logkeys.Reason, err.Error(),
			logkeys.EventID, truncate(v.EventID, 64), "eventIDBytes", len(v.EventID))
		return resultInvalidEvent, http.StatusUnprocessableEntity
	}
	if err != nil {
		// Never acknowledge what is not committed: the provider retries a 503.
		log().Error(err, "recording the delivery failed", logkeys.EventID, truncate(v.EventID, 64))
		w.Header().Set("Retry-After", "5")
		return resultStoreError, http.StatusServiceUnavailable
	}
	if h.Log.V(1).Enabled() {
		log().V(1).Info("recorded", logkeys.EventID, v.EventID, "type", v.EventType, "duplicate", dup)
	}
	if dup {
		return resultDuplicate, http.StatusOK
	}
	return resultAccepted, http.StatusAccepted
}

// responses are the pre-encoded bodies, one per result.
var responses = func() map[string][]byte {
	m := map[string][]byte{}
	for _, r := range Results() {
		m[r] = []byte(`{"result":"` + r + `"}` + "\n")
	}
	return m
}()

// truncate cuts s to at most n bytes for a log line.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func writeJSON(w http.ResponseWriter, status int, result string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(responses[result])
}
