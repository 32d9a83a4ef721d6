package controllers

import (
	"strings"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/internal/matching"
)

// validateSpec mirrors the CEL rules (an object admitted before a rule existed, or a CRD
// installed without them, still gets a clear answer) and returns the canonical endpoint URL.
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
	if spec.SigningSecret.Name == "" {
		return invalid("spec.signingSecret.name is required")
	}
	if spec.SigningSecret.Name == spec.Provider.CredentialsRef.Name {
		return invalid("spec.signingSecret.name must differ from spec.provider.credentialsRef.name: the operator owns and rewrites the signing Secret")
	}
	return canonical, nil
}
