package github_test

import (
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden/providers"
	"github.com/hookwarden/hookwarden/providers/github"
	ghfake "github.com/hookwarden/hookwarden/providers/github/fake"
	"github.com/hookwarden/hookwarden/providers/providerstest"
)

// TestMain prints the behaviour suite's matrix (case × provider) after the package's tests.
func TestMain(m *testing.M) { providerstest.BehaviourMain(m) }

// TestBehaviourGitHub runs the behaviour suite against repository and organization hooks, each
// account a fresh target on one fake reached with a token granted on it alone.
func TestBehaviourGitHub(t *testing.T) {
	srv := ghfake.New(ghfake.WithPageSize(3))
	base, stop := srv.Start()
	t.Cleanup(stop)
	var n atomic.Int64
	for _, kind := range []string{"repository", "organization"} {
		t.Run(kind, func(t *testing.T) {
			providerstest.RunBehaviour(t, providerstest.Provider{
				Name:   "github-" + kind,
				Events: []string{"push", "pull_request", "issues"},
				NewAccount: func(t *testing.T) providerstest.Account {
					i := n.Add(1)
					target := fmt.Sprintf("orgs/behaviour-%d", i)
					if kind == "repository" {
						target = fmt.Sprintf("repos/behaviour-%d/shop", i)
					}
					token := fmt.Sprintf("ghp_behaviour_%d_%d", i, time.Now().UnixNano())
					srv.Grant(token, target)
					c, err := github.New(providers.Config{APIURL: base, Target: target, Credential: token, Timeout: 5 * time.Second})
					if err != nil {
						t.Fatal(err)
					}
					return &providerstest.FuncAccount{
						C:    c,
						Page: 3,
						SeedFunc: func(url string, events []string) string {
							h := srv.Seed(target, ghfake.Hook{Active: true, Events: events, Config: ghfake.Config{URL: url, ContentType: "json", Secret: "set-by-hand"}})
							return strconv.FormatInt(h.ID, 10)
						},
						IDsFunc: func() []string {
							var ids []string
							for _, h := range srv.Hooks(target) {
								ids = append(ids, strconv.FormatInt(h.ID, 10))
							}
							return ids
						},
						RateLimitFunc: func(retryAfter time.Duration) {
							f := ghfake.SecondaryLimit(429, retryAfter)
							f.Times = 1
							srv.Inject(f)
						},
					}
				},
			})
		})
	}
}
