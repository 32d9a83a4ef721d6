/*
Copyright 2026 The Hookwarden Authors.

Licensed under the Apache License, Version 2.0.
*/

package matching

import (
	"slices"
)

// SameEvents reports whether two event lists are equal as sets: order and duplicates are
// ignored, because providers return events in their own order. "*" is compared as a value like
// any other and never expanded: whether "*" covers an explicit list depends on the provider and
// changes over time, so treating them as equal could silently narrow or widen a subscription.
// Event names are compared exactly (no case folding or trimming); providers treat them that way.
func SameEvents(a, b []string) bool {
	return slices.Equal(NormalizeEvents(a), NormalizeEvents(b))
}

// NormalizeEvents returns the sorted, de-duplicated event list, so that a registration is sent
// with a stable list and keys built from it are deterministic. The input is not modified. The
// result is never nil, so it serializes as [] rather than null.
func NormalizeEvents(events []string) []string {
	out := slices.Clone(events)
	if out == nil {
		out = []string{}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
