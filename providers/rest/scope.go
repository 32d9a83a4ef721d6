package rest

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/hookwarden/hookwarden/providers"
)

// Provider is "any REST API described by a profile" as the manager and the receiver register
// it. Deliveries are verified by the scheme the profile describes, which the manager stores in
// the signing Secret (VerifierFromSpec).
func Provider() providers.Provider {
	return providers.Provider{Factory: Factory(), CredentialKey: "token", Scope: Scope, VerifierFromSpec: NewVerifierFromSpec}
}

// block is spec.provider.rest.
type block struct {
	ProfileRef *struct {
		Name string `json:"name"`
		Key  string `json:"key"`
	} `json:"profileRef,omitempty"`
	Profile    string            `json:"profile,omitempty"`
	Parameters map[string]string `json:"parameters,omitempty"`
}

// Scope reads spec.provider.rest: the profile (inline, or the ConfigMap key profileRef names)
// is the settings, the parameters are the target (Target).
func Scope(raw []byte, _ []string) (providers.Scope, error) {
	var b *block
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &b); err != nil {
			return providers.Scope{}, fmt.Errorf("spec.provider.rest: %v", err)
		}
	}
	switch {
	case b == nil:
		return providers.Scope{}, errors.New("spec.provider.rest must be set when spec.provider.type is rest, and only then")
	case (b.ProfileRef != nil) == (b.Profile != ""):
		return providers.Scope{}, errors.New("spec.provider.rest: set exactly one of profileRef or profile")
	}
	s := providers.Scope{Target: Target(b.Parameters)}
	if b.ProfileRef != nil {
		s.SettingsRef = &providers.ConfigMapKey{Name: b.ProfileRef.Name, Key: b.ProfileRef.Key, Field: "spec.provider.rest.profileRef"}
	} else {
		s.Settings = []byte(b.Profile)
	}
	return s, nil
}
