package decide

import (
	"github.com/hookwarden/hookwarden/internal/matching"
	"github.com/hookwarden/hookwarden/providers"
)

// URLKeys remembers the canonical and loose forms of an account's registration URLs. Every plan
// compares each registration of the account with its own spec, so without it a wave over N
// subscriptions of one account parses N² URLs; with it, N. It belongs to one account and is
// used under the account's lock. A nil *urlKeys computes every time.
type URLKeys struct{ m map[string]URLKey }

// URLKey is one URL's canonical and loose forms (OK false: it did not parse).
type URLKey struct {
	Canonical, Loose     string
	CanonicalOK, LooseOK bool
}

// Get returns u's forms, parsed once per account.
func (k *URLKeys) Get(u string) URLKey {
	if k != nil {
		if v, ok := k.m[u]; ok {
			return v
		}
	}
	var v URLKey
	var err error
	v.Canonical, err = matching.Canonical(u)
	v.CanonicalOK = err == nil
	v.Loose, err = matching.LooseKey(u)
	v.LooseOK = err == nil
	if k != nil {
		if k.m == nil {
			k.m = map[string]URLKey{}
		}
		k.m[u] = v
	}
	return v
}

// retain forgets the URLs no registration of regs has, so the table follows the account.
func (k *URLKeys) Retain(regs []providers.Registration) {
	if k == nil || len(k.m) == 0 {
		return
	}
	keep := make(map[string]bool, len(regs))
	for _, r := range regs {
		keep[r.URL] = true
	}
	for u := range k.m {
		if !keep[u] {
			delete(k.m, u)
		}
	}
}
