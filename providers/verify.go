package providers

import (
	"errors"
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
}

// Verifier checks a delivery against every secret that may currently sign it (rotation overlap) and extracts its dedupe key.
type Verifier interface {
	Verify(d Delivery, secrets [][]byte) (Verified, error)
}

// Verification errors; the receiver answers 401 to all of them and stores nothing.
var (
	ErrNoSignature  = errors.New("no signature header")
	ErrBadSignature = errors.New("no signature matches") // also: wrong secret, tampered body
	ErrMalformed    = errors.New("malformed signature header")
	ErrTooOld       = errors.New("timestamp outside the tolerance (too old)")
	ErrTooNew       = errors.New("timestamp outside the tolerance (in the future)")
	ErrNoEventID    = errors.New("delivery carries no event id")
)
