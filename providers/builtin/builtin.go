// Package builtin is the registry of the providers Hookwarden ships. Both binaries build it
// here: adding a provider is its package and one line below.
package builtin

import (
	"github.com/hookwarden/hookwarden/providers"
	"github.com/hookwarden/hookwarden/providers/github"
	"github.com/hookwarden/hookwarden/providers/rest"
	"github.com/hookwarden/hookwarden/providers/stripe"
)

// Registry returns the shipped providers by the type spec.provider.type names them with.
func Registry() providers.Registry {
	return providers.Registry{
		"stripe": stripe.Provider(),
		"github": github.Provider(),
		"rest":   rest.Provider(),
	}
}
