package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
)

func newRotateCommand(g *globals) *cobra.Command {
	var f followFlags
	cmd := &cobra.Command{
		Use:   "rotate NAME... | -l selector | --all",
		Short: "Rotate signing secrets, make-before-break, and wait until each is confirmed",
		Long: `rotate asks the manager to rotate the signing secret of each subscription (it sets the
annotation hookwarden.io/rotate-requested-at) and follows status until the manager reports it
handled (status.lastHandledRotateAt equals the request) and Ready again. The manager rotates
make-before-break: on GitHub a new secret is set on the same hook, stored first as pending so the
receiver accepts old and new until GitHub has it; on Stripe a new endpoint is created, both
secrets are accepted, and the old endpoint is deleted once the new one is current. The manager
paces its requests by the provider's rate limits.

Name the subscriptions (NAME..., or -l); --all acts on every one of the namespace (with -A: of
the cluster). --dry-run prints what would be asked of which, and asks nothing. A subscription
that is suspended or stalled will not rotate without a human: it is reported at once and not
waited on; the others are followed to their end, and the table says each one's outcome (exit 1
when any did not rotate).

Resumable: the subscriptions of one run are one batch, asked with one value. Run again after an
interruption or --timeout (exit 4), it resumes that batch: a subscription whose request is
still pending is followed, not asked again, and one that has handled the batch's request is
not rotated again. The batch is recognised by a request still pending; when none is (every
subscription had rotated before the interruption), name it with --requested-at VALUE, the
value the interrupted run printed, or the command starts a new rotation.`,
		Example: `  hookwarden rotate -n shop -l team=payments
  hookwarden rotate orders refunds --timeout 10m
  hookwarden rotate -n shop --all --dry-run`,
		Args:              cobra.ArbitraryArgs,
		ValidArgsFunction: g.completeSubscriptions(true),
		RunE:              func(cmd *cobra.Command, args []string) error { return g.runRotate(cmd, args, f) },
	}
	f.add(cmd)
	return cmd
}

type rotateResult struct {
	Subscription string `json:"subscription"`
	Before       string `json:"before"`
	After        string `json:"after"`
	RequestedAt  string `json:"requestedAt"`
	Resumed      bool   `json:"resumed,omitempty"`
	// Outcome: rotated, pending (the command timed out or was interrupted), or why the
	// subscription will not rotate without a human (suspended, stalled).
	Outcome string `json:"outcome"`
}

func (g *globals) runRotate(cmd *cobra.Command, args []string, f followFlags) error {
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
		requested[i], handled[i] = subs[i].Annotations[hookv1.AnnotationRotateRequestedAt], subs[i].Status.LastHandledRotateAt
	}
	batch, items := g.planBatch(subs, requested, handled, f.requestedAt)
	if err := g.ask(ctx, cmd, c, items, hookv1.AnnotationRotateRequestedAt, "rotation", f.dryRun); err != nil || f.dryRun {
		return err
	}
	results := make([]rotateResult, len(items))
	for i, it := range items {
		results[i] = rotateResult{Subscription: key(it.sub), Before: it.sub.Status.EndpointID, RequestedAt: it.value, Resumed: it.action != requestAsk, Outcome: "pending"}
	}
	done := 0
	var stuck []string
	ferr := g.followAll(ctx, items, f.interval, func(ctx context.Context, it batchItem) (verdict, error) {
		live := &hookv1.WebhookSubscription{}
		if err := c.client.Get(ctx, client.ObjectKeyFromObject(it.sub), live); err != nil {
			return verdict{}, err
		}
		res := &results[it.index]
		if live.Status.LastHandledRotateAt == it.value && readyNow(live) {
			done++
			res.After, res.Outcome = live.Status.EndpointID, "rotated"
			g.progress(cmd.ErrOrStderr(), "rotated %d/%d: %s (%s)", done, len(items), key(live), live.Status.EndpointID)
			return verdict{done: true}, nil
		}
		if why := stuckOn(live); why != "" {
			res.Outcome = why
			stuck = append(stuck, key(live)+" "+why)
			g.progress(cmd.ErrOrStderr(), "%s: %s: not waited on", key(live), why)
			return verdict{stuck: why}, nil
		}
		return verdict{}, nil
	})
	if err := g.print(cmd.OutOrStdout(), results, func(t *table) {
		t.header("SUBSCRIPTION", "BEFORE", "AFTER", "REQUESTED-AT", "OUTCOME")
		for _, r := range results {
			t.row(r.Subscription, dash(r.Before), dash(r.After), r.RequestedAt, r.Outcome)
		}
	}); err != nil {
		return err
	}
	if ferr != nil {
		return fmt.Errorf("%w (%d of %d rotated; this batch is --requested-at %s)", ferr, done, len(items), batch)
	}
	return stuckError(stuck, len(items), "rotations")
}

func readyNow(s *hookv1.WebhookSubscription) bool {
	c := meta.FindStatusCondition(s.Status.Conditions, hookv1.ConditionReady)
	return c != nil && c.Status == metav1.ConditionTrue && s.Status.ObservedGeneration == s.Generation
}
