package decide

import (
	"fmt"
	"time"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/providers"
)

// Whether a recovery run starts, from where, and what it reports beforehand: a pure function
// of the subscription's recovery spec and status, the provider's recovery capabilities and its
// view of deliveries. The runner (recovery.go) carries the decision out and never changes it.

// DefaultRecoveryLookback applies when spec.recovery.lookback is unset.
const DefaultRecoveryLookback = 72 * time.Hour

// RecoveryAction is the one thing a reconcile does about recovery.
type RecoveryAction int

const (
	// RecoverNone: no run now.
	RecoverNone RecoveryAction = iota
	// RecoverRun: a run, from Since.
	RecoverRun
	// RecoverRefuse: a requested run that is not done (mode Off, or no way to recover on this
	// provider): the request is handled with Message.
	RecoverRefuse
)

// String names the action for logs.
func (a RecoveryAction) String() string {
	switch a {
	case RecoverRun:
		return "run"
	case RecoverRefuse:
		return "refuse"
	}
	return "none"
}

// RecoveryInput is what the decision reads.
type RecoveryInput struct {
	// Provider is the provider type, for messages.
	Provider string
	Mode     hookv1.RecoveryMode
	Lookback time.Duration
	// Requested is the recover-requested-at annotation, LastHandled the value handled last.
	Requested, LastHandled string
	Caps                   providers.RecoveryCapabilities
	// CanRecover: the provider's client implements what Caps.Mode needs (Recoverer for
	// redeliver and fetch, RangeRecoverer for range).
	CanRecover bool
	// CanReenable: the client implements providers.Reenabler.
	CanReenable bool
	// Synced: the kept registration matches the spec (this reconcile succeeded) and is not
	// disabled by the spec.
	Synced bool
	// Health is the provider's view of deliveries to the kept registration (merged).
	Health providers.DeliveryHealth
	// Watermark and LastRunStart come from status (zero when unset).
	Watermark, LastRunStart time.Time
	// Created is when the provider created the kept registration (zero when it does not say):
	// nothing was missed before it.
	Created time.Time
	// DisabledAt is when the registration was found disabled by the provider
	// (status.recovery.providerDisabledAt; zero when it was not).
	DisabledAt time.Time
	// CanListEvents: the client lists every event, delivered or not (providers.EventLister).
	CanListEvents bool
	// Unfinished is the trigger of the last run when it ended Partial (stopped partway: a rate
	// limit's pause, an answer that stopped it), "" otherwise: the run goes on, whatever the
	// provider's health says now (a redelivery that succeeded makes it look healthy) and in
	// Manual mode too (it was asked for).
	Unfinished hookv1.RecoveryTrigger
	// Resync is the subscription's resync interval: automatic runs start at most once per
	// interval.
	Resync time.Duration
	Now    time.Time
}

// RecoveryDecision is the one decision, with everything the run needs to know beforehand.
type RecoveryDecision struct {
	Action  RecoveryAction
	Trigger hookv1.RecoveryTrigger
	// Why explains the decision (logs, tests, a refusal's message).
	Why string
	// Reenable: enable the registration the provider disabled once the endpoint answers,
	// before the run if there is one; whatever the mode, since a disabled registration gets no
	// deliveries at all.
	Reenable bool
	// Since is where the run starts: max(watermark, now − lookback, now − window).
	Since time.Time
	// ListFrom (redeliver) is where the listing of the provider's log starts: the watermark,
	// or the beginning of the log on a first run, so that every failed delivery the provider
	// still lists but will not redeliver is reported, not only those since Since.
	ListFrom time.Time
	// ReportFrom (redeliver) is the start of the span the run answers for: the watermark, or
	// now − lookback (unclamped) on a first run. What lies between it and what the provider's
	// log covers is a gap (logGap).
	ReportFrom time.Time
	// Gap, when not zero, starts a span [Gap, GapEnd) of possibly missed deliveries that lies
	// beyond the provider's window: reported, never requested.
	Gap, GapEnd time.Time
	// Clamped is the lookback-clamped message ("" when the lookback fits the window).
	Clamped string
	// Available: the provider has a way to recover and its client implements it.
	Available bool
	// Mode is how the run recovers (the provider's way); Window how long it keeps deliveries
	// (0: it does not say).
	Mode   providers.RecoveryMode
	Window time.Duration
	// SharedLook: an automatic run on a provider whose listing of missed events is
	// account-wide (Stripe) first asks the account's shared look, from LookFrom on; when it
	// shows nothing missed since Since, the watermark moves without a run.
	SharedLook bool
	LookFrom   time.Time
	// ListFirst: an automatic run on a provider that reports no failures (GitLab) lists once
	// first; a listing that shows nothing missed moves the watermark without a run.
	ListFirst bool
	// ListEvents (fetch): the provider had the endpoint disabled and lists every event, so the
	// run lists them all (EventsSince), not only those it reports undelivered; DisabledFrom is
	// a resync before it was found disabled.
	ListEvents   bool
	DisabledFrom time.Time
}

// requested reports whether the annotation asks for a run not handled yet.
func (in RecoveryInput) requested() bool { return in.Requested != "" && in.Requested != in.LastHandled }

// Recovery decides whether a recovery run starts now, and how the runner carries it out.
func Recovery(in RecoveryInput) RecoveryDecision {
	d := RecoveryDecision{Mode: in.Caps.Mode}
	d.Available, d.Window = Availability(in.Caps, in.CanRecover)
	lookback := in.Lookback
	if lookback <= 0 {
		lookback = DefaultRecoveryLookback
	}
	if in.Caps.Window > 0 && lookback > in.Caps.Window {
		d.Clamped = fmt.Sprintf("lookback %s is longer than the %s %s keeps; clamped to %s", FormatDuration(lookback), FormatDuration(in.Caps.Window), in.Provider, FormatDuration(in.Caps.Window))
		lookback = in.Caps.Window
	}
	// Not drift (the plan leaves a registration the provider disabled alone): enabled here once
	// the endpoint answers, in every mode.
	d.Reenable = in.Synced && in.Health.State == providers.HealthDisabled && in.CanReenable
	if !startable(in, &d) {
		return d
	}
	failing := in.Health.State == providers.HealthFailing || in.Health.State == providers.HealthDisabled || in.Health.Failed > 0
	trigger(in, failing, &d)
	if d.Action != RecoverRun {
		return d
	}
	span(in, lookback, failing, &d)
	howToRun(in, &d)
	return d
}

// Availability is what status.recovery says of the provider before any decision: whether it
// has a way to recover that its client implements, and how long it keeps deliveries (0: it
// does not say).
func Availability(caps providers.RecoveryCapabilities, canRecover bool) (available bool, window time.Duration) {
	return caps.Mode != providers.RecoveryNone && canRecover, caps.Window
}

// startable sets the decision of a subscription whose recovery cannot run at all (unavailable,
// off, not in step with the spec) and reports whether a run could start.
func startable(in RecoveryInput, d *RecoveryDecision) bool {
	requested := in.requested()
	switch {
	case !d.Available:
		d.Why = UnavailableWhy(in.Caps)
		if requested {
			d.Action = RecoverRefuse
		}
		return false
	case in.Mode == hookv1.RecoveryOff:
		d.Why = "recovery is off (spec.recovery.mode: Off)"
		if requested {
			d.Action, d.Why = RecoverRefuse, "recovery was requested but spec.recovery.mode is Off: nothing was run"
		}
		return false
	case !in.Synced:
		// A request waits (it stays unhandled) until the registration is in step again.
		d.Why = "the registration does not match the spec yet (or the spec disables it)"
		return false
	}
	return true
}

// trigger decides whether a run starts now, and why.
func trigger(in RecoveryInput, failing bool, d *RecoveryDecision) {
	// Once per resync wave: a wave's jitter (up to 5% of the interval) may wake the next one a
	// little less than an interval after this one.
	due := in.LastRunStart.IsZero() || in.Now.Sub(in.LastRunStart) >= in.Resync-in.Resync/10
	switch {
	case in.requested():
		d.Action, d.Trigger, d.Why = RecoverRun, hookv1.TriggerRequested, "requested through "+hookv1.AnnotationRecoverRequestedAt
	case in.Unfinished != "":
		d.Action, d.Trigger, d.Why = RecoverRun, in.Unfinished, "the last run stopped partway: it goes on from the watermark"
	case in.Mode == hookv1.RecoveryManual:
		d.Why = "mode Manual: runs only on request"
	case !due:
		d.Why = "an automatic run already started in this resync interval"
	case failing:
		d.Action, d.Trigger, d.Why = RecoverRun, hookv1.TriggerAuto, "the provider reports failed deliveries ("+in.Health.State.String()+")"
	case in.Caps.Mode == providers.RecoveryFetch:
		// The provider keeps no per-registration health (Stripe): look once per resync.
		d.Action, d.Trigger, d.Why = RecoverRun, hookv1.TriggerAuto, "the provider keeps the events themselves: one look per resync"
	case in.Caps.Poll:
		// The provider says nothing of failures short of disabling (GitLab): look once per resync.
		d.Action, d.Trigger, d.Why = RecoverRun, hookv1.TriggerAuto, "the provider reports no failure short of disabling: one look per resync"
	default:
		d.Why = "the provider reports no failed deliveries"
	}
}

// span decides where a run starts, what it answers for and what lies beyond the window.
func span(in RecoveryInput, lookback time.Duration, failing bool, d *RecoveryDecision) {
	// since = max(watermark, now − lookback, now − window); the lookback is at most the window.
	d.Since = in.Now.Add(-lookback)
	if !in.Watermark.IsZero() && in.Watermark.After(d.Since) {
		d.Since = in.Watermark
	}
	if in.Caps.Mode == providers.RecoveryRedeliver {
		// The provider's log says itself what lies beyond its window (entries it lists as
		// expired, and how far back it reaches: LogGap), also on a first run.
		d.ListFrom, d.ReportFrom = in.Watermark, in.Watermark
		if in.Watermark.IsZero() {
			unclamped := in.Lookback
			if unclamped <= 0 {
				unclamped = DefaultRecoveryLookback
			}
			d.ReportFrom = in.Now.Add(-unclamped)
			if in.Created.After(d.ReportFrom) {
				d.ReportFrom = in.Created
			}
		}
		return
	}
	// What was missed before the window cannot come back: from the watermark, or where the
	// provider's own report of failures begins.
	oldest := in.Watermark
	if oldest.IsZero() && failing && !in.Health.Since.IsZero() {
		oldest = in.Health.Since
	}
	if in.Caps.Window > 0 && !oldest.IsZero() && oldest.Before(in.Now.Add(-in.Caps.Window)) {
		d.Gap, d.GapEnd = oldest, in.Now.Add(-in.Caps.Window)
	}
}

// howToRun makes the choices the runner carries out before and during a run: whether an
// automatic run first asks the account's shared look (and from where) or lists once to see
// whether there is anything to do, and whether it lists every event of the span the provider
// had the endpoint disabled.
func howToRun(in RecoveryInput, d *RecoveryDecision) {
	routine := d.Trigger == hookv1.TriggerAuto && !d.Reenable && in.DisabledAt.IsZero()
	if routine && in.Caps.AccountWide && d.Gap.IsZero() {
		// One listing serves watermarks up to three intervals old: the whole wave's, including
		// a subscription that missed the last wave (first synced just before its grid point)
		// and watermarks stored in whole seconds.
		d.SharedLook = true
		d.LookFrom = in.Now.Add(-3 * in.Resync).Truncate(time.Second)
		if w := in.Caps.Window; w > 0 && d.LookFrom.Before(in.Now.Add(-w)) {
			d.LookFrom = in.Now.Add(-w) // nothing older is kept
		}
	}
	d.ListFirst = routine && in.Caps.Poll
	if !in.DisabledAt.IsZero() && in.CanListEvents {
		// The provider sent nothing while it had the endpoint disabled and does not list those
		// events as undelivered: list them all, from a resync before it was found disabled.
		d.ListEvents, d.DisabledFrom = true, in.DisabledAt.Add(-in.Resync)
	}
}

// EventsSince is where a run that lists every event (ListEvents) starts at now: the earlier
// of Since and DisabledFrom, but never before the provider's window.
func (d RecoveryDecision) EventsSince(now time.Time) time.Time {
	since, floor := d.Since, now.Add(-d.Window)
	if d.DisabledFrom.Before(since) {
		since = d.DisabledFrom
	}
	if since.Before(floor) {
		since = floor
	}
	return since
}

// LogGap is the span a redeliver run cannot answer for: from where it reports (from) to the
// earliest time the provider's log covers (covers) or the start of the provider's window,
// whichever is earlier (inside its window a provider keeps every delivery, so a log that
// reaches back less far there only had nothing older). Zero when there is none.
func LogGap(from, covers, now time.Time, window time.Duration) (start, end time.Time) {
	if covers.IsZero() || window <= 0 {
		return time.Time{}, time.Time{}
	}
	end = covers
	if edge := now.Add(-window); edge.Before(end) {
		end = edge
	}
	if !from.Before(end) {
		return time.Time{}, time.Time{}
	}
	return from, end
}

// RecoveryUnavailable is the status message of a provider without a way to recover.
const RecoveryUnavailable = "recovery is not available on this provider profile (no recover section)"

// UnavailableWhy is the status message of a provider without a way to recover: its own reason
// when it gives one, else RecoveryUnavailable.
func UnavailableWhy(caps providers.RecoveryCapabilities) string {
	if caps.Unavailable != "" {
		return caps.Unavailable
	}
	return RecoveryUnavailable
}

// FormatDuration prints whole hours as "72h" and anything else as time.Duration does.
func FormatDuration(d time.Duration) string {
	if d%time.Hour == 0 {
		return fmt.Sprintf("%dh", d/time.Hour)
	}
	return d.String()
}
