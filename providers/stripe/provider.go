package stripe

import (
	"encoding/json"

	"github.com/hookwarden/hookwarden/providers"
)

// Provider is Stripe as the manager and the receiver register it. A Stripe API key is the
// account; spec.provider.stripe, when set, chooses v2 event destinations (apiVersion v2, with
// eventPayload thin or snapshot) instead of v1 webhook endpoints. A v2 subscription is a
// different account to the manager (its settings differ), so v1 and v2 lists are never mixed.
func Provider() providers.Provider {
	return providers.Provider{
		Factory:       Factory(),
		CredentialKey: "apiKey",
		Scope: func(block []byte, _ []string) (providers.Scope, error) {
			s, err := parseSettings(block)
			if err != nil || s == (Settings{}) {
				// v1, as before the block existed: the same account as subscriptions without one.
				return providers.Scope{}, err
			}
			b, err := json.Marshal(s)
			return providers.Scope{Settings: b}, err
		},
		Verifier: NewVerifier(),
	}
}

// Factory returns a providers.Factory that builds a v1 Client (New), or a v2 Destinations
// client (NewDestinations) when the settings say apiVersion v2.
func Factory() providers.Factory {
	// FactoryOf keeps a failed New from returning a Client that holds a nil pointer.
	v1, v2 := providers.FactoryOf(New), providers.FactoryOf(NewDestinations)
	return providers.FactoryFunc(func(cfg providers.Config) (providers.Client, error) {
		s, err := parseSettings(cfg.Settings)
		if err != nil {
			return nil, invalid(err.Error())
		}
		if s.APIVersion == "v2" {
			return v2.New(cfg)
		}
		return v1.New(cfg)
	})
}
