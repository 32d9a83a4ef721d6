package stripe

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"time"

	stripego "github.com/stripe/stripe-go/v76"
	"github.com/stripe/stripe-go/v76/form"

	"github.com/hookwarden/hookwarden/providers"
)

// Recovery on Stripe (PROVIDERS.md §1.6): Stripe keeps events for 30 days and lists those not
// delivered to every endpoint (delivery_success=false), so missed events are fetched and handed
// to the receiver signed as Stripe signs them; there is nothing to ask Stripe to redeliver.
//
// Two things the listing does not do, and the reconciler must know:
//   - delivery_success is account-wide: an event pending for another endpoint of the account is
//     listed too (the receiver's ledger answers it as a duplicate if it had arrived).
//   - an event created while our endpoint was disabled never counted our endpoint as pending,
//     so unless another endpoint is pending it is not listed at all.
//
// Events older than EventRetention are never listed: nothing comes back from beyond it.

// EventRetention is how long Stripe keeps events ("List events, going back up to 30 days").
const EventRetention = 30 * 24 * time.Hour

// maxTypesPerList is how many names one types[] filter may hold.
const maxTypesPerList = 20

// Headers Stripe sends with a delivery besides Stripe-Signature.
const (
	DeliveryContentType = "application/json; charset=utf-8"
	DeliveryUserAgent   = "Stripe/1.0 (+https://stripe.com/docs/webhooks)"
)

var (
	_ providers.Reenabler      = (*Client)(nil)
	_ providers.Recoverer      = (*Client)(nil)
	_ providers.DeliverySigner = (*Client)(nil)
	_ providers.EventLister    = (*Client)(nil)
)

// Missed lists, oldest first, the account's events of the given types (any type when events
// holds "*" or is empty) created at or after since that Stripe reports as not delivered to
// every endpoint (delivery_success=false). reg is not consulted: the listing is account-wide.
// More than 20 types are split into several listings of at most 20 (Stripe's limit) and merged.
// Every listing is read to its end, because Stripe lists newest first and the oldest come last;
// at most limit events are returned (0: all) and every other event of the second the limit falls
// in (providers.CutMissed: a busy account creates hundreds of events in one second), More set
// when some were cut; the walk keeps no more than that in memory. An event without an evt_ id or
// a numeric created is skipped and counted as Malformed. Payload is the event's JSON exactly as
// the listing returned it.
func (c *Client) Missed(ctx context.Context, _ providers.Registration, events []string, since time.Time, limit int) (providers.MissedPage, error) {
	return c.events(ctx, events, since, limit, true)
}

// Events lists, as Missed does, every event of the given types created at or after since,
// delivered or not (no delivery_success filter): what a recovery needs for the time an endpoint
// was disabled, when Stripe counted it as pending for nothing.
func (c *Client) Events(ctx context.Context, events []string, since time.Time, limit int) (providers.MissedPage, error) {
	return c.events(ctx, events, since, limit, false)
}

func (c *Client) events(ctx context.Context, events []string, since time.Time, limit int, undeliveredOnly bool) (providers.MissedPage, error) {
	var out providers.MissedPage
	seen := map[string]bool{}
	for _, types := range typeBatches(events) {
		batch, malformed, dropped, err := c.listEvents(ctx, types, since, undeliveredOnly, limit)
		if err != nil {
			return providers.MissedPage{}, err
		}
		out.Malformed += malformed
		out.More = out.More || dropped
		for _, m := range batch {
			if !seen[m.ID] { // an event has one type, but a server might list it twice
				seen[m.ID] = true
				out.Missed = append(out.Missed, m)
			}
		}
	}
	// Each listing arrived oldest first; a stable sort keeps that order within a second.
	slices.SortStableFunc(out.Missed, func(a, b providers.Missed) int { return a.At.Compare(b.At) })
	var cut bool
	out.Missed, cut = providers.CutMissed(out.Missed, limit)
	out.More = out.More || cut
	return out, nil
}

// typeBatches splits the event types into types[] filters of at most 20 names, sorted and
// without repeats; one nil filter (no type filter) when any type is wanted.
func typeBatches(events []string) [][]string {
	if len(events) == 0 || slices.Contains(events, "*") {
		return [][]string{nil}
	}
	return slices.Collect(slices.Chunk(canonicalEvents(events), maxTypesPerList))
}

// listEvents reads one listing to its end (starting_after the last event of each page) and
// returns its events oldest first; undeliveredOnly adds delivery_success=false. With keep > 0 it
// holds only the oldest keep events read so far and the rest of their newest second (the walk
// comes from the newest, so an event newer than those can never be among the oldest keep), and
// reports whether it dropped any.
func (c *Client) listEvents(ctx context.Context, types []string, since time.Time, undeliveredOnly bool, keep int) (oldestFirst []providers.Missed, malformed int, dropped bool, err error) {
	params := &stripego.EventListParams{ListParams: stripego.ListParams{Limit: stripego.Int64(pageSize)}}
	if undeliveredOnly {
		params.DeliverySuccess = stripego.Bool(false)
	}
	if len(types) > 0 {
		params.Types = stripego.StringSlice(types)
	}
	if !since.IsZero() {
		params.CreatedRange = &stripego.RangeQueryParams{GreaterThanOrEqual: since.Unix()}
	}
	var newestFirst []providers.Missed
	seen := map[string]bool{}
	after := ""
	for {
		params.StartingAfter = nil
		if after != "" {
			params.StartingAfter = stripego.String(after)
		}
		q := &form.Values{}
		form.AppendTo(q, params)
		var page rawPage
		if err := c.api.Events.B.CallRaw(http.MethodGet, "/v1/events", c.key, q, &stripego.Params{Context: ctx}, &page); err != nil {
			return nil, 0, false, c.classify(err)
		}
		last := ""
		for _, raw := range page.Data {
			m, id, ok := decodeEvent(raw)
			if id != "" {
				last = id
			}
			if !ok {
				malformed++
				continue
			}
			if seen[m.ID] {
				// A server that keeps returning the same page would otherwise loop forever.
				return nil, 0, false, &providers.Error{Kind: providers.Transient, Message: "event list pagination did not advance past " + m.ID}
			}
			seen[m.ID] = true
			newestFirst = append(newestFirst, m)
		}
		n := len(newestFirst)
		newestFirst = dropNewest(newestFirst, keep)
		dropped = dropped || len(newestFirst) < n
		if !page.HasMore {
			break
		}
		if last == "" {
			return nil, 0, false, &providers.Error{Kind: providers.Transient, Message: "event list page says more follow, but its last event has no id to continue from"}
		}
		after = last
	}
	slices.Reverse(newestFirst)
	return newestFirst, malformed, dropped, nil
}

// dropNewest drops, from events listed newest first, those newer than the second of the keep-th
// oldest (keep 0: none).
func dropNewest(newestFirst []providers.Missed, keep int) []providers.Missed {
	if keep <= 0 || len(newestFirst) <= keep {
		return newestFirst
	}
	edge := newestFirst[len(newestFirst)-keep].At.Truncate(time.Second)
	i := 0
	for newestFirst[i].At.Truncate(time.Second).After(edge) {
		i++
	}
	return slices.Delete(newestFirst, 0, i)
}

// decodeEvent reads what Missed needs from one listed event. id is the event's id when it is a
// string at all (a cursor to page on), ok whether the event is fit to be recovered.
func decodeEvent(raw json.RawMessage) (m providers.Missed, id string, ok bool) {
	var ev struct {
		ID      *string `json:"id"`
		Created *int64  `json:"created"`
		Type    string  `json:"type"`
	}
	if json.Unmarshal(raw, &ev) != nil {
		// A field of another type spoils the whole event: read the id alone, for the cursor.
		var idOnly struct {
			ID string `json:"id"`
		}
		_ = json.Unmarshal(raw, &idOnly)
		return m, idOnly.ID, false
	}
	if ev.ID != nil {
		id = *ev.ID
	}
	if !strings.HasPrefix(id, "evt_") || ev.Created == nil {
		return m, id, false
	}
	return providers.Missed{ID: id, At: time.Unix(*ev.Created, 0).UTC(), Type: ev.Type, Payload: slices.Clone(raw)}, id, true
}

// Redeliver always fails: Stripe has no API that sends an event again. Recovered events are
// fetched by Missed and handed to the receiver signed with SignDelivery (RecoveryFetch).
func (c *Client) Redeliver(context.Context, providers.Registration, providers.Missed) error {
	return &providers.Error{Kind: providers.Permanent, Message: "Stripe has no redelivery API: missed events are fetched from /v1/events and signed with the endpoint's secret"}
}

// SignDelivery returns the headers Stripe sends with a delivery of payload: Stripe-Signature
// (t=now, v1 = hex HMAC-SHA256 keyed with secret over "t.payload"), Content-Type and User-Agent.
func (c *Client) SignDelivery(payload []byte, secret string, now time.Time) (http.Header, error) {
	if secret == "" {
		return nil, invalid("signing secret is empty")
	}
	h := http.Header{}
	h.Set(SignatureHeader, SignHeader(secret, now, payload))
	h.Set("Content-Type", DeliveryContentType)
	h.Set("User-Agent", DeliveryUserAgent)
	return h, nil
}

// Reenable enables endpoint reg.ID again (disabled=false, nothing else): Stripe disables an
// endpoint whose deliveries keep failing, and the reconciler enables it only once the endpoint
// answers, so that Stripe does not disable it again at once.
func (c *Client) Reenable(ctx context.Context, reg providers.Registration) error {
	if err := requireID(endpointNoun, reg.ID); err != nil {
		return err
	}
	params := &stripego.WebhookEndpointParams{Disabled: stripego.Bool(false)}
	params.Context = ctx
	if _, err := c.api.WebhookEndpoints.Update(reg.ID, params); err != nil {
		return c.classify(err)
	}
	return nil
}

// health is what an endpoint's status says about deliveries to it: Stripe disables an endpoint
// that keeps failing (or a user does, in the dashboard); an enabled one tells nothing, as
// Stripe's API shows no delivery attempts per endpoint.
func health(status string) *providers.DeliveryHealth {
	if status != "disabled" {
		return nil
	}
	return &providers.DeliveryHealth{State: providers.HealthDisabled, Message: "the endpoint's status is disabled: Stripe sends it no events (disabled after failing deliveries, or in the dashboard)"}
}
