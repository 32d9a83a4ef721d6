package controllers

import (
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden/providers"
	"github.com/hookwarden/hookwarden/providers/github"
	ghfake "github.com/hookwarden/hookwarden/providers/github/fake"
)

func TestBehaviourGitHub(t *testing.T) {
	srv := ghfake.New(ghfake.WithPageSize(3))
	base, stop := srv.Start()
	t.Cleanup(stop)
	var n atomic.Int64
	for _, kind := range []string{"repository", "organization"} {
		runBehaviourSuite(t, behaviourProvider{
			name:   "github-" + kind,
			events: []string{"push", "pull_request", "issues"},
			newAccount: func(t *testing.T) behaviourAccount {
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
				return &githubAccount{srv: srv, target: target, client: c}
			},
		})
	}
}

type githubAccount struct {
	srv    *ghfake.Server
	target string
	client providers.Client
}

func (a *githubAccount) Client() providers.Client { return a.client }
func (a *githubAccount) PageSize() int            { return 3 }

func (a *githubAccount) Seed(t *testing.T, url string, events []string) string {
	h := a.srv.Seed(a.target, ghfake.Hook{Active: true, Events: events, Config: ghfake.Config{URL: url, ContentType: "json", Secret: "set-by-hand"}})
	return strconv.FormatInt(h.ID, 10)
}

func (a *githubAccount) IDs(t *testing.T) []string {
	var ids []string
	for _, h := range a.srv.Hooks(a.target) {
		ids = append(ids, strconv.FormatInt(h.ID, 10))
	}
	return ids
}

func (a *githubAccount) RateLimitNext(t *testing.T, retryAfter time.Duration) {
	f := ghfake.SecondaryLimit(429, retryAfter)
	f.Times = 1
	a.srv.Inject(f)
}
