package store

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// defaultRedisPrefix starts every key of the Redis store.
const defaultRedisPrefix = "hookwarden"

// redisDSN is a parsed redis:// or rediss:// DSN. Besides go-redis's own query parameters
// (dial_timeout, pool_size, ...) it takes:
//
//	prefix=NAME        key prefix (default hookwarden): several receivers' stores on one server
//	cluster=true       a Redis Cluster; more seed nodes as addr=host:port
//	tls_ca_file=PATH   PEM roots that verify a rediss:// server (default: the system's)
type redisDSN struct {
	prefix  string
	cluster bool
	caFile  string
	rest    string // the DSN without our parameters, for go-redis
	addr    string // host:port, for messages
}

func parseRedisDSN(dsn string) (redisDSN, error) {
	u, err := url.Parse(dsn)
	if err != nil {
		return redisDSN{}, errors.New("store: unparsable Redis DSN")
	}
	q := u.Query()
	d := redisDSN{prefix: defaultRedisPrefix, addr: u.Host}
	if v := q.Get("prefix"); v != "" {
		if strings.ContainsAny(v, "{}") {
			return redisDSN{}, fmt.Errorf("store: Redis key prefix %q must not contain braces", v)
		}
		d.prefix = v
	}
	if v := q.Get("cluster"); v != "" {
		if d.cluster, err = strconv.ParseBool(v); err != nil {
			return redisDSN{}, fmt.Errorf("store: Redis DSN: cluster=%q is not a boolean", v)
		}
	}
	d.caFile = q.Get("tls_ca_file")
	if d.caFile != "" && u.Scheme != "rediss" {
		return redisDSN{}, errors.New("store: Redis DSN: tls_ca_file needs rediss://")
	}
	for _, k := range []string{"prefix", "cluster", "tls_ca_file"} {
		q.Del(k)
	}
	u.RawQuery = q.Encode()
	d.rest = u.String()
	return d, nil
}

// OpenRedis connects to the Redis (or Redis Cluster) named by dsn and reads the settings that
// decide its promise (see Promise). It fails with a *PromiseError when that promise is weaker
// than WithMinPromise asks (strict by default).
func OpenRedis(ctx context.Context, dsn string, opts ...Option) (*Redis, error) {
	o := buildOptions(opts)
	d, err := parseRedisDSN(dsn)
	if err != nil {
		return nil, err
	}
	c, err := newRedisClient(d, o)
	if err != nil {
		return nil, fmt.Errorf("store: open Redis %s: %w", Redact(dsn), err)
	}
	r := &Redis{
		c: c, addr: d.addr, prefix: d.prefix, now: o.now, retention: o.retention,
		chunkEvents: 256, chunkBytes: 8 << 20, ledgerScan: ledgerScan, tokenBase: newTokenBase(),
		index: map[string]int64{}, names: map[int64]string{},
	}
	if err := c.Ping(ctx).Err(); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("store: open Redis %s: %w", Redact(dsn), err)
	}
	r.promise, r.reasons, err = checkRedis(ctx, c)
	if err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("store: open Redis %s: %w", Redact(dsn), err)
	}
	if r.promise < o.minPromise {
		_ = c.Close()
		return nil, &PromiseError{Store: Redact(dsn), Have: r.promise, Want: o.minPromise, Reasons: r.reasons}
	}
	return r, nil
}

func newRedisClient(d redisDSN, o options) (redis.UniversalClient, error) {
	var roots *x509.CertPool
	if d.caFile != "" {
		pem, err := os.ReadFile(d.caFile)
		if err != nil {
			return nil, fmt.Errorf("tls_ca_file: %w", err)
		}
		roots = x509.NewCertPool()
		if !roots.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls_ca_file %s holds no PEM certificate", d.caFile)
		}
	}
	withRoots := func(t *tls.Config) {
		if t != nil && roots != nil {
			t.RootCAs = roots
		}
	}
	if d.cluster {
		co, err := redis.ParseClusterURL(d.rest)
		if err != nil {
			return nil, err
		}
		if o.password != "" {
			co.Password = o.password
		}
		withRoots(co.TLSConfig)
		return redis.NewClusterClient(co), nil
	}
	so, err := redis.ParseURL(d.rest)
	if err != nil {
		return nil, err
	}
	if o.password != "" {
		so.Password = o.password
	}
	withRoots(so.TLSConfig)
	return redis.NewClient(so), nil
}

// PromiseError says that a store cannot keep the promise it was asked for, and why.
type PromiseError struct {
	Store      string // the redacted DSN
	Have, Want Promise
	Reasons    []string
}

func (e *PromiseError) Error() string {
	return fmt.Sprintf("store: %s keeps only the %q promise, %q was required: %s", e.Store, e.Have, e.Want, strings.Join(e.Reasons, "; "))
}

// redisSettings are the settings checkRedis reads; judgePromise explains each.
var redisSettings = []string{"appendonly", "appendfsync", "no-appendfsync-on-rewrite", "maxmemory-policy"}

// checkRedis reads every master's version and settings and returns the weakest promise.
func checkRedis(ctx context.Context, c redis.UniversalClient) (Promise, []string, error) {
	type node struct {
		addr    string
		promise Promise
		reasons []string
	}
	var nodes []*node
	check := func(ctx context.Context, c *redis.Client) error {
		n := &node{addr: c.Options().Addr}
		nodes = append(nodes, n)
		info, err := c.Info(ctx, "server").Result()
		if err != nil {
			return fmt.Errorf("%s: INFO server: %w", n.addr, err)
		}
		if v := infoField(info, "redis_version"); !atLeast7(v) {
			return fmt.Errorf("%s runs Redis %q; the store needs 7.0 or later (script flags, ZADD LT)", n.addr, v)
		}
		got := map[string]string{}
		for _, k := range redisSettings {
			m, err := c.ConfigGet(ctx, k).Result()
			if err != nil {
				if isCommandRefused(err) {
					n.promise = PromiseBestEffort
					n.reasons = []string{fmt.Sprintf("%s: CONFIG GET is renamed or not permitted (%v), so its persistence and eviction "+
						"settings cannot be verified: allow the receiver's user +config|get, or the receiver must assume that "+
						"acknowledged events can be lost", n.addr, err)}
					return nil
				}
				return fmt.Errorf("%s: CONFIG GET %s: %w", n.addr, k, err)
			}
			got[k] = m[k]
		}
		n.promise, n.reasons = judgePromise(got)
		for i := range n.reasons {
			n.reasons[i] = n.addr + ": " + n.reasons[i]
		}
		return nil
	}
	var err error
	switch cl := c.(type) {
	case *redis.ClusterClient:
		var mu sync.Mutex // ForEachMaster runs the checks concurrently
		err = cl.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			mu.Lock()
			defer mu.Unlock()
			return check(ctx, c)
		})
	case *redis.Client:
		err = check(ctx, cl)
	default:
		err = fmt.Errorf("unsupported client %T", c)
	}
	if err != nil {
		return 0, nil, err
	}
	promise, reasons := PromiseStrict, []string(nil)
	slices.SortFunc(nodes, func(a, b *node) int { return strings.Compare(a.addr, b.addr) })
	for _, n := range nodes {
		promise = min(promise, n.promise)
		reasons = append(reasons, n.reasons...)
	}
	return promise, reasons, nil
}

// judgePromise is the promise a server with these settings allows, and what each weaker
// setting risks.
//
// Strict needs every acknowledged write on disk before the reply (appendonly yes, appendfsync
// always, and fsync not suspended during rewrites) and no eviction. volatile-* policies evict
// only keys with a TTL: the store gives a TTL only to delivered (completed) events, so queued
// events and dead letters are safe, but a delivered event's dedupe key can go before its window
// ends (at-least-once). allkeys-* may evict anything (best-effort).
func judgePromise(s map[string]string) (Promise, []string) {
	p := PromiseStrict
	var reasons []string
	weaker := func(to Promise, why string) {
		p = min(p, to)
		reasons = append(reasons, why)
	}
	if s["appendonly"] != "yes" {
		weaker(PromiseBestEffort, fmt.Sprintf("appendonly is %q: a restart of Redis loses every acknowledged event and dedupe key "+
			"written since the last RDB snapshot (all of them without snapshots); set appendonly yes", s["appendonly"]))
	} else {
		switch s["appendfsync"] {
		case "always":
			if s["no-appendfsync-on-rewrite"] == "yes" {
				weaker(PromiseBestEffort, "no-appendfsync-on-rewrite is yes: while Redis rewrites its AOF or saves a snapshot it does "+
					"not fsync, so a crash of its machine then loses acknowledged events; set it to no")
			}
		case "everysec":
			weaker(PromiseBestEffort, "appendfsync is everysec: Redis acknowledges writes before they are on disk, so a crash of "+
				"its machine (or a power cut) loses about the last second of acknowledged events, and while a slow disk holds up "+
				"that fsync Redis acknowledges writes it has not even written, which a crash of Redis itself loses; set appendfsync always")
		default:
			weaker(PromiseBestEffort, fmt.Sprintf("appendfsync is %q: the kernel decides when the AOF reaches the disk, so a crash "+
				"of Redis's machine loses up to ~30 s of acknowledged events; set appendfsync always", s["appendfsync"]))
		}
	}
	switch pol := s["maxmemory-policy"]; {
	case pol == "noeviction":
	case strings.HasPrefix(pol, "volatile-"):
		weaker(PromiseAtLeastOnce, fmt.Sprintf("maxmemory-policy is %s: when memory runs out Redis evicts keys with a TTL, which "+
			"are the dedupe keys of delivered events, so a provider's redelivery inside its dedupe window is delivered to the sink "+
			"again (same Idempotency-Key); queued events and dead letters have no TTL and stay; set maxmemory-policy noeviction", pol))
	default:
		weaker(PromiseBestEffort, fmt.Sprintf("maxmemory-policy is %q: when memory runs out Redis may evict any key, queued "+
			"events included, so acknowledged events can be lost; set maxmemory-policy noeviction", pol))
	}
	return p, reasons
}

// isCommandRefused tells a renamed or ACL-denied command from a failing server.
func isCommandRefused(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "unknown command") || strings.HasPrefix(msg, "NOPERM") || strings.Contains(msg, "NOPERM")
}

func infoField(info, key string) string {
	for line := range strings.Lines(info) {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok && k == key {
			return v
		}
	}
	return ""
}

func atLeast7(version string) bool {
	major, _, _ := strings.Cut(version, ".")
	n, err := strconv.Atoi(major)
	return err == nil && n >= 7
}
