package main

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/internal/childproc"
)

// provider is one provider as the demo plays it: a fake started as a process (its binary in
// -bin), a credential it is told about, what it holds read back through its admin API, and
// the provider's side of a delivery (ids, bodies, signatures) for the burst. What every
// provider has lives in the fakeServer it returns; the methods are what differs.
type provider interface {
	fake() *fakeServer
	// grant tells the fake what the credential may administer, once the samples are known,
	// and says what it did ("" for nothing).
	grant(ctx context.Context) (string, error)
	// registrations returns what the fake holds for the credential, secrets included.
	registrations(ctx context.Context) ([]registration, error)
	// columns and row lay out the registrations table.
	columns() []string
	row(r registration) []string
	// verify checks what this provider demands of subscription s's registration r, beyond the
	// checks every provider gets (one per subscription, its URL and id, the secret stored),
	// and returns what it saw, one line each.
	verify(ctx context.Context, d *demo, s subRef, r registration) ([]string, error)
	// calls returns the credential's requests from index from of the fake's request log on.
	calls(ctx context.Context, from int) ([]call, error)

	// eventTypes are the event types the burst sends to a subscription with these spec.events.
	eventTypes(spec []string) []string
	// eventID is the id of the n-th event the burst sends to subscription sub.
	eventID(sub string, n int, rng *rand.Rand) string
	// event is an event as the provider sends it: the same bytes on every copy.
	event(id, typ string, s subRef) delivery
	// probe is a delivery without an event id: authentic, but the receiver records nothing.
	probe() delivery
	// sign sets the headers the provider sends with d, signed with secret, to target t.
	sign(h http.Header, d delivery, secret string, t *target)

	// emit has the fake make n events for subscription s, delivered by the fake itself to
	// registration r only, and returns the ids the receiver hands them on under (the ce-id).
	emit(ctx context.Context, s subRef, r registration, n int) ([]string, error)
	// failedAttempts counts, from the fake's own log of delivery attempts, the failed attempts
	// to registration r of the events ids (a redelivery not included).
	failedAttempts(ctx context.Context, s subRef, r registration, ids []string) (int, error)
}

// fakeServer is what the demo knows of one provider and keeps for its fake.
type fakeServer struct {
	kind   hookv1.ProviderType
	title  string // "Stripe"
	binary string // "fakestripe"
	// credentialName is the provider's word for the credential ("API key", "token"), and
	// credentialPrefix how the demo's starts (printed instead of the credential).
	credentialName   string
	credentialPrefix string

	proc       *proc
	api        fakeAPI
	log        string
	credential string
	subs       []subRef                // the samples on this provider
	regs       map[string]registration // subscription name → its registration, as first seen
	creates    int                     // create requests before the restart
	deletes    int                     // delete requests after kubectl delete
}

// registration is one webhook registration as a fake holds it, in the demo's words.
type registration struct {
	noun   string // the provider's word for it: "endpoint", "hook"
	id     string
	where  string // GitHub: the repository or organization ("repos/acme/shop"); "" otherwise
	url    string
	events []string
	secret string // the secret the provider signs with
	active bool
	detail []string // provider-specific columns of the table
}

// delivery is one request body a provider sends, with the id and type it carries.
type delivery struct {
	id   string // "" for a route probe
	typ  string
	body []byte
}

// Kinds of call.
const (
	opList   = "list"
	opCreate = "create"
	opUpdate = "update"
	opDelete = "delete"
	opPing   = "ping"
)

// call is one request the operator made to a fake, as the demo counts them.
type call struct {
	op          string // one of the op constants, "" for anything else
	firstPage   bool   // a list's first page: one per list the client runs
	notModified bool   // answered 304 (GitHub: no rate limit spent)
}

func countOp(calls []call, op string) int {
	n := 0
	for _, c := range calls {
		if c.op == op && (op != opList || c.firstPage) {
			n++
		}
	}
	return n
}

// describeCalls summarizes calls as "2 list, 0 create, 0 update, 0 delete (5 in all)", adding
// the 304s and pings when there are any.
func describeCalls(calls []call) string {
	var extra []string
	notModified := 0
	for _, c := range calls {
		if c.notModified {
			notModified++
		}
	}
	if notModified > 0 {
		extra = append(extra, fmt.Sprintf("%d answered 304 Not Modified", notModified))
	}
	if n := countOp(calls, opPing); n > 0 {
		extra = append(extra, fmt.Sprintf("%d ping", n))
	}
	extra = append(extra, fmt.Sprintf("%d in all", len(calls)))
	return fmt.Sprintf("%d list, %d create, %d update, %d delete (%s)",
		countOp(calls, opList), countOp(calls, opCreate), countOp(calls, opUpdate), countOp(calls, opDelete), strings.Join(extra, ", "))
}

// newCredential is the provider's credential prefix and 16 random hex digits.
func newCredential(p provider) (string, error) {
	b := make([]byte, 8)
	if _, err := crand.Read(b); err != nil {
		return "", err
	}
	return p.fake().credentialPrefix + hex.EncodeToString(b), nil
}

// --- steps every provider goes through

// startFake starts p's fake on a free port and waits until it answers.
func (d *demo) startFake(ctx context.Context, p provider) error {
	bin := filepath.Join(d.opts.binDir, p.fake().binary)
	d.step("starting the fake %s (%s)", p.fake().title, bin)
	addr, err := childproc.FreeAddr()
	if err != nil {
		return err
	}
	f := p.fake()
	f.log = filepath.Join(d.tmp, p.fake().binary+".log")
	f.proc, err = startProc(p.fake().binary, f.log, os.Environ(), bin, "-addr", addr)
	if err != nil {
		return err
	}
	f.api = newFakeAPI("http://" + addr)
	if err := f.proc.waitReady(ctx, 20*time.Second, f.api, "/_fake/requests"); err != nil {
		return err
	}
	d.info("fake %s listening on %s (log: %s)", p.fake().title, f.api.base, f.log)
	return nil
}

// showProvider checks and prints what p's fake holds once every sample is Ready.
func (d *demo) showProvider(ctx context.Context, p provider) error {
	f := p.fake()
	d.step("what the fake %s holds (%s)", p.fake().title, f.api.base)
	regs, err := d.checkOnePerSub(ctx, p)
	if err != nil {
		return err
	}
	f.regs = regs
	d.printRegistrations(p, regs)
	for _, s := range f.subs {
		if err := d.checkSigningSecret(ctx, s, regs[s.name]); err != nil {
			return err
		}
		lines, err := p.verify(ctx, d, s, regs[s.name])
		if err != nil {
			return err
		}
		for _, l := range lines {
			d.info("%s: %s", s.name, l)
		}
	}
	calls, err := p.calls(ctx, 0)
	if err != nil {
		return err
	}
	f.creates = countOp(calls, opCreate)
	d.info("create requests so far: %d (one per subscription); all requests: %s", f.creates, describeCalls(calls))
	if f.creates != len(f.subs) {
		return fmt.Errorf("the fake %s received %d create requests for %d subscriptions", p.fake().title, f.creates, len(f.subs))
	}
	return nil
}

// checkOnePerSub checks that the fake holds exactly one registration for each subscription's
// status.url where the subscription registers (and nothing else), that status.endpointID names
// it and that a subscription on the receiver registered the receiver's URL.
func (d *demo) checkOnePerSub(ctx context.Context, p provider) (map[string]registration, error) {
	all, err := p.registrations(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]registration{}
	for _, s := range p.fake().subs {
		sub, err := d.getSub(ctx, s.name)
		if err != nil {
			return nil, err
		}
		var match []registration
		for _, r := range all {
			if r.url == sub.Status.URL && r.where == s.target {
				match = append(match, r)
			}
		}
		if len(match) != 1 {
			return nil, fmt.Errorf("the fake %s holds %d registrations for %s (url %q%s), want exactly 1", p.fake().title, len(match), s.name, sub.Status.URL, on(s.target))
		}
		if s.receiver {
			if want := d.receiverURL(s); sub.Status.URL != want {
				return nil, fmt.Errorf("%s registers the receiver: status.url is %q, want %q", s.name, sub.Status.URL, want)
			}
		}
		if match[0].id != sub.Status.EndpointID {
			return nil, fmt.Errorf("%s: status.endpointID is %q but the fake's registration for its URL is %s", s.name, sub.Status.EndpointID, match[0].id)
		}
		if !match[0].active {
			return nil, fmt.Errorf("%s: registration %s is not active", s.name, match[0].id)
		}
		if want := slices.Sorted(slices.Values(s.events)); !slices.Equal(slices.Sorted(slices.Values(match[0].events)), want) {
			return nil, fmt.Errorf("%s: registration %s has events %v, want spec.events %v", s.name, match[0].id, match[0].events, s.events)
		}
		out[s.name] = match[0]
	}
	if len(all) != len(p.fake().subs) {
		return nil, fmt.Errorf("the fake %s holds %d registrations for the demo's %s, want %d (one per subscription)", p.fake().title, len(all), p.fake().credentialName, len(p.fake().subs))
	}
	return out, nil
}

// on names a GitHub target in a message.
func on(target string) string {
	if target == "" {
		return ""
	}
	return " on " + target
}

func (d *demo) receiverURL(s subRef) string {
	return d.receiverBase + "/hooks/" + namespace + "/" + s.name
}

func (d *demo) printRegistrations(p provider, regs map[string]registration) {
	tw := tabwriter.NewWriter(d.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "   SUBSCRIPTION\t"+strings.Join(p.columns(), "\t"))
	for _, s := range p.fake().subs {
		fmt.Fprintln(tw, "   "+s.name+"\t"+strings.Join(p.row(regs[s.name]), "\t"))
	}
	_ = tw.Flush()
}
