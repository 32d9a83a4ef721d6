package rest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/hookwarden/hookwarden/providers"
)

// List returns every registration, following all pages. It returns either the whole list or
// an error, never part of one: a loop (a cursor or next link seen before, an id on two
// pages), more than limits.maxPages pages, or a page that is not shaped as the profile says
// (no array of items) each fail the whole list, so nothing is created or deleted on a partial
// view. One item that does not fit the profile's shape (a field missing or of another type,
// an object made by another tool or an older API version) does not: it is returned with what
// could be read and Unfit saying what did not fit; one whose id cannot be read has an empty
// ID.
func (c *Client) List(ctx context.Context) ([]providers.Registration, error) {
	items, err := c.listItems(ctx)
	if err != nil {
		return nil, err
	}
	regs := make([]providers.Registration, 0, len(items))
	seen := map[string]bool{}
	for _, it := range items {
		reg, problems := c.read(it, readListed)
		if len(problems) > 0 {
			reg.Unfit = strings.Join(problems, "; ")
		}
		if reg.ID != "" && seen[reg.ID] {
			return nil, c.pagingError("registration %s is listed twice: the pages overlap", reg.ID)
		}
		seen[reg.ID] = true
		regs = append(regs, reg)
	}
	if c.c.p.Events.Style == EventsPerRegistration {
		return groups(regs), nil
	}
	return regs, nil
}

func (c *Client) pagingError(format string, args ...any) error {
	return &providers.Error{Kind: providers.Permanent, Message: fmt.Sprintf("list: "+format+" (profile %s, list.pagination)", append(args, c.c.p.Name)...)}
}

// listItems fetches every page of the list and returns the raw items.
func (c *Client) listItems(ctx context.Context) ([]gjson.Result, error) {
	return c.pages(ctx, paged{op: &c.c.p.List, field: "list", idPath: c.c.p.Object.ID.Path})
}

// paged is one paged list request: the registrations (list) or a registration's delivery log.
type paged struct {
	op *ListOp
	// field is the profile's path of the op, for messages (list, recover.redeliver.log).
	field string
	// id is the registration the op's templates name ({{.ID}}); empty for list.
	id string
	// idPath is each item's id, checked for pages that overlap (and the cursor of
	// nextFromLastID).
	idPath string
	// bestEffort: past limits.maxPages, return what was read instead of failing.
	bestEffort bool
}

// pages fetches every page of a paged request and returns the raw items.
//
//nolint:funlen // the three paging styles share one loop and its guards
func (c *Client) pages(ctx context.Context, src paged) ([]gjson.Result, error) {
	lp := *src.op
	pg := lp.Pagination
	pagingError := func(format string, args ...any) error {
		return &providers.Error{Kind: providers.Permanent, Message: fmt.Sprintf(src.field+": "+format+" (profile %s, "+src.field+".pagination)", append(args, c.c.p.Name)...)}
	}
	var all []gjson.Result
	page := pg.FirstPage
	if page == 0 && pg.Style == PagePage {
		page = 1
	}
	offset := 0
	cursor := ""
	nextURL := ""
	seenCursor, seenID := map[string]bool{}, map[string]bool{}
	for n := 1; ; n++ {
		if n > c.maxPages {
			if src.bestEffort {
				return all, nil
			}
			return nil, pagingError("more than %d pages (limits.maxPages)", c.maxPages)
		}
		q := url.Values{}
		if pg.SizeParam != "" && pg.Size > 0 {
			q.Set(pg.SizeParam, strconv.Itoa(pg.Size))
		}
		switch pg.Style {
		case PagePage:
			q.Set(pg.PageParam, strconv.Itoa(page))
		case PageOffset:
			q.Set(pg.OffsetParam, strconv.Itoa(offset))
		case PageCursor:
			if cursor != "" {
				q.Set(pg.CursorParam, cursor)
			}
		}
		k := call{op: &lp.Op, method: http.MethodGet, id: src.id, query: q}
		if nextURL != "" {
			k = call{op: &lp.Op, method: http.MethodGet, id: src.id, rawURL: nextURL}
		}
		res, err := c.do(ctx, k)
		if err != nil {
			return nil, err
		}
		body := gjson.ParseBytes(res.body)
		arr := body
		if lp.Items != "" {
			arr = body.Get(lp.Items)
		}
		if !arr.IsArray() {
			where := "the response"
			if lp.Items != "" {
				where = fmt.Sprintf("%s.items %q", src.field, lp.Items)
			}
			return nil, &providers.Error{Kind: providers.Permanent, Message: fmt.Sprintf("%s page %d: %s is not an array in the response (profile %s)", src.field, n, where, c.c.p.Name)}
		}
		items := arr.Array()
		for _, it := range items {
			// Checked per page, so a server that serves one page forever is caught at once.
			id := it.Get(src.idPath).String()
			if seenID[id] && id != "" {
				return nil, pagingError("%s is listed twice: the pages overlap", id)
			}
			seenID[id] = true
		}
		all = append(all, items...)

		switch pg.Style {
		case PageNone, "":
			return all, nil
		case PagePage:
			if len(items) < pg.Size {
				return all, nil
			}
			page++
		case PageOffset:
			if pg.More != "" {
				more := body.Get(pg.More)
				if more.Type != gjson.True && more.Type != gjson.False {
					return nil, pagingError("page %d: more %q is missing or not a boolean", n, pg.More)
				}
				if !more.Bool() {
					return all, nil
				}
				if len(items) == 0 {
					return nil, pagingError("page %d is empty but says more pages follow", n)
				}
			} else if len(items) < pg.Size {
				return all, nil
			}
			offset += len(items)
		case PageCursor:
			end := false
			if pg.HasMore != "" {
				v := body.Get(pg.HasMore)
				if v.Type != gjson.True && v.Type != gjson.False {
					return nil, pagingError("page %d: hasMore %q is missing or not a boolean", n, pg.HasMore)
				}
				end = !v.Bool()
			}
			if pg.Done != "" {
				v := body.Get(pg.Done)
				if v.Type != gjson.True && v.Type != gjson.False {
					return nil, pagingError("page %d: done %q is missing or not a boolean", n, pg.Done)
				}
				end = v.Bool()
			}
			if end {
				return all, nil
			}
			next := ""
			if pg.NextFromLastID {
				if len(items) > 0 {
					next = items[len(items)-1].Get(src.idPath).String()
				}
			} else {
				next = body.Get(pg.Next).String()
			}
			if next == "" {
				if pg.HasMore != "" || pg.Done != "" {
					return nil, pagingError("page %d says more pages follow but gives no cursor", n)
				}
				return all, nil
			}
			if seenCursor[next] {
				return nil, pagingError("page %d repeats the cursor of an earlier page", n)
			}
			seenCursor[next] = true
			cursor = next
		case PageLink, PageNextURL:
			next := ""
			if pg.Style == PageLink {
				next = providers.ParseLinks(res.header.Values("Link"))["next"]
			} else if v := body.Get(pg.Next); v.Exists() && v.Type != gjson.Null {
				if v.Type != gjson.String {
					return nil, pagingError("page %d: next %q is not a string", n, pg.Next)
				}
				next = v.String()
			}
			if next == "" {
				return all, nil
			}
			abs, err := c.sameOrigin(next, pagingError)
			if err != nil {
				return nil, err
			}
			if seenCursor[abs] {
				return nil, pagingError("page %d links to an earlier page as next", n)
			}
			seenCursor[abs] = true
			nextURL = abs
		}
	}
}

// sameOrigin resolves a next link against the base URL and refuses one on another host: the
// credential is sent with it.
func (c *Client) sameOrigin(link string, pagingError func(string, ...any) error) (string, error) {
	base, _ := url.Parse(c.base)
	u, err := base.Parse(link)
	if err != nil {
		return "", pagingError("the next link does not parse")
	}
	if u.Scheme != base.Scheme || u.Host != base.Host {
		return "", pagingError("the next link points at another host (%s)", u.Host)
	}
	return u.String(), nil
}

// get reads one registration (the get request, or the list when the profile has none).
func (c *Client) get(ctx context.Context, id string) (providers.Registration, error) {
	if c.c.p.Get == nil {
		regs, err := c.List(ctx)
		if err != nil {
			return providers.Registration{}, err
		}
		for _, r := range regs {
			if r.ID == id && r.Unfit != "" {
				return r, c.unfitError("registration "+id, []string{r.Unfit})
			}
			if r.ID == id {
				return r, nil
			}
		}
		return providers.Registration{}, &providers.Error{Kind: providers.NotFound, Message: "registration " + id + " is not listed"}
	}
	res, err := c.do(ctx, call{op: c.c.p.Get, method: http.MethodGet, id: id})
	if err != nil {
		return providers.Registration{}, err
	}
	obj, err := c.unwrap(res.body, "get "+id)
	if err != nil {
		return providers.Registration{}, err
	}
	return c.readOne(obj, "get "+id, readListed)
}

// Create registers a webhook. Per-registration APIs get one registration per event; the
// result stands for all of them. For secrets that are fetched, the secret is fetched at once;
// if that fails, the created registration is returned with the error, so the caller records
// its id.
func (c *Client) Create(ctx context.Context, d providers.Desired, idempotencyKey string) (providers.Registration, error) {
	if err := validateDesired(d); err != nil {
		return providers.Registration{}, err
	}
	if c.c.p.Events.Style == EventsPerRegistration {
		return c.createGroup(ctx, d, idempotencyKey)
	}
	reg, err := c.createOne(ctx, d, d.Events, idempotencyKey)
	if err != nil {
		return reg, err
	}
	if c.c.p.Secret.Mode == SecretModeFetched {
		secret, err := c.FetchSecret(ctx, reg.ID)
		if err != nil {
			return reg, err
		}
		reg.Secret = secret
	}
	return reg, nil
}

func (c *Client) createOne(ctx context.Context, d providers.Desired, events []string, key string) (providers.Registration, error) {
	if c.c.p.Secret.Mode == SecretModeClientChosen && d.Secret == "" {
		return providers.Registration{}, invalid("a client-chosen secret is required on create")
	}
	body, err := c.build(d, bodyCreate, events, "")
	if err != nil {
		return providers.Registration{}, err
	}
	res, err := c.do(ctx, call{op: &c.c.p.Create.Op, method: http.MethodPost, idem: key, body: body, already: c.c.p.Create.AlreadyExists, secret: d.Secret})
	if err != nil {
		return providers.Registration{}, err
	}
	obj, err := c.unwrap(res.body, "create")
	if err != nil {
		return providers.Registration{}, err
	}
	reg, err := c.readOne(obj, "create", readCreated)
	if err != nil {
		return reg, err
	}
	return reg, c.checkStored(obj, d, events, bodyCreate, "create")
}

// Update changes registration id to d in place, with the profile's strategy. A change to a
// field the API cannot update (update.recreate, or strategy none) is refused with a Permanent
// error before anything is sent: the registration must be recreated. An answer without the
// object (Zendesk's 204) is followed by a read.
func (c *Client) Update(ctx context.Context, id string, d providers.Desired) (providers.Registration, error) {
	if id == "" {
		return providers.Registration{}, invalid("registration id is empty")
	}
	if err := validateDesired(d); err != nil {
		return providers.Registration{}, err
	}
	p := c.c.p
	if p.Events.Style == EventsPerRegistration {
		return c.updateGroup(ctx, id, d)
	}
	if p.Update.Strategy == UpdateNone || len(p.Update.Recreate) > 0 {
		cur, err := c.get(ctx, id)
		if err != nil {
			return providers.Registration{}, err
		}
		if changed := c.immutableChanges(cur, d); len(changed) > 0 {
			return providers.Registration{}, invalid(fmt.Sprintf("profile %s cannot change %s of registration %s in place: it must be recreated", p.Name, strings.Join(changed, ", "), id))
		}
		if p.Update.Strategy == UpdateNone {
			return cur, nil
		}
	}
	return c.updateOne(ctx, id, d, d.Events)
}

func (c *Client) updateOne(ctx context.Context, id string, d providers.Desired, events []string) (providers.Registration, error) {
	p := c.c.p
	var text string
	if p.Marker.Location == MarkerField && !d.Owner.IsZero() {
		var err error
		if text, err = c.markerText(ctx, id); err != nil {
			return providers.Registration{}, err
		}
	}
	body, err := c.build(d, bodyUpdate, events, text)
	if err != nil {
		return providers.Registration{}, err
	}
	method := http.MethodPut
	if p.Update.Strategy == UpdatePatch {
		method = http.MethodPatch
	}
	res, err := c.do(ctx, call{op: &p.Update.Op, method: method, id: id, body: body, secret: d.Secret})
	if err != nil {
		return providers.Registration{}, err
	}
	if len(bytes.TrimSpace(res.body)) == 0 {
		return c.get(ctx, id)
	}
	obj, err := c.unwrap(res.body, "update "+id)
	if err != nil {
		return providers.Registration{}, err
	}
	reg, err := c.readOne(obj, "update "+id, readListed)
	if err != nil {
		// Some APIs answer an update with a stub ({object, id}, Resend): read the whole object.
		return c.get(ctx, id)
	}
	return reg, c.checkStored(obj, d, events, bodyUpdate, "update "+id)
}

// immutableChanges lists the update.recreate fields in which cur differs from d.
func (c *Client) immutableChanges(cur providers.Registration, d providers.Desired) []string {
	var out []string
	fields := c.c.p.Update.Recreate
	if c.c.p.Update.Strategy == UpdateNone {
		fields = recreateable
	}
	for _, f := range fields {
		var same bool
		switch f {
		case "url":
			same = cur.URL == d.URL
		case "events":
			same = sameSet(cur.Events, d.Events)
		case "description":
			same = c.c.p.Object.Description == nil || cur.Description == d.Description
		case "disabled":
			same = c.c.p.Object.Disabled == nil || cur.Disabled == d.Disabled
		case "marker":
			same = !c.caps.Markers || d.Owner.IsZero() || cur.Owner == d.Owner
		}
		if !same {
			out = append(out, f)
		}
	}
	return out
}

func sameSet(a, b []string) bool {
	x, y := slices.Compact(slices.Sorted(slices.Values(a))), slices.Compact(slices.Sorted(slices.Values(b)))
	return slices.Equal(x, y)
}

// Delete removes registration id; one that is already gone is not an error.
func (c *Client) Delete(ctx context.Context, id string) error {
	if id == "" {
		return invalid("registration id is empty")
	}
	if c.c.p.Events.Style == EventsPerRegistration {
		return c.deleteGroup(ctx, id)
	}
	return c.deleteOne(ctx, id)
}

func (c *Client) deleteOne(ctx context.Context, id string) error {
	_, err := c.do(ctx, call{op: &c.c.p.Delete, method: http.MethodDelete, id: id})
	if err != nil && !providers.IsNotFound(err) {
		return err
	}
	return nil
}

// FetchSecret reads the signing secret of registration id: from the profile's fetch request
// (fetched) or from the registration itself (readable).
func (c *Client) FetchSecret(ctx context.Context, id string) (string, error) {
	s := c.c.p.Secret
	switch s.Mode {
	case SecretModeReadable:
		reg, err := c.get(ctx, id)
		return reg.Secret, err
	case SecretModeFetched:
	default:
		return "", invalid(fmt.Sprintf("profile %s cannot read secrets back (secret.mode %s)", c.c.p.Name, s.Mode))
	}
	res, err := c.do(ctx, call{op: s.Fetch, method: http.MethodGet, id: id})
	if err != nil {
		return "", err
	}
	v := gjson.GetBytes(res.body, s.Path)
	if v.Type != gjson.String || v.String() == "" {
		return "", &providers.Error{Kind: providers.Permanent, Message: fmt.Sprintf("fetching the secret of %s: secret.path %q is missing or empty in the response (profile %s)", id, s.Path, c.c.p.Name)}
	}
	return v.String(), nil
}

func validateDesired(d providers.Desired) error {
	if d.URL == "" {
		return invalid("the webhook URL is empty")
	}
	if len(d.Events) == 0 {
		return invalid("no events to subscribe to")
	}
	if strings.Contains(d.Description, markerPrefix) {
		return invalid("the description must not contain " + markerPrefix + " (the ownership marker's prefix)")
	}
	return nil
}

// Per-registration APIs (one event per registration, Shopify topic) are presented as one
// registration per URL and owner: its id names the group, its events are the members'. The
// group is found again by listing, so the client stays stateless.

const groupPrefix = "grp-"

func groupID(url string, o providers.Owner) string {
	sum := sha256.Sum256([]byte(url + "\x00" + encodeMarker(o)))
	return groupPrefix + hex.EncodeToString(sum[:8])
}

// member ids of a group, in the order listed, kept in CreateKey (unused by these APIs) so
// Update and Delete need no second list when they have the group at hand.
func groups(regs []providers.Registration) []providers.Registration {
	var out []providers.Registration
	index := map[string]int{}
	for _, r := range regs {
		if r.Unfit != "" || len(r.Events) != 1 {
			// Its event could not be read: it joins no group and is reported on its own.
			out = append(out, r)
			continue
		}
		gid := groupID(r.URL, r.Owner)
		i, ok := index[gid]
		if !ok {
			g := r
			g.ID, g.Events, g.CreateKey, g.Reconfigures = gid, nil, "", maps.Clone(r.Reconfigures)
			out = append(out, g)
			i = len(out) - 1
			index[gid] = i
		}
		g := &out[i]
		g.Events = append(g.Events, r.Events...)
		if g.CreateKey != "" {
			g.CreateKey += ","
		}
		g.CreateKey += r.ID + "=" + r.Events[0]
		if r.Created.Before(g.Created) {
			g.Created = r.Created
		}
		g.Disabled = g.Disabled || r.Disabled
		g.Misconfigured = append(g.Misconfigured, r.Misconfigured...)
		for k, v := range r.Reconfigures {
			if g.Reconfigures == nil {
				g.Reconfigures = map[string]providers.ValueChange{}
			}
			g.Reconfigures[k] = v
		}
	}
	for i := range out {
		out[i].Misconfigured = slices.Compact(slices.Sorted(slices.Values(out[i].Misconfigured)))
	}
	return out
}

// members decodes a group's member ids by event.
func members(g providers.Registration) map[string]string {
	out := map[string]string{}
	for _, kv := range strings.Split(g.CreateKey, ",") {
		if id, ev, ok := strings.Cut(kv, "="); ok {
			out[ev] = id
		}
	}
	return out
}

func (c *Client) findGroup(ctx context.Context, id string) (providers.Registration, error) {
	regs, err := c.List(ctx)
	if err != nil {
		return providers.Registration{}, err
	}
	for _, g := range regs {
		if g.ID == id {
			return g, nil
		}
	}
	return providers.Registration{}, &providers.Error{Kind: providers.NotFound, Message: "registration group " + id + " is not listed"}
}

func (c *Client) createGroup(ctx context.Context, d providers.Desired, key string) (providers.Registration, error) {
	if slices.Contains(d.Events, "*") {
		return providers.Registration{}, invalid(fmt.Sprintf("profile %s registers one event per registration: list the events", c.c.p.Name))
	}
	var made []providers.Registration
	for i, ev := range slices.Compact(slices.Sorted(slices.Values(d.Events))) {
		r, err := c.createOne(ctx, d, []string{ev}, key+"-"+strconv.Itoa(i))
		if err != nil {
			if len(made) > 0 {
				return groups(made)[0], err
			}
			return providers.Registration{}, err
		}
		made = append(made, r)
	}
	return groups(made)[0], nil
}

// updateGroup makes the group's members match d: members whose event is no longer wanted are
// deleted, missing events are created, and the rest are updated in place.
func (c *Client) updateGroup(ctx context.Context, id string, d providers.Desired) (providers.Registration, error) {
	g, err := c.findGroup(ctx, id)
	if err != nil {
		return providers.Registration{}, err
	}
	have := members(g)
	var kept []providers.Registration
	for _, ev := range slices.Compact(slices.Sorted(slices.Values(d.Events))) {
		if mid, ok := have[ev]; ok {
			r, err := c.updateOne(ctx, mid, d, []string{ev})
			if err != nil {
				return providers.Registration{}, err
			}
			kept = append(kept, r)
			delete(have, ev)
			continue
		}
		r, err := c.createOne(ctx, d, []string{ev}, "")
		if err != nil {
			return providers.Registration{}, err
		}
		kept = append(kept, r)
	}
	for _, ev := range sortedKeys(have) {
		if err := c.deleteOne(ctx, have[ev]); err != nil {
			return providers.Registration{}, err
		}
	}
	if len(kept) == 0 {
		return providers.Registration{}, invalid("no events to subscribe to")
	}
	return groups(kept)[0], nil
}

func (c *Client) deleteGroup(ctx context.Context, id string) error {
	if !strings.HasPrefix(id, groupPrefix) {
		return c.deleteOne(ctx, id)
	}
	g, err := c.findGroup(ctx, id)
	if providers.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, ev := range sortedKeys(members(g)) {
		if err := c.deleteOne(ctx, members(g)[ev]); err != nil {
			return err
		}
	}
	return nil
}

// markerText is what the marker field of registration id holds besides a marker (a name given
// by hand), read with the profile's get route: an update writes the marker after it, so that
// adopting a hand-made registration keeps its name. "" for a profile without a get route (the
// marker then replaces the field's text).
func (c *Client) markerText(ctx context.Context, id string) (string, error) {
	p := c.c.p
	if p.Get == nil {
		return "", nil
	}
	res, err := c.do(ctx, call{op: p.Get, method: http.MethodGet, id: id})
	if err != nil {
		return "", err
	}
	obj, err := c.unwrap(res.body, "get "+id)
	if err != nil {
		return "", err
	}
	_, text := decodeMarker(obj.Get(p.Marker.Path).String())
	return text, nil
}
