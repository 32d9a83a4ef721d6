package controllers

import (
	"regexp"
	"strings"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/internal/matching"
)

// validateSpec mirrors the CEL rules (an object admitted before a rule existed, or a CRD
// installed without them, still gets a clear answer) and returns the canonical endpoint URL
// ("" for spec.endpoint.receiver, whose URL the reconciler derives).
func validateSpec(spec *hookv1.WebhookSubscriptionSpec) (string, error) {
	invalid := func(format string, args ...any) (string, error) {
		return "", stall(hookv1.ReasonInvalidSpec, format, args...)
	}
	switch spec.Provider.Type {
	case hookv1.ProviderStripe, hookv1.ProviderGitHub, hookv1.ProviderREST:
	default:
		return invalid("spec.provider.type %q is not supported (supported: stripe, github, rest)", spec.Provider.Type)
	}
	switch t := spec.Provider.Type; {
	case (t == hookv1.ProviderGitHub) != (spec.Provider.GitHub != nil):
		return invalid("spec.provider.github must be set when spec.provider.type is github, and only then")
	case (t == hookv1.ProviderREST) != (spec.Provider.REST != nil):
		return invalid("spec.provider.rest must be set when spec.provider.type is rest, and only then")
	case t == hookv1.ProviderGitHub:
		if err := validateGitHub(spec); err != nil {
			return "", err
		}
	case t == hookv1.ProviderREST && (spec.Provider.REST.ProfileRef != nil) == (spec.Provider.REST.Profile != ""):
		return invalid("spec.provider.rest: set exactly one of profileRef or profile")
	}
	if spec.Provider.CredentialsRef.Name == "" {
		return invalid("spec.provider.credentialsRef.name is required")
	}
	if len(spec.Events) == 0 {
		return invalid("spec.events must list at least one event")
	}
	for _, e := range spec.Events {
		if e == "*" && len(spec.Events) > 1 {
			return invalid("spec.events: '*' already means every event; list it alone")
		}
	}
	if spec.SigningSecret.Name == "" {
		return invalid("spec.signingSecret.name is required")
	}
	if spec.SigningSecret.Name == spec.Provider.CredentialsRef.Name {
		return invalid("spec.signingSecret.name must differ from spec.provider.credentialsRef.name: the operator owns and rewrites the signing Secret")
	}
	switch {
	case (spec.Endpoint.Receiver != nil) == (spec.Endpoint.URL != ""):
		return invalid("spec.endpoint: set exactly one of url or receiver")
	case spec.Endpoint.Receiver != nil:
		return "", nil // the reconciler derives the URL from --receiver-base-url
	}
	raw := spec.Endpoint.URL
	if strings.Contains(raw, "#") {
		return invalid("spec.endpoint.url must not contain a fragment (#...): providers never send it")
	}
	canonical, err := matching.Canonical(raw)
	if err != nil {
		return invalid("spec.endpoint.url: %v", err)
	}
	if strings.HasPrefix(canonical, "http://") && !spec.Endpoint.AllowInsecureHTTP {
		return invalid("spec.endpoint.url uses http://; set spec.endpoint.allowInsecureHTTP: true to allow unencrypted deliveries")
	}
	return canonical, nil
}

// receiverURL is the bundled receiver's URL for a subscription: base + /hooks/<ns>/<name>.
func receiverURL(base, namespace, name string) (string, error) {
	if base == "" {
		return "", stall(hookv1.ReasonInvalidSpec, "spec.endpoint.receiver needs the manager's --receiver-base-url, which is not set")
	}
	u, err := matching.Canonical(strings.TrimRight(base, "/") + "/hooks/" + namespace + "/" + name)
	if err != nil {
		return "", stall(hookv1.ReasonInvalidSpec, "--receiver-base-url: %v", err)
	}
	return u, nil
}

// GitHub's rules for names, as the CRD's patterns state them: logins are alphanumerics and
// inner hyphens (at most 39), repository names alphanumerics, '.', '_' and '-' (at most 100).
var (
	githubLogin = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?$`)
	githubRepo  = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)
	githubEvent = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
)

// validateGitHub mirrors the CEL rules of spec.provider.github and of GitHub's event names.
func validateGitHub(spec *hookv1.WebhookSubscriptionSpec) error {
	invalid := func(format string, args ...any) error { return stall(hookv1.ReasonInvalidSpec, format, args...) }
	g := spec.Provider.GitHub
	switch {
	case (g.Organization != "") == (g.Owner != "" || g.Repository != ""):
		return invalid("spec.provider.github: set either owner and repository (a repository hook) or organization (an organization hook)")
	case (g.Owner != "") != (g.Repository != ""):
		return invalid("spec.provider.github: owner and repository are set together")
	}
	for field, v := range map[string]string{"owner": g.Owner, "organization": g.Organization} {
		if v != "" && (len(v) > 39 || !githubLogin.MatchString(v)) {
			return invalid("spec.provider.github.%s %q is not a GitHub login (letters, digits and inner hyphens, at most 39)", field, v)
		}
	}
	if r := g.Repository; r != "" && (len(r) > 100 || !githubRepo.MatchString(r) || r == "." || r == "..") {
		return invalid("spec.provider.github.repository %q is not a GitHub repository name (letters, digits, '.', '_' and '-', at most 100)", r)
	}
	for _, e := range spec.Events {
		if e != "*" && !githubEvent.MatchString(e) {
			return invalid("spec.events: %q is not a GitHub event name (lowercase with underscores, such as push or pull_request, or '*' for all)", e)
		}
	}
	return nil
}
