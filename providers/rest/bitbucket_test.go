package rest_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden/providers"
	"github.com/hookwarden/hookwarden/providers/providerstest"
	"github.com/hookwarden/hookwarden/providers/rest"
	"github.com/hookwarden/hookwarden/providers/rest/fakes/bitbucket"
	"github.com/hookwarden/hookwarden/providers/rest/fakes/core"
)

// bitbucketTarget is one of the two shipped Bitbucket profiles and what one of its lists covers
// on the fake.
type bitbucketTarget struct {
	profile string
	key     string // the fake's space: repositories/ws/repo or workspaces/ws
	params  map[string]string
}

var bitbucketTargets = []bitbucketTarget{
	{"bitbucket-repository-hooks", "repositories/acme/shop", map[string]string{"workspace": "acme", "repository": "shop"}},
	{"bitbucket-workspace-hooks", "workspaces/acme", map[string]string{"workspace": "acme"}},
}

// bitbucketEnv starts the fake (pages of pageSize) behind the contract check and returns a
// client of the target's shipped profile.
func bitbucketEnv(t *testing.T, tg bitbucketTarget, pageSize int) (*bitbucket.Server, *providerstest.Contract, providers.Client) {
	t.Helper()
	srv := bitbucket.New(bitbucket.WithPageSize(pageSize))
	srv.AddRepository("acme", "shop")
	contract := newBitbucketContract(srv.Handler())
	base, stop := core.Start(contract)
	t.Cleanup(stop)
	c, err := rest.Factory().New(providers.Config{APIURL: base + "/2.0", Target: rest.Target(tg.params), Settings: sampleProfile(t, tg.profile), Credential: "bb-token", Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return srv, contract, c
}

// TestBitbucketProfiles runs each shipped profile's whole life cycle against the fake, through
// the check of every answer against Bitbucket's description.
func TestBitbucketProfiles(t *testing.T) {
	ctx := context.Background()
	for _, tg := range bitbucketTargets {
		t.Run(tg.profile, func(t *testing.T) {
			srv, contract, c := bitbucketEnv(t, tg, 2)
			caps := c.Capabilities()
			if caps.Secret != providers.SecretClientChosen || caps.UpdateNeedsSecret || !caps.Markers || caps.Recovery.Mode != providers.RecoveryNone {
				t.Fatalf("capabilities = %+v; want a client-chosen secret an update may omit, markers, no recovery", caps)
			}
			// Hooks made by hand before secrets existed: no description, no secret.
			for i := range 3 {
				srv.Seed(tg.key, bitbucket.Hook{URL: fmt.Sprintf("https://ci.example.com/%d", i), Active: true, Events: []string{"repo:push"}})
			}
			d := providers.Desired{URL: "https://hooks.example.com/bb", Events: []string{"repo:push", "pullrequest:created"}, Description: "ci", Owner: owner, Secret: "s3cret-1"}
			reg, err := c.Create(ctx, d, "k1")
			if err != nil {
				t.Fatal(err)
			}
			stored := srv.Hooks(tg.key)[3]
			if !strings.HasPrefix(reg.ID, "{") || reg.ID != stored.UUID || stored.Secret != "s3cret-1" || !strings.HasPrefix(stored.Description, "ci [hookwarden:") {
				t.Fatalf("create = %+v, stored %+v; want Bitbucket's braced uuid, our secret, the marker after the description", reg, stored)
			}
			regs, err := c.List(ctx)
			if err != nil || len(regs) != 4 {
				t.Fatalf("List = %d, %v; want 4 over two pages", len(regs), err)
			}
			mine := regs[slices.IndexFunc(regs, func(r providers.Registration) bool { return r.ID == reg.ID })]
			if mine.Owner != owner || mine.Description != "ci" || mine.Unfit != "" || mine.Secret != "" || mine.Created.IsZero() {
				t.Errorf("listed %+v; want the marker decoded, no secret, a creation time", mine)
			}
			for _, r := range regs {
				if r.ID != reg.ID && (!r.Owner.IsZero() || r.Unfit != "") {
					t.Errorf("a hand-made hook read as %+v; want unmarked and fit", r)
				}
			}

			// An update without a secret keeps Bitbucket's; with one it replaces it.
			d.Events, d.Disabled, d.Secret = []string{"pullrequest:fulfilled"}, true, ""
			if u, err := c.Update(ctx, reg.ID, d); err != nil || !u.Disabled || !slices.Equal(u.Events, d.Events) {
				t.Fatalf("Update = %+v, %v", u, err)
			}
			if h := srv.Hooks(tg.key)[3]; h.Secret != "s3cret-1" || h.Active {
				t.Errorf("after an update without a secret: %+v; want the secret kept, inactive", h)
			}
			d.Secret = "s3cret-2"
			if _, err := c.Update(ctx, reg.ID, d); err != nil || srv.Hooks(tg.key)[3].Secret != "s3cret-2" {
				t.Errorf("Update with a new secret = %v; stored %q", err, srv.Hooks(tg.key)[3].Secret)
			}

			// Bitbucket refuses what it cannot deliver to, and events it does not know.
			for _, bad := range []providers.Desired{
				{URL: "http://127.0.0.1:8080/hook", Events: []string{"repo:push"}, Secret: "x"},
				{URL: "https://hooks.example.com/x", Events: []string{"push"}, Secret: "x"},
				{URL: "https://hooks.example.com/x", Events: []string{"repo:push"}, Secret: strings.Repeat("s", 129)},
			} {
				if _, err := c.Create(ctx, bad, "k2"); providers.KindOf(err) != providers.Permanent || !strings.Contains(err.Error(), "HTTP 400") {
					t.Errorf("Create(%s, %v) = %v; want Bitbucket's 400 as a Permanent error", bad.URL, bad.Events, err)
				}
			}

			srv.Inject(bitbucket.RateLimited())
			if _, err := c.List(ctx); providers.KindOf(err) != providers.RateLimited || providers.RetryAfter(err) != 0 || !strings.Contains(err.Error(), bitbucket.RateLimitMessage) {
				t.Errorf("List under a rate limit = %v; want RateLimited stating no wait", err)
			}
			if err := c.Delete(ctx, reg.ID); err != nil {
				t.Fatal(err)
			}
			if err := c.Delete(ctx, reg.ID); err != nil {
				t.Errorf("second Delete = %v; want nil (already gone)", err)
			}

			seen := contract.Result(t)
			for _, want := range []string{"list 200", "create 201", "update 200", "delete 204", "delete 404", "create 400", "list 429"} {
				if seen[want] == 0 {
					t.Errorf("no %q answer was checked (checked: %v)", want, seen)
				}
			}
		})
	}
}

// TestBitbucketProfileRefusals: Bitbucket's refusals by role, and the page token it hands out
// is the only one it takes.
func TestBitbucketProfileRefusals(t *testing.T) {
	ctx := context.Background()
	srv, _, repo := bitbucketEnv(t, bitbucketTargets[0], 100)
	srv.SetRole("bb-token", "acme", bitbucket.Member)
	if _, err := repo.List(ctx); providers.KindOf(err) != providers.Unauthorized {
		t.Errorf("a member lists repository hooks: %v; want Unauthorized (403)", err)
	}
	srv.SetRole("bb-token", "acme", bitbucket.Admin)
	if _, err := repo.List(ctx); err != nil {
		t.Errorf("a repository admin lists repository hooks: %v", err)
	}
	wsSrv := bitbucket.New()
	wsSrv.AddWorkspace("acme")
	wsSrv.SetRole("admin-token", "acme", bitbucket.Admin)
	base, stop := wsSrv.Start()
	defer stop()
	c, err := rest.New(providers.Config{APIURL: base + "/2.0", Target: rest.Target(bitbucketTargets[1].params), Settings: sampleProfile(t, "bitbucket-workspace-hooks"), Credential: "admin-token"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create(ctx, providers.Desired{URL: "https://hooks.example.com/ws", Events: []string{"repo:push"}, Secret: "x"}, "k"); providers.KindOf(err) != providers.Unauthorized {
		t.Errorf("a repository admin creates a workspace hook: %v; want Unauthorized: only owners may", err)
	}
	res, err := http.Get(base + "/2.0/workspaces/acme/hooks?page=2") // a page number made up
	if err == nil {
		res.Body.Close()
	}
	if err != nil || res.StatusCode != http.StatusUnauthorized {
		t.Errorf("an unauthenticated list = %v, %v; want 401", res, err)
	}
	req, _ := http.NewRequest(http.MethodGet, base+"/2.0/workspaces/acme/hooks?page=2", nil)
	req.Header.Set("Authorization", "Bearer any")
	if res, err := http.DefaultClient.Do(req); err != nil || res.StatusCode != http.StatusBadRequest {
		t.Errorf("a made-up page = %v, %v; want 400: Bitbucket's next is the only way on", res, err)
	} else {
		res.Body.Close()
	}
}

// TestBitbucketProfileBasicAuth: with a username, the credential is an API token sent as Basic.
func TestBitbucketProfileBasicAuth(t *testing.T) {
	srv := bitbucket.New()
	srv.AddRepository("acme", "shop")
	base, stop := srv.Start()
	defer stop()
	params := map[string]string{"workspace": "acme", "repository": "shop", "username": "ops@acme.example"}
	c := newClient(t, "bitbucket-repository-hooks", base+"/2.0", params, "api-token")
	if _, err := c.List(context.Background()); err != nil {
		t.Fatal(err)
	}
	r := srv.Requests()[0]
	if u, p, ok := (&http.Request{Header: r.Header}).BasicAuth(); !ok || u != "ops@acme.example" || p != "api-token" {
		t.Errorf("Authorization = %q; want Basic for the account and its API token", r.Header.Get("Authorization"))
	}
}

// TestBitbucketProfileVerifiesDeliveries: X-Hub-Signature sha256= over the body; the event id
// is X-Request-UUID, which the signature does not cover, so the body's digest is the replay key.
func TestBitbucketProfileVerifiesDeliveries(t *testing.T) {
	for _, tg := range bitbucketTargets {
		c := newClient(t, tg.profile, "https://api.example.com/2.0", tg.params, "token")
		v, err := rest.NewVerifierFromSpec(c.VerifierSpec())
		if err != nil {
			t.Fatal(err)
		}
		body := []byte(`{"push":{"changes":[]},"repository":{"full_name":"acme/shop"}}`)
		mac := hmac.New(sha256.New, []byte("s3cret"))
		mac.Write(body)
		h := http.Header{}
		h.Set("X-Hub-Signature", "sha256="+hex.EncodeToString(mac.Sum(nil)))
		h.Set("X-Request-UUID", "9f2c7d0e-2b1a-4c55-8d8e-1c2b3a4d5e6f")
		h.Set("X-Event-Key", "repo:push")
		got, err := v.Verify(providers.Delivery{Header: h, Body: body, Now: time.Now()}, [][]byte{[]byte("old"), []byte("s3cret")})
		if err != nil || got.EventID != "9f2c7d0e-2b1a-4c55-8d8e-1c2b3a4d5e6f" || got.ReplayKey != providers.Digest(body) {
			t.Errorf("%s: Verify = %+v, %v", tg.profile, got, err)
		}
		h.Set("X-Hub-Signature", "sha1="+hex.EncodeToString(mac.Sum(nil))[:40])
		if _, err := v.Verify(providers.Delivery{Header: h, Body: body, Now: time.Now()}, [][]byte{[]byte("s3cret")}); err == nil {
			t.Errorf("%s: a sha1 signature verified; Bitbucket signs with sha256 only", tg.profile)
		}
	}
}

// TestBitbucketRequestsPerRound records, from the fake's request log, what a subscription's
// first reconcile sends through the shipped profiles (the list, then the create of a hook that
// is not there) and what a steady resync sends (the list alone), with foreign hooks filling more
// than a page: pages of 100 keep a repository of up to 100 hooks at one request.
func TestBitbucketRequestsPerRound(t *testing.T) {
	ctx := context.Background()
	for _, tg := range bitbucketTargets {
		t.Run(tg.profile, func(t *testing.T) {
			srv, _, c := bitbucketEnv(t, tg, 100)
			for i := range 120 {
				srv.Seed(tg.key, bitbucket.Hook{URL: fmt.Sprintf("https://ci.example.com/%d", i), Active: true, Events: []string{"repo:push"}})
			}
			round := func(create bool) []string {
				before := len(srv.Requests())
				if _, err := c.List(ctx); err != nil {
					t.Fatal(err)
				}
				if create {
					if _, err := c.Create(ctx, providers.Desired{URL: "https://hooks.example.com/bb", Events: []string{"repo:push"}, Owner: owner, Secret: "s"}, "k"); err != nil {
						t.Fatal(err)
					}
				}
				var out []string
				for _, r := range srv.Requests()[before:] {
					q := ""
					if r.Query.Has("page") {
						q = "?page=<next>"
					}
					out = append(out, fmt.Sprintf("%s %s%s %d", r.Method, r.Path, q, r.Status))
				}
				return out
			}
			hooks := "/2.0/" + tg.key + "/hooks"
			first, steady := round(true), round(false)
			wantFirst := []string{"GET " + hooks + " 200", "GET " + hooks + "?page=<next> 200", "POST " + hooks + " 201"}
			wantSteady := []string{"GET " + hooks + " 200", "GET " + hooks + "?page=<next> 200"}
			if !slices.Equal(first, wantFirst) || !slices.Equal(steady, wantSteady) {
				t.Errorf("first round %v, steady %v; want %v and %v", first, steady, wantFirst, wantSteady)
			}
			t.Logf("REPORT %s, 120 foreign hooks: first reconcile %v; steady resync %v", tg.profile, first, steady)
		})
	}
}

// TestBitbucketDeliveriesVerify: what the fake sends as Bitbucket verifies with the shipped
// profile's verifier and the secret the profile set; a 5xx is resent twice more, each attempt
// under a request UUID of its own, so the receiver's replay key (the body's digest) is what
// makes the three one event.
func TestBitbucketDeliveriesVerify(t *testing.T) {
	var mu sync.Mutex
	var got []http.Header
	var bodies [][]byte
	rv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		got, bodies = append(got, r.Header.Clone()), append(bodies, b)
		if len(got) < 3 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(rv.Close)
	srv := bitbucket.New(bitbucket.WithDeliveryClient(rv.Client()))
	srv.AddRepository("acme", "shop")
	base, stop := srv.Start()
	t.Cleanup(stop)
	c := newClient(t, "bitbucket-repository-hooks", base+"/2.0", bitbucketTargets[0].params, "bb-token")
	reg, err := c.Create(context.Background(), providers.Desired{URL: "https://hooks.example.com/bb", Events: []string{"repo:push"}, Owner: owner, Secret: "s3cret"}, "k")
	if err != nil {
		t.Fatal(err)
	}
	// Bitbucket refuses a loopback URL; the test's receiver is one, so it is set out of band.
	srv.Edit("repositories/acme/shop", reg.ID, func(h *bitbucket.Hook) { h.URL = rv.URL + "/hooks/bb" })
	attempts, err := srv.Deliver("repositories/acme/shop", reg.ID, "repo:push", []byte(`{"push":{"changes":[]}}`))
	if err != nil || len(attempts) != 3 || attempts[2].Status != http.StatusOK {
		t.Fatalf("Deliver = %+v, %v; want two 503s resent, then 200", attempts, err)
	}
	v, err := rest.NewVerifierFromSpec(c.VerifierSpec())
	if err != nil {
		t.Fatal(err)
	}
	ids, keys := map[string]bool{}, map[string]bool{}
	for i, h := range got {
		res, err := v.Verify(providers.Delivery{Header: h, Body: bodies[i], Now: time.Now()}, [][]byte{[]byte("s3cret")})
		if err != nil || h.Get("X-Attempt-Number") != fmt.Sprint(i+1) || h.Get("X-Event-Key") != "repo:push" {
			t.Errorf("attempt %d: Verify = %+v, %v; headers %v", i+1, res, err, h)
		}
		ids[res.EventID], keys[res.ReplayKey] = true, true
	}
	if len(ids) != 3 || len(keys) != 1 {
		t.Errorf("%d request UUIDs and %d replay keys over three attempts; want three and one", len(ids), len(keys))
	}
}
