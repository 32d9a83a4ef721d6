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
}

// requested reports whether the annotation asks for a run not handled yet.
func (in RecoveryInput) requested() bool { return in.Requested != "" && in.Requested != in.LastHandled }

// Recovery decides whether a recovery run starts now.
func Recovery(in RecoveryInput) RecoveryDecision {
	d := RecoveryDecision{}
	lookback := in.Lookback
	if lookback <= 0 {
		lookback = DefaultRecoveryLookback
	}
	if in.Caps.Window > 0 && lookback > in.Caps.Window {
		d.Clamped = fmt.Sprintf("lookback %s is longer than the %s %s keeps; clamped to %s", FormatDuration(lookback), FormatDuration(in.Caps.Window), in.Provider, FormatDuration(in.Caps.Window))
		lookback = in.Caps.Window
	}
	requested := in.requested()
	// Not drift (the plan leaves a registration the provider disabled alone): enabled here once
	// the endpoint answers, in every mode.
	d.Reenable = in.Synced && in.Health.State == providers.HealthDisabled && in.CanReenable
	switch {
	case in.Caps.Mode == providers.RecoveryNone || !in.CanRecover:
		d.Why = RecoveryUnavailable
		if requested {
			d.Action = RecoverRefuse
		}
		return d
	case in.Mode == hookv1.RecoveryOff:
		d.Why = "recovery is off (spec.recovery.mode: Off)"
		if requested {
			d.Action, d.Why = RecoverRefuse, "recovery was requested but spec.recovery.mode is Off: nothing was run"
		}
		return d
	case !in.Synced:
		// A request waits (it stays unhandled) until the registration is in step again.
		d.Why = "the registration does not match the spec yet (or the spec disables it)"
		return d
	}
	failing := in.Health.State == providers.HealthFailing || in.Health.State == providers.HealthDisabled || in.Health.Failed > 0
	// Once per resync wave: a wave's jitter (up to 5% of the interval) may wake the next one a
	// little less than an interval after this one.
	due := in.LastRunStart.IsZero() || in.Now.Sub(in.LastRunStart) >= in.Resync-in.Resync/10
	switch {
	case requested:
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
	if d.Action != RecoverRun {
		return d
	}
	// since = max(watermark, now − lookback, now − window); the lookback is at most the window.
	d.Since = in.Now.Add(-lookback)
	if !in.Watermark.IsZero() && in.Watermark.After(d.Since) {
		d.Since = in.Watermark
	}
	if in.Caps.Mode == providers.RecoveryRedeliver {
		// The provider's log says itself what lies beyond its window (entries it lists as
		// expired, and how far back it reaches: logGap), also on a first run.
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
		return d
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
	return d
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

// FormatDuration prints whole hours as "72h" and anything else as time.Duration does.
func FormatDuration(d time.Duration) string {
	if d%time.Hour == 0 {
		return fmt.Sprintf("%dh", d/time.Hour)
	}
	return d.String()
}
