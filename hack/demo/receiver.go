package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/hookwarden/hookwarden/internal/childproc"
)

// requestsMetric counts the receiver's incoming deliveries by result.
const requestsMetric = "hookwarden_receiver_requests_total"

// --- the sink and the receiver

// startSinkStep serves the demo's sink; the samples' spec.delivery.sink URLs are pointed at it.
func (d *demo) startSinkStep(context.Context) error {
	d.step("starting the sink (in the demo process): records every delivery by Idempotency-Key and ce-id")
	s, err := startSink()
	if err != nil {
		return err
	}
	d.sink = s
	d.info("sink listening on %s (the samples' spec.delivery.sink.url are rewritten to %s/<subscription>/<path>)", s.base, s.base)
	return nil
}

// startReceiver starts bin/receiver with an SQLite store in the temp folder and waits for its
// /readyz (subscriptions and their route Secrets synced).
func (d *demo) startReceiver(ctx context.Context) error {
	bin := filepath.Join(d.opts.binDir, "receiver")
	d.step("starting the receiver (%s)", bin)
	for i := range d.receiverAddrs {
		a, err := childproc.FreeAddr()
		if err != nil {
			return err
		}
		d.receiverAddrs[i] = a
	}
	d.receiverLog = filepath.Join(d.tmp, "receiver.log")
	d.receiverStore = filepath.Join(d.tmp, "receiver.db")
	started := time.Now()
	if err := d.launchReceiver(ctx); err != nil {
		return err
	}
	d.info("receiver (pid %d) ready in %s: deliveries on %s/hooks/<namespace>/<name>, metrics on %s/metrics",
		d.rcv.Pid(), time.Since(started).Round(100*time.Millisecond), d.receiverBase, d.receiverMetrics.base)
	d.info("store: sqlite://%s; retry base 200ms; logs: %s", d.receiverStore, d.receiverLog)
	return nil
}

// launchReceiver starts the receiver on d.receiverAddrs with d.receiverStore, appending to
// d.receiverLog, and waits for its /readyz. A restart comes back on the same addresses (the
// registrations point there) and the same store (its ledger of delivered events).
func (d *demo) launchReceiver(ctx context.Context) error {
	bind, metricsAddr, probe := d.receiverAddrs[0], d.receiverAddrs[1], d.receiverAddrs[2]
	env := append(os.Environ(), "KUBECONFIG="+d.kubeconfig)
	var err error
	d.rcv, err = startProc("receiver", d.receiverLog, env, filepath.Join(d.opts.binDir, "receiver"),
		"--bind-address", bind, "--metrics-bind-address", metricsAddr, "--health-probe-bind-address", probe,
		"--store", "sqlite://"+d.receiverStore, "--retry-base", "200ms", "--receiver-namespace", receiverNamespace)
	if err != nil {
		return err
	}
	if err := d.rcv.waitReady(ctx, 60*time.Second, newFakeAPI("http://"+probe), "/readyz"); err != nil {
		return err
	}
	d.receiverBase = "http://" + bind
	d.receiverMetrics = newFakeAPI("http://" + metricsAddr)
	return nil
}

// metricLines returns the lines of the receiver's /metrics that start with name (HELP and TYPE
// comments excluded), and their values by label set.
func (d *demo) metricLines(ctx context.Context, name string) ([]string, map[string]float64, error) {
	body, err := d.receiverMetrics.get(ctx, "/metrics")
	if err != nil {
		return nil, nil, err
	}
	var lines []string
	values := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		lines = append(lines, line)
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			return nil, nil, fmt.Errorf("parsing metric line %q: %w", line, err)
		}
		values[line[len(name):i]] = v
	}
	return lines, values, sc.Err()
}

// requestCounts returns sum by (result) (hookwarden_receiver_requests_total).
func (d *demo) requestCounts(ctx context.Context) (map[string]int, []string, error) {
	lines, values, err := d.metricLines(ctx, requestsMetric)
	if err != nil {
		return nil, nil, err
	}
	out := map[string]int{}
	for labels, v := range values {
		_, result, ok := strings.Cut(labels, `result="`)
		if !ok {
			continue
		}
		result, _, _ = strings.Cut(result, `"`)
		out[result] += int(v) // one series per route and result
	}
	return out, lines, nil
}
