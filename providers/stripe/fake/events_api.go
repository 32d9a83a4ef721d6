package fake

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

const eventsPath = "/v1/events"

// visibleEvents are the account's events within EventRetention of now, newest first (ties in
// creation order, newest first), as /v1/events lists them.
func (a *account) visibleEvents(now time.Time) []*eventEntry {
	cutoff := now.Add(-EventRetention)
	var out []*eventEntry
	for _, e := range a.events {
		if !e.Created.Before(cutoff) {
			out = append(out, e)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if ti, tj := out[i].Created.Unix(), out[j].Created.Unix(); ti != tj {
			return ti > tj
		}
		return out[i].seq > out[j].seq
	})
	return out
}

// eventFilter is what a /v1/events request selects by.
type eventFilter struct {
	typ      string // one name, or a group ending in "*"
	types    []string
	created  func(int64) bool
	delivery *bool // delivery_success
}

func (f eventFilter) match(e *eventEntry) bool {
	switch {
	case f.typ != "" && !typeMatches(f.typ, e.Type):
		return false
	case f.types != nil && !slices.Contains(f.types, e.Type):
		return false
	case f.created != nil && !f.created(e.Created.Unix()):
		return false
	case f.delivery != nil && *f.delivery != (e.PendingWebhooks == 0):
		return false
	}
	return true
}

// typeMatches: "invoice.*" matches every invoice event, "*" every event.
func typeMatches(pattern, typ string) bool {
	if prefix, ok := strings.CutSuffix(pattern, "*"); ok {
		return strings.HasPrefix(typ, prefix)
	}
	return pattern == typ
}

//nolint:funlen // Stripe's list parameters, one block each
func listEvents(a *account, p url.Values, now time.Time, pageSize int) result {
	if err := allowOnly(p, "created", "delivery_success", "ending_before", "expand", "limit", "starting_after", "type", "types"); err != nil {
		return err.result()
	}
	limit, err := limitParam(p, pageSize)
	if err != nil {
		return err.result()
	}
	var f eventFilter
	var sent bool
	if f.typ, _, err = scalar(p, "type"); err != nil {
		return err.result()
	}
	if f.types, sent, err = listParam(p, "types"); err != nil {
		return err.result()
	}
	switch {
	case sent && f.typ != "":
		return invalid(http.StatusBadRequest, "", "types", "You may pass either `type` or `types`, but not both.").result()
	case len(f.types) > MaxEventTypes:
		return invalid(http.StatusBadRequest, "", "types", "Invalid array: types may hold at most %d event types, but %d were given.", MaxEventTypes, len(f.types)).result()
	}
	if f.created, err = createdParam(p); err != nil {
		return err.result()
	}
	if v, ok, err := boolParam(p, "delivery_success"); err != nil {
		return err.result()
	} else if ok {
		f.delivery = &v
	}
	after, _, err := scalar(p, "starting_after")
	if err != nil {
		return err.result()
	}
	before, _, err := scalar(p, "ending_before")
	if err != nil {
		return err.result()
	}
	if after != "" && before != "" {
		return invalid(http.StatusBadRequest, "", "", "You may only specify one of these parameters: starting_after, ending_before.").result()
	}

	all := a.visibleEvents(now)
	lo, hi := 0, len(all) // window of candidates, newest first
	cursor, param := after, "starting_after"
	if before != "" {
		cursor, param = before, "ending_before"
	}
	if cursor != "" {
		i := slices.IndexFunc(all, func(e *eventEntry) bool { return e.ID == cursor })
		if i < 0 {
			return invalid(http.StatusBadRequest, "resource_missing", param, "No such event: '%s'", cursor).result()
		}
		if after != "" {
			lo = i + 1
		} else {
			hi = i
		}
	}
	var matched []*eventEntry
	for _, e := range all[lo:hi] {
		if f.match(e) {
			matched = append(matched, e)
		}
	}
	page, hasMore := matched, false
	if len(matched) > limit {
		hasMore = true
		if before != "" {
			// ending_before pages backwards: the events closest to the cursor, still newest first.
			page = matched[len(matched)-limit:]
		} else {
			page = matched[:limit]
		}
	}
	data := make([]json.RawMessage, 0, len(page))
	for _, e := range page {
		data = append(data, e.wire())
	}
	return ok200(struct {
		Object  string            `json:"object"`
		Data    []json.RawMessage `json:"data"`
		HasMore bool              `json:"has_more"`
		URL     string            `json:"url"`
	}{"list", data, hasMore, eventsPath})
}

// createdParam reads created=N or created[gt|gte|lt|lte]=N (nil: no filter).
func createdParam(p url.Values) (func(int64) bool, *apiError) {
	var tests []func(int64) bool
	for k, vs := range p {
		if topName(k) != "created" || len(vs) == 0 {
			continue
		}
		v := vs[len(vs)-1]
		n, convErr := strconv.ParseInt(v, 10, 64)
		if convErr != nil {
			return nil, invalid(http.StatusBadRequest, "parameter_invalid_integer", k, "Invalid integer: %s", v)
		}
		switch k {
		case "created":
			tests = append(tests, func(c int64) bool { return c == n })
		case "created[gt]":
			tests = append(tests, func(c int64) bool { return c > n })
		case "created[gte]":
			tests = append(tests, func(c int64) bool { return c >= n })
		case "created[lt]":
			tests = append(tests, func(c int64) bool { return c < n })
		case "created[lte]":
			tests = append(tests, func(c int64) bool { return c <= n })
		default:
			return nil, invalid(http.StatusBadRequest, "parameter_unknown", k, "Received unknown parameter: %s", k)
		}
	}
	if tests == nil {
		return nil, nil
	}
	return func(c int64) bool {
		for _, t := range tests {
			if !t(c) {
				return false
			}
		}
		return true
	}, nil
}

func retrieveEvent(a *account, id string, p url.Values, now time.Time) result {
	if err := allowOnly(p, "expand"); err != nil {
		return err.result()
	}
	visible := a.visibleEvents(now)
	i := slices.IndexFunc(visible, func(e *eventEntry) bool { return e.ID == id })
	if i < 0 {
		res := invalid(http.StatusNotFound, "resource_missing", "id", "No such event: '%s'", id).result()
		res.cache = true
		return res
	}
	return ok200(visible[i].wire())
}
