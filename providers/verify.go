package providers

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// Delivery is one incoming webhook request as the receiver read it.
type Delivery struct {
	Header http.Header
	Body   []byte    // raw bytes, exactly as received
	Now    time.Time // the receiver's clock (injected in tests)
}

// Verified is what a verifier learned from an authentic delivery.
type Verified struct {
	EventID   string // the dedupe key: stable across the provider's retries
	EventType string // e.g. "invoice.paid", "push"; may be empty
	// IDFallback is true when no stable id existed and EventID is a hash of stable fields.
	IDFallback bool
	// Ping marks an authentic test delivery the provider sends to check the endpoint (GitHub's
	// ping on create): the receiver answers it and counts it, and never delivers it to the sink.
	Ping bool
	// ReplayKey is set when the signature does not cover EventID (GitHub signs the body only; a
	// REST profile may take the id from an unsigned header; a token scheme signs nothing): the
	// hex SHA-256 of the signed content (of the body, for a token scheme). The receiver records
	// it beside the event id, so the same signed bytes resent under a fresh id are a duplicate.
	// Empty when the id is signed (Stripe's in the body, Standard Webhooks' webhook-id) or is
	// the body hash itself.
	ReplayKey string
}

// Digest is the hex SHA-256 of the concatenated parts: a ReplayKey.
func Digest(parts ...[]byte) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write(p)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Verifier checks a delivery against every secret that may currently sign it (rotation overlap) and extracts its dedupe key.
type Verifier interface {
	Verify(d Delivery, secrets [][]byte) (Verified, error)
}

// Verification errors; the receiver answers 401 to all of them but ErrAmbiguous, and stores
// nothing.
var (
	ErrNoSignature  = errors.New("no signature header")
	ErrBadSignature = errors.New("no signature matches") // also: wrong secret, tampered body
	ErrMalformed    = errors.New("malformed signature header")
	ErrTooOld       = errors.New("timestamp outside the tolerance (too old)")
	ErrTooNew       = errors.New("timestamp outside the tolerance (in the future)")
	ErrNoEventID    = errors.New("delivery carries no event id")
	// ErrAmbiguous is an authentic delivery whose event id or type can be read more than one
	// way: a top-level JSON key given twice (in any spelling a decoder folds together), or its
	// header sent twice. Which one to dedupe on would be a guess, and the sink might read the
	// other, so the receiver refuses it (422 invalid_event) instead.
	ErrAmbiguous = errors.New("event id or type is ambiguous")
)

// MatchAny reports whether sign(secret), for any non-empty secret, equals any of the
// signatures, comparing in constant time; usable counts the secrets tried. Every pair is
// compared, with no early exit, so timing does not tell which secret or signature matched.
// All verifiers share it: it is where rotation overlap (several secrets) and several
// signatures per header are honoured.
func MatchAny(secrets [][]byte, sign func(secret []byte) []byte, signatures ...[]byte) (matched bool, usable int) {
	for _, secret := range secrets {
		if len(secret) == 0 {
			continue
		}
		usable++
		want := sign(secret)
		for _, got := range signatures {
			if hmac.Equal(want, got) {
				matched = true
			}
		}
	}
	return matched, usable
}

// maxTimestamp keeps time.Unix away from int64 overflow; anything beyond it (about 34,000 years
// from 1970) is far outside every tolerance either way.
const maxTimestamp = 1 << 40

// CheckAge returns nil when the signed unix time lies at most maxAge before now and at most
// maxAhead after it, and otherwise ErrTooOld or ErrTooNew (through VerifyError). A zero now means
// time.Now. Verifiers call it after the signature matched, so those two errors always describe
// an authentic delivery: a clock problem or a replay, never a forgery.
func CheckAge(provider string, now time.Time, signed int64, maxAge, maxAhead time.Duration) error {
	if now.IsZero() {
		now = time.Now()
	}
	// Compared as times: a duration saturates about 292 years out, and negating the saturated
	// minimum would let a far-future timestamp through.
	at := time.Unix(min(max(signed, -maxTimestamp), maxTimestamp), 0)
	switch {
	case at.Before(now.Add(-maxAge)):
		return VerifyError(provider, ErrTooOld, "signed %s before the receiver's clock, tolerance %s", now.Sub(at), maxAge)
	case at.After(now.Add(maxAhead)):
		return VerifyError(provider, ErrTooNew, "signed %s after the receiver's clock, tolerance %s", at.Sub(now), maxAhead)
	}
	return nil
}

// VerifyError wraps a verification sentinel, prefixed with the provider's name. Callers pass
// only counts, durations, header names and fixed text, never header values, so no signature or
// secret can leak into logs.
func VerifyError(provider string, sentinel error, format string, args ...any) error {
	return fmt.Errorf("%s: %w: %s", provider, sentinel, fmt.Sprintf(format, args...))
}
