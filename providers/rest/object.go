package rest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/hookwarden/hookwarden/providers"
)

// The ownership marker is one token, readable in a dashboard and parsed back exactly:
// "hookwarden:<cluster>/<namespace>/<name>/<uid>", each part path-escaped. It is stored in
// provider accounts, so changing its spelling orphans every registration made before.
const markerPrefix = "hookwarden:"

var markerToken = regexp.MustCompile(`\[?hookwarden:([^\s/\]]*)/([^\s/\]]*)/([^\s/\]]*)/([^\s/\]]*)\]?`)

// Metadata keys of a metadata marker (the same words as Stripe's).
const (
	keyCluster   = "hookwarden_cluster"
	keyNamespace = "hookwarden_namespace"
	keyName      = "hookwarden_name"
	keyUID       = "hookwarden_uid"
)

func encodeMarker(o providers.Owner) string {
	return markerPrefix + strings.Join([]string{url.PathEscape(o.Cluster), url.PathEscape(o.Namespace), url.PathEscape(o.Name), url.PathEscape(o.UID)}, "/")
}

// decodeMarker finds a marker token in s and returns the owner and s without the token.
func decodeMarker(s string) (providers.Owner, string) {
	loc := markerToken.FindStringSubmatchIndex(s)
	if loc == nil {
		return providers.Owner{}, s
	}
	part := func(i int) string {
		v, err := url.PathUnescape(s[loc[2*i]:loc[2*i+1]])
		if err != nil {
			return s[loc[2*i]:loc[2*i+1]]
		}
		return v
	}
	o := providers.Owner{Cluster: part(1), Namespace: part(2), Name: part(3), UID: part(4)}
	rest := strings.TrimSpace(s[:loc[0]] + s[loc[1]:])
	return o, rest
}

// describe is the description text written when the marker lives in the description: the
// user's text, then the bracketed token.
func describe(desc string, o providers.Owner) string {
	if o.IsZero() {
		return desc
	}
	tok := "[" + encodeMarker(o) + "]"
	if desc == "" {
		return tok
	}
	return desc + " " + tok
}

// sjsonKey escapes a literal key (a header name) for an sjson/gjson path.
func sjsonKey(k string) string {
	r := strings.NewReplacer(".", `\.`, "*", `\*`, "?", `\?`)
	return r.Replace(k)
}

// bodyKind says which body is built.
type bodyKind int

const (
	bodyCreate bodyKind = iota
	bodyUpdate
)

// build returns the request body for d. event is the one event of a per-registration style.
// markerText is the text a marker field keeps beside the marker (markerText).
//
//nolint:funlen // one block per profile field the body may carry
func (c *Client) build(d providers.Desired, kind bodyKind, events []string, markerText string) ([]byte, error) {
	p := c.c.p
	obj := []byte("{}")
	var err error
	set := func(path string, v any) {
		if err == nil {
			obj, err = sjson.SetBytes(obj, path, v)
		}
	}
	setRaw := func(path string, raw []byte) {
		if err == nil {
			obj, err = sjson.SetRawBytes(obj, path, raw)
		}
	}
	full := kind == bodyCreate || p.Update.Strategy == UpdatePutFull
	recreate := func(f string) bool { return kind == bodyUpdate && slices.Contains(p.Update.Recreate, f) }

	statics := p.Object.Static
	if !full {
		statics = p.Update.Static
	}
	for _, k := range sortedKeys(statics) {
		v, rerr := c.renderStatic(statics[k])
		if rerr != nil {
			return nil, rerr
		}
		if s, ok := v.(string); ok && s == "" {
			continue // a template over an unset parameter: the field is left out
		}
		raw, merr := json.Marshal(v)
		if merr != nil {
			return nil, invalid(fmt.Sprintf("object.static.%s: %v", k, merr))
		}
		setRaw(k, raw)
	}
	if !recreate("url") {
		set(p.Object.URL.Path, d.URL)
	}
	if !recreate("events") {
		switch p.Events.Style {
		case EventsList:
			if len(events) == 1 && events[0] == "*" {
				if p.Events.All == nil {
					return nil, invalid(fmt.Sprintf("profile %s has no value for every event (events.all): list the events", p.Name))
				}
				setRaw(p.Events.Path, p.Events.All.Value)
			} else {
				set(p.Events.Path, events)
			}
		case EventsPerRegistration:
			set(p.Events.Path, events[0])
		case EventsFlags:
			for _, e := range events {
				if _, ok := p.Events.Flags[e]; !ok {
					return nil, invalid(fmt.Sprintf("event %q is not one of profile %s's events.flags (%s)", e, p.Name, strings.Join(sortedKeys(p.Events.Flags), ", ")))
				}
			}
			for _, name := range sortedKeys(p.Events.Flags) {
				set(p.Events.Flags[name], slices.Contains(events, name))
			}
		}
	}
	if p.Object.Description != nil && !recreate("description") {
		desc := d.Description
		if p.Marker.Location == MarkerDescription {
			desc = describe(desc, d.Owner)
		}
		set(p.Object.Description.Path, desc)
	}
	if t := p.Object.Disabled; t != nil && !recreate("disabled") {
		switch {
		case t.Enabled != "" && d.Disabled:
			set(t.Path, t.Disabled)
		case t.Enabled != "":
			set(t.Path, t.Enabled)
		default:
			set(t.Path, d.Disabled != t.Invert)
		}
	}
	if !d.Owner.IsZero() && !recreate("marker") {
		m := p.Marker
		switch m.Location {
		case MarkerField:
			if markerText == "" {
				set(m.Path, encodeMarker(d.Owner))
			} else {
				set(m.Path, describe(markerText, d.Owner))
			}
		case MarkerMetadata:
			for k, v := range map[string]string{keyCluster: d.Owner.Cluster, keyNamespace: d.Owner.Namespace, keyName: d.Owner.Name, keyUID: d.Owner.UID} {
				set(m.Path+"."+k, v)
			}
		case MarkerHeader:
			if m.HeaderList {
				nk, vk := m.keys()
				set(m.Path, []map[string]string{{nk: m.Header, vk: encodeMarker(d.Owner)}})
			} else {
				set(m.Path+"."+sjsonKey(m.Header), encodeMarker(d.Owner))
			}
		}
	}
	if p.Secret.Mode == SecretModeClientChosen && d.Secret != "" {
		set(p.Secret.Path, d.Secret)
	}
	if err != nil {
		return nil, invalid("building the request body: " + err.Error())
	}
	if env := p.Object.RequestEnvelope; env != "" {
		wrapped, werr := sjson.SetRawBytes([]byte("{}"), env, obj)
		if werr != nil {
			return nil, invalid("object.requestEnvelope: " + werr.Error())
		}
		obj = wrapped
	}
	return obj, nil
}

func (m MarkerMapping) keys() (string, string) {
	nk, vk := m.NameKey, m.ValueKey
	if nk == "" {
		nk = "name"
	}
	if vk == "" {
		vk = "value"
	}
	return nk, vk
}

// renderStatic renders the templates in a static value.
func (c *Client) renderStatic(v any) (any, error) {
	switch x := v.(type) {
	case string:
		return c.render(x, nil)
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			r, err := c.renderStatic(e)
			if err != nil {
				return nil, err
			}
			out[k] = r
		}
		return out, nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			r, err := c.renderStatic(e)
			if err != nil {
				return nil, err
			}
			out[i] = r
		}
		return out, nil
	}
	return v, nil
}

// readPurpose says which response an object came from: the secret of returnedOnCreate is read
// only from the create response.
type readPurpose int

const (
	readListed readPurpose = iota
	readCreated
)

// unwrap returns the single object of a get, create or update response.
func (c *Client) unwrap(body []byte, what string) (gjson.Result, error) {
	r := gjson.ParseBytes(body)
	if env := c.c.p.Object.ResponseEnvelope; env != "" {
		r = r.Get(env)
		if !r.IsObject() {
			return r, c.shapeError(what, "object.responseEnvelope", env, "no object")
		}
	}
	if !r.IsObject() {
		return r, c.shapeError(what, "the response", "", "not a JSON object")
	}
	return r, nil
}

func (c *Client) shapeError(what, field, path, problem string) error {
	return c.unfitError(what, []string{misfit(field, path, problem)})
}

// unfitError is a response that does not fit the profile: its problems name field paths and
// what is wrong, never a value, so the message is safe to show.
func (c *Client) unfitError(what string, problems []string) error {
	return &providers.Error{Kind: providers.Permanent, Message: fmt.Sprintf("%s: %s in the response (profile %s)", what, strings.Join(problems, "; "), c.c.p.Name)}
}

// problem_ is one thing that does not fit: `object.url "url" is missing`.
func misfit(field, path, problem string) string {
	if path != "" {
		return fmt.Sprintf("%s %q %s", field, path, problem)
	}
	return field + " " + problem
}

// shape collects what does not fit while an object is read, so every other field is still
// read: a listed registration is reported with all it says (List), a single answer fails
// with all its problems at once.
type shape struct{ problems []string }

func (s *shape) add(field, path, problem string) {
	s.problems = append(s.problems, misfit(field, path, problem))
}

// read maps one registration object onto a providers.Registration. A configured path the
// object lacks is a problem that names it, never an empty value (unless the field is
// optional): a wrong profile must not look like drift. null is read as the field's empty value
// (false for a boolean: APIs render a flag a registration never set as null), as if absent
// but without a problem. The registration holds whatever could be read; the problems say what
// could not.
//
//nolint:funlen // one block per profile field a registration may carry
func (c *Client) read(r gjson.Result, purpose readPurpose) (providers.Registration, []string) {
	p := c.c.p
	var reg providers.Registration
	var sh shape
	// get reads a field; ok is false when it is missing and that is a problem.
	get := func(field string, f Field) (gjson.Result, bool) {
		v := r.Get(f.ResponsePath())
		if !v.Exists() && !f.Optional {
			sh.add(field, f.ResponsePath(), "is missing")
			return v, false
		}
		return v, true
	}
	str := func(field string, f Field) string {
		v, ok := get(field, f)
		if !ok {
			return ""
		}
		switch v.Type {
		case gjson.String, gjson.Number:
			return v.String()
		case gjson.Null:
			return ""
		}
		if v.Exists() {
			sh.add(field, f.ResponsePath(), "is not a string")
		}
		return ""
	}

	reg.ID = str("object.id", p.Object.ID)
	if p.Object.IDFromURI && reg.ID != "" {
		reg.ID = path.Base(strings.TrimRight(reg.ID, "/"))
	}
	if id := r.Get(p.Object.ID.Path); reg.ID == "" && id.Exists() && (id.Type == gjson.String || id.Type == gjson.Null) {
		sh.add("object.id", p.Object.ID.Path, "is null or empty")
	}
	reg.URL = str("object.url", p.Object.URL)
	if u := r.Get(p.Object.URL.ResponsePath()); u.Exists() && u.Type == gjson.Null {
		sh.add("object.url", p.Object.URL.ResponsePath(), "is null")
	}
	reg.Events = c.readEvents(r, &sh)
	if f := p.Object.Description; f != nil {
		reg.Description = str("object.description", *f)
		if p.Marker.Location == MarkerDescription {
			reg.Owner, reg.Description = decodeMarker(reg.Description)
		}
	}
	if t := p.Object.Disabled; t != nil {
		if v, ok := get("object.disabled", t.Field); ok {
			switch {
			case t.Enabled != "":
				if s := v.String(); s == t.Disabled {
					reg.Disabled = true
				} else if s != t.Enabled && v.Exists() {
					reg.Misconfigured = append(reg.Misconfigured, t.ResponsePath())
				}
			case v.Type == gjson.True || v.Type == gjson.False:
				reg.Disabled = v.Bool() != t.Invert
			case v.Type == gjson.Null:
				reg.Disabled = t.Invert // null is false: "active: null" is not active
			case v.Exists():
				sh.add("object.disabled", t.ResponsePath(), "is not a boolean")
			}
		}
	}
	if f := p.Object.Created; f != nil {
		if v, ok := get("object.created", *f); ok && v.Exists() && v.Type != gjson.Null {
			if t, terr := time.Parse(time.RFC3339, v.String()); terr == nil {
				reg.Created = t
			} else {
				sh.add("object.created", f.ResponsePath(), "is not an RFC 3339 time")
			}
		}
	}
	c.readMarker(r, &reg)
	if p.Health != nil {
		reg.Health = c.health(r)
	}
	switch {
	case p.Secret.Mode == SecretModeReadable, p.Secret.Mode == SecretModeReturnedOnCreate && purpose == readCreated:
		v := r.Get(p.Secret.Path)
		if v.Type != gjson.String || v.String() == "" {
			sh.add("secret.path", p.Secret.Path, "is missing or not a string")
		} else {
			reg.Secret = v.String()
		}
	}
	for _, k := range sortedKeys(p.Object.Expect) {
		want, _ := json.Marshal(p.Object.Expect[k])
		got := r.Get(k)
		var buf bytes.Buffer
		if !got.Exists() || json.Compact(&buf, []byte(got.Raw)) != nil || !bytes.Equal(buf.Bytes(), want) {
			from := got.Raw
			if !got.Exists() {
				from = "(none)"
			}
			reg.Reconfigure(k, from, string(want))
		}
	}
	return reg, sh.problems
}

// readOne reads a single answer's object (get, create, update): it must fit whole. The
// registration is returned with the error, holding what could be read (its id, so that a
// created registration is not lost).
func (c *Client) readOne(r gjson.Result, what string, purpose readPurpose) (providers.Registration, error) {
	reg, problems := c.read(r, purpose)
	if len(problems) > 0 {
		return reg, c.unfitError(what, problems)
	}
	return reg, nil
}

// readEvents reads the events. A flag that is missing or null reads as false: an API adds
// flags over time (GitLab's milestone_events), and an older server neither renders nor stores
// them; Create and Update check the flags they set instead (checkFlags).
func (c *Client) readEvents(r gjson.Result, sh *shape) []string {
	ev := c.c.p.Events
	switch ev.Style {
	case EventsFlags:
		var out []string
		for _, name := range sortedKeys(ev.Flags) {
			v := r.Get(ev.Flags[name])
			switch v.Type {
			case gjson.True:
				out = append(out, name)
			case gjson.False, gjson.Null:
			default:
				if v.Exists() {
					sh.add("events.flags."+name, ev.Flags[name], "is not a boolean")
				}
			}
		}
		return out
	case EventsPerRegistration:
		v := r.Get(ev.ResponsePath())
		if v.Type != gjson.String || v.String() == "" {
			sh.add("events", ev.ResponsePath(), "is missing or not a string")
			return nil
		}
		return []string{v.String()}
	}
	v := r.Get(ev.ResponsePath())
	if !v.Exists() && !ev.Optional {
		sh.add("events", ev.ResponsePath(), "is missing")
		return nil
	}
	if ev.All != nil {
		if !v.Exists() && string(bytes.TrimSpace(ev.All.Value)) == "null" {
			return []string{"*"} // Svix omits filterTypes that are null
		}
		var buf bytes.Buffer
		if v.Exists() && json.Compact(&buf, []byte(v.Raw)) == nil {
			var want bytes.Buffer
			_ = json.Compact(&want, ev.All.Value)
			if bytes.Equal(buf.Bytes(), want.Bytes()) {
				return []string{"*"}
			}
		}
	}
	if !v.Exists() || v.Type == gjson.Null {
		return nil
	}
	if !v.IsArray() {
		sh.add("events", ev.ResponsePath(), "is not an array")
		return nil
	}
	var out []string
	for _, e := range v.Array() {
		if e.Type != gjson.String {
			sh.add("events", ev.ResponsePath(), "holds a value that is not a string")
			return nil
		}
		out = append(out, e.String())
	}
	return out
}

// checkStored reports what an answer to Create or Update shows the API did not store: a
// selected event's flag that is not true, or a marker field or description that was sent and
// is absent. An API that does not know a field ignores it (GitLab before 17.1 and name, an
// older GitLab and milestone_events), so the registration would read as never subscribed or
// unmarked, and every resync would "repair" it again; a stall that says so is better.
func (c *Client) checkStored(r gjson.Result, d providers.Desired, events []string, kind bodyKind, what string) error {
	p := c.c.p
	sent := func(f string) bool { return kind == bodyCreate || !slices.Contains(p.Update.Recreate, f) }
	var problems []string
	if p.Events.Style == EventsFlags && sent("events") {
		for _, e := range events {
			flag := p.Events.Flags[e]
			if v := r.Get(flag); v.Type != gjson.True {
				state := "is not true"
				if !v.Exists() {
					state = "is missing: the API does not know this event (an older version?)"
				}
				problems = append(problems, misfit("events.flags."+e, flag, state))
			}
		}
	}
	absent := func(field, path string) {
		if !r.Get(path).Exists() {
			problems = append(problems, misfit(field, path, "is missing: the API does not store it (an older version?)"))
		}
	}
	if p.Marker.Location == MarkerField && !d.Owner.IsZero() && sent("marker") {
		absent("marker.path", p.Marker.Path)
	}
	if f := p.Object.Description; f != nil && d.Description != "" && sent("description") {
		absent("object.description", f.ResponsePath())
	}
	if len(problems) > 0 {
		return c.unfitError(what, problems)
	}
	return nil
}

// readMarker decodes the ownership marker; a registration without one (made by hand) simply
// has none, so a missing path is no error here.
func (c *Client) readMarker(r gjson.Result, reg *providers.Registration) {
	m := c.c.p.Marker
	switch m.Location {
	case MarkerField:
		v := r.Get(m.Path)
		reg.Owner, _ = decodeMarker(v.String())
	case MarkerMetadata:
		v := r.Get(m.Path)
		reg.Owner = providers.Owner{Cluster: v.Get(keyCluster).String(), Namespace: v.Get(keyNamespace).String(), Name: v.Get(keyName).String(), UID: v.Get(keyUID).String()}
	case MarkerHeader:
		v := r.Get(m.Path)
		if m.HeaderList {
			nk, vk := m.keys()
			for _, h := range v.Array() {
				if strings.EqualFold(h.Get(nk).String(), m.Header) {
					reg.Owner, _ = decodeMarker(h.Get(vk).String())
				}
			}
		} else {
			v.ForEach(func(k, val gjson.Result) bool {
				if strings.EqualFold(k.String(), m.Header) {
					reg.Owner, _ = decodeMarker(val.String())
				}
				return true
			})
		}
	}
}
