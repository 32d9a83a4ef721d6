package rest_test

import (
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden/providers"
	"github.com/hookwarden/hookwarden/providers/providerstest"
	"github.com/hookwarden/hookwarden/providers/rest"
	"github.com/hookwarden/hookwarden/providers/rest/fakes/bitbucket"
	"github.com/hookwarden/hookwarden/providers/rest/fakes/core"
)

// bitbucketRateLimit: Bitbucket's own 429 states no wait; one with Retry-After is what a
// gateway in front of it may send, which the profile honours.
func bitbucketRateLimit(srv *bitbucket.Server) func(retryAfter time.Duration) {
	return func(retryAfter time.Duration) {
		f := bitbucket.RateLimited()
		if retryAfter > 0 {
			f.Header = map[string]string{"Retry-After": strconv.Itoa(int(retryAfter / time.Second))}
		}
		srv.Inject(f)
	}
}

// TestBehaviourBitbucket runs the behaviour suite against both shipped Bitbucket profiles, each
// account a fresh repository or workspace on one fake, behind the description's contract check.
func TestBehaviourBitbucket(t *testing.T) {
	for _, tg := range bitbucketTargets {
		t.Run(tg.profile, func(t *testing.T) {
			srv := bitbucket.New(bitbucket.WithPageSize(3))
			contract := newBitbucketContract(srv.Handler())
			base, stop := core.Start(contract)
			t.Cleanup(stop)
			var n atomic.Int64
			providerstest.RunBehaviour(t, providerstest.Provider{
				Name:   tg.profile,
				Events: []string{"repo:push", "pullrequest:created", "pullrequest:fulfilled"},
				NewAccount: func(t *testing.T) providerstest.Account {
					ws, repo := fmt.Sprintf("ws%d", n.Add(1)), "shop"
					srv.AddRepository(ws, repo)
					params, key := map[string]string{"workspace": ws, "repository": repo}, "repositories/"+ws+"/"+repo
					if tg.key == "workspaces/acme" {
						params, key = map[string]string{"workspace": ws}, "workspaces/"+ws
					}
					c, err := rest.Factory().New(providers.Config{APIURL: base + "/2.0", Target: rest.Target(params), Settings: sampleProfile(t, tg.profile), Credential: "bb-token", Timeout: 5 * time.Second})
					if err != nil {
						t.Fatal(err)
					}
					return &providerstest.FuncAccount{
						C:    c,
						Page: 3,
						SeedFunc: func(url string, events []string) string {
							return srv.Seed(key, bitbucket.Hook{URL: url, Events: events, Active: true, Secret: "made-by-hand"})
						},
						IDsFunc: func() []string {
							var ids []string
							for _, h := range srv.Hooks(key) {
								ids = append(ids, h.UUID)
							}
							return ids
						},
						RateLimitFunc: bitbucketRateLimit(srv),
					}
				},
			})
			contract.Result(t)
		})
	}
}
