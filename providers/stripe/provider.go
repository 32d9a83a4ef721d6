package stripe

import (
	"bytes"
	"errors"

	"github.com/hookwarden/hookwarden/providers"
)

// Provider is Stripe as the manager and the receiver register it. A Stripe API key is the
// account: the spec has no stripe block, and one list covers everything the key reaches.
func Provider() providers.Provider {
	return providers.Provider{
		Factory:       Factory(),
		CredentialKey: "apiKey",
		Scope: func(block []byte, _ []string) (providers.Scope, error) {
			if b := bytes.TrimSpace(block); len(b) > 0 && !bytes.Equal(b, []byte("null")) {
				return providers.Scope{}, errors.New("spec.provider.stripe: Stripe takes no settings beyond the API key")
			}
			return providers.Scope{}, nil
		},
		Verifier: NewVerifier(),
	}
}
