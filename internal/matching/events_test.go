/*
Copyright 2026 The Hookwarden Authors.

Licensed under the Apache License, Version 2.0.
*/

package matching

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSameEvents(t *testing.T) {
	tests := []struct {
		a, b   []string
		want   bool
		reason string
	}{
		{[]string{"a", "b"}, []string{"a", "b"}, true, "identical"},
		{[]string{"a", "b"}, []string{"b", "a"}, true, "order ignored"},
		{[]string{"a", "a", "b"}, []string{"b", "a"}, true, "duplicates ignored"},
		{[]string{"a", "b", "a", "b"}, []string{"a", "b", "b"}, true, "duplicates on both sides"},
		{[]string{"a"}, []string{"a", "b"}, false, "subset is not equal"},
		{[]string{"a", "b"}, []string{"a"}, false, "superset is not equal"},
		{[]string{"*"}, []string{"*"}, true, "wildcard equals itself"},
		{[]string{"*"}, []string{"a", "b"}, false, "* is never expanded to an explicit list"},
		{[]string{"*", "a"}, []string{"*"}, false, "* does not absorb other events"},
		{nil, nil, true, "nil vs nil"},
		{[]string{}, nil, true, "empty vs nil"},
		{[]string{}, []string{}, true, "empty vs empty"},
		{[]string{}, []string{"*"}, false, "empty is not everything"},
		{[]string{"Charge.Succeeded"}, []string{"charge.succeeded"}, false, "event names are case-sensitive"},
		{[]string{"a "}, []string{"a"}, false, "no trimming"},
		{[]string{""}, nil, false, "an empty name is a value"},
	}
	for _, tt := range tests {
		if got := SameEvents(tt.a, tt.b); got != tt.want {
			t.Errorf("SameEvents(%q, %q) = %v; want %v (%s)", tt.a, tt.b, got, tt.want, tt.reason)
		}
		if got := SameEvents(tt.b, tt.a); got != tt.want {
			t.Errorf("SameEvents(%q, %q) = %v; want %v, symmetric (%s)", tt.b, tt.a, got, tt.want, tt.reason)
		}
	}
}

func TestNormalizeEvents(t *testing.T) {
	tests := []struct {
		in, want []string
		reason   string
	}{
		{nil, []string{}, "nil becomes empty, so it serializes as []"},
		{[]string{}, []string{}, "empty stays empty"},
		{[]string{"b", "a", "c"}, []string{"a", "b", "c"}, "sorted"},
		{[]string{"b", "a", "b", "a"}, []string{"a", "b"}, "de-duplicated"},
		{[]string{"*"}, []string{"*"}, "wildcard kept as is"},
		{[]string{"payment.created", "*", "charge.failed"}, []string{"*", "charge.failed", "payment.created"}, "* sorts like any string"},
		{[]string{"B", "a"}, []string{"B", "a"}, "byte order, no case folding"},
	}
	for _, tt := range tests {
		var before []string
		if tt.in != nil {
			before = append([]string{}, tt.in...)
		}
		got := NormalizeEvents(tt.in)
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("NormalizeEvents(%q) mismatch (-want +got) (%s):\n%s", tt.in, tt.reason, diff)
		}
		if got == nil {
			t.Errorf("NormalizeEvents(%q) = nil; want non-nil (%s)", tt.in, tt.reason)
		}
		if diff := cmp.Diff(before, tt.in); diff != "" {
			t.Errorf("NormalizeEvents modified its input (-before +after) (%s):\n%s", tt.reason, diff)
		}
	}
}
