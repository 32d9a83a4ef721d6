package controllers

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/hookwarden/hookwarden/account"
	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/decide"
	"github.com/hookwarden/hookwarden/internal/telemetry"
	"github.com/hookwarden/hookwarden/providers"
)

// Recovery of missed deliveries, carried out: after a reconcile found the kept registration in
// step with the spec, the provider's view of deliveries becomes the Delivering condition,
// decide.Recovery (decide/recovery_plan.go) says whether a run starts, and the runner below does it.
// One run at a time per subscription: it runs inside the subscription's reconcile, which
// controller-runtime never runs twice at once for one object. The watermark is persisted after
// every page, so a manager killed mid-run loses nothing: the next run starts again from it, and
// the receiver's ledger answers what it had already committed as a duplicate.

// fetchPage is how many events one page of a fetch run lists (a page holds every event of the
// second it ends in, so it may hold more). Stripe lists newest first, so every page reads the
// listing from its start to the newest event: a larger page costs memory and saves requests.
const fetchPage = 500

// persistEvery is how many hand-overs a fetch run makes between two writes of its watermark.
const persistEvery = 100

// recoveryTarget is what a reconcile that found the registration in step hands on.
type recoveryTarget struct {
	acct *account.Account
	kept providers.Registration
	// secret is the current signing secret ("" when none is held).
	secret string
	// providerDisabled: the provider had disabled the registration when this reconcile listed
	// it (drift repair may have enabled it again since).
	providerDisabled bool
	// listAge is how old a list of the account this reconcile accepted (listAge): a shared
	// look at missed events may be as old.
	listAge time.Duration
	// listedNow: this reconcile read the account's list from the provider (not the shared
	// list another reconcile read).
	listedNow bool
}

// disabledByProvider reports whether the registration id is listed as disabled by the provider.
func disabledByProvider(observed []providers.Registration, id string) bool {
	for _, reg := range observed {
		if id != "" && reg.ID == id && reg.Health != nil && reg.Health.State == providers.HealthDisabled {
			return true
		}
	}
	return false
}

// recoveryRunner is one recovery run.
type recoveryRunner struct {
	r      *Reconciler
	sub    *hookv1.WebhookSubscription
	ro     account.RecoveryOps
	reg    providers.Registration
	secret string
	d      decide.RecoveryDecision
	st     *hookv1.RecoveryStatus
	run    *hookv1.RecoveryRun
	// persisted is status.recovery as the API server holds it (what a mid-run patch diffs
	// against).
	persisted *hookv1.RecoveryStatus
	// requeue is the wait a rate limit asks for before the run goes on (0: the next resync).
	requeue time.Duration
	// listed, when set, is the provider's listing a look before the run already read
	// (redeliver).
	listed *providers.MissedPage
}

// quiet reports whether a redeliver listing shows nothing for a run to do or report: no missed
// delivery, no malformed entry, no span its log cannot answer for.
func quiet(page providers.MissedPage, d decide.RecoveryDecision, now time.Time) bool {
	gap, _ := decide.LogGap(d.ReportFrom, page.Covers, now, d.Window)
	return len(page.Missed) == 0 && page.Malformed == 0 && gap.IsZero()
}

// recoverMissed reports delivery health and recovers what the decision says; it returns the wait
// before the next reconcile the run asks for (0: the resync's).
func (r *Reconciler) recoverMissed(ctx context.Context, sub *hookv1.WebhookSubscription, t recoveryTarget) time.Duration {
	return r.recoverFrom(ctx, sub, t, sub.Status.Recovery.DeepCopy())
}

// recoverFrom is recoverMissed with persisted, status.recovery as the API server holds it.
func (r *Reconciler) recoverFrom(ctx context.Context, sub *hookv1.WebhookSubscription, t recoveryTarget, persisted *hookv1.RecoveryStatus) time.Duration {
	ro := t.acct.Recovery()
	now := r.Now()
	st := r.startRecoveryStatus(sub, ro, t, now)
	health := r.reportHealth(ctx, sub, ro, t, now)
	provider := string(sub.Spec.Provider.Type)
	defer func() { r.Metrics.setWatermark(sub.Namespace, sub.Name, provider, st.Watermark, r.Now()) }()

	in := gatherRecoveryInput(sub, ro, t, health, now)
	d := decide.Recovery(in)
	st.LookbackClamped = d.Clamped
	switch {
	case !st.Available:
		st.Message = decide.UnavailableWhy(ro.Caps())
	case st.Message == decide.UnavailableWhy(ro.Caps()):
		st.Message = ""
	}
	if d.Reenable && d.Action != decide.RecoverRun {
		// Enabled again once the endpoint answers, whatever the recovery mode.
		if err := r.probe(ctx, t.kept.URL); err == nil {
			_ = r.reenable(ctx, sub, ro, t.kept)
		}
	}
	switch d.Action {
	case decide.RecoverRefuse:
		// The message stays until the next run, so whoever asked can read why.
		st.LastHandledRequestedAt, st.Message = in.Requested, d.Why
		r.event(sub, corev1.EventTypeWarning, hookv1.ReasonRecoveryFailed, "Recover", "%s", d.Why)
		return 0
	case decide.RecoverNone:
		return 0
	}
	st.Message = ""
	if covered, ok := r.lookFirst(ctx, sub, ro, t, d); ok {
		// Nothing missed, as one listing of the account shows: the watermark moves on without a run.
		st.Watermark = &metav1.Time{Time: covered}
		return 0
	}
	x := &recoveryRunner{r: r, sub: sub, ro: ro, reg: t.kept, secret: t.secret, d: d, st: st, persisted: persisted}
	if d.ListFirst {
		// A look once per resync where the provider reports no failures (GitLab): a listing
		// that shows nothing missed moves the watermark without a run (no status write of
		// its own); one that does is the run's listing.
		page, err := ro.Missed(ctx, t.kept, t.kept.Events, d.ListFrom, 0)
		if err == nil && quiet(page, d, now) {
			st.Watermark = &metav1.Time{Time: now}
			return 0
		}
		if err == nil {
			x.listed = &page
		}
	}
	if !t.listedNow && !ro.CanListEvents() {
		if fresh, ok := r.relisted(ctx, sub, t); ok {
			return r.recoverFrom(ctx, sub, fresh, persisted)
		}
	}
	ctx, span := x.startSpan(ctx)
	x.start(ctx, now)
	x.carryOut(ctx)
	x.finish(ctx, in.Requested)
	x.endSpan(span)
	return x.requeue
}

// relisted reads the account's list from the provider for a run about to send on a provider
// that cannot list what it never sent, when the reconcile planned from the shared list: the
// run's first successful resend ends a disable that the provider reports only until then
// (GitLab clears disabled_until on a success), so a disable that began after the shared list
// was read would go unseen, and the events it kept from being sent unreported. It costs one list
// request per run, none per resync. ok is false when the list cannot be read (the run goes on
// from what the reconcile saw).
func (r *Reconciler) relisted(ctx context.Context, sub *hookv1.WebhookSubscription, t recoveryTarget) (recoveryTarget, bool) {
	ops, unlock := t.acct.Lock()
	regs, err := ops.List(ctx, 0)
	unlock()
	if err != nil {
		log.FromContext(ctx).Info("reading the registration afresh before a recovery run failed; the run goes on from the shared list", logSubscription, account.SubscriptionKey(sub), "error", err.Error())
		return t, false
	}
	t.listedNow = true
	if i := slices.IndexFunc(regs, func(reg providers.Registration) bool { return reg.ID == t.kept.ID }); i >= 0 {
		t.kept.Health = regs[i].Health
		t.providerDisabled = t.providerDisabled || disabledByProvider(regs, t.kept.ID)
	}
	return t, true
}

// startRecoveryStatus makes sure status.recovery exists and records what the provider offers
// and when the registration was first found disabled by the provider.
func (r *Reconciler) startRecoveryStatus(sub *hookv1.WebhookSubscription, ro account.RecoveryOps, t recoveryTarget, now time.Time) *hookv1.RecoveryStatus {
	if sub.Status.Recovery == nil {
		sub.Status.Recovery = &hookv1.RecoveryStatus{}
	}
	st := sub.Status.Recovery
	available, window := recoveryAvailability(ro)
	st.Available, st.Window = available, ""
	if window > 0 {
		st.Window = decide.FormatDuration(window)
	}
	if t.providerDisabled && st.ProviderDisabledAt == nil {
		at := metav1.NewTime(now)
		st.ProviderDisabledAt = &at
	}
	return st
}

// reportHealth reads the provider's view of deliveries to the kept registration and reports it
// (the Delivering condition, the health metric); a registration delivering again ends the span
// the provider had it disabled.
func (r *Reconciler) reportHealth(ctx context.Context, sub *hookv1.WebhookSubscription, ro account.RecoveryOps, t recoveryTarget, now time.Time) providers.DeliveryHealth {
	health := r.deliveryHealth(ctx, sub, ro, t.kept, now)
	if !t.providerDisabled && health.State != providers.HealthDisabled {
		r.disabledSpanEnded(sub, ro, health, now)
	}
	setDelivering(sub, t.kept.ID, health)
	r.Metrics.setDeliveryHealth(sub.Namespace, sub.Name, string(sub.Spec.Provider.Type), health.State)
	return health
}

// lookFirst answers an automatic run the decision sends to the account's shared look
// (SharedLook: a provider whose listing of missed events is account-wide, Stripe;
// recovery_look.go): ok when it shows nothing missed for the subscription since the run's
// start, up to covered. A look that cannot answer for certain lets the run go on as before.
func (r *Reconciler) lookFirst(ctx context.Context, sub *hookv1.WebhookSubscription, ro account.RecoveryOps, t recoveryTarget, d decide.RecoveryDecision) (covered time.Time, ok bool) {
	if !d.SharedLook {
		return time.Time{}, false
	}
	nothing, covered, sure, err := ro.Look(ctx, t.kept.Events, d.Since, d.LookFrom, t.listAge)
	if err != nil {
		log.FromContext(ctx).Info("the shared look at missed events failed; the subscription's run lists for itself", logSubscription, account.SubscriptionKey(sub), "error", err.Error())
		return time.Time{}, false
	}
	return covered, sure && nothing
}

func (x *recoveryRunner) logger(ctx context.Context) logr.Logger {
	return log.FromContext(ctx).WithValues(logSubscription, account.SubscriptionKey(x.sub), logProvider, string(x.sub.Spec.Provider.Type), logEndpointID, x.reg.ID)
}

// start records the run as Running, so a run that never ends is visible, and an automatic run
// is not started again within the resync interval, whatever happens to this manager.
func (x *recoveryRunner) start(ctx context.Context, now time.Time) {
	if prev := x.st.LastRun; prev != nil && prev.Result == hookv1.RecoveryRunning {
		// A run that never finished (its manager was killed): what it persisted joins the
		// totals, since finish never added it and this run does not hand it over again.
		x.st.Recovered += prev.Recovered
		x.st.Skipped += prev.Skipped
		x.st.BeyondWindow += prev.BeyondWindow
	}
	x.run = &hookv1.RecoveryRun{Trigger: x.d.Trigger, StartTime: metav1.NewTime(now), Result: hookv1.RecoveryRunning}
	x.st.LastRun = x.run
	x.logger(ctx).Info("recovery run starts", "trigger", string(x.d.Trigger), "since", x.d.Since, logReason, x.d.Why)
	x.persist(ctx)
}

// carryOut checks that the endpoint answers, re-enables a disabled registration and recovers
// in the provider's mode.
func (x *recoveryRunner) carryOut(ctx context.Context) {
	if err := x.r.probe(ctx, x.reg.URL); err != nil {
		x.fail(hookv1.RecoveryFailed, "%v; retried at the next resync", err)
		return
	}
	if x.d.Reenable {
		if err := x.r.reenable(ctx, x.sub, x.ro, x.reg); err != nil {
			x.stopOn(err, "enabling the registration the provider disabled")
			return
		}
	}
	if !x.d.Gap.IsZero() {
		x.run.Message = x.r.recordGap(x.sub, x.d.Gap, x.d.GapEnd, hookv1.GapBeyondWindow)
	}
	switch x.d.Mode {
	case providers.RecoveryFetch:
		x.fetch(ctx)
	case providers.RecoveryRedeliver:
		x.redeliver(ctx)
	case providers.RecoveryRange:
		x.rangeRecover(ctx)
	}
}

// fetch hands each missed event, oldest first, to the registration's URL, signed as the
// provider signs it. The watermark follows the last event the receiver committed (202) or
// already held (200); the first other answer stops the run there.
func (x *recoveryRunner) fetch(ctx context.Context) {
	if x.secret == "" {
		x.fail(hookv1.RecoveryFailed, "no current signing secret is held, so recovered events cannot be signed")
		return
	}
	since, seen := x.d.Since, map[string]bool{}
	list := func(since time.Time) (providers.MissedPage, error) {
		return x.ro.Missed(ctx, x.reg, x.reg.Events, since, fetchPage)
	}
	everything := x.d.ListEvents
	if everything {
		// Every event of the span the provider had the endpoint disabled (decide.Recovery).
		since = x.d.EventsSince(x.r.Now())
		list = func(since time.Time) (providers.MissedPage, error) {
			return x.ro.Events(ctx, x.reg.Events, since, fetchPage)
		}
	}
	for n := 1; ; n++ {
		pctx, pg := x.startPage(ctx, n)
		next, more, ok := x.fetchPage(pctx, pg, list, since, seen)
		pg.end()
		if !ok {
			return
		}
		if !more {
			break
		}
		since = next
	}
	x.advance(x.run.StartTime.Time) // the listing covered everything up to the run's start
	if everything {
		x.st.ProviderDisabledAt = nil
	}
}

// fetchPage lists one page of missed events from since and hands over those not seen yet: more
// when the listing goes on from next, ok false when the run stops here.
func (x *recoveryRunner) fetchPage(ctx context.Context, pg *recoveryPage, list func(time.Time) (providers.MissedPage, error),
	since time.Time, seen map[string]bool) (next time.Time, more, ok bool) {
	page, err := list(since)
	if err != nil {
		x.stopOn(err, "listing missed events")
		return time.Time{}, false, false
	}
	x.run.Malformed += int64(page.Malformed)
	for i, m := range page.Missed {
		if seen[m.ID] {
			continue
		}
		seen[m.ID] = true
		switch {
		case m.Expired:
			x.run.BeyondWindow++
		case !x.handOver(ctx, m):
			x.persist(ctx)
			return time.Time{}, false, false
		default:
			pg.asked(m.ID)
		}
		x.advance(m.At)
		if (i+1)%persistEvery == 0 {
			x.persist(ctx)
		}
	}
	if !page.More {
		return time.Time{}, false, true
	}
	// The page held every event of each second it reached: the next starts after them.
	next = page.NextSince()
	if !next.After(since) {
		x.fail(hookv1.RecoveryPartial, "the provider's listing of missed events did not move past %s; the next run starts again from the watermark", since.UTC().Format(time.RFC3339))
		x.persist(ctx)
		return time.Time{}, false, false
	}
	x.persist(ctx)
	return next, true, true
}

// handOver posts one event; false stops the run.
func (x *recoveryRunner) handOver(ctx context.Context, m providers.Missed) bool {
	header, err := x.ro.Sign(m.Payload, x.secret, x.r.Now())
	if err != nil {
		x.fail(hookv1.RecoveryPartial, "signing event %s: %v; the next run starts again from it", m.ID, err)
		return false
	}
	// Our own receiver: the page span goes with the event, so its trace links to this run.
	telemetry.SignHandover(ctx, header, x.secret, m.Payload)
	code, err := x.r.handOver(ctx, x.reg.URL, header, m.Payload)
	switch {
	case err != nil:
		x.fail(hookv1.RecoveryPartial, "handing event %s to %s: %v; the next run starts again from it", m.ID, x.reg.URL, err)
		return false
	case code == http.StatusAccepted:
		x.run.Recovered++
	case code == http.StatusOK:
		x.run.Skipped++ // the receiver's ledger already holds it
	default:
		x.fail(hookv1.RecoveryPartial, "the receiver answered %d to event %s; the next run starts again from it", code, m.ID)
		return false
	}
	return true
}

// redeliver asks the provider to redeliver each missed delivery in its window. The watermark
// moves to the oldest delivery still missed in this listing (those that later succeeded are
// not listed), never past one only asked for now: the next run's listing tells whether it
// arrived.
func (x *recoveryRunner) redeliver(ctx context.Context) {
	ctx, pg := x.startPage(ctx, 1)
	defer pg.end()
	var page providers.MissedPage
	if x.listed != nil {
		page = *x.listed
	} else {
		var err error
		if page, err = x.ro.Missed(ctx, x.reg, x.reg.Events, x.d.ListFrom, 0); err != nil {
			x.stopOn(err, "listing missed deliveries")
			return
		}
	}
	x.run.Malformed += int64(page.Malformed)
	if start, end := decide.LogGap(x.d.ReportFrom, page.Covers, x.run.StartTime.Time, x.d.Window); !start.IsZero() {
		x.note("%s", x.r.recordGap(x.sub, start, end, hookv1.GapBeyondWindow))
	}
	// Listed from the watermark (or the log's start): what the provider will not redeliver is
	// reported; the rest is asked for from Since on (the lookback).
	var asked []providers.Missed
	for _, m := range page.Missed {
		switch {
		case m.Expired:
			x.run.BeyondWindow++
		case !m.At.Before(x.d.Since):
			asked = append(asked, m)
		}
	}
	mark := x.run.StartTime.Time
	for _, m := range asked {
		if m.At.Before(mark) {
			mark = m.At
		}
	}
	x.advance(mark)
	for i, m := range asked {
		wait, err := x.ro.Redeliver(ctx, x.reg, m)
		left := len(asked) - i
		switch {
		case wait > 0:
			x.requeue = wait
			x.fail(hookv1.RecoveryPartial, "paused at the provider's redelivery rate with %d deliveries left; going on in %s", left, wait.Round(time.Second))
			return
		case providers.KindOf(err) == providers.NotFound || providers.KindOf(err) == providers.Permanent:
			// No longer kept, or past the window: reported, never asked for again.
			x.run.BeyondWindow++
		case err != nil:
			x.stopOn(err, fmt.Sprintf("redelivering %s (%d left)", m.ID, left))
			return
		default:
			x.run.Recovered++
			pg.asked(m.ID)
		}
	}
}

// rangeRecover asks the provider to resend everything since the run's start point.
func (x *recoveryRunner) rangeRecover(ctx context.Context) {
	if err := x.ro.RecoverSince(ctx, x.reg, x.d.Since); err != nil {
		x.stopOn(err, "asking the provider to resend")
		return
	}
	x.note("asked the provider to resend everything since %s", x.d.Since.UTC().Format(time.RFC3339))
	x.advance(x.run.StartTime.Time)
}

// reenable enables reg, which the provider disabled, once its endpoint answered: the Reenabled
// Event, Delivering Unknown until the provider reports again, and the span it was disabled ended
// (a gap where the provider cannot list what it never sent).
func (r *Reconciler) reenable(ctx context.Context, sub *hookv1.WebhookSubscription, ro account.RecoveryOps, reg providers.Registration) error {
	if err := ro.Reenable(ctx, reg); err != nil {
		log.FromContext(ctx).Info("enabling the registration the provider disabled failed", logSubscription, account.SubscriptionKey(sub), logEndpointID, reg.ID, "error", err.Error())
		return err
	}
	r.event(sub, corev1.EventTypeNormal, hookv1.ReasonReenabled, "Recover", "the provider had disabled %s; enabled it again (the endpoint answers)", reg.ID)
	setDelivering(sub, reg.ID, providers.DeliveryHealth{State: providers.HealthUnknown, Message: "enabled again after the provider disabled it; no delivery reported since"})
	r.Metrics.setDeliveryHealth(sub.Namespace, sub.Name, string(sub.Spec.Provider.Type), providers.HealthUnknown)
	r.disabledSpanEnded(sub, ro, providers.DeliveryHealth{}, r.Now())
	return nil
}

// disabledSpanEnded closes the span the provider had the registration disabled, now that it
// delivers again: from when it was found disabled (ProviderDisabledAt), or, where the provider
// disabled it and enabled it again between two looks, from its own record of the disable's end
// (DisabledUntil in the past: GitLab), to the end of the disable. A provider that lists every
// event (providers.EventLister: Stripe) brings the span's events back in the next run, which
// clears ProviderDisabledAt itself; on any other the span is a gap: its events were never sent
// and are in no log (GitLab).
func (r *Reconciler) disabledSpanEnded(sub *hookv1.WebhookSubscription, ro account.RecoveryOps, h providers.DeliveryHealth, now time.Time) {
	st := sub.Status.Recovery
	if st == nil || ro.CanListEvents() {
		return
	}
	end := now
	if until := h.DisabledUntil; !until.IsZero() && until.Before(now) {
		end = until
	}
	resync := resyncInterval(sub)
	var start time.Time
	switch {
	case st.ProviderDisabledAt != nil:
		// Disabled when found so, or at most a resync before (the previous look saw it
		// delivering).
		start = st.ProviderDisabledAt.Add(-resync)
		st.ProviderDisabledAt = nil
	case end.Before(now) && !gapRecorded(st, end):
		// Disabled and enabled again between two looks: at most since the previous one.
		start = end.Add(-resync)
	default:
		return
	}
	if st.Watermark != nil && st.Watermark.After(start) && st.Watermark.Time.Before(end) {
		start = st.Watermark.Time // the watermark's run found nothing failed before it
	}
	if !end.After(start) {
		end = now // the provider's record ends before it was found disabled: its clock is off
	}
	r.recordGap(sub, start, end, hookv1.GapProviderDisabled)
}

// gapRecorded reports whether a ProviderDisabled gap ending at end is recorded already.
func gapRecorded(st *hookv1.RecoveryStatus, end time.Time) bool {
	for _, g := range st.Gaps {
		if g.Reason == hookv1.GapProviderDisabled && g.End.Time.Truncate(time.Second).Equal(end.Truncate(time.Second)) {
			return true
		}
	}
	return false
}

// recordGap records a span of possibly missed deliveries that cannot be recovered: in
// status.recovery.gaps (the latest MaxRecoveryGaps), a Warning Event and
// hookwarden_recovery_gaps_total. It returns the message.
func (r *Reconciler) recordGap(sub *hookv1.WebhookSubscription, start, end time.Time, reason hookv1.RecoveryGapReason) string {
	st := sub.Status.Recovery
	from, to := start.UTC().Format(time.RFC3339), end.UTC().Format(time.RFC3339)
	msg := fmt.Sprintf("deliveries missed between %s and %s are beyond the %s the provider keeps and cannot be recovered", from, to, st.Window)
	event := hookv1.ReasonBeyondRecoveryWindow
	if reason == hookv1.GapProviderDisabled {
		msg = fmt.Sprintf("the provider had the registration disabled between %s and %s (at most) and sent nothing meanwhile; it lists none of those events, so they cannot be recovered", from, to)
		event = hookv1.ReasonProviderDisabledGap
	}
	st.Gaps = append(st.Gaps, hookv1.RecoveryGap{Start: metav1.NewTime(start), End: metav1.NewTime(end), Reason: reason})
	if n := len(st.Gaps) - hookv1.MaxRecoveryGaps; n > 0 {
		st.Gaps = slices.Delete(st.Gaps, 0, n)
	}
	r.event(sub, corev1.EventTypeWarning, event, "Recover", "%s", msg)
	r.Metrics.recoveryGap(sub.Namespace, sub.Name, string(sub.Spec.Provider.Type), reason)
	return msg
}

// stopOn ends the run on a provider error: a rate limit requeues after the stated wait.
func (x *recoveryRunner) stopOn(err error, what string) {
	result := hookv1.RecoveryFailed
	if x.run.Recovered+x.run.Skipped > 0 {
		result = hookv1.RecoveryPartial
	}
	if providers.KindOf(err) == providers.RateLimited {
		x.requeue = max(providers.RetryAfter(err), decide.DefaultRateLimitWait)
		x.fail(result, "%s: provider rate limit, going on in %s", what, x.requeue)
		return
	}
	x.fail(result, "%s: %v", what, err)
}

func (x *recoveryRunner) fail(result hookv1.RecoveryResult, format string, args ...any) {
	x.run.Result = result
	x.note(format, args...)
}

func (x *recoveryRunner) note(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if x.run.Message != "" {
		msg = x.run.Message + "; " + msg
	}
	x.run.Message = msg
}

// advance moves the watermark forward to at (never back).
func (x *recoveryRunner) advance(at time.Time) {
	if x.st.Watermark == nil || at.After(x.st.Watermark.Time) {
		t := metav1.NewTime(at)
		x.st.Watermark = &t
	}
}

// finish records the run's end: totals, the request handled, Events, metrics, a log line.
func (x *recoveryRunner) finish(ctx context.Context, requested string) {
	run, st := x.run, x.st
	end := metav1.NewTime(x.r.Now())
	run.CompletionTime = &end
	if run.Result == hookv1.RecoveryRunning {
		run.Result = hookv1.RecoverySucceeded
	}
	st.Recovered += run.Recovered
	st.Skipped += run.Skipped
	st.BeyondWindow += run.BeyondWindow
	if run.Trigger == hookv1.TriggerRequested {
		st.LastHandledRequestedAt = requested
	}
	counts := fmt.Sprintf("recovered %d, skipped %d (already delivered), beyond the window %d, malformed %d", run.Recovered, run.Skipped, run.BeyondWindow, run.Malformed)
	handled := run.Recovered+run.Skipped+run.BeyondWindow+run.Malformed > 0
	switch {
	case run.Result != hookv1.RecoverySucceeded:
		x.r.event(x.sub, corev1.EventTypeWarning, hookv1.ReasonRecoveryFailed, "Recover", "%s (%s): %s", run.Result, counts, run.Message)
	case handled || run.Trigger == hookv1.TriggerRequested || run.Message != "":
		// A routine look that found nothing (Stripe, once per resync) records no Event.
		x.r.event(x.sub, corev1.EventTypeNormal, hookv1.ReasonRecoveryCompleted, "Recover", "%s", counts)
	}
	if run.BeyondWindow > 0 {
		x.r.event(x.sub, corev1.EventTypeWarning, hookv1.ReasonBeyondRecoveryWindow, "Recover", "%d missed deliveries are beyond the %s the provider keeps and cannot be recovered", run.BeyondWindow, st.Window)
	}
	if run.Malformed > 0 {
		x.logger(ctx).Info("skipped entries of the provider's answer that lack what its description promises", "malformed", run.Malformed)
	}
	if run.Result == hookv1.RecoverySucceeded && run.Recovered > 0 {
		// The provider's report of recent deliveries predates what this run recovered: ask
		// again at the next reconcile rather than show Failing for another resync.
		x.r.health.forgetSubscription(account.SubscriptionKey(x.sub))
	}
	x.r.Metrics.recoveryRun(x.sub.Namespace, x.sub.Name, string(x.sub.Spec.Provider.Type), run)
	x.persist(ctx)
	x.logger(ctx).Info("recovery run ended", "result", string(run.Result), "recovered", run.Recovered, "skipped", run.Skipped,
		"beyondWindow", run.BeyondWindow, "malformed", run.Malformed, "message", run.Message)
}

// persist writes status.recovery alone, so that what a run has done so far survives the
// manager; a failed write is only logged (the reconcile's own status patch follows).
func (x *recoveryRunner) persist(ctx context.Context) {
	base := &hookv1.WebhookSubscription{ObjectMeta: *x.sub.ObjectMeta.DeepCopy(), Status: hookv1.WebhookSubscriptionStatus{Recovery: x.persisted.DeepCopy()}}
	obj := base.DeepCopy()
	obj.Status.Recovery = x.st.DeepCopy()
	// Written even when the run's own deadline has passed: that is when it matters most.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := x.r.Status().Patch(wctx, obj, client.MergeFrom(base)); err != nil {
		x.logger(ctx).Info("could not persist the recovery watermark mid-run", "error", err.Error())
		return
	}
	x.persisted = x.st.DeepCopy()
}
