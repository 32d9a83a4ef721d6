package controllers

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hookwarden/hookwarden/decide"
)

// TestClaimBook: a subscription claims one registration at a time, and releasing it frees it.
func TestClaimBook(t *testing.T) {
	var b claimBook
	a, c := decide.Claimant{Key: "ns/a"}, decide.Claimant{Key: "ns/c"}
	b.claim("k1", a)
	b.claim("k1", c)
	b.claim("k2", a) // a moved on to k2
	keys := func(cs []decide.Claimant) []string {
		var out []string
		for _, x := range cs {
			out = append(out, x.Key)
		}
		return out
	}
	if got := keys(b.claimants("k1")); !cmp.Equal(got, []string{"ns/c"}) {
		t.Errorf("k1: %v", got)
	}
	b.release("ns/a")
	if got := b.claimants("k2"); len(got) != 0 {
		t.Errorf("k2 after release: %v", got)
	}
}
