package cli

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
)

// AnnotationRecoverRequestedAt asks the manager for a recovery run of missed events whenever its
// value changes; status.recovery.lastHandledRequestedAt is the value handled last.
const AnnotationRecoverRequestedAt = "hookwarden.io/recover-requested-at"

func newRecoverCommand(g *globals) *cobra.Command {
	var f followFlags
	cmd := &cobra.Command{
		Use:   "recover NAME... | -l selector | --all",
		Short: "Ask for a recovery run of missed events and follow it to its end",
		Long: `recover sets the annotation hookwarden.io/recover-requested-at on each subscription and
follows status.recovery until status.recovery.lastHandledRequestedAt equals the request, then
prints what the run found: its result (Succeeded, Partial or Failed) and message, events
recovered, skipped (already received) and beyond the provider's window (no longer
retrievable). A request the manager refused (recovery Off, or not available on the provider)
prints its reason.

Name the subscriptions (NAME..., or -l); --all asks every one of the namespace (with -A: of
the cluster). --dry-run prints what would be asked of which, and asks nothing. A suspended or
stalled subscription runs nothing without a human: it is reported at once (NotRun), not waited
on; the others are followed to their end.

Exit code 1 when any run ended Partial or Failed, was refused or not run; 0 when every run
succeeded.

Resumable as rotate: a request still pending is followed, not made again, and a subscription
that handled the batch's request (--requested-at, or the value of a request still pending on
another) is not asked again.`,
		Example: `  hookwarden recover -n shop -l team=payments --timeout 30m
  hookwarden recover orders refunds -n shop`,
		Args:              cobra.ArbitraryArgs,
		ValidArgsFunction: g.completeSubscriptions(true),
		RunE:              func(cmd *cobra.Command, args []string) error { return g.runRecover(cmd, args, f) },
	}
	f.add(cmd)
	return cmd
}

// recoveryRun is the end of one recovery run, read from status.recovery (through unstructured:
// the fields are the manager's, whatever version of the API types this binary has).
type recoveryRun struct {
	Subscription string `json:"subscription"`
	RequestedAt  string `json:"requestedAt"`
	// Result is lastRun's (Succeeded, Partial, Failed), or Refused when the manager handled the
	// request without a run (status.recovery.message says why).
	Result       string `json:"result"`
	Message      string `json:"message,omitempty"`
	Recovered    int64  `json:"recovered"`
	Skipped      int64  `json:"skipped"`
	BeyondWindow int64  `json:"beyondWindow"`
	Resumed      bool   `json:"resumed,omitempty"`
}

// Results of a request that has no run to show: handled without one (refused), not handled
// because the subscription is suspended or stalled (not run), not handled yet (pending).
const (
	resultRefused = "Refused"
	resultNotRun  = "NotRun"
	resultPending = "Pending"
)

// failed reports whether the run did not recover everything it was asked to.
func (r recoveryRun) failed() bool { return r.Result != string(hookv1.RecoverySucceeded) }

// recoveryOf reads status.recovery: handled is lastHandledRequestedAt, and lastRun's result,
// message and figures; a request handled with a message and no run since (the manager clears
// the message when a run starts) was refused.
func recoveryOf(u *unstructured.Unstructured) (handled string, run recoveryRun) {
	handled, _, _ = unstructured.NestedString(u.Object, "status", "recovery", "lastHandledRequestedAt")
	if refused, _, _ := unstructured.NestedString(u.Object, "status", "recovery", "message"); refused != "" {
		return handled, recoveryRun{Result: resultRefused, Message: refused}
	}
	run.Result, _, _ = unstructured.NestedString(u.Object, "status", "recovery", "lastRun", "result")
	run.Message, _, _ = unstructured.NestedString(u.Object, "status", "recovery", "lastRun", "message")
	run.Recovered = nestedInt(u, "recovered")
	run.Skipped = nestedInt(u, "skipped")
	run.BeyondWindow = nestedInt(u, "beyondWindow")
	return handled, run
}

func nestedInt(u *unstructured.Unstructured, field string) int64 {
	v, found, _ := unstructured.NestedFieldNoCopy(u.Object, "status", "recovery", "lastRun", field)
	if !found {
		return 0
	}
	switch n := v.(type) {
	case int64:
		return n
	case float64:
		return int64(n)
	case string:
		i, _ := strconv.ParseInt(n, 10, 64)
		return i
	}
	return 0
}

func (g *globals) runRecover(cmd *cobra.Command, args []string, f followFlags) error {
	ctx, cancel := g.withTimeout(cmd.Context())
	defer cancel()
	c, err := g.cluster()
	if err != nil {
		return err
	}
	subs, err := g.selectSubscriptions(ctx, c, args, f)
	if err != nil {
		return err
	}
	requested, handled := make([]string, len(subs)), make([]string, len(subs))
	for i := range subs {
		u, err := getUnstructured(ctx, c, types.NamespacedName{Namespace: subs[i].Namespace, Name: subs[i].Name})
		if err != nil {
			return err
		}
		handled[i], _ = recoveryOf(u)
		requested[i] = u.GetAnnotations()[AnnotationRecoverRequestedAt]
	}
	batch, items := g.planBatch(subs, requested, handled, f.requestedAt)
	if err := g.ask(ctx, cmd, c, items, AnnotationRecoverRequestedAt, "recovery", f.dryRun); err != nil || f.dryRun {
		return err
	}
	runs := make([]recoveryRun, len(items))
	for i, it := range items {
		runs[i] = recoveryRun{Subscription: key(it.sub), RequestedAt: it.value, Resumed: it.action != requestAsk, Result: resultPending}
	}
	ended := 0
	ferr := g.followAll(ctx, items, f.interval, func(ctx context.Context, it batchItem) (verdict, error) {
		u, err := getUnstructured(ctx, c, client.ObjectKeyFromObject(it.sub))
		if err != nil {
			return verdict{}, err
		}
		r := &runs[it.index]
		if handled, run := recoveryOf(u); handled == it.value {
			ended++
			run.Subscription, run.RequestedAt, run.Resumed = r.Subscription, r.RequestedAt, r.Resumed
			*r = run
			g.progress(cmd.ErrOrStderr(), "recovery %d/%d ended: %s: %s", ended, len(items), run.Subscription, run.summary())
			return verdict{done: true}, nil
		}
		live := &hookv1.WebhookSubscription{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, live); err == nil {
			if why := stuckOn(live); why != "" {
				r.Result, r.Message = resultNotRun, why
				g.progress(cmd.ErrOrStderr(), "%s: %s: not waited on", r.Subscription, why)
				return verdict{stuck: why}, nil
			}
		}
		return verdict{}, nil
	})
	if err := g.print(cmd.OutOrStdout(), runs, func(t *table) {
		t.header("SUBSCRIPTION", "RESULT", "RECOVERED", "SKIPPED", "BEYOND-WINDOW", "REQUESTED-AT", "MESSAGE")
		for _, r := range runs {
			t.row(r.Subscription, r.Result, strconv.FormatInt(r.Recovered, 10), strconv.FormatInt(r.Skipped, 10), strconv.FormatInt(r.BeyondWindow, 10), r.RequestedAt, r.Message)
		}
	}); err != nil {
		return err
	}
	if ferr != nil {
		return fmt.Errorf("%w (%d of %d recoveries ended; this batch is --requested-at %s)", ferr, ended, len(items), batch)
	}
	var failed []string
	for _, r := range runs {
		if r.failed() {
			failed = append(failed, r.Subscription+" "+r.Result)
		}
	}
	if len(failed) > 0 {
		return &exitError{code: ExitError, err: fmt.Errorf("%d of %d recoveries did not succeed: %s", len(failed), len(runs), strings.Join(failed, ", "))}
	}
	return nil
}

// summary is one line on what the run did.
func (r recoveryRun) summary() string {
	s := fmt.Sprintf("%s: %d recovered, %d skipped, %d beyond the window", r.Result, r.Recovered, r.Skipped, r.BeyondWindow)
	if r.Result == resultRefused || r.Result == resultNotRun {
		s = r.Result
	}
	if r.Message != "" {
		s += ": " + r.Message
	}
	return s
}

func getUnstructured(ctx context.Context, c *cluster, nn types.NamespacedName) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(hookv1.GroupVersion.WithKind("WebhookSubscription"))
	if err := c.client.Get(ctx, nn, u); err != nil {
		return nil, err
	}
	return u, nil
}
