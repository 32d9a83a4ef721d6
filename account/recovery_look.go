package account

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/hookwarden/hookwarden/providers"
)

// The shared look. A provider that keeps the events themselves and no per-registration view of
// deliveries (RecoveryFetch: Stripe) is looked at once per resync for each subscription, and
// where its listing of undelivered events is account-wide anyway
// (RecoveryCapabilities.AccountWide: Stripe's /v1/events?delivery_success=false names no
// endpoint), one listing of the account, every type, answers for all its subscriptions in the
// wave: one request per account and wave instead of one per subscription, and a subscription with nothing missed starts no run at all (no
// status write marking it running, no check of its endpoint). Only a subscription the listing
// shows something for runs, and lists for itself as before.

// sharedLook is an account's latest listing of undelivered events, every type.
type sharedLook struct {
	mu sync.Mutex
	// at is when the listing was asked for: it covers what was created in [since, at).
	at, since time.Time
	page      providers.MissedPage
}

// lookPage bounds the shared listing: beyond it the listing cannot say "nothing" for sure, and
// the subscriptions run as before.
const lookPage = 100

// Look reports whether the account holds no undelivered event of the given types ("*" or none:
// any) created at or after since, from a listing no older than maxAge that reaches back to
// since; otherwise it lists the account again, from floor (at most since) so the one listing
// serves the wave's other subscriptions, whose watermarks may be a little older. covered is the
// time up to which a "nothing" holds (when the listing was asked for); sure is false when the
// listing cannot answer for certain (cut at lookPage, or holding malformed entries a run would
// report): the caller runs.
func (o RecoveryOps) Look(ctx context.Context, types []string, since, floor time.Time, maxAge time.Duration) (nothing bool, covered time.Time, sure bool, err error) {
	l := &o.a.look
	l.mu.Lock()
	defer l.mu.Unlock()
	now := o.a.now()
	if l.at.IsZero() || now.Sub(l.at) >= maxAge || l.since.After(since) {
		if since.Before(floor) {
			floor = since // the listing reaches back to since, at least
		}
		var page providers.MissedPage
		if err := o.call(ctx, "look", func() (err error) {
			page, err = o.a.client.(providers.Recoverer).Missed(ctx, providers.Registration{}, []string{"*"}, floor, lookPage)
			return err
		}); err != nil {
			return false, time.Time{}, false, err
		}
		l.at, l.since, l.page = now, floor, page
	}
	if l.page.More || l.page.Malformed > 0 {
		return false, time.Time{}, false, nil
	}
	for _, m := range l.page.Missed {
		if !m.At.Before(since) && wants(types, m.Type) {
			return false, time.Time{}, true, nil
		}
	}
	return true, l.at, true, nil
}

// wants reports whether a registration for types receives events of type typ.
func wants(types []string, typ string) bool {
	return len(types) == 0 || slices.Contains(types, "*") || slices.Contains(types, typ)
}
