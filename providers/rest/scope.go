package rest

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/hookwarden/hookwarden/providers"
	"github.com/hookwarden/hookwarden/providers/rest/profiles"
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
	Builtin    string            `json:"builtin,omitempty"`
	Parameters map[string]string `json:"parameters,omitempty"`
}

// Scope reads spec.provider.rest: the profile (built in, inline, or the ConfigMap key
// profileRef names) is the settings, the parameters are the target (Target).
func Scope(raw []byte, _ []string) (providers.Scope, error) {
	var b *block
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &b); err != nil {
			return providers.Scope{}, fmt.Errorf("spec.provider.rest: %v", err)
		}
	}
	if b == nil {
		return providers.Scope{}, errors.New("spec.provider.rest must be set when spec.provider.type is rest, and only then")
	}
	if n := countTrue(b.Builtin != "", b.ProfileRef != nil, b.Profile != ""); n != 1 {
		return providers.Scope{}, errors.New("spec.provider.rest: set exactly one of builtin, profileRef or profile")
	}
	s := providers.Scope{Target: Target(b.Parameters)}
	switch {
	case b.Builtin != "":
		p, ok := profiles.Get(b.Builtin)
		if !ok {
			return providers.Scope{}, fmt.Errorf("spec.provider.rest.builtin: no built-in profile %q (built in: %s)", b.Builtin, strings.Join(profiles.Names(), ", "))
		}
		s.Settings = p
	case b.ProfileRef != nil:
		s.SettingsRef = &providers.ConfigMapKey{Name: b.ProfileRef.Name, Key: b.ProfileRef.Key, Field: "spec.provider.rest.profileRef"}
	default:
		s.Settings = []byte(b.Profile)
	}
	return s, nil
}

func countTrue(bs ...bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}
