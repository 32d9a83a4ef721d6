package stripe

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"time"

	"github.com/hookwarden/hookwarden/internal/jsonscan"
	"github.com/hookwarden/hookwarden/providers"
)

// SignatureHeader carries the signature of an incoming Stripe webhook.
const SignatureHeader = "Stripe-Signature"

const (
	// DefaultTolerance is how far in the past a signature's t may lie; it matches stripe-go's
	// webhook.DefaultTolerance.
	DefaultTolerance = 300 * time.Second
	// DefaultFutureSkew is how far in the future t may lie. stripe-go accepts any future t; we
	// bound it so a signature made with a skewed clock cannot be replayed for as long as it likes.
	DefaultFutureSkew = 300 * time.Second
)

// Verifier checks the Stripe-Signature header of incoming Stripe webhooks the way stripe-go's
// webhook package does (v1 = hex HMAC-SHA256 keyed with the whole "whsec_..." string over
// "<t>.<body>"), with three deliberate differences:
//   - t may lie at most the future skew ahead of the receiver's clock (stripe-go: unbounded);
//   - the event's api_version is not checked (a version mismatch is the reconciler's concern, and
//     rejecting an authentic delivery would only make Stripe retry it for three days);
//   - the header is parsed more strictly: exactly one t, in canonical decimal, and a header
//     carrying no v1 element is ErrMalformed.
//
// The dedupe key is the event's "id" from the body, which Stripe keeps across retries (for a v2
// thin notification that names the snapshot event it stands for, that event's id: eventFields).
type Verifier struct {
	tolerance  time.Duration
	futureSkew time.Duration
}

var _ providers.Verifier = (*Verifier)(nil)

// VerifierOption configures a Verifier. (Named so it cannot clash with the Client's options.)
type VerifierOption func(*Verifier)

// WithTolerance sets how far in the past t may lie (default DefaultTolerance); a negative
// duration counts as zero.
func WithTolerance(d time.Duration) VerifierOption {
	return func(v *Verifier) { v.tolerance = max(d, 0) }
}

// WithFutureSkew sets how far in the future t may lie (default DefaultFutureSkew); a negative
// duration counts as zero.
func WithFutureSkew(d time.Duration) VerifierOption {
	return func(v *Verifier) { v.futureSkew = max(d, 0) }
}

// NewVerifier returns a Verifier with the default tolerances unless options say otherwise.
func NewVerifier(opts ...VerifierOption) *Verifier {
	v := &Verifier{tolerance: DefaultTolerance, futureSkew: DefaultFutureSkew}
	for _, o := range opts {
		o(v)
	}
	return v
}

// SignHeader returns the Stripe-Signature value Stripe would send for body signed with secret at
// t. It is byte-for-byte what stripe-go's webhook.GenerateTestSignedPayload produces.
func SignHeader(secret string, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + hex.EncodeToString(signature([]byte(secret), ts, body))
}

// Verify accepts the delivery if any v1 signature matches any of the secrets (several secrets
// during a rotation overlap, several v1 values while Stripe rolls a secret), t is within the
// tolerance of d.Now (time.Now when zero) and the body carries a non-empty string "id".
//
// Errors wrap a providers sentinel and never contain a secret or a signature:
//   - ErrNoSignature: no Stripe-Signature header, or an empty one;
//   - ErrMalformed: several Stripe-Signature headers, an element that is not key=value, a missing,
//     repeated or non-decimal t, no v1 element (this includes "t=1, v1=..." with whitespace, which
//     stripe-go reports as ErrNoValidSignature), or no v1 value of 64 hex digits;
//   - ErrBadSignature: nothing matches (wrong secret, tampered body, no usable secret);
//   - ErrTooOld / ErrTooNew: authentic, but t is outside the tolerance;
//   - ErrNoEventID: authentic, but the body has no non-empty string "id";
//   - ErrAmbiguous: authentic, but more than one top-level member names "id", "type", "object"
//     or "snapshot_event".
//
// Empty secrets are skipped: an empty HMAC key is not a secret.
func (v *Verifier) Verify(d providers.Delivery, secrets [][]byte) (providers.Verified, error) {
	values := d.Header.Values(SignatureHeader)
	if len(values) == 0 || values[0] == "" {
		return providers.Verified{}, providers.VerifyError("stripe", providers.ErrNoSignature, "the %s header is missing", SignatureHeader)
	}
	if len(values) > 1 {
		return providers.Verified{}, providers.VerifyError("stripe", providers.ErrMalformed, "%d %s headers, want one", len(values), SignatureHeader)
	}
	h, err := parseSignatureHeader(values[0])
	if err != nil {
		return providers.Verified{}, err
	}

	matched, usable := providers.MatchAny(secrets, func(secret []byte) []byte { return signature(secret, h.timestamp, d.Body) }, h.signatures...)
	if !matched {
		return providers.Verified{}, providers.VerifyError("stripe", providers.ErrBadSignature,
			"none of %d v1 signatures matches any of %d secrets", len(h.signatures), usable)
	}

	if err := providers.CheckAge("stripe", d.Now, h.unix, v.tolerance, v.futureSkew); err != nil {
		return providers.Verified{}, err
	}
	return eventFields(d.Body)
}

// signedHeader is a parsed Stripe-Signature value.
type signedHeader struct {
	timestamp  string // t exactly as sent; it is what was signed
	unix       int64  // t as a number
	signatures [][]byte
}

// parseSignatureHeader parses "t=<unix>,v1=<hex>[,v1=<hex>...][,v0=...]" as stripe-go does:
// elements are split on ",", never trimmed, each must be exactly key=value, unknown keys (v0,
// future schemes) are ignored and a v1 value that is not hex is skipped. Unlike stripe-go it
// requires exactly one canonical t and at least one v1.
func parseSignatureHeader(s string) (signedHeader, error) {
	var h signedHeader
	haveT := false
	v1 := 0
	spacedV1 := false
	for element := range strings.SplitSeq(s, ",") {
		key, value, ok := strings.Cut(element, "=")
		if !ok || strings.Contains(value, "=") {
			return h, providers.VerifyError("stripe", providers.ErrMalformed, "an element is not key=value")
		}
		switch key {
		case "t":
			if haveT {
				return h, providers.VerifyError("stripe", providers.ErrMalformed, "more than one t")
			}
			n, err := strconv.ParseInt(value, 10, 64)
			if err != nil || strconv.FormatInt(n, 10) != value {
				return h, providers.VerifyError("stripe", providers.ErrMalformed, "t is not a unix timestamp")
			}
			haveT = true
			h.timestamp = value
			h.unix = n
		case "v1":
			v1++
			sig, err := hex.DecodeString(value)
			if err != nil || len(sig) != sha256.Size {
				continue // stripe-go skips undecodable signatures; such a value can never match
			}
			h.signatures = append(h.signatures, sig)
		default:
			if strings.TrimSpace(key) == "v1" {
				spacedV1 = true
			}
		}
	}
	switch {
	case !haveT:
		return h, providers.VerifyError("stripe", providers.ErrMalformed, "no t element")
	case v1 == 0 && spacedV1:
		return h, providers.VerifyError("stripe", providers.ErrMalformed, "no v1 element (elements must not be separated by whitespace)")
	case v1 == 0:
		return h, providers.VerifyError("stripe", providers.ErrMalformed, "no v1 element")
	case len(h.signatures) == 0:
		return h, providers.VerifyError("stripe", providers.ErrMalformed, "no v1 value is 64 hex digits")
	}
	return h, nil
}

// signature is HMAC-SHA256 keyed with the secret's raw bytes ("whsec_" included, not
// base64-decoded) over "<t>.<body>".
func signature(secret []byte, timestamp string, body []byte) []byte {
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(timestamp))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return mac.Sum(nil)
}

// thinEvent is the object of a v2 event destination's thin notification.
const thinEvent = "v2.core.event"

// eventFields reads the dedupe key and the event type from an authentic body: a v1 snapshot
// event's id, or a v2 thin notification's ({id, object: "v2.core.event", type, related_object,
// ...}: the same Stripe-Signature, the same top-level id and type). A thin event that stands in
// for a snapshot event during Stripe's migration names it in snapshot_event, which Stripe says
// to use as the idempotency key: it is the dedupe key then, so the pair is processed once. Top-
// level keys are matched exactly, unlike encoding/json's case-insensitive struct matching; a
// key that two members name, in any spelling encoding/json would match, is ErrAmbiguous.
func eventFields(body []byte) (providers.Verified, error) {
	keys := [4]string{"id", "type", "object", "snapshot_event"}
	var v [4]string
	ok, ambiguous := jsonscan.UniqueTopLevelStrings(body, v[:], keys[:]...)
	if !ok {
		return providers.Verified{}, providers.VerifyError("stripe", providers.ErrNoEventID, "the body is not a JSON object")
	}
	if ambiguous >= 0 {
		return providers.Verified{}, providers.VerifyError("stripe", providers.ErrAmbiguous, "the body has more than one top-level %q member (keys compared as encoding/json does, ignoring case)", keys[ambiguous])
	}
	if v[0] == "" {
		return providers.Verified{}, providers.VerifyError("stripe", providers.ErrNoEventID, `the body has no non-empty string "id"`)
	}
	if v[2] == thinEvent && v[3] != "" {
		return providers.Verified{EventID: v[3], EventType: v[1]}, nil
	}
	return providers.Verified{EventID: v[0], EventType: v[1]}, nil
}
