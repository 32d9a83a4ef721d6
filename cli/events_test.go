package cli

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hookwarden/hookwarden/receiver/adminapi"
)

// TestFillPage: events list reads on past pages the receiver answers short (a sparse filter on
// Redis), until it holds --limit events or the walk ends, within its bound of requests, with a
// progress line every listProgressEvery requests; it asks each request only for what it lacks.
func TestFillPage(t *testing.T) {
	// ledger is the receiver's walk: one page per request, each holding the events listed
	// (at most the limit asked), the last page without a cursor.
	type result struct {
		Events   []string
		Next     string
		Requests int
		Asked    []int // the limit of each request
		Progress int   // progress lines
	}
	cases := []struct {
		reason string
		pages  [][]string
		limit  int
		max    int
		want   result
	}{
		{"one full page: one request", [][]string{{"a", "b"}, {"c"}}, 2, 25,
			result{Events: []string{"a", "b"}, Next: "1", Requests: 1, Asked: []int{2}}},
		{"an empty page, then the rest: read on to fill the limit", [][]string{{}, {}, {"a"}, {"b"}, {"c"}}, 2, 25,
			result{Events: []string{"a", "b"}, Next: "4", Requests: 4, Asked: []int{2, 2, 2, 1}}},
		{"the walk ends short of the limit: no cursor", [][]string{{}, {"a"}, {}}, 5, 25,
			result{Events: []string{"a"}, Requests: 3, Asked: []int{5, 5, 4}}},
		{"nothing matches for longer than the bound: stop, with the cursor to go on", make([][]string, 30), 2, 12,
			result{Next: "12", Requests: 12, Asked: []int{2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2}, Progress: 2}},
	}
	for _, c := range cases {
		var got result
		fetch := func(after string, n int) (adminapi.EventPage, error) {
			at := 0
			if after != "" {
				at, _ = strconv.Atoi(after)
			}
			got.Asked = append(got.Asked, n)
			if len(c.pages[at]) > n {
				t.Fatalf("%s: the test's page %d holds more than the %d events asked", c.reason, at, n)
			}
			var p adminapi.EventPage
			for _, id := range c.pages[at] {
				p.Events = append(p.Events, adminapi.Event{EventID: id})
			}
			if at+1 < len(c.pages) {
				p.Next = strconv.Itoa(at + 1)
			}
			return p, nil
		}
		var progress strings.Builder
		page, requests, err := fillPage(fetch, "", c.limit, c.max, &progress)
		if err != nil {
			t.Fatalf("%s: %v", c.reason, err)
		}
		got.Events = []string{}
		for _, e := range page.Events {
			got.Events = append(got.Events, e.EventID)
		}
		if c.want.Events == nil {
			c.want.Events = []string{}
		}
		got.Next, got.Requests, got.Progress = page.Next, requests, strings.Count(progress.String(), "\n")
		if diff := cmp.Diff(c.want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", c.reason, diff)
		}
	}
}

// TestFillPageStopsAtAnError: a request that fails ends the list with its error.
func TestFillPageStopsAtAnError(t *testing.T) {
	refused := errors.New("the receiver answered 500")
	calls := 0
	fetch := func(string, int) (adminapi.EventPage, error) {
		calls++
		if calls == 2 {
			return adminapi.EventPage{}, refused
		}
		return adminapi.EventPage{Events: []adminapi.Event{}, Next: "x"}, nil
	}
	if _, requests, err := fillPage(fetch, "", 3, 25, &strings.Builder{}); !errors.Is(err, refused) || requests != 2 {
		t.Errorf("fillPage = %d requests, %v; want 2, the receiver's error", requests, err)
	}
}
