package account

import (
	"context"
	"net/http"
	"time"

	"golang.org/x/time/rate"

	"github.com/hookwarden/hookwarden/providers"
)

// What a recovery run asks of the provider and of the receiver's endpoint. Provider requests go
// through the credential's limiter, as every other request does; they do not need the
// Account's lock (the client is safe for concurrent use, and nothing here touches the cached
// list), so a long run never holds up the other subscriptions of the account.

// RecoveryOps is the view of an account a recovery run uses.
type RecoveryOps struct{ a *Account }

// Recovery is the account as a recovery run uses it (no lock needed).
func (a *Account) Recovery() RecoveryOps { return RecoveryOps{a} }

func (o RecoveryOps) call(ctx context.Context, op string, fn func() error) error {
	return Ops{a: o.a}.call(ctx, op, fn)
}

// Caps are the provider's recovery capabilities.
func (o RecoveryOps) Caps() providers.RecoveryCapabilities { return o.a.caps.Recovery }

// CanRecover reports whether the client implements what its recovery mode needs.
func (o RecoveryOps) CanRecover() bool {
	switch o.a.caps.Recovery.Mode {
	case providers.RecoveryRedeliver:
		_, ok := o.a.client.(providers.Recoverer)
		return ok
	case providers.RecoveryFetch:
		_, ok := o.a.client.(providers.Recoverer)
		_, signs := o.a.client.(providers.DeliverySigner)
		return ok && signs
	case providers.RecoveryRange:
		_, ok := o.a.client.(providers.RangeRecoverer)
		return ok
	}
	return false
}

// CanReenable reports whether the client implements providers.Reenabler.
func (o RecoveryOps) CanReenable() bool {
	_, ok := o.a.client.(providers.Reenabler)
	return ok
}

// CanListEvents reports whether the provider can list every event, delivered or not
// (providers.EventLister).
func (o RecoveryOps) CanListEvents() bool {
	_, ok := o.a.client.(providers.EventLister)
	return ok
}

// Events lists every event of the given types since since (providers.EventLister).
func (o RecoveryOps) Events(ctx context.Context, events []string, since time.Time, limit int) (providers.MissedPage, error) {
	var page providers.MissedPage
	err := o.call(ctx, "events", func() (err error) {
		page, err = o.a.client.(providers.EventLister).Events(ctx, events, since, limit)
		return err
	})
	return page, err
}

// Missed lists the deliveries (or events) the provider reports undelivered since since
// (providers.Recoverer).
func (o RecoveryOps) Missed(ctx context.Context, reg providers.Registration, events []string, since time.Time, limit int) (providers.MissedPage, error) {
	var page providers.MissedPage
	err := o.call(ctx, "missed", func() (err error) {
		page, err = o.a.client.(providers.Recoverer).Missed(ctx, reg, events, since, limit)
		return err
	})
	return page, err
}

// Redeliver asks for one redelivery. A wait longer than zero says the provider's own
// redelivery rate (RecoveryCapabilities.RedeliverRate) allows none now: nothing was sent.
func (o RecoveryOps) Redeliver(ctx context.Context, reg providers.Registration, m providers.Missed) (wait time.Duration, err error) {
	if r := o.a.caps.Recovery.RedeliverRate; !r.IsZero() {
		if wait := o.a.limiter.redeliverWait(r); wait > 0 {
			return wait, nil
		}
	}
	return 0, o.call(ctx, "redeliver", func() error { return o.a.client.(providers.Recoverer).Redeliver(ctx, reg, m) })
}

// RecoverSince asks the provider to resend everything since since (providers.RangeRecoverer).
func (o RecoveryOps) RecoverSince(ctx context.Context, reg providers.Registration, since time.Time) error {
	return o.call(ctx, "recover_since", func() error { return o.a.client.(providers.RangeRecoverer).RecoverSince(ctx, reg, since) })
}

// Reenable enables a registration the provider disabled (providers.Reenabler).
func (o RecoveryOps) Reenable(ctx context.Context, reg providers.Registration) error {
	return o.call(ctx, "reenable", func() error { return o.a.client.(providers.Reenabler).Reenable(ctx, reg) })
}

// Health asks a providers.HealthReporter; ok is false when the client is none.
func (o RecoveryOps) Health(ctx context.Context, reg providers.Registration) (h providers.DeliveryHealth, ok bool, err error) {
	hr, ok := o.a.client.(providers.HealthReporter)
	if !ok {
		return h, false, nil
	}
	err = o.call(ctx, "health", func() (err error) {
		h, err = hr.Health(ctx, reg)
		return err
	})
	return h, true, err
}

// Sign returns the headers the provider sends with payload (providers.DeliverySigner).
func (o RecoveryOps) Sign(payload []byte, secret string, now time.Time) (http.Header, error) {
	return o.a.client.(providers.DeliverySigner).SignDelivery(payload, secret, now)
}

// redeliverWait takes a token of the credential's redelivery bucket (r, created on first use)
// at the limiter's clock, or returns how long until one is free (taking none).
func (l *limiter) redeliverWait(r providers.Rate) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.redeliver == nil {
		l.redeliver = rate.NewLimiter(rate.Limit(r.PerSecond), max(r.Burst, 1))
	}
	now := l.now()
	res := l.redeliver.ReserveN(now, 1)
	if d := res.DelayFrom(now); d > 0 {
		res.CancelAt(now)
		return d
	}
	return 0
}
