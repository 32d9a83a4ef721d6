// Package deliver hands queued webhook events to the user's sink: a Sender posts one event as a
// CloudEvent, a Backoff spaces the retries, and a Pool of workers drains the store's job queue.
//
// Delivery is at least once: a worker that crashes, or loses its lease, after the sink accepted
// an event leaves it to be sent again. Every attempt therefore carries the same Idempotency-Key
// (see IdempotencyKey), so the sink can recognise and drop a repeat.
package deliver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/hookwarden/hookwarden/receiver/store"

	"github.com/hookwarden/hookwarden/providers"
)

// Defaults for SenderOptions.
const (
	DefaultTimeout     = 10 * time.Second
	DefaultContentType = "application/json"
	DefaultEventType   = "hookwarden.event"
	UserAgent          = "hookwarden-receiver"
)

// Enough of a sink's response body to let the connection be reused; the rest is abandoned.
const drainLimit = 64 << 10

// Error is a delivery attempt that did not reach a 2xx. Its message never holds the payload, the
// sink's response body or the sink URL (which may carry credentials).
type Error struct {
	// StatusCode of the sink's response; 0 when there was none (timeout, network error).
	StatusCode int
	// Retryable is true for 408, 429, 5xx, timeouts and network errors.
	Retryable bool
	// RetryAfter is the sink's Retry-After on a retryable response (0 when absent).
	RetryAfter time.Duration
	// Err is the transport error when there was no response.
	Err error
	// Unsent is true when no request could be built for the sink (Err says why), so nothing
	// was sent.
	Unsent bool
	// Misconfigured is set when the sink cannot take any event until the user fixes it (a
	// subject no stream captures): the event waits, its attempt not counted.
	Misconfigured bool
}

func (e *Error) Error() string {
	kind := "permanent"
	if e.Retryable {
		kind = "retryable"
	}
	if e.Unsent {
		return fmt.Sprintf("request not sent (%s): %v", kind, e.Err)
	}
	if e.Misconfigured {
		return fmt.Sprintf("sink misconfigured: %v", e.Err)
	}
	if e.StatusCode == 0 {
		return fmt.Sprintf("sink unreachable (%s): %v", kind, e.Err)
	}
	msg := fmt.Sprintf("sink answered %d %s (%s)", e.StatusCode, http.StatusText(e.StatusCode), kind)
	if e.RetryAfter > 0 {
		msg += fmt.Sprintf(", retry after %s", e.RetryAfter)
	}
	return msg
}

func (e *Error) Unwrap() error { return e.Err }

// SenderOptions configure a Sender; zero values take the defaults.
type SenderOptions struct {
	// Timeout bounds one request, response headers included (default 10 s).
	Timeout time.Duration
	// Transport defaults to a clone of http.DefaultTransport.
	Transport http.RoundTripper
	// Now resolves an HTTP-date Retry-After (default time.Now).
	Now func() time.Time
}

// Sender posts events to sinks as CloudEvents in HTTP binary mode. It is safe for concurrent use.
type Sender struct {
	client  *http.Client
	timeout time.Duration
	now     func() time.Time
}

// NewSender returns a Sender. Redirects are not followed: a 3xx is a permanent failure, so an
// event is never replayed to a location the subscription did not name.
func NewSender(o SenderOptions) *Sender {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Transport == nil {
		o.Transport = http.DefaultTransport.(*http.Transport).Clone()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Sender{
		client:  &http.Client{Transport: o.Transport, CheckRedirect: noRedirects},
		timeout: o.Timeout,
		now:     o.Now,
	}
}

// Timeout is the per-request deadline.
func (s *Sender) Timeout() time.Duration { return s.timeout }

// Source is the CloudEvent source of ev: hookwarden/<namespace>/<name> of its subscription.
func Source(ev store.Event) string { return "hookwarden/" + ev.Subscription }

// IdempotencyKeyAttribute is the CloudEvents extension attribute that carries the
// Idempotency-Key (ce-idempotencykey in HTTP binary mode), for sinks that keep only CloudEvent
// attributes.
const IdempotencyKeyAttribute = "idempotencykey"

// IdempotencyKey identifies one event of one subscription across every delivery attempt and
// replay, so the sink can drop a retried delivery it already processed. It uses the
// subscription's UID rather than its name: a subscription deleted and recreated under the same
// name is a different stream of events.
//
// The event id in it is percent-encoded as in ce-id (see HeaderValue), so the key carries any
// id HTTP could not, and a sink that decodes it gets "<uid>:<event id>" back.
//
// A replay by hand that asked for a fresh key (hookwarden events replay, by default) has
// ":replay-<n>" after it, n its ReplayAttribute: a sink or broker that drops repeats of a key
// takes the replay, and a retry of the replay keeps its key.
func IdempotencyKey(ev store.Event) string {
	k := HeaderValue(ev.SubscriptionUID + ":" + ev.EventID)
	if ev.FreshKey && ev.Replays > 0 {
		k += ":replay-" + strconv.Itoa(ev.Replays)
	}
	return k
}

// ReplayAttribute is the CloudEvents extension attribute that marks a replay by hand
// (hookwarden events replay, hookwarden deadletters replay): its value is how many times the
// event was replayed to the sink, "1" the first time. A first delivery and its retries do not
// carry it. Every sink type writes it as it writes the other attributes (ce-hookwardenreplay in
// HTTP and NATS headers, ce_hookwardenreplay in Kafka, cloudEvents_hookwardenreplay in AMQP).
const ReplayAttribute = "hookwardenreplay"

// replayValue is ev's ReplayAttribute, "" when ev is not a replay.
func replayValue(ev store.Event) string {
	if ev.Replays == 0 {
		return ""
	}
	return strconv.Itoa(ev.Replays)
}

// HeaderValue percent-encodes s for a header of the CloudEvents HTTP protocol binding (1.0.2,
// section 3.1.3.2, "HTTP Header Values"): space, double quote, percent and every character
// outside printable ASCII U+0021-U+007E (control characters included, as the binding
// recommends) become %XY per UTF-8 byte, upper-case hex; everything else stays. One round of
// percent-decoding gives s back. A string with nothing to encode is returned as it is.
func HeaderValue(s string) string {
	i := 0
	for i < len(s) && !mustEncode(s[i]) {
		i++
	}
	if i == len(s) {
		return s
	}
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(s) + 2*(len(s)-i))
	b.WriteString(s[:i])
	for ; i < len(s); i++ {
		if c := s[i]; mustEncode(c) {
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&0xF])
		} else {
			b.WriteByte(c)
		}
	}
	return b.String()
}

// mustEncode reports whether HeaderValue encodes byte c. Bytes of a multi-byte UTF-8
// character are all >= 0x80, so encoding byte by byte encodes each such character whole.
func mustEncode(c byte) bool {
	return c <= ' ' || c > '~' || c == '"' || c == '%'
}

// Send posts ev to the HTTP sink t. It returns the sink's status code (0 when there was no
// response) and nil on 2xx, otherwise an *Error.
func (s *Sender) Send(ctx context.Context, t *HTTPTarget, ev store.Event) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()

	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.URL, bytes.NewReader(ev.Payload))
	if err != nil {
		// A malformed URL is a configuration error the user can fix; keep the job until then.
		return 0, &Error{Retryable: true, Unsent: true, Err: errors.New("invalid sink URL")}
	}
	eventType := cloudEventType(ev)
	contentType := ev.ContentType
	if contentType == "" {
		contentType = DefaultContentType
	}
	// The Content-Type is the one header passed on as stored; the others are constants,
	// a formatted time or percent-encoded (HeaderValue), so always valid. net/http would refuse
	// an invalid one inside Do, an error no retry can fix. The receiver records no such event
	// (store.CheckEvent), but a row written before that check existed may still carry one.
	if !httpguts.ValidHeaderFieldValue(contentType) {
		return 0, &Error{Unsent: true, Err: errors.New("the event's Content-Type is not a valid HTTP header value")}
	}
	h := req.Header
	for k, v := range t.Header {
		h[k] = v
	}
	h.Set("ce-specversion", "1.0")
	h.Set("ce-id", HeaderValue(ev.EventID))
	h.Set("ce-source", HeaderValue(Source(ev)))
	h.Set("ce-type", HeaderValue(eventType))
	h.Set("ce-time", ev.ReceivedAt.UTC().Format(time.RFC3339Nano))
	h.Set("Content-Type", contentType)
	h.Set("Idempotency-Key", IdempotencyKey(ev))
	// The same key as a CloudEvents extension attribute: a Knative Broker passes on the ce-
	// attributes and drops other headers.
	h.Set("ce-"+IdempotencyKeyAttribute, IdempotencyKey(ev))
	if r := replayValue(ev); r != "" {
		h.Set("ce-"+ReplayAttribute, r)
	}
	h.Set("User-Agent", UserAgent)
	// W3C traceparent/tracestate of the attempt (tracing on): the HTTP binding's tracing headers.
	injectHTTP(ctx, h)
	spanHTTP(ctx, t.URL)

	client := s.client
	if t.Client != nil {
		client = t.Client
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, &Error{Retryable: true, Err: transportError(ctx, err)}
	}
	spanHTTPResponse(ctx, resp)
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, drainLimit))
	_ = resp.Body.Close()

	code := resp.StatusCode
	switch {
	case code >= 200 && code < 300:
		return code, nil
	case code == http.StatusRequestTimeout, code == http.StatusTooManyRequests, code >= 500:
		return code, &Error{
			StatusCode: code,
			Retryable:  true,
			RetryAfter: parseRetryAfter(resp.Header.Get("Retry-After"), s.now()),
		}
	default:
		return code, &Error{StatusCode: code}
	}
}

// transportError strips the request URL that net/http wraps around its errors.
func transportError(ctx context.Context, err error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return errors.New("timeout waiting for the sink")
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return errors.New("timeout waiting for the sink")
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s: %w", strings.ToLower(ue.Op), ue.Err)
	}
	return err
}

// parseRetryAfter reads delay-seconds or an HTTP-date; anything else, or a date in the past,
// counts as no hint.
func parseRetryAfter(v string, now time.Time) time.Duration {
	wait, _ := providers.ParseRetryAfter(v, now)
	return wait
}

const maxDuration = time.Duration(1<<63 - 1)
