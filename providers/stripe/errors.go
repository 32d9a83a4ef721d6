package stripe

import (
	"errors"
	"net/http"
	"strings"
	"time"

	stripego "github.com/stripe/stripe-go/v76"

	"github.com/hookwarden/hookwarden/providers"
)

// quotaMessage is how Stripe phrases the per-account endpoint limit. The exact live wording is
// not verified; it is matched case-insensitively anywhere in a 400's message.
const quotaMessage = "maximum of 16"

// classify turns anything the stripe-go client returned into a *providers.Error whose message
// never contains the API key.
func (c *Client) classify(err error) error {
	if err == nil {
		return nil
	}
	var pe *providers.Error
	if errors.As(err, &pe) {
		return pe
	}

	var se *stripego.Error
	if !errors.As(err, &se) {
		// Network errors, timeouts, cancelled contexts and bodies that are not Stripe error JSON
		// (a proxy's 502 page). stripe-go never puts the key in a URL, but redact anyway: the
		// message is shown to users.
		return &providers.Error{Kind: providers.Transient, Message: c.redact("request failed: " + err.Error())}
	}

	status := se.HTTPStatusCode
	msg := se.Msg
	if msg == "" {
		msg = http.StatusText(status)
	}
	out := &providers.Error{
		StatusCode: status,
		Message:    c.redact(msg),
		RequestID:  se.RequestID,
		RetryAfter: c.retryAfter(se),
	}
	out.Kind = kindOf(status, se.Msg, se.Code == stripego.ErrorCodeResourceMissing)
	return out
}

// kindOf classifies a Stripe error answer, v1 or v2, by its status (and missing: the object is
// gone, whatever the status says).
func kindOf(status int, msg string, missing bool) providers.Kind {
	switch {
	case status == http.StatusTooManyRequests:
		// Both rate_limit and lock_timeout. stripe-go would retry only lock_timeout, and we run
		// it with retries off: the reconciler owns the backoff. Stripe's docs promise no
		// Retry-After on a 429; without one, RetryAfter stays zero and the reconciler backs off
		// per credential by rateLimitBackoff (seconds, for a per-second limiter).
		return providers.RateLimited
	case status == http.StatusNotFound || missing:
		return providers.NotFound
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return providers.Unauthorized
	case status == http.StatusBadRequest && strings.Contains(strings.ToLower(msg), quotaMessage):
		return providers.QuotaExceeded
	case status == http.StatusConflict:
		// idempotency_key_in_use: a request with the same key is still running at Stripe. The
		// same call succeeds (or replays) once it finishes; stripe-go retries 409 for this reason.
		return providers.Transient
	case status >= 400 && status < 500:
		return providers.Permanent
	}
	return providers.Transient
}

// retryAfter reads Retry-After (delta-seconds or HTTP-date) from the response that produced se.
// stripe-go v76 keeps the error response on Error.LastResponse, headers included.
func (c *Client) retryAfter(se *stripego.Error) time.Duration {
	if se.LastResponse == nil {
		return 0
	}
	wait, _ := providers.ParseRetryAfter(se.LastResponse.Header.Get("Retry-After"), c.now())
	return wait
}

// redact removes the API key from s.
func (c *Client) redact(s string) string {
	if c.key == "" {
		return s
	}
	return strings.ReplaceAll(s, c.key, "[redacted]")
}

// invalid reports a problem with the caller's input, found before any request is sent.
func invalid(msg string) error {
	return &providers.Error{Kind: providers.Permanent, Message: msg}
}
