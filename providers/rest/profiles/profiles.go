// Package profiles holds the REST profiles Hookwarden ships, built into both binaries: a
// subscription names one with spec.provider.rest.builtin (the manager resolves it through
// providers/rest's Scope), and `hookwarden import --provider rest --profile NAME` refers to it.
//
// The files here are copies of config/samples/rest/NAME.profile.yaml, where they are written,
// documented and read by the tests of every fake: `make profiles-sync` copies them and this
// package's test fails when a copy differs. go:embed cannot reach outside its package folder.
package profiles

import (
	"embed"
	"io/fs"
	"sort"
	"strings"
)

//go:embed *.yaml
var files embed.FS

const suffix = ".yaml"

// Get returns the built-in profile name (as spec.provider.rest.builtin spells it), or false
// when there is none by that name.
func Get(name string) ([]byte, bool) {
	b, err := files.ReadFile(name + suffix) // only top-level files are embedded: "a/b" is none
	if err != nil {
		return nil, false
	}
	return b, true
}

// Names are the built-in profiles' names, sorted.
func Names() []string {
	entries, err := fs.ReadDir(files, ".")
	if err != nil {
		return nil // cannot happen: the embedded root always reads
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, strings.TrimSuffix(e.Name(), suffix))
	}
	sort.Strings(names)
	return names
}
