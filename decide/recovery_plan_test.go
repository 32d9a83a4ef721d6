package decide_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/decide"
	"github.com/hookwarden/hookwarden/decide/decidetest"
	"github.com/hookwarden/hookwarden/providers"
)

// recIn is a synced Auto subscription on a redeliver provider, healthy, never run.
func recIn(opts ...func(*decide.RecoveryInput)) decide.RecoveryInput {
	in := decide.RecoveryInput{Provider: "github", Mode: hookv1.RecoveryAuto, Caps: decidetest.RedeliverCaps, CanRecover: true, Synced: true,
		Health: providers.DeliveryHealth{State: providers.HealthHealthy}, Resync: 10 * time.Minute, Now: decidetest.RecNow}
	for _, o := range opts {
		o(&in)
	}
	return in
}

func mode(m hookv1.RecoveryMode) func(*decide.RecoveryInput) {
	return func(in *decide.RecoveryInput) { in.Mode = m }
}
func caps(c providers.RecoveryCapabilities) func(*decide.RecoveryInput) {
	return func(in *decide.RecoveryInput) { in.Caps = c }
}
func health(h providers.DeliveryHealth) func(*decide.RecoveryInput) {
	return func(in *decide.RecoveryInput) { in.Health = h }
}
func requestedAt(v, handled string) func(*decide.RecoveryInput) {
	return func(in *decide.RecoveryInput) { in.Requested, in.LastHandled = v, handled }
}
func watermarkAgo(d time.Duration) func(*decide.RecoveryInput) {
	return func(in *decide.RecoveryInput) { in.Watermark = decidetest.RecNow.Add(-d) }
}
func lastRunAgo(d time.Duration) func(*decide.RecoveryInput) {
	return func(in *decide.RecoveryInput) { in.LastRunStart = decidetest.RecNow.Add(-d) }
}
func lookback(d time.Duration) func(*decide.RecoveryInput) {
	return func(in *decide.RecoveryInput) { in.Lookback = d }
}
func unfinished(tr hookv1.RecoveryTrigger) func(*decide.RecoveryInput) {
	return func(in *decide.RecoveryInput) { in.Unfinished = tr }
}
func notSynced(in *decide.RecoveryInput)     { in.Synced = false }
func cannotRecover(in *decide.RecoveryInput) { in.CanRecover = false }
func canReenable(in *decide.RecoveryInput)   { in.CanReenable = true }

func TestDecideRecovery(t *testing.T) {
	type want struct {
		Action  decide.RecoveryAction
		Trigger hookv1.RecoveryTrigger
		// Since and Gap as ages before now (0: zero time for Gap).
		SinceAgo, GapAgo time.Duration
		// ListFrom and ReportFrom (redeliver) as ages before now (0: zero time).
		ListAgo, ReportAgo time.Duration
		Reenable           bool
		Clamped            string
	}
	cases := []struct {
		reason string
		in     decide.RecoveryInput
		want   want
	}{
		{"Auto, healthy, redeliver: nothing to recover", recIn(), want{}},
		{"Auto, failing: a run from now - lookback (72h default)", recIn(health(decidetest.FailingNow)), want{Action: decide.RecoverRun, Trigger: hookv1.TriggerAuto, SinceAgo: 72 * time.Hour, ReportAgo: 72 * time.Hour}},
		{"Auto, healthy state but failures among recent deliveries: a run", recIn(health(providers.DeliveryHealth{State: providers.HealthHealthy, Failed: 1, Total: 10})), want{Action: decide.RecoverRun, Trigger: hookv1.TriggerAuto, SinceAgo: 72 * time.Hour, ReportAgo: 72 * time.Hour}},
		{"Auto, disabled by the provider, no Reenabler: a run, no re-enable", recIn(health(decidetest.DisabledNow)), want{Action: decide.RecoverRun, Trigger: hookv1.TriggerAuto, SinceAgo: 72 * time.Hour, ReportAgo: 72 * time.Hour}},
		{"Auto, disabled by the provider, Reenabler: re-enable, then a run", recIn(health(decidetest.DisabledNow), canReenable), want{Action: decide.RecoverRun, Trigger: hookv1.TriggerAuto, SinceAgo: 72 * time.Hour, ReportAgo: 72 * time.Hour, Reenable: true}},
		{"Auto, failing but re-enable is not asked for a Failing (not disabled) registration", recIn(health(decidetest.FailingNow), canReenable), want{Action: decide.RecoverRun, Trigger: hookv1.TriggerAuto, SinceAgo: 72 * time.Hour, ReportAgo: 72 * time.Hour}},
		{"Auto, failing, an automatic run already started in this resync interval: none", recIn(health(decidetest.FailingNow), lastRunAgo(5*time.Minute)), want{}},
		{"Auto, failing, the last run a resync interval ago: a run", recIn(health(decidetest.FailingNow), lastRunAgo(10*time.Minute)), want{Action: decide.RecoverRun, Trigger: hookv1.TriggerAuto, SinceAgo: 72 * time.Hour, ReportAgo: 72 * time.Hour}},
		{"Auto, fetch provider (no per-endpoint health): a run once per resync", recIn(caps(decidetest.FetchCaps), health(providers.DeliveryHealth{})), want{Action: decide.RecoverRun, Trigger: hookv1.TriggerAuto, SinceAgo: 72 * time.Hour}},
		{"Auto, fetch provider, run within this interval: none", recIn(caps(decidetest.FetchCaps), lastRunAgo(time.Minute)), want{}},
		{"Auto, fetch provider, the next wave woke a little early (jitter): a run", recIn(caps(decidetest.FetchCaps), lastRunAgo(9*time.Minute+40*time.Second)), want{Action: decide.RecoverRun, Trigger: hookv1.TriggerAuto, SinceAgo: 72 * time.Hour}},
		{"Auto, range provider, healthy: none", recIn(caps(decidetest.RangeCaps)), want{}},
		{"Auto, range provider, failing: a run", recIn(caps(decidetest.RangeCaps), health(decidetest.FailingNow)), want{Action: decide.RecoverRun, Trigger: hookv1.TriggerAuto, SinceAgo: 72 * time.Hour}},
		{"a request, healthy: a run", recIn(requestedAt("1", "")), want{Action: decide.RecoverRun, Trigger: hookv1.TriggerRequested, SinceAgo: 72 * time.Hour, ReportAgo: 72 * time.Hour}},
		{"a request already handled: nothing", recIn(requestedAt("1", "1")), want{}},
		{"a request runs even right after an automatic run", recIn(requestedAt("2", "1"), lastRunAgo(time.Second)), want{Action: decide.RecoverRun, Trigger: hookv1.TriggerRequested, SinceAgo: 72 * time.Hour, ReportAgo: 72 * time.Hour}},
		{"Auto, the last run paused partway a moment ago, the provider healthy now (a redelivery arrived): it goes on", recIn(lastRunAgo(2*time.Second), unfinished(hookv1.TriggerAuto), watermarkAgo(time.Hour)), want{Action: decide.RecoverRun, Trigger: hookv1.TriggerAuto, SinceAgo: time.Hour, ListAgo: time.Hour, ReportAgo: time.Hour}},
		{"Manual, a requested run paused partway: it goes on as requested", recIn(mode(hookv1.RecoveryManual), requestedAt("1", "1"), lastRunAgo(2*time.Second), unfinished(hookv1.TriggerRequested)), want{Action: decide.RecoverRun, Trigger: hookv1.TriggerRequested, SinceAgo: 72 * time.Hour, ReportAgo: 72 * time.Hour}},
		{"Off, an unfinished run: nothing", recIn(mode(hookv1.RecoveryOff), unfinished(hookv1.TriggerAuto)), want{}},
		{"Manual, failing: no automatic run", recIn(mode(hookv1.RecoveryManual), health(decidetest.FailingNow)), want{}},
		{"Manual, a request: a run", recIn(mode(hookv1.RecoveryManual), requestedAt("x", "")), want{Action: decide.RecoverRun, Trigger: hookv1.TriggerRequested, SinceAgo: 72 * time.Hour, ReportAgo: 72 * time.Hour}},
		{"Off, failing: nothing", recIn(mode(hookv1.RecoveryOff), health(decidetest.FailingNow)), want{}},
		{"Off, a request: refused", recIn(mode(hookv1.RecoveryOff), requestedAt("x", "")), want{Action: decide.RecoverRefuse}},
		{"no recovery on the provider, a request: refused", recIn(caps(decidetest.NoneCaps), requestedAt("x", "")), want{Action: decide.RecoverRefuse}},
		{"no recovery on the provider, failing: nothing", recIn(caps(decidetest.NoneCaps), health(decidetest.FailingNow)), want{}},
		{"the client lacks the interface its mode needs, a request: refused", recIn(cannotRecover, requestedAt("x", "")), want{Action: decide.RecoverRefuse}},
		{"not synced, a request: waits (not handled)", recIn(notSynced, requestedAt("x", "")), want{}},
		{"not synced, failing: nothing", recIn(notSynced, health(decidetest.FailingNow)), want{}},
		{"a watermark inside the lookback: from the watermark", recIn(health(decidetest.FailingNow), watermarkAgo(5*time.Hour)), want{Action: decide.RecoverRun, Trigger: hookv1.TriggerAuto, SinceAgo: 5 * time.Hour, ListAgo: 5 * time.Hour, ReportAgo: 5 * time.Hour}},
		{"a watermark older than the lookback, inside the window: from now - lookback", recIn(health(decidetest.FailingNow), lookback(24*time.Hour), watermarkAgo(48*time.Hour)), want{Action: decide.RecoverRun, Trigger: hookv1.TriggerAuto, SinceAgo: 24 * time.Hour, ListAgo: 48 * time.Hour, ReportAgo: 48 * time.Hour}},
		{"a watermark older than the window: from the window's start, the span before reported", recIn(caps(decidetest.RangeCaps), health(decidetest.FailingNow), watermarkAgo(400*time.Hour)), want{Action: decide.RecoverRun, Trigger: hookv1.TriggerAuto, SinceAgo: 72 * time.Hour, GapAgo: 400 * time.Hour}},
		{"no watermark, the provider's first failure older than the window: the span before reported", recIn(caps(decidetest.RangeCaps), health(providers.DeliveryHealth{State: providers.HealthFailing, Since: decidetest.RecNow.Add(-400 * time.Hour)})), want{Action: decide.RecoverRun, Trigger: hookv1.TriggerAuto, SinceAgo: 72 * time.Hour, GapAgo: 400 * time.Hour}},
		{"redeliver, a watermark older than the window: the provider's log says what lies beyond (no gap decided beforehand)", recIn(health(decidetest.FailingNow), watermarkAgo(96*time.Hour)), want{Action: decide.RecoverRun, Trigger: hookv1.TriggerAuto, SinceAgo: 72 * time.Hour, ListAgo: 96 * time.Hour, ReportAgo: 96 * time.Hour}},
		{"redeliver, first run: the whole log is listed, reported from now - lookback (unclamped)", recIn(health(decidetest.FailingNow), lookback(240*time.Hour)), want{Action: decide.RecoverRun, Trigger: hookv1.TriggerAuto, SinceAgo: 72 * time.Hour, ReportAgo: 240 * time.Hour, Clamped: "lookback 240h is longer than the 72h github keeps; clamped to 72h"}},
		{"redeliver, first run on a registration created a day ago: reported from its creation", recIn(health(decidetest.FailingNow), lookback(240*time.Hour), func(in *decide.RecoveryInput) { in.Created = decidetest.RecNow.Add(-24 * time.Hour) }), want{Action: decide.RecoverRun, Trigger: hookv1.TriggerAuto, SinceAgo: 72 * time.Hour, ReportAgo: 24 * time.Hour, Clamped: "lookback 240h is longer than the 72h github keeps; clamped to 72h"}},
		{"Poll (GitLab: no failure reported short of disabling), healthy: a look once per resync", recIn(caps(decidetest.PollCaps)), want{Action: decide.RecoverRun, Trigger: hookv1.TriggerAuto, SinceAgo: 72 * time.Hour, ReportAgo: 72 * time.Hour}},
		{"Poll, run within this interval: none", recIn(caps(decidetest.PollCaps), lastRunAgo(time.Minute)), want{}},
		{"Manual, disabled by the provider, Reenabler: re-enabled (once the endpoint answers) without a run", recIn(mode(hookv1.RecoveryManual), health(decidetest.DisabledNow), canReenable), want{Reenable: true}},
		{"Off, disabled by the provider, Reenabler: re-enabled without a run", recIn(mode(hookv1.RecoveryOff), health(decidetest.DisabledNow), canReenable), want{Reenable: true}},
		{"no recovery on the provider, disabled, Reenabler: re-enabled", recIn(caps(decidetest.NoneCaps), health(decidetest.DisabledNow), canReenable), want{Reenable: true}},
		{"not synced, disabled, Reenabler: nothing (the registration does not match the spec)", recIn(notSynced, health(decidetest.DisabledNow), canReenable), want{}},
		{"a lookback longer than the window: clamped, with a message", recIn(health(decidetest.FailingNow), lookback(240*time.Hour)), want{Action: decide.RecoverRun, Trigger: hookv1.TriggerAuto, SinceAgo: 72 * time.Hour, ReportAgo: 240 * time.Hour, Clamped: "lookback 240h is longer than the 72h github keeps; clamped to 72h"}},
		{"a clamped lookback is reported even when nothing runs", recIn(lookback(240 * time.Hour)), want{Clamped: "lookback 240h is longer than the 72h github keeps; clamped to 72h"}},
		{"a lookback inside a 30-day window is not clamped", recIn(caps(decidetest.FetchCaps), lookback(240*time.Hour)), want{Action: decide.RecoverRun, Trigger: hookv1.TriggerAuto, SinceAgo: 240 * time.Hour}},
	}
	for _, tc := range cases {
		t.Run(tc.reason, func(t *testing.T) {
			d := decide.Recovery(tc.in)
			got := want{Action: d.Action, Trigger: d.Trigger, Reenable: d.Reenable, Clamped: d.Clamped}
			if !d.Since.IsZero() {
				got.SinceAgo = decidetest.RecNow.Sub(d.Since)
			}
			if !d.ListFrom.IsZero() {
				got.ListAgo = decidetest.RecNow.Sub(d.ListFrom)
			}
			if !d.ReportFrom.IsZero() {
				got.ReportAgo = decidetest.RecNow.Sub(d.ReportFrom)
			}
			if !d.Gap.IsZero() {
				got.GapAgo = decidetest.RecNow.Sub(d.Gap)
				if want := decidetest.RecNow.Add(-tc.in.Caps.Window); !d.GapEnd.Equal(want) {
					t.Errorf("gap ends %s, want the window's start %s", d.GapEnd, want)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s (why: %s) (-want +got):\n%s", tc.reason, d.Why, diff)
			}
			if d.Why == "" {
				t.Errorf("the decision gives no reason")
			}
		})
	}
}

// TestLogGap: the span a redeliver run cannot answer for lies between where it reports from and
// what the provider's log covers, never inside the provider's window (where the log is whole).
func TestLogGap(t *testing.T) {
	const window = 72 * time.Hour
	ago := func(h int) time.Time { return decidetest.RecNow.Add(-time.Duration(h) * time.Hour) }
	cases := []struct {
		reason             string
		from, covers       time.Time
		wantStart, wantEnd time.Time
	}{
		{"the log reaches back to where the run reports from: no gap", ago(96), ago(96), time.Time{}, time.Time{}},
		{"the log holds four days, the watermark is five: the day before the log", ago(120), ago(96), ago(120), ago(96)},
		{"the log holds one day only (a quiet hook), the watermark is five: the span before the window", ago(120), ago(24), ago(120), ago(72)},
		{"a watermark inside the window, a short log: no gap (the log is whole there)", ago(48), ago(24), time.Time{}, time.Time{}},
		{"a provider that does not say what its log covers: no gap", ago(120), time.Time{}, time.Time{}, time.Time{}},
	}
	for _, tc := range cases {
		start, end := decide.LogGap(tc.from, tc.covers, decidetest.RecNow, window)
		if !start.Equal(tc.wantStart) || !end.Equal(tc.wantEnd) {
			t.Errorf("%s: gap [%s, %s), want [%s, %s)", tc.reason, start, end, tc.wantStart, tc.wantEnd)
		}
	}
}

// TestRecoveryHowToRun: the choices the runner carries out without reading a capability: an
// automatic run on an account-wide provider asks the shared look first (from three resyncs
// back, never before the window), one on a provider that reports no failures lists first, and a
// span the provider had the endpoint disabled is listed event by event where the client lists
// every event.
func TestRecoveryHowToRun(t *testing.T) {
	accountWide := decidetest.FetchCaps
	accountWide.AccountWide = true
	narrow := accountWide
	narrow.Window = 10 * time.Minute
	disabledAt := decidetest.RecNow.Add(-time.Hour)
	type want struct {
		Mode                           providers.RecoveryMode
		SharedLook, ListFirst, ListAll bool
		LookFromAgo, EventsSinceAgo    time.Duration
	}
	cases := []struct {
		name string
		in   decide.RecoveryInput
		want want
	}{
		{"account-wide, automatic: the shared look from three resyncs back", recIn(caps(accountWide)),
			want{Mode: providers.RecoveryFetch, SharedLook: true, LookFromAgo: 30 * time.Minute}},
		{"account-wide, a window shorter than three resyncs: the look starts at the window", recIn(caps(narrow)),
			want{Mode: providers.RecoveryFetch, SharedLook: true, LookFromAgo: 10 * time.Minute}},
		{"account-wide, requested: no shared look", recIn(caps(accountWide), requestedAt("1", "")),
			want{Mode: providers.RecoveryFetch}},
		{"account-wide, found disabled, every event listed: no shared look, every event from a resync before it was found so (before the watermark)", recIn(caps(accountWide), disabledSince(disabledAt), listsEvents, watermarkAgo(30*time.Minute)),
			want{Mode: providers.RecoveryFetch, ListAll: true, EventsSinceAgo: 70 * time.Minute}},
		{"found disabled, the client lists no events: only what the provider reports missed", recIn(caps(accountWide), disabledSince(disabledAt)),
			want{Mode: providers.RecoveryFetch}},
		{"poll provider, automatic: list first", recIn(caps(decidetest.PollCaps)),
			want{Mode: providers.RecoveryRedeliver, ListFirst: true}},
		{"poll provider, re-enabling: no list first", recIn(caps(decidetest.PollCaps), health(decidetest.DisabledNow), canReenable),
			want{Mode: providers.RecoveryRedeliver}},
		{"range provider, failing: its mode, nothing first", recIn(caps(decidetest.RangeCaps), health(decidetest.FailingNow)),
			want{Mode: providers.RecoveryRange}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := decide.Recovery(c.in)
			if d.Action != decide.RecoverRun {
				t.Fatalf("action %s (%s), want a run", d.Action, d.Why)
			}
			got := want{Mode: d.Mode, SharedLook: d.SharedLook, ListFirst: d.ListFirst, ListAll: d.ListEvents}
			if d.SharedLook {
				got.LookFromAgo = decidetest.RecNow.Sub(d.LookFrom)
			}
			if d.ListEvents {
				got.EventsSinceAgo = decidetest.RecNow.Sub(d.EventsSince(decidetest.RecNow))
			}
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("decision (-want +got):\n%s", diff)
			}
		})
	}
}

func disabledSince(at time.Time) func(*decide.RecoveryInput) {
	return func(in *decide.RecoveryInput) { in.DisabledAt = at }
}
func listsEvents(in *decide.RecoveryInput) { in.CanListEvents = true }

// A provider without recovery that says why in its own terms (Stripe v2 destinations) has that
// reason as the refusal's and the status's message; one that does not has the generic one.
func TestRecoveryUnavailableSaysTheProvidersReason(t *testing.T) {
	own := decidetest.NoneCaps
	own.Unavailable = "recovery is not available for these registrations: the provider keeps no list of missed events"
	for _, c := range []struct {
		reason string
		caps   providers.RecoveryCapabilities
		want   string
	}{
		{"a REST profile without a recover section: the generic message", decidetest.NoneCaps, decide.RecoveryUnavailable},
		{"a provider's own reason", own, own.Unavailable},
	} {
		d := decide.Recovery(recIn(caps(c.caps), requestedAt("x", "")))
		if diff := cmp.Diff(c.want, d.Why); diff != "" || d.Action != decide.RecoverRefuse {
			t.Errorf("%s: action %v, Why (-want +got):\n%s", c.reason, d.Action, diff)
		}
		if got := decide.UnavailableWhy(c.caps); got != c.want {
			t.Errorf("%s: UnavailableWhy = %q, want %q", c.reason, got, c.want)
		}
	}
}
