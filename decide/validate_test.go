package decide_test

import (
	"errors"
	"strings"
	"testing"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/decide"
	"github.com/hookwarden/hookwarden/providers/builtin"
)

// validTestSpec is a spec every rule accepts; each case breaks one thing.
func validTestSpec() hookv1.WebhookSubscriptionSpec {
	return hookv1.WebhookSubscriptionSpec{
		Provider: hookv1.ProviderSpec{
			Type:           hookv1.ProviderStripe,
			CredentialsRef: hookv1.SecretKeySelector{Name: "stripe-api", Key: "apiKey"},
		},
		Endpoint:      hookv1.EndpointSpec{URL: "https://hooks.example.com/hooks/shop/orders"},
		Events:        []string{"checkout.session.completed", "invoice.paid"},
		SigningSecret: hookv1.SigningSecretSpec{Name: "orders-signing"},
	}
}

// githubSpec turns the valid Stripe spec into a GitHub one for target, with GitHub events.
func githubSpec(s *hookv1.WebhookSubscriptionSpec, target hookv1.GitHubTarget) {
	s.Provider.Type = hookv1.ProviderGitHub
	s.Provider.GitHub = &target
	s.Events = []string{"push", "pull_request"}
}

func TestValidateSpec(t *testing.T) {
	cases := []struct {
		reason  string
		mutate  func(s *hookv1.WebhookSubscriptionSpec)
		wantURL string // when valid: the canonical URL returned
		// wantIn must all appear in the error message (the field it names first); empty: valid.
		wantIn []string
		// notIn must not appear in the error message (secrets).
		notIn []string
	}{
		{
			reason:  "a valid spec returns its URL unchanged when already canonical",
			mutate:  func(*hookv1.WebhookSubscriptionSpec) {},
			wantURL: "https://hooks.example.com/hooks/shop/orders",
		},
		{
			reason: "a valid spec returns the canonical URL (scheme and host case, default port, hex case)",
			mutate: func(s *hookv1.WebhookSubscriptionSpec) {
				s.Endpoint.URL = "HTTPS://Hooks.Example.COM:443/hooks/shop%2forders"
			},
			wantURL: "https://hooks.example.com/hooks/shop%2Forders",
		},
		{
			reason: "http is accepted with the explicit opt-in",
			mutate: func(s *hookv1.WebhookSubscriptionSpec) {
				s.Endpoint.URL, s.Endpoint.AllowInsecureHTTP = "http://hooks.internal:8080/x", true
			},
			wantURL: "http://hooks.internal:8080/x",
		},
		{
			reason:  "'*' alone is a valid event list",
			mutate:  func(s *hookv1.WebhookSubscriptionSpec) { s.Events = []string{"*"} },
			wantURL: "https://hooks.example.com/hooks/shop/orders",
		},
		{
			reason: "unsupported provider type",
			mutate: func(s *hookv1.WebhookSubscriptionSpec) { s.Provider.Type = "paypal" },
			wantIn: []string{"spec.provider.type", `"paypal"`},
		},
		{
			reason: "github type without its block",
			mutate: func(s *hookv1.WebhookSubscriptionSpec) { s.Provider.Type = hookv1.ProviderGitHub },
			wantIn: []string{"spec.provider.github must be set"},
		},
		{
			reason: "a github block on a stripe subscription",
			mutate: func(s *hookv1.WebhookSubscriptionSpec) {
				s.Provider.GitHub = &hookv1.GitHubTarget{Organization: "acme"}
			},
			wantIn: []string{"spec.provider.github must be set when spec.provider.type is github, and only then"},
		},
		{
			reason: "a repository hook is valid",
			mutate: func(s *hookv1.WebhookSubscriptionSpec) {
				githubSpec(s, hookv1.GitHubTarget{Owner: "acme", Repository: "shop.web_2"})
			},
			wantURL: "https://hooks.example.com/hooks/shop/orders",
		},
		{
			reason: "an organization hook with every event is valid",
			mutate: func(s *hookv1.WebhookSubscriptionSpec) {
				githubSpec(s, hookv1.GitHubTarget{Organization: "acme-corp"})
				s.Events = []string{"*"}
			},
			wantURL: "https://hooks.example.com/hooks/shop/orders",
		},
		{
			reason: "a GitHub App's webhook is valid",
			mutate: func(s *hookv1.WebhookSubscriptionSpec) {
				githubSpec(s, hookv1.GitHubTarget{App: &hookv1.GitHubApp{AppID: "12345"}})
			},
			wantURL: "https://hooks.example.com/hooks/shop/orders",
		},
		{
			reason: "an App beside an organization",
			mutate: func(s *hookv1.WebhookSubscriptionSpec) {
				githubSpec(s, hookv1.GitHubTarget{Organization: "acme", App: &hookv1.GitHubApp{AppID: "12345"}})
			},
			wantIn: []string{"spec.provider.github: set either owner and repository", "or app (a GitHub App's webhook)"},
		},
		{
			reason: "an App beside a repository",
			mutate: func(s *hookv1.WebhookSubscriptionSpec) {
				githubSpec(s, hookv1.GitHubTarget{Owner: "acme", Repository: "shop", App: &hookv1.GitHubApp{AppID: "Iv1.abc"}})
			},
			wantIn: []string{"spec.provider.github: set either owner and repository"},
		},
		{
			reason: "an App ID that is neither an ID nor a client ID",
			mutate: func(s *hookv1.WebhookSubscriptionSpec) {
				githubSpec(s, hookv1.GitHubTarget{App: &hookv1.GitHubApp{AppID: "my-app"}})
			},
			wantIn: []string{"spec.provider.github.app.appID", `"my-app"`},
		},
		{
			reason: "both repository and organization",
			mutate: func(s *hookv1.WebhookSubscriptionSpec) {
				githubSpec(s, hookv1.GitHubTarget{Owner: "acme", Repository: "shop", Organization: "acme"})
			},
			wantIn: []string{"spec.provider.github: set either owner and repository"},
		},
		{
			reason: "an empty github block",
			mutate: func(s *hookv1.WebhookSubscriptionSpec) { githubSpec(s, hookv1.GitHubTarget{}) },
			wantIn: []string{"spec.provider.github: set either owner and repository"},
		},
		{
			reason: "owner without repository",
			mutate: func(s *hookv1.WebhookSubscriptionSpec) { githubSpec(s, hookv1.GitHubTarget{Owner: "acme"}) },
			wantIn: []string{"spec.provider.github", "owner and repository are set together"},
		},
		{
			reason: "an owner GitHub would refuse",
			mutate: func(s *hookv1.WebhookSubscriptionSpec) {
				githubSpec(s, hookv1.GitHubTarget{Owner: "-acme", Repository: "shop"})
			},
			wantIn: []string{"spec.provider.github.owner", `"-acme"`},
		},
		{
			reason: "a repository name GitHub would refuse",
			mutate: func(s *hookv1.WebhookSubscriptionSpec) {
				githubSpec(s, hookv1.GitHubTarget{Owner: "acme", Repository: "shop/web"})
			},
			wantIn: []string{"spec.provider.github.repository", `"shop/web"`},
		},
		{
			reason: "an organization login over 39 characters",
			mutate: func(s *hookv1.WebhookSubscriptionSpec) {
				githubSpec(s, hookv1.GitHubTarget{Organization: strings.Repeat("a", 40)})
			},
			wantIn: []string{"spec.provider.github.organization"},
		},
		{
			reason: "a Stripe-style event name on GitHub",
			mutate: func(s *hookv1.WebhookSubscriptionSpec) {
				githubSpec(s, hookv1.GitHubTarget{Organization: "acme"})
				s.Events = []string{"checkout.session.completed"}
			},
			wantIn: []string{"spec.events", `"checkout.session.completed"`, "GitHub event name"},
		},
		{
			reason: "empty provider type",
			mutate: func(s *hookv1.WebhookSubscriptionSpec) { s.Provider.Type = "" },
			wantIn: []string{"spec.provider.type"},
		},
		{
			reason: "credentials Secret not named",
			mutate: func(s *hookv1.WebhookSubscriptionSpec) { s.Provider.CredentialsRef.Name = "" },
			wantIn: []string{"spec.provider.credentialsRef.name"},
		},
		{
			reason: "no events",
			mutate: func(s *hookv1.WebhookSubscriptionSpec) { s.Events = nil },
			wantIn: []string{"spec.events"},
		},
		{
			reason: "'*' listed with other events",
			mutate: func(s *hookv1.WebhookSubscriptionSpec) { s.Events = []string{"invoice.paid", "*"} },
			wantIn: []string{"spec.events", "'*'"},
		},
		{
			reason: "URL with a fragment",
			mutate: func(s *hookv1.WebhookSubscriptionSpec) { s.Endpoint.URL = "https://hooks.example.com/x#frag" },
			wantIn: []string{"spec.endpoint.url", "fragment"},
		},
		{
			reason: "neither url nor receiver",
			mutate: func(s *hookv1.WebhookSubscriptionSpec) { s.Endpoint.URL = "" },
			wantIn: []string{"spec.endpoint", "url", "receiver"},
		},
		{
			reason: "both url and receiver",
			mutate: func(s *hookv1.WebhookSubscriptionSpec) { s.Endpoint.Receiver = &hookv1.ReceiverEndpoint{} },
			wantIn: []string{"spec.endpoint", "url", "receiver"},
		},
		{
			reason: "receiver alone is valid; the reconciler derives the URL, so none is returned",
			mutate: func(s *hookv1.WebhookSubscriptionSpec) {
				s.Endpoint.URL, s.Endpoint.Receiver = "", &hookv1.ReceiverEndpoint{}
			},
			wantURL: "",
		},
		{
			reason: "receiver without a signing Secret name",
			mutate: func(s *hookv1.WebhookSubscriptionSpec) {
				s.Endpoint.URL, s.Endpoint.Receiver = "", &hookv1.ReceiverEndpoint{}
				s.SigningSecret.Name = ""
			},
			wantIn: []string{"spec.signingSecret.name"},
		},
		{
			reason: "receiver with the signing Secret being the credentials Secret: refused like with a url",
			mutate: func(s *hookv1.WebhookSubscriptionSpec) {
				s.Endpoint.URL, s.Endpoint.Receiver = "", &hookv1.ReceiverEndpoint{}
				s.SigningSecret.Name = s.Provider.CredentialsRef.Name
			},
			wantIn: []string{"spec.signingSecret.name", "spec.provider.credentialsRef.name"},
		},
		{
			reason: "URL with another scheme",
			mutate: func(s *hookv1.WebhookSubscriptionSpec) { s.Endpoint.URL = "ftp://hooks.example.com/x" },
			wantIn: []string{"spec.endpoint.url", "scheme"},
		},
		{
			reason: "URL without a host",
			mutate: func(s *hookv1.WebhookSubscriptionSpec) { s.Endpoint.URL = "https:///x" },
			wantIn: []string{"spec.endpoint.url", "host"},
		},
		{
			reason: "URL with credentials: refused, and the password never appears in the message",
			mutate: func(s *hookv1.WebhookSubscriptionSpec) { s.Endpoint.URL = "https://alice:hunter2@hooks.example.com/x" },
			wantIn: []string{"spec.endpoint.url", "credentials"},
			notIn:  []string{"hunter2"},
		},
		{
			reason: "http without the opt-in",
			mutate: func(s *hookv1.WebhookSubscriptionSpec) { s.Endpoint.URL = "http://hooks.example.com/x" },
			wantIn: []string{"spec.endpoint.url", "spec.endpoint.allowInsecureHTTP"},
		},
		{
			reason: "HTTP in upper case without the opt-in is still http",
			mutate: func(s *hookv1.WebhookSubscriptionSpec) { s.Endpoint.URL = "HTTP://hooks.example.com/x" },
			wantIn: []string{"spec.endpoint.url", "spec.endpoint.allowInsecureHTTP"},
		},
		{
			reason: "signing Secret not named",
			mutate: func(s *hookv1.WebhookSubscriptionSpec) { s.SigningSecret.Name = "" },
			wantIn: []string{"spec.signingSecret.name"},
		},
		{
			reason: "signing Secret is the credentials Secret: the operator would overwrite the API key",
			mutate: func(s *hookv1.WebhookSubscriptionSpec) { s.SigningSecret.Name = s.Provider.CredentialsRef.Name },
			wantIn: []string{"spec.signingSecret.name", "spec.provider.credentialsRef.name"},
		},
	}
	for _, c := range cases {
		t.Run(c.reason, func(t *testing.T) {
			spec := validTestSpec()
			c.mutate(&spec)
			got, _, err := decide.ValidateSpec(&spec, builtin.Registry())
			if len(c.wantIn) == 0 {
				if err != nil {
					t.Fatalf("validateSpec error = %v; want valid (%s)", err, c.reason)
				}
				if got != c.wantURL {
					t.Errorf("validateSpec URL = %q; want %q (%s)", got, c.wantURL, c.reason)
				}
				return
			}
			if err == nil {
				t.Fatalf("validateSpec = %q, nil; want an InvalidSpec error (%s)", got, c.reason)
			}
			var se *decide.StallError
			if !errors.As(err, &se) || se.Reason != hookv1.ReasonInvalidSpec {
				t.Errorf("validateSpec error = %#v; want a stall with reason %s: a bad spec must not be retried (%s)", err, hookv1.ReasonInvalidSpec, c.reason)
			}
			if got != "" {
				t.Errorf("validateSpec URL = %q alongside an error; want empty (%s)", got, c.reason)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, c.wantIn[0]) {
				t.Errorf("validateSpec error %q does not start with the field %q (%s)", msg, c.wantIn[0], c.reason)
			}
			for _, w := range c.wantIn {
				if !strings.Contains(msg, w) {
					t.Errorf("validateSpec error %q does not mention %q (%s)", msg, w, c.reason)
				}
			}
			for _, n := range c.notIn {
				if strings.Contains(msg, n) {
					t.Errorf("validateSpec error %q reveals %q (%s)", msg, n, c.reason)
				}
			}
		})
	}
}

func TestValidateReceiverURL(t *testing.T) {
	cases := []struct {
		reason string
		base   string
		want   string
		wantIn string // error must mention it; empty: valid
	}{
		{"base URL plus /hooks/<namespace>/<name>", "https://hooks.example.com", "https://hooks.example.com/hooks/shop/orders", ""},
		{"a trailing slash on the base is not doubled", "https://hooks.example.com/", "https://hooks.example.com/hooks/shop/orders", ""},
		{"a base with a path prefix keeps it", "https://example.com/in", "https://example.com/in/hooks/shop/orders", ""},
		{"the result is canonical", "HTTPS://Hooks.Example.COM:443", "https://hooks.example.com/hooks/shop/orders", ""},
		{"no base URL configured", "", "", "--receiver-base-url"},
		{"an invalid base URL", "ftp://hooks.example.com", "", "--receiver-base-url"},
	}
	for _, c := range cases {
		got, err := decide.ReceiverURL(c.base, "shop", "orders")
		if c.wantIn == "" {
			if err != nil || got != c.want {
				t.Errorf("receiverURL(%q) = %q, %v; want %q (%s)", c.base, got, err, c.want, c.reason)
			}
			continue
		}
		var se *decide.StallError
		if !errors.As(err, &se) || se.Reason != hookv1.ReasonInvalidSpec || !strings.Contains(err.Error(), c.wantIn) {
			t.Errorf("receiverURL(%q) = %q, %v; want an InvalidSpec stall mentioning %q (%s)", c.base, got, err, c.wantIn, c.reason)
		}
	}
}

// TestGitHubAppScope: spec.provider.github.app targets app/<id> (a client ID keeps its case) and
// reads the credential from the key privateKey unless credentialsRef.key says otherwise.
func TestGitHubAppScope(t *testing.T) {
	for _, id := range []string{"12345", "Iv23liAbC"} {
		p := hookv1.ProviderSpec{Type: hookv1.ProviderGitHub, CredentialsRef: hookv1.SecretKeySelector{Name: "app-key"},
			GitHub: &hookv1.GitHubTarget{App: &hookv1.GitHubApp{AppID: id}}}
		scope, err := decide.ProviderScope(&p, []string{"push"}, builtin.Registry())
		if err != nil || scope.Target != "app/"+id || scope.CredentialKey != "privateKey" {
			t.Errorf("app %s: scope %+v, %v; want target app/%s, credential key privateKey", id, scope, err, id)
		}
	}
	p := hookv1.ProviderSpec{Type: hookv1.ProviderGitHub, GitHub: &hookv1.GitHubTarget{Organization: "Acme"}}
	if scope, err := decide.ProviderScope(&p, []string{"push"}, builtin.Registry()); err != nil || scope.Target != "orgs/acme" || scope.CredentialKey != "" {
		t.Errorf("organization: scope %+v, %v; want orgs/acme and the provider's credential key", scope, err)
	}
}
