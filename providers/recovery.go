package providers

import (
	"context"
	"net/http"
	"time"
)

// Recovery: getting back the deliveries that never arrived, and the provider's own view of
// how deliveries to a registration go. Providers differ in what they keep and what they can be
// asked; the reconciler decides from RecoveryCapabilities, never from a provider's name.

// RecoveryMode says how a provider's missed deliveries come back.
type RecoveryMode int

const (
	// RecoveryNone: the provider offers no way (a REST profile without a recover section).
	RecoveryNone RecoveryMode = iota
	// RecoveryRedeliver: the provider keeps a log of deliveries per registration and sends a
	// failed one again on request (GitHub's attempts, GitLab's resend). The redelivery carries
	// the original delivery's id, so the receiver's ledger answers it as a duplicate if the
	// event had arrived after all.
	RecoveryRedeliver
	// RecoveryFetch: the provider keeps the events themselves and lists those not delivered
	// (Stripe's /v1/events?delivery_success=false); the manager hands each to the receiver,
	// signed as the provider signs, through its normal verify, dedupe, deliver path.
	RecoveryFetch
	// RecoveryRange: the provider resends everything since a time in one request (Svix's
	// POST /endpoint/{id}/recover).
	RecoveryRange
)

func (m RecoveryMode) String() string {
	switch m {
	case RecoveryNone:
		return "none"
	case RecoveryRedeliver:
		return "redeliver"
	case RecoveryFetch:
		return "fetch"
	case RecoveryRange:
		return "range"
	}
	return "unknown"
}

// RecoveryCapabilities say what a provider can recover.
type RecoveryCapabilities struct {
	Mode RecoveryMode
	// Window is how far back the provider keeps what can be recovered (Stripe's events: 30
	// days; GitHub's deliveries: 3 days, 7 on Enterprise Server; GitLab's hook events: 7 days).
	// Nothing older comes back; the reconciler reports it instead.
	Window time.Duration
	// RedeliverRate, when set, is the provider's own limit on redelivery requests (GitLab:
	// 5 resends a minute), kept below the credential's general pace.
	RedeliverRate Rate
	// Poll: the provider neither retries a failed delivery nor says anything of it short of
	// disabling the registration (GitLab: a hook stays executable until its fourth failure in
	// a row), so its health cannot tell when to recover: an automatic run looks for failed
	// deliveries once per resync, as on Stripe.
	Poll bool
	// AccountWide: Missed lists the account's undelivered events whatever the registration
	// (Stripe's /v1/events?delivery_success=false names no endpoint), so one listing of every
	// type ("*") answers for all the account's subscriptions in a resync wave.
	AccountWide bool
	// Unavailable, with Mode RecoveryNone, says why in the provider's own terms, for
	// status.recovery's message; empty: the message of a REST profile without a recover section.
	Unavailable string
}

// Missed is one delivery the provider reports as not delivered to a registration.
type Missed struct {
	// ID is the id the receiver dedupes the delivery on: Stripe's event id (evt_...), GitHub's
	// delivery guid (X-GitHub-Delivery), GitLab's Idempotency-Key.
	ID string
	// At is when the event happened (Stripe: the event's created; GitHub and GitLab: its
	// first delivery), the point the watermark moves to once it is recovered.
	At time.Time
	// Type is the event's type as the provider names it ("invoice.paid", "push").
	Type string
	// Handle is what Redeliver needs (GitHub: the id of the delivery to redeliver; GitLab: the
	// hook event id); empty for RecoveryFetch.
	Handle string
	// Payload is the event exactly as the provider delivers it (RecoveryFetch); nil where the
	// provider redelivers itself.
	Payload []byte
	// Expired: the delivery lies beyond the provider's window (it is listed but can no longer be
	// redelivered): reported, never requested.
	Expired bool
}

// MissedPage is one answer of Recoverer.Missed.
type MissedPage struct {
	// Missed, oldest first.
	Missed []Missed
	// Malformed counts entries skipped because the provider's answer lacked what its
	// description promises (a delivery without a guid, an event without an id): counted and
	// logged once, the rest go on.
	Malformed int
	// More: entries beyond the limit remain. A page never ends inside a second (CutMissed): it
	// holds every entry of each second it reaches, so the next page starts at the second after
	// its last entry's (NextSince), however many entries share one second.
	More bool
	// Covers, set by providers that keep a log of deliveries (RecoveryRedeliver), is the
	// earliest time the listing answers for: since, when the log reaches back that far;
	// otherwise the time of the oldest delivery the log still holds (any outcome), or the time
	// of the listing when it holds none. Before Covers the provider cannot say what failed.
	// Zero: the listing answers for everything since since.
	Covers time.Time
}

// CutMissed keeps the first limit entries of missed (oldest first) and every further entry of
// the second the limit falls in (0: all), and reports whether any were cut. A busy Stripe
// account creates far more events in one second than a page holds: a page cut inside a second
// could only go on from that second again, and would find the same entries.
func CutMissed(missed []Missed, limit int) (kept []Missed, more bool) {
	if limit <= 0 || len(missed) <= limit {
		return missed, false
	}
	last := missed[limit-1].At.Truncate(time.Second)
	n := limit
	for n < len(missed) && missed[n].At.Truncate(time.Second).Equal(last) {
		n++
	}
	return missed[:n], n < len(missed)
}

// Logged moves Covers for a delivery of the provider's log at at, listed from since: to since
// once the log reaches back that far, else to the oldest delivery's time. A listing starts
// with Covers at the time it was asked for.
func (p *MissedPage) Logged(at, since time.Time) {
	switch {
	case !at.After(since):
		p.Covers = since
	case at.Before(p.Covers):
		p.Covers = at
	}
}

// NextSince is where the listing that follows a page with More starts: the second after its
// last entry's.
func (p MissedPage) NextSince() time.Time {
	if len(p.Missed) == 0 {
		return time.Time{}
	}
	return p.Missed[len(p.Missed)-1].At.Truncate(time.Second).Add(time.Second)
}

// Recoverer is implemented by providers whose missed deliveries can be recovered
// (RecoveryRedeliver, RecoveryFetch).
type Recoverer interface {
	// Missed lists, oldest first, the deliveries to registration reg, of the given events ("*"
	// for all), since since (inclusive), that the provider reports as not delivered; a
	// delivery that failed and later succeeded (the same id) is not missed. At most limit
	// entries (0: no limit) and the rest of the second the limit falls in (CutMissed),
	// following the provider's pages. An entry outside the provider's window is returned
	// Expired.
	Missed(ctx context.Context, reg Registration, events []string, since time.Time, limit int) (MissedPage, error)
	// Redeliver asks the provider to send m to reg again (RecoveryRedeliver). A delivery the
	// provider no longer keeps answers NotFound; one past its window Permanent.
	Redeliver(ctx context.Context, reg Registration, m Missed) error
}

// EventLister is implemented by RecoveryFetch providers whose listing of undelivered events
// cannot see what they never tried to send: Stripe sends nothing to an endpoint it disabled, so
// an event created meanwhile never counted that endpoint as pending and delivery_success=false
// does not list it. Events lists every event of the given types since since, delivered or
// not, with Missed's paging and limit; the receiver's ledger answers those it holds as
// duplicates.
type EventLister interface {
	Events(ctx context.Context, events []string, since time.Time, limit int) (MissedPage, error)
}

// RangeRecoverer is implemented by providers that resend everything since a time in one
// request (RecoveryRange).
type RangeRecoverer interface {
	RecoverSince(ctx context.Context, reg Registration, since time.Time) error
}

// HealthState is the provider's view of deliveries to a registration.
type HealthState int

const (
	// HealthUnknown: the provider reports nothing (no delivery yet, or no such report).
	HealthUnknown HealthState = iota
	// HealthHealthy: recent deliveries succeed.
	HealthHealthy
	// HealthFailing: recent deliveries fail (the endpoint does not answer, or answers an error).
	HealthFailing
	// HealthDisabled: the provider stopped delivering to the registration because deliveries
	// kept failing (Stripe's disabled endpoint, GitLab's disabled hook, PagerDuty's
	// temporarily_disabled).
	HealthDisabled
)

func (h HealthState) String() string {
	switch h {
	case HealthHealthy:
		return "healthy"
	case HealthFailing:
		return "failing"
	case HealthDisabled:
		return "disabled"
	}
	return "unknown"
}

// DeliveryHealth is what the provider says about recent deliveries to a registration.
type DeliveryHealth struct {
	State HealthState
	// Failed of Total recent deliveries failed (0 of 0: none known).
	Failed, Total int
	// Since is the time of the oldest delivery the counts cover (zero when none).
	Since time.Time
	// DisabledUntil is when a temporary disable ends (GitLab); zero when it does not. In the
	// past (State Failing), it says the provider had the registration disabled until then and
	// sends again (GitLab keeps it until the next delivery succeeds).
	DisabledUntil time.Time
	// Message is the provider's own account, safe to show ("last response 502", "disabled
	// after 40 failures").
	Message string
}

// HealthReporter is implemented by providers that report more about deliveries than a list
// shows (GitHub's recent deliveries of a hook).
type HealthReporter interface {
	Health(ctx context.Context, reg Registration) (DeliveryHealth, error)
}

// Reenabler is implemented by providers that disable a registration whose deliveries keep
// failing and let a client enable it again (PagerDuty's POST .../enable, GitLab's test
// request). Providers where re-enabling is an ordinary update of a field the spec names
// (Stripe's disabled) need not implement it: drift repair enables them.
type Reenabler interface {
	Reenable(ctx context.Context, reg Registration) error
}

// DeliverySigner is implemented by RecoveryFetch providers: it returns the headers the provider
// itself sends with a delivery of payload (its signature over payload made with secret at now,
// its content type and user agent), so that a recovered event reaches the receiver's public
// route exactly as a live delivery would and passes the same verify, dedupe, deliver path.
type DeliverySigner interface {
	SignDelivery(payload []byte, secret string, now time.Time) (http.Header, error)
}
