// Package adminapi is the receiver's admin API on the wire: its paths and the JSON it answers
// with. The receiver serves it and the command line calls it; this package imports only the
// standard library, so a client links no store, database driver or broker.
package adminapi

import (
	"encoding/json"
	"time"
)

// DeadLettersPath is where the admin API is served, on the receiver's metrics listener: with
// --metrics-secure it is authenticated and authorized as /metrics is (TokenReview, then a
// SubjectAccessReview on the non-resource URL with the request's verb):
//
//	GET  /deadletters               list, ?subscription=ns/name&sink=name to narrow (verb get on /deadletters)
//	GET  /deadletters/{id}          show, with the payload (verb get on /deadletters/*)
//	POST /deadletters/{id}/replay   back on the delivery path, same event id (verb post on /deadletters/*)
//	POST /deadletters/{id}/purge    never delivered, still remembered for dedupe (verb post on /deadletters/*)
const DeadLettersPath = "/deadletters"

// DeadLetter is one dead-lettered delivery as the admin API returns it.
type DeadLetter struct {
	ID           int64  `json:"id"`
	Subscription string `json:"subscription"`
	// Sink is the name of the sink the delivery failed for ("default": spec.delivery.sink).
	Sink        string    `json:"sink"`
	EventID     string    `json:"eventID"`
	EventType   string    `json:"eventType,omitempty"`
	Attempts    int       `json:"attempts"`
	ReceivedAt  time.Time `json:"receivedAt"`
	LastError   string    `json:"lastError,omitempty"`
	ContentType string    `json:"contentType,omitempty"`
	// Payload is the event as the provider sent it (show only).
	Payload json.RawMessage `json:"payload,omitempty"`
}

// Result answers a replay or a purge that was done.
type Result struct {
	ID int64 `json:"id"`
	// Result is "replayed" or "purged".
	Result string `json:"result"`
}

// Error is the body of every answer other than 200 OK.
type Error struct {
	Error string `json:"error"`
}

// EventsPath is where the ledger's routes are served, beside DeadLettersPath and authorized
// the same way (the ClusterRoles events-viewer and events-admin grant them):
//
//	GET  /events          a page, oldest first: ?since=&until= (RFC 3339; since inclusive, until
//	                      exclusive), &type=, &sink=, &subscription=ns/name (repeated), &limit=
//	                      (1..1000, default 100), &after= (the previous page's next); verb get on /events
//	GET  /events/show     ?subscription=ns/name&id=<event id>: one event with its payload and
//	                      where it went (verb get on /events/*)
//	POST /events/replay   the events a list with the same parameters would walk, to their sink
//	                      named sink or to every sink; &keepKey=true keeps their Idempotency-Key
//	                      (verb post on /events/*)
const EventsPath = "/events"

// Event is one event of the ledger and where it went.
type Event struct {
	Subscription string    `json:"subscription"`
	EventID      string    `json:"eventID"`
	EventType    string    `json:"eventType,omitempty"`
	ReceivedAt   time.Time `json:"receivedAt"`
	ContentType  string    `json:"contentType,omitempty"`
	// Forgotten is when its payload was dropped (spec.delivery.retention): it can no longer be
	// shown or replayed.
	Forgotten *time.Time  `json:"forgotten,omitempty"`
	Sinks     []EventSink `json:"sinks"`
	// Payload is the event as the provider sent it (show only).
	Payload json.RawMessage `json:"payload,omitempty"`
}

// EventSink is where one event went: its job for one sink.
type EventSink struct {
	Sink string `json:"sink"`
	// State is pending, running, retryable, completed or dead.
	State       string     `json:"state"`
	Attempts    int        `json:"attempts"`
	LastError   string     `json:"lastError,omitempty"`
	DeliveredAt *time.Time `json:"deliveredAt,omitempty"`
	// Replays counts its replays by hand (events replay, deadletters replay).
	Replays int `json:"replays,omitempty"`
}

// EventPage is one page of GET /events.
type EventPage struct {
	Events []Event `json:"events"`
	// Next is the after= of the next page, empty on the last.
	Next string `json:"next,omitempty"`
}

// MaxReplay bounds the events of one POST /events/replay.
const MaxReplay = 10000

// ReplayResult answers POST /events/replay.
type ReplayResult struct {
	// Events is how many events the range held; Requeued the deliveries (one per event and
	// sink) put back on the delivery path, Skipped those still on their way, which are left
	// alone.
	Events   int `json:"events"`
	Requeued int `json:"requeued"`
	Skipped  int `json:"skipped"`
	// FreshKey is whether the replayed deliveries take an Idempotency-Key of their own.
	FreshKey bool `json:"freshKey"`
}
