package decide

import (
	"sort"
	"time"
)

// Two subscriptions never own one registration. Whatever made them (an import of a registration
// a subscription already manages, two manifests for one URL on a provider without markers),
// the second to claim a registration stalls, naming the first, instead of setting a new secret
// on it (which breaks the first one's verification) or deleting it when it is deleted.
//
// A subscription claims the registration its status records (status.endpointID), and, from the
// moment the manager kept it for the subscription, the one it kept (before the status write
// reaches the cache). Of two claimants of one registration the one that claimed it first wins:
// one that records it over one that does not, and between two that record it (a state left by
// an older manager) the older subscription. Who claims what is read by the caller (the
// manager's cache and its own book; the command line's list); the decision is here.

// Claimant is a subscription claiming a registration.
type Claimant struct {
	Key     string // namespace/name
	Created time.Time
}

// before orders claimants by age, then name: the first one wins.
func (c Claimant) before(o Claimant) bool {
	if !c.Created.Equal(o.Created) {
		return c.Created.Before(o.Created)
	}
	return c.Key < o.Key
}

// FirstClaimant decides who owns a registration that claimants claim, for me, who records it
// or not (mine): "" when it may be mine (nobody else claims it, or I claimed it first), else
// the subscription that claimed it first. A claimant with my key is me.
func FirstClaimant(me Claimant, mine bool, claimants []Claimant) string {
	others := make([]Claimant, 0, len(claimants))
	for _, c := range claimants {
		if c.Key == me.Key {
			mine = true
			continue
		}
		others = append(others, c)
	}
	if len(others) == 0 {
		return ""
	}
	sort.Slice(others, func(i, j int) bool { return others[i].before(others[j]) })
	if mine && me.before(others[0]) {
		return ""
	}
	return others[0].Key
}

// ClaimedBy returns, for each of ids, the subscription other than me (whose status records
// recorded) that owns it ("" where none does: see FirstClaimant); claimants reads who claims
// one registration.
func ClaimedBy(me Claimant, recorded string, ids []string, claimants func(id string) ([]Claimant, error)) (map[string]string, error) {
	var out map[string]string
	for _, id := range ids {
		cs, err := claimants(id)
		if err != nil {
			return nil, err
		}
		if owner := FirstClaimant(me, recorded == id, cs); owner != "" {
			if out == nil {
				out = map[string]string{}
			}
			out[id] = owner
		}
	}
	return out, nil
}

// Contested are the observed registrations whose owner matters to the plan of in: those
// serving the desired target, and those the subscription would otherwise prove its own (to
// keep, update, prune or delete).
func (in PlanInput) Contested() []string {
	own := in.Ownership()
	own.ClaimedBy = nil
	var ids []string
	for _, r := range in.Observed {
		if r.ID == "" {
			continue
		}
		if k := in.Keys.Get(r.URL); (k.CanonicalOK && k.Canonical == in.Desired.URL) || own.Proves(r) {
			ids = append(ids, r.ID)
		}
	}
	return ids
}
