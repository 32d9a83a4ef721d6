package decide

import (
	"errors"
	"fmt"
	"time"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/providers"
)

// StallError ends a reconcile that cannot progress without a human (bad spec, a request the
// provider refuses): Stalled=True, no retry until the object or a referenced Secret changes.
// A stall the provider answered (atProvider) is also looked at again once per resync interval:
// its cause can be fixed at the provider with nothing changing here (a scope granted to the
// same token, a repository created, a proxy in front of the API repaired, a slot freed).
type StallError struct {
	Reason     hookv1.Reason
	Msg        string
	AtProvider bool
}

// Error is the stall's message, as the Stalled condition shows it.
func (e *StallError) Error() string { return e.Msg }

// NewStall is a stall for reason: no retry until the object or a referenced Secret changes.
func NewStall(reason hookv1.Reason, format string, args ...any) error {
	return &StallError{Reason: reason, Msg: fmt.Sprintf(format, args...)}
}

// NewStallAtProvider is a stall whose cause lies at the provider.
func NewStallAtProvider(reason hookv1.Reason, format string, args ...any) error {
	return &StallError{Reason: reason, Msg: fmt.Sprintf(format, args...), AtProvider: true}
}

// WaitError ends a reconcile that knows when to try again (rate limits, a conflict that a
// user may resolve): Reconciling=True, RequeueAfter.
type WaitError struct {
	Reason hookv1.Reason
	Msg    string
	After  time.Duration
}

// Error is the wait's message, as the Reconciling condition shows it.
func (e *WaitError) Error() string { return e.Msg }

// NewWait is a wait of after for reason.
func NewWait(reason hookv1.Reason, after time.Duration, format string, args ...any) error {
	return &WaitError{Reason: reason, After: after, Msg: fmt.Sprintf(format, args...)}
}

// DefaultRateLimitWait is used for a rate limit whose error carries no wait. Every provider call
// passes the account's limiter, which sets the wait (stated, or the provider's backoff), so this
// is only a floor: the first wait of the backoff of a provider that states none.
var DefaultRateLimitWait = providers.DefaultRateLimitBackoff.First

// FromList classifies a failed list: the account's target missing (or hidden from the
// credential) stalls until the spec or the credentials change; anything else as fromProvider.
func FromList(err error) error {
	var pe *providers.Error
	if errors.As(err, &pe) && pe.Kind == providers.NotFound {
		return NewStallAtProvider(hookv1.ReasonTargetNotFound, "listing registrations: %s", pe.Message)
	}
	return FromProvider("listing registrations", err)
}

// FromProvider turns a classified provider error into a stall, a wait or a transient error.
func FromProvider(op string, err error) error {
	var pe *providers.Error
	if !errors.As(err, &pe) {
		return fmt.Errorf("%s: %w", op, err)
	}
	switch pe.Kind {
	case providers.RateLimited:
		after := pe.RetryAfter
		if after <= 0 {
			after = DefaultRateLimitWait
		}
		return NewWait(hookv1.ReasonRateLimited, after, "%s: provider rate limit, retrying in %s", op, after)
	case providers.Permanent:
		return NewStallAtProvider(hookv1.ReasonProviderRejected, "%s: provider rejected the request: %s", op, pe.Message)
	case providers.QuotaExceeded:
		return NewStallAtProvider(hookv1.ReasonQuotaExceeded, "%s: provider quota reached: %s", op, pe.Message)
	case providers.Unauthorized:
		return NewStallAtProvider(hookv1.ReasonUnauthorized, "%s: provider refused the credentials: %s", op, pe.Message)
	}
	return fmt.Errorf("%s: %w", op, err)
}
