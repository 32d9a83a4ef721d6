package receiver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hookwarden/hookwarden/receiver/adminapi"
	"github.com/hookwarden/hookwarden/receiver/store"
)

// serveEvents answers the ledger's routes (adminapi.EventsPath).
func (a *Admin) serveEvents(w http.ResponseWriter, r *http.Request) {
	l, ok := a.Store.(store.Ledger)
	if !ok {
		adminError(w, http.StatusNotImplemented, "this receiver's store keeps no browsable ledger")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 60*time.Second)
	defer cancel()
	switch rest := strings.Trim(strings.TrimPrefix(r.URL.Path, adminapi.EventsPath), "/"); {
	case rest == "" && r.Method == http.MethodGet:
		a.listEvents(ctx, w, l, r.URL.Query())
	case rest == "show" && r.Method == http.MethodGet:
		a.showEvent(ctx, w, l, r.URL.Query())
	case rest == "replay" && r.Method == http.MethodPost:
		a.replayEvents(ctx, w, l, r.URL.Query())
	default:
		adminError(w, http.StatusMethodNotAllowed, "unsupported method or path")
	}
}

// eventQuery reads a list's (or replay's) parameters.
func eventQuery(v url.Values) (store.EventQuery, error) {
	q := store.EventQuery{Type: v.Get("type"), Sink: v.Get("sink"), Subscriptions: v["subscription"], After: v.Get("after"), Limit: 100}
	for _, t := range []struct {
		name string
		to   *time.Time
	}{{"since", &q.Since}, {"until", &q.Until}} {
		if s := v.Get(t.name); s != "" {
			at, err := time.Parse(time.RFC3339Nano, s)
			if err != nil {
				return q, fmt.Errorf("%s: want an RFC 3339 time: %w", t.name, err)
			}
			*t.to = at
		}
	}
	if !q.Until.IsZero() && !q.Since.Before(q.Until) {
		return q, fmt.Errorf("since (%s) must be before until (%s)", q.Since.Format(time.RFC3339), q.Until.Format(time.RFC3339))
	}
	if s := v.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > store.MaxEventPage {
			return q, fmt.Errorf("limit must be 1..%d", store.MaxEventPage)
		}
		q.Limit = n
	}
	return q, nil
}

func (a *Admin) listEvents(ctx context.Context, w http.ResponseWriter, l store.Ledger, v url.Values) {
	q, err := eventQuery(v)
	if err != nil {
		adminError(w, http.StatusBadRequest, err.Error())
		return
	}
	page, err := l.Events(ctx, q)
	switch {
	case errors.Is(err, store.ErrBadCursor):
		adminError(w, http.StatusBadRequest, "after: not a cursor this receiver handed out")
		return
	case err != nil:
		adminError(w, http.StatusInternalServerError, err.Error())
		return
	}
	out := adminapi.EventPage{Events: make([]adminapi.Event, 0, len(page.Events)), Next: page.Next}
	for _, e := range page.Events {
		out.Events = append(out.Events, ledgerEvent(e))
	}
	adminJSON(w, http.StatusOK, out)
}

func (a *Admin) showEvent(ctx context.Context, w http.ResponseWriter, l store.Ledger, v url.Values) {
	sub, id := v.Get("subscription"), v.Get("id")
	if sub == "" || id == "" {
		adminError(w, http.StatusBadRequest, "show needs subscription=namespace/name and id=<event id>")
		return
	}
	e, ok, err := l.EventOf(ctx, sub, id)
	switch {
	case err != nil:
		adminError(w, http.StatusInternalServerError, err.Error())
	case !ok:
		adminError(w, http.StatusNotFound, "the ledger holds no event "+id+" of "+sub+" (never received, or swept after its dedupe window and retention)")
	default:
		out := ledgerEvent(e)
		out.Payload = jsonPayload(e.Payload)
		adminJSON(w, http.StatusOK, out)
	}
}

// replayEvents answers POST /events/replay: the whole range is read and checked first, so a
// refused replay sends nothing.
func (a *Admin) replayEvents(ctx context.Context, w http.ResponseWriter, l store.Ledger, v url.Values) {
	q, err := eventQuery(v)
	if err == nil && q.Since.IsZero() {
		err = errors.New("a replay needs since (and until, default now)")
	}
	if err != nil {
		adminError(w, http.StatusBadRequest, err.Error())
		return
	}
	now := a.now()
	if q.Until.IsZero() {
		q.Until = now
	}
	if msg := a.unknownSink(q); msg != "" {
		adminError(w, http.StatusBadRequest, msg)
		return
	}
	var refs []store.EventRef
	forgotten := 0
	q.Limit, q.After = store.MaxEventPage, ""
	for {
		page, err := l.Events(ctx, q)
		if err != nil {
			adminError(w, http.StatusInternalServerError, err.Error())
			return
		}
		for _, e := range page.Events {
			if !e.Forgotten.IsZero() {
				forgotten++
			}
			refs = append(refs, store.EventRef{Subscription: e.Subscription, EventID: e.EventID})
		}
		if len(refs) > adminapi.MaxReplay {
			adminError(w, http.StatusBadRequest, fmt.Sprintf("the range holds more than %d events: replay it in smaller ranges (--since, --until)", adminapi.MaxReplay))
			return
		}
		if page.Next == "" {
			break
		}
		q.After = page.Next
	}
	span := "between " + q.Since.UTC().Format(time.RFC3339) + " and " + q.Until.UTC().Format(time.RFC3339)
	switch {
	case len(refs) == 0:
		adminError(w, http.StatusNotFound, "no event received "+span+" matches: nothing replayed"+a.beyondRetention(q.Since, now))
		return
	case forgotten > 0:
		adminError(w, http.StatusGone, fmt.Sprintf("%d of the %d events received %s are past their retention (spec.delivery.retention): their payloads are gone; nothing replayed (choose a later --since)", forgotten, len(refs), span))
		return
	}
	fresh := v.Get("keepKey") != "true"
	res, err := l.Requeue(ctx, refs, q.Sink, fresh, now)
	if err != nil {
		adminError(w, http.StatusInternalServerError, err.Error())
		return
	}
	adminJSON(w, http.StatusOK, adminapi.ReplayResult{Events: len(refs), Requeued: res.Requeued, Skipped: res.Skipped, FreshKey: fresh})
}

// unknownSink says why q's sink is none of the selected subscriptions' ("" when it is one, or
// when the route table is not known).
func (a *Admin) unknownSink(q store.EventQuery) string {
	if q.Sink == "" || a.Routes == nil {
		return ""
	}
	var names []string
	a.Routes.mu.RLock()
	defer a.Routes.mu.RUnlock()
	for key, r := range a.Routes.m {
		if len(q.Subscriptions) > 0 && !slices.Contains(q.Subscriptions, key) {
			continue
		}
		if slices.Contains(r.sinkNames, q.Sink) {
			return ""
		}
		names = append(names, r.sinkNames...)
	}
	slices.Sort(names)
	return fmt.Sprintf("no subscription of the replay has a sink named %q (its sinks: %s): nothing replayed", q.Sink, strings.Join(slices.Compact(names), ", "))
}

// beyondRetention explains an empty range that starts before the longest retention in force.
func (a *Admin) beyondRetention(since, now time.Time) string {
	if a.Routes == nil {
		return ""
	}
	_, longest := a.Routes.Retentions()
	if longest == 0 || !since.Before(now.Add(-longest)) {
		return ""
	}
	return fmt.Sprintf(" (the range starts before the longest retention in force, %s: events older than %s are no longer kept)", longest, now.Add(-longest).UTC().Format(time.RFC3339))
}

func ledgerEvent(e store.LedgerEvent) adminapi.Event {
	out := adminapi.Event{Subscription: e.Subscription, EventID: e.EventID, EventType: e.EventType, ReceivedAt: e.ReceivedAt.UTC(),
		ContentType: e.ContentType, Sinks: make([]adminapi.EventSink, 0, len(e.Sinks))}
	if !e.Forgotten.IsZero() {
		out.Forgotten = &e.Forgotten
	}
	for _, s := range e.Sinks {
		es := adminapi.EventSink{Sink: s.Sink, State: s.State, Attempts: s.Attempts, LastError: s.LastError, Replays: s.Replays}
		if !s.DeliveredAt.IsZero() {
			es.DeliveredAt = &s.DeliveredAt
		}
		out.Sinks = append(out.Sinks, es)
	}
	return out
}

// jsonPayload is a payload as JSON: itself when it is JSON, else as a string.
func jsonPayload(p []byte) json.RawMessage {
	if len(p) == 0 {
		return nil
	}
	if json.Valid(p) {
		return p
	}
	b, _ := json.Marshal(string(p))
	return b
}
