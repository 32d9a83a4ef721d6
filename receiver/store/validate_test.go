package store

import (
	"errors"
	"strings"
	"testing"
)

func TestCheckEvent(t *testing.T) {
	cases := []struct {
		reason string
		change func(*Event)
		want   string // "" when the event is recorded; else part of the error
	}{
		{"a plain event", func(*Event) {}, ""},
		{"control characters are stored; the sender percent-encodes them", func(e *Event) {
			e.EventID, e.EventType = "evt\r\n\x01\x7f", "invoice\tpaid\r\n"
		}, ""},
		{"any valid UTF-8", func(e *Event) { e.EventID, e.EventType = "évènement ☃ 😀", "café" }, ""},
		{"ids and types up to their limits", func(e *Event) {
			e.EventID, e.EventType = strings.Repeat("i", MaxEventIDBytes), strings.Repeat("t", MaxEventTypeBytes)
		}, ""},
		{"no type, no content type", func(e *Event) { e.EventType, e.ContentType = "", "" }, ""},
		{"empty event id", func(e *Event) { e.EventID = "" }, "empty subscription or event id"},
		{"empty subscription", func(e *Event) { e.Subscription = "" }, "empty subscription or event id"},
		{"id over the limit", func(e *Event) { e.EventID = strings.Repeat("i", MaxEventIDBytes+1) }, "the event id is 1025 bytes, over the limit of 1024"},
		{"type over the limit", func(e *Event) { e.EventType = strings.Repeat("t", MaxEventTypeBytes+1) }, "the event type is 257 bytes"},
		{"content type over the limit", func(e *Event) { e.ContentType = strings.Repeat("c", MaxContentTypeBytes+1) }, "the content type is 257 bytes"},
		{"NUL in the id", func(e *Event) { e.EventID = "evt_\x00" }, "the event id contains NUL"},
		{"NUL in the type", func(e *Event) { e.EventType = "a\x00" }, "the event type contains NUL"},
		{"invalid UTF-8 id", func(e *Event) { e.EventID = "evt_\xff" }, "the event id is not valid UTF-8"},
		{"a UTF-16 surrogate encoded in UTF-8", func(e *Event) { e.EventID = "evt_\xed\xa0\x80" }, "the event id is not valid UTF-8"},
		{"invalid UTF-8 type", func(e *Event) { e.EventType = "push\xc3" }, "the event type is not valid UTF-8"},
		{"invalid UTF-8 content type", func(e *Event) { e.ContentType = "text/plain; charset=\xff" }, "the content type is not valid UTF-8"},
		{"a content type HTTP cannot carry", func(e *Event) { e.ContentType = "text/plain\r\nX: y" }, "not a valid HTTP header value"},
	}
	for _, tc := range cases {
		e := event("ns/a", "evt_1", t0)
		tc.change(&e)
		err := CheckEvent(e)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: CheckEvent = %v, want nil", tc.reason, err)
		case tc.want != "" && (!errors.Is(err, ErrInvalidEvent) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: CheckEvent = %v, want ErrInvalidEvent mentioning %q", tc.reason, err, tc.want)
		}
	}
}

// Every event CheckEvent lets through is stored by both databases, in one batch with others,
// and read back unchanged; the ones it refuses fail ClaimBatch before the database sees them.
func TestCheckedEventsAreStoredVerbatim(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		ids := []string{"evt\r\nX-Injected: yes", "evt_\x01\x1f\x7f", "évènement ☃ 😀", strings.Repeat("é", MaxEventIDBytes/2)}
		var events []Event
		for _, id := range ids {
			ev := event("ns/a", id, t0)
			ev.EventType = "type\r\n" + string([]rune(id)[:1])
			events = append(events, ev)
		}
		if dup := mustClaim(t, e.s, events...); len(dup) != len(ids) {
			t.Fatalf("ClaimBatch answered %d claims, want %d", len(dup), len(ids))
		}
		jobs := mustLease(t, e.s, 10, t0, 0)
		got := map[string]string{}
		for _, j := range jobs {
			got[j.Event.EventID] = j.Event.EventType
		}
		for _, ev := range events {
			if typ, ok := got[ev.EventID]; !ok || typ != ev.EventType {
				t.Errorf("event %q came back with type %q (found %t), want %q", ev.EventID, typ, ok, ev.EventType)
			}
		}
		_, err := e.s.ClaimBatch(testCtx(t), []Event{event("ns/a", "evt_ok", t0), event("ns/a", "evt_\x00", t0)})
		if !errors.Is(err, ErrInvalidEvent) {
			t.Errorf("ClaimBatch with a NUL id = %v, want ErrInvalidEvent", err)
		}
	})
}
