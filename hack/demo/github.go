package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/providers/github"
	ghfake "github.com/hookwarden/hookwarden/providers/github/fake"
)

const (
	githubUserAgent = "GitHub-Hookshot/hookwarden-demo"
	// pingTimeout bounds the wait for the pings to be answered and for a list to report the
	// outcome in status.lastDelivery (the next resync, resyncInterval at most).
	pingTimeout = 30 * time.Second
)

// githubProvider plays GitHub with bin/fakegithub: the demo's token is granted the samples'
// repositories and organizations, and the fake pings config.url after each create, as GitHub
// does.
type githubProvider struct{ f fakeServer }

var _ provider = (*githubProvider)(nil)

func newGitHubProvider() *githubProvider {
	return &githubProvider{fakeServer{kind: hookv1.ProviderGitHub, title: "GitHub", binary: "fakegithub",
		credentialName: "token", credentialPrefix: "ghp_demo"}}
}

func (p *githubProvider) fake() *fakeServer { return &p.f }

// targets are the repositories and organizations the samples name, in order.
func (p *githubProvider) targets() []string {
	var out []string
	for _, s := range p.f.subs {
		if !slices.Contains(out, s.target) {
			out = append(out, s.target)
		}
	}
	return out
}

// grant lets the token administer the hooks of every target the samples name, as a token
// with admin:repo_hook and admin:org_hook would.
func (p *githubProvider) grant(ctx context.Context) (string, error) {
	body := map[string]any{"token": p.f.credential, "targets": p.targets()}
	if err := p.f.api.post(ctx, "/_fake/grant", body); err != nil {
		return "", fmt.Errorf("granting the demo's token on the fake GitHub: %w", err)
	}
	return fmt.Sprintf("the fake GitHub lets the token %s… administer the hooks of %s (POST /_fake/grant)", p.fake().credentialPrefix, strings.Join(p.targets(), ", ")), nil
}

func (p *githubProvider) registrations(ctx context.Context) ([]registration, error) {
	var out []registration
	for _, t := range p.targets() {
		var hooks []ghfake.Hook
		if err := p.f.api.getJSON(ctx, "/_fake/hooks?target="+url.QueryEscape(t), &hooks); err != nil {
			return nil, err
		}
		for _, h := range hooks {
			out = append(out, registration{noun: "hook", id: strconv.FormatInt(h.ID, 10), where: t, url: h.Config.URL, events: h.Events,
				secret: h.Config.Secret, active: h.Active,
				detail: []string{h.Config.ContentType, strconv.Quote(h.Config.InsecureSSL), lastResponse(h.LastResponse)}})
		}
	}
	return out, nil
}

func lastResponse(lr ghfake.LastResponse) string {
	if lr.Code == 0 {
		return lr.Status
	}
	return fmt.Sprintf("%d %s", lr.Code, lr.Status)
}

func (p *githubProvider) columns() []string {
	return []string{"HOOK", "ON", "CONFIG.URL", "EVENTS", "CONTENT_TYPE", "INSECURE_SSL", "LAST_RESPONSE"}
}

func (p *githubProvider) row(r registration) []string {
	return append([]string{r.id, r.where, r.url, strings.Join(r.events, ",")}, r.detail...)
}

// verify checks the hook as GitHub wants it (name web, content_type json, insecure_ssl "0"),
// that the fake's pings reached the receiver signed with the secret it verifies with, and
// the ping's outcome in status.
func (p *githubProvider) verify(ctx context.Context, d *demo, s subRef, r registration) ([]string, error) {
	if ct, insecure := r.detail[0], r.detail[1]; ct != "json" || insecure != `"0"` {
		return nil, fmt.Errorf("%s: hook %s has content_type %s and insecure_ssl %s, want json and \"0\"", s.name, r.id, ct, insecure)
	}
	name, err := p.createdName(ctx, r)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.name, err)
	}
	if name != "web" {
		return nil, fmt.Errorf("%s: hook %s was created with name %q, want web", s.name, r.id, name)
	}
	where := "config.url " + r.url
	if r.url == d.receiverURL(s) {
		where = "config.url = the receiver's route"
	}
	lines := []string{fmt.Sprintf("hook %s on %s: name %s (its one create request), content_type %s, insecure_ssl %s, active, %s",
		r.id, r.where, name, r.detail[0], r.detail[1], where)}
	more, err := p.checkPings(ctx, d, s, r)
	return append(lines, more...), err
}

// createdName returns the name the create request of hook r sent; there must be exactly one.
func (p *githubProvider) createdName(ctx context.Context, r registration) (string, error) {
	reqs, err := p.requests(ctx, 0)
	if err != nil {
		return "", err
	}
	var names []string
	for _, q := range reqs {
		if q.Op != ghfake.OpCreate || q.Status != http.StatusCreated || !strings.EqualFold(q.Target, r.where) {
			continue
		}
		var body struct {
			Name   string `json:"name"`
			Config struct {
				URL string `json:"url"`
			} `json:"config"`
		}
		if err := json.Unmarshal([]byte(q.Body), &body); err != nil {
			return "", fmt.Errorf("decoding a logged create request for %s: %w", r.where, err)
		}
		if body.Config.URL == r.url {
			names = append(names, body.Name)
		}
	}
	if len(names) != 1 {
		return "", fmt.Errorf("the fake GitHub logged %d successful create requests for %s on %s, want 1", len(names), r.url, r.where)
	}
	return names[0], nil
}

// checkPings waits until the fake's latest ping of hook r was answered 200 by the receiver
// (which answers 200 only to a ping signed with a secret it holds), status.ping records the
// request and, for a repository hook, status.lastDelivery shows the answer. The first ping, sent
// right after the create, must have been answered 200 too.
func (p *githubProvider) checkPings(ctx context.Context, d *demo, s subRef, r registration) ([]string, error) {
	var pings []ghfake.Delivery
	var sub *hookv1.WebhookSubscription
	repo := strings.HasPrefix(r.where, "repos/")
	err := poll(ctx, pingTimeout, 500*time.Millisecond, func(ctx context.Context) (bool, error) {
		var all []ghfake.Delivery
		if err := p.f.api.getJSON(ctx, "/_fake/deliveries", &all); err != nil {
			return false, err
		}
		pings = pings[:0]
		for _, dl := range all {
			if dl.Event == github.PingEvent && strings.EqualFold(dl.Target, r.where) && strconv.FormatInt(dl.HookID, 10) == r.id {
				pings = append(pings, dl)
			}
		}
		var err error
		if sub, err = d.getSub(ctx, s.name); err != nil {
			return false, err
		}
		switch last := len(pings) - 1; {
		case last < 0:
			return false, errors.New("no ping delivered yet")
		case pings[0].Code != http.StatusOK:
			// GitHub pings a hook right after its create, with the secret the manager chose:
			// the receiver must accept it already (GitHub shows a failed first delivery).
			return false, fatal(fmt.Errorf("GitHub's first ping of hook %s, right after the create, was answered %d %s, want 200", r.id, pings[0].Code, pings[0].Message))
		case pings[last].URL != r.url || !pings[last].Signed:
			return false, fatal(fmt.Errorf("the latest ping went to %s (signed: %t), want a signed ping to %s", pings[last].URL, pings[last].Signed, r.url))
		case pings[last].Code != http.StatusOK:
			return false, fmt.Errorf("the latest ping was answered %d %s", pings[last].Code, pings[last].Message)
		case sub.Status.Ping == nil || sub.Status.Ping.EndpointID != r.id:
			return false, fmt.Errorf("status.ping does not name hook %s yet", r.id)
		case sub.Status.Ping.Result != hookv1.PingRequested:
			return false, fatal(fmt.Errorf("status.ping: %s: %s", sub.Status.Ping.Result, sub.Status.Ping.Message))
		case repo && (sub.Status.LastDelivery == nil || sub.Status.LastDelivery.Code != http.StatusOK):
			return false, fmt.Errorf("status.lastDelivery is %+v, want code 200", sub.Status.LastDelivery)
		}
		return true, nil
	})
	if err != nil {
		return nil, fmt.Errorf("%s: waiting for GitHub's ping of hook %s: %w", s.name, r.id, err)
	}
	codes := make([]string, len(pings))
	for i, dl := range pings {
		codes[i] = strconv.Itoa(dl.Code)
	}
	reqs, err := p.requests(ctx, 0)
	if err != nil {
		return nil, err
	}
	asked := 0
	for _, q := range reqs {
		if q.Op == ghfake.OpPing && strings.EqualFold(q.Target, r.where) && strings.HasSuffix(q.Path, "/hooks/"+r.id+"/pings") {
			asked++
		}
	}
	lines := []string{
		fmt.Sprintf("the manager asked for %d ping (POST …/hooks/%s/pings); the fake GitHub delivered %d to config.url (GitHub also pings after a create), signed: answered %s — the receiver verified them with its route Secret, the first one (right after the create) included",
			asked, r.id, len(pings), strings.Join(codes, ", ")),
	}
	ld := "none: GitHub reports last_response on repository hooks only"
	if l := sub.Status.LastDelivery; l != nil {
		ld = fmt.Sprintf("%d %s %s", l.Code, l.Status, l.Message)
	}
	lines = append(lines, fmt.Sprintf("status.ping: %s for hook %s; status.lastDelivery: %s", sub.Status.Ping.Result, sub.Status.Ping.EndpointID, ld))
	return lines, nil
}

// requests returns the token's logged requests from index from of the whole log on.
func (p *githubProvider) requests(ctx context.Context, from int) ([]ghfake.Request, error) {
	var all []ghfake.Request
	if err := p.f.api.getJSON(ctx, "/_fake/requests", &all); err != nil {
		return nil, err
	}
	if from > len(all) {
		return nil, fmt.Errorf("the fake GitHub's request log shrank from %d to %d entries", from, len(all))
	}
	label := ghfake.TokenLabel(p.f.credential)
	var out []ghfake.Request
	for _, r := range all[from:] {
		if r.Token == label {
			out = append(out, r)
		}
	}
	return out, nil
}

func (p *githubProvider) calls(ctx context.Context, from int) ([]call, error) {
	reqs, err := p.requests(ctx, from)
	if err != nil {
		return nil, err
	}
	out := make([]call, len(reqs))
	for i, r := range reqs {
		out[i] = call{op: r.Op, firstPage: r.Op == ghfake.OpList && r.Page == 1, notModified: r.NotModified}
	}
	return out, nil
}

func (p *githubProvider) eventTypes(spec []string) []string {
	if len(spec) == 0 || slices.Contains(spec, "*") {
		return []string{"push", "issues", "pull_request"}
	}
	return spec
}

// eventID is a version-4 UUID drawn from rng, the shape of X-GitHub-Delivery (the burst
// seed reproduces it).
func (p *githubProvider) eventID(_ string, _ int, rng *rand.Rand) string {
	var b [16]byte
	for i := range b {
		b[i] = byte(rng.UintN(256))
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	x := hex.EncodeToString(b[:])
	return x[:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:]
}

// event is a GitHub payload of type typ for the subscription's repository or organization.
// The delivery id travels in X-GitHub-Delivery, not in the body.
func (p *githubProvider) event(id, typ string, s subRef) delivery {
	sum := sha256.Sum256([]byte(id))
	sha := hex.EncodeToString(sum[:20])
	parts := strings.Split(s.target, "/")
	payload := map[string]any{"sender": map[string]any{"login": "hookwarden-demo", "id": 1, "type": "User"}}
	repo := parts[len(parts)-1] // an organization's event comes from one of its repositories
	if parts[0] == "orgs" {
		repo = "shop"
		payload["organization"] = map[string]any{"login": parts[1], "id": 1001}
	}
	payload["repository"] = map[string]any{"name": repo, "full_name": parts[1] + "/" + repo, "owner": map[string]any{"login": parts[1]}}
	title := "hookwarden demo (" + s.name + ")"
	number := int(sum[0])<<8 | int(sum[1])
	switch typ {
	case "push":
		payload["ref"], payload["before"], payload["after"] = "refs/heads/main", strings.Repeat("0", 40), sha
		payload["head_commit"] = map[string]any{"id": sha, "message": title}
	case "pull_request":
		payload["action"], payload["number"] = "opened", number
		payload["pull_request"] = map[string]any{"number": number, "title": title, "head": map[string]any{"sha": sha}}
	default:
		payload["action"] = "opened"
		payload["issue"] = map[string]any{"number": number, "title": title}
	}
	b, _ := json.Marshal(payload)
	return delivery{id: id, typ: typ, body: b}
}

func (p *githubProvider) probe() delivery {
	return delivery{typ: "push", body: []byte(`{"zen":"hookwarden demo route probe"}`)}
}

// sign sets the headers GitHub sends: the event, the delivery GUID (the dedupe key; the same
// on every copy), the hook and its installation target, and X-Hub-Signature-256.
func (p *githubProvider) sign(h http.Header, d delivery, secret string, t *target) {
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", githubUserAgent)
	h.Set(github.EventHeader, d.typ)
	if d.id != "" {
		h.Set(github.DeliveryHeader, d.id)
	}
	h.Set(github.HookIDHeader, t.reg.id)
	kind := "repository"
	if strings.HasPrefix(t.sub.target, "orgs/") {
		kind = "organization"
	}
	h.Set("X-GitHub-Hook-Installation-Target-Type", kind)
	h.Set(github.SignatureHeader, github.Sign([]byte(secret), d.body))
}

// emit makes n events of s's types happen on s's repository or organization at the fake
// GitHub, which delivers each (one guid) to every active hook there subscribed to it: r only.
func (p *githubProvider) emit(ctx context.Context, s subRef, r registration, n int) ([]string, error) {
	types := p.eventTypes(s.events)
	var ids []string
	for i := range n {
		typ := types[i%len(types)]
		body := p.event(fmt.Sprintf("missed-%s-%d-%d", s.name, i, time.Now().UnixNano()), typ, s).body
		var out []ghfake.Delivery
		if err := p.f.api.postJSON(ctx, "/_fake/emit", map[string]any{"target": s.target, "event": typ, "payload": json.RawMessage(body)}, &out); err != nil {
			return nil, err
		}
		if len(out) != 1 || strconv.FormatInt(out[0].HookID, 10) != r.id {
			return nil, fmt.Errorf("the fake GitHub delivered a %s on %s to %d hooks, want only %s's hook %s", typ, s.target, len(out), s.name, r.id)
		}
		ids = append(ids, out[0].GUID)
	}
	return ids, nil
}

func (p *githubProvider) failedAttempts(ctx context.Context, s subRef, r registration, ids []string) (int, error) {
	var log []ghfake.Delivery
	if err := p.f.api.getJSON(ctx, "/_fake/deliveries?target="+url.QueryEscape(s.target)+"&hook_id="+url.QueryEscape(r.id), &log); err != nil {
		return 0, err
	}
	n := 0
	for _, d := range log {
		if !d.Redelivery && (d.Code < 200 || d.Code > 299) && slices.Contains(ids, d.GUID) {
			n++
		}
	}
	return n, nil
}
