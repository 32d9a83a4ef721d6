package deliver

import (
	"strings"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden/receiver/store"
)

func TestFilter(t *testing.T) {
	stripe := store.Event{Subscription: "shop/orders", EventID: "evt_1", EventType: "charge.succeeded", ReceivedAt: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC),
		Payload: []byte(`{"id":"evt_1","type":"charge.succeeded","data":{"object":{"id":"ch_1","customer":"cus_9","amount":1200}}}`)}
	github := store.Event{Subscription: "shop/repos", EventID: "guid-1", EventType: "push", Payload: []byte(`{"repository":{"full_name":"acme/shop"},"commits":[{"id":"a"},{"id":"b"}]}`)}
	notJSON := store.Event{Subscription: "shop/orders", EventID: "evt_2", EventType: "ping", Payload: []byte("plain text")}
	cases := []struct {
		reason, expr string
		ev           store.Event
		want         bool
		wantErr      string // a part of Match's error
	}{
		{"a prefix of the type", "type.startsWith('charge.')", stripe, true, ""},
		{"another type", "type.startsWith('invoice.')", stripe, false, ""},
		{"a field of the payload", "data.data.object.customer == 'cus_9' && data.data.object.amount > 1000", stripe, true, ""},
		{"subject is the Stripe object's id", "subject == 'ch_1'", stripe, true, ""},
		{"source names the subscription", "source == 'hookwarden/shop/orders'", stripe, true, ""},
		{"id and time", "id == 'evt_1' && time > timestamp('2026-11-30T00:00:00Z')", stripe, true, ""},
		{"GitHub's body, a comprehension", "type == 'push' && data.repository.full_name.startsWith('acme/') && data.commits.exists(c, c.id == 'b')", github, true, ""},
		{"a field the event does not have fails on this event", "data.data.object.customer == 'x'", github, false, "no such key: data"},
		{"a body that is not JSON has data null", "data == null && type == 'ping'", notJSON, true, ""},
	}
	for _, tc := range cases {
		f, err := CompileFilter(tc.expr)
		if err != nil {
			t.Errorf("%s: CompileFilter(%q) = %v", tc.reason, tc.expr, err)
			continue
		}
		got, err := f.Match(tc.ev, Source(tc.ev))
		switch {
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%s: Match = %v, %v; want an error saying %q", tc.reason, got, err, tc.wantErr)
		case tc.wantErr == "" && (err != nil || got != tc.want):
			t.Errorf("%s: Match = %v, %v; want %v", tc.reason, got, err, tc.want)
		}
	}
}

func TestFilterThatDoesNotCompile(t *testing.T) {
	for expr, want := range map[string]string{
		"typ == 'push'":       "undeclared reference to 'typ'",
		"type.startsWith('a'": "Syntax error",
		"type":                "its result is string, not a bool",
		"data.amount":         "its result is dyn, not a bool",
	} {
		if _, err := CompileFilter(expr); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("CompileFilter(%q) = %v, want an error saying %q", expr, err, want)
		}
	}
}

func TestOrderKey(t *testing.T) {
	ev := store.Event{EventID: "evt_1", EventType: "invoice.paid",
		Payload: []byte(`{"id":"evt_1","data":{"object":{"id":"in_1","customer":"cus_9","lines":{"n":2}}},"a.b":"dotted"}`)}
	for path, want := range map[string]string{
		"id": "evt_1", "type": "invoice.paid", "subject": "in_1",
		"data.data.object.customer": "cus_9", "data.data.object.lines": `{"n":2}`, "data.missing.field": "",
	} {
		if got := OrderKey(path, ev); got != want {
			t.Errorf("OrderKey(%q) = %q, want %q", path, got, want)
		}
	}
}
