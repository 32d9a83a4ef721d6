package controllers

import (
	"errors"
	"fmt"
	"time"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/providers"
)

// stallError ends a reconcile that cannot progress without a human (bad spec, a request the
// provider refuses): Stalled=True, no retry until the object or a referenced Secret changes.
// A stall the provider answered (atProvider) is also looked at again once per resync interval:
// its cause can be fixed at the provider with nothing changing here (a scope granted to the
// same token, a repository created, a proxy in front of the API repaired, a slot freed).
type stallError struct {
	reason     hookv1.Reason
	msg        string
	atProvider bool
}

func (e *stallError) Error() string { return e.msg }

func stall(reason hookv1.Reason, format string, args ...any) error {
	return &stallError{reason: reason, msg: fmt.Sprintf(format, args...)}
}

// stallAtProvider is a stall whose cause lies at the provider.
func stallAtProvider(reason hookv1.Reason, format string, args ...any) error {
	return &stallError{reason: reason, msg: fmt.Sprintf(format, args...), atProvider: true}
}

// waitError ends a reconcile that knows when to try again (rate limits, a conflict that a
// user may resolve): Reconciling=True, RequeueAfter.
type waitError struct {
	reason hookv1.Reason
	msg    string
	after  time.Duration
}

func (e *waitError) Error() string { return e.msg }

func wait(reason hookv1.Reason, after time.Duration, format string, args ...any) error {
	return &waitError{reason: reason, after: after, msg: fmt.Sprintf(format, args...)}
}

// defaultRateLimitWait is used for a rate limit whose error carries no wait. Every provider call
// passes the account's limiter, which sets the wait (stated, or the provider's backoff), so this
// is only a floor: the first wait of the backoff of a provider that states none.
var defaultRateLimitWait = providers.DefaultRateLimitBackoff.First

// fromList classifies a failed list: the account's target missing (or hidden from the
// credential) stalls until the spec or the credentials change; anything else as fromProvider.
func fromList(err error) error {
	var pe *providers.Error
	if errors.As(err, &pe) && pe.Kind == providers.NotFound {
		return stallAtProvider(hookv1.ReasonTargetNotFound, "listing registrations: %s", pe.Message)
	}
	return fromProvider("listing registrations", err)
}

// fromProvider turns a classified provider error into a stall, a wait or a transient error.
func fromProvider(op string, err error) error {
	var pe *providers.Error
	if !errors.As(err, &pe) {
		return fmt.Errorf("%s: %w", op, err)
	}
	switch pe.Kind {
	case providers.RateLimited:
		after := pe.RetryAfter
		if after <= 0 {
			after = defaultRateLimitWait
		}
		return wait(hookv1.ReasonRateLimited, after, "%s: provider rate limit, retrying in %s", op, after)
	case providers.Permanent:
		return stallAtProvider(hookv1.ReasonProviderRejected, "%s: provider rejected the request: %s", op, pe.Message)
	case providers.QuotaExceeded:
		return stallAtProvider(hookv1.ReasonQuotaExceeded, "%s: provider quota reached: %s", op, pe.Message)
	case providers.Unauthorized:
		return stallAtProvider(hookv1.ReasonUnauthorized, "%s: provider refused the credentials: %s", op, pe.Message)
	}
	return fmt.Errorf("%s: %w", op, err)
}
