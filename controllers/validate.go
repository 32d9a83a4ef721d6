package controllers

import (
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
	if spec.Provider.Type != hookv1.ProviderStripe {
		return invalid("spec.provider.type %q is not supported (supported: stripe)", spec.Provider.Type)
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
