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
