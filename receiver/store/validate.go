package store

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/http/httpguts"
)

// Limits of what the ledger records. An event outside them is refused before it reaches a
// claim batch, on both databases alike, so it can neither fail its neighbours' commit nor be
// acknowledged and then never delivered.
const (
	// MaxEventIDBytes bounds the event id. The id is in the unique index, whose entries
	// PostgreSQL caps at about 2,700 bytes (a third of a page) together with the subscription
	// (up to 317 bytes: a namespace, "/", a name); a longer id failed the whole insert. Real ids
	// are far shorter (Stripe's about 30 characters, GitHub's delivery GUIDs 36, a REST body
	// hash 64), and percent-encoded in ce-id and Idempotency-Key (up to 3 bytes each) 1 KiB
	// stays well within a sink's 8 KiB header line.
	MaxEventIDBytes = 1024
	// MaxEventTypeBytes bounds the event type ("invoice.paid", "push": tens of bytes), which
	// goes percent-encoded into ce-type.
	MaxEventTypeBytes = 256
	// MaxContentTypeBytes bounds the provider's Content-Type, passed on to the sink as it is.
	MaxContentTypeBytes = 256
	// MaxReplayKeyBytes bounds the replay key, a digest (64 hex digits from the verifiers).
	MaxReplayKeyBytes = 128
	// MaxSinkNameBytes bounds a sink's name (a DNS label).
	MaxSinkNameBytes = 63
)

// ErrInvalidEvent is the error of an event the ledger refuses to record (see CheckEvent). No
// retry changes the outcome: the receiver answers 4xx.
var ErrInvalidEvent = errors.New("event cannot be recorded")

// CheckEvent returns an error wrapping ErrInvalidEvent when e cannot be both stored and
// delivered: an empty subscription or event id, a text field that is not valid UTF-8 or holds
// NUL (PostgreSQL's text type cannot store either, SQLite would), an event id, type, content
// type or replay key over its limit, or a Content-Type that is not a valid HTTP header value
// (it goes to the sink unchanged). Every other character, control characters included, is stored as it is:
// the sender percent-encodes the id and type into their headers. The message names the field
// and the rule, never the value.
func CheckEvent(e Event) error {
	if e.Subscription == "" || e.EventID == "" {
		return fmt.Errorf("%w: empty subscription or event id", ErrInvalidEvent)
	}
	fields := []struct {
		name, value string
		limit       int
	}{
		{"event id", e.EventID, MaxEventIDBytes},
		{"event type", e.EventType, MaxEventTypeBytes},
		{"content type", e.ContentType, MaxContentTypeBytes},
		{"replay key", e.ReplayKey, MaxReplayKeyBytes},
		{"subscription", e.Subscription, 0},
		{"subscription UID", e.SubscriptionUID, 0},
	}
	for _, f := range fields {
		switch {
		case f.limit > 0 && len(f.value) > f.limit:
			return fmt.Errorf("%w: the %s is %d bytes, over the limit of %d", ErrInvalidEvent, f.name, len(f.value), f.limit)
		case !utf8.ValidString(f.value):
			return fmt.Errorf("%w: the %s is not valid UTF-8", ErrInvalidEvent, f.name)
		case strings.IndexByte(f.value, 0) >= 0:
			return fmt.Errorf("%w: the %s contains NUL", ErrInvalidEvent, f.name)
		}
	}
	if !httpguts.ValidHeaderFieldValue(e.ContentType) {
		return fmt.Errorf("%w: the content type is not a valid HTTP header value", ErrInvalidEvent)
	}
	if err := checkSinks(e.Sinks); err != nil {
		return err
	}
	for sink := range e.OrderKeys {
		if !slices.Contains(sinksOf(e), sink) {
			return fmt.Errorf("%w: an order key names a sink the event does not go to", ErrInvalidEvent)
		}
	}
	return nil
}

// checkSinks refuses a sink list the queue cannot hold: more than MaxSinks, an empty or
// over-long name, a name that is not printable ASCII, or a name twice.
func checkSinks(sinks []string) error {
	if len(sinks) > MaxSinks {
		return fmt.Errorf("%w: %d sinks, over the limit of %d", ErrInvalidEvent, len(sinks), MaxSinks)
	}
	for i, name := range sinks {
		if name == "" || len(name) > MaxSinkNameBytes || strings.IndexFunc(name, func(r rune) bool { return r <= ' ' || r > '~' }) >= 0 {
			return fmt.Errorf("%w: sink %d has no name of 1 to %d printable ASCII characters", ErrInvalidEvent, i, MaxSinkNameBytes)
		}
		if slices.Contains(sinks[:i], name) {
			return fmt.Errorf("%w: sink %d has the name of an earlier one", ErrInvalidEvent, i)
		}
	}
	return nil
}
