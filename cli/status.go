package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
)

type statusFlags struct {
	selector   string
	metricsURL string
	// figures: read the receiver's figures from the receiver found as deadletters finds it.
	figures bool
	recv    receiverFlags
}

// wantsFigures reports whether the receiver's figures are asked for: by a URL of its /metrics,
// or by --receiver-figures, --receiver or --receiver-service.
func (f statusFlags) wantsFigures() bool {
	return f.metricsURL != "" || f.figures || f.recv.url != "" || f.recv.service != ""
}

func newStatusCommand(g *globals) *cobra.Command {
	var f statusFlags
	cmd := &cobra.Command{
		Use:   "status [NAME] [-l selector]",
		Short: "Show subscriptions as a tree: registration, conditions, the receiver's figures",
		Long: `status prints each subscription, the provider registration it keeps (id, URL), its
conditions and, with --receiver-figures, the bundled receiver's figures for its route read from
the receiver's /metrics: deliveries accepted, duplicates and refused for the route
(hookwarden_receiver_requests_total), each sink's backlog and the age of its oldest waiting event
(hookwarden_receiver_sink_queue_depth, hookwarden_receiver_sink_oldest_pending_seconds), and the
receiver-wide queue depth and dead letters (hookwarden_receiver_queue_depth,
hookwarden_receiver_dead_letters_total: the receiver does not count those per route).

The receiver is found as deadletters finds it: its Service through the API server (label
` + receiverLabel + `; --receiver-service where there are several) and a port-forward to a
ready pod, sending the kubeconfig's own bearer token or --receiver-token-file's; --receiver URL
(its metrics listener) or --receiver-metrics URL (its /metrics) reach it directly.`,
		Example: `  hookwarden status -n shop
  hookwarden status orders --receiver-figures
  hookwarden status orders --receiver-metrics https://localhost:9090/metrics --receiver-token-file token --receiver-insecure-skip-tls-verify`,
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: g.completeSubscriptions(false),
		RunE:              func(cmd *cobra.Command, args []string) error { return g.runStatus(cmd, args, f) },
	}
	cmd.Flags().StringVarP(&f.selector, "selector", "l", "", "label selector")
	cmd.Flags().BoolVar(&f.figures, "receiver-figures", false, "show the receiver's figures for each subscription (the receiver found through the API server, or --receiver)")
	cmd.Flags().StringVar(&f.metricsURL, "receiver-metrics", "", "URL of the receiver's /metrics: its figures, read there directly")
	f.recv.bind(cmd)
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
	// Sinks are the route's sinks' backlogs, by name.
	Sinks []sinkFigures `json:"sinks,omitempty"`
	// Pending and DeadLetters are the receiver's, over all routes.
	Pending     int64 `json:"receiverPending"`
	DeadLetters int64 `json:"receiverDeadLetters"`
}

// sinkFigures are one sink's backlog: events not yet delivered or dead-lettered, and how long
// the oldest of them has waited since the receiver acknowledged it.
type sinkFigures struct {
	Sink                 string  `json:"sink"`
	Pending              int64   `json:"pending"`
	OldestPendingSeconds float64 `json:"oldestPendingSeconds"`
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
	if f.wantsFigures() {
		if families, err = g.scrape(ctx, cmd.ErrOrStderr(), f); err != nil {
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
			for _, sk := range r.Sinks {
				branches = append(branches, fmt.Sprintf("sink %s  pending %d  oldest %s", sk.Sink, sk.Pending, (time.Duration(sk.OldestPendingSeconds)*time.Second).String()))
			}
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

// scrape reads the receiver's metrics: at --receiver-metrics, else at /metrics of the receiver
// as connectReceiver reaches it.
func (g *globals) scrape(ctx context.Context, errOut io.Writer, f statusFlags) (map[string]*dto.MetricFamily, error) {
	rf, path := f.recv, "/metrics"
	if f.metricsURL != "" {
		if rf.url != "" || rf.service != "" {
			return nil, usageError("--receiver-metrics names the receiver's /metrics itself: leave out --receiver and --receiver-service")
		}
		rf.url, path = f.metricsURL, ""
	}
	conn, err := g.connectReceiver(ctx, errOut, &rf)
	if err != nil {
		return nil, err
	}
	defer conn.stop()
	g.progress(errOut, "reading %s", conn.base+path)
	body, err := conn.get(ctx, http.MethodGet, path)
	if err != nil {
		return nil, err
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("reading the receiver's metrics: %w", err)
	}
	return fams, nil
}

// figuresFor sums the route's series of the receiver's metrics.
func figuresFor(fams map[string]*dto.MetricFamily, namespace, name string) *routeFigures {
	out := &routeFigures{}
	for _, m := range metricsOf(fams, "hookwarden_receiver_requests_total") {
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
	sinks := map[string]*sinkFigures{}
	sinkOf := func(m *dto.Metric) *sinkFigures {
		l := labelsOf(m)
		if l["namespace"] != namespace || l["name"] != name {
			return nil
		}
		if sinks[l["sink"]] == nil {
			sinks[l["sink"]] = &sinkFigures{Sink: l["sink"]}
		}
		return sinks[l["sink"]]
	}
	for _, m := range metricsOf(fams, "hookwarden_receiver_sink_queue_depth") {
		if s := sinkOf(m); s != nil {
			s.Pending = int64(m.GetGauge().GetValue())
		}
	}
	for _, m := range metricsOf(fams, "hookwarden_receiver_sink_oldest_pending_seconds") {
		if s := sinkOf(m); s != nil {
			s.OldestPendingSeconds = m.GetGauge().GetValue()
		}
	}
	for _, k := range slices.Sorted(maps.Keys(sinks)) {
		out.Sinks = append(out.Sinks, *sinks[k])
	}
	if ms := metricsOf(fams, "hookwarden_receiver_queue_depth"); len(ms) > 0 {
		out.Pending = int64(ms[0].GetGauge().GetValue())
	}
	if ms := metricsOf(fams, "hookwarden_receiver_dead_letters_total"); len(ms) > 0 {
		out.DeadLetters = int64(ms[0].GetCounter().GetValue())
	}
	return out
}

// metricsOf is the family's series (none when the receiver does not export it).
func metricsOf(fams map[string]*dto.MetricFamily, family string) []*dto.Metric {
	if f := fams[family]; f != nil {
		return f.Metric
	}
	return nil
}

func labelsOf(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.Label {
		out[l.GetName()] = l.GetValue()
	}
	return out
}
