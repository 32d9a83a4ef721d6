package cli

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/hookwarden/hookwarden/receiver/adminapi"
)

// eventFlags select the ledger's events (events list, events replay).
type eventFlags struct {
	since, until, typ, sink, selector string
	subscriptions                     []string
}

func (f *eventFlags) bind(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.since, "since", "", "events received at or after this time: RFC 3339, or a duration ago (90m, 24h)")
	cmd.Flags().StringVar(&f.until, "until", "", "events received before this time: RFC 3339, or a duration ago (default: now)")
	cmd.Flags().StringVar(&f.typ, "type", "", "only events of this type (invoice.paid)")
	cmd.Flags().StringVar(&f.sink, "sink", "", "only events delivered to the sink of this name (replay: to it alone)")
	cmd.Flags().StringVarP(&f.selector, "selector", "l", "", "only events of the subscriptions this label selector matches (in the namespace, or all with -A)")
	cmd.Flags().StringSliceVar(&f.subscriptions, "subscription", nil, "only events of this subscription (namespace/name; repeatable)")
}

// query is the admin API's parameters for f: the selector's subscriptions are read from the
// cluster.
func (g *globals) eventQuery(ctx context.Context, f *eventFlags) (url.Values, error) {
	v := url.Values{}
	now := g.opts.Now()
	for _, t := range []struct{ flag, value string }{{"since", f.since}, {"until", f.until}} {
		if t.value == "" {
			continue
		}
		at, err := parseWhen(t.value, now)
		if err != nil {
			return nil, usageError("--%s: %v", t.flag, err)
		}
		v.Set(t.flag, at.UTC().Format(time.RFC3339Nano))
	}
	if f.typ != "" {
		v.Set("type", f.typ)
	}
	if f.sink != "" {
		v.Set("sink", f.sink)
	}
	for _, s := range f.subscriptions {
		if ns, name, ok := strings.Cut(s, "/"); !ok || ns == "" || name == "" {
			return nil, usageError("--subscription %q: want namespace/name", s)
		}
		v.Add("subscription", s)
	}
	if f.selector != "" {
		c, err := g.cluster()
		if err != nil {
			return nil, err
		}
		subs, where, err := g.listSubscriptions(ctx, c, f.selector)
		if err != nil {
			return nil, err
		}
		if len(subs) == 0 {
			return nil, usageError("no WebhookSubscription in %s", where)
		}
		for _, s := range subs {
			v.Add("subscription", s.Namespace+"/"+s.Name)
		}
	}
	return v, nil
}

// parseWhen reads a time: RFC 3339, or a duration before now.
func parseWhen(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		if d < 0 {
			return time.Time{}, fmt.Errorf("%q: a duration ago must not be negative", s)
		}
		return now.Add(-d), nil
	}
	at, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q: want an RFC 3339 time (2026-12-07T10:00:00Z) or a duration ago (90m)", s)
	}
	return at, nil
}

//nolint:funlen // three cobra subcommands declared in one place, each a few lines
func newEventsCommand(g *globals) *cobra.Command {
	var rf receiverFlags
	var lf, rpf eventFlags
	var limit int
	var after string
	var keepKey bool
	cmd := &cobra.Command{
		Use:   "events list|show|replay",
		Short: "The receiver's ledger: list what arrived and where it went, show one event, replay a time range",
		Long: `events talks to the receiver's admin API as deadletters does (see hookwarden deadletters
--help: how it finds the receiver, the token it sends), on the routes /events and /events/*,
which the ClusterRoles events-viewer (list, show) and events-admin (replay) grant. The ledger
keeps every event for its subscription's dedupe window, and its payload for
spec.delivery.retention after delivery (default: the dedupe window).

list prints up to --limit events. The receiver may answer a filtered request with fewer (on
Redis a request reads a bounded part of the ledger); list then reads on from where it stopped,
up to 25 requests, and says where to go on (--after) when more may match.

replay puts the events received in [--since, --until) that match the filters back on the
delivery path, to the sink named --sink or to every sink: one more delivery per event and sink.
The sink sees the same ce-id and the CloudEvents extension attribute hookwardenreplay (1 on the
first replay, 2 on the next...). By default each replay takes an Idempotency-Key of its own
(<key>:replay-<n>): a replay by hand is meant to be processed again, and a consumer or broker
that drops repeats of a key (a JetStream stream's duplicate window, an idempotency store)
would drop it silently. --keep-key keeps the original key, for a sink that may or may not have
the events and must process each at most once. Deliveries still on their way are left alone.
An empty range, a range past the retention or an unknown sink is refused and nothing is sent.`,
	}
	rf.bind(cmd)
	list := &cobra.Command{
		Use: "list", Short: "List the events received in a time range, oldest first, a page at a time", Args: cobra.NoArgs,
		Example: "  hookwarden events list --since 2h --type invoice.paid\n  hookwarden events list --since 2026-12-07T10:00:00Z --until 2026-12-07T11:00:00Z -l team=billing --sink queue",
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.listEvents(cmd, &rf, &lf, limit, after)
		},
	}
	lf.bind(list)
	list.Flags().IntVar(&limit, "limit", 100, "most events on the page (1..1000)")
	list.Flags().StringVar(&after, "after", "", "the page after this one (the cursor the previous page printed)")
	show := &cobra.Command{
		Use: "show SUBSCRIPTION EVENT-ID", Short: "Show one event with its payload and where it went", Args: cobra.ExactArgs(2),
		Example: "  hookwarden events show shop/orders evt_1OabcXYZ",
		RunE: func(cmd *cobra.Command, args []string) error {
			var e adminapi.Event
			v := url.Values{"subscription": {args[0]}, "id": {args[1]}}
			if err := g.withReceiver(cmd, &rf, func(ctx context.Context, r *receiverConn) error {
				return r.call(ctx, http.MethodGet, adminapi.EventsPath+"/show?"+v.Encode(), &e)
			}); err != nil {
				return err
			}
			if g.output == "" || g.output == "table" {
				g.output = "yaml"
			}
			return g.print(cmd.OutOrStdout(), e, nil)
		},
	}
	replay := &cobra.Command{
		Use: "replay --since TIME [--until TIME] [--sink NAME]", Short: "Replay the events of a time range to one sink or all", Args: cobra.NoArgs,
		Example: "  hookwarden events replay --since 2026-12-07T10:00:00Z --until 2026-12-07T10:30:00Z --sink warehouse",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if rpf.since == "" {
				return usageError("events replay needs --since (a replay of the whole ledger is never what was meant)")
			}
			var res adminapi.ReplayResult
			if err := g.withReceiver(cmd, &rf, func(ctx context.Context, r *receiverConn) error {
				v, err := g.eventQuery(ctx, &rpf)
				if err != nil {
					return err
				}
				if keepKey {
					v.Set("keepKey", "true")
				}
				return r.call(ctx, http.MethodPost, adminapi.EventsPath+"/replay?"+v.Encode(), &res)
			}); err != nil {
				return err
			}
			if g.output == "json" || g.output == "yaml" {
				return g.print(cmd.OutOrStdout(), res, nil)
			}
			key := "each with an Idempotency-Key of its own"
			if !res.FreshKey {
				key = "each with its original Idempotency-Key"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "replaying %d events: %d deliveries back on the delivery path, %s", res.Events, res.Requeued, key)
			if res.Skipped > 0 {
				fmt.Fprintf(cmd.OutOrStdout(), "; %d still on their way, left alone", res.Skipped)
			}
			fmt.Fprintln(cmd.OutOrStdout())
			return nil
		},
	}
	rpf.bind(replay)
	replay.Flags().BoolVar(&keepKey, "keep-key", false, "keep the events' Idempotency-Key (default: a key of the replay's own, so that a consumer that drops repeats takes it)")
	cmd.AddCommand(list, show, replay)
	return cmd
}

// listRequests bounds the requests one events list makes to fill its page: the receiver may
// answer a page short of its limit, even empty, with a cursor to go on from (on Redis a
// filtered page reads at most 2,000 index entries per subscription), and past the bound the
// list says where to go on rather than walk a whole ledger for a filter nothing passes.
const listRequests = 25

// listProgressEvery is how many requests go by between two progress lines of a list that
// follows short pages.
const listProgressEvery = 5

// listEvents prints the events of lf, up to limit, from the cursor after: as many pages of the
// receiver as fill it (fillPage), then the cursor to go on from, on stderr.
func (g *globals) listEvents(cmd *cobra.Command, rf *receiverFlags, lf *eventFlags, limit int, after string) error {
	var page adminapi.EventPage
	requests := 0
	if err := g.withReceiver(cmd, rf, func(ctx context.Context, r *receiverConn) error {
		v, err := g.eventQuery(ctx, lf)
		if err != nil {
			return err
		}
		fetch := func(cursor string, n int) (adminapi.EventPage, error) {
			v.Set("limit", strconv.Itoa(n))
			v.Del("after")
			if cursor != "" {
				v.Set("after", cursor)
			}
			var p adminapi.EventPage
			err := r.call(ctx, http.MethodGet, adminapi.EventsPath+"?"+v.Encode(), &p)
			return p, err
		}
		page, requests, err = fillPage(fetch, after, limit, listRequests, cmd.ErrOrStderr())
		return err
	}); err != nil {
		return err
	}
	switch {
	case page.Next == "":
	case len(page.Events) < limit:
		fmt.Fprintf(cmd.ErrOrStderr(), "more events may match: %d requests read the ledger this far without filling --limit %d (a filter few events pass); go on with --after %s\n",
			requests, limit, page.Next)
	default:
		fmt.Fprintf(cmd.ErrOrStderr(), "more events: the next page is --after %s\n", page.Next)
	}
	return g.print(cmd.OutOrStdout(), page, func(t *table) {
		t.header("RECEIVED", "SUBSCRIPTION", "EVENT", "TYPE", "SINKS")
		for _, e := range page.Events {
			t.row(e.ReceivedAt.Format(time.RFC3339), e.Subscription, e.EventID, dash(e.EventType), sinksColumn(e))
		}
	})
}

// fetchPage asks the receiver for one page of at most limit events after the cursor after.
type fetchPage func(after string, limit int) (adminapi.EventPage, error)

// fillPage reads pages from the cursor after until they hold limit events or the walk ends, in
// at most maxRequests requests, and says on progress how far it got every listProgressEvery
// requests. The page it returns holds the events read and the cursor after the last entry the
// receiver read ("" at the end); requests is how many it made.
func fillPage(fetch fetchPage, after string, limit, maxRequests int, progress io.Writer) (page adminapi.EventPage, requests int, err error) {
	page.Events = []adminapi.Event{}
	for requests < maxRequests {
		got, err := fetch(after, limit-len(page.Events))
		requests++
		if err != nil {
			return page, requests, err
		}
		page.Events, page.Next, after = append(page.Events, got.Events...), got.Next, got.Next
		if page.Next == "" || len(page.Events) >= limit {
			break
		}
		if requests%listProgressEvery == 0 && requests < maxRequests {
			fmt.Fprintf(progress, "reading on through the ledger: %d requests, %d of %d events so far\n", requests, len(page.Events), limit)
		}
	}
	return page, requests, nil
}

// sinksColumn is "name:state" per sink, with the attempts when more than one.
func sinksColumn(e adminapi.Event) string {
	if e.Forgotten != nil {
		return "(payload forgotten)"
	}
	parts := make([]string, len(e.Sinks))
	for i, s := range e.Sinks {
		parts[i] = s.Sink + ":" + s.State
		if s.Attempts > 1 {
			parts[i] += "×" + strconv.Itoa(s.Attempts)
		}
		if s.Replays > 0 {
			parts[i] += "(replayed " + strconv.Itoa(s.Replays) + ")"
		}
	}
	return dash(strings.Join(parts, ","))
}
