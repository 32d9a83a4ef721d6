package rest_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/hookwarden/hookwarden/providers"
)

// canary is a value an odd object carries: it must never reach Unfit (which users see).
const canary = "value-canary-4711"

// TestListReportsUnfitItemsAndKeepsTheRest: one object that does not fit the profile (made by
// another tool, or by an older API version) is returned marked, with what could be read, and
// every other registration intact; before, it failed the whole list and stalled every
// subscription on the account.
func TestListReportsUnfitItemsAndKeepsTheRest(t *testing.T) {
	flags := profileWith(t, "events", `raw:{"style":"flags","flags":{"push":"push_events","issues":"issues_events"}}`,
		"object.disabled", `raw:{"path":"active","invert":true}`)
	good := func(id string) string {
		return fmt.Sprintf(`{"id":%q,"url":"https://a.example.com/%s","events":["e"]}`, id, id)
	}
	goodFlags := func(id string) string {
		return fmt.Sprintf(`{"id":%q,"url":"https://a.example.com/%s","push_events":true,"issues_events":false,"active":true}`, id, id)
	}
	cases := []struct {
		name, reason string
		profile      []byte
		good         func(string) string
		odd          string
		want         providers.Registration
	}{
		{"url missing", "a field the object lacks is named, the id still read", profileWith(t), good,
			`{"id":"odd","endpoint":"` + canary + `","events":["e"]}`,
			providers.Registration{ID: "odd", Events: []string{"e"}, Unfit: `object.url "url" is missing`}},
		{"url null", "a null URL cannot be served", profileWith(t), good,
			`{"id":"odd","url":null,"events":["e"]}`,
			providers.Registration{ID: "odd", Events: []string{"e"}, Unfit: `object.url "url" is null`}},
		{"events of another type", "the URL is still read, so the report can name it", profileWith(t), good,
			`{"id":"odd","url":"https://odd.example.com","events":"` + canary + `"}`,
			providers.Registration{ID: "odd", URL: "https://odd.example.com", Unfit: `events "events" is not an array`}},
		{"several problems", "all of them at once", profileWith(t), good,
			`{"id":"odd","url":{"v":"` + canary + `"},"events":[1]}`,
			providers.Registration{ID: "odd", Unfit: `object.url "url" is not a string; events "events" holds a value that is not a string`}},
		{"id unreadable", "an entry without id can only be reported", profileWith(t), good,
			`{"id":{"x":"` + canary + `"},"url":"https://odd.example.com","events":["e"]}`,
			providers.Registration{URL: "https://odd.example.com", Events: []string{"e"}, Unfit: `object.id "id" is not a string`}},
		{"id missing", "likewise", profileWith(t), good,
			`{"url":"https://odd.example.com","events":["e"]}`,
			providers.Registration{URL: "https://odd.example.com", Events: []string{"e"}, Unfit: `object.id "id" is missing`}},
		{"flag null", "null for a flag is false, and fits (GitLab renders flags a hook never set as null)", flags, goodFlags,
			`{"id":"odd","url":"https://odd.example.com","push_events":null,"issues_events":true,"active":null}`,
			providers.Registration{ID: "odd", URL: "https://odd.example.com", Events: []string{"issues"}, Disabled: true}},
		{"flag missing", "a flag an older API version does not have reads as false", flags, goodFlags,
			`{"id":"odd","url":"https://odd.example.com","push_events":true,"active":true}`,
			providers.Registration{ID: "odd", URL: "https://odd.example.com", Events: []string{"push"}}},
		{"flag a string", "a flag of another type does not fit", flags, goodFlags,
			`{"id":"odd","url":"https://odd.example.com","push_events":"` + canary + `","issues_events":true,"active":"yes"}`,
			providers.Registration{ID: "odd", URL: "https://odd.example.com", Events: []string{"issues"},
				Unfit: `events.flags.push "push_events" is not a boolean; object.disabled "active" is not a boolean`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := handlerClient(t, tc.profile, func(w http.ResponseWriter, r *http.Request) {
				fmt.Fprintf(w, "[%s,%s,%s]", tc.good("a"), tc.odd, tc.good("b"))
			})
			regs, err := c.List(context.Background())
			if err != nil {
				t.Fatalf("%s\nList: %v; want the list with the odd item marked", tc.reason, err)
			}
			if len(regs) != 3 {
				t.Fatalf("%s\nList = %d registrations; want 3", tc.reason, len(regs))
			}
			for i, id := range map[int]string{0: "a", 2: "b"} {
				if r := regs[i]; r.ID != id || r.URL != "https://a.example.com/"+id || r.Unfit != "" || len(r.Events) != 1 {
					t.Errorf("%s\nregistration %s = %+v; want it intact", tc.reason, id, r)
				}
			}
			if d := cmp.Diff(tc.want, regs[1], cmpopts.EquateEmpty()); d != "" {
				t.Errorf("%s\nodd registration (-want +got):\n%s", tc.reason, d)
			}
			if strings.Contains(regs[1].Unfit, canary) {
				t.Errorf("Unfit shows a value from the object: %q", regs[1].Unfit)
			}
		})
	}
}

// A single answer (create, get, update) must fit whole: the error names every problem, and a
// create returns what it could read, so the id of a registration that now exists is not lost.
func TestCreateAnswerThatDoesNotFitFailsWithWhatWasRead(t *testing.T) {
	c := handlerClient(t, profileWith(t), func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
		fmt.Fprint(w, `{"id":"h1","endpoint":"`+canary+`","events":["e"]}`)
	})
	reg, err := c.Create(context.Background(), providers.Desired{URL: "https://a.example.com", Events: []string{"e"}}, "k")
	if providers.KindOf(err) != providers.Permanent || !strings.Contains(err.Error(), `object.url "url" is missing`) {
		t.Fatalf("Create = %v; want Permanent naming object.url", err)
	}
	if reg.ID != "h1" {
		t.Errorf("Create returned %+v; want the id it could read", reg)
	}
	if strings.Contains(err.Error(), canary) {
		t.Errorf("the error shows a value from the answer: %v", err)
	}
}

// A flag the API does not know is dropped silently by it (an older GitLab and
// milestone_events): Create says so instead of leaving a registration that reads as never
// subscribed and is "repaired" on every resync.
func TestCreateRefusesAFlagTheAPIDropped(t *testing.T) {
	profile := profileWith(t, "events", `raw:{"style":"flags","flags":{"push":"push_events","milestone":"milestone_events"}}`)
	c := handlerClient(t, profile, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
		fmt.Fprint(w, `{"id":7,"url":"https://a.example.com","push_events":true}`)
	})
	ctx := context.Background()
	if reg, err := c.Create(ctx, providers.Desired{URL: "https://a.example.com", Events: []string{"push"}}, "k"); err != nil || reg.ID != "7" {
		t.Fatalf("Create(push) = %+v, %v; want it created (milestone_events unselected may be absent)", reg, err)
	}
	reg, err := c.Create(ctx, providers.Desired{URL: "https://a.example.com", Events: []string{"push", "milestone"}}, "k")
	if providers.KindOf(err) != providers.Permanent || !strings.Contains(err.Error(), `events.flags.milestone "milestone_events" is missing`) {
		t.Fatalf("Create(push, milestone) = %v; want Permanent naming the dropped flag", err)
	}
	if reg.ID != "7" {
		t.Errorf("Create returned %+v; want the created registration's id with the error", reg)
	}
}
