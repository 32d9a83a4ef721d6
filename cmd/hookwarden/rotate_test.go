package main

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/cli"
	"github.com/hookwarden/hookwarden/internal/testtier"
	ghfake "github.com/hookwarden/hookwarden/providers/github/fake"
	stripefake "github.com/hookwarden/hookwarden/providers/stripe/fake"
)

// TestRotate: five subscriptions (three Stripe, two GitHub) rotated. The first run has no
// manager to answer and times out (exit 4) with the requests made; the second, started before
// the manager comes back, resumes them (no new request) and ends when every rotation is
// confirmed: Stripe endpoints replaced and the old ones deleted, GitHub hooks kept with a new
// secret, each signing Secret holding exactly the provider's current secret.
func TestRotate(t *testing.T) {
	testtier.RequiresServers(t, "a control plane (envtest) and the fakes")
	g := NewWithT(t)
	ctx := context.Background()
	tn := newTenant(t, g, "rotate")
	subs := createTeam(g, tn, "rot", []string{"pay-0", "pay-1", "pay-2"}, []string{"repo-0", "repo-1"})
	before := map[string]*hookv1.WebhookSubscription{}
	stop := startManager(t)
	for _, s := range subs {
		before[s.Name] = expectReady(g, s)
	}
	stop()

	code, _, stderr := run(t, nil, "rotate", "-n", tn.ns, "-l", "team=rot", "--timeout", "2s", "--poll-interval", "100ms")
	g.Expect(code).To(Equal(cli.ExitTimeout), stderr)
	g.Expect(strings.Count(stderr, "rotation requested")).To(Equal(5), stderr)
	g.Expect(stderr).To(ContainSubstring("run the command again to resume"))

	// Resumed: started while no manager runs, it follows the pending requests.
	var out, errOut syncBuffer
	resumed := make(chan int, 1)
	go func() {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		resumed <- cli.Run(rctx, []string{"rotate", "-n", tn.ns, "-l", "team=rot", "--poll-interval", "100ms", "--kubeconfig", env.Kubeconfig},
			cli.Options{Streams: genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}})
	}()
	g.Eventually(func() int { return strings.Count(errOut.String(), "still pending: following it") }).Should(Equal(5))
	stop = startManager(t)
	defer stop()
	g.Eventually(resumed).WithTimeout(time.Minute).Should(Receive(Equal(cli.ExitOK)), "stderr: %s", errOut.String())
	g.Expect(errOut.String()).To(ContainSubstring("rotated 5/5"))
	g.Expect(errOut.String()).NotTo(ContainSubstring(": rotation requested"))

	for _, s := range subs {
		live := &hookv1.WebhookSubscription{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(s), live)).To(Succeed())
		g.Expect(live.Status.LastHandledRotateAt).To(Equal(live.Annotations[hookv1.AnnotationRotateRequestedAt]))
		old := before[s.Name].Status.EndpointID
		g.Expect(out.String()).To(ContainSubstring(s.Name))
		sec := &corev1.Secret{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: tn.ns, Name: s.Spec.SigningSecret.Name}, sec)).To(Succeed())
		current := string(sec.Data[hookv1.SecretKeyCurrent])
		if s.Spec.Provider.Type == hookv1.ProviderStripe {
			// A new endpoint, the old one deleted (eventually: pruned in the round after).
			g.Expect(live.Status.EndpointID).NotTo(Equal(old))
			g.Eventually(func() []string { return stripeIDs(tn) }).ShouldNot(ContainElement(old))
			g.Expect(stripeSecret(tn, live.Status.EndpointID)).To(Equal(current))
			continue
		}
		// The same hook, a new secret.
		g.Expect(live.Status.EndpointID).To(Equal(old))
		id, _ := strconv.ParseInt(old, 10, 64)
		hookSecret := ""
		for _, h := range ghSrv.Hooks(tn.repo) {
			if h.ID == id {
				hookSecret = h.Config.Secret
			}
		}
		g.Expect(hookSecret).To(Equal(current))
		g.Expect(sec.Data).NotTo(HaveKey(hookv1.SecretKeyPending))
	}
	g.Expect(stripeSrv.Endpoints(tn.apiKey)).To(HaveLen(3))
	g.Expect(ghSrv.Hooks(tn.repo)).To(HaveLen(2))
}

func stripeIDs(tn *tenant) []string {
	var ids []string
	for _, e := range stripeSrv.Endpoints(tn.apiKey) {
		ids = append(ids, e.ID)
	}
	return ids
}

func stripeSecret(tn *tenant, id string) string {
	for _, e := range stripeSrv.Endpoints(tn.apiKey) {
		if e.ID == id {
			return e.Secret
		}
	}
	return ""
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestRotateResumesTheBatch: six subscriptions, interrupted after the three GitHub ones rotated
// (Stripe refuses creates meanwhile, so the Stripe rotations are still pending), then run again:
// the rerun resumes the same batch. Each subscription rotates exactly once: one new secret on
// each GitHub hook, one new Stripe endpoint each, no second request.
func TestRotateResumesTheBatch(t *testing.T) {
	testtier.RequiresServers(t, "a control plane (envtest) and the fakes")
	g := NewWithT(t)
	ctx := context.Background()
	tn := newTenant(t, g, "rotate-batch")
	subs := createTeam(g, tn, "batch", []string{"st-0", "st-1", "st-2"}, []string{"gh-0", "gh-1", "gh-2"})
	stop := startManager(t)
	defer func() { stop() }()
	for _, s := range subs {
		expectReady(g, s)
	}
	ghSrv.ResetRequests()
	stripeSrv.ResetRequests()
	refuse := stripeSrv.Inject(stripefake.Fault{Method: "POST", PathPrefix: "/v1/webhook_endpoints", APIKey: tn.apiKey, Status: 500})

	// Interrupted (SIGINT: the context is cancelled) once the GitHub ones are rotated.
	var errOut syncBuffer
	rctx, interrupt := context.WithCancel(ctx)
	first := make(chan int, 1)
	go func() {
		first <- cli.Run(rctx, []string{"rotate", "-n", tn.ns, "-l", "team=batch", "--poll-interval", "100ms", "--kubeconfig", env.Kubeconfig},
			cli.Options{Streams: genericiooptions.IOStreams{In: strings.NewReader(""), Out: &syncBuffer{}, ErrOut: &errOut}})
	}()
	g.Eventually(errOut.String).WithTimeout(time.Minute).Should(ContainSubstring("rotated 3/6"))
	interrupt()
	g.Eventually(first).Should(Receive(Equal(cli.ExitTimeout)), errOut.String())
	refuse()

	code, stdout, stderr := run(t, nil, "rotate", "-n", tn.ns, "-l", "team=batch", "--poll-interval", "100ms", "--timeout", "50s")
	ghSecretChanges := 0
	for _, r := range ghSrv.Requests() {
		if r.Op == ghfake.OpUpdate && strings.Contains(r.Body, `"secret"`) {
			ghSecretChanges++
		}
	}
	newEndpoints := 0
	for _, r := range stripeSrv.Requests() {
		if r.Method == "POST" && r.Path == "/v1/webhook_endpoints" && r.Status == 200 && !r.Replayed {
			newEndpoints++
		}
	}
	t.Logf("REPORT rerun exit %d; GitHub secret changes %d, new Stripe endpoints %d\nfirst run stderr:\n%s\nrerun stdout:\n%s\nrerun stderr:\n%s",
		code, ghSecretChanges, newEndpoints, errOut.String(), stdout, stderr)
	g.Expect(code).To(Equal(cli.ExitOK), stderr)
	// The GitHub ones had rotated; a Stripe one may have too, once creates were accepted again.
	for _, s := range subs[3:] {
		g.Expect(stderr).To(ContainSubstring(key(s) + ": handled the rotation of this batch"))
	}
	g.Expect(strings.Count(stderr, "handled the rotation of this batch")+strings.Count(stderr, "still pending: following it")).To(Equal(6), stderr)
	g.Expect(stderr).NotTo(ContainSubstring(": rotation requested"))
	g.Expect(ghSecretChanges).To(Equal(3))
	g.Expect(newEndpoints).To(Equal(3))
	g.Expect(stripeSrv.Endpoints(tn.apiKey)).To(HaveLen(3))
}

// createTeam creates a Stripe subscription for each of stripe and a GitHub one for each of
// github, each for https://hooks.example.com/<name> and labelled team=<team>.
func createTeam(g *WithT, tn *tenant, team string, stripe, github []string) []*hookv1.WebhookSubscription {
	var subs []*hookv1.WebhookSubscription
	for _, n := range stripe {
		subs = append(subs, tn.stripeSub(n, "https://hooks.example.com/"+n, "invoice.paid"))
	}
	for _, n := range github {
		subs = append(subs, tn.githubSub(n, "https://hooks.example.com/"+n, "push"))
	}
	for _, s := range subs {
		s.Labels["team"] = team
		g.Expect(env.Client.Create(context.Background(), s.DeepCopy())).To(Succeed())
	}
	return subs
}

// TestRotateGuardRails: no NAME, -l or --all is refused (it would rotate the whole namespace);
// several names are taken; --dry-run asks nothing; following does not stop at a stalled
// subscription nor wait on a suspended one: each one's outcome is in the table, exit 1.
func TestRotateGuardRails(t *testing.T) {
	testtier.RequiresServers(t, "a control plane (envtest) and the fakes")
	g := NewWithT(t)
	ctx := context.Background()
	tn := newTenant(t, g, "rotate-rails")
	subs := createTeam(g, tn, "rails", []string{"a", "b", "c"}, nil)
	stop := startManager(t)
	defer stop()
	for _, s := range subs {
		expectReady(g, s)
	}
	annotated := func() []string {
		var out []string
		for _, s := range subs {
			live := &hookv1.WebhookSubscription{}
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(s), live)).To(Succeed())
			if v := live.Annotations[hookv1.AnnotationRotateRequestedAt]; v != "" {
				out = append(out, live.Name)
			}
		}
		return out
	}

	code, _, stderr := run(t, nil, "rotate", "-n", tn.ns)
	g.Expect(code).To(Equal(cli.ExitUsage), stderr)
	g.Expect(stderr).To(ContainSubstring("or pass --all to act on every subscription in namespace rotate-rails"))
	code, stdout, stderr := run(t, nil, "rotate", "a", "b", "-n", tn.ns, "--dry-run")
	g.Expect(code).To(Equal(cli.ExitOK), stderr)
	g.Expect(stdout).To(MatchRegexp(`rotate-rails/a\s+ask`))
	g.Expect(stdout).To(MatchRegexp(`rotate-rails/b\s+ask`))
	g.Expect(stdout).NotTo(ContainSubstring("rotate-rails/c"))
	g.Expect(annotated()).To(BeEmpty(), "--dry-run asks nothing")

	// b suspended, c stalled (its credential gone): a rotates; b and c are reported, not waited on.
	patch := func(name string, fn func(*hookv1.WebhookSubscription)) {
		live := &hookv1.WebhookSubscription{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: tn.ns, Name: name}, live)).To(Succeed())
		base := live.DeepCopy()
		fn(live)
		g.Expect(env.Client.Patch(ctx, live, client.MergeFrom(base))).To(Succeed())
	}
	patch("b", func(s *hookv1.WebhookSubscription) { s.Spec.Suspend = true })
	patch("c", func(s *hookv1.WebhookSubscription) { s.Spec.Provider.CredentialsRef.Name = "absent" })
	g.Eventually(func(g Gomega) {
		live := &hookv1.WebhookSubscription{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: tn.ns, Name: "c"}, live)).To(Succeed())
		g.Expect(meta.IsStatusConditionTrue(live.Status.Conditions, hookv1.ConditionStalled)).To(BeTrue())
		g.Expect(live.Status.ObservedGeneration).To(Equal(live.Generation))
	}).Should(Succeed())
	start := time.Now()
	code, stdout, stderr = run(t, nil, "rotate", "c", "b", "a", "-n", tn.ns, "--timeout", "50s", "--poll-interval", "100ms")
	t.Logf("REPORT rotate a b c (b suspended, c stalled): exit %d after %s\n%s%s", code, time.Since(start).Round(time.Second), stdout, stderr)
	g.Expect(code).To(Equal(cli.ExitError), stderr)
	g.Expect(time.Since(start)).To(BeNumerically("<", 40*time.Second), "not waited on until the timeout")
	g.Expect(stdout).To(MatchRegexp(`rotate-rails/a\s+we_\S+\s+we_\S+\s+\S+\s+rotated`))
	g.Expect(stdout).To(MatchRegexp(`rotate-rails/b\s+.*suspended`))
	g.Expect(stdout).To(MatchRegexp(`rotate-rails/c\s+.*stalled: CredentialsNotFound`))
	g.Expect(stderr).To(ContainSubstring("2 of 3 rotations did not end"))
}
