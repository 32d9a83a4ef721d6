package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
)

const (
	// missedPerSub is how many events each subscription misses while the receiver is down.
	missedPerSub = 3
	// recoveryTimeout bounds the wait for every run: an automatic one starts at the next
	// resync (resyncInterval), a requested one at once.
	recoveryTimeout = 90 * time.Second
)

// recoveryRow is one subscription's part of the recovery step.
type recoveryRow struct {
	sub      subRef
	trigger  hookv1.RecoveryTrigger // how its run starts: Auto, or Requested (annotation)
	ids      []string               // the events it missed (ce-id at the sink)
	failed   int                    // failed attempts in the fake's log
	before   hookv1.RecoveryStatus  // status.recovery totals before
	after    hookv1.RecoveryStatus  // and once its events were recovered
	run      *hookv1.RecoveryRun    // the run that recovered them
	delivery string                 // the Delivering condition's reason at the end
	asked    string                 // the annotation's value, for a requested run
}

func (r *recoveryRow) recovered() int64 { return r.after.Recovered - r.before.Recovered }
func (r *recoveryRow) skipped() int64   { return r.after.Skipped - r.before.Skipped }
func (r *recoveryRow) beyond() int64    { return r.after.BeyondWindow - r.before.BeyondWindow }

// recoverMissed stops the receiver, has the fakes send events that therefore fail, starts the
// receiver again and waits for status.recovery to report each subscription's missed events
// recovered (mode Auto: at its next resync; mode Manual: when the annotation asks), then checks
// the sink: each missed event exactly once.
func (d *demo) recoverMissed(ctx context.Context) error {
	d.step("recovery: the receiver stops, %d events per subscription happen at the fakes meanwhile, the receiver comes back", missedPerSub)
	rows, err := d.recoveryRows(ctx)
	if err != nil {
		return err
	}
	status, err := d.rcv.Stop(stopTimeout)
	if err != nil {
		return err
	}
	d.info("receiver stopped (%s): %s answers nothing", status, d.receiverBase)
	for _, r := range rows {
		p := d.providerOf(r.sub)
		reg := p.fake().regs[r.sub.name]
		if r.ids, err = p.emit(ctx, r.sub, reg, missedPerSub); err != nil {
			return fmt.Errorf("emitting %s's events at the fake %s: %w", r.sub.name, p.fake().title, err)
		}
		if r.failed, err = p.failedAttempts(ctx, r.sub, reg, r.ids); err != nil {
			return err
		}
		d.info("%s: the fake %s made %d events for %s %s; its attempt log shows %d failed deliveries", r.sub.name, p.fake().title, len(r.ids), reg.noun, reg.id, r.failed)
		if r.failed != len(r.ids) {
			return fmt.Errorf("%s: the fake %s logs %d failed deliveries of its %d events, want one each", r.sub.name, p.fake().title, r.failed, len(r.ids))
		}
	}
	restarted := time.Now()
	if err := d.launchReceiver(ctx); err != nil {
		return fmt.Errorf("starting the receiver again: %w", err)
	}
	d.info("receiver started again (pid %d) on %s, same store, in %s", d.rcv.Pid(), d.receiverBase, time.Since(restarted).Round(100*time.Millisecond))
	for _, r := range rows {
		if r.trigger != hookv1.TriggerRequested {
			d.info("%s: spec.recovery.mode Auto: the next resync (every %s) looks for missed deliveries", r.sub.name, resyncInterval)
			continue
		}
		r.asked = strconv.FormatInt(time.Now().Unix(), 10)
		if err := d.annotate(ctx, r.sub.name, hookv1.AnnotationRecoverRequestedAt, r.asked); err != nil {
			return err
		}
		d.info("%s: spec.recovery.mode Manual: annotated %s=%s", r.sub.name, hookv1.AnnotationRecoverRequestedAt, r.asked)
	}
	if err := d.waitRecovered(ctx, rows, restarted); err != nil {
		return err
	}
	if err := d.checkRecoveredOnce(ctx, rows); err != nil {
		return err
	}
	d.printRecovery(rows)
	for _, r := range rows {
		d.recovery = append(d.recovery, *r)
	}
	return nil
}

// recoveryRows lists the subscriptions with the trigger their mode gives and their totals so
// far; it wants at least one of each trigger.
func (d *demo) recoveryRows(ctx context.Context) ([]*recoveryRow, error) {
	var rows []*recoveryRow
	triggers := map[hookv1.RecoveryTrigger]int{}
	for _, s := range d.subs {
		sub, err := d.getSub(ctx, s.name)
		if err != nil {
			return nil, err
		}
		r := &recoveryRow{sub: s}
		switch sub.Spec.Recovery.Mode {
		case hookv1.RecoveryAuto, "":
			r.trigger = hookv1.TriggerAuto
		case hookv1.RecoveryManual:
			r.trigger = hookv1.TriggerRequested
		default:
			continue // Off: nothing to show
		}
		if st := sub.Status.Recovery; st != nil {
			if !st.Available {
				return nil, fmt.Errorf("%s: status.recovery says recovery is not available: %s", s.name, st.Message)
			}
			r.before = *st
		}
		triggers[r.trigger]++
		rows = append(rows, r)
	}
	if triggers[hookv1.TriggerAuto] == 0 || triggers[hookv1.TriggerRequested] == 0 {
		return nil, fmt.Errorf("the samples need a subscription in spec.recovery.mode Auto and one in Manual (have %d and %d)", triggers[hookv1.TriggerAuto], triggers[hookv1.TriggerRequested])
	}
	return rows, nil
}

// annotate sets one annotation on a subscription (a merge patch: no conflict with the manager).
func (d *demo) annotate(ctx context.Context, name, key, value string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	sub := &hookv1.WebhookSubscription{}
	sub.Namespace, sub.Name = namespace, name
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, key, value)
	if err := d.k8s.Patch(ctx, sub, client.RawPatch("application/merge-patch+json", []byte(patch))); err != nil {
		return fmt.Errorf("annotating %s: %w", name, err)
	}
	return nil
}

// waitRecovered polls status.recovery until every row's totals grew by its missed events, its
// latest run (of its trigger, started after the receiver came back) succeeded, and the sink
// holds each of its events. It prints where each stands every few seconds.
func (d *demo) waitRecovered(ctx context.Context, rows []*recoveryRow, restarted time.Time) error {
	started, lastPrint := time.Now(), time.Time{}
	err := poll(ctx, recoveryTimeout, time.Second, func(ctx context.Context) (bool, error) {
		if err := d.mgr.Exited(); err != nil {
			return false, fatal(err)
		}
		if err := d.rcv.Exited(); err != nil {
			return false, fatal(err)
		}
		v := d.sink.view()
		var pending, progress []string
		for _, r := range rows {
			sub, err := d.getSub(ctx, r.sub.name)
			if err != nil {
				return false, err
			}
			st := sub.Status.Recovery
			if st == nil {
				pending = append(pending, r.sub.name+": no status.recovery")
				progress = append(progress, r.sub.name+": no status.recovery yet")
				continue
			}
			r.after = *st
			if c := condition(sub, hookv1.ConditionDelivering); c != nil {
				r.delivery = c.Reason
			}
			arrived := 0
			for _, id := range r.ids {
				if v.byCEID[sinkSource(r.sub)+" "+id] > 0 {
					arrived++
				}
			}
			run := st.LastRun
			state := "no run yet"
			if run != nil {
				state = fmt.Sprintf("last run %s %s (recovered %d)", run.Trigger, run.Result, run.Recovered)
			}
			progress = append(progress, fmt.Sprintf("%s: %s, total recovered %d/%d, %d/%d at the sink", r.sub.name, state, r.recovered(), len(r.ids), arrived, len(r.ids)))
			switch {
			case r.recovered() < int64(len(r.ids)):
				pending = append(pending, fmt.Sprintf("%s: %d of %d recovered (%s)", r.sub.name, r.recovered(), len(r.ids), state))
			case r.asked != "" && st.LastHandledRequestedAt != r.asked:
				pending = append(pending, fmt.Sprintf("%s: the request %s not handled yet", r.sub.name, r.asked))
			case run == nil || run.Result != hookv1.RecoverySucceeded || run.StartTime.Time.Before(restarted.Truncate(time.Second)):
				pending = append(pending, fmt.Sprintf("%s: %s", r.sub.name, state))
			case arrived < len(r.ids):
				pending = append(pending, fmt.Sprintf("%s: %d of %d recovered events at the sink", r.sub.name, arrived, len(r.ids)))
			}
			if r.run == nil && run != nil && run.Trigger == r.trigger && run.Recovered > 0 && !run.StartTime.Time.Before(restarted.Truncate(time.Second)) {
				c := *run
				r.run = &c // the run that brought them back (a later routine look recovers 0)
			}
		}
		if time.Since(lastPrint) >= 5*time.Second || len(pending) == 0 {
			lastPrint = time.Now()
			d.info("-- t+%s", time.Since(started).Round(time.Second))
			for _, l := range progress {
				d.info("   %s", l)
			}
		}
		if len(pending) > 0 {
			return false, errors.New(strings.Join(pending, "; "))
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for recovery: %w", err)
	}
	for _, r := range rows {
		switch {
		case r.run == nil:
			return fmt.Errorf("%s: no %s run recovered its events (status.recovery.lastRun: %+v)", r.sub.name, r.trigger, r.after.LastRun)
		case r.run.Trigger != r.trigger:
			return fmt.Errorf("%s: its events came back in a %s run, want %s", r.sub.name, r.run.Trigger, r.trigger)
		}
	}
	d.info("every missed event recovered after %s", time.Since(started).Round(100*time.Millisecond))
	return nil
}

// checkRecoveredOnce checks the sink after one more resync (a routine look after the recovery
// must find nothing to send again): each missed event exactly once, on its subscription's path,
// and the totals unchanged.
func (d *demo) checkRecoveredOnce(ctx context.Context, rows []*recoveryRow) error {
	d.info("waiting one more resync (%s): the next look must not send anything again", resyncInterval)
	wait, _ := time.ParseDuration(resyncInterval)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(wait + 2*time.Second):
	}
	v := d.sink.view()
	var problems []string
	for _, r := range rows {
		for _, id := range r.ids {
			if n := v.byCEID[sinkSource(r.sub)+" "+id]; n != 1 {
				problems = append(problems, fmt.Sprintf("%s: event %s arrived %d times", r.sub.name, id, n))
			}
		}
		sub, err := d.getSub(ctx, r.sub.name)
		if err != nil {
			return err
		}
		if st := sub.Status.Recovery; st != nil && st.Recovered != r.after.Recovered {
			problems = append(problems, fmt.Sprintf("%s: status.recovery.recovered went on from %d to %d", r.sub.name, r.after.Recovered, st.Recovered))
		}
		if c := condition(sub, hookv1.ConditionDelivering); c != nil {
			r.delivery = c.Reason
		}
	}
	if len(v.problems) > 0 {
		problems = append(problems, v.problems...)
	}
	if len(problems) > 0 {
		return fmt.Errorf("after recovery: %s", strings.Join(problems, "; "))
	}
	d.info("the sink holds each of the %d missed events exactly once", countMissed(rows))
	return nil
}

func sinkSource(s subRef) string { return "hookwarden/" + namespace + "/" + s.name }

func countMissed(rows []*recoveryRow) int {
	n := 0
	for _, r := range rows {
		n += len(r.ids)
	}
	return n
}

func (d *demo) printRecovery(rows []*recoveryRow) {
	tw := tabwriter.NewWriter(d.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "   SUBSCRIPTION\tPROVIDER\tRUN\tMISSED\tFAILED AT THE FAKE\tRECOVERED\tSKIPPED\tBEYOND WINDOW\tDELIVERING")
	for _, r := range rows {
		fmt.Fprintf(tw, "   %s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\n", r.sub.name, d.providerOf(r.sub).fake().title, r.trigger,
			len(r.ids), r.failed, r.recovered(), r.skipped(), r.beyond(), orNone(r.delivery))
	}
	_ = tw.Flush()
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// recoverySummary is the recovery step's part of the DEMO OK line.
func (d *demo) recoverySummary() string {
	var missed, failed int
	var recovered, skipped, beyond int64
	auto, requested := 0, 0
	for _, r := range d.recovery {
		missed += len(r.ids)
		failed += r.failed
		recovered += r.recovered()
		skipped += r.skipped()
		beyond += r.beyond()
		if r.trigger == hookv1.TriggerAuto {
			auto++
		} else {
			requested++
		}
	}
	return fmt.Sprintf("%d missed events (%d failed deliveries at the fakes while the receiver was down) recovered by %d Auto and %d requested runs: %d recovered, %d skipped, %d beyond the window, each at the sink exactly once",
		missed, failed, auto, requested, recovered, skipped, beyond)
}
