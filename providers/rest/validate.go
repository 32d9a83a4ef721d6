package rest

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"text/template"
	"time"

	"golang.org/x/net/http/httpguts"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// Problem is one thing wrong with a profile, at a field path ("list.pagination.next").
type Problem struct {
	Path    string
	Message string
}

func (p Problem) String() string {
	if p.Path == "" {
		return p.Message
	}
	return p.Path + ": " + p.Message
}

// ProfileError lists everything wrong with a profile. Its message names each field path, so
// a user can fix them all in one go; it never contains a credential.
type ProfileError struct {
	Name     string
	Problems []Problem
}

func (e *ProfileError) Error() string {
	var b strings.Builder
	name := e.Name
	if name == "" {
		name = "profile"
	} else {
		name = "profile " + name
	}
	if len(e.Problems) == 1 {
		return name + " is invalid: " + e.Problems[0].String()
	}
	fmt.Fprintf(&b, "%s is invalid (%d problems):", name, len(e.Problems))
	for _, p := range e.Problems {
		b.WriteString("\n  " + p.String())
	}
	return b.String()
}

// Parse reads a profile from YAML or JSON and validates it. Unknown and duplicate fields are
// errors (a misspelled field would otherwise be silently ignored); every problem found is
// returned in one *ProfileError.
func Parse(data []byte) (*Profile, error) {
	p, err := decode(data)
	if err != nil {
		return nil, err
	}
	if _, err := compile(p); err != nil {
		return nil, err
	}
	return p, nil
}

// ParseFile reads and validates the profile in a file.
func ParseFile(path string) (*Profile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(data)
}

func decode(data []byte) (*Profile, error) {
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, &ProfileError{Problems: []Problem{{Message: "does not parse as YAML or JSON: " + err.Error()}}}
	}
	if len(bytes.TrimSpace(js)) == 0 || string(bytes.TrimSpace(js)) == "null" {
		return nil, &ProfileError{Problems: []Problem{{Message: "is empty"}}}
	}
	var p Profile
	strict, err := kjson.UnmarshalStrict(js, &p)
	if err != nil {
		return nil, &ProfileError{Problems: []Problem{{Message: "does not decode: " + err.Error()}}}
	}
	if len(strict) > 0 {
		pe := &ProfileError{Name: p.Name}
		for _, e := range strict {
			pe.Problems = append(pe.Problems, Problem{Message: e.Error()})
		}
		return nil, pe
	}
	return &p, nil
}

// compiled is a validated profile with its templates parsed.
type compiled struct {
	p      *Profile
	tmpls  map[string]*template.Template
	params map[string]Parameter
}

// templateFuncs are the functions profile templates may call.
var templateFuncs = template.FuncMap{
	"pathEscape":  url.PathEscape,
	"queryEscape": url.QueryEscape,
	"b64":         func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) },
}

var (
	paramName    = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]*$`)
	recreateable = []string{"url", "events", "description", "disabled", "marker"}
)

// checker collects problems.
type checker struct {
	c        *compiled
	problems []Problem
}

func (ck *checker) add(path, format string, args ...any) {
	ck.problems = append(ck.problems, Problem{Path: path, Message: fmt.Sprintf(format, args...)})
}

// tmpl parses a template and executes it on sample data, so a syntax error or a parameter the
// profile does not declare is found now rather than on the first request.
func (ck *checker) tmpl(path, text string, extra ...string) {
	if text == "" {
		return
	}
	if _, ok := ck.c.tmpls[text]; ok {
		return
	}
	t, err := template.New(path).Option("missingkey=error").Funcs(templateFuncs).Parse(text)
	if err != nil {
		ck.add(path, "template does not parse: %v", trimTemplateErr(err))
		return
	}
	data := sampleData(ck.c.params, extra...)
	if err := t.Execute(new(bytes.Buffer), data); err != nil {
		ck.add(path, "template fails: %v", trimTemplateErr(err))
		return
	}
	ck.c.tmpls[text] = t
}

func trimTemplateErr(err error) string {
	s := err.Error()
	if i := strings.Index(s, ": executing "); i >= 0 {
		s = s[i+len(": executing "):]
	}
	return strings.TrimPrefix(s, "template: ")
}

// sampleData is template data with every declared parameter set; extra names the other keys a
// template at that place may use (ID, Credential, IdempotencyKey).
func sampleData(params map[string]Parameter, extra ...string) map[string]any {
	ps := map[string]string{}
	for n := range params {
		ps[n] = "sample"
	}
	d := map[string]any{"Params": ps}
	for _, k := range extra {
		d[k] = "sample"
	}
	return d
}

// backoff checks a rate-limit backoff: positive durations up to MaxBackoff, a factor from 1
// (constant waits) to MaxBackoffFactor, and a max no shorter than first.
func (ck *checker) backoff(path string, b Backoff) {
	for _, d := range []struct {
		field string
		v     Duration
	}{{"first", b.First}, {"max", b.Max}} {
		if d.v < 0 || time.Duration(d.v) > MaxBackoff {
			ck.add(path+"."+d.field, "%s is not between 0 (the default) and %s", time.Duration(d.v), MaxBackoff)
		}
	}
	if b.Factor != 0 && (b.Factor < 1 || b.Factor > MaxBackoffFactor || math.IsNaN(b.Factor)) {
		ck.add(path+".factor", "%g is not between 1 (every wait the same) and %d", b.Factor, MaxBackoffFactor)
	}
	if b.First > 0 && b.Max > 0 && b.Max < b.First {
		ck.add(path+".max", "%s is shorter than first (%s)", time.Duration(b.Max), time.Duration(b.First))
	}
}

func (ck *checker) header(path, name string) {
	if !httpguts.ValidHeaderFieldName(name) {
		ck.add(path, "%q is not a valid HTTP header name", name)
	}
}

// jsonPath checks a dot path for gjson/sjson: non-empty elements, no query syntax.
func (ck *checker) jsonPath(path, p string, required bool) {
	if p == "" {
		if required {
			ck.add(path, "required")
		}
		return
	}
	if strings.ContainsAny(p, "#|@*?") {
		ck.add(path, "%q: only plain dot paths are supported (no #, |, @, * or ?)", p)
		return
	}
	for _, el := range strings.Split(strings.ReplaceAll(p, `\.`, ""), ".") {
		if el == "" {
			ck.add(path, "%q has an empty path element", p)
			return
		}
	}
}

func (ck *checker) field(path string, f Field, required bool) {
	ck.jsonPath(path+".path", f.Path, required)
	ck.jsonPath(path+".response", f.Response, false)
}

func (ck *checker) op(path string, o *Op, extra ...string) {
	if o.Path == "" {
		ck.add(path+".path", "required")
	} else if !strings.HasPrefix(o.Path, "/") {
		ck.add(path+".path", "%q must start with /", o.Path)
	}
	ck.tmpl(path+".path", o.Path, extra...)
	for _, k := range sortedKeys(o.Query) {
		ck.tmpl(path+".query."+k, o.Query[k], extra...)
	}
	for _, k := range sortedKeys(o.Headers) {
		ck.header(path+".headers", k)
		ck.tmpl(path+".headers."+k, o.Headers[k], extra...)
	}
	for i, s := range o.Success {
		if s < 200 || s > 299 {
			ck.add(fmt.Sprintf("%s.success[%d]", path, i), "%d is not a 2xx status", s)
		}
	}
	if o.Method != "" && !slices.Contains([]string{"GET", "POST", "PUT", "PATCH", "DELETE"}, o.Method) {
		ck.add(path+".method", "%q is not one of GET, POST, PUT, PATCH, DELETE", o.Method)
	}
}

func (ck *checker) static(path string, m map[string]any) {
	for _, k := range sortedKeys(m) {
		ck.jsonPath(path+"."+k, k, true)
		ck.staticValue(path+"."+k, m[k])
	}
}

func (ck *checker) staticValue(path string, v any) {
	switch x := v.(type) {
	case string:
		ck.tmpl(path, x)
	case map[string]any:
		for _, k := range sortedKeys(x) {
			ck.staticValue(path+"."+k, x[k])
		}
	case []any:
		for i, e := range x {
			ck.staticValue(fmt.Sprintf("%s[%d]", path, i), e)
		}
	}
}

func (ck *checker) matches(path string, ms []Match) {
	for i, m := range ms {
		if m.Status < 400 || m.Status > 599 {
			ck.add(fmt.Sprintf("%s[%d].status", path, i), "%d is not an error status", m.Status)
		}
	}
}

func oneOf(v string, allowed ...string) bool { return slices.Contains(allowed, v) }

// compile validates p and parses its templates.
//
//nolint:funlen // one check per profile field, in the profile's order
func compile(p *Profile) (*compiled, error) {
	c := &compiled{p: p, tmpls: map[string]*template.Template{}, params: map[string]Parameter{}}
	ck := &checker{c: c}

	if p.APIVersion != APIVersion {
		ck.add("apiVersion", "want %q, got %q", APIVersion, p.APIVersion)
	}
	if p.Kind != Kind {
		ck.add("kind", "want %q, got %q", Kind, p.Kind)
	}
	if p.Name == "" {
		ck.add("name", "required")
	}
	for i, prm := range p.Parameters {
		path := fmt.Sprintf("parameters[%d]", i)
		switch {
		case !paramName.MatchString(prm.Name):
			ck.add(path+".name", "%q must be a letter followed by letters, digits or _", prm.Name)
		case c.params[prm.Name].Name != "":
			ck.add(path+".name", "%q is declared twice", prm.Name)
		}
		c.params[prm.Name] = prm
		if prm.Pattern != "" {
			re, err := regexp.Compile("^(?:" + prm.Pattern + ")$")
			if err != nil {
				ck.add(path+".pattern", "does not compile: %v", err)
			} else if prm.Default != "" && !re.MatchString(prm.Default) {
				ck.add(path+".default", "%q does not match the pattern", prm.Default)
			}
		}
		if prm.Required && prm.Default != "" {
			ck.add(path+".default", "a required parameter has no default")
		}
	}

	if p.BaseURL == "" {
		ck.add("baseURL", "required")
	} else {
		ck.tmpl("baseURL", p.BaseURL)
		if t := c.tmpls[p.BaseURL]; t != nil {
			var b bytes.Buffer
			_ = t.Execute(&b, sampleData(c.params))
			if u, err := url.Parse(b.String()); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				ck.add("baseURL", "%q must be an absolute http(s) URL", p.BaseURL)
			}
		}
	}
	ck.header("auth.header", p.Auth.Header)
	if p.Auth.Value == "" {
		ck.add("auth.value", "required")
	} else if !strings.Contains(p.Auth.Value, ".Credential") {
		ck.add("auth.value", "does not use {{.Credential}}")
	}
	ck.tmpl("auth.value", p.Auth.Value, "Credential")
	for _, k := range sortedKeys(p.Headers) {
		ck.header("headers", k)
		ck.tmpl("headers."+k, p.Headers[k])
	}

	o := p.Object
	ck.jsonPath("object.requestEnvelope", o.RequestEnvelope, false)
	ck.jsonPath("object.responseEnvelope", o.ResponseEnvelope, false)
	ck.field("object.id", o.ID, true)
	if o.ID.Response != "" {
		ck.add("object.id.response", "the id is only read: set path")
	}
	ck.field("object.url", o.URL, true)
	if o.Description != nil {
		ck.field("object.description", *o.Description, true)
	}
	if o.Disabled != nil {
		ck.field("object.disabled", o.Disabled.Field, true)
		if (o.Disabled.Enabled == "") != (o.Disabled.Disabled == "") {
			ck.add("object.disabled", "set both enabledValue and disabledValue (a string field), or neither (a boolean)")
		}
		if o.Disabled.Invert && o.Disabled.Enabled != "" {
			ck.add("object.disabled.invert", "only for a boolean field; enabledValue/disabledValue already say which is which")
		}
	}
	if o.Created != nil {
		ck.field("object.created", *o.Created, true)
	}
	ck.static("object.static", o.Static)
	for _, k := range sortedKeys(o.Expect) {
		ck.jsonPath("object.expect."+k, k, true)
	}

	ev := p.Events
	switch ev.Style {
	case EventsList, EventsPerRegistration:
		ck.field("events", ev.Field, true)
		if len(ev.Flags) > 0 {
			ck.add("events.flags", "only for style flags")
		}
	case EventsFlags:
		if ev.Path != "" || ev.Response != "" {
			ck.add("events.path", "style flags reads events from events.flags")
		}
		if len(ev.Flags) == 0 {
			ck.add("events.flags", "required for style flags")
		}
		for _, k := range sortedKeys(ev.Flags) {
			ck.jsonPath("events.flags."+k, ev.Flags[k], true)
		}
	default:
		ck.add("events.style", "want %s, %s or %s, got %q", EventsList, EventsFlags, EventsPerRegistration, ev.Style)
	}
	if ev.All != nil {
		if ev.Style != EventsList {
			ck.add("events.all", "only for style list")
		} else if !json.Valid(ev.All.Value) {
			ck.add("events.all.value", "required: the JSON value that means every event (null, [\"*\"])")
		}
	}

	s := p.Secret
	switch s.Mode {
	case SecretModeClientChosen, SecretModeReturnedOnCreate, SecretModeReadable:
		ck.jsonPath("secret.path", s.Path, true)
		if s.Fetch != nil {
			ck.add("secret.fetch", "only for mode fetched")
		}
	case SecretModeFetched:
		ck.jsonPath("secret.path", s.Path, true)
		if s.Fetch == nil {
			ck.add("secret.fetch", "required for mode fetched")
		} else {
			ck.op("secret.fetch", s.Fetch, "ID")
		}
	case SecretModeNone:
		if s.Path != "" || s.Fetch != nil {
			ck.add("secret", "mode none has no path or fetch")
		}
	default:
		ck.add("secret.mode", "want %s, %s, %s, %s or %s, got %q", SecretModeClientChosen, SecretModeReturnedOnCreate, SecretModeReadable, SecretModeFetched, SecretModeNone, s.Mode)
	}
	if s.SendOnUpdate && s.Mode != SecretModeClientChosen {
		ck.add("secret.sendOnUpdate", "only for mode clientChosen")
	}
	if (s.Mode == SecretModeNone) != (p.Verify.Scheme == SchemeNone) {
		ck.add("verify.scheme", "scheme none goes with secret mode none, and only with it")
	}

	m := p.Marker
	switch m.Location {
	case MarkerNone:
		if m.Path != "" || m.Header != "" {
			ck.add("marker", "location none has no path or header")
		}
	case MarkerField, MarkerMetadata:
		ck.jsonPath("marker.path", m.Path, true)
	case MarkerDescription:
		if o.Description == nil {
			ck.add("marker.location", "description needs object.description")
		}
		if m.Path != "" {
			ck.add("marker.path", "location description uses object.description")
		}
	case MarkerHeader:
		ck.jsonPath("marker.path", m.Path, true)
		ck.header("marker.header", m.Header)
	default:
		ck.add("marker.location", "want %s, %s, %s, %s or %s, got %q", MarkerNone, MarkerField, MarkerDescription, MarkerMetadata, MarkerHeader, m.Location)
	}
	if m.Location != MarkerHeader && (m.HeaderList || m.NameKey != "" || m.ValueKey != "") {
		ck.add("marker", "headerList, nameKey and valueKey are for location header")
	}

	ck.op("list", &p.List.Op)
	ck.jsonPath("list.items", p.List.Items, false)
	ck.pagination("list.pagination", p.List.Pagination)

	if p.Get != nil {
		ck.op("get", p.Get, "ID")
	}
	ck.op("create", &p.Create.Op, "IdempotencyKey")
	ck.matches("create.alreadyExists", p.Create.AlreadyExists)
	switch p.Update.Strategy {
	case UpdatePatch, UpdatePutPartial, UpdatePutFull:
		ck.op("update", &p.Update.Op, "ID")
	case UpdateNone:
		if p.Update.Path != "" {
			ck.add("update.path", "strategy none sends no update")
		}
	default:
		ck.add("update.strategy", "want %s, %s, %s or %s, got %q", UpdatePatch, UpdatePutPartial, UpdatePutFull, UpdateNone, p.Update.Strategy)
	}
	ck.static("update.static", p.Update.Static)
	for i, f := range p.Update.Recreate {
		if !oneOf(f, recreateable...) {
			ck.add(fmt.Sprintf("update.recreate[%d]", i), "%q is not one of %s", f, strings.Join(recreateable, ", "))
		}
	}
	ck.op("delete", &p.Delete, "ID")
	if p.Ping != nil {
		ck.op("ping", p.Ping, "ID")
	}

	ck.matches("errors.quota", p.Errors.Quota)
	for i, mp := range p.Errors.Message {
		ck.jsonPath(fmt.Sprintf("errors.message[%d]", i), mp, true)
	}
	for _, h := range []struct{ path, v string }{
		{"errors.requestIDHeader", p.Errors.RequestIDHeader},
		{"errors.rateLimit.retryAfterHeader", p.Errors.RateLimit.RetryAfterHeader},
		{"errors.rateLimit.resetHeader", p.Errors.RateLimit.ResetHeader},
		{"errors.rateLimit.remainingHeader", p.Errors.RateLimit.RemainingHeader},
	} {
		if h.v != "" {
			ck.header(h.path, h.v)
		}
	}
	for i, st := range p.Errors.RateLimit.Status {
		if st < 400 || st > 599 {
			ck.add(fmt.Sprintf("errors.rateLimit.status[%d]", i), "%d is not an error status", st)
		}
	}
	ck.backoff("errors.rateLimit.backoff", p.Errors.RateLimit.Backoff)
	if p.Limits.MaxPages < 0 || p.Limits.MaxPages > MaxMaxPages {
		ck.add("limits.maxPages", "must be between 1 and %d", MaxMaxPages)
	}
	if p.Limits.MaxResponseBytes < 0 || p.Limits.MaxResponseBytes > MaxMaxResponseBytes {
		ck.add("limits.maxResponseBytes", "must be between 1 and %d", MaxMaxResponseBytes)
	}

	if p.Recover != nil {
		ck.recover(p.Recover)
	}
	if p.Health != nil {
		ck.health(p.Health)
	}

	if _, err := p.Verify.Verifier(); err != nil {
		ck.add("verify", "%s", strings.TrimPrefix(err.Error(), "rest: "))
	}

	if len(ck.problems) > 0 {
		sort.SliceStable(ck.problems, func(i, j int) bool { return ck.problems[i].Path < ck.problems[j].Path })
		return nil, &ProfileError{Name: p.Name, Problems: ck.problems}
	}
	return c, nil
}

// pagination checks one paging block at path (list.pagination, recover.redeliver.log.pagination).
func (ck *checker) pagination(path string, pg Pagination) {
	needs := func(name, v string) {
		if v == "" {
			ck.add(path+"."+name, "required for style %s", pg.Style)
		}
	}
	if pg.Style != PageNone && pg.Style != "" && pg.Style != PageLink && pg.Style != PageNextURL {
		needs("sizeParam", pg.SizeParam)
		if pg.Size <= 0 {
			ck.add(path+".size", "required for style %s: a positive page size", pg.Style)
		}
	}
	switch pg.Style {
	case PageNone, "":
	case PagePage:
		needs("pageParam", pg.PageParam)
	case PageOffset:
		needs("offsetParam", pg.OffsetParam)
		ck.jsonPath(path+".more", pg.More, false)
	case PageCursor:
		needs("cursorParam", pg.CursorParam)
		if (pg.Next == "") == !pg.NextFromLastID {
			ck.add(path+".next", "set next (the cursor's response path) or nextFromLastID, not both")
		}
		ck.jsonPath(path+".next", pg.Next, false)
		ck.jsonPath(path+".hasMore", pg.HasMore, false)
		ck.jsonPath(path+".done", pg.Done, false)
		if pg.HasMore != "" && pg.Done != "" {
			ck.add(path, "set hasMore or done, not both")
		}
		if pg.NextFromLastID && pg.HasMore == "" && pg.Done == "" {
			ck.add(path+".hasMore", "nextFromLastID needs hasMore or done to know the end")
		}
	case PageLink:
	case PageNextURL:
		needs("next", pg.Next)
		ck.jsonPath(path+".next", pg.Next, false)
		if (pg.SizeParam == "") != (pg.Size <= 0) {
			ck.add(path+".size", "set sizeParam and a positive size together, or neither")
		}
	default:
		ck.add(path+".style", "want %s, %s, %s, %s, %s or %s, got %q", PageNone, PagePage, PageOffset, PageCursor, PageLink, PageNextURL, pg.Style)
	}
}

// Validate checks a profile already decoded (Parse does this itself).
func (p *Profile) Validate() error {
	_, err := compile(p)
	return err
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
