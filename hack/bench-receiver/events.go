package main

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The route every request targets (POST /hooks/{namespace}/{name}).
const (
	routeNamespace = "bench"
	routeName      = "orders"
	hookPath       = "/hooks/" + routeNamespace + "/" + routeName
)

// eventTemplate is a payment_intent.succeeded event as Stripe sends it (pretty-printed, two
// spaces). %[1]s is the event id, %[2]d the creation time, %[3]s the description, which pads
// the body to the requested size.
const eventTemplate = `{
  "id": "%[1]s",
  "object": "event",
  "api_version": "2024-06-20",
  "created": %[2]d,
  "data": {
    "object": {
      "id": "pi_3PqXa2LkdIwHu7ix0yQ8q0Zs",
      "object": "payment_intent",
      "amount": 4999,
      "amount_received": 4999,
      "capture_method": "automatic_async",
      "client_secret": "pi_3PqXa2LkdIwHu7ix0yQ8q0Zs_secret_kX0mRr3b1t7WQbNwZ3ysc9Dd7",
      "confirmation_method": "automatic",
      "created": %[2]d,
      "currency": "usd",
      "customer": "cus_QhxK2bF0ZQf3pT",
      "description": "%[3]s",
      "latest_charge": "ch_3PqXa2LkdIwHu7ix0b8n2WqL",
      "livemode": false,
      "metadata": {
        "order_id": "ord_000184467"
      },
      "payment_method": "pm_1PqXa1LkdIwHu7ixYw8Tn4Hc",
      "payment_method_types": [
        "card"
      ],
      "receipt_email": "jenny.rosen@example.com",
      "status": "succeeded"
    }
  },
  "livemode": false,
  "pending_webhooks": 1,
  "request": {
    "id": "req_5vXb2Jq0Lk8Rz1",
    "idempotency_key": "b3f2c8a4-6d1e-4f7a-9c2b-8e5d1a0f3c76"
  },
  "type": "payment_intent.succeeded"
}`

// idLen is the length of the part of an event id after "evt_" (Stripe's ids are evt_ + 24).
const idLen = 24

// item is one delivery as sent: body, signature and, for the raw client, the whole request.
// Its slices live in the worker's buffers and are valid until the worker's next request.
type item struct {
	seq  int64  // the event's number: its id is evt_<tag><seq>
	body []byte // the event JSON
	raw  []byte // the whole HTTP/1.1 request (raw client only); body is its tail
	sig  []byte // Stripe-Signature value
}

// generator makes signed deliveries of distinct events. An event is fully determined by its
// sequence number (the body is the template with the id patched in), so pre-signed events
// take only their signature's bytes, and a duplicate is rebuilt from its number.
type generator struct {
	secret []byte
	host   string
	raw    bool
	tmpl   []byte
	idOff  int // offset of the 24 id characters after "evt_" in tmpl
	tag    string
	seq    atomic.Int64
}

func newGenerator(secret, host string, payload int, raw bool) (*generator, error) {
	placeholder := "evt_" + strings.Repeat("X", idLen)
	created := time.Now().Unix()
	base := fmt.Sprintf(eventTemplate, placeholder, created, "")
	desc := "Order #184467"
	if pad := payload - len(base); pad > len(desc) {
		desc += " " + strings.Repeat("x", pad-len(desc)-1)
	}
	tmpl := []byte(fmt.Sprintf(eventTemplate, placeholder, created, desc))
	off := bytes.Index(tmpl, []byte(placeholder))
	if off < 0 {
		return nil, fmt.Errorf("event template has no id placeholder")
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	tag := hex.EncodeToString(b[:]) // per generator: ids never collide with another run's
	return &generator{secret: []byte(secret), host: host, raw: raw, tmpl: tmpl, idOff: off + len("evt_"), tag: tag}, nil
}

// body appends the body of event seq to dst.
func (g *generator) body(dst []byte, seq int64) []byte {
	dst = append(dst, g.tmpl...)
	id := dst[len(dst)-len(g.tmpl)+g.idOff:][:idLen]
	copy(id, g.tag)
	digits := id[len(g.tag):]
	for i := len(digits) - 1; i >= 0; i-- {
		digits[i] = byte('0' + seq%10)
		seq /= 10
	}
	return dst
}

// appendSig appends the Stripe-Signature of body at t to dst: what stripe.SignHeader returns
// (t=<unix>,v1=<hex HMAC-SHA256 keyed with the whole secret over "<t>.<body>">), without its
// allocations.
func (g *generator) appendSig(dst, body []byte, t time.Time) []byte {
	dst = append(dst, "t="...)
	ts := len(dst)
	dst = strconv.AppendInt(dst, t.Unix(), 10)
	mac := hmac.New(sha256.New, g.secret)
	mac.Write(dst[ts:])
	mac.Write([]byte{'.'})
	mac.Write(body)
	var sum [sha256.Size]byte
	dst = append(dst, ",v1="...)
	return hex.AppendEncode(dst, mac.Sum(sum[:0]))
}

// build makes the delivery of event seq with signature sig in the worker's buffers.
func (g *generator) build(buf *buffers, seq int64, sig []byte) item {
	buf.body = g.body(buf.body[:0], seq)
	it := item{seq: seq, body: buf.body, sig: sig}
	if g.raw {
		buf.raw = g.appendRequest(buf.raw[:0], sig, buf.body)
		it.raw = buf.raw
	}
	return it
}

// buffers are a worker's reusable request buffers.
type buffers struct{ body, raw, sig []byte }

// appendRequest appends the HTTP/1.1 request Stripe would send (its header set, keep-alive).
func (g *generator) appendRequest(dst, sig, body []byte) []byte {
	dst = append(dst, "POST "+hookPath+" HTTP/1.1\r\nHost: "...)
	dst = append(dst, g.host...)
	dst = append(dst, "\r\nUser-Agent: Stripe/1.0 (+https://stripe.com/docs/webhooks)\r\n"+
		"Accept: */*; q=0.5, application/xml\r\nCache-Control: no-cache\r\n"+
		"Content-Type: application/json; charset=utf-8\r\nContent-Length: "...)
	dst = strconv.AppendInt(dst, int64(len(body)), 10)
	dst = append(dst, "\r\nStripe-Signature: "...)
	dst = append(dst, sig...)
	dst = append(dst, "\r\n\r\n"...)
	return append(dst, body...)
}

// sigStride is the room for one signature in a pool ("t=" + 10 digits + ",v1=" + 64 hex = 80).
const sigStride = 96

// pool hands out fresh events pre-signed before the phase. The signatures live in an arena
// outside the Go heap (no pointers, not counted by the GC pacer), so pre-signing does not make
// the server's garbage collection rarer than in production. Past its end the pool either wraps
// around (for the no-op handler, which does not dedupe) or signs new events on the spot and
// counts them.
type pool struct {
	gen    *generator
	first  int64 // sequence number of the first event
	n      int
	arena  []byte
	free   func()
	next   atomic.Int64
	wrap   bool
	inline atomic.Int64
}

func newPool(g *generator, n int, wrap bool) *pool {
	n = max(n, 1)
	arena, free := offHeap(n * sigStride)
	p := &pool{gen: g, n: n, arena: arena, free: free, wrap: wrap}
	p.first = g.seq.Add(int64(n)) - int64(n) + 1
	now := time.Now()
	// Sign in parallel: it is outside the measurement, but inside the run's time budget.
	workers := runtime.GOMAXPROCS(0)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			var body []byte
			for i := w; i < n; i += workers {
				body = g.body(body[:0], p.first+int64(i))
				slot := arena[i*sigStride : (i+1)*sigStride]
				sig := g.appendSig(slot[1:1], body, now)
				if len(sig) >= sigStride || &sig[0] != &slot[1] {
					panic("bench-receiver: signature does not fit its pool slot")
				}
				slot[0] = byte(len(sig))
			}
		})
	}
	wg.Wait()
	return p
}

// take returns the next fresh event built in buf.
func (p *pool) take(buf *buffers) item {
	i := p.next.Add(1) - 1
	switch {
	case i < int64(p.n):
	case p.wrap:
		i %= int64(p.n)
	default:
		p.inline.Add(1)
		return p.gen.resign(buf, p.gen.seq.Add(1))
	}
	slot := p.arena[i*sigStride:]
	return p.gen.build(buf, p.first+i, slot[1:1+int(slot[0])])
}

// resign returns event seq signed now (a provider's retry), built in buf.
func (g *generator) resign(buf *buffers, seq int64) item {
	buf.body = g.body(buf.body[:0], seq)
	buf.sig = g.appendSig(buf.sig[:0], buf.body, time.Now())
	return g.build(buf, seq, buf.sig)
}

func (p *pool) close() {
	if p.free != nil {
		p.free()
		p.free, p.arena = nil, nil
	}
}
