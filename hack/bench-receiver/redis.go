package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/redis/go-redis/v9"

	"github.com/hookwarden/hookwarden/receiver/store"
	"github.com/hookwarden/hookwarden/receiver/store/storetest"
)

// benchRedis is the Redis of a run: a redis-server of the bench's own (as the tests start one),
// or the server of the -redis DSN with a key prefix of the run's, removed at the end.
type benchRedis struct {
	dsn    string
	admin  *redis.Client
	own    *storetest.RedisServer
	dir    string
	prefix string
}

func startBenchRedis(dsn string) (*benchRedis, error) {
	var b [6]byte
	_, _ = rand.Read(b[:])
	br := &benchRedis{prefix: "hw-bench-" + hex.EncodeToString(b[:])}
	if dsn == "" {
		dir, err := os.MkdirTemp("", "hookwarden-bench-redis-")
		if err != nil {
			return nil, err
		}
		br.dir = dir
		if br.own, err = storetest.NewRedisServer(dir, storetest.DurableRedis()...); err != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
		dsn = br.own.URL()
	}
	u, err := url.Parse(dsn)
	if err != nil {
		br.stop()
		return nil, fmt.Errorf("-redis: unparsable DSN")
	}
	q := u.Query()
	q.Set("prefix", br.prefix)
	u.RawQuery = q.Encode()
	br.dsn = u.String()
	opts, err := redis.ParseURL(strings.Split(dsn, "?")[0])
	if err != nil {
		br.stop()
		return nil, err
	}
	br.admin = redis.NewClient(opts)
	return br, nil
}

// stop removes the run's keys (an external server) or the server of the bench's own.
func (br *benchRedis) stop() {
	if br.admin != nil && br.own == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		it := br.admin.Scan(ctx, 0, br.prefix+":*", 1000).Iterator()
		for it.Next(ctx) {
			_ = br.admin.Del(ctx, it.Val()).Err()
		}
		cancel()
	}
	if br.admin != nil {
		_ = br.admin.Close()
	}
	if br.own != nil {
		br.own.Stop()
	}
	if br.dir != "" {
		_ = os.RemoveAll(br.dir)
	}
}

// cpu is the server's own CPU time (INFO cpu), wherever it runs.
func (br *benchRedis) cpu() time.Duration {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	info, err := br.admin.Info(ctx, "cpu").Result()
	if err != nil {
		return 0
	}
	var total time.Duration
	for line := range strings.Lines(info) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (k == "used_cpu_sys" || k == "used_cpu_user") {
			f, _ := strconv.ParseFloat(v, 64)
			total += time.Duration(f * float64(time.Second))
		}
	}
	return total
}

// settings describes the server: version and what decides a write's cost.
func (br *benchRedis) settings(ctx context.Context) string {
	parts := []string{}
	if info, err := br.admin.Info(ctx, "server").Result(); err == nil {
		for line := range strings.Lines(info) {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
				parts = append(parts, "Redis "+v)
			}
		}
	}
	for _, k := range []string{"appendonly", "appendfsync", "maxmemory-policy"} {
		if m, err := br.admin.ConfigGet(ctx, k).Result(); err == nil {
			parts = append(parts, k+"="+m[k])
		}
	}
	where := "own redis-server " + br.admin.Options().Addr
	if br.own == nil {
		where = "server of -redis, key prefix " + br.prefix
	}
	return where + ", " + strings.Join(parts, ", ")
}

// setNXRate is the Redis reference: what the teams that dedupe with Redis do today, a single
// SET key payload NX EX 86400 per delivery from concurrency connections for d (no queue, no
// lease, nothing to deliver from). It returns commands per second.
func (br *benchRedis) setNXRate(ctx context.Context, concurrency int, d time.Duration) (float64, error) {
	opts := *br.admin.Options()
	opts.PoolSize, opts.MinIdleConns = concurrency, concurrency
	c := redis.NewClient(&opts)
	defer c.Close()
	payload := make([]byte, 1024)
	var done atomic.Int64
	var once sync.Once
	var firstErr error
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(d)
	for w := range concurrency {
		wg.Go(func() {
			for i := 0; time.Now().Before(deadline); i++ {
				key := fmt.Sprintf("%s:ref:%d:%d", br.prefix, w, i)
				if err := c.SetArgs(ctx, key, payload, redis.SetArgs{Mode: "NX", TTL: 24 * time.Hour}).Err(); err != nil {
					once.Do(func() { firstErr = err })
					return
				}
				done.Add(1)
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return 0, firstErr
	}
	// The reference's keys would otherwise fill the server the receiver phases use next.
	it := c.Scan(ctx, 0, br.prefix+":ref:*", 1000).Iterator()
	for it.Next(ctx) {
		_ = c.Unlink(ctx, it.Val()).Err()
	}
	return float64(done.Load()) / time.Since(start).Seconds(), nil
}

func (b *bench) runRedis(ctx context.Context, logger logr.Logger, add func(string, ...any)) error {
	cfg := b.cfg
	br, err := startBenchRedis(cfg.redis)
	if err != nil {
		return err
	}
	defer br.stop()
	b.redisCPU = br.cpu
	commDesc := "store.Writers() (2 for Redis)"
	if cfg.committers > 0 {
		commDesc = fmt.Sprintf("%d (-committers)", cfg.committers)
	}
	add("Redis: %s; Batcher committers %s", br.settings(ctx), commDesc)

	progress("Redis reference: %d connections × SET key 1KiB NX EX 86400 for %s", cfg.concurrency, cfg.duration)
	cpuDone := make(chan cpuUsage, 1)
	go func() {
		sleepUntil(ctx, time.Now().Add(300*time.Millisecond))
		cpu0 := readCPU("").addStore(br.cpu())
		sleepUntil(ctx, time.Now().Add(cfg.duration-500*time.Millisecond))
		cpuDone <- readCPU("").addStore(br.cpu()).since(cpu0)
	}()
	b.setNXRate, b.setNXErr = br.setNXRate(ctx, cfg.concurrency, cfg.duration)
	b.setNXCPU = <-cpuDone
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if b.setNXErr != nil {
		progress("  failed: %v", b.setNXErr)
	} else {
		progress("  %.0f commands/s", b.setNXRate)
	}

	st, err := store.OpenRedis(ctx, br.dsn)
	if err != nil {
		return err
	}
	defer func() { _ = st.Close() }()
	batcher := store.NewBatcher(st, store.BatcherOptions{CommitTimeout: claimTimeout, Committers: cfg.committers})
	defer batcher.Close()
	return b.target(ctx, "redis", "(iv) Handler+Redis", newReceiver(batcher, logger).Mux(), st, batcher)
}
