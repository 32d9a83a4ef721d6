package controllers

import (
	"github.com/hookwarden/hookwarden/internal/matching"
	"github.com/hookwarden/hookwarden/providers"
)

// urlKeys remembers the canonical and loose forms of an account's registration URLs. Every plan
// compares each registration of the account with its own spec, so without it a wave over N
// subscriptions of one account parses N² URLs; with it, N. It belongs to one account and is
// used under the account's lock. A nil *urlKeys computes every time.
type urlKeys struct{ m map[string]urlKey }

type urlKey struct {
	canonical, loose     string
	canonicalOK, looseOK bool
}

func (k *urlKeys) get(u string) urlKey {
	if k != nil {
		if v, ok := k.m[u]; ok {
			return v
		}
	}
	var v urlKey
	var err error
	v.canonical, err = matching.Canonical(u)
	v.canonicalOK = err == nil
	v.loose, err = matching.LooseKey(u)
	v.looseOK = err == nil
	if k != nil {
		if k.m == nil {
			k.m = map[string]urlKey{}
		}
		k.m[u] = v
	}
	return v
}

// retain forgets the URLs no registration of regs has, so the table follows the account.
func (k *urlKeys) retain(regs []providers.Registration) {
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
