package cli

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
)

type statusFlags struct {
	selector    string
	metricsURL  string
	tokenFile   string
	insecureTLS bool
}

func newStatusCommand(g *globals) *cobra.Command {
	var f statusFlags
	cmd := &cobra.Command{
		Use:   "status [NAME] [-l selector]",
		Short: "Show subscriptions as a tree: registration, conditions, the receiver's figures",
		Long: `status prints each subscription, the provider registration it keeps (id, URL), its
conditions and, with --receiver-metrics, the bundled receiver's figures for its route read from
the receiver's /metrics: deliveries accepted and duplicates for the route
(hookwarden_receiver_requests_total), and the receiver-wide queue depth and dead letters
(hookwarden_receiver_queue_depth, hookwarden_receiver_dead_letters_total: the receiver does not
count those per route).`,
		Example: `  hookwarden status -n shop
  hookwarden status orders --receiver-metrics https://receiver.hookwarden-system:8443/metrics --receiver-token-file token`,
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: g.completeSubscriptions(false),
		RunE:              func(cmd *cobra.Command, args []string) error { return g.runStatus(cmd, args, f) },
	}
	cmd.Flags().StringVarP(&f.selector, "selector", "l", "", "label selector")
	cmd.Flags().StringVar(&f.metricsURL, "receiver-metrics", "", "URL of the receiver's /metrics (optional)")
	cmd.Flags().StringVar(&f.tokenFile, "receiver-token-file", "", "file with a bearer token for --receiver-metrics (a secure metrics endpoint checks it with a TokenReview)")
	cmd.Flags().BoolVar(&f.insecureTLS, "receiver-insecure-skip-tls-verify", false, "do not check the receiver's certificate (its default one is self-signed)")
	return cmd
}

// subscriptionStatus is one subscription's branch of the tree, as -o yaml|json prints it.
type subscriptionStatus struct {
	Subscription string `json:"subscription"`
	Provider     string `json:"provider"`
	// Surface is the kind of registration where the provider has several (a Stripe v2
	// destination: v2/thin or v2/snapshot; a GitHub App's webhook: app).
	Surface      string             `json:"surface,omitempty"`
	Registration *registrationRef   `json:"registration,omitempty"`
	Conditions   []metav1.Condition `json:"conditions,omitempty"`
	Receiver     *routeFigures      `json:"receiver,omitempty"`
}

type registrationRef struct {
	ID  string `json:"id"`
	URL string `json:"url"`
}

// routeFigures are the receiver's counts for one route, and its receiver-wide ones.
type routeFigures struct {
	Accepted   int64 `json:"accepted"`
	Duplicates int64 `json:"duplicates"`
	// Rejected counts the route's deliveries refused (bad signature, too old, ...).
	Rejected int64 `json:"rejected"`
	// Pending and DeadLetters are the receiver's, over all routes.
	Pending     int64 `json:"receiverPending"`
	DeadLetters int64 `json:"receiverDeadLetters"`
}

func (g *globals) runStatus(cmd *cobra.Command, args []string, f statusFlags) error {
	ctx, cancel := g.withTimeout(cmd.Context())
	defer cancel()
	c, err := g.cluster()
	if err != nil {
		return err
	}
	var subs []hookv1.WebhookSubscription
	if len(args) == 1 {
		var sub hookv1.WebhookSubscription
		if err := c.client.Get(ctx, nsName(c.namespace, args[0]), &sub); err != nil {
			return notFoundIsUsage(kubeError("reading WebhookSubscription "+c.namespace+"/"+args[0], err), err)
		}
		subs = []hookv1.WebhookSubscription{sub}
	} else if subs, err = g.listOrNone(ctx, cmd.ErrOrStderr(), c, f.selector); err != nil || subs == nil {
		return err
	}
	var families map[string]*dto.MetricFamily
	if f.metricsURL != "" {
		g.progress(cmd.ErrOrStderr(), "reading %s", f.metricsURL)
		if families, err = scrape(ctx, f); err != nil {
			return err
		}
	}
	out := make([]subscriptionStatus, 0, len(subs))
	for i := range subs {
		s := &subs[i]
		st := subscriptionStatus{Subscription: key(s), Provider: string(s.Spec.Provider.Type), Surface: surface(&s.Spec.Provider), Conditions: s.Status.Conditions}
		if s.Status.EndpointID != "" {
			st.Registration = &registrationRef{ID: s.Status.EndpointID, URL: s.Status.URL}
		}
		if families != nil {
			st.Receiver = figuresFor(families, s.Namespace, s.Name)
		}
		out = append(out, st)
	}
	if g.output == "" || g.output == "table" {
		return writeTree(cmd.OutOrStdout(), out)
	}
	return g.print(cmd.OutOrStdout(), out, nil)
}

func writeTree(w io.Writer, subs []subscriptionStatus) error {
	var b strings.Builder
	for _, s := range subs {
		ready := "Ready=Unknown"
		for _, c := range s.Conditions {
			if c.Type == hookv1.ConditionReady {
				ready = fmt.Sprintf("Ready=%s (%s)", c.Status, c.Reason)
			}
		}
		fmt.Fprintf(&b, "%s  %s  %s\n", s.Subscription, providerColumn(s.Provider, s.Surface), ready)
		branches := []string{}
		if s.Registration != nil {
			branches = append(branches, fmt.Sprintf("registration %s  %s", s.Registration.ID, s.Registration.URL))
		} else {
			branches = append(branches, "registration (none recorded)")
		}
		var conds []string
		for _, c := range s.Conditions {
			conds = append(conds, fmt.Sprintf("%s=%s  %s  %s", c.Type, c.Status, c.Reason, c.Message))
		}
		if s.Receiver != nil {
			r := s.Receiver
			branches = append(branches, "conditions", fmt.Sprintf("receiver  accepted %d  duplicates %d  rejected %d  (all routes: pending %d, dead letters %d)", r.Accepted, r.Duplicates, r.Rejected, r.Pending, r.DeadLetters))
		} else {
			branches = append(branches, "conditions")
		}
		for i, br := range branches {
			last := i == len(branches)-1
			fmt.Fprintf(&b, "%s%s\n", pick(last, "└─ ", "├─ "), br)
			if br == "conditions" {
				for j, c := range conds {
					fmt.Fprintf(&b, "%s%s%s\n", pick(last, "   ", "│  "), pick(j == len(conds)-1, "└─ ", "├─ "), c)
				}
			}
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func pick(cond bool, a, b string) string {
	if cond {
		return a
	}
	return b
}

// scrape reads the receiver's metrics.
func scrape(ctx context.Context, f statusFlags) (map[string]*dto.MetricFamily, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.metricsURL, nil)
	if err != nil {
		return nil, usageError("--receiver-metrics: %v", err)
	}
	if f.tokenFile != "" {
		tok, err := os.ReadFile(f.tokenFile)
		if err != nil {
			return nil, usageError("--receiver-token-file: %v", err)
		}
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
	}
	hc := &http.Client{} // bounded by --timeout (ctx), the one timeout of every command
	if f.insecureTLS {
		hc.Transport = &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec // asked for by flag
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("reading the receiver's metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("reading the receiver's metrics: %s answered %s", f.metricsURL, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("reading the receiver's metrics: %w", err)
	}
	return fams, nil
}

// figuresFor sums the route's series of the receiver's metrics.
func figuresFor(fams map[string]*dto.MetricFamily, namespace, name string) *routeFigures {
	out := &routeFigures{}
	if f := fams["hookwarden_receiver_requests_total"]; f != nil {
		for _, m := range f.Metric {
			l := labelsOf(m)
			if l["namespace"] != namespace || l["name"] != name {
				continue
			}
			v := int64(m.GetCounter().GetValue())
			switch l["result"] {
			case "accepted":
				out.Accepted += v
			case "duplicate":
				out.Duplicates += v
			case "ping":
			default:
				out.Rejected += v
			}
		}
	}
	if f := fams["hookwarden_receiver_queue_depth"]; f != nil && len(f.Metric) > 0 {
		out.Pending = int64(f.Metric[0].GetGauge().GetValue())
	}
	if f := fams["hookwarden_receiver_dead_letters_total"]; f != nil && len(f.Metric) > 0 {
		out.DeadLetters = int64(f.Metric[0].GetCounter().GetValue())
	}
	return out
}

func labelsOf(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.Label {
		out[l.GetName()] = l.GetValue()
	}
	return out
}
