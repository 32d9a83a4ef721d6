package decide

import (
	"encoding/json"
	"strings"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/internal/matching"
	"github.com/hookwarden/hookwarden/providers"
)

// ValidateSpec mirrors the CEL rules (an object admitted before a rule existed, or a CRD
// installed without them, still gets a clear answer). It returns the canonical endpoint URL
// ("" for spec.endpoint.receiver, whose URL the reconciler derives) and what the provider reads
// from its block (providers.Provider.Scope: its own rules for its block and events).
func ValidateSpec(spec *hookv1.WebhookSubscriptionSpec, registry providers.Registry) (string, providers.Scope, error) {
	scope, err := ProviderScope(&spec.Provider, spec.Events, registry)
	if err != nil {
		return "", providers.Scope{}, err
	}
	u, err := validateEndpoint(spec)
	return u, scope, err
}

// ProviderScope checks spec.provider against the registry: a registered type, no block of
// another provider's, and whatever the provider's Scope says of its own block.
func ProviderScope(p *hookv1.ProviderSpec, events []string, registry providers.Registry) (providers.Scope, error) {
	provider, ok := registry[string(p.Type)]
	if !ok {
		return providers.Scope{}, NewStall(hookv1.ReasonInvalidSpec, "spec.provider.type %q is not supported (supported: %s)", p.Type, strings.Join(registry.Types(), ", "))
	}
	blocks, err := providerBlocks(p)
	if err != nil {
		return providers.Scope{}, err
	}
	for name := range blocks {
		if name != string(p.Type) {
			return providers.Scope{}, NewStall(hookv1.ReasonInvalidSpec, "spec.provider.%s must be set when spec.provider.type is %s, and only then", name, name)
		}
	}
	scope, err := provider.Scope(blocks[string(p.Type)], events)
	if err != nil {
		return providers.Scope{}, NewStall(hookv1.ReasonInvalidSpec, "%v", err)
	}
	return scope, nil
}

// providerBlocks are the provider-specific blocks of spec.provider (spec.provider.github,
// spec.provider.rest, ...) as JSON, by name: every field but the ones all providers share.
func providerBlocks(p *hookv1.ProviderSpec) (map[string]json.RawMessage, error) {
	raw, err := json.Marshal(p)
	if err != nil {
		return nil, err
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return nil, err
	}
	for _, shared := range []string{"type", "credentialsRef", "apiURL"} {
		delete(fields, shared)
	}
	return fields, nil
}

// validateEndpoint checks the provider-neutral rest of the spec and returns the canonical URL.
func validateEndpoint(spec *hookv1.WebhookSubscriptionSpec) (string, error) {
	invalid := func(format string, args ...any) (string, error) {
		return "", NewStall(hookv1.ReasonInvalidSpec, format, args...)
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

// ReceiverURL is the bundled receiver's URL for a subscription: base + /hooks/<ns>/<name>.
func ReceiverURL(base, namespace, name string) (string, error) {
	if base == "" {
		return "", NewStall(hookv1.ReasonInvalidSpec, "spec.endpoint.receiver needs the manager's --receiver-base-url, which is not set")
	}
	u, err := matching.Canonical(strings.TrimRight(base, "/") + "/hooks/" + namespace + "/" + name)
	if err != nil {
		return "", NewStall(hookv1.ReasonInvalidSpec, "--receiver-base-url: %v", err)
	}
	return u, nil
}
