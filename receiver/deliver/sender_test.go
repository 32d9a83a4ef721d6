package deliver

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/net/http/httpguts"

	"github.com/hookwarden/hookwarden/receiver/store"
)

var t0 = time.Date(2026, 3, 14, 15, 9, 26, 0, time.UTC)

func testEvent() store.Event {
	return store.Event{
		Subscription:    "shop/payments",
		SubscriptionUID: "5f0c6f3e-1111-4a4a-9b9b-000000000001",
		EventID:         "evt_1NqZ",
		EventType:       "payment_intent.succeeded",
		ContentType:     "application/json; charset=utf-8",
		// Not valid UTF-8 and ends in a newline: the body must pass through untouched.
		Payload:     []byte("{\"id\":\"evt_1NqZ\",\"secret\":\"PAYLOAD-MARKER\"}\xff\n"),
		ReceivedAt:  time.Date(2026, 3, 14, 15, 9, 26, 535897932, time.FixedZone("CET", 3600)),
		MaxAttempts: 5,
	}
}

type captured struct {
	method string
	path   string
	header http.Header
	body   []byte
}

func TestSenderRequest(t *testing.T) {
	full := testEvent()
	bare := testEvent()
	bare.EventType, bare.ContentType = "", ""
	hostile := testEvent()
	hostile.EventID, hostile.EventType = "evt\r\nX-Injected: yes \"é\"%41", "invoice.paid\r\n"

	cases := []struct {
		reason string
		ev     store.Event
		want   map[string]string
	}{
		{
			reason: "every CloudEvents attribute comes from the event; the key from the subscription UID and event id",
			ev:     full,
			want: map[string]string{
				"Ce-Specversion":    "1.0",
				"Ce-Id":             "evt_1NqZ",
				"Ce-Source":         "hookwarden/shop/payments",
				"Ce-Type":           "payment_intent.succeeded",
				"Ce-Time":           "2026-03-14T14:09:26.535897932Z",
				"Content-Type":      "application/json; charset=utf-8",
				"Idempotency-Key":   "5f0c6f3e-1111-4a4a-9b9b-000000000001:evt_1NqZ",
				"Ce-Idempotencykey": "5f0c6f3e-1111-4a4a-9b9b-000000000001:evt_1NqZ",
				"User-Agent":        "hookwarden-receiver",
			},
		},
		{
			reason: "an event without type or content type gets the defaults",
			ev:     bare,
			want: map[string]string{
				"Ce-Specversion":    "1.0",
				"Ce-Id":             "evt_1NqZ",
				"Ce-Source":         "hookwarden/shop/payments",
				"Ce-Type":           "hookwarden.event",
				"Ce-Time":           "2026-03-14T14:09:26.535897932Z",
				"Content-Type":      "application/json",
				"Idempotency-Key":   "5f0c6f3e-1111-4a4a-9b9b-000000000001:evt_1NqZ",
				"Ce-Idempotencykey": "5f0c6f3e-1111-4a4a-9b9b-000000000001:evt_1NqZ",
				"User-Agent":        "hookwarden-receiver",
			},
		},
		{
			reason: "id, type and key are percent-encoded as the CloudEvents HTTP binding says (CR, LF, space, quote, percent, non-ASCII)",
			ev:     hostile,
			want: map[string]string{
				"Ce-Specversion":    "1.0",
				"Ce-Id":             "evt%0D%0AX-Injected:%20yes%20%22%C3%A9%22%2541",
				"Ce-Source":         "hookwarden/shop/payments",
				"Ce-Type":           "invoice.paid%0D%0A",
				"Ce-Time":           "2026-03-14T14:09:26.535897932Z",
				"Content-Type":      "application/json; charset=utf-8",
				"Idempotency-Key":   "5f0c6f3e-1111-4a4a-9b9b-000000000001:evt%0D%0AX-Injected:%20yes%20%22%C3%A9%22%2541",
				"Ce-Idempotencykey": "5f0c6f3e-1111-4a4a-9b9b-000000000001:evt%0D%0AX-Injected:%20yes%20%22%C3%A9%22%2541",
				"User-Agent":        "hookwarden-receiver",
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.reason, func(t *testing.T) {
			got := make(chan captured, 1)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				got <- captured{method: r.Method, path: r.URL.Path, header: r.Header.Clone(), body: body}
				w.WriteHeader(http.StatusAccepted)
			}))
			defer srv.Close()

			status, err := NewSender(SenderOptions{}).Send(context.Background(), &HTTPTarget{URL: srv.URL + "/events"}, tc.ev)
			if err != nil || status != http.StatusAccepted {
				t.Fatalf("Send() = %d, %v; want 202, nil", status, err)
			}
			req := <-got
			if req.method != http.MethodPost || req.path != "/events" {
				t.Errorf("request = %s %s, want POST /events", req.method, req.path)
			}
			gotHeaders := map[string]string{}
			for k, v := range req.header {
				if strings.HasPrefix(k, "Ce-") || tc.want[k] != "" {
					gotHeaders[k] = strings.Join(v, ",")
				}
			}
			if diff := cmp.Diff(tc.want, gotHeaders); diff != "" {
				t.Errorf("headers (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.ev.Payload, req.body); diff != "" {
				t.Errorf("body (-want +got):\n%s", diff)
			}
		})
	}
}

// outcome is the part of a Send result a caller acts on.
type outcome struct {
	Status     int
	Delivered  bool
	Retryable  bool
	RetryAfter time.Duration
	Transport  bool // no response at all
	Unsent     bool // no request either
}

func TestSenderClassification(t *testing.T) {
	// A sink URL that refuses connections: a port that was just free.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + ln.Addr().String() + "/?token=URL-SECRET"
	_ = ln.Close()

	respond := func(code int, header ...string) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			for i := 0; i+1 < len(header); i += 2 {
				w.Header().Set(header[i], header[i+1])
			}
			w.WriteHeader(code)
			_, _ = io.WriteString(w, "sink says PAYLOAD-MARKER")
		}
	}
	release := make(chan struct{})
	defer close(release)

	cases := []struct {
		reason  string
		handler http.HandlerFunc
		url     string             // overrides the test server
		event   func(*store.Event) // changes testEvent(); without a handler a sent request gets 404
		want    outcome
	}{
		{reason: "200 delivers", handler: respond(200), want: outcome{Status: 200, Delivered: true}},
		{reason: "204 delivers: any 2xx is success", handler: respond(204), want: outcome{Status: 204, Delivered: true}},
		{
			reason:  "301 is permanent: redirects are not followed, so the event never goes where the subscription did not say",
			handler: respond(301, "Location", "/elsewhere"),
			want:    outcome{Status: 301},
		},
		{reason: "400 is permanent: the sink rejects this event", handler: respond(400), want: outcome{Status: 400}},
		{reason: "404 is permanent", handler: respond(404), want: outcome{Status: 404}},
		{reason: "408 retries: the sink timed out reading", handler: respond(408), want: outcome{Status: 408, Retryable: true}},
		{reason: "409 is permanent like any other 4xx", handler: respond(409), want: outcome{Status: 409}},
		{
			reason:  "429 retries and carries Retry-After in seconds",
			handler: respond(429, "Retry-After", "120"),
			want:    outcome{Status: 429, Retryable: true, RetryAfter: 120 * time.Second},
		},
		{
			reason:  "429 retries and carries Retry-After as an HTTP-date, relative to the sender's clock",
			handler: respond(429, "Retry-After", t0.Add(90*time.Second).Format(http.TimeFormat)),
			want:    outcome{Status: 429, Retryable: true, RetryAfter: 90 * time.Second},
		},
		{reason: "500 retries", handler: respond(500), want: outcome{Status: 500, Retryable: true}},
		{
			reason:  "503 retries and carries Retry-After",
			handler: respond(503, "Retry-After", "7"),
			want:    outcome{Status: 503, Retryable: true, RetryAfter: 7 * time.Second},
		},
		{
			reason: "a sink that does not answer within the timeout retries",
			handler: func(w http.ResponseWriter, r *http.Request) {
				// Only a fully read body lets the server notice the client hanging up.
				_, _ = io.ReadAll(r.Body)
				select {
				case <-r.Context().Done():
				case <-release:
				}
			},
			want: outcome{Retryable: true, Transport: true},
		},
		{reason: "connection refused retries", url: refused, want: outcome{Retryable: true, Transport: true}},
		{
			reason: "an event net/http cannot send (a Content-Type with CRLF stored before the receiver checked) is permanent and never sent",
			event:  func(ev *store.Event) { ev.ContentType = "application/json\r\nX-Injected: yes" },
			want:   outcome{Transport: true, Unsent: true},
		},
	}
	for _, tc := range cases {
		t.Run(tc.reason, func(t *testing.T) {
			var elsewhere atomic.Int32
			mux := http.NewServeMux()
			mux.HandleFunc("/elsewhere", func(http.ResponseWriter, *http.Request) { elsewhere.Add(1) })
			if tc.handler != nil {
				mux.HandleFunc("/", tc.handler)
			}
			srv := httptest.NewServer(mux)
			defer srv.Close()
			url := srv.URL + "/?token=URL-SECRET"
			if tc.url != "" {
				url = tc.url
			}

			ev := testEvent()
			if tc.event != nil {
				tc.event(&ev)
			}
			s := NewSender(SenderOptions{Timeout: 500 * time.Millisecond, Now: func() time.Time { return t0 }})
			status, err := s.Send(context.Background(), &HTTPTarget{URL: url}, ev)

			got := outcome{Status: status, Delivered: err == nil}
			if err != nil {
				var de *Error
				if !errors.As(err, &de) {
					t.Fatalf("Send() error %T %v, want *Error", err, err)
				}
				if de.StatusCode != status {
					t.Errorf("Error.StatusCode = %d, returned status %d", de.StatusCode, status)
				}
				got.Retryable, got.RetryAfter, got.Transport, got.Unsent = de.Retryable, de.RetryAfter, de.Err != nil, de.Unsent
				if de.Unsent && strings.Contains(err.Error(), "sink unreachable") {
					t.Errorf("error %q blames the sink for a request that was never sent", err)
				}
				for _, secret := range []string{"PAYLOAD-MARKER", "URL-SECRET"} {
					if strings.Contains(err.Error(), secret) {
						t.Errorf("error %q leaks %s", err, secret)
					}
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("outcome (-want +got):\n%s", diff)
			}
			if n := elsewhere.Load(); n != 0 {
				t.Errorf("redirect target hit %d times, want 0", n)
			}
		})
	}
}

func TestParseRetryAfter(t *testing.T) {
	cases := []struct {
		reason string
		value  string
		want   time.Duration
	}{
		{reason: "absent", value: "", want: 0},
		{reason: "delay-seconds", value: " 30 ", want: 30 * time.Second},
		{reason: "zero seconds is no hint", value: "0", want: 0},
		{reason: "negative seconds are invalid", value: "-5", want: 0},
		{reason: "HTTP-date in the future", value: "Sat, 14 Mar 2026 16:09:26 GMT", want: time.Hour},
		{reason: "HTTP-date in the past is no hint", value: "Sat, 14 Mar 2026 14:09:26 GMT", want: 0},
		{reason: "garbage is no hint", value: "soon", want: 0},
		{reason: "absurd seconds saturate instead of overflowing", value: "99999999999999999", want: maxDuration},
	}
	for _, tc := range cases {
		t.Run(tc.reason, func(t *testing.T) {
			if got := parseRetryAfter(tc.value, t0); got != tc.want {
				t.Errorf("parseRetryAfter(%q) = %s, want %s", tc.value, got, tc.want)
			}
		})
	}
}

func TestHeaderValue(t *testing.T) {
	cases := []struct{ in, want string }{
		{"evt_1NqZ", "evt_1NqZ"},
		// The binding's own example (section 3.1.3.2).
		{"Euro \u20ac \U0001F600", "Euro%20%E2%82%AC%20%F0%9F%98%80"},
		{"a\r\nb", "a%0D%0Ab"},
		{"\x00\x1f\x7f\t", "%00%1F%7F%09"},
		{`say "100%"`, "say%20%22100%25%22"},
		{"!#$&'()*+,/:;<=>?@[\\]^_`{|}~", "!#$&'()*+,/:;<=>?@[\\]^_`{|}~"}, // printable ASCII stays
		{"", ""},
	}
	for _, tc := range cases {
		if got := HeaderValue(tc.in); got != tc.want {
			t.Errorf("HeaderValue(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// Any valid UTF-8 string is carried: the encoded value is a valid header value, and one round
// of percent-decoding gives the string back.
func TestHeaderValueRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(12, 12))
	for range 20000 {
		runes := make([]rune, r.IntN(12))
		for i := range runes {
			switch r.IntN(3) {
			case 0:
				runes[i] = rune(r.IntN(0x80))
			case 1:
				runes[i] = rune(r.IntN(0x800))
			default:
				runes[i] = rune(r.IntN(utf8.MaxRune + 1))
			}
		}
		s := strings.ToValidUTF8(string(runes), "?")
		enc := HeaderValue(s)
		if !httpguts.ValidHeaderFieldValue(enc) || strings.ContainsAny(enc, " \"") {
			t.Fatalf("HeaderValue(%q) = %q: not a plain header value", s, enc)
		}
		if dec, err := url.PathUnescape(enc); err != nil || dec != s {
			t.Fatalf("HeaderValue(%q) = %q decodes to %q, %v", s, enc, dec, err)
		}
	}
}
