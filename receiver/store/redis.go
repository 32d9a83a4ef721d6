package store

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Redis is the Store on Redis 7 (one server, or a Redis Cluster).
//
// Key layout, with P the key prefix (default "hookwarden") and S a subscription; every key of S
// carries the hash tag {s:S}, so one subscription's keys share a Cluster slot and each script
// runs on one node:
//
//	P:{s:S}:e:<event id>  string  the dedupe key: the sequence number of the event's first job
//	                              (its head)
//	P:{s:S}:r:<replay>    string  a replay key (Event.ReplayKey): the event id that brought it;
//	                              its TTL is the dedupe window from the receipt
//	P:{s:S}:j:<seq>       hash    a job: event, sink, state, attempts, run_at, lease, last error;
//	                              an event's jobs have consecutive numbers from its head, which
//	                              counts those not yet ended (see redisClaim)
//	P:{s:S}:seq           string  the last sequence number given out
//	P:{s:S}:due           zset    live jobs by due time: run_at (pending, retryable) or the
//	                              lease deadline + 1 µs (running)
//	P:{s:S}:done          zset    completed jobs by run_at, for Sweep
//	P:{s:S}:dead          zset    dead jobs by the time they died, for DeadLetters and Sweep
//	P:{s:S}:o:<key>       list    the live jobs of an ordering key, oldest first: only the
//	                              first is due, the others are 'blocked' (not in the due set)
//	P:{s:S}:blocked       string  how many jobs are blocked, for Depth
//	P:{s:S}:live:<sink>   zset    the jobs of one sink not yet completed or dead, by their
//	                              event's receipt, for SinkDepths (jobs queued by a version
//	                              before it are not in it: they are counted by Depth only)
//	P:{s:S}:sinks         set     the names of the sinks that have had a live set
//	P:{s:S}:ev            zset    the ledger's index: events by receipt, each its head's
//	                              sequence number zero-padded (see redis_ledger.go)
//	P:{s:S}:kept          zset    the events of the index whose payload is kept, for Forget
//
// A job hash also counts its replays by hand ('rep') and whether the next takes a fresh
// Idempotency-Key ('fk'); a head whose event's payload was forgotten holds when ('fgt').
//
// The global keys share the tag {g}: P:{g}:subs and P:{g}:idx (each subscription's index, which
// with the sequence number makes a job's int64 id), P:{g}:hint, P:{g}:ver and P:{g}:t:<S> (the
// hints through which Lease finds subscriptions with due jobs; see redis_scripts.go).
//
// A claim is one script per subscription: it checks the dedupe keys and writes each new event's
// dedupe key, job hashes (one per sink, each holding the whole event) and due entries
// atomically. Live jobs and dead letters carry no TTL; once every job of an event is completed,
// its keys get the TTL of its dedupe window (the route's dedupeWindow, at least the store's
// retention), so Redis forgets delivered events by itself, and Sweep applies the receiver's
// cutoff like the SQL stores and drops index entries whose keys expired.
type Redis struct {
	c         redis.UniversalClient
	addr      string // for messages
	prefix    string
	now       func() time.Time
	retention time.Duration
	promise   Promise
	reasons   []string // why the promise is not strict

	// chunkEvents and chunkBytes bound one claim script's events and payload bytes: a batch of
	// large bodies must stay far below the server's query buffer limit (1 GiB).
	chunkEvents, chunkBytes int
	// ledgerScan bounds the index entries one page of Events reads per subscription.
	ledgerScan int

	tokenBase string
	tokens    atomic.Uint64
	unmarking sync.WaitGroup // claims' unmarking in flight; Close waits for it

	mu    sync.Mutex
	index map[string]int64 // subscription → index
	names map[int64]string // index → subscription
}

var (
	_ Store       = (*Redis)(nil)
	_ EachClaimer = (*Redis)(nil)
	_ Purger      = (*Redis)(nil)
)

const (
	// seqBits is the width of a job's sequence number in its id; the subscription's index
	// takes the bits above.
	seqBits = 40
	seqMask = 1<<seqBits - 1
	// claimTokenLife bounds how long a claimer that died mid-claim keeps its subscription's
	// hint from being raised (its subscription is visited on every poll until then).
	claimTokenLife = 5 * time.Minute
	// redisParallel bounds the scripts one call runs at once on different subscriptions.
	redisParallel = 8
)

// Writers is 2 for Redis: one claim in flight while the next batch forms.
func (r *Redis) Writers() int { return 2 }

// Promise is what the server's settings allow the store to guarantee, read when it was opened.
func (r *Redis) Promise() Promise { return r.promise }

// PromiseReasons says why the promise is weaker than strict (empty when it is strict).
func (r *Redis) PromiseReasons() []string { return slices.Clone(r.reasons) }

// Close waits for the claims' unmarking and closes the client.
func (r *Redis) Close() error {
	r.unmarking.Wait()
	return r.c.Close()
}

func (r *Redis) subKey(sub, name string) string { return r.prefix + ":{s:" + sub + "}:" + name }
func (r *Redis) globalKey(name string) string   { return r.prefix + ":{g}:" + name }

func us(t time.Time) string { return strconv.FormatInt(t.UnixMicro(), 10) }

// token names one claim batch in flight (unique across processes).
func (r *Redis) token() string {
	return r.tokenBase + "-" + strconv.FormatUint(r.tokens.Add(1), 10)
}

func newTokenBase() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// validate refuses what every store refuses (CheckEvent: the rules are the same on all of them,
// though Redis strings could hold more) and events that cannot be keyed: the subscription
// becomes a hash tag, which a brace would cut short (Kubernetes names never contain one).
func validate(e Event) error {
	if err := CheckEvent(e); err != nil {
		return fmt.Errorf("store: claim: %w", err)
	}
	if strings.ContainsAny(e.Subscription, "{}") {
		return fmt.Errorf("store: claim: subscription %q contains a brace", e.Subscription)
	}
	return nil
}

// ClaimBatch implements Store on top of ClaimEach: the first failed event's error fails the
// batch (events of other subscriptions may have been recorded; see Store).
func (r *Redis) ClaimBatch(ctx context.Context, events []Event) ([]bool, error) {
	dup := make([]bool, len(events))
	for i, res := range r.ClaimEach(ctx, events) {
		if res.Err != nil {
			return nil, res.Err
		}
		dup[i] = res.Duplicate
	}
	return dup, nil
}

// claimGroup is the events of one subscription in a claim, first occurrences only.
type claimGroup struct {
	sub     string
	events  []int // indexes into the claim's events
	minRecv int64
}

// claimKey is what makes two events of a batch copies of each other.
type claimKey struct{ subscription, eventID, replayKey string }

// ClaimEach implements EachClaimer: each subscription's events are recorded by their own
// script(s), so a failure is confined to its subscription's events (and one script fails as a
// whole: nothing of it is recorded). A later copy of an event in the same batch (same id, same
// replay key) shares its first occurrence's outcome: a duplicate if that one was recorded, its
// error if not. Events that share only their id or only their replay key go to the scripts,
// which answer them as if claimed one by one.
func (r *Redis) ClaimEach(ctx context.Context, events []Event) []ClaimResult {
	res := make([]ClaimResult, len(events))
	now := r.now()
	first := make(map[claimKey]int, len(events))
	copyOf := map[int]int{}
	var groups []*claimGroup
	bySub := map[string]*claimGroup{}
	recv := make([]int64, len(events))
	for i, e := range events {
		if err := validate(e); err != nil {
			res[i].Err = err
			continue
		}
		k := claimKey{e.Subscription, e.EventID, e.ReplayKey}
		if f, ok := first[k]; ok {
			copyOf[i] = f
			continue
		}
		first[k] = i
		recv[i] = cmp.Or(e.ReceivedAt, now).UnixMicro()
		g := bySub[e.Subscription]
		if g == nil {
			g = &claimGroup{sub: e.Subscription, minRecv: recv[i]}
			bySub[e.Subscription] = g
			groups = append(groups, g)
		}
		g.events = append(g.events, i)
		g.minRecv = min(g.minRecv, recv[i])
	}
	if len(groups) > 0 {
		r.claimGroups(ctx, events, recv, now, groups, res)
	}
	for i, f := range copyOf {
		res[i] = ClaimResult{Duplicate: res[f].Err == nil, Err: res[f].Err}
	}
	return res
}

func (r *Redis) claimGroups(ctx context.Context, events []Event, recv []int64, now time.Time, groups []*claimGroup, res []ClaimResult) {
	failAll := func(err error) {
		for _, g := range groups {
			for _, i := range g.events {
				res[i].Err = err
			}
		}
	}
	token := r.token()
	args := []any{token, claimTokenLife.Milliseconds(), r.globalKey("t:")}
	subs := make([]any, 0, len(groups))
	for _, g := range groups {
		args = append(args, g.sub, g.minRecv)
		subs = append(subs, g.sub)
	}
	idx, err := redisPremark.Run(ctx, r.c, []string{r.globalKey("subs"), r.globalKey("idx"), r.globalKey("nsubs"),
		r.globalKey("hint"), r.globalKey("ver")}, args...).Int64Slice()
	if err == nil && len(idx) != len(groups) {
		err = fmt.Errorf("premark answered %d of %d subscriptions", len(idx), len(groups))
	}
	if err != nil {
		failAll(fmt.Errorf("store: claim: %w", err))
		return
	}
	r.mu.Lock()
	for k, g := range groups {
		r.index[g.sub], r.names[idx[k]] = idx[k], g.sub
	}
	r.mu.Unlock()
	// Unmarking runs after the claimers have their answers: their outcome does not depend on it
	// (an unremoved token only expires later), and on a server with appendfsync always it would
	// cost each batch one more fsync before the answer.
	defer func() {
		r.unmarking.Go(func() {
			pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			_ = redisPostmark.Run(pctx, r.c, []string{r.globalKey("ver")}, append([]any{token, r.globalKey("t:")}, subs...)...).Err()
		})
	}()

	var chunks [][]int
	for _, g := range groups {
		chunks = append(chunks, r.chunk(events, g.events)...)
	}
	parallel(len(chunks), func(c int) {
		chunk := chunks[c]
		sub := events[chunk[0]].Subscription
		keys := make([]string, 0, 2+2*len(chunk))
		keys = append(keys, r.subKey(sub, "seq"), r.subKey(sub, "due"))
		args := make([]any, 0, 1+12*len(chunk))
		args = append(args, r.subKey(sub, "j:"))
		for _, i := range chunk {
			e := events[i]
			dk, rk, ttl := r.subKey(sub, "e:"+e.EventID), "", ""
			window := max(e.DedupeWindow, r.retention)
			if e.ReplayKey != "" {
				// Remembered for the dedupe window from the receipt, like the SQL stores'
				// sweep; at least a millisecond, which PX requires.
				rk = r.subKey(sub, "r:"+e.ReplayKey)
				ttl = strconv.FormatInt(max(time.UnixMicro(recv[i]).Add(window).Sub(now).Milliseconds(), 1), 10)
			}
			keys = append(keys, dk, cmp.Or(rk, dk))
			payload := e.Payload
			if payload == nil {
				payload = []byte{}
			}
			args = append(args, e.EventID, e.SubscriptionUID, e.EventType, e.ContentType, payload, recv[i],
				e.MaxAttempts, max(window, e.Retention).Microseconds(), ttl, strings.Join(sinksOf(e), " "), redisOrderKeys(e), e.Trace)
		}
		seqs, err := redisClaim.Run(ctx, r.c, keys, args...).Int64Slice()
		if err == nil && len(seqs) != len(chunk) {
			err = fmt.Errorf("claim answered %d of %d events", len(seqs), len(chunk))
		}
		for k, i := range chunk {
			if err != nil {
				res[i].Err = fmt.Errorf("store: claim %s: %w", sub, err)
			} else {
				res[i].Duplicate = seqs[k] == 0
			}
		}
	})
}

// redisOrderKeys is the claim script's list of e's ordering keys, one per sink ('-': none).
func redisOrderKeys(e Event) string {
	if len(e.OrderKeys) == 0 {
		return "-"
	}
	keys := make([]string, len(sinksOf(e)))
	for i, sink := range sinksOf(e) {
		keys[i] = cmp.Or(orderKeyOf(e, sink), "-")
	}
	return strings.Join(keys, " ")
}

// chunk splits one subscription's events into script calls of at most chunkEvents events and
// chunkBytes payload (an event larger than that goes alone).
func (r *Redis) chunk(events []Event, idx []int) [][]int {
	var out [][]int
	var cur []int
	size := 0
	for _, i := range idx {
		n := len(events[i].Payload)
		if len(cur) > 0 && (len(cur) >= r.chunkEvents || size+n > r.chunkBytes) {
			out, cur, size = append(out, cur), nil, 0
		}
		cur = append(cur, i)
		size += n
	}
	return append(out, cur)
}

// parallel runs f(0..n-1), at most redisParallel at once, and waits for them.
func parallel(n int, f func(i int)) {
	if n == 1 {
		f(0)
		return
	}
	sem := make(chan struct{}, redisParallel)
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			f(i)
		})
	}
	wg.Wait()
}

// leaseCandidate is a subscription whose hint is due, as Lease visits it.
type leaseCandidate struct {
	sub, ver string
	next     string // earliest due score after the visit ('' none)
	take     []string
	jobs     []Job
	err      error
}

// Lease implements Store: it reads the subscriptions whose hint is due, takes the n jobs due
// first among them (their due score order: run_at, or the lease deadline of an expired lease),
// and settles the visited subscriptions' hints.
func (r *Redis) Lease(ctx context.Context, n int, now time.Time, lease time.Duration) ([]Job, error) {
	if n <= 0 {
		return nil, nil
	}
	flat, err := redisCandidates.Run(ctx, r.c, []string{r.globalKey("hint"), r.globalKey("ver")}, us(now), max(2*n, 8)).StringSlice()
	if err != nil {
		return nil, fmt.Errorf("store: lease: %w", err)
	}
	if len(flat) == 0 {
		return nil, nil
	}
	cands := make([]*leaseCandidate, 0, len(flat)/2)
	for i := 0; i+1 < len(flat); i += 2 {
		cands = append(cands, &leaseCandidate{sub: flat[i], ver: flat[i+1]})
	}
	if len(cands) > 1 {
		if err := r.chooseDue(ctx, cands, n, now); err != nil {
			return nil, fmt.Errorf("store: lease: %w", err)
		}
	}
	parallel(len(cands), func(i int) {
		c := cands[i]
		if len(cands) > 1 && len(c.take) == 0 {
			return
		}
		c.jobs, c.next, c.err = r.leaseSub(ctx, c.sub, c.take, n, now, lease)
	})
	var jobs []Job
	settle := []any{r.globalKey("t:")}
	for _, c := range cands {
		if c.err != nil {
			err = errors.Join(err, c.err)
			continue
		}
		jobs = append(jobs, c.jobs...)
		settle = append(settle, c.sub, c.ver, c.next)
	}
	if len(settle) > 1 {
		// A failed settle only leaves hints lower than they could be: more visits, nothing hidden.
		_ = redisSettle.Run(ctx, r.c, []string{r.globalKey("hint"), r.globalKey("ver")}, settle...).Err()
	}
	slices.SortFunc(jobs, func(a, b Job) int { return cmp.Or(a.RunAt.Compare(b.RunAt), cmp.Compare(a.ID, b.ID)) })
	if err != nil {
		// Jobs leased before the error run; the rest wait for their lease to expire.
		return jobs, fmt.Errorf("store: lease: %w", err)
	}
	return jobs, nil
}

// chooseDue reads the due jobs of several candidates and picks the n due first; it records each
// candidate's earliest score for the ones Lease does not lease from.
func (r *Redis) chooseDue(ctx context.Context, cands []*leaseCandidate, n int, now time.Time) error {
	due := make([]*redis.ZSliceCmd, len(cands))
	firsts := make([]*redis.ZSliceCmd, len(cands))
	_, err := r.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, c := range cands {
			key := r.subKey(c.sub, "due")
			due[i] = p.ZRangeByScoreWithScores(ctx, key, &redis.ZRangeBy{Min: "-inf", Max: us(now), Count: int64(n)})
			firsts[i] = p.ZRangeWithScores(ctx, key, 0, 0)
		}
		return nil
	})
	if err != nil {
		return err
	}
	type pick struct {
		score float64
		cand  int
		seq   int64
		raw   string
	}
	var all []pick
	for i := range cands {
		if f := firsts[i].Val(); len(f) > 0 {
			cands[i].next = strconv.FormatInt(int64(f[0].Score), 10)
		}
		for _, z := range due[i].Val() {
			s, _ := z.Member.(string)
			seq, _ := strconv.ParseInt(s, 10, 64)
			all = append(all, pick{z.Score, i, seq, s})
		}
	}
	slices.SortFunc(all, func(a, b pick) int {
		return cmp.Or(cmp.Compare(a.score, b.score), cmp.Compare(a.cand, b.cand), cmp.Compare(a.seq, b.seq))
	})
	for _, p := range all[:min(n, len(all))] {
		cands[p.cand].take = append(cands[p.cand].take, p.raw)
	}
	return nil
}

// leaseSub runs the lease script on one subscription.
func (r *Redis) leaseSub(ctx context.Context, sub string, take []string, n int, now time.Time, lease time.Duration) ([]Job, string, error) {
	idx, err := r.indexOf(ctx, sub)
	if err != nil {
		return nil, "", err
	}
	args := []any{us(now), us(now.Add(lease)), n, r.subKey(sub, "j:")}
	for _, s := range take {
		args = append(args, s)
	}
	v, err := redisLease.Run(ctx, r.c, []string{r.subKey(sub, "due")}, args...).Slice()
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", sub, err)
	}
	if len(v) != 2 {
		return nil, "", fmt.Errorf("%s: lease answered %d values", sub, len(v))
	}
	jobs, _, err := parseJobs(sub, idx, v[0])
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", sub, err)
	}
	next, _ := v[1].(string)
	if next != "" {
		// Scores come back as doubles' text; the hint takes the integer.
		f, err := strconv.ParseFloat(next, 64)
		if err != nil {
			return nil, "", fmt.Errorf("%s: earliest score %q: %w", sub, next, err)
		}
		next = strconv.FormatInt(int64(f), 10)
	}
	return jobs, next, nil
}

// parseJobs reads a script's {seq, HGETALL} pairs; updated is each job's last change (for a
// dead job, when it died).
func parseJobs(sub string, idx int64, v any) (jobs []Job, updated []int64, err error) {
	pairs, ok := v.([]any)
	if !ok {
		return nil, nil, fmt.Errorf("jobs: unexpected reply %T", v)
	}
	for _, p := range pairs {
		pair, ok := p.([]any)
		if !ok || len(pair) != 2 {
			return nil, nil, fmt.Errorf("jobs: unexpected element %T", p)
		}
		s, _ := pair[0].(string)
		seq, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return nil, nil, fmt.Errorf("jobs: sequence %q: %w", s, err)
		}
		fields, ok := pair[1].([]any)
		if !ok {
			return nil, nil, fmt.Errorf("jobs: unexpected hash %T", pair[1])
		}
		h := make(map[string]string, len(fields)/2)
		for i := 0; i+1 < len(fields); i += 2 {
			k, _ := fields[i].(string)
			val, _ := fields[i+1].(string)
			h[k] = val
		}
		jobs = append(jobs, jobFromHash(sub, idx<<seqBits|seq, h))
		upd, _ := strconv.ParseInt(h["upd"], 10, 64)
		updated = append(updated, upd)
	}
	return jobs, updated, nil
}

func jobFromHash(sub string, id int64, h map[string]string) Job {
	num := func(k string) int64 {
		n, _ := strconv.ParseInt(h[k], 10, 64)
		return n
	}
	j := Job{
		ID: id,
		Event: Event{
			Subscription: sub, SubscriptionUID: h["uid"], EventID: h["e"], EventType: h["type"], ContentType: h["ct"],
			Payload: []byte(h["p"]), ReceivedAt: fromMicros(num("recv")), MaxAttempts: int(num("max")), Trace: h["tp"],
		},
		Sink: cmp.Or(h["sink"], DefaultSink), OrderKey: strings.TrimPrefix(h["ok"], "-"),
		State: h["st"], Attempt: int(num("att")), LastError: h["err"],
		RunAt: fromMicros(num("run")), LeaseUntil: fromMicros(num("lease")),
	}
	j.Event.Replays, j.Event.FreshKey = int(num("rep")), h["fk"] == "1"
	return j
}

// indexOf is a registered subscription's index.
func (r *Redis) indexOf(ctx context.Context, sub string) (int64, error) {
	r.mu.Lock()
	idx, ok := r.index[sub]
	r.mu.Unlock()
	if ok {
		return idx, nil
	}
	s, err := r.c.HGet(ctx, r.globalKey("subs"), sub).Result()
	if err != nil {
		return 0, fmt.Errorf("index of %s: %w", sub, err)
	}
	if idx, err = strconv.ParseInt(s, 10, 64); err != nil {
		return 0, fmt.Errorf("index of %s: %w", sub, err)
	}
	r.mu.Lock()
	r.index[sub], r.names[idx] = idx, sub
	r.mu.Unlock()
	return idx, nil
}

// registered is a subscription and its index.
type registered struct {
	name  string
	index int64
}

// subscriptions lists every registered subscription (the store's, not only this process's).
func (r *Redis) subscriptions(ctx context.Context) ([]registered, error) {
	m, err := r.c.HGetAll(ctx, r.globalKey("subs")).Result()
	if err != nil {
		return nil, err
	}
	subs := make([]registered, 0, len(m))
	r.mu.Lock()
	for sub, s := range m {
		if idx, err := strconv.ParseInt(s, 10, 64); err == nil {
			r.index[sub], r.names[idx] = idx, sub
			subs = append(subs, registered{sub, idx})
		}
	}
	r.mu.Unlock()
	slices.SortFunc(subs, func(a, b registered) int { return cmp.Compare(a.index, b.index) })
	return subs, nil
}

// Complete implements Store.
func (r *Redis) Complete(ctx context.Context, j Job, now time.Time) error {
	return r.report(ctx, "complete", j, now, time.Time{}, "")
}

// Retry implements Store.
func (r *Redis) Retry(ctx context.Context, j Job, at time.Time, lastErr string) error {
	return r.report(ctx, "retry", j, r.now(), at, lastErr)
}

// Release implements Store.
func (r *Redis) Release(ctx context.Context, j Job, at time.Time, reason string) error {
	return r.report(ctx, "release", j, r.now(), at, reason)
}

// Dead implements Store.
func (r *Redis) Dead(ctx context.Context, j Job, lastErr string) error {
	return r.report(ctx, "dead", j, r.now(), time.Time{}, lastErr)
}

func (r *Redis) report(ctx context.Context, op string, j Job, now, at time.Time, lastErr string) error {
	sub := j.Event.Subscription
	seq := strconv.FormatInt(j.ID&seqMask, 10)
	set := r.subKey(sub, "done")
	if op == "dead" {
		set = r.subKey(sub, "dead")
	}
	n, err := redisReport.Run(ctx, r.c, []string{r.subKey(sub, "j:"+seq), r.subKey(sub, "due"), set},
		op, seq, j.Attempt, us(j.LeaseUntil), r.subKey(sub, "e:"), us(now), us(at), lastErr, r.subKey(sub, "j:")).Int64()
	if err != nil {
		return fmt.Errorf("store: %s job %d: %w", op, j.ID, err)
	}
	if n == 0 {
		return fmt.Errorf("store: %s job %d attempt %d: %w", op, j.ID, j.Attempt, ErrLeaseLost)
	}
	switch {
	case op == "retry" || op == "release":
		r.touch(ctx, sub, at)
	case n == 2: // the next job of its ordering key became due
		r.touch(ctx, sub, now)
	}
	return nil
}

// touch lowers sub's hint to at. Should it fail, the job is found by the hint its lease set (at
// the latest when that lease would have expired) or by the sweeper's repair.
func (r *Redis) touch(ctx context.Context, sub string, at time.Time) {
	_ = redisTouch.Run(ctx, r.c, []string{r.globalKey("hint"), r.globalKey("ver")}, sub, us(at)).Err()
}

// DeadLetters implements Store: dead jobs of every subscription, in the order they died.
func (r *Redis) DeadLetters(ctx context.Context, limit int) ([]Job, error) {
	if limit <= 0 {
		return nil, nil
	}
	subs, err := r.subscriptions(ctx)
	if err != nil {
		return nil, fmt.Errorf("store: dead letters: %w", err)
	}
	type dead struct {
		job  Job
		died int64
	}
	per := make([][]dead, len(subs))
	errs := make([]error, len(subs))
	parallel(len(subs), func(i int) {
		sub := subs[i]
		v, err := redisDeadLetters.RunRO(ctx, r.c, []string{r.subKey(sub.name, "dead")}, limit, r.subKey(sub.name, "j:")).Slice()
		if err != nil {
			errs[i] = err
			return
		}
		jobs, updated, err := parseJobs(sub.name, sub.index, v)
		for k := range jobs {
			per[i] = append(per[i], dead{jobs[k], updated[k]})
		}
		errs[i] = err
	})
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("store: dead letters: %w", err)
	}
	all := slices.Concat(per...)
	slices.SortFunc(all, func(a, b dead) int { return cmp.Or(cmp.Compare(a.died, b.died), cmp.Compare(a.job.ID, b.job.ID)) })
	jobs := make([]Job, 0, min(limit, len(all)))
	for _, d := range all[:min(limit, len(all))] {
		jobs = append(jobs, d.job)
	}
	return jobs, nil
}

// subOfJob is the subscription whose index the job id jobID carries; ok is false when no
// subscription has that index (then no job has that id).
func (r *Redis) subOfJob(ctx context.Context, jobID int64) (sub string, ok bool, err error) {
	idx := jobID >> seqBits
	r.mu.Lock()
	sub, ok = r.names[idx]
	r.mu.Unlock()
	if ok {
		return sub, true, nil
	}
	sub, err = r.c.HGet(ctx, r.globalKey("idx"), strconv.FormatInt(idx, 10)).Result()
	if errors.Is(err, redis.Nil) {
		return "", false, nil
	}
	return sub, err == nil, err
}

// Replay implements Store. It returns ErrNotDead when the job is not dead-lettered.
func (r *Redis) Replay(ctx context.Context, jobID int64, now time.Time) error {
	sub, ok, err := r.subOfJob(ctx, jobID)
	switch {
	case err != nil:
		return fmt.Errorf("store: replay job %d: %w", jobID, err)
	case !ok:
		return fmt.Errorf("store: replay job %d: %w", jobID, ErrNotDead)
	}
	seq := strconv.FormatInt(jobID&seqMask, 10)
	n, err := redisReplay.Run(ctx, r.c, []string{r.subKey(sub, "j:"+seq), r.subKey(sub, "due"), r.subKey(sub, "dead")},
		seq, us(now), r.subKey(sub, "e:"), r.subKey(sub, "j:")).Int64()
	switch {
	case err != nil:
		return fmt.Errorf("store: replay job %d: %w", jobID, err)
	case n == 0:
		return fmt.Errorf("store: replay job %d: %w", jobID, ErrNotDead)
	case n < 0:
		return fmt.Errorf("store: replay job %d: its event was claimed again since it died", jobID)
	}
	r.touch(ctx, sub, now)
	return nil
}

// Purge implements Purger as the SQL stores do, in one script: the dead job is completed,
// never delivered (its last error says purged), and leaves the dead letters; its event keeps
// answering redeliveries as duplicates until its keys expire or Sweep removes it, as a
// delivered event's. It returns ErrNotDead when the job is not dead-lettered.
func (r *Redis) Purge(ctx context.Context, jobID int64, now time.Time) error {
	sub, ok, err := r.subOfJob(ctx, jobID)
	switch {
	case err != nil:
		return fmt.Errorf("store: purge job %d: %w", jobID, err)
	case !ok:
		return fmt.Errorf("store: purge job %d: %w", jobID, ErrNotDead)
	}
	seq := strconv.FormatInt(jobID&seqMask, 10)
	n, err := redisPurge.Run(ctx, r.c, []string{r.subKey(sub, "j:"+seq), r.subKey(sub, "done"), r.subKey(sub, "dead")},
		seq, us(now), r.subKey(sub, "e:"), r.subKey(sub, "j:"), purgedError).Int64()
	switch {
	case err != nil:
		return fmt.Errorf("store: purge job %d: %w", jobID, err)
	case n == 0:
		return fmt.Errorf("store: purge job %d: %w", jobID, ErrNotDead)
	}
	return nil
}

// Sweep implements Store. Completed jobs mostly expire by their TTL before the cutoff reaches
// them; Sweep removes the rest (and dead jobs) with the SQL stores' rule, drops set entries
// whose keys expired (the ledger's index and kept set among them, received before the cutoff),
// and repairs hints a crashed writer may have left too high.
func (r *Redis) Sweep(ctx context.Context, cutoff time.Time) (int, error) {
	subs, err := r.subscriptions(ctx)
	if err != nil {
		return 0, fmt.Errorf("store: sweep: %w", err)
	}
	var total atomic.Int64
	errs := make([]error, len(subs))
	parallel(len(subs), func(i int) {
		sub := subs[i].name
		for {
			v, err := redisSweep.Run(ctx, r.c, []string{r.subKey(sub, "done"), r.subKey(sub, "dead")},
				us(cutoff), sweepBatch, r.subKey(sub, "j:"), r.subKey(sub, "e:")).Int64Slice()
			if err == nil && len(v) != 3 {
				err = fmt.Errorf("sweep answered %d values", len(v))
			}
			if err != nil {
				errs[i] = fmt.Errorf("%s: %w", sub, err)
				return
			}
			total.Add(v[0])
			if v[2] == 0 || v[1] == 0 {
				break
			}
		}
		errs[i] = r.trimLedger(ctx, sub, cutoff)
	})
	if err := errors.Join(errs...); err != nil {
		return int(total.Load()), fmt.Errorf("store: sweep: %w", err)
	}
	if err := r.repairHints(ctx, subs); err != nil {
		return int(total.Load()), fmt.Errorf("store: sweep: %w", err)
	}
	return int(total.Load()), nil
}

// repairHints lowers every subscription's hint to its earliest due score.
func (r *Redis) repairHints(ctx context.Context, subs []registered) error {
	firsts := make([]*redis.ZSliceCmd, len(subs))
	if _, err := r.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, sub := range subs {
			firsts[i] = p.ZRangeWithScores(ctx, r.subKey(sub.name, "due"), 0, 0)
		}
		return nil
	}); err != nil {
		return err
	}
	var args []any
	for i, sub := range subs {
		if f := firsts[i].Val(); len(f) > 0 {
			args = append(args, sub.name, strconv.FormatInt(int64(f[0].Score), 10))
		}
	}
	if len(args) == 0 {
		return nil
	}
	return redisTouch.Run(ctx, r.c, []string{r.globalKey("hint"), r.globalKey("ver")}, args...).Err()
}

// Ping implements Store.
func (r *Redis) Ping(ctx context.Context) error { return r.c.Ping(ctx).Err() }

// Depth implements Store.
func (r *Redis) Depth(ctx context.Context) (int, error) {
	subs, err := r.subscriptions(ctx)
	if err != nil {
		return 0, fmt.Errorf("store: depth: %w", err)
	}
	cards := make([]*redis.IntCmd, len(subs))
	blocked := make([]*redis.StringCmd, len(subs))
	if _, err := r.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, sub := range subs {
			cards[i] = p.ZCard(ctx, r.subKey(sub.name, "due"))
			blocked[i] = p.Get(ctx, r.subKey(sub.name, "blocked"))
		}
		return nil
	}); err != nil && !errors.Is(err, redis.Nil) {
		return 0, fmt.Errorf("store: depth: %w", err)
	}
	n := 0
	for i, c := range cards {
		b, _ := strconv.Atoi(blocked[i].Val())
		n += int(c.Val()) + b
	}
	return n, nil
}

// SinkDepths implements Store: per subscription, the names of its sinks, then each sink's
// live set's size and first score. Two pipelined round trips, whatever the backlog.
func (r *Redis) SinkDepths(ctx context.Context) ([]SinkDepth, error) {
	subs, err := r.subscriptions(ctx)
	if err != nil {
		return nil, fmt.Errorf("store: sink depths: %w", err)
	}
	names := make([]*redis.StringSliceCmd, len(subs))
	if _, err := r.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, sub := range subs {
			names[i] = p.SMembers(ctx, r.subKey(sub.name, "sinks"))
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("store: sink depths: %w", err)
	}
	type live struct {
		d     SinkDepth
		card  *redis.IntCmd
		first *redis.ZSliceCmd
	}
	var all []*live
	if _, err := r.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, sub := range subs {
			for _, sink := range names[i].Val() {
				key := r.subKey(sub.name, "live:"+sink)
				all = append(all, &live{d: SinkDepth{Subscription: sub.name, Sink: sink},
					card: p.ZCard(ctx, key), first: p.ZRangeWithScores(ctx, key, 0, 0)})
			}
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("store: sink depths: %w", err)
	}
	var out []SinkDepth
	for _, l := range all {
		f := l.first.Val()
		if l.card.Val() == 0 || len(f) == 0 {
			continue
		}
		l.d.Jobs, l.d.OldestReceived = int(l.card.Val()), fromMicros(int64(f[0].Score))
		out = append(out, l.d)
	}
	sortSinkDepths(out)
	return out, nil
}
