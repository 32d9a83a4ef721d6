package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hookwarden/hookwarden/account"
	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/decide"
	"github.com/hookwarden/hookwarden/providers"
)

type planFlags struct {
	files        []string
	selector     string
	clusterName  string
	receiverBase string
}

func newPlanCommand(g *globals) *cobra.Command {
	var f planFlags
	cmd := &cobra.Command{
		Use:   "plan [-f manifests.yaml | -l selector]",
		Short: "Show what the manager would change, without changing anything",
		Long: `plan runs the manager's own observe and plan for each subscription (a fresh, read-only list
of the provider account, the signing Secret) and prints the decision and the steps: create,
update (with the fields that change), adopt, prune (which twin, and why), recover the signing
secret (by replaying the create, reading it back, or a rotation), or nothing.

With -f the subscriptions are the manifests in the file (what a merge would apply; a
subscription already in the cluster is planned with its recorded status); without it, the
subscriptions in the cluster (-n, -A, -l). The file may hold any kinds (kustomize build
output, v1 Lists, import's output): its Secrets are read before the cluster's (a credential,
the signing Secret import --secret wrote); other kinds are not planned.

Nothing is written, to the provider or to the cluster. The provider credentials are read from
the Secrets the specs name (spec.provider.credentialsRef), as the manager reads them: the
caller needs get on those Secrets and on the signing Secrets.

The manager's settings a plan depends on (its --cluster-name and --receiver-base-url) are
read from the subscriptions' status (status.manager, which the manager writes): the
subscription's own, or for a new one those the cluster's subscriptions publish. The flags
override them (with a warning when they differ).

Exit code 2 when any subscription has pending steps (as terraform plan -detailed-exitcode); 5
when one cannot go on as it is (a conflict or a stall, which the manager would not resolve
alone); 1 when one could not be planned.`,
		Example: `  hookwarden plan -f subscriptions.yaml
  hookwarden plan -n shop -l team=payments -o yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return g.runPlan(cmd, f) },
	}
	cmd.Flags().StringSliceVarP(&f.files, "filename", "f", nil, "manifest file with WebhookSubscriptions (- for stdin); repeatable")
	cmd.Flags().StringVarP(&f.selector, "selector", "l", "", "label selector of the subscriptions in the cluster to plan")
	cmd.Flags().StringVar(&f.clusterName, "cluster-name", "", "override the manager's --cluster-name (default: what the manager publishes in the subscriptions' status.manager; before it has, its default, the UID of kube-system)")
	cmd.Flags().StringVar(&f.receiverBase, "receiver-base-url", "", "override the manager's --receiver-base-url (default: what the manager publishes in status.manager)")
	return cmd
}

// planResult is one subscription's plan (or why it has none), as -o yaml|json prints it.
type planResult struct {
	Subscription string `json:"subscription"`
	InCluster    bool   `json:"inCluster"`
	// Surface is the kind of registration where the provider has several (status's).
	Surface string          `json:"surface,omitempty"`
	Plan    *decide.Preview `json:"plan,omitempty"`
	Error   string          `json:"error,omitempty"`
}

// readOnly hides a client's writes: plan gives the reconciler nothing it could write with.
type readOnly struct{ client.Reader }

func (g *globals) runPlan(cmd *cobra.Command, f planFlags) error {
	if len(f.files) > 0 && f.selector != "" {
		return usageError("-f and -l exclude each other")
	}
	ctx, cancel := g.withTimeout(cmd.Context())
	defer cancel()
	c, err := g.cluster()
	if err != nil {
		return err
	}
	subs, inCluster, secrets, err := g.planTargets(ctx, cmd, c, f)
	if err != nil {
		return err
	}
	if len(subs) == 0 { // none in the cluster (said): -f holds at least one
		return nil
	}
	all, err := g.clusterSubscriptions(ctx, c)
	if err != nil {
		return err
	}
	planners := &planners{g: g, ctx: ctx, c: c, flags: f, all: all, published: publishedSettings(all),
		reader: readOnly{newWithSecrets(c.client, secrets)}, accounts: account.NewAccounts(g.opts.Registry, account.AccountOptions{Now: g.opts.Now})}
	lists := accountLists{}
	results := make([]planResult, 0, len(subs))
	pending, failed, blocked := false, 0, 0
	for i := range subs {
		sub := &subs[i]
		res := planResult{Subscription: key(sub), InCluster: inCluster[i], Surface: surface(&sub.Spec.Provider)}
		r, err := planners.forSubscription(cmd, sub)
		if err != nil {
			return err
		}
		p, err := g.preview(ctx, cmd, r, sub, all, lists, fmt.Sprintf("%d/%d", i+1, len(subs)))
		if ctx.Err() != nil {
			return ctx.Err()
		}
		switch {
		case err != nil:
			res.Error = oneLine(err)
			failed++
		case p.Conflict != "" || p.Stall != "":
			res.Plan = &p
			blocked++
		default:
			res.Plan = &p
			pending = pending || p.Changes()
		}
		results = append(results, res)
	}
	if err := g.print(cmd.OutOrStdout(), results, func(t *table) { planTable(t, results) }); err != nil {
		return err
	}
	switch {
	case failed > 0:
		return &exitError{code: ExitError, err: fmt.Errorf("%d of %d subscriptions could not be planned", failed, len(subs))}
	case blocked > 0:
		return &exitError{code: ExitBlocked, err: fmt.Errorf("%d of %d subscriptions cannot go on as they are (a conflict or a stall: see DETAIL)", blocked, len(subs))}
	case pending:
		return pendingChanges
	}
	return nil
}

// clusterSubscriptions are the subscriptions of every namespace (those of the namespace alone
// when the caller may not list them all): what they record is theirs (a plan never adopts it),
// and their status publishes the manager's settings.
func (g *globals) clusterSubscriptions(ctx context.Context, c *cluster) ([]hookv1.WebhookSubscription, error) {
	var list hookv1.WebhookSubscriptionList
	err := c.client.List(ctx, &list)
	if apierrors.IsForbidden(err) {
		err = c.client.List(ctx, &list, client.InNamespace(c.namespace))
	}
	if err != nil && !isCRDMissing(err) {
		return nil, kubeError("listing WebhookSubscriptions", err)
	}
	return list.Items, nil
}

// publishedSettings are the manager's settings most subscriptions publish (status.manager;
// nil when none does).
func publishedSettings(subs []hookv1.WebhookSubscription) *hookv1.ManagerSettings {
	count := map[hookv1.ManagerSettings]int{}
	var best *hookv1.ManagerSettings
	for i := range subs {
		s := subs[i].Status.Manager
		if s == nil {
			continue
		}
		count[*s]++
		if best == nil || count[*s] > count[*best] {
			best = s
		}
	}
	return best
}

// planners make the reconciler each subscription is planned with: with the settings of the
// manager that reconciles it (its status's, else those the cluster's subscriptions publish),
// or the flags where given.
type planners struct {
	g         *globals
	ctx       context.Context
	c         *cluster
	flags     planFlags
	all       []hookv1.WebhookSubscription
	published *hookv1.ManagerSettings
	reader    client.Reader
	accounts  *account.Accounts
	made      map[hookv1.ManagerSettings]*account.Observer
	warned    bool
}

func (p *planners) forSubscription(cmd *cobra.Command, sub *hookv1.WebhookSubscription) (*account.Observer, error) {
	var s hookv1.ManagerSettings
	switch {
	case sub.Status.Manager != nil:
		s = *sub.Status.Manager
	case p.published != nil:
		s = *p.published
	}
	learned := s
	if p.flags.clusterName != "" {
		s.ClusterName = p.flags.clusterName
	}
	if p.flags.receiverBase != "" {
		s.ReceiverBaseURL = p.flags.receiverBase
	}
	if learned.ClusterName != "" && s != learned && !p.warned {
		p.warned = true
		p.g.progress(cmd.ErrOrStderr(), "warning: planning with --cluster-name %q and --receiver-base-url %q; the manager publishes %q and %q (status.manager)", s.ClusterName, s.ReceiverBaseURL, learned.ClusterName, learned.ReceiverBaseURL)
	}
	if s.ClusterName == "" {
		// No manager has published its settings yet: its default, as the manager's.
		name, err := clusterName(p.ctx, p.c, "")
		if err != nil {
			return nil, err
		}
		s.ClusterName = name
	}
	if r, ok := p.made[s]; ok {
		return r, nil
	}
	r := account.NewObserver(p.reader, p.accounts, s.ClusterName, s.ReceiverBaseURL)
	if p.made == nil {
		p.made = map[hookv1.ManagerSettings]*account.Observer{}
	}
	p.made[s] = r
	return r, nil
}

// accountLists are the provider lists a plan run read, one per account, as the manager shares
// one list per account among its subscriptions: subscriptions of one namespace with the same
// spec.provider (credential Secret, API URL, target, profile) are on one account.
type accountLists map[string][]providers.Registration

func accountOf(sub *hookv1.WebhookSubscription) string {
	b, _ := json.Marshal(sub.Spec.Provider)
	return sub.Namespace + "\x00" + string(b)
}

// preview plans one subscription from its account's list (read once per run) and the claims of
// the cluster's subscriptions (all), waiting out provider rate limits as the manager would.
func (g *globals) preview(ctx context.Context, cmd *cobra.Command, r *account.Observer, sub *hookv1.WebhookSubscription, all []hookv1.WebhookSubscription, lists accountLists, nth string) (decide.Preview, error) {
	acct := accountOf(sub)
	for {
		var p decide.Preview
		regs, listed := lists[acct]
		var err error
		if !listed {
			g.progress(cmd.ErrOrStderr(), "planning %s (%s): listing the %s account", key(sub), nth, sub.Spec.Provider.Type)
			regs, _, err = r.ObserveList(ctx, sub)
		} else {
			g.progress(cmd.ErrOrStderr(), "planning %s (%s): from the account's list", key(sub), nth)
		}
		if err == nil {
			lists[acct] = regs
			p, err = r.Preview(ctx, sub, regs, all)
		}
		after, limited := decide.RetryAfter(err)
		if !limited {
			return p, err
		}
		g.progress(cmd.ErrOrStderr(), "%s: %v; waiting %s as the manager would", key(sub), err, after)
		select {
		case <-ctx.Done():
			return p, ctx.Err()
		case <-time.After(after):
		}
	}
}

// planTargets are the subscriptions to plan: the manifests (each with the status and UID of the
// one in the cluster, when it exists) and the Secrets beside them, or the cluster's.
func (g *globals) planTargets(ctx context.Context, cmd *cobra.Command, c *cluster, f planFlags) ([]hookv1.WebhookSubscription, []bool, []corev1.Secret, error) {
	if len(f.files) == 0 {
		subs, err := g.listOrNone(ctx, cmd.ErrOrStderr(), c, f.selector)
		inCluster := make([]bool, len(subs))
		for i := range inCluster {
			inCluster[i] = true
		}
		return subs, inCluster, nil, err
	}
	var subs []hookv1.WebhookSubscription
	var inCluster []bool
	var secrets []corev1.Secret
	for _, path := range f.files {
		got, err := readManifests(path, cmd.InOrStdin(), c.namespace, c.explicitNamespace)
		if err != nil {
			return nil, nil, nil, err
		}
		if got.others > 0 {
			g.progress(cmd.ErrOrStderr(), "%s: %d documents of other kinds are not planned", path, got.others)
		}
		secrets = append(secrets, got.secrets...)
		for _, sub := range got.subs {
			var live hookv1.WebhookSubscription
			err := c.client.Get(ctx, client.ObjectKeyFromObject(&sub), &live)
			switch {
			case apierrors.IsNotFound(err) && !isCRDMissing(err):
				inCluster = append(inCluster, false)
			case err != nil:
				return nil, nil, nil, kubeError("reading WebhookSubscription "+key(&sub), err)
			default:
				// The plan reads what the manager recorded; the spec is the manifest's.
				sub.UID, sub.Status, sub.Generation = live.UID, live.Status, live.Generation
				if !equality.Semantic.DeepEqual(sub.Spec, live.Spec) {
					sub.Generation++
				}
				inCluster = append(inCluster, true)
			}
			subs = append(subs, sub)
		}
	}
	return subs, inCluster, secrets, nil
}

func planTable(t *table, results []planResult) {
	t.header("SUBSCRIPTION", "PROVIDER", "DECISION", "ACTION", "REGISTRATION", "DETAIL")
	for _, res := range results {
		if res.Error != "" {
			t.row(res.Subscription, "-", "error", "-", "-", res.Error)
			continue
		}
		p := res.Plan
		decision := p.Decision
		if p.Keep != nil {
			if p.Adopt {
				decision = "adopt"
			}
		}
		first := true
		row := func(action, reg, detail string) {
			if first {
				t.row(res.Subscription, providerColumn(p.Provider, res.Surface), decision, action, reg, detail)
				first = false
				return
			}
			t.row("", "", "", action, reg, detail)
		}
		switch {
		case p.Stall != "":
			row("-", "-", p.Stall)
		case p.Conflict != "":
			row("-", "-", p.Conflict)
		case len(p.Steps) == 0:
			id := ""
			if p.Keep != nil {
				id = p.Keep.ID
			}
			row("nothing", id, "registration matches the spec")
		}
		for _, s := range p.Steps {
			detail := s.Description
			if s.Secret == "rotation" {
				detail += "; signing secret by rotation"
			}
			row(s.Action, dash(s.Registration), detail)
			for _, ch := range s.Changes {
				row("", "", "  "+changeLine(ch))
			}
		}
		for _, r := range p.KeptTwins {
			row("report", r.ID, "twin kept (policies.twins: Keep): "+r.URL)
		}
		for _, r := range p.NearTwins {
			row("report", r.ID, "near twin left alone (differs by a slash or the scheme): "+r.URL)
		}
		for _, r := range p.Unproven {
			row("report", r.ID, "cannot be proven ours, left alone: "+r.URL)
		}
		for _, r := range p.Unfit {
			row("report", r.ID, "foreign registration the provider's client cannot read, skipped")
		}
		if p.ReadOnlyDrift != "" {
			row("report", p.Keep.ID, p.ReadOnlyDrift)
		}
	}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// changeLine says how a field changes; events, a set, as what is added and removed.
func changeLine(ch decide.FieldChange) string {
	if ch.Field != "events" {
		return fmt.Sprintf("%s: %s -> %s", ch.Field, ch.From, ch.To)
	}
	from, to := strings.Split(ch.From, ","), strings.Split(ch.To, ",")
	var parts []string
	for _, e := range to {
		if e != "" && !slices.Contains(from, e) {
			parts = append(parts, "+"+e)
		}
	}
	for _, e := range from {
		if e != "" && !slices.Contains(to, e) {
			parts = append(parts, "-"+e)
		}
	}
	return "events: " + strings.Join(parts, " ")
}
