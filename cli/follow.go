package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
)

// rotate and recover ask the manager for something through an annotation and follow status
// until each subscription has handled it.

// followFlags are the flags of the commands that ask the manager for something and follow
// status until it is done (rotate, recover).
type followFlags struct {
	selector    string
	all         bool
	dryRun      bool
	interval    time.Duration
	requestedAt string
}

func (f *followFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVarP(&f.selector, "selector", "l", "", "label selector")
	cmd.Flags().BoolVar(&f.all, "all", false, "act on every subscription of the namespace (with -A: of the cluster); without a NAME or -l this is required")
	cmd.Flags().BoolVar(&f.dryRun, "dry-run", false, "print what would be asked of which subscription, and ask nothing")
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

func (a requestAction) String() string {
	switch a {
	case requestFollow:
		return "follow (pending)"
	case requestHandled:
		return "skip (handled)"
	}
	return "ask"
}

// selectSubscriptions are the named subscriptions, those the selector matches, or, with --all,
// every one of the namespace (-A: of the cluster). Naming none of these is bad input: a command
// that changes every subscription is not one a typo should run.
func (g *globals) selectSubscriptions(ctx context.Context, c *cluster, args []string, f followFlags) ([]hookv1.WebhookSubscription, error) {
	switch {
	case len(args) > 0 && (f.selector != "" || f.all):
		return nil, usageError("NAME, -l and --all exclude each other")
	case f.selector != "" && f.all:
		return nil, usageError("-l and --all exclude each other")
	case len(args) > 0 && g.allNamespaces:
		return nil, usageError("a subscription cannot be named across all namespaces (-A): name it with -n")
	case len(args) == 0 && f.selector == "" && !f.all:
		where := "namespace " + c.namespace
		if g.allNamespaces {
			where = "every namespace"
		}
		return nil, usageError("name the subscriptions (NAME..., or -l selector), or pass --all to act on every subscription in %s", where)
	case len(args) == 0:
		subs, where, err := g.listSubscriptions(ctx, c, f.selector)
		if err == nil && len(subs) == 0 {
			err = usageError("no WebhookSubscription in %s", where)
		}
		return subs, err
	}
	subs := make([]hookv1.WebhookSubscription, 0, len(args))
	seen := map[string]bool{}
	for _, name := range args {
		if seen[name] {
			continue
		}
		seen[name] = true
		var sub hookv1.WebhookSubscription
		if err := c.client.Get(ctx, nsName(c.namespace, name), &sub); err != nil {
			return nil, notFoundIsUsage(kubeError("reading WebhookSubscription "+c.namespace+"/"+name, err), err)
		}
		subs = append(subs, sub)
	}
	return subs, nil
}

// batchItem is one subscription's part of a batch: the request value it follows and what this
// run does about it.
type batchItem struct {
	index  int // in the selection
	sub    *hookv1.WebhookSubscription
	value  string
	action requestAction
}

// planBatch decides, for subs whose annotation and handled value are requested and handled,
// the batch's value and what to do with each.
func (g *globals) planBatch(subs []hookv1.WebhookSubscription, requested, handled []string, flag string) (string, []batchItem) {
	batch := batchValue(flag, g.opts.Now().UTC().Format(time.RFC3339Nano), requested, handled)
	items := make([]batchItem, len(subs))
	for i := range subs {
		items[i] = batchItem{index: i, sub: &subs[i], value: batch, action: actionFor(batch, requested[i], handled[i])}
		if items[i].action == requestFollow {
			items[i].value = requested[i]
		}
	}
	return batch, items
}

// ask sets annotation to the batch's value on each item to be asked, and says on stderr what it
// does with each (what: "rotation", "recovery"); with dryRun it only says so, and prints the
// table of what would happen.
func (g *globals) ask(ctx context.Context, cmd *cobra.Command, c *cluster, items []batchItem, annotation, what string, dryRun bool) error {
	if dryRun {
		rows := make([]map[string]string, len(items))
		for i, it := range items {
			rows[i] = map[string]string{"subscription": key(it.sub), "action": it.action.String(), "requestedAt": it.value}
		}
		return g.print(cmd.OutOrStdout(), rows, func(t *table) {
			t.header("SUBSCRIPTION", "WOULD", "REQUESTED-AT")
			for _, r := range rows {
				t.row(r["subscription"], r["action"], r["requestedAt"])
			}
		})
	}
	for _, it := range items {
		s := it.sub
		switch it.action {
		case requestFollow:
			g.progress(cmd.ErrOrStderr(), "%s: a %s requested at %s is still pending: following it", key(s), what, it.value)
			continue
		case requestHandled:
			g.progress(cmd.ErrOrStderr(), "%s: handled the %s of this batch (%s) before: not asked again", key(s), what, it.value)
			continue
		}
		patch := client.MergeFrom(s.DeepCopy())
		if s.Annotations == nil {
			s.Annotations = map[string]string{}
		}
		s.Annotations[annotation] = it.value
		if err := c.client.Patch(ctx, s, patch); err != nil {
			return kubeError("requesting a "+what+" of "+key(s), err)
		}
		g.progress(cmd.ErrOrStderr(), "%s: %s requested", key(s), what)
	}
	return nil
}

// verdict is what following a subscription found: still pending, done, or stuck (it will not
// handle the request without a human: stalled, suspended).
type verdict struct {
	done  bool
	stuck string
}

// stuckOn says why live will not handle a request: it is suspended, or stalled on its current
// generation ("" when neither).
func stuckOn(live *hookv1.WebhookSubscription) string {
	if live.Spec.Suspend {
		return "suspended (spec.suspend): the manager does nothing for it until it is resumed"
	}
	if st := meta.FindStatusCondition(live.Status.Conditions, hookv1.ConditionStalled); st != nil && st.Status == metav1.ConditionTrue && st.ObservedGeneration == live.Generation {
		return fmt.Sprintf("stalled: %s: %s", st.Reason, st.Message)
	}
	return ""
}

// followAll reads every item each interval until judge has a verdict on each; a stuck one is
// reported at once and not waited on. It ends when all have ended (stuck ones included), or
// with ctx's error.
func (g *globals) followAll(ctx context.Context, items []batchItem, interval time.Duration, judge func(context.Context, batchItem) (verdict, error)) error {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	ended := make([]bool, len(items))
	left := len(items)
	for {
		for i, it := range items {
			if ended[i] {
				continue
			}
			v, err := judge(ctx, it)
			switch {
			case err != nil && (apierrors.IsNotFound(err) || apierrors.IsForbidden(err)):
				return kubeError("reading "+key(it.sub), err)
			case err != nil:
				// Transient (or the deadline's own client-side wait): read again at the next tick.
			case v.done || v.stuck != "":
				ended[i] = true
				left--
			}
		}
		if left == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// stuckError ends a command some of whose subscriptions are stuck (exit 1), after the table.
func stuckError(stuck []string, n int, what string) error {
	if len(stuck) == 0 {
		return nil
	}
	return &exitError{code: ExitError, err: fmt.Errorf("%d of %d %s did not end: %s", len(stuck), n, what, strings.Join(stuck, "; "))}
}
