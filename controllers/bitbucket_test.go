package controllers_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/hookwarden/hookwarden/providers"
	"github.com/hookwarden/hookwarden/providers/rest/fakes/bitbucket"
	"github.com/hookwarden/hookwarden/providers/rest/fakes/core"
)

// The Bitbucket Cloud profiles run the REST scenarios' tenants (rest_test.go) against the fake
// Bitbucket (providers/rest/fakes/bitbucket) over HTTP, each named as a user names it: through
// spec.provider.rest.builtin, the copy built into the manager. The secret is ours (chosen,
// stored as pending, sent on create), Bitbucket never returns it and an update that omits it
// keeps it; the marker rides at the end of the description; there is no API to resend
// deliveries. Repository and workspace hooks are the same API under two paths.

// bitbucketAPI is one repository or workspace at the fake Bitbucket.
type bitbucketAPI struct {
	srv *bitbucket.Server
	key string // "repositories/ws/repo" or "workspaces/ws", as the fake names it
}

func (a *bitbucketAPI) regs() []restReg {
	var out []restReg
	for _, h := range a.srv.Hooks(a.key) {
		out = append(out, restReg{ID: h.UUID, URL: h.URL, Events: h.Events, Description: h.Description, Secret: h.Secret, Disabled: !h.Active})
	}
	return out
}

func (a *bitbucketAPI) seed(r restReg) string {
	return a.srv.Seed(a.key, bitbucket.Hook{URL: r.URL, Events: r.Events, Description: r.Description, Secret: r.Secret, Active: !r.Disabled})
}

func (a *bitbucketAPI) remove(id string) bool { return a.srv.Remove(a.key, id) }

func (a *bitbucketAPI) edit(id string, fn func(r *restReg)) bool {
	for _, r := range a.regs() {
		if r.ID == id {
			fn(&r)
			return a.srv.Edit(a.key, id, func(h *bitbucket.Hook) {
				h.URL, h.Events, h.Description, h.Secret, h.Active = r.URL, r.Events, r.Description, r.Secret, !r.Disabled
			})
		}
	}
	return false
}

func (a *bitbucketAPI) fake() *core.Core { return &a.srv.Core }

func (a *bitbucketAPI) mine(r core.Request) bool { return strings.HasPrefix(r.Path, "/2.0/"+a.key+"/") }

var (
	bbSrv = bitbucket.New(bitbucket.WithPageSize(3))
	bbURL string
)

// bitbucketKind is one Bitbucket profile; repository names the hooks' repository, or "" for
// workspace hooks.
func bitbucketKind(name, prefix, profile, repository string) *restKind {
	key := func(ws string) string {
		if repository == "" {
			return "workspaces/" + ws
		}
		return "repositories/" + ws + "/" + repository
	}
	return &restKind{
		name: name, prefix: prefix, profile: profile, builtin: true,
		events: []string{"repo:push", "pullrequest:created"}, otherEvent: "issue:created", clientChosen: true,
		collection: func(t *restTenant) string { return "/2.0/" + t.api.(*bitbucketAPI).key + "/hooks" },
		newAccount: func(n int) (restAPI, string, map[string]string) {
			ws := fmt.Sprintf("%s-acme-%d", prefix, n)
			params := map[string]string{"workspace": ws}
			if repository == "" {
				bbSrv.AddWorkspace(ws)
			} else {
				bbSrv.AddRepository(ws, repository)
				params["repository"] = repository
			}
			return &bitbucketAPI{srv: bbSrv, key: key(ws)}, bbURL + "/2.0", params
		},
		mark: func(r *restReg, o providers.Owner) {
			r.Description = strings.TrimSpace(r.Description + " [" + marker(o) + "]")
		},
		marked: func(r restReg, o providers.Owner) bool { return strings.HasSuffix(r.Description, "["+marker(o)+"]") },
		deliver: func(secret, id string) providers.Delivery {
			body := []byte(`{"repository":{"full_name":"acme/shop"},"push":{"changes":[]}}`)
			m := hmac.New(sha256.New, []byte(secret))
			m.Write(body)
			h := http.Header{}
			h.Set("X-Event-Key", "repo:push")
			h.Set("X-Hub-Signature", "sha256="+hex.EncodeToString(m.Sum(nil)))
			h.Set("X-Request-UUID", id)
			return providers.Delivery{Header: h, Body: body, Now: time.Now()}
		},
		rateLimit: bitbucket.RateLimited,
	}
}

var bitbucketKinds = []*restKind{
	bitbucketKind("Bitbucket Cloud repository hooks (builtin profile, client-chosen secret)", "bbr", "bitbucket-repository-hooks", "shop"),
	bitbucketKind("Bitbucket Cloud workspace hooks (builtin profile, client-chosen secret)", "bbw", "bitbucket-workspace-hooks", ""),
}

var _ = Describe("WebhookSubscription on Bitbucket Cloud", Ordered, ContinueOnFailure, func() {
	var mgr *runningManager
	BeforeAll(func() {
		var stop func()
		bbURL, stop = bbSrv.Start()
		DeferCleanup(stop)
		mgr = startManager(managerOptions{})
	})
	AfterAll(func() {
		if mgr != nil {
			mgr.Stop()
		}
	})

	for _, kind := range bitbucketKinds {
		Context(kind.name, func() {
			newT := func() *restTenant { return newRESTTenant(kind) }

			It("i: Bitbucket's 429 without a wait holds the create back for the profile's backoff (a minute), saying RateLimited", func() {
				t := newT()
				f := kind.rateLimit()
				f.Method, f.PathPrefix = http.MethodPost, kind.collection(t)
				remove := t.api.fake().Inject(f)
				defer remove()
				s := t.sub("orders", "https://hooks.example.com/storm")
				expectRateLimited(s)
				Consistently(func() int { return len(t.requests(http.MethodPost, kind.collection(t))) }).
					WithTimeout(5*time.Second).Should(Equal(1), "no retry before the backoff")
				Expect(t.regs()).To(BeEmpty())
			})
		})
	}
})
