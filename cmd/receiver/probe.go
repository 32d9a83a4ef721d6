package main

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// probe checks from outside that a receiver serves deliveries (the chart's helm test): a POST
// for a route no subscription has must be answered 404 unknown_route, which only a receiver
// whose route table is built sends (it listens only then). It retries until timeout: right
// after an install the Service may have no ready pod yet.
func probe(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("probe", flag.ContinueOnError)
	timeout := fs.Duration("timeout", time.Minute, "how long to retry until the receiver answers")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("usage: receiver probe [--timeout 1m] http://<receiver service>[:port]")
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	url := strings.TrimSuffix(fs.Arg(0), "/") + "/hooks/hookwarden-probe/probe-" + hex.EncodeToString(b[:])
	c := &http.Client{Timeout: 10 * time.Second}
	deadline := time.Now().Add(*timeout)
	for {
		err := probeOnce(c, url)
		if err == nil {
			fmt.Fprintf(out, "POST %s: 404 unknown_route: the receiver serves deliveries and its route table is built\n", url)
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("POST %s: %w", url, err)
		}
		time.Sleep(2 * time.Second)
	}
}

func probeOnce(c *http.Client, url string) error {
	resp, err := c.Post(url, "application/json", strings.NewReader("{}"))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var body struct {
		Result string `json:"result"`
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusNotFound || json.Unmarshal(b, &body) != nil || body.Result != "unknown_route" {
		return fmt.Errorf("answered %d %q, want 404 {\"result\":\"unknown_route\"} from a receiver", resp.StatusCode, strings.TrimSpace(string(b)))
	}
	return nil
}
