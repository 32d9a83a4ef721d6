package storetest

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hookwarden/hookwarden/internal/childproc"
	"github.com/hookwarden/hookwarden/internal/testtier"
)

// DurableRedis is the configuration under which the Redis store keeps the strict promise:
// every write fsynced before the reply, nothing evicted.
func DurableRedis() []string {
	return []string{"appendonly", "yes", "appendfsync", "always", "maxmemory-policy", "noeviction"}
}

// RedisServer is a redis-server process of the tests' own: a temporary directory, a free port
// on 127.0.0.1, its configuration on the command line. It never touches the machine's shared
// Redis. Kill and Start restart it on the same port and data.
type RedisServer struct {
	Addr string
	Dir  string
	bin  string
	args []string
	tls  bool // serves TLS only (tls-port)

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// URL is the server's redis:// DSN.
func (r *RedisServer) URL() string { return "redis://" + r.Addr }

// StartRedis starts a redis-server for the test with conf (directive, value pairs, e.g.
// DurableRedis) and stops it when the test ends. Without redis-server it fails under CI=true
// and skips, loudly, elsewhere.
func StartRedis(tb testing.TB, conf ...string) *RedisServer {
	tb.Helper()
	testtier.RequiresServers(tb, "redis-server")
	dir, err := os.MkdirTemp("", "hookwarden-redis-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = os.RemoveAll(dir) })
	r, err := NewRedisServer(dir, conf...)
	if errors.Is(err, ErrNoRedis) {
		if os.Getenv("CI") == "true" {
			tb.Fatal(err)
		}
		tb.Skip("SKIPPED, NOT PASSED: ", err)
	}
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		r.Stop()
		if tb.Failed() {
			if b, err := os.ReadFile(filepath.Join(dir, "redis.log")); err == nil {
				lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
				tb.Logf("--- redis-server %s log (last lines):\n%s", r.Addr, strings.Join(lines[max(0, len(lines)-30):], "\n"))
			}
		}
	})
	return r
}

// ErrNoRedis means redis-server is not installed and could not be installed.
var ErrNoRedis = errors.New("redis-server is not installed (apt-get install redis-server)")

// RedisBinary finds redis-server, installing Debian's package when it is missing and the
// process runs as root.
func RedisBinary() (string, error) {
	if p, err := exec.LookPath("redis-server"); err == nil {
		return p, nil
	}
	if os.Geteuid() != 0 {
		return "", ErrNoRedis
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for _, args := range [][]string{{"update"}, {"install", "-y", "--no-install-recommends", "redis-server"}} {
		cmd := exec.CommandContext(ctx, "apt-get", append([]string{"-o", "DPkg::Lock::Timeout=120"}, args...)...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("%w: apt-get %s: %v\n%s", ErrNoRedis, args[0], err, out)
		}
	}
	p, err := exec.LookPath("redis-server")
	if err != nil {
		return "", ErrNoRedis
	}
	return p, nil
}

// NewRedisServer starts redis-server in dir (which the caller removes) with conf and waits
// until it answers PING. The caller stops it. A conf value is split into words (`""` is an
// empty one); "{port}" is the server's port (for tls-port, with port 0).
func NewRedisServer(dir string, conf ...string) (*RedisServer, error) {
	bin, err := RedisBinary()
	if err != nil {
		return nil, err
	}
	if len(conf)%2 != 0 {
		return nil, errors.New("storetest: redis configuration must be directive, value pairs")
	}
	var last error
	for range 3 { // a free port can be taken between finding it and binding it
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		r := &RedisServer{Addr: "127.0.0.1:" + strconv.Itoa(port), Dir: dir, bin: bin}
		r.args = []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
			"--save", "", "--appendonly", "no", "--daemonize", "no", "--protected-mode", "no",
			"--logfile", filepath.Join(dir, "redis.log")}
		for i := 0; i < len(conf); i += 2 {
			r.args = append(r.args, "--"+conf[i])
			// One argument per word: redis-server quotes each argument as one token.
			for _, w := range strings.Fields(strings.ReplaceAll(conf[i+1], "{port}", strconv.Itoa(port))) {
				r.args = append(r.args, strings.ReplaceAll(w, `""`, ""))
			}
			if conf[i+1] == "" {
				r.args = append(r.args, "")
			}
			r.tls = r.tls || conf[i] == "tls-port"
		}
		if last = r.Start(); last == nil {
			return r, nil
		}
	}
	return nil, last
}

func freePort() (int, error) {
	addr, err := childproc.FreeAddr()
	if err != nil {
		return 0, err
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(port)
}

// Start runs the server (again) and waits until it has loaded its data and answers PING.
func (r *RedisServer) Start() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd != nil && !exited(r.done) {
		return fmt.Errorf("redis-server %s is running", r.Addr)
	}
	cmd := exec.Command(r.bin, r.args...)
	cmd.Dir = r.Dir
	// Its own process group, killed with the test process.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting redis-server: %w", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	r.cmd, r.done = cmd, done

	opts := &redis.Options{Addr: r.Addr, MaxRetries: -1, DialTimeout: time.Second}
	if r.tls {
		// Readiness only: the tests verify the certificate through the store.
		opts.TLSConfig = &tls.Config{InsecureSkipVerify: true} //nolint:gosec // see above
	}
	c := redis.NewClient(opts)
	defer c.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := errors.New("not listening yet")
		// Dial first: go-redis logs every refused connection.
		if conn, derr := net.DialTimeout("tcp", r.Addr, time.Second); derr == nil {
			_ = conn.Close()
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			err = c.Ping(ctx).Err()
			cancel()
			var rerr redis.Error
			if err == nil || (errors.As(err, &rerr) && !strings.HasPrefix(err.Error(), "LOADING")) {
				return nil // answering (NOAUTH too); LOADING while it reads its AOF
			}
		}
		if exited(done) {
			log, _ := os.ReadFile(filepath.Join(r.Dir, "redis.log"))
			return fmt.Errorf("redis-server on %s exited while starting: %v\n%s", r.Addr, err, lastLines(string(log), 10))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redis-server on %s did not answer within 30s: %v", r.Addr, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Kill sends SIGKILL (nothing flushed beyond what the server already wrote) and waits.
func (r *RedisServer) Kill() {
	r.mu.Lock()
	cmd, done := r.cmd, r.done
	r.mu.Unlock()
	if cmd == nil || exited(done) {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	<-done
}

// Stop ends the server (SIGKILL: tests need nothing it holds afterwards).
func (r *RedisServer) Stop() { r.Kill() }

func exited(done chan struct{}) bool {
	select {
	case <-done:
		return true
	default:
		return false
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// RedisCluster is a three-master Redis Cluster of the tests' own.
type RedisCluster struct {
	Nodes []*RedisServer
}

// URL is the cluster's DSN for the store: the first node as the seed, the others as addr=.
func (c *RedisCluster) URL() string {
	q := []string{"cluster=true"}
	for _, n := range c.Nodes[1:] {
		q = append(q, "addr="+n.Addr)
	}
	return "redis://" + c.Nodes[0].Addr + "?" + strings.Join(q, "&")
}

// Stop stops every node.
func (c *RedisCluster) Stop() {
	for _, n := range c.Nodes {
		n.Stop()
	}
}

// NewRedisCluster starts three cluster-enabled redis-servers under dir with conf, joins them
// with redis-cli --cluster create (16384 slots over three masters, no replicas) and waits until
// every node reports cluster_state:ok.
func NewRedisCluster(dir string, conf ...string) (*RedisCluster, error) {
	cl := &RedisCluster{}
	var addrs []string
	for i := range 3 {
		d := filepath.Join(dir, "node"+strconv.Itoa(i))
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
		n, err := NewRedisServer(d, append([]string{"cluster-enabled", "yes", "cluster-config-file", filepath.Join(d, "nodes.conf"),
			"cluster-node-timeout", "5000"}, conf...)...)
		if err != nil {
			cl.Stop()
			return nil, err
		}
		cl.Nodes = append(cl.Nodes, n)
		addrs = append(addrs, n.Addr)
	}
	cli := filepath.Join(filepath.Dir(cl.Nodes[0].bin), "redis-cli")
	if _, err := os.Stat(cli); err != nil {
		cli = "redis-cli"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, cli, append(append([]string{"--cluster", "create"}, addrs...), "--cluster-yes")...).CombinedOutput()
	if err != nil {
		cl.Stop()
		return nil, fmt.Errorf("redis-cli --cluster create: %v\n%s", err, out)
	}
	for _, n := range cl.Nodes {
		c := redis.NewClient(&redis.Options{Addr: n.Addr})
		for {
			info, err := c.ClusterInfo(ctx).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") {
				break
			}
			if ctx.Err() != nil {
				_ = c.Close()
				cl.Stop()
				return nil, fmt.Errorf("cluster node %s not ok within 60s: %v %s", n.Addr, err, info)
			}
			time.Sleep(20 * time.Millisecond)
		}
		_ = c.Close()
	}
	return cl, nil
}
