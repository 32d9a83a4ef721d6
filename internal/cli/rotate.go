package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
)

// followFlags are the flags of the commands that ask the manager for something and follow
// status until it is done (rotate, recover).
type followFlags struct {
	selector    string
	interval    time.Duration
	requestedAt string
}

func (f *followFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVarP(&f.selector, "selector", "l", "", "label selector")
	cmd.Flags().DurationVar(&f.interval, "poll-interval", time.Second, "how often status is read")
	cmd.Flags().StringVar(&f.requestedAt, "requested-at", "", "the request to resume (the value an interrupted run printed): subscriptions that handled it are skipped, the others asked with it")
}

// A run of rotate or recover is one batch: every subscription it selects is asked with one
// value of the request annotation. A rerun resumes the batch of an interrupted run instead of
// asking again what already handled it.
type requestAction int

const (
	// requestAsk: the subscription is asked with the batch's value.
	requestAsk requestAction = iota
	// requestFollow: its own request is still pending: followed, not made again.
	requestFollow
	// requestHandled: it handled the batch's request already: not asked again.
	requestHandled
)

// batchValue is the batch a run belongs to: the one --requested-at names; else that of a
// request still pending on a selected subscription (the run that made it was interrupted;
// the newest when there are several); else a new one (now). requested and handled are each
// subscription's annotation and the value its status says it handled.
func batchValue(flag, now string, requested, handled []string) string {
	if flag != "" {
		return flag
	}
	batch := ""
	for i, v := range requested {
		if v != "" && v != handled[i] && (batch == "" || newer(v, batch)) {
			batch = v
		}
	}
	if batch == "" {
		return now
	}
	return batch
}

// newer reports whether request value a is later than b (RFC 3339 times, as this command
// writes them; other values compare as strings).
func newer(a, b string) bool {
	ta, errA := time.Parse(time.RFC3339Nano, a)
	tb, errB := time.Parse(time.RFC3339Nano, b)
	if errA != nil || errB != nil {
		return a > b
	}
	return ta.After(tb)
}

// actionFor says what a run of batch does with a subscription whose annotation is requested
// and whose status handled handled.
func actionFor(batch, requested, handled string) requestAction {
	switch {
	case requested != "" && requested != handled:
		return requestFollow
	case requested == batch && handled == batch:
		return requestHandled
	}
	return requestAsk
}

func newRotateCommand(g *globals) *cobra.Command {
	var f followFlags
	cmd := &cobra.Command{
		Use:   "rotate [NAME] [-l selector]",
		Short: "Rotate signing secrets, make-before-break, and wait until each is confirmed",
		Long: `rotate asks the manager to rotate the signing secret of each subscription (it sets the
annotation hookwarden.io/rotate-requested-at) and follows status until the manager reports it
handled (status.lastHandledRotateAt equals the request) and Ready again. The manager rotates
make-before-break: on GitHub a new secret is set on the same hook, stored first as pending so the
receiver accepts old and new until GitHub has it; on Stripe a new endpoint is created, both
secrets are accepted, and the old endpoint is deleted once the new one is current. The manager
paces its requests by the provider's rate limits.

Resumable: the subscriptions of one run are one batch, asked with one value. Run again after an
interruption or --timeout (exit 4), it resumes that batch: a subscription whose request is
still pending is followed, not asked again, and one that has handled the batch's request is
not rotated again. The batch is recognised by a request still pending; when none is (every
subscription had rotated before the interruption), name it with --requested-at VALUE, the
value the interrupted run printed, or the command starts a new rotation.`,
		Example: `  hookwarden rotate -n shop -l team=payments
  hookwarden rotate orders --timeout 10m`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return g.runRotate(cmd, args, f) },
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
}

func (g *globals) runRotate(cmd *cobra.Command, args []string, f followFlags) error {
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
	results := make([]rotateResult, len(subs))
	requested, handled := make([]string, len(subs)), make([]string, len(subs))
	for i := range subs {
		requested[i], handled[i] = subs[i].Annotations[hookv1.AnnotationRotateRequestedAt], subs[i].Status.LastHandledRotateAt
	}
	batch := batchValue(f.requestedAt, g.opts.Now().UTC().Format(time.RFC3339Nano), requested, handled)
	for i := range subs {
		s := &subs[i]
		res := rotateResult{Subscription: key(s), Before: s.Status.EndpointID}
		switch actionFor(batch, requested[i], handled[i]) {
		case requestFollow:
			res.RequestedAt, res.Resumed = requested[i], true
			g.progress(cmd.ErrOrStderr(), "%s: a rotation requested at %s is still pending: following it", key(s), requested[i])
		case requestHandled:
			res.RequestedAt, res.Resumed = batch, true
			g.progress(cmd.ErrOrStderr(), "%s: rotated before in this batch (%s): not rotated again", key(s), batch)
		default:
			patch := client.MergeFrom(s.DeepCopy())
			if s.Annotations == nil {
				s.Annotations = map[string]string{}
			}
			s.Annotations[hookv1.AnnotationRotateRequestedAt] = batch
			if err := c.client.Patch(ctx, s, patch); err != nil {
				return kubeError("requesting a rotation of "+key(s), err)
			}
			res.RequestedAt = batch
			g.progress(cmd.ErrOrStderr(), "%s: rotation requested", key(s))
		}
		results[i] = res
	}
	done := 0
	for i := range subs {
		s := &subs[i]
		after, err := g.follow(ctx, c, s, f.interval, func(live *hookv1.WebhookSubscription) bool {
			return live.Status.LastHandledRotateAt == results[i].RequestedAt && readyNow(live)
		})
		if err != nil {
			return fmt.Errorf("%s: %w (%d of %d rotated; this batch is --requested-at %s)", key(s), err, done, len(subs), batch)
		}
		done++
		results[i].After = after.Status.EndpointID
		g.progress(cmd.ErrOrStderr(), "rotated %d/%d: %s (%s)", done, len(subs), key(s), after.Status.EndpointID)
	}
	return g.print(cmd.OutOrStdout(), results, func(t *table) {
		t.header("SUBSCRIPTION", "BEFORE", "AFTER", "REQUESTED-AT")
		for _, r := range results {
			t.row(r.Subscription, dash(r.Before), dash(r.After), r.RequestedAt)
		}
	})
}

// selectSubscriptions is the named subscription or those the selector matches.
func (g *globals) selectSubscriptions(ctx context.Context, c *cluster, args []string, selector string) ([]hookv1.WebhookSubscription, error) {
	if len(args) == 0 {
		return g.listSubscriptions(ctx, c, selector)
	}
	if selector != "" {
		return nil, usageError("a NAME and -l exclude each other")
	}
	var sub hookv1.WebhookSubscription
	if err := c.client.Get(ctx, nsName(c.namespace, args[0]), &sub); err != nil {
		return nil, notFoundIsUsage(kubeError("reading WebhookSubscription "+c.namespace+"/"+args[0], err), err)
	}
	return []hookv1.WebhookSubscription{sub}, nil
}

// follow reads sub until done says so (or ctx ends), reporting a stall once.
func (g *globals) follow(ctx context.Context, c *cluster, sub *hookv1.WebhookSubscription, interval time.Duration, done func(*hookv1.WebhookSubscription) bool) (*hookv1.WebhookSubscription, error) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		live := &hookv1.WebhookSubscription{}
		err := c.client.Get(ctx, client.ObjectKeyFromObject(sub), live)
		switch {
		case err != nil && (apierrors.IsNotFound(err) || apierrors.IsForbidden(err)):
			return nil, kubeError("reading "+key(sub), err)
		case err != nil:
			// Transient (or the deadline's own client-side wait): read again at the next tick.
		case done(live):
			return live, nil
		}
		if st := meta.FindStatusCondition(live.Status.Conditions, hookv1.ConditionStalled); err == nil && st != nil && st.Status == metav1.ConditionTrue && st.ObservedGeneration == live.Generation {
			return nil, fmt.Errorf("stalled: %s: %s", st.Reason, st.Message)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-tick.C:
		}
	}
}

func readyNow(s *hookv1.WebhookSubscription) bool {
	c := meta.FindStatusCondition(s.Status.Conditions, hookv1.ConditionReady)
	return c != nil && c.Status == metav1.ConditionTrue && s.Status.ObservedGeneration == s.Generation
}
