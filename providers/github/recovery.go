package github

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hookwarden/hookwarden/providers"
)

// Recovery through the hook's delivery log (PROVIDERS.md §2.1, §2.3): GitHub never retries a
// failed delivery, keeps every attempt in GET .../hooks/{id}/deliveries (newest first,
// cursor-paged through Link), and sends one again on POST .../deliveries/{delivery_id}/attempts
// with the original X-GitHub-Delivery, within 3 days (7 on Enterprise Server).

// Redelivery windows (docs.github.com "Redelivering webhooks").
const (
	RedeliveryWindow           = 72 * time.Hour
	EnterpriseRedeliveryWindow = 7 * 24 * time.Hour
)

// maxDeliveryPages bounds one Missed: 500 pages of 100 is more than a busy hook delivers in a
// week; more means a server that keeps answering rel="next".
const maxDeliveryPages = 500

var (
	_ providers.Recoverer      = (*Client)(nil)
	_ providers.HealthReporter = (*Client)(nil)
)

// recovery is what Capabilities().Recovery says for an API URL: a GitHub Enterprise Server
// (https://HOST/api/v3) keeps deliveries for 7 days, github.com for 3.
func recovery(apiPath string) providers.RecoveryCapabilities {
	w := RedeliveryWindow
	if strings.HasSuffix(strings.ToLower(strings.TrimRight(apiPath, "/")), "/api/v3") {
		w = EnterpriseRedeliveryWindow
	}
	return providers.RecoveryCapabilities{Mode: providers.RecoveryRedeliver, Window: w}
}

// wireDelivery is the part of hook-delivery-item the client reads; fields stay raw so that one
// entry of an unexpected shape is skipped and counted, not the page.
type wireDelivery struct {
	ID          json.RawMessage `json:"id"`
	GUID        json.RawMessage `json:"guid"`
	DeliveredAt json.RawMessage `json:"delivered_at"`
	Status      json.RawMessage `json:"status"`
	StatusCode  json.RawMessage `json:"status_code"`
	Event       json.RawMessage `json:"event"`
}

// delivery is one attempt of the log.
type delivery struct {
	id     int64
	guid   string
	at     time.Time
	code   int // 0: no answer
	status string
	event  string
}

func (d delivery) ok() bool { return d.code >= 200 && d.code < 300 }

// decodeDelivery reads one entry; false when it lacks what the description promises (a positive
// id, a guid, a delivered_at, an integer status_code).
func decodeDelivery(raw json.RawMessage) (delivery, bool) {
	var w wireDelivery
	var d delivery
	if json.Unmarshal(raw, &w) != nil {
		return d, false
	}
	var at string
	if json.Unmarshal(w.ID, &d.id) != nil || d.id <= 0 ||
		json.Unmarshal(w.GUID, &d.guid) != nil || d.guid == "" ||
		json.Unmarshal(w.DeliveredAt, &at) != nil || json.Unmarshal(w.StatusCode, &d.code) != nil {
		return d, false
	}
	t, err := time.Parse(time.RFC3339, at)
	if err != nil {
		return d, false
	}
	d.at = t.UTC()
	_ = json.Unmarshal(w.Status, &d.status) // optional words for messages
	_ = json.Unmarshal(w.Event, &d.event)
	return d, true
}

// deliveryPage is one page of the log: the entries that fit, how many did not, and the next
// page's URL ("" at the end).
type deliveryPage struct {
	items     []delivery
	malformed int
	next      string
}

func (c *Client) deliveriesURL(hookID string) string {
	return c.base.String() + c.hookPath(hookID) + "/deliveries?per_page=" + strconv.Itoa(perPage)
}

func (c *Client) deliveryPage(ctx context.Context, u string) (deliveryPage, error) {
	resp, err := c.rc.R().SetContext(ctx).Get(u)
	if err != nil {
		return deliveryPage{}, c.networkError(err)
	}
	if resp.StatusCode() != http.StatusOK {
		return deliveryPage{}, c.classify(resp, opDeliveries)
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(resp.Body(), &raws); err != nil {
		return deliveryPage{}, &providers.Error{Kind: providers.Transient, StatusCode: resp.StatusCode(),
			Message: "GitHub's delivery list is not a JSON array", RequestID: resp.Header().Get("X-GitHub-Request-Id")}
	}
	var p deliveryPage
	for _, raw := range raws {
		d, ok := decodeDelivery(raw)
		if !ok {
			p.malformed++
			continue
		}
		p.items = append(p.items, d)
	}
	if next := providers.ParseLinks(resp.Header().Values("Link"))["next"]; next != "" {
		if p.next, err = c.resolve(u, next); err != nil {
			return deliveryPage{}, err
		}
	}
	return p, nil
}

// Missed lists the events whose deliveries to hook reg.ID all failed, oldest first: the log is
// read newest first, every attempt of a guid together (the first attempt, the redeliveries), and
// a guid with any 2xx attempt is not missed, whatever failed before or after. All attempts are
// read, not status=failure: GitHub's failure class is status_code 400-599 only, so a delivery
// that got no answer at all (status_code 0: refused, timed out) is in neither class, and that is
// the receiver-down case; a 3xx (GitHub does not follow redirects) is "success" there but not a
// delivery the receiver processed.
//
// Paging stops at the first page that reaches deliveries older than since: every attempt of an
// event comes after its first, so an event first delivered at or after since has no attempt
// before it. Events older than the window are reported Expired (since is not clamped to the
// window: the reconciler reports what lies beyond it). ping deliveries are left out unless
// events names ping: a missed ping is no event to recover. Entries without an id, a guid, a
// delivered_at or a status_code are skipped and counted in Malformed.
func (c *Client) Missed(ctx context.Context, reg providers.Registration, events []string, since time.Time, limit int) (providers.MissedPage, error) {
	if err := c.checkID(reg.ID); err != nil {
		return providers.MissedPage{}, err
	}
	type event struct {
		first, newest delivery
		ok            bool
	}
	byGUID := map[string]*event{}
	out := providers.MissedPage{Covers: c.now()}
	seen := map[string]bool{}
	u := c.deliveriesURL(reg.ID)
	for n := 0; u != ""; n++ {
		if n == maxDeliveryPages {
			return providers.MissedPage{}, &providers.Error{Kind: providers.Transient, Message: fmt.Sprintf("delivery list pagination did not end after %d pages", maxDeliveryPages)}
		}
		if seen[u] {
			return providers.MissedPage{}, &providers.Error{Kind: providers.Transient, Message: "delivery list pagination repeated a page: " + c.redact(u)}
		}
		seen[u] = true
		p, err := c.deliveryPage(ctx, u)
		if err != nil {
			return providers.MissedPage{}, err
		}
		out.Malformed += p.malformed
		u = p.next
		for _, d := range p.items {
			if d.at.Before(since) {
				u = "" // this page reached since: older pages hold only older events
			}
			out.Logged(d.at, since)
			e := byGUID[d.guid]
			if e == nil {
				e = &event{first: d, newest: d}
				byGUID[d.guid] = e
			}
			if d.at.Before(e.first.at) || (d.at.Equal(e.first.at) && d.id < e.first.id) {
				e.first = d
			}
			if d.id > e.newest.id {
				e.newest = d
			}
			e.ok = e.ok || d.ok()
		}
	}

	all := slices.Contains(events, "*")
	edge := c.now().Add(-c.caps.Recovery.Window)
	for guid, e := range byGUID {
		ev := e.first.event
		if e.ok || e.first.at.Before(since) {
			continue
		}
		if !slices.Contains(events, ev) && (!all || ev == PingEvent) {
			continue
		}
		out.Missed = append(out.Missed, providers.Missed{
			ID: guid, At: e.first.at, Type: ev, Handle: strconv.FormatInt(e.newest.id, 10),
			Expired: e.first.at.Before(edge),
		})
	}
	slices.SortFunc(out.Missed, func(a, b providers.Missed) int {
		return cmp.Or(a.At.Compare(b.At), strings.Compare(a.ID, b.ID))
	})
	out.Missed, out.More = providers.CutMissed(out.Missed, limit)
	return out, nil
}

// Redeliver asks GitHub to send delivery m.Handle of hook reg.ID again (202): GitHub sends it
// with the original X-GitHub-Delivery guid, so the receiver's ledger answers it as a duplicate
// if the event had arrived after all. An Expired m is refused before any request. GitHub
// answers 404 for a delivery it no longer has (NotFound) and 422 for one it will not redeliver
// (past its window: Permanent); rate limits are classified as on every request.
func (c *Client) Redeliver(ctx context.Context, reg providers.Registration, m providers.Missed) error {
	if err := c.checkID(reg.ID); err != nil {
		return err
	}
	if n, err := strconv.ParseInt(m.Handle, 10, 64); err != nil || n <= 0 || strconv.FormatInt(n, 10) != m.Handle {
		return invalid(fmt.Sprintf("github delivery id %q is not a positive decimal integer", m.Handle))
	}
	if m.Expired {
		return invalid("delivery " + m.ID + " is older than GitHub's redelivery window (" + windowWords(c.caps.Recovery.Window) + ")")
	}
	resp, err := c.rc.R().SetContext(ctx).Post(c.hookPath(reg.ID) + "/deliveries/" + m.Handle + "/attempts")
	if err != nil {
		return c.networkError(err)
	}
	if resp.StatusCode() == http.StatusAccepted {
		return nil
	}
	return c.classify(resp, opRedeliver)
}

// Health reads the hook's most recent deliveries (one page, up to 100): Failed of Total got no
// 2xx, and State follows the newest one (Failing when it failed), so a receiver that answers
// again is Healthy at once although the failures stay in the log for days.
func (c *Client) Health(ctx context.Context, reg providers.Registration) (providers.DeliveryHealth, error) {
	if err := c.checkID(reg.ID); err != nil {
		return providers.DeliveryHealth{}, err
	}
	p, err := c.deliveryPage(ctx, c.deliveriesURL(reg.ID))
	if err != nil {
		return providers.DeliveryHealth{}, err
	}
	if len(p.items) == 0 {
		return providers.DeliveryHealth{State: providers.HealthUnknown, Message: "no recent deliveries"}, nil
	}
	h := providers.DeliveryHealth{Total: len(p.items), Since: p.items[0].at}
	newest := p.items[0]
	for _, d := range p.items {
		if !d.ok() {
			h.Failed++
		}
		if d.at.Before(h.Since) {
			h.Since = d.at
		}
		if d.id > newest.id {
			newest = d
		}
	}
	h.State = providers.HealthHealthy
	if !newest.ok() {
		h.State = providers.HealthFailing
	}
	last := "last answered " + strconv.Itoa(newest.code)
	if newest.code == 0 {
		last = "last got no answer"
		if newest.status != "" {
			last += " (" + newest.status + ")"
		}
	}
	h.Message = fmt.Sprintf("%d of %d recent deliveries failed; %s", h.Failed, h.Total, last)
	return h, nil
}

// listHealth is what a hook's last_response says about deliveries, at no extra request: a 2xx
// is healthy; "unused" (nothing delivered yet) is unknown, and says the delivery log is empty;
// no last_response (organization hooks) is nil; anything else (an
// error code, or no answer) is failing.
func listHealth(lr *providers.DeliveryReport) *providers.DeliveryHealth {
	switch {
	case lr == nil:
		return nil
	case lr.Code >= 200 && lr.Code < 300:
		return &providers.DeliveryHealth{State: providers.HealthHealthy, Message: "last response " + strconv.Itoa(lr.Code)}
	case lr.Code == 0 && (lr.Status == "unused" || lr.Status == ""):
		// Said, not unknown: nothing was delivered, so the delivery log has nothing to add.
		return &providers.DeliveryHealth{State: providers.HealthUnknown, Message: "nothing delivered yet"}
	}
	msg := "last response " + strconv.Itoa(lr.Code)
	if lr.Code == 0 {
		msg = "last delivery got no answer"
	}
	if lr.Message != "" {
		msg += ": " + lr.Message
	}
	return &providers.DeliveryHealth{State: providers.HealthFailing, Message: msg}
}

func windowWords(d time.Duration) string {
	if d > 0 && d%(24*time.Hour) == 0 {
		return strconv.Itoa(int(d/(24*time.Hour))) + " days"
	}
	return d.String()
}
