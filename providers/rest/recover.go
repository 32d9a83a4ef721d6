package rest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/hookwarden/hookwarden/providers"
)

// A profile's recover and health sections decide which of the recovery interfaces a client
// implements (Factory): Recoverer with style redeliver, RangeRecoverer with style range,
// Reenabler with health.reenable. The reconciler asserts them, so a client never claims what
// its profile cannot do.

func recoveryCapabilities(p *Profile) providers.RecoveryCapabilities {
	r := p.Recover
	if r == nil {
		return providers.RecoveryCapabilities{Mode: providers.RecoveryNone}
	}
	out := providers.RecoveryCapabilities{Window: time.Duration(r.Window)}
	switch r.Style {
	case RecoverRedeliver:
		out.Mode = providers.RecoveryRedeliver
		// Without a failing condition the API says nothing of failures short of disabling.
		out.Poll = p.Health == nil || len(p.Health.Failing) == 0
		if rt := r.Redeliver.Rate; rt != nil {
			// One at a time (Burst 1): the APIs count in fixed windows (see RateSpec).
			out.RedeliverRate = providers.Rate{PerSecond: float64(rt.Requests) / time.Duration(rt.Period).Seconds(), Burst: 1}
		}
	case RecoverRange:
		out.Mode = providers.RecoveryRange
	}
	return out
}

var (
	_ providers.Recoverer      = redeliverer{}
	_ providers.RangeRecoverer = ranger{}
	_ providers.Reenabler      = reenabler{}
	_ providers.Pinger         = pinger{}
)

// wrap returns c with exactly the optional interfaces its profile supports.
func wrap(c *Client) providers.Client {
	p := c.c.p
	ping, reen := p.Ping != nil, p.Health != nil && p.Health.Reenable != nil
	pg, rd, rg, re := pinger{c}, redeliverer{c}, ranger{c}, reenabler{c}
	switch c.caps.Recovery.Mode {
	case providers.RecoveryRedeliver:
		switch {
		case ping && reen:
			return &struct {
				*Client
				pinger
				redeliverer
				reenabler
			}{c, pg, rd, re}
		case ping:
			return &struct {
				*Client
				pinger
				redeliverer
			}{c, pg, rd}
		case reen:
			return &struct {
				*Client
				redeliverer
				reenabler
			}{c, rd, re}
		}
		return &struct {
			*Client
			redeliverer
		}{c, rd}
	case providers.RecoveryRange:
		switch {
		case ping && reen:
			return &struct {
				*Client
				pinger
				ranger
				reenabler
			}{c, pg, rg, re}
		case ping:
			return &struct {
				*Client
				pinger
				ranger
			}{c, pg, rg}
		case reen:
			return &struct {
				*Client
				ranger
				reenabler
			}{c, rg, re}
		}
		return &struct {
			*Client
			ranger
		}{c, rg}
	}
	switch {
	case ping && reen:
		return &struct {
			*Client
			pinger
			reenabler
		}{c, pg, re}
	case ping:
		return &PingingClient{c}
	case reen:
		return &struct {
			*Client
			reenabler
		}{c, re}
	}
	return c
}

type pinger struct{ cl *Client }

// Ping asks the API for a test delivery to registration id.
func (p pinger) Ping(ctx context.Context, id string) error {
	return (&PingingClient{p.cl}).Ping(ctx, id)
}

type reenabler struct{ cl *Client }

// Reenable sends health.reenable for reg.
func (r reenabler) Reenable(ctx context.Context, reg providers.Registration) error {
	if reg.ID == "" {
		return invalid("registration id is empty")
	}
	_, err := r.cl.do(ctx, call{op: r.cl.c.p.Health.Reenable, method: http.MethodPost, id: reg.ID})
	return err
}

type ranger struct{ cl *Client }

// RecoverSince asks the API to resend every failed delivery to reg since since. A since older
// than recover.window is moved up to the window's start: the API keeps nothing older, and the
// reconciler reports what lies beyond.
func (r ranger) RecoverSince(ctx context.Context, reg providers.Registration, since time.Time) error {
	c := r.cl
	if reg.ID == "" {
		return invalid("registration id is empty")
	}
	rs := c.c.p.Recover
	if oldest := c.now().Add(-time.Duration(rs.Window)); since.Before(oldest) {
		since = oldest
	}
	body, err := sjson.SetBytes([]byte("{}"), rs.Range.Since, since.UTC().Format(time.RFC3339))
	if err != nil {
		return invalid("recover.range.since: " + err.Error())
	}
	_, err = c.do(ctx, call{op: &rs.Range.Op, method: http.MethodPost, id: reg.ID, body: body})
	return err
}

type redeliverer struct{ cl *Client }

// logEntry is one delivery log entry as read.
type logEntry struct {
	handle, id, typ string
	at              time.Time
	delivered       bool
}

// entry reads one log entry; ok is false when it lacks what the profile says it holds.
func (r redeliverer) entry(it gjson.Result) (logEntry, bool) {
	m := r.cl.c.p.Recover.Redeliver.Entry
	var e logEntry
	scalar := func(v gjson.Result) string {
		if v.Type == gjson.String || v.Type == gjson.Number {
			return v.String()
		}
		return ""
	}
	e.handle = scalar(it.Get(m.Handle))
	e.id = scalar(it.Get(m.ID))
	at, err := time.Parse(time.RFC3339, it.Get(m.At).String())
	st := it.Get(m.Status)
	if e.handle == "" || e.id == "" || err != nil || (st.Type != gjson.String && st.Type != gjson.Number) {
		return e, false
	}
	e.at = at
	if code, err := strconv.Atoi(strings.TrimSpace(st.String())); err == nil {
		e.delivered = code >= 200 && code < 300
	}
	if m.Type != "" {
		e.typ = it.Get(m.Type).String()
		if name, ok := m.Types[e.typ]; ok {
			e.typ = name
		}
	}
	return e, true
}

// Missed lists the deliveries to reg that the API's log shows failed and never succeeded
// under the same id, oldest first: one entry per id, at its first delivery, with the handle of
// its latest failed attempt (the one resend names). An entry without a handle, an id, a time
// or a status is counted Malformed. Entries older than recover.window are Expired.
func (r redeliverer) Missed(ctx context.Context, reg providers.Registration, events []string, since time.Time, limit int) (providers.MissedPage, error) {
	c := r.cl
	if reg.ID == "" {
		return providers.MissedPage{}, invalid("registration id is empty")
	}
	rs := c.c.p.Recover.Redeliver
	failed, err := c.pages(ctx, paged{op: &rs.Log, field: "recover.redeliver.log", id: reg.ID, idPath: rs.Entry.Handle})
	if err != nil {
		return providers.MissedPage{}, err
	}
	var succeeded []gjson.Result
	// Only failures need the successes beside them: an empty log of failures (the usual
	// answer to a look once per resync) costs one request.
	if rs.Succeeded != nil && len(failed) > 0 {
		if succeeded, err = c.pages(ctx, paged{op: rs.Succeeded, field: "recover.redeliver.succeeded", id: reg.ID, idPath: rs.Entry.Handle, bestEffort: true}); err != nil {
			return providers.MissedPage{}, err
		}
	}
	type group struct {
		first, last time.Time
		handle, typ string
		failed      bool
		delivered   bool
	}
	page := providers.MissedPage{Covers: c.now()}
	groups := map[string]*group{}
	for _, it := range append(failed, succeeded...) {
		e, ok := r.entry(it)
		if !ok {
			page.Malformed++
			continue
		}
		page.Logged(e.at, since)
		g := groups[e.id]
		if g == nil {
			g = &group{}
			groups[e.id] = g
		}
		if e.delivered {
			g.delivered = true
			continue
		}
		if !g.failed || e.at.Before(g.first) {
			g.first = e.at
		}
		if !g.failed || !e.at.Before(g.last) {
			g.last, g.handle = e.at, e.handle
		}
		if g.typ == "" {
			g.typ = e.typ
		}
		g.failed = true
	}
	all := slices.Contains(events, "*") || len(events) == 0
	oldest := c.now().Add(-time.Duration(c.c.p.Recover.Window))
	var out []providers.Missed
	for id, g := range groups {
		if g.delivered || !g.failed || g.first.Before(since) || (!all && !slices.Contains(events, g.typ)) {
			continue
		}
		out = append(out, providers.Missed{ID: id, At: g.first, Type: g.typ, Handle: g.handle, Expired: g.last.Before(oldest)})
	}
	slices.SortFunc(out, func(a, b providers.Missed) int {
		if d := a.At.Compare(b.At); d != 0 {
			return d
		}
		return strings.Compare(a.ID, b.ID)
	})
	page.Missed, page.More = providers.CutMissed(out, limit)
	return page, nil
}

// Redeliver sends recover.redeliver.resend for m. An Expired m is refused (Permanent) before
// anything is sent; an answer whose resend.status is not 2xx (the endpoint still fails) is
// Transient.
func (r redeliverer) Redeliver(ctx context.Context, reg providers.Registration, m providers.Missed) error {
	c := r.cl
	if reg.ID == "" || m.Handle == "" {
		return invalid("a redelivery needs the registration id and the log entry's handle")
	}
	if m.Expired {
		return invalid(fmt.Sprintf("delivery %s lies beyond the %s the API keeps (profile %s, recover.window)", m.ID, time.Duration(c.c.p.Recover.Window), c.c.p.Name))
	}
	rs := c.c.p.Recover.Redeliver.Resend
	res, err := c.do(ctx, call{op: &rs.Op, method: http.MethodPost, id: reg.ID, handle: m.Handle, later: rs.RetryLater})
	if err != nil || rs.Status == "" {
		return err
	}
	v := gjson.GetBytes(res.body, rs.Status)
	if v.Type != gjson.String && v.Type != gjson.Number {
		return &providers.Error{Kind: providers.Permanent, Message: fmt.Sprintf("redelivering %s: recover.redeliver.resend.status %q is missing in the response (profile %s)", m.ID, rs.Status, c.c.p.Name)}
	}
	if code, err := strconv.Atoi(strings.TrimSpace(v.String())); err != nil || code < 200 || code > 299 {
		return &providers.Error{Kind: providers.Transient, Message: fmt.Sprintf("redelivering %s: the endpoint answered %s", m.ID, truncate(v.String()))}
	}
	return nil
}

// health reads the provider's view of deliveries from a registration object (health section).
func (c *Client) health(r gjson.Result) *providers.DeliveryHealth {
	h := c.c.p.Health
	holds := func(conds []Condition) (string, bool) {
		for _, cond := range conds {
			v := r.Get(cond.Path)
			if !v.Exists() {
				continue
			}
			var got bytes.Buffer
			if json.Compact(&got, []byte(v.Raw)) != nil {
				continue
			}
			for _, want := range cond.Values {
				var w bytes.Buffer
				if json.Compact(&w, want) == nil && bytes.Equal(got.Bytes(), w.Bytes()) {
					// The value shown is the profile's own, never one read from the object.
					return cond.Path + " is " + w.String(), true
				}
			}
		}
		return "", false
	}
	var until time.Time
	if h.DisabledUntil != "" {
		if v := r.Get(h.DisabledUntil); v.Type == gjson.String {
			until, _ = time.Parse(time.RFC3339, v.String())
		}
	}
	now := c.now()
	if !until.IsZero() && until.After(now) {
		return &providers.DeliveryHealth{State: providers.HealthDisabled, DisabledUntil: until, Message: "deliveries failed; the provider sends none until " + until.UTC().Format(time.RFC3339)}
	}
	if msg, ok := holds(h.Disabled); ok {
		return &providers.DeliveryHealth{State: providers.HealthDisabled, Message: msg}
	}
	if !until.IsZero() {
		return &providers.DeliveryHealth{State: providers.HealthFailing, DisabledUntil: until, Message: "deliveries failed; the provider paused them until " + until.UTC().Format(time.RFC3339) + " and sends again"}
	}
	if msg, ok := holds(h.Failing); ok {
		return &providers.DeliveryHealth{State: providers.HealthFailing, Message: msg}
	}
	if msg, ok := holds(h.Healthy); ok {
		return &providers.DeliveryHealth{State: providers.HealthHealthy, Message: msg}
	}
	return &providers.DeliveryHealth{State: providers.HealthUnknown}
}
