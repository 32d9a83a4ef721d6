package cli

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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
		Use:   "recover [NAME] [-l selector]",
		Short: "Ask for a recovery run of missed events and follow it to its end",
		Long: `recover sets the annotation hookwarden.io/recover-requested-at on each subscription and
follows status.recovery until status.recovery.lastHandledRequestedAt equals the request, then
prints what the run found: its result (Succeeded, Partial or Failed) and message, events
recovered, skipped (already received) and beyond the provider's window (no longer
retrievable). A request the manager refused (recovery Off, or not available on the provider)
prints its reason.

Exit code 1 when any run ended Partial or Failed, or was refused; 0 when every run succeeded.

Resumable as rotate: a request still pending is followed, not made again, and a subscription
that handled the batch's request (--requested-at, or the value of a request still pending on
another) is not asked again.`,
		Example: `  hookwarden recover -n shop -l team=payments --timeout 30m`,
		Args:    cobra.MaximumNArgs(1),
		RunE:    func(cmd *cobra.Command, args []string) error { return g.runRecover(cmd, args, f) },
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

// resultRefused is the result of a request the manager handled without a run.
const resultRefused = "Refused"

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
	subs, err := g.selectSubscriptions(ctx, c, args, f.selector)
	if err != nil {
		return err
	}
	runs := make([]recoveryRun, len(subs))
	requested, handled := make([]string, len(subs)), make([]string, len(subs))
	for i := range subs {
		u, err := getUnstructured(ctx, c, types.NamespacedName{Namespace: subs[i].Namespace, Name: subs[i].Name})
		if err != nil {
			return err
		}
		handled[i], _ = recoveryOf(u)
		requested[i] = u.GetAnnotations()[AnnotationRecoverRequestedAt]
	}
	batch := batchValue(f.requestedAt, g.opts.Now().UTC().Format(time.RFC3339Nano), requested, handled)
	for i := range subs {
		s := &subs[i]
		runs[i] = recoveryRun{Subscription: key(s), RequestedAt: batch, Resumed: true}
		switch actionFor(batch, requested[i], handled[i]) {
		case requestFollow:
			runs[i].RequestedAt = requested[i]
			g.progress(cmd.ErrOrStderr(), "%s: a recovery requested at %s is still running: following it", key(s), requested[i])
			continue
		case requestHandled:
			g.progress(cmd.ErrOrStderr(), "%s: recovered before in this batch (%s): not asked again", key(s), batch)
			continue
		}
		patch := client.MergeFrom(s.DeepCopy())
		if s.Annotations == nil {
			s.Annotations = map[string]string{}
		}
		s.Annotations[AnnotationRecoverRequestedAt] = batch
		if err := c.client.Patch(ctx, s, patch); err != nil {
			return kubeError("requesting a recovery of "+key(s), err)
		}
		runs[i].Resumed = false
		g.progress(cmd.ErrOrStderr(), "%s: recovery requested", key(s))
	}
	tick := time.NewTicker(f.interval)
	defer tick.Stop()
	for i := range runs {
		for {
			u, err := getUnstructured(ctx, c, types.NamespacedName{Namespace: subs[i].Namespace, Name: subs[i].Name})
			if err == nil {
				if handled, run := recoveryOf(u); handled == runs[i].RequestedAt {
					run.Subscription, run.RequestedAt, run.Resumed = runs[i].Subscription, runs[i].RequestedAt, runs[i].Resumed
					runs[i] = run
					g.progress(cmd.ErrOrStderr(), "recovery %d/%d ended: %s: %s", i+1, len(runs), run.Subscription, run.summary())
					break
				}
			} else if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) {
				return err
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("%s: %w (%d of %d recoveries ended; this batch is --requested-at %s)", runs[i].Subscription, ctx.Err(), i, len(runs), batch)
			case <-tick.C:
			}
		}
	}
	if err := g.print(cmd.OutOrStdout(), runs, func(t *table) {
		t.header("SUBSCRIPTION", "RESULT", "RECOVERED", "SKIPPED", "BEYOND-WINDOW", "REQUESTED-AT", "MESSAGE")
		for _, r := range runs {
			t.row(r.Subscription, r.Result, strconv.FormatInt(r.Recovered, 10), strconv.FormatInt(r.Skipped, 10), strconv.FormatInt(r.BeyondWindow, 10), r.RequestedAt, r.Message)
		}
	}); err != nil {
		return err
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
	if r.Result == resultRefused {
		s = resultRefused
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
