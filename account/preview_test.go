package account_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hookwarden/hookwarden/account"
	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/decide"
	"github.com/hookwarden/hookwarden/providers"
	"github.com/hookwarden/hookwarden/providers/builtin"
)

// TestOwners: what `hookwarden import` skips. Every proof the manager uses counts, on any
// provider (a marker of this cluster, a recorded id, a held secret, the bundled receiver's URL),
// and a registration serving the URL of a subscription on the account is its twin; nothing on
// another account (another repository) counts.
func TestOwners(t *testing.T) {
	r := &account.Observer{Accounts: account.NewAccounts(builtin.Registry(), account.AccountOptions{}), ClusterName: "prod"}
	gh := func(ns, name, repo, url string) hookv1.WebhookSubscription {
		s := hookv1.WebhookSubscription{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: hookv1.WebhookSubscriptionSpec{
			Provider: hookv1.ProviderSpec{Type: hookv1.ProviderGitHub, GitHub: &hookv1.GitHubTarget{Owner: "acme", Repository: repo}},
			Endpoint: hookv1.EndpointSpec{URL: url}, Events: []string{"push"}, SigningSecret: hookv1.SigningSecretSpec{Name: name + "-signing"}}}
		return s
	}
	recorded := gh("shop", "repo", "shop", "https://hooks.example.com/repo")
	recorded.Status.EndpointID, recorded.Status.URL = "1", "https://hooks.example.com/repo"
	holder := gh("shop", "holder", "shop", "https://hooks.example.com/holder")
	recv := gh("shop", "recv", "shop", "")
	recv.Spec.Endpoint = hookv1.EndpointSpec{Receiver: &hookv1.ReceiverEndpoint{}}
	recv.Status.URL = "https://in.example.com/hooks/shop/recv"
	elsewhere := gh("shop", "other-repo", "other", "https://hooks.example.com/else")
	elsewhere.Status.EndpointID = "6"
	hooks := []providers.Registration{
		{ID: "1", URL: "https://hooks.example.com/repo"},
		{ID: "2", URL: "https://hooks.example.com/repo"}, // a twin of shop/repo's
		{ID: "3", URL: "https://hooks.example.com/held-elsewhere"},
		{ID: "4", URL: "https://in.example.com/hooks/shop/recv"},
		{ID: "5", URL: "https://hooks.example.com/marked", Owner: providers.Owner{Cluster: "prod", Namespace: "shop", Name: "gone", UID: "u"}},
		{ID: "6", URL: "https://hooks.example.com/else"},    // shop/other-repo's id, but on another repository
		{ID: "7", URL: "https://hooks.example.com/foreign"}, // nobody's
	}
	tmpl := gh("imp", "", "shop", "")
	asked := map[string]bool{}
	got, err := r.Owners(&tmpl, hooks, []hookv1.WebhookSubscription{recorded, holder, recv, elsewhere}, func(s *hookv1.WebhookSubscription) (map[string]bool, error) {
		asked[s.Name] = true
		if s.Name == "holder" {
			return map[string]bool{"3": true}, nil
		}
		return nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]account.Owned{
		"1": {Subscription: "shop/repo", Proof: decide.ProofRecorded},
		"2": {Subscription: "shop/repo", Proof: "it serves this URL", Twin: true},
		"3": {Subscription: "shop/holder", Proof: decide.ProofHeld},
		"4": {Subscription: "shop/recv", Proof: decide.ProofReceiver},
		"5": {Subscription: "shop/gone", Proof: decide.ProofMarker},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Owners (-want +got):\n%s", diff)
	}
	if asked["other-repo"] {
		t.Errorf("the signing Secret of a subscription on another account was read")
	}
}
