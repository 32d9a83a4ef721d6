package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// The Redis store's ledger. Each claim adds its new events to the subscription's index
// (P:{s:S}:ev, a sorted set by receipt whose members are the events' heads, zero-padded) and
// to its kept set (P:{s:S}:kept, the events whose payload is kept), in the claim's script. A
// page of Events walks the index of each selected subscription from the cursor (one read-only
// script per subscription, run in parallel) and merges them by (received, job id of the head);
// the type and sink filters are applied while walking, reading at most ledgerScan entries per
// subscription and page, so a page on a sparse filter may hold fewer events than its limit,
// even none, and a Next that continues after the last entry read. Events claimed by a version
// before the index are not in it (no backfill: finding them would mean a SCAN of every key):
// EventOf and Requeue reach them by their id, Events does not list them; they leave the
// store within their dedupe window. Sweep drops the entries of events that are gone, once the
// receiver's cutoff has passed them.

var _ Ledger = (*Redis)(nil)

const (
	// ledgerScan is the default bound on the index entries one page reads per subscription
	// (the cost of a page on a filter that passes few events).
	ledgerScan = 2_000
	// forgetScan bounds the kept entries one Forget call reads (dead letters and events on
	// their way are read and left).
	forgetScan = 10_000
	// requeueEvents bounds the events of one Requeue script.
	requeueEvents = 500
	// trimBatch is the entries one call of the index trimming script reads.
	trimBatch = 1000
)

// ledgerMember is the index member of the event whose head has sequence number seq.
func ledgerMember(seq int64) string { return fmt.Sprintf("%013d", seq) }

// subWalk is one subscription's part of a page of Events.
type subWalk struct {
	sub     registered
	events  []LedgerEvent
	ids     []int64 // the heads' job ids
	stopped bool    // the walk stopped at ledgerScan before the range ended
	last    cursor  // the last entry read (when stopped)
	err     error
}

// Events implements Ledger.
func (r *Redis) Events(ctx context.Context, q EventQuery) (EventPage, error) {
	c, err := checkQuery(q)
	if err != nil {
		return EventPage{}, err
	}
	subs, err := r.subscriptions(ctx)
	if err != nil {
		return EventPage{}, fmt.Errorf("store: events: %w", err)
	}
	if len(q.Subscriptions) > 0 {
		subs = slices.DeleteFunc(subs, func(s registered) bool { return !slices.Contains(q.Subscriptions, s.name) })
	}
	until := "+inf"
	if !q.Until.IsZero() {
		until = "(" + us(q.Until)
	}
	walks := make([]*subWalk, len(subs))
	parallel(len(subs), func(i int) {
		walks[i] = r.walkIndex(ctx, subs[i], c, until, q)
	})
	type item struct {
		e  LedgerEvent
		at cursor
	}
	var items []item
	var frontier *cursor
	for _, w := range walks {
		if w.err != nil {
			err = errors.Join(err, w.err)
			continue
		}
		for k, e := range w.events {
			items = append(items, item{e, cursor{e.ReceivedAt.UnixMicro(), w.ids[k]}})
		}
		if w.stopped && (frontier == nil || before(w.last, *frontier)) {
			frontier = &w.last
		}
	}
	if err != nil {
		return EventPage{}, fmt.Errorf("store: events: %w", err)
	}
	slices.SortFunc(items, func(a, b item) int {
		return cmp.Or(cmp.Compare(a.at.received, b.at.received), cmp.Compare(a.at.id, b.at.id))
	})
	if frontier != nil {
		// Past the first walk that stopped, another's events could come before ones not read.
		items = slices.DeleteFunc(items, func(it item) bool { return before(*frontier, it.at) })
	}
	var page EventPage
	switch {
	case len(items) > q.Limit:
		items = items[:q.Limit]
		page.Next = items[q.Limit-1].at.String()
	case frontier != nil:
		page.Next = frontier.String()
	}
	page.Events = make([]LedgerEvent, len(items))
	for i, it := range items {
		page.Events[i] = it.e
	}
	return page, nil
}

// before is whether a comes before b in the (received, id) walk.
func before(a, b cursor) bool {
	return a.received < b.received || a.received == b.received && a.id < b.id
}

// walkIndex reads sub's part of a page: its events after c, received before until.
func (r *Redis) walkIndex(ctx context.Context, sub registered, c cursor, until string, q EventQuery) *subWalk {
	w := &subWalk{sub: sub}
	low, skip := strconv.FormatInt(c.received, 10), ""
	switch cidx := c.id >> seqBits; {
	case sub.index < cidx: // all its events at the cursor's time come before the cursor
		low = "(" + low
	case sub.index == cidx:
		skip = ledgerMember(c.id & seqMask)
	}
	v, err := redisEvents.RunRO(ctx, r.c, []string{r.subKey(sub.name, "ev")},
		low, until, skip, q.Type, q.Sink, q.Limit+1, r.ledgerScan, r.subKey(sub.name, "j:")).Slice()
	if err == nil && len(v) != 4 {
		err = fmt.Errorf("events answered %d values", len(v))
	}
	if err != nil {
		w.err = fmt.Errorf("%s: %w", sub.name, err)
		return w
	}
	events, _ := v[0].([]any)
	for _, raw := range events {
		e, id, err := ledgerEventOf(sub, raw)
		if err != nil {
			w.err = fmt.Errorf("%s: %w", sub.name, err)
			return w
		}
		w.events, w.ids = append(w.events, e), append(w.ids, id)
	}
	if stopped, _ := v[1].(int64); stopped == 1 {
		member, _ := v[2].(string)
		score, _ := v[3].(string)
		seq, err1 := strconv.ParseInt(member, 10, 64)
		at, err2 := strconv.ParseFloat(score, 64)
		if err := errors.Join(err1, err2); err != nil {
			w.err = fmt.Errorf("%s: last entry read: %w", sub.name, err)
			return w
		}
		w.stopped, w.last = true, cursor{int64(at), sub.index<<seqBits | seq}
	}
	return w
}

// ledgerEventOf reads a ledgerEvent answer (see redisLedgerEvent) of sub; id is its head's job
// id.
func ledgerEventOf(sub registered, raw any) (LedgerEvent, int64, error) {
	v, _ := raw.([]any)
	if len(v) != 3 {
		return LedgerEvent{}, 0, fmt.Errorf("ledger event: unexpected reply %v", raw)
	}
	f, _ := v[1].([]any)
	jobs, _ := v[2].([]any)
	head, err := strconv.ParseInt(str(v[0]), 10, 64)
	if err != nil || len(f) != 10 {
		return LedgerEvent{}, 0, fmt.Errorf("ledger event: unexpected reply %v", raw)
	}
	num := func(v any) int64 {
		n, _ := strconv.ParseInt(str(v), 10, 64)
		return n
	}
	e := LedgerEvent{
		Event: Event{
			Subscription: sub.name, EventID: str(f[0]), SubscriptionUID: str(f[1]), EventType: str(f[2]), ContentType: str(f[3]),
			ReceivedAt: fromMicros(num(f[4])), MaxAttempts: int(num(f[5])), Trace: str(f[6]),
		},
		Forgotten: fromMicros(num(f[7])),
	}
	if p, ok := f[9].(string); ok {
		e.Payload = []byte(p)
	}
	if !e.Forgotten.IsZero() {
		e.Payload = []byte{}
	}
	for _, raw := range jobs {
		j, _ := raw.([]any)
		if len(j) != 7 {
			return LedgerEvent{}, 0, fmt.Errorf("ledger event: unexpected job %v", raw)
		}
		rec := SinkRecord{
			JobID: sub.index<<seqBits | num(j[0]), Sink: str(j[1]), Attempts: int(num(j[3])),
			LastError: str(j[4]), Replays: int(num(j[6])),
		}
		rec.settle(str(j[2]), fromMicros(num(j[5])))
		e.Sinks = append(e.Sinks, rec)
	}
	return e, sub.index<<seqBits | head, nil
}

// str is a script's string value ("" for a nil).
func str(v any) string {
	s, _ := v.(string)
	return s
}

// EventOf implements Ledger: the event its dedupe key names, whether the index has it or not.
func (r *Redis) EventOf(ctx context.Context, subscription, eventID string) (LedgerEvent, bool, error) {
	if strings.ContainsAny(subscription, "{}") {
		return LedgerEvent{}, false, nil // never claimed (see validate)
	}
	idx, err := r.indexOf(ctx, subscription)
	if errors.Is(err, redis.Nil) {
		return LedgerEvent{}, false, nil
	}
	if err != nil {
		return LedgerEvent{}, false, fmt.Errorf("store: event: %w", err)
	}
	v, err := redisEventOf.RunRO(ctx, r.c, []string{r.subKey(subscription, "e:"+eventID)}, r.subKey(subscription, "j:")).Slice()
	if err != nil {
		return LedgerEvent{}, false, fmt.Errorf("store: event: %w", err)
	}
	if len(v) == 0 {
		return LedgerEvent{}, false, nil
	}
	e, _, err := ledgerEventOf(registered{subscription, idx}, v)
	if err != nil {
		return LedgerEvent{}, false, fmt.Errorf("store: event: %w", err)
	}
	return e, true, nil
}

// Requeue implements Ledger: a script per subscription and requeueEvents events, each atomic.
func (r *Redis) Requeue(ctx context.Context, refs []EventRef, sink string, freshKey bool, now time.Time) (RequeueResult, error) {
	bySub := map[string][]string{}
	var subs []string
	var res RequeueResult
	for _, ref := range refs {
		if strings.ContainsAny(ref.Subscription, "{}") {
			res.Forgotten++ // never claimed
			continue
		}
		if _, ok := bySub[ref.Subscription]; !ok {
			subs = append(subs, ref.Subscription)
		}
		bySub[ref.Subscription] = append(bySub[ref.Subscription], ref.EventID)
	}
	fresh := "0"
	if freshKey {
		fresh = "1"
	}
	var mu sync.Mutex
	var errs []error
	parallel(len(subs), func(i int) {
		sub := subs[i]
		for chunk := range slices.Chunk(bySub[sub], requeueEvents) {
			args := []any{r.subKey(sub, "j:"), r.subKey(sub, "e:"), sink, fresh, us(now)}
			for _, id := range chunk {
				args = append(args, id)
			}
			v, err := redisRequeue.Run(ctx, r.c, []string{r.subKey(sub, "due")}, args...).Int64Slice()
			if err == nil && len(v) != 4 {
				err = fmt.Errorf("requeue answered %d values", len(v))
			}
			mu.Lock()
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", sub, err))
				mu.Unlock()
				return
			}
			res.Requeued += int(v[0])
			res.Skipped += int(v[1])
			res.Forgotten += int(v[2])
			res.NoSink += int(v[3])
			mu.Unlock()
			if v[0] > 0 {
				r.touch(ctx, sub, now)
			}
		}
	})
	if err := errors.Join(errs...); err != nil {
		return res, fmt.Errorf("store: requeue: %w", err)
	}
	return res, nil
}

// Forget implements Ledger: a walk of the subscription's kept set, oldest first, which the
// forgotten events leave.
func (r *Redis) Forget(ctx context.Context, subscription string, cutoff time.Time, limit int) (int, error) {
	if limit <= 0 || strings.ContainsAny(subscription, "{}") {
		return 0, nil
	}
	n, err := redisForget.Run(ctx, r.c, []string{r.subKey(subscription, "kept")},
		us(cutoff), limit, r.subKey(subscription, "j:"), us(r.now()), forgetScan).Int()
	if err != nil {
		return 0, fmt.Errorf("store: forget payloads of %s: %w", subscription, err)
	}
	return n, nil
}

// trimLedger drops the entries of sub's index and kept set received before cutoff whose event
// is gone.
func (r *Redis) trimLedger(ctx context.Context, sub string, cutoff time.Time) error {
	for _, set := range []string{"ev", "kept"} {
		offset := int64(0)
		for {
			v, err := redisTrimIndex.Run(ctx, r.c, []string{r.subKey(sub, set)}, us(cutoff), trimBatch, offset, r.subKey(sub, "j:")).Int64Slice()
			if err == nil && len(v) != 3 {
				err = fmt.Errorf("trim answered %d values", len(v))
			}
			if err != nil {
				return fmt.Errorf("trim %s: %w", set, err)
			}
			offset += v[1]
			if v[2] == 0 {
				break
			}
		}
	}
	return nil
}
