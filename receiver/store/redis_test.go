package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hookwarden/hookwarden/internal/testpki"
	"github.com/hookwarden/hookwarden/receiver/store/storetest"
)

func TestJudgePromise(t *testing.T) {
	durable := map[string]string{"appendonly": "yes", "appendfsync": "always", "no-appendfsync-on-rewrite": "no", "maxmemory-policy": "noeviction"}
	with := func(k, v string) map[string]string {
		m := map[string]string{}
		for kk, vv := range durable {
			m[kk] = vv
		}
		m[k] = v
		return m
	}
	cases := []struct {
		name     string
		settings map[string]string
		want     Promise
		mention  string // the setting the reason must name
		reason   string
	}{
		{"durable", durable, PromiseStrict, "", "every write on disk before the reply, nothing evicted"},
		{"no AOF", with("appendonly", "no"), PromiseBestEffort, "appendonly", "a restart loses what the last snapshot lacks"},
		{"everysec", with("appendfsync", "everysec"), PromiseBestEffort, "appendfsync is everysec", "replies before the fsync"},
		{"fsync no", with("appendfsync", "no"), PromiseBestEffort, "appendfsync", "the kernel decides"},
		{"no fsync on rewrite", with("no-appendfsync-on-rewrite", "yes"), PromiseBestEffort, "no-appendfsync-on-rewrite", "always is suspended during rewrites"},
		{"volatile-lru", with("maxmemory-policy", "volatile-lru"), PromiseAtLeastOnce, "volatile-lru", "only delivered events' keys carry a TTL"},
		{"volatile-ttl", with("maxmemory-policy", "volatile-ttl"), PromiseAtLeastOnce, "volatile-ttl", "same as every volatile policy"},
		{"allkeys-lru", with("maxmemory-policy", "allkeys-lru"), PromiseBestEffort, "allkeys-lru", "queued events can be evicted"},
		{"allkeys-random", with("maxmemory-policy", "allkeys-random"), PromiseBestEffort, "allkeys-random", "queued events can be evicted"},
	}
	for _, tc := range cases {
		got, reasons := judgePromise(tc.settings)
		if got != tc.want {
			t.Errorf("%s: promise %s, want %s: %s", tc.name, got, tc.want, tc.reason)
		}
		if text := strings.Join(reasons, "; "); (tc.mention == "") != (text == "") || !strings.Contains(text, tc.mention) {
			t.Errorf("%s: reasons %q, want them to name %q", tc.name, text, tc.mention)
		}
	}
}

func TestRedisPromiseCheckedAtOpen(t *testing.T) {
	cases := []struct {
		name    string
		conf    []string
		want    Promise
		mention string
		reason  string
	}{
		{name: "durable", conf: storetest.DurableRedis(), want: PromiseStrict, reason: "appendfsync always, noeviction"},
		{name: "the machine's default", conf: nil, want: PromiseBestEffort, mention: "appendonly", reason: "no AOF: a restart loses everything"},
		{name: "everysec", conf: []string{"appendonly", "yes", "appendfsync", "everysec"}, want: PromiseBestEffort, mention: "everysec",
			reason: "a machine crash loses the last second"},
		{name: "volatile", conf: append(storetest.DurableRedis(), "maxmemory-policy", "volatile-lfu"), want: PromiseAtLeastOnce,
			mention: "volatile-lfu", reason: "delivered events' dedupe keys can be evicted"},
		{name: "allkeys", conf: append(storetest.DurableRedis(), "maxmemory-policy", "allkeys-lru"), want: PromiseBestEffort,
			mention: "allkeys-lru", reason: "queued events can be evicted"},
		{name: "CONFIG renamed", conf: append(storetest.DurableRedis(), "rename-command", `CONFIG ""`), want: PromiseBestEffort,
			mention: "CONFIG GET is renamed or not permitted", reason: "unverifiable settings count as the weakest"},
		{name: "CONFIG denied by ACL", conf: append(storetest.DurableRedis(), "user", "default on nopass ~* &* +@all -config"),
			want: PromiseBestEffort, mention: "CONFIG GET is renamed or not permitted", reason: "unverifiable settings count as the weakest"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := storetest.StartRedis(t, tc.conf...)
			ctx := testCtx(t)
			s, err := OpenRedis(ctx, srv.URL())
			if tc.want == PromiseStrict {
				if err != nil {
					t.Fatalf("OpenRedis: %v", err)
				}
				defer s.Close()
				if s.Promise() != PromiseStrict || len(s.PromiseReasons()) > 0 {
					t.Errorf("promise %s %v, want strict: %s", s.Promise(), s.PromiseReasons(), tc.reason)
				}
				return
			}
			var perr *PromiseError
			if !errors.As(err, &perr) {
				t.Fatalf("OpenRedis = %v, want a refusal (*PromiseError): %s", err, tc.reason)
			}
			if perr.Have != tc.want || !strings.Contains(err.Error(), tc.mention) || !strings.Contains(err.Error(), srv.Addr) {
				t.Errorf("refusal %q (promise %s), want promise %s naming %q and the server: %s", err, perr.Have, tc.want, tc.mention, tc.reason)
			}
			// Stated, the weaker promise is accepted, and the store says which one it keeps.
			s, err = OpenRedis(ctx, srv.URL(), WithMinPromise(tc.want))
			if err != nil {
				t.Fatalf("OpenRedis accepting %s: %v", tc.want, err)
			}
			defer s.Close()
			if s.Promise() != tc.want || PromiseOf(s) != tc.want {
				t.Errorf("Promise() = %s, want %s", s.Promise(), tc.want)
			}
			if dup := mustClaim(t, s, event("ns/a", "evt_1", t0)); dup[0] {
				t.Errorf("first claim is a duplicate")
			}
		})
	}
}

func TestRedisCompletedEventsExpireByTTL(t *testing.T) {
	// The store's floor is shorter than the route's window, so the route's window decides.
	s, ctx := openTestRedis(t, WithRetention(time.Millisecond))
	now := time.Now()
	ev := event("ns/a", "evt_ttl", now)
	ev.DedupeWindow = 300 * time.Millisecond
	mustClaim(t, s, ev)
	dk, jk := s.subKey("ns/a", "e:evt_ttl"), s.subKey("ns/a", "j:1")
	ttls := func() (time.Duration, time.Duration) {
		a, err := s.c.PTTL(ctx, dk).Result()
		if err != nil {
			t.Fatal(err)
		}
		b, err := s.c.PTTL(ctx, jk).Result()
		if err != nil {
			t.Fatal(err)
		}
		return a, b
	}
	j := leaseOne(t, s, now, time.Minute, "evt_ttl")
	if a, b := ttls(); a != -1 || b != -1 {
		t.Errorf("a live job's keys have TTLs %v, %v; want none (an undelivered event must never expire)", a, b)
	}
	if err := s.Complete(ctx, j, now); err != nil {
		t.Fatal(err)
	}
	a, b := ttls()
	if a <= 0 || a > ev.DedupeWindow || b <= 0 || b > ev.DedupeWindow {
		t.Errorf("a delivered event's TTLs %v, %v; want both in (0, %v]: the route's dedupe window", a, b, ev.DedupeWindow)
	}
	if dup := mustClaim(t, s, event("ns/a", "evt_ttl", now)); !dup[0] {
		t.Errorf("a redelivery inside the window is not a duplicate")
	}
	// Redis forgets the event by itself, without Sweep.
	eventually(t, "the dedupe key to expire", func() bool { return s.c.Exists(ctx, dk).Val() == 0 })
	if n := s.c.Exists(ctx, jk).Val(); n != 0 {
		t.Errorf("the job outlived its dedupe key")
	}
	if dup := mustClaim(t, s, event("ns/a", "evt_ttl", time.Now())); dup[0] {
		t.Errorf("a redelivery after the window is still a duplicate")
	}
}

func TestRedisDeadLettersHaveNoTTL(t *testing.T) {
	// A dead letter is an acknowledged event that was never delivered: an eviction policy
	// for keys with a TTL must not be able to take it.
	s, ctx := openTestRedis(t)
	mustClaim(t, s, event("ns/a", "evt_dead", t0))
	if err := s.Dead(ctx, leaseOne(t, s, t0, time.Minute, "evt_dead"), "400"); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{s.subKey("ns/a", "e:evt_dead"), s.subKey("ns/a", "j:1")} {
		if ttl := s.c.PTTL(ctx, k).Val(); ttl != -1 {
			t.Errorf("%s has TTL %v, want none", k, ttl)
		}
	}
}

// A purged dead letter's event is forgotten as a delivered one is: once its last dead job is
// purged, its keys take the TTL of its dedupe window (before, its dead job kept them all).
func TestRedisPurgedEventExpiresAsDelivered(t *testing.T) {
	s, ctx := openTestRedis(t, WithRetention(time.Millisecond))
	now := time.Now()
	ev := event("ns/a", "evt_purged", now)
	ev.Sinks, ev.DedupeWindow = []string{"web", "queue"}, time.Hour
	mustClaim(t, s, ev)
	keys := []string{s.subKey("ns/a", "e:evt_purged"), s.subKey("ns/a", "j:1"), s.subKey("ns/a", "j:2")}
	ttls := func() []time.Duration {
		var out []time.Duration
		for _, k := range keys {
			ttl, err := s.c.PTTL(ctx, k).Result()
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, ttl)
		}
		return out
	}
	jobs := mustLease(t, s, 10, now, time.Minute)
	if len(jobs) != 2 {
		t.Fatalf("leased %d jobs, want 2", len(jobs))
	}
	var web Job
	for _, j := range jobs {
		if j.Sink == "web" {
			web = j
			continue
		}
		if err := s.Complete(ctx, j, now); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Dead(ctx, web, "400"); err != nil {
		t.Fatal(err)
	}
	for i, ttl := range ttls() {
		if ttl != -1 {
			t.Errorf("%s has TTL %v while the event has a dead letter, want none", keys[i], ttl)
		}
	}
	if err := s.Purge(ctx, web.ID, now); err != nil {
		t.Fatal(err)
	}
	for i, ttl := range ttls() {
		if ttl <= 0 || ttl > ev.DedupeWindow {
			t.Errorf("%s has TTL %v once purged, want one in (0, %v]: the route's dedupe window", keys[i], ttl, ev.DedupeWindow)
		}
	}
}

func TestRedisClaimFailsOnlyItsSubscription(t *testing.T) {
	s, ctx := openTestRedis(t)
	// ns/broken's sequence key holds a hash: its claim script refuses before writing.
	if err := s.c.HSet(ctx, s.subKey("ns/broken", "seq"), "x", "y").Err(); err != nil {
		t.Fatal(err)
	}
	events := []Event{
		event("ns/good", "evt_1", t0), event("ns/broken", "evt_1", t0), event("ns/good", "evt_2", t0),
		event("ns/a{b}", "evt_1", t0), event("ns/broken", "evt_1", t0), event("ns/good", "evt_1", t0),
	}
	var got []string
	for _, r := range s.ClaimEach(ctx, events) {
		switch {
		case r.Err != nil:
			got = append(got, "error")
		case r.Duplicate:
			got = append(got, "duplicate")
		default:
			got = append(got, "accepted")
		}
	}
	want := []string{"accepted", "error", "accepted", "error", "error", "duplicate"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("per-event results (-want +got): a failing subscription fails its own events only, and a copy of a failed "+
			"event fails too (never a duplicate: it was not recorded):\n%s", diff)
	}

	// Through the Batcher, concurrent claims of the good subscription are accepted.
	b := NewBatcher(s, BatcherOptions{})
	defer b.Close()
	var wg sync.WaitGroup
	var mu sync.Mutex
	failed := map[string]int{}
	for i := range 40 {
		sub := []string{"ns/good", "ns/broken"}[i%2]
		wg.Go(func() {
			_, err := b.Claim(ctx, event(sub, fmt.Sprintf("evt_b_%d", i), t0))
			if err != nil {
				mu.Lock()
				failed[sub]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if failed["ns/good"] != 0 || failed["ns/broken"] != 20 {
		t.Errorf("failed claims %v, want none of ns/good and all 20 of ns/broken", failed)
	}
	if got := mustDepth(t, s); got != 2+20 {
		t.Errorf("Depth = %d, want 22 (ns/good only)", got)
	}
}

func TestRedisLeaseFindsEverySubscription(t *testing.T) {
	forStores(t, []string{"redis", "redis-cluster"}, func(t *testing.T, e *env) {
		// More subscriptions than one Lease visits, claimed and leased concurrently from three
		// processes: every job is leased exactly once, and none is left behind.
		const subs, perSub = 60, 5
		stores := []Store{e.s, e.open(t), e.open(t)}
		var wg sync.WaitGroup
		for i := range subs {
			wg.Go(func() {
				var batch []Event
				for k := range perSub {
					batch = append(batch, event(fmt.Sprintf("ns/sub-%d", i), fmt.Sprintf("evt_%d", k), t0.Add(time.Duration(k)*time.Second)))
				}
				mustClaim(t, stores[i%len(stores)], batch...)
			})
		}
		var mu sync.Mutex
		seen := map[string]int{}
		for _, s := range stores {
			wg.Go(func() {
				idle := 0
				for idle < 20 {
					got, err := s.Lease(testCtx(t), 4, t0.Add(time.Minute), time.Hour)
					if err != nil {
						t.Errorf("Lease: %v", err)
						return
					}
					if len(got) == 0 {
						idle++
						time.Sleep(time.Millisecond)
						continue
					}
					idle = 0
					mu.Lock()
					for _, j := range got {
						seen[j.Event.Subscription+"/"+j.Event.EventID]++
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		// Whatever the racing leasers left (claims that landed after they went idle) is found now.
		for {
			got := mustLease(t, e.s, 50, t0.Add(time.Minute), time.Hour)
			if len(got) == 0 {
				break
			}
			for _, j := range got {
				seen[j.Event.Subscription+"/"+j.Event.EventID]++
			}
		}
		if len(seen) != subs*perSub {
			t.Errorf("leased %d distinct jobs, want %d", len(seen), subs*perSub)
		}
		for k, n := range seen {
			if n != 1 {
				t.Errorf("job %s leased %d times, want once", k, n)
			}
		}
	})
}

func TestRedisClaimerDyingMidClaimHidesNothing(t *testing.T) {
	s, ctx := openTestRedis(t)
	mustClaim(t, s, event("ns/a", "evt_old", t0))
	if err := s.Complete(ctx, leaseOne(t, s, t0, time.Minute, "evt_old"), t0); err != nil {
		t.Fatal(err)
	}
	// A claimer marks its claim, a Lease reads ns/a as a candidate (with the version after the
	// mark) and finds nothing due, the claimer's script lands and the claimer dies before it
	// unmarks; then the Lease settles ns/a as empty. Only the in-flight token stops that.
	hint, ver := s.globalKey("hint"), s.globalKey("ver")
	if err := redisPremark.Run(ctx, s.c, []string{s.globalKey("subs"), s.globalKey("idx"), s.globalKey("nsubs"), hint, ver},
		"dead-claimer", claimTokenLife.Milliseconds(), s.globalKey("t:"), "ns/a", t0.UnixMicro()).Err(); err != nil {
		t.Fatal(err)
	}
	candidates, err := redisCandidates.Run(ctx, s.c, []string{hint, ver}, us(t0), 10).StringSlice()
	if err != nil || len(candidates) != 2 {
		t.Fatalf("candidates = %v, %v; want ns/a", candidates, err)
	}
	dk := s.subKey("ns/a", "e:evt_new")
	if err := redisClaim.Run(ctx, s.c, []string{s.subKey("ns/a", "seq"), s.subKey("ns/a", "due"), dk, dk},
		s.subKey("ns/a", "j:"), "evt_new", "uid", "invoice.paid", "application/json", "{}", t0.UnixMicro(), 5, time.Hour.Microseconds(), "", DefaultSink, "-", "").Err(); err != nil {
		t.Fatal(err)
	}
	if err := redisSettle.Run(ctx, s.c, []string{hint, ver}, s.globalKey("t:"), "ns/a", candidates[1], "").Err(); err != nil {
		t.Fatal(err)
	}
	if got := jobIDs(mustLease(t, s, 10, t0, time.Minute)); !slices.Equal(got, []string{"evt_new"}) {
		t.Errorf("Lease after a claimer died mid-claim = %v, want evt_new", got)
	}
}

func TestRedisTLS(t *testing.T) {
	dir := t.TempDir()
	caFile, certFile, keyFile := testpki.New(t).WriteServer(t, dir)
	srv := storetest.StartRedis(t, append(storetest.DurableRedis(), "port", "0", "tls-port", "{port}", "tls-cert-file", certFile,
		"tls-key-file", keyFile, "tls-ca-cert-file", caFile, "tls-auth-clients", "no")...)
	ctx := testCtx(t)
	s, err := Open(ctx, "rediss://"+srv.Addr+"?tls_ca_file="+caFile)
	if err != nil {
		t.Fatalf("Open rediss:// with the server's CA: %v", err)
	}
	defer s.Close()
	if dup := mustClaim(t, s, event("ns/a", "evt_tls", t0)); dup[0] {
		t.Errorf("first claim over TLS is a duplicate")
	}
	if _, err := Open(ctx, "rediss://"+srv.Addr); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("Open rediss:// without the CA = %v, want a certificate error", err)
	}
	if _, err := Open(ctx, "redis://"+srv.Addr); err == nil {
		t.Errorf("plain redis:// to a TLS-only server succeeded")
	}
}

func TestRedisPasswordOption(t *testing.T) {
	srv := storetest.StartRedis(t, append(storetest.DurableRedis(), "requirepass", "s3cret-pw")...)
	ctx := testCtx(t)
	if _, err := Open(ctx, srv.URL()); err == nil {
		t.Fatalf("Open without the password succeeded")
	} else if strings.Contains(err.Error(), "s3cret-pw") {
		t.Errorf("error shows the password: %v", err)
	}
	s, err := Open(ctx, srv.URL(), WithPassword("s3cret-pw"))
	if err != nil {
		t.Fatalf("Open with WithPassword: %v", err)
	}
	_ = s.Close()
	if s, err := Open(ctx, "redis://:wrong-pw@"+srv.Addr, WithPassword("s3cret-pw")); err != nil {
		t.Errorf("WithPassword does not override the DSN's password: %v", err)
	} else {
		_ = s.Close()
	}
	_, err = Open(ctx, "redis://:wrong-pw@"+srv.Addr)
	if err == nil || strings.Contains(err.Error(), "wrong-pw") {
		t.Errorf("Open with a wrong DSN password = %v, want an error without the password", err)
	}
}

// openTestRedis opens a store on a durable redis-server of the test's own.
func openTestRedis(t *testing.T, opts ...Option) (*Redis, context.Context) {
	t.Helper()
	srv := storetest.StartRedis(t, storetest.DurableRedis()...)
	ctx := testCtx(t)
	s, err := OpenRedis(ctx, srv.URL(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, ctx
}
