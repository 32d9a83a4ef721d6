package github_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	gogithub "github.com/google/go-github/v75/github"

	"github.com/hookwarden/hookwarden/providers/github/fake"
)

// TestContract runs the client's whole life cycle, on a repository and on an organization,
// through the OpenAPI validator: every request it makes and every response the fake returns
// must satisfy GitHub's description (violations fail the test through newEnv).
func TestContract(t *testing.T) {
	for _, tc := range []struct{ target, prefix string }{{repo, "repos/"}, {org, "orgs/"}} {
		t.Run(tc.target, func(t *testing.T) {
			d := desired("", "push", "pull_request")
			rv := newReceiver(t, d.Secret)
			d.URL = rv.URL + "/hook"
			e := newEnv(t, tc.target, withFake(fake.WithPageSize(2), fake.WithDeliveries(nil)))
			for i := range 3 {
				e.srv.Seed(tc.target, fake.Hook{Active: i%2 == 0, Events: []string{"issues"}, Config: fake.Config{URL: fmt.Sprintf("https://example.com/%d", i), Secret: "x"}})
			}
			ctx := context.Background()
			reg, err := e.client.Create(ctx, d, "")
			if err != nil {
				t.Fatal(err)
			}
			e.srv.WaitDeliveries() // the ping after the create changes last_response
			for range 2 {          // the second round is all 304s
				if regs, err := e.client.List(ctx); err != nil || len(regs) != 4 {
					t.Fatalf("List = %d, %v", len(regs), err)
				}
			}
			d.Events = []string{"*"}
			if _, err := e.client.Update(ctx, reg.ID, d); err != nil {
				t.Fatal(err)
			}
			if err := e.client.Ping(ctx, reg.ID); err != nil {
				t.Fatal(err)
			}
			if err := e.client.Delete(ctx, reg.ID); err != nil {
				t.Fatal(err)
			}
			if err := e.client.Delete(ctx, reg.ID); err != nil {
				t.Fatal(err)
			}
			e.srv.Revoke(token, tc.target)
			if _, err := e.client.List(ctx); err == nil {
				t.Fatal("List after Revoke succeeded")
			}

			ops := e.v.Operations()
			for _, op := range []string{"list-webhooks", "create-webhook", "update-webhook", "ping-webhook", "delete-webhook"} {
				if ops[tc.prefix+op] == 0 {
					t.Errorf("no validated %s%s exchange (validated: %v)", tc.prefix, op, ops)
				}
			}
			if st := e.srv.Stats(); st.NotModified != 2 {
				t.Errorf("%d 304s, want 2 (the second list)", st.NotModified)
			}
			t.Logf("validated %v; statuses the description does not list: %v", ops, e.v.Undocumented())
		})
	}
}

// TestGoGitHubAgainstTheFake points a real GitHub client, go-github, at the fake (through the
// validator): list across pages, create, get, edit and delete, for repository and
// organization hooks.
func TestGoGitHubAgainstTheFake(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, repo, withFake(fake.WithPageSize(2)))
	e.srv.Grant(token, org)
	gh := gogithub.NewClient(nil).WithAuthToken(token)
	base, _ := url.Parse(e.url + "/")
	gh.BaseURL = base

	type hookAPI struct {
		list   func(page int) ([]*gogithub.Hook, *gogithub.Response, error)
		create func(*gogithub.Hook) (*gogithub.Hook, *gogithub.Response, error)
		get    func(int64) (*gogithub.Hook, *gogithub.Response, error)
		edit   func(int64, *gogithub.Hook) (*gogithub.Hook, *gogithub.Response, error)
		del    func(int64) (*gogithub.Response, error)
	}
	apis := map[string]hookAPI{
		repo: {
			list: func(p int) ([]*gogithub.Hook, *gogithub.Response, error) {
				return gh.Repositories.ListHooks(ctx, "octo-org", "hello-world", &gogithub.ListOptions{PerPage: 100, Page: p})
			},
			create: func(h *gogithub.Hook) (*gogithub.Hook, *gogithub.Response, error) {
				return gh.Repositories.CreateHook(ctx, "octo-org", "hello-world", h)
			},
			get: func(id int64) (*gogithub.Hook, *gogithub.Response, error) {
				return gh.Repositories.GetHook(ctx, "octo-org", "hello-world", id)
			},
			edit: func(id int64, h *gogithub.Hook) (*gogithub.Hook, *gogithub.Response, error) {
				return gh.Repositories.EditHook(ctx, "octo-org", "hello-world", id, h)
			},
			del: func(id int64) (*gogithub.Response, error) {
				return gh.Repositories.DeleteHook(ctx, "octo-org", "hello-world", id)
			},
		},
		org: {
			list: func(p int) ([]*gogithub.Hook, *gogithub.Response, error) {
				return gh.Organizations.ListHooks(ctx, "octo-org", &gogithub.ListOptions{PerPage: 100, Page: p})
			},
			create: func(h *gogithub.Hook) (*gogithub.Hook, *gogithub.Response, error) {
				return gh.Organizations.CreateHook(ctx, "octo-org", h)
			},
			get: func(id int64) (*gogithub.Hook, *gogithub.Response, error) {
				return gh.Organizations.GetHook(ctx, "octo-org", id)
			},
			edit: func(id int64, h *gogithub.Hook) (*gogithub.Hook, *gogithub.Response, error) {
				return gh.Organizations.EditHook(ctx, "octo-org", id, h)
			},
			del: func(id int64) (*gogithub.Response, error) { return gh.Organizations.DeleteHook(ctx, "octo-org", id) },
		},
	}
	for _, target := range []string{repo, org} {
		t.Run(target, func(t *testing.T) {
			api := apis[target]
			var created []int64
			for i := range 5 {
				h, resp, err := api.create(&gogithub.Hook{
					Name:   gogithub.Ptr("web"),
					Events: []string{"push"},
					Active: gogithub.Ptr(true),
					Config: &gogithub.HookConfig{URL: gogithub.Ptr(fmt.Sprintf("https://example.com/%d", i)), ContentType: gogithub.Ptr("json"), InsecureSSL: gogithub.Ptr("0"), Secret: gogithub.Ptr("s3cret")},
				})
				if err != nil || resp.StatusCode != http.StatusCreated {
					t.Fatalf("CreateHook: %v", err)
				}
				if h.GetConfig().GetSecret() != fake.MaskedSecret || h.GetConfig().GetInsecureSSL() != "0" {
					t.Errorf("created hook config %+v, want the secret masked and insecure_ssl \"0\"", h.GetConfig())
				}
				created = append(created, h.GetID())
			}

			var listed []int64
			pages := 0
			for page := 1; page != 0; pages++ {
				hooks, resp, err := api.list(page)
				if err != nil {
					t.Fatalf("ListHooks page %d: %v", page, err)
				}
				for _, h := range hooks {
					listed = append(listed, h.GetID())
				}
				page = resp.NextPage
			}
			if !slices.Equal(listed, created) || pages != 3 {
				t.Errorf("listed %v in %d pages, want %v in 3", listed, pages, created)
			}

			got, _, err := api.get(created[0])
			if err != nil || got.GetConfig().GetURL() != "https://example.com/0" {
				t.Fatalf("GetHook = %+v, %v", got, err)
			}
			edited, _, err := api.edit(created[0], &gogithub.Hook{Events: []string{"issues"}, Active: gogithub.Ptr(false),
				Config: &gogithub.HookConfig{URL: gogithub.Ptr("https://example.com/edited"), ContentType: gogithub.Ptr("json"), Secret: gogithub.Ptr("n3w")}})
			if err != nil || edited.GetActive() || !slices.Equal(edited.Events, []string{"issues"}) || edited.GetConfig().GetURL() != "https://example.com/edited" {
				t.Fatalf("EditHook = %+v, %v", edited, err)
			}
			if s := e.srv.Hooks(target)[0].Config.Secret; s != "n3w" {
				t.Errorf("stored secret after EditHook = %q, want n3w", s)
			}
			for _, id := range created {
				if resp, err := api.del(id); err != nil || resp.StatusCode != http.StatusNoContent {
					t.Fatalf("DeleteHook: %v", err)
				}
			}
			_, err = api.del(created[0])
			var ge *gogithub.ErrorResponse
			if !asErrorResponse(err, &ge) || ge.Response.StatusCode != http.StatusNotFound || !strings.Contains(ge.Message, "Not Found") {
				t.Errorf("second DeleteHook: %v, want GitHub's 404", err)
			}
		})
	}
}

func asErrorResponse(err error, target **gogithub.ErrorResponse) bool {
	er, ok := err.(*gogithub.ErrorResponse) //nolint:errorlint // go-github returns it unwrapped; a wrapped one is a change to notice
	*target = er
	return ok
}

// TestGoGitHubReadsTheDeliveryLog points go-github's delivery API at the fake (through the
// validator): the cursor paging it reads from Link, one delivery with its request, and a
// redelivery answered 202, on a repository and an organization hook.
func TestGoGitHubReadsTheDeliveryLog(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, repo)
	e.srv.Grant(token, org)
	gh := gogithub.NewClient(nil).WithAuthToken(token)
	base, _ := url.Parse(e.url + "/")
	gh.BaseURL = base
	down := "http://" + freeAddr(t) + "/down"

	for _, target := range []string{repo, org} {
		t.Run(target, func(t *testing.T) {
			h := e.srv.Seed(target, fake.Hook{Active: true, Events: []string{"push"}, Config: fake.Config{URL: down, ContentType: "json", Secret: "s"}})
			var want []string
			for i := range 5 {
				ds, err := e.srv.Emit(target, "push", []byte(fmt.Sprintf(`{"n":%d}`, i)))
				if err != nil || len(ds) != 1 {
					t.Fatal(ds, err)
				}
				want = append([]string{ds[0].GUID}, want...)
			}
			list := func(c string) ([]*gogithub.HookDelivery, *gogithub.Response, error) {
				opts := &gogithub.ListCursorOptions{PerPage: 2, Cursor: c}
				if target == org {
					return gh.Organizations.ListHookDeliveries(ctx, "octo-org", h.ID, opts)
				}
				return gh.Repositories.ListHookDeliveries(ctx, "octo-org", "hello-world", h.ID, opts)
			}
			var got []string
			var first *gogithub.HookDelivery
			pages := 0
			for c := ""; ; {
				ds, resp, err := list(c)
				pages++
				if err != nil {
					t.Fatal(err)
				}
				for _, d := range ds {
					got = append(got, d.GetGUID())
					if first == nil {
						first = d
					}
				}
				if c = resp.Cursor; c == "" {
					break
				}
			}
			if !slices.Equal(got, want) || pages != 3 || first.GetStatusCode() != 0 || first.GetEvent() != "push" {
				t.Errorf("listed %v in %d pages (newest %+v), want %v in 3", got, pages, first, want)
			}
			if target == repo {
				d, _, err := gh.Repositories.GetHookDelivery(ctx, "octo-org", "hello-world", h.ID, first.GetID())
				if err != nil || d.GetGUID() != want[0] || d.Request.GetHeader("X-Github-Delivery") != want[0] {
					t.Errorf("GetHookDelivery = %+v, %v", d, err)
				}
			}
			var resp *gogithub.Response
			var err error
			if target == org {
				_, resp, err = gh.Organizations.RedeliverHookDelivery(ctx, "octo-org", h.ID, first.GetID())
			} else {
				_, resp, err = gh.Repositories.RedeliverHookDelivery(ctx, "octo-org", "hello-world", h.ID, first.GetID())
			}
			// go-github reports a 202 as *AcceptedError ("job scheduled on GitHub side").
			var accepted *gogithub.AcceptedError
			if !errors.As(err, &accepted) || resp.StatusCode != http.StatusAccepted {
				t.Errorf("RedeliverHookDelivery = %v, want go-github's AcceptedError for the 202", err)
			}
			e.srv.WaitDeliveries()
			if log := e.srv.DeliveryLog(target, h.ID); len(log) != 6 || !log[0].Redelivery || log[0].GUID != want[0] {
				t.Errorf("log after the redelivery: %+v", log[0])
			}
		})
	}
}
