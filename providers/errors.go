package providers

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// Kind classifies a provider error at the boundary.
type Kind int

const (
	// Transient errors (5xx, network, timeouts) are retried with backoff.
	Transient Kind = iota
	// NotFound means the registration does not exist (any more).
	NotFound
	// Permanent errors (4xx other than the ones below) will not succeed on retry; the message is
	// the provider's own and is shown to the user.
	Permanent
	// Unauthorized means the credential was refused (401/403).
	Unauthorized
	// RateLimited means the provider asked us to slow down; retry after RetryAfter.
	RateLimited
	// QuotaExceeded means an account limit was hit (Stripe's 16 endpoints, GitHub's 20 hooks).
	QuotaExceeded
	// AlreadyExists means the provider refused a create because a registration for the same
	// target exists (GitHub's 422 "Hook already exists"): nothing was created; list again.
	AlreadyExists
)

func (k Kind) String() string {
	switch k {
	case Transient:
		return "Transient"
	case NotFound:
		return "NotFound"
	case Permanent:
		return "Permanent"
	case Unauthorized:
		return "Unauthorized"
	case RateLimited:
		return "RateLimited"
	case QuotaExceeded:
		return "QuotaExceeded"
	case AlreadyExists:
		return "AlreadyExists"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Error is the classified error every provider returns. Message is safe to show to users: it
// never contains credentials or signing secrets.
type Error struct {
	Kind       Kind
	StatusCode int
	// Message is the provider's message (for Permanent, what the user needs to fix).
	Message string
	// RetryAfter is how long to wait before the next call, as the provider said (RateLimited;
	// optional otherwise). Zero means the provider did not say: the caller backs off by the
	// provider's Capabilities.RateLimitBackoff.
	RetryAfter time.Duration
	// RequestID is the provider's request id, for support tickets.
	RequestID string
}

func (e *Error) Error() string {
	s := e.Kind.String()
	if e.StatusCode != 0 {
		s += fmt.Sprintf(" (HTTP %d)", e.StatusCode)
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	if e.RequestID != "" {
		s += " [request " + e.RequestID + "]"
	}
	return s
}

// KindOf returns the Kind of err; errors that were not classified count as Transient.
func KindOf(err error) Kind {
	var pe *Error
	if errors.As(err, &pe) {
		return pe.Kind
	}
	return Transient
}

// IsNotFound reports whether err says the registration does not exist.
func IsNotFound(err error) bool { return err != nil && KindOf(err) == NotFound }

// RetryAfter returns the wait a classified error asks for, or zero.
func RetryAfter(err error) time.Duration {
	var pe *Error
	if errors.As(err, &pe) {
		return pe.RetryAfter
	}
	return 0
}

// ParseRetryAfter reads a Retry-After value, delay-seconds or an HTTP-date (RFC 9110 §10.2.3),
// against now. ok is false for an empty or unparsable value; a negative delay or a date in the
// past is a zero wait; a delay too large for a Duration saturates.
func ParseRetryAfter(v string, now time.Time) (wait time.Duration, ok bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		const maxWait = time.Duration(1<<63 - 1)
		if secs > int64(maxWait/time.Second) {
			return maxWait, true
		}
		return time.Duration(max(secs, 0)) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

// CheckCredential refuses, as a Permanent error naming what (e.g. "github token"), an empty
// credential or one net/http would refuse in a header on every request (whitespace, control
// characters). Clients call it in New, so the subscription stalls before any request.
func CheckCredential(what, credential string) error {
	if credential == "" {
		return &Error{Kind: Permanent, Message: what + " is empty"}
	}
	if strings.IndexFunc(credential, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0 {
		return &Error{Kind: Permanent, Message: what + " contains whitespace or control characters"}
	}
	return nil
}
