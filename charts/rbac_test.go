package charts_test

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"

	"github.com/hookwarden/hookwarden/internal/testtier"
)

// installed applies, for real, the chart in cluster mode (release hw in hw-system), the chart
// in namespaced mode (release team in team-system, watching team-a) and config/default
// (kustomize, hookwarden-system), once for all tests that need them.
var installed = sync.OnceValue(func() error {
	for _, ns := range []string{"hw-system", "team-system", "team-a", "shop", "shop-2"} {
		if _, err := kube.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	t := &testing.T{}
	for _, r := range []struct {
		release, ns string
		set         []string
	}{
		{"hw", "hw-system", nil},
		{"team", "team-system", []string{"watchNamespaces={team-a}", "clusterName=team", "metrics.secure=false", "rbac.aggregateToDefaultRoles=false", "crds.enabled=false"}},
	} {
		out, err := helmTemplate(t, r.release, r.ns, r.set...)
		if err != nil {
			return err
		}
		if _, err := runCmd(t, out, kubectlBin, "--kubeconfig", kubeconfig, "apply", "--server-side", "-f", "-"); err != nil {
			return err
		}
	}
	kustomized, err := runCmd(t, nil, "../bin/kustomize", "build", "../config/default")
	if err != nil {
		return err
	}
	_, err = runCmd(t, []byte(kustomized), kubectlBin, "--kubeconfig", kubeconfig, "apply", "--server-side", "--force-conflicts", "-f", "-")
	return err
})

func install(t *testing.T) {
	t.Helper()
	if err := installed(); err != nil {
		t.Fatalf("installing the manifests: %v", err)
	}
}

type access struct {
	verb, group, resource, namespace, name string
	want                                   bool
}

func (a access) String() string {
	r := a.resource
	if a.group != "" {
		r += "." + a.group
	}
	if a.name != "" {
		r += "/" + a.name
	}
	where := "cluster-wide"
	if a.namespace != "" {
		where = "in " + a.namespace
	}
	return fmt.Sprintf("%s %s %s", a.verb, r, where)
}

func canSA(t *testing.T, ns, sa string, a access) bool {
	t.Helper()
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:   "system:serviceaccount:" + ns + ":" + sa,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Verb: a.verb, Group: a.group, Resource: a.resource, Namespace: a.namespace, Name: a.name,
		},
	}}
	res, err := kube.AuthorizationV1().SubjectAccessReviews().Create(context.Background(), sar, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return res.Status.Allowed
}

const (
	sec = "secrets"
	sub = "webhooksubscriptions"
	hw  = "hookwarden.io"
)

// grants returns what `kubectl auth can-i --list` says ServiceAccount ns/sa may do in namespace
// in, one "resource [names] [verbs]" line per rule, without what any authenticated user may do
// (what a ServiceAccount bound to nothing is listed) and without non-resource URLs.
func grants(t *testing.T, ns, sa, in string) []string {
	t.Helper()
	list := func(ns, sa string) []string {
		out := kubectl(t, nil, "auth", "can-i", "--list", "--as=system:serviceaccount:"+ns+":"+sa,
			"--as-group=system:serviceaccounts", "--as-group=system:serviceaccounts:"+ns, "--as-group=system:authenticated", "-n", in)
		var lines []string
		for _, l := range strings.Split(strings.TrimRight(out, "\n"), "\n")[1:] { // [0] is the header
			f := columns.Split(strings.TrimSpace(l), -1)
			if len(f) != 4 || f[0] == "" || f[1] != "[]" {
				continue // a non-resource URL (discovery, /healthz, /metrics)
			}
			lines = append(lines, f[0]+" "+f[2]+" "+f[3])
		}
		return lines
	}
	base := map[string]bool{}
	for _, l := range list("hw-system", "nobody") {
		base[l] = true
	}
	var out []string
	for _, l := range list(ns, sa) {
		if !base[l] {
			out = append(out, l)
		}
	}
	sort.Strings(out)
	return out
}

var columns = regexp.MustCompile(`\s{2,}`)

// What each ServiceAccount may do, exactly: the API server's own answer (SelfSubjectRulesReview,
// as kubectl auth can-i --list asks it) for each account in each namespace it matters in, in
// cluster and namespaced mode, against "What each ServiceAccount can touch" (docs/install.md). A
// grant wider than the docs' fails here. Spot checks (SubjectAccessReview) follow.
func TestServiceAccountPermissions(t *testing.T) {
	testtier.RequiresServers(t, "helm, the image binaries and a control plane (envtest)")
	install(t)
	if _, err := kube.CoreV1().ServiceAccounts("hw-system").Create(context.Background(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "nobody"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	const (
		subs       = "webhooksubscriptions.hookwarden.io [] [get list watch]"
		tokens     = "tokenreviews.authentication.k8s.io [] [create]"
		sars       = "subjectaccessreviews.authorization.k8s.io [] [create]"
		routeRead  = "secrets [] [get list watch]"
		mgrSecrets = "secrets [] [create get list patch update watch]"
		routeWrite = "secrets [] [get list create update delete]"
		leases     = "leases.coordination.k8s.io [] [get create update]"
		coreEvents = "events [] [create patch]"
		clusterUID = "namespaces [kube-system] [get]"
	)
	managerRules := []string{
		// A ref sink is resolved by the manager: a Service, or a Knative Broker's address.
		"brokers.eventing.knative.dev [] [get]",
		"services [] [get]",
		"configmaps [] [get list watch]",
		mgrSecrets,
		"events.events.k8s.io [] [create patch]",
		"webhooksubscriptions.hookwarden.io [] [get list patch update watch]",
		"webhooksubscriptions.hookwarden.io/finalizers [] [update]",
		"webhooksubscriptions.hookwarden.io/status [] [get patch update]",
	}
	// In the release namespace of cluster mode: the ClusterRole's Secret verbs and the route
	// Secrets' delete.
	const mgrSecretsHere = "secrets [] [create get list patch update watch delete]"
	managerRulesWith := func(secrets string) []string {
		out := slices.Clone(managerRules)
		out[slices.Index(out, mgrSecrets)] = secrets
		return out
	}
	with := func(base []string, more ...string) []string {
		out := append(append([]string(nil), base...), more...)
		sort.Strings(out)
		return out
	}
	cases := []struct {
		who, ns, sa, in string
		want            []string
	}{
		// Cluster mode (the chart's defaults): the receiver reads Secrets in its own namespace only.
		{"chart receiver", "hw-system", "hw-hookwarden-receiver", "shop", with(nil, subs, tokens, sars)},
		{"chart receiver", "hw-system", "hw-hookwarden-receiver", "kube-system", with(nil, subs, tokens, sars)},
		{"chart receiver", "hw-system", "hw-hookwarden-receiver", "hw-system", with(nil, subs, tokens, sars, routeRead)},
		{"chart manager", "hw-system", "hw-hookwarden-manager", "shop", with(managerRules, clusterUID, tokens, sars)},
		// The API server merges the route-Secret Role's verbs into the ClusterRole's line.
		{"chart manager", "hw-system", "hw-hookwarden-manager", "hw-system", with(managerRulesWith(mgrSecretsHere), clusterUID, tokens, sars, leases, coreEvents)},
		// config/default (kustomize): the same grants.
		{"kustomize receiver", "hookwarden-system", "hookwarden-receiver", "shop", with(nil, subs, tokens, sars)},
		{"kustomize receiver", "hookwarden-system", "hookwarden-receiver", "hookwarden-system", with(nil, subs, tokens, sars, routeRead)},
		{"kustomize manager", "hookwarden-system", "hookwarden-controller-manager", "shop", with(managerRules, clusterUID, tokens, sars)},
		{"kustomize manager", "hookwarden-system", "hookwarden-controller-manager", "hookwarden-system", with(managerRulesWith(mgrSecretsHere), clusterUID, tokens, sars, leases, coreEvents)},
		// Namespaced mode: nothing cluster-wide; the watched namespace, and the route Secrets.
		{"namespaced receiver", "team-system", "team-hookwarden-receiver", "team-a", with(nil, subs)},
		{"namespaced receiver", "team-system", "team-hookwarden-receiver", "shop", nil},
		{"namespaced receiver", "team-system", "team-hookwarden-receiver", "team-system", with(nil, routeRead)},
		{"namespaced manager", "team-system", "team-hookwarden-manager", "team-a", with(managerRules)},
		{"namespaced manager", "team-system", "team-hookwarden-manager", "shop", nil},
		{"namespaced manager", "team-system", "team-hookwarden-manager", "team-system", with(nil, routeWrite, leases, coreEvents)},
	}
	for _, c := range cases {
		got := grants(t, c.ns, c.sa, c.in)
		for _, l := range got {
			t.Logf("REPORT can-i --list %s:%s -n %s | %s", c.ns, c.sa, c.in, l)
		}
		if diff := cmp.Diff(c.want, got); diff != "" {
			t.Errorf("%s (%s/%s) in %s, kubectl auth can-i --list (-want +got)\n%s", c.who, c.ns, c.sa, c.in, diff)
		}
	}

	// Spot checks of the same, as a SubjectAccessReview asks them.
	for _, c := range []struct {
		who, ns, sa string
		checks      []access
	}{
		{"chart receiver", "hw-system", "hw-hookwarden-receiver", []access{
			{"get", "", sec, "kube-system", "cloud-admin", false},
			{"list", "", sec, "shop", "", false},
			{"list", "", sec, "", "", false},
			{"get", "", sec, "hw-system", "", true},
			{"create", "", sec, "hw-system", "", false},
			{"watch", hw, sub, "", "", true},
			{"update", hw, sub + "/status", "shop", "", false},
		}},
		{"chart manager", "hw-system", "hw-hookwarden-manager", []access{
			{"delete", "", sec, "shop", "", false},
			{"delete", "", sec, "hw-system", "", true},
			{"create", hw, sub, "shop", "", false},
			{"delete", hw, sub, "shop", "", false},
			{"get", "", "namespaces", "", "default", false},
			{"delete", "coordination.k8s.io", "leases", "hw-system", "", false},
			{"create", "rbac.authorization.k8s.io", "rolebindings", "shop", "", false},
		}},
		{"namespaced manager", "team-system", "team-hookwarden-manager", []access{
			{"get", "", sec, "kube-system", "", false},
			{"list", hw, sub, "", "", false},
			{"get", "", "namespaces", "", "kube-system", false}, // clusterName is set
		}},
	} {
		for _, a := range c.checks {
			if got := canSA(t, c.ns, c.sa, a); got != a.want {
				t.Errorf("%s (%s/%s) may %s: %v, want %v", c.who, c.ns, c.sa, a, got, a.want)
			}
		}
	}
}

// RBAC lets the manager write Secrets everywhere; the admission policy keeps it to its own
// signing Secrets, its route Secrets in the release namespace (the only Secrets it may delete)
// and out of kube-system. Checked with the manager's own token.
func TestManagerSecretWritesPolicy(t *testing.T) {
	testtier.RequiresServers(t, "helm, the image binaries and a control plane (envtest)")
	install(t)
	for _, who := range []struct{ ns, sa string }{{"hw-system", "hw-hookwarden-manager"}, {"hookwarden-system", "hookwarden-controller-manager"}} {
		_, rc := saKubeconfig(t, who.ns, who.sa)
		asManager := kubernetes.NewForConfigOrDie(rc)
		signing := map[string]string{"hookwarden.io/signing-secret": "true"}
		route := map[string]string{"hookwarden.io/route-secret": "true"}
		ctx := context.Background()
		mk := func(ns, name string, l map[string]string) *corev1.Secret {
			return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: l}, StringData: map[string]string{"k": "v"}}
		}
		suffix := strings.ReplaceAll(who.ns, "-system", "")
		// A plain Secret of a user, which the manager must not take over.
		for _, ns := range []string{"shop", who.ns} {
			if _, err := kube.CoreV1().Secrets(ns).Create(ctx, mk(ns, "user-"+suffix, nil), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		denied := []struct {
			reason string
			do     func() error
			want   string
		}{
			{"an unlabelled Secret", func() error {
				_, err := asManager.CoreV1().Secrets("shop").Create(ctx, mk("shop", "plain-"+suffix, nil), metav1.CreateOptions{})
				return err
			}, "writes only Secrets labelled hookwarden.io/signing-secret=true"},
			{"a signing Secret in kube-system", func() error {
				_, err := asManager.CoreV1().Secrets("kube-system").Create(ctx, mk("kube-system", "evil-"+suffix, signing), metav1.CreateOptions{})
				return err
			}, "writes no Secret in kube-system"},
			{"taking over a user's Secret by labelling it", func() error {
				s, err := asManager.CoreV1().Secrets("shop").Get(ctx, "user-"+suffix, metav1.GetOptions{})
				if err != nil {
					return err
				}
				s.Labels = signing
				_, err = asManager.CoreV1().Secrets("shop").Update(ctx, s, metav1.UpdateOptions{})
				return err
			}, "updates only Secrets that already are signing Secrets"},
			{"a route Secret outside the release namespace", func() error {
				_, err := asManager.CoreV1().Secrets("shop").Create(ctx, mk("shop", "route-"+suffix, route), metav1.CreateOptions{})
				return err
			}, "route Secrets (hookwarden.io/route-secret=true) in " + who.ns},
			{"deleting a user's Secret in the release namespace", func() error {
				return asManager.CoreV1().Secrets(who.ns).Delete(ctx, "user-"+suffix, metav1.DeleteOptions{})
			}, "deletes only its route Secrets"},
		}
		for _, d := range denied {
			// The policy is compiled asynchronously after it is created: wait for it to bite.
			var err error
			for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
				if err = d.do(); err != nil {
					break
				}
			}
			if err == nil || !strings.Contains(err.Error(), d.want) {
				t.Errorf("%s as %s: %v, want a denial saying %q", d.reason, who.sa, err, d.want)
			}
		}
		s, err := asManager.CoreV1().Secrets("shop").Create(ctx, mk("shop", "signing-"+suffix, signing), metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("a signing Secret as %s: %v", who.sa, err)
		}
		s.StringData = map[string]string{"k": "rotated"}
		if _, err := asManager.CoreV1().Secrets("shop").Update(ctx, s, metav1.UpdateOptions{}); err != nil {
			t.Errorf("updating its signing Secret as %s: %v", who.sa, err)
		}
		// RBAC grants no delete outside the release namespace; owner references delete them.
		if err := asManager.CoreV1().Secrets("shop").Delete(ctx, s.Name, metav1.DeleteOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("deleting a signing Secret as %s: %v, want forbidden", who.sa, err)
		}
		// Its route Secrets in the release namespace: created, updated, deleted.
		r, err := asManager.CoreV1().Secrets(who.ns).Create(ctx, mk(who.ns, "route-"+suffix, route), metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("a route Secret as %s: %v", who.sa, err)
		}
		r.StringData = map[string]string{"k": "rotated"}
		if _, err := asManager.CoreV1().Secrets(who.ns).Update(ctx, r, metav1.UpdateOptions{}); err != nil {
			t.Errorf("updating its route Secret as %s: %v", who.sa, err)
		}
		if err := asManager.CoreV1().Secrets(who.ns).Delete(ctx, r.Name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("deleting its route Secret as %s: %v", who.sa, err)
		}
	}
}

// Namespace users get WebhookSubscriptions through the built-in roles. There is no
// kube-controller-manager in envtest to run the aggregation, so this checks the contract it
// follows: the server's own admin/edit/view roles select our roles' labels (and view does not
// select the writer).
func TestAggregatedRoles(t *testing.T) {
	testtier.RequiresServers(t, "helm, the image binaries and a control plane (envtest)")
	install(t)
	ctx := context.Background()
	for _, c := range []struct {
		ours      string
		selectors []string
		notBy     string
	}{
		{"hw-hookwarden-edit", []string{"admin", "edit"}, "view"},
		{"hw-hookwarden-view", []string{"view"}, ""},
		{"hookwarden-webhooksubscription-editor-role", []string{"admin", "edit"}, "view"},
		{"hookwarden-webhooksubscription-viewer-role", []string{"view"}, ""},
	} {
		ours, err := kube.RbacV1().ClusterRoles().Get(ctx, c.ours, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		selects := func(builtin string) bool {
			r, err := kube.RbacV1().ClusterRoles().Get(ctx, builtin, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if r.AggregationRule == nil {
				t.Fatalf("the built-in %s role has no aggregation rule", builtin)
			}
			for _, s := range r.AggregationRule.ClusterRoleSelectors {
				sel, err := metav1.LabelSelectorAsSelector(&s)
				if err != nil {
					t.Fatal(err)
				}
				if sel.Matches(labels.Set(ours.Labels)) {
					return true
				}
			}
			return false
		}
		for _, b := range c.selectors {
			if !selects(b) {
				t.Errorf("the built-in %s role does not aggregate %s (labels %v)", b, c.ours, ours.Labels)
			}
		}
		if c.notBy != "" && selects(c.notBy) {
			t.Errorf("the built-in %s role aggregates %s: viewers could write", c.notBy, c.ours)
		}
	}
}
