package charts_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
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
		{"team", "team-system", []string{"watchNamespaces={team-a}", "clusterName=team", "metrics.secure=false", "rbac.aggregateToDefaultRoles=false"}},
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

// What each ServiceAccount may and may not do, asked of the API server's own authorizer.
func TestServiceAccountPermissions(t *testing.T) {
	install(t)
	manager := []access{
		{"get", "", sec, "shop", "", true},
		{"create", "", sec, "shop", "", true},
		{"delete", "", sec, "shop", "", false},
		{"update", hw, sub, "shop", "", true},
		{"create", hw, sub, "shop", "", false},
		{"delete", hw, sub, "shop", "", false},
		{"update", hw, sub + "/finalizers", "shop", "", true},
		{"get", "", "namespaces", "", "kube-system", true},
		{"get", "", "namespaces", "", "default", false},
		{"list", "", "namespaces", "", "", false},
		{"list", "", "pods", "shop", "", false},
		// REST profiles may live in a ConfigMap in any subscription's namespace; the manager only reads them.
		{"get", "", "configmaps", "shop", "", true},
		{"update", "", "configmaps", "shop", "", false},
		{"create", "", "configmaps", "shop", "", false},
		{"create", "coordination.k8s.io", "leases", "", "", false},
		{"create", "authentication.k8s.io", "tokenreviews", "", "", true},
		{"create", "authorization.k8s.io", "subjectaccessreviews", "", "", true},
		{"create", "rbac.authorization.k8s.io", "rolebindings", "shop", "", false},
	}
	receiver := []access{
		{"list", "", sec, "shop", "", true}, // its cache asks for labelled signing Secrets only
		{"create", "", sec, "shop", "", false},
		{"update", "", sec, "shop", "", false},
		{"watch", hw, sub, "shop", "", true},
		{"update", hw, sub, "shop", "", false},
		{"update", hw, sub + "/status", "shop", "", false},
		{"get", "", "namespaces", "", "kube-system", false},
		{"create", "events.k8s.io", "events", "shop", "", false},
		{"create", "coordination.k8s.io", "leases", "hw-system", "", false},
	}
	withLeases := func(ns string, list []access) []access {
		return append(list, access{"update", "coordination.k8s.io", "leases", ns, "", true},
			access{"update", "coordination.k8s.io", "leases", "shop", "", false})
	}
	cases := []struct {
		who, ns, sa string
		checks      []access
	}{
		{"chart manager", "hw-system", "hw-hookwarden-manager", withLeases("hw-system", manager)},
		{"chart receiver", "hw-system", "hw-hookwarden-receiver", receiver},
		{"kustomize manager", "hookwarden-system", "hookwarden-controller-manager", withLeases("hookwarden-system", manager)},
		{"kustomize receiver", "hookwarden-system", "hookwarden-receiver", receiver},
		{"namespaced manager", "team-system", "team-hookwarden-manager", withLeases("team-system", []access{
			{"get", "", sec, "team-a", "", true},
			{"create", "", sec, "team-a", "", true},
			{"watch", hw, sub, "team-a", "", true},
			{"get", "", sec, "shop", "", false},
			{"get", "", sec, "kube-system", "", false},
			{"list", hw, sub, "", "", false},
			{"get", "", "namespaces", "", "kube-system", false}, // clusterName is set
			{"create", "authentication.k8s.io", "tokenreviews", "", "", false},
		})},
		{"namespaced receiver", "team-system", "team-hookwarden-receiver", []access{
			{"list", "", sec, "team-a", "", true},
			{"list", "", sec, "shop", "", false},
			{"list", "", sec, "", "", false},
			{"watch", hw, sub, "team-a", "", true},
			{"watch", hw, sub, "", "", false},
		}},
	}
	for _, c := range cases {
		for _, a := range c.checks {
			if got := canSA(t, c.ns, c.sa, a); got != a.want {
				t.Errorf("%s (%s/%s) may %s: %v, want %v", c.who, c.ns, c.sa, a, got, a.want)
			}
		}
	}
	// The lists a security review reads.
	for _, c := range []struct{ ns, sa, in string }{
		{"hw-system", "hw-hookwarden-manager", "shop"},
		{"hw-system", "hw-hookwarden-manager", "kube-system"},
		{"hw-system", "hw-hookwarden-receiver", "shop"},
		{"team-system", "team-hookwarden-manager", "team-a"},
		{"team-system", "team-hookwarden-manager", "shop"},
		{"team-system", "team-hookwarden-receiver", "team-a"},
	} {
		out := kubectl(t, nil, "auth", "can-i", "--list", "--as=system:serviceaccount:"+c.ns+":"+c.sa,
			"--as-group=system:serviceaccounts", "--as-group=system:serviceaccounts:"+c.ns, "--as-group=system:authenticated", "-n", c.in)
		for _, l := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
			if strings.HasPrefix(l, " ") {
				continue // non-resource URLs every authenticated user has (discovery, /healthz)
			}
			t.Logf("REPORT can-i --list %s:%s -n %s | %s", c.ns, c.sa, c.in, l)
		}
	}
}

// RBAC lets the manager write Secrets everywhere; the admission policy keeps it to its own
// signing Secrets and out of kube-system. Checked with the manager's own token.
func TestManagerSecretWritesPolicy(t *testing.T) {
	install(t)
	for _, who := range []struct{ ns, sa string }{{"hw-system", "hw-hookwarden-manager"}, {"hookwarden-system", "hookwarden-controller-manager"}} {
		_, rc := saKubeconfig(t, who.ns, who.sa)
		asManager := kubernetes.NewForConfigOrDie(rc)
		signing := map[string]string{"hookwarden.io/signing-secret": "true"}
		ctx := context.Background()
		mk := func(ns, name string, l map[string]string) *corev1.Secret {
			return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: l}, StringData: map[string]string{"k": "v"}}
		}
		suffix := strings.ReplaceAll(who.ns, "-system", "")
		// A plain Secret of a user, which the manager must not take over.
		if _, err := kube.CoreV1().Secrets("shop").Create(ctx, mk("shop", "user-"+suffix, nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
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
	}
}

// Namespace users get WebhookSubscriptions through the built-in roles. There is no
// kube-controller-manager in envtest to run the aggregation, so this checks the contract it
// follows: the server's own admin/edit/view roles select our roles' labels (and view does not
// select the writer).
func TestAggregatedRoles(t *testing.T) {
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
