package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/providers/stripe/fake"
)

const (
	namespace      = "default"
	clusterName    = "demo"
	resyncInterval = "10s"
	pollInterval   = 2 * time.Second
	stopTimeout    = 15 * time.Second
	createPath     = "/v1/webhook_endpoints"
)

// demo is the state of one run, shared by its steps. It lives in run; nothing is global.
type demo struct {
	opts options
	out  io.Writer

	tmp        string
	kubeconfig string
	managerLog string
	env        *envtest.Environment
	k8s        client.Client
	fakeProc   *proc
	fake       fakeAPI
	mgr        *proc
	mgrStarts  int
	apiKey     string
	manifest   []byte
	subs       []subRef
	endpoints  map[string]fake.Endpoint // subscription name → its endpoint, as first seen
	creates    int                      // create requests before the restart
	deletes    int                      // delete requests after kubectl delete

	sink            *sink   // the demo's event consumer (spec.delivery.sink)
	rcv             *proc   // the receiver
	receiverLog     string  // its log file
	receiverStore   string  // its SQLite file
	receiverBase    string  // http://<its bind address>, also the manager's --receiver-base-url
	receiverMetrics fakeAPI // GETs on its metrics address
	burstEvents     int     // distinct events the sink received, each exactly once
	burstSent       int     // deliveries sent to the receiver in the burst
}

func (d *demo) step(format string, args ...any) {
	fmt.Fprintf(d.out, "\n== "+format+"\n", args...)
}

func (d *demo) info(format string, args ...any) {
	fmt.Fprintf(d.out, "   "+format+"\n", args...)
}

// block prints multi-line output (kubectl's) indented under the current step.
func (d *demo) block(text string) {
	for _, line := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		fmt.Fprintln(d.out, "   "+line)
	}
}

// checkInputs fails early, with a hint, when a binary or folder is missing.
func (d *demo) checkInputs() error {
	need := map[string]string{
		filepath.Join(d.opts.assets, "kube-apiserver"): "run hack/control-plane.sh",
		filepath.Join(d.opts.assets, "etcd"):           "run hack/control-plane.sh",
		filepath.Join(d.opts.assets, "kubectl"):        "run hack/control-plane.sh",
		filepath.Join(d.opts.binDir, "manager"):        "run make build",
		filepath.Join(d.opts.binDir, "receiver"):       "run make build",
		filepath.Join(d.opts.binDir, "fakestripe"):     "run make build",
		d.opts.samples: "pass -samples",
		d.opts.crds:    "pass -crds",
	}
	for path, hint := range need {
		if _, err := os.Stat(path); err != nil {
			return fmt.Errorf("%s is missing (%s): %w", path, hint, err)
		}
	}
	return nil
}

// --- step 1: control plane

func (d *demo) startControlPlane(ctx context.Context) error {
	d.step("starting a local control plane (kube-apiserver + etcd from %s)", d.opts.assets)
	tmp, err := os.MkdirTemp("", "hookwarden-demo-")
	if err != nil {
		return err
	}
	d.tmp = tmp
	d.env = &envtest.Environment{
		BinaryAssetsDirectory: d.opts.assets,
		CRDDirectoryPaths:     []string{d.opts.crds},
		ErrorIfCRDPathMissing: true,
	}
	started := time.Now()
	cfg, err := d.env.Start() // not interruptible; takes seconds
	if err != nil {
		return fmt.Errorf("starting the control plane: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := hookv1.AddToScheme(scheme); err != nil {
		return err
	}
	if d.k8s, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		return err
	}
	if err := d.writeKubeconfig(); err != nil {
		return err
	}
	d.info("API server %s ready in %s; CRDs from %s installed", cfg.Host, time.Since(started).Round(100*time.Millisecond), d.opts.crds)
	d.info("kubeconfig: %s", d.kubeconfig)
	d.info("while the demo runs: KUBECONFIG=%s %s get whsub", d.kubeconfig, filepath.Join(d.opts.assets, "kubectl"))
	return nil
}

func (d *demo) writeKubeconfig() error {
	user, err := d.env.AddUser(envtest.User{Name: "demo", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return fmt.Errorf("adding the demo user: %w", err)
	}
	kc, err := user.KubeConfig()
	if err != nil {
		return fmt.Errorf("writing a kubeconfig: %w", err)
	}
	d.kubeconfig = filepath.Join(d.tmp, "kubeconfig")
	return os.WriteFile(d.kubeconfig, kc, 0o600)
}

// --- step 2: fake Stripe

func (d *demo) startFakeStripe(ctx context.Context) error {
	d.step("starting the fake Stripe (%s)", filepath.Join(d.opts.binDir, "fakestripe"))
	addr, err := freeAddr()
	if err != nil {
		return err
	}
	logPath := filepath.Join(d.tmp, "fakestripe.log")
	d.fakeProc, err = startProc("fakestripe", logPath, os.Environ(), filepath.Join(d.opts.binDir, "fakestripe"), "-addr", addr)
	if err != nil {
		return err
	}
	d.fake = newFakeAPI("http://" + addr)
	if err := d.fakeProc.waitReady(ctx, 20*time.Second, d.fake, "/_fake/requests"); err != nil {
		return err
	}
	d.info("fake Stripe listening on %s (log: %s)", d.fake.base, logPath)
	return nil
}

// --- step 3: manager

func (d *demo) startManagerStep(ctx context.Context) error {
	d.step("starting the manager (%s)", filepath.Join(d.opts.binDir, "manager"))
	d.managerLog = filepath.Join(d.tmp, "manager.log")
	return d.startManager(ctx)
}

func (d *demo) startManager(ctx context.Context) error {
	addr, err := freeAddr()
	if err != nil {
		return err
	}
	d.mgrStarts++
	if err := appendLine(d.managerLog, fmt.Sprintf("----- demo: manager start #%d at %s -----", d.mgrStarts, time.Now().Format(time.RFC3339))); err != nil {
		return err
	}
	env := append(os.Environ(), "KUBECONFIG="+d.kubeconfig)
	d.mgr, err = startProc("manager", d.managerLog, env, filepath.Join(d.opts.binDir, "manager"),
		"--leader-elect=false", "--metrics-bind-address=0", "--health-probe-bind-address="+addr, "--cluster-name="+clusterName,
		"--receiver-base-url="+d.receiverBase)
	if err != nil {
		return err
	}
	started := time.Now()
	if err := d.mgr.waitReady(ctx, 60*time.Second, newFakeAPI("http://"+addr), "/readyz"); err != nil {
		return err
	}
	d.info("manager (pid %d, --receiver-base-url=%s) ready in %s; logs: %s", d.mgr.pid(), d.receiverBase, time.Since(started).Round(100*time.Millisecond), d.managerLog)
	return nil
}

// --- step 4: credentials and samples

func (d *demo) applySamples(ctx context.Context) error {
	d.step("applying the samples from %s (provider.apiURL → the fake, delivery.sink.url → the demo's sink, resyncInterval → %s)", d.opts.samples, resyncInterval)
	m, subs, err := loadSamples(d.opts.samples, d.fake.base, d.sink.base, resyncInterval)
	if err != nil {
		return err
	}
	d.manifest, d.subs = m, subs
	for _, s := range subs {
		if s.sink != "" {
			d.info("%s: spec.delivery.sink.url %s → %s", s.name, s.sample, s.sink)
		}
	}
	key, err := randomKey()
	if err != nil {
		return err
	}
	d.apiKey = key
	if err := d.createCredentials(ctx); err != nil {
		return err
	}
	out, err := d.kubectl(ctx, d.manifest, "apply", "-f", "-")
	if err != nil {
		return fmt.Errorf("kubectl apply of the samples failed: %w", err)
	}
	d.block(out)
	return nil
}

// createCredentials writes the API key into every Secret the samples reference.
func (d *demo) createCredentials(ctx context.Context) error {
	data := map[string]map[string]string{}
	for _, s := range d.subs {
		if data[s.credsName] == nil {
			data[s.credsName] = map[string]string{}
		}
		data[s.credsName][s.credsKey] = d.apiKey
	}
	for _, name := range sortedKeys(data) {
		kv := data[name]
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, StringData: kv}
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := d.k8s.Create(cctx, sec)
		cancel()
		if err != nil {
			return fmt.Errorf("creating the credentials Secret %s: %w", name, err)
		}
		d.info("secret/%s created with the Stripe API key sk_test_demo_… (keys: %s)", name, strings.Join(sortedKeys(kv), ", "))
	}
	return nil
}

// --- step 5: Ready

func (d *demo) waitAllReady(ctx context.Context) error {
	d.step("waiting until every sample is Ready (kubectl get whsub -o wide every %s, timeout %s)", pollInterval, d.opts.readyTimeout)
	started := time.Now()
	err := poll(ctx, d.opts.readyTimeout, pollInterval, func(ctx context.Context) (bool, error) {
		if err := d.mgr.exited(); err != nil {
			return false, fatal(err)
		}
		pending, err := d.notReady(ctx)
		if err != nil || len(pending) == 0 {
			return err == nil, err
		}
		if err := d.printSubs(ctx, fmt.Sprintf("t+%s", time.Since(started).Round(time.Second))); err != nil {
			return false, err
		}
		return false, errors.New(strings.Join(pending, "; "))
	})
	if err != nil {
		return fmt.Errorf("samples not Ready: %w", err)
	}
	d.info("all %d Ready after %s:", len(d.subs), time.Since(started).Round(100*time.Millisecond))
	return d.printSubs(ctx, "")
}

func (d *demo) printSubs(ctx context.Context, label string) error {
	out, err := d.kubectl(ctx, nil, "get", "whsub", "-o", "wide")
	if err != nil {
		return err
	}
	if label != "" {
		d.info("-- %s", label)
	}
	d.block(out)
	return nil
}

// notReady describes the subscriptions that are not Ready for their current generation. A
// Stalled one is a fatal error: it needs a human, waiting will not help.
func (d *demo) notReady(ctx context.Context) ([]string, error) {
	var pending []string
	for _, s := range d.subs {
		sub, err := d.getSub(ctx, s.name)
		if err != nil {
			return nil, err
		}
		if c := condition(sub, hookv1.ConditionStalled); c != nil {
			return nil, fatal(fmt.Errorf("%s is Stalled (%s): %s", s.name, c.Reason, c.Message))
		}
		c := condition(sub, hookv1.ConditionReady)
		switch {
		case c == nil:
			pending = append(pending, s.name+": no Ready condition yet")
		case c.Status != metav1.ConditionTrue || c.ObservedGeneration != sub.Generation:
			pending = append(pending, fmt.Sprintf("%s: Ready=%s (%s) %s", s.name, c.Status, c.Reason, c.Message))
		}
	}
	return pending, nil
}

func (d *demo) getSub(ctx context.Context, name string) (*hookv1.WebhookSubscription, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	sub := &hookv1.WebhookSubscription{}
	if err := d.k8s.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, sub); err != nil {
		return nil, fmt.Errorf("reading WebhookSubscription %s: %w", name, err)
	}
	return sub, nil
}

func condition(sub *hookv1.WebhookSubscription, typ string) *metav1.Condition {
	for i := range sub.Status.Conditions {
		if sub.Status.Conditions[i].Type == typ {
			return &sub.Status.Conditions[i]
		}
	}
	return nil
}

// --- step 6: the provider side

func (d *demo) showProvider(ctx context.Context) error {
	d.step("what the fake Stripe holds (GET %s/_fake/endpoints)", d.fake.base)
	eps, err := d.checkOnePerSub(ctx)
	if err != nil {
		return err
	}
	d.endpoints = eps
	d.printEndpoints(eps)
	for _, s := range d.subs {
		if err := d.checkSigningSecret(ctx, s, eps[s.name]); err != nil {
			return err
		}
	}
	reqs, err := d.ourRequests(ctx, 0)
	if err != nil {
		return err
	}
	d.creates = countCreates(reqs)
	d.info("create requests so far: %d (one per subscription)", d.creates)
	return nil
}

// checkOnePerSub checks that the account holds exactly one endpoint for each subscription's
// status.url (and nothing else), and that status.endpointID names it.
func (d *demo) checkOnePerSub(ctx context.Context) (map[string]fake.Endpoint, error) {
	all, err := d.fake.endpoints(ctx, d.apiKey)
	if err != nil {
		return nil, err
	}
	out := map[string]fake.Endpoint{}
	for _, s := range d.subs {
		sub, err := d.getSub(ctx, s.name)
		if err != nil {
			return nil, err
		}
		var match []fake.Endpoint
		for _, ep := range all {
			if ep.URL == sub.Status.URL {
				match = append(match, ep)
			}
		}
		if len(match) != 1 {
			return nil, fmt.Errorf("the fake holds %d endpoints for %s (url %q), want exactly 1", len(match), s.name, sub.Status.URL)
		}
		if s.receiver {
			if want := d.receiverBase + "/hooks/" + namespace + "/" + s.name; sub.Status.URL != want {
				return nil, fmt.Errorf("%s uses spec.endpoint.receiver: status.url is %q, want %q", s.name, sub.Status.URL, want)
			}
		}
		if match[0].ID != sub.Status.EndpointID {
			return nil, fmt.Errorf("%s: status.endpointID is %q but the fake's endpoint for its URL is %s", s.name, sub.Status.EndpointID, match[0].ID)
		}
		out[s.name] = match[0]
	}
	if len(all) != len(d.subs) {
		return nil, fmt.Errorf("the fake holds %d endpoints on the account, want %d (one per subscription)", len(all), len(d.subs))
	}
	return out, nil
}

func (d *demo) printEndpoints(eps map[string]fake.Endpoint) {
	tw := tabwriter.NewWriter(d.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "   SUBSCRIPTION\tENDPOINT\tURL\tEVENTS")
	for _, s := range d.subs {
		ep := eps[s.name]
		fmt.Fprintf(tw, "   %s\t%s\t%s\t%s\n", s.name, ep.ID, ep.URL, strings.Join(ep.EnabledEvents, ","))
	}
	_ = tw.Flush()
}

// checkSigningSecret compares the signing Secret with the endpoint's secret, never printing it.
func (d *demo) checkSigningSecret(ctx context.Context, s subRef, ep fake.Endpoint) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	sec := &corev1.Secret{}
	if err := d.k8s.Get(ctx, types.NamespacedName{Namespace: namespace, Name: s.signingSecret}, sec); err != nil {
		return fmt.Errorf("reading the signing Secret of %s: %w", s.name, err)
	}
	got, ok := sec.Data[hookv1.SecretKeyCurrent]
	switch {
	case !ok:
		return fmt.Errorf("signing Secret %s has no key %s", s.signingSecret, hookv1.SecretKeyCurrent)
	case ep.Secret == "":
		return fmt.Errorf("the fake reports no secret for endpoint %s", ep.ID)
	case string(got) != ep.Secret:
		return fmt.Errorf("signing Secret %s/%s does not hold endpoint %s's secret", s.signingSecret, hookv1.SecretKeyCurrent, ep.ID)
	}
	d.info("%s: secret/%s key %s = endpoint %s's signing secret — secret stored: yes", s.name, s.signingSecret, hookv1.SecretKeyCurrent, ep.ID)
	return nil
}

// --- step 7: restart

func (d *demo) restartManager(ctx context.Context) error {
	d.step("restarting the manager (SIGTERM, then start again): it must not register anything twice")
	status, err := d.mgr.stop(stopTimeout)
	if err != nil {
		return err
	}
	d.info("manager stopped (%s)", status)
	mark, err := d.logLen(ctx) // the old manager is gone: later requests are the new one's
	if err != nil {
		return err
	}
	lastSync, err := d.lastSyncTimes(ctx)
	if err != nil {
		return err
	}
	if err := d.startManager(ctx); err != nil {
		return err
	}
	after, err := d.waitResynced(ctx, mark, lastSync)
	if err != nil {
		return err
	}
	d.info("requests after the restart: %s", describeRequests(after))
	if n := countCreates(after); n != 0 {
		return fmt.Errorf("the fake received %d create requests (POST %s) after the manager restart, want 0", n, createPath)
	}
	eps, err := d.checkOnePerSub(ctx)
	if err != nil {
		return fmt.Errorf("after the restart: %w", err)
	}
	for _, s := range d.subs {
		if eps[s.name].ID != d.endpoints[s.name].ID {
			return fmt.Errorf("%s's endpoint changed across the restart: %s → %s", s.name, d.endpoints[s.name].ID, eps[s.name].ID)
		}
	}
	d.info("zero create requests after the restart; still exactly one endpoint per subscription, same ids")
	return d.printSubs(ctx, "")
}

func (d *demo) lastSyncTimes(ctx context.Context) (map[string]time.Time, error) {
	out := map[string]time.Time{}
	for _, s := range d.subs {
		sub, err := d.getSub(ctx, s.name)
		if err != nil {
			return nil, err
		}
		if sub.Status.LastSyncTime != nil {
			out[s.name] = sub.Status.LastSyncTime.Time
		}
	}
	return out, nil
}

// waitResynced waits until the new manager has listed the account and every subscription
// has synced since (lastSyncTime moved) and is Ready. It returns our requests since index from.
func (d *demo) waitResynced(ctx context.Context, from int, lastSync map[string]time.Time) ([]fake.Request, error) {
	var after []fake.Request
	err := poll(ctx, 60*time.Second, 500*time.Millisecond, func(ctx context.Context) (bool, error) {
		if err := d.mgr.exited(); err != nil {
			return false, fatal(err)
		}
		reqs, err := d.ourRequests(ctx, from)
		if err != nil {
			return false, err
		}
		after = reqs
		if countLists(reqs) == 0 {
			return false, errors.New("no list call from the new manager yet")
		}
		for _, s := range d.subs {
			sub, err := d.getSub(ctx, s.name)
			if err != nil {
				return false, err
			}
			if sub.Status.LastSyncTime == nil || !sub.Status.LastSyncTime.After(lastSync[s.name]) {
				return false, fmt.Errorf("%s not synced by the new manager yet", s.name)
			}
		}
		pending, err := d.notReady(ctx)
		if err == nil && len(pending) > 0 {
			err = errors.New(strings.Join(pending, "; "))
		}
		return err == nil, err
	})
	if err != nil {
		return nil, fmt.Errorf("waiting for the restarted manager to reconcile: %w", err)
	}
	d.info("the new manager listed the account and re-synced all %d subscriptions", len(d.subs))
	return after, nil
}

// --- step 8: delete

func (d *demo) deleteSamples(ctx context.Context) error {
	d.step("deleting the samples (kubectl delete --wait): the endpoints must go too")
	mark, err := d.logLen(ctx)
	if err != nil {
		return err
	}
	out, err := d.kubectl(ctx, d.manifest, "delete", "--wait=true", "--timeout=60s", "-f", "-")
	if err != nil {
		return fmt.Errorf("kubectl delete of the samples failed: %w", err)
	}
	d.block(out)
	all, err := d.fake.endpoints(ctx, d.apiKey)
	if err != nil {
		return err
	}
	for _, s := range d.subs {
		for _, ep := range all {
			if ep.URL == d.endpoints[s.name].URL {
				return fmt.Errorf("%s was deleted but the fake still holds endpoint %s for %s", s.name, ep.ID, ep.URL)
			}
		}
	}
	after, err := d.ourRequests(ctx, mark)
	if err != nil {
		return err
	}
	d.deletes = countMethod(after, "DELETE")
	d.info("requests during the deletion: %s", describeRequests(after))
	d.info("the fake holds no endpoint for the samples any more (%d endpoints left on the account)", len(all))
	return nil
}

// --- step 9: no secret in the logs

// checkLogsForSecrets fails if the API key or a signing secret appears in the manager's, the
// receiver's or the fake's log.
func (d *demo) checkLogsForSecrets(context.Context) error {
	d.step("checking the logs for leaked secrets")
	secrets := map[string]string{"the API key": d.apiKey}
	for name, ep := range d.endpoints {
		secrets[name+"'s signing secret"] = ep.Secret
	}
	for _, path := range []string{d.managerLog, d.receiverLog, filepath.Join(d.tmp, "fakestripe.log")} {
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for what, secret := range secrets {
			if secret != "" && bytes.Contains(b, []byte(secret)) {
				return fmt.Errorf("%s appears in %s", what, path)
			}
		}
		d.info("%s: %d lines, no API key or signing secret", filepath.Base(path), bytes.Count(b, []byte("\n")))
	}
	return nil
}

// --- cleanup and summary

func (d *demo) cleanup() error {
	var errs []error
	for _, p := range []*proc{d.mgr, d.rcv, d.fakeProc} {
		if p == nil {
			continue
		}
		if status, err := p.stop(stopTimeout); err != nil {
			errs = append(errs, err)
		} else {
			d.info("%s stopped (%s)", p.Name, status)
		}
	}
	if d.sink != nil {
		if err := d.sink.stop(); err != nil {
			errs = append(errs, fmt.Errorf("stopping the sink: %w", err))
		} else {
			d.info("sink stopped")
		}
	}
	if d.env != nil {
		if err := d.env.Stop(); err != nil {
			errs = append(errs, fmt.Errorf("stopping the control plane: %w", err))
		} else {
			d.info("control plane stopped")
		}
	}
	if d.tmp != "" {
		if err := os.RemoveAll(d.tmp); err != nil {
			errs = append(errs, err)
		} else {
			d.info("removed %s", d.tmp)
		}
	}
	return errors.Join(errs...)
}

// showLogs prints the end of the manager's and the receiver's logs (on failure, before they
// are removed).
func (d *demo) showLogs(lines int) {
	for _, l := range []struct{ what, path string }{{"manager", d.managerLog}, {"receiver", d.receiverLog}} {
		if l.path == "" {
			continue
		}
		d.step("last %d lines of the %s log (%s)", lines, l.what, l.path)
		d.block(tail(l.path, lines))
	}
}

func (d *demo) summary() string {
	return fmt.Sprintf("%d subscriptions registered exactly once (%d creates), %d events delivered to the sink exactly once out of %d signed deliveries, 0 creates after a manager restart, %d endpoints deleted with the subscriptions",
		len(d.subs), d.creates, d.burstEvents, d.burstSent, d.deletes)
}

// --- helpers

// kubectl runs the control plane's kubectl against the demo cluster in the default namespace.
func (d *demo) kubectl(ctx context.Context, stdin []byte, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	args = append([]string{"--kubeconfig", d.kubeconfig, "--namespace", namespace}, args...)
	cmd := exec.CommandContext(ctx, filepath.Join(d.opts.assets, "kubectl"), args...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("kubectl %s: %w\n%s", strings.Join(args[4:], " "), err, strings.TrimSpace(out.String()))
	}
	return out.String(), nil
}

// ourRequests returns the fake's logged requests for the demo's account, from index from of
// the whole log on.
func (d *demo) ourRequests(ctx context.Context, from int) ([]fake.Request, error) {
	all, err := d.fake.requests(ctx)
	if err != nil {
		return nil, err
	}
	if from > len(all) {
		return nil, fmt.Errorf("the fake's request log shrank from %d to %d entries", from, len(all))
	}
	label := fake.AccountLabel(d.apiKey)
	var out []fake.Request
	for _, r := range all[from:] {
		if r.Account == label {
			out = append(out, r)
		}
	}
	return out, nil
}

// logLen returns the length of the fake's whole request log, to count what comes after.
func (d *demo) logLen(ctx context.Context) (int, error) {
	all, err := d.fake.requests(ctx)
	return len(all), err
}

func countCreates(reqs []fake.Request) int {
	n := 0
	for _, r := range reqs {
		if r.Method == "POST" && r.Path == createPath {
			n++
		}
	}
	return n
}

// countLists counts list calls (first pages only).
func countLists(reqs []fake.Request) int {
	n := 0
	for _, r := range reqs {
		if r.Method == "GET" && r.Path == createPath && r.Query.Get("starting_after") == "" {
			n++
		}
	}
	return n
}

func countMethod(reqs []fake.Request, method string) int {
	n := 0
	for _, r := range reqs {
		if r.Method == method {
			n++
		}
	}
	return n
}

// describeRequests summarizes requests as "2 list, 0 create, 0 update, 0 delete".
func describeRequests(reqs []fake.Request) string {
	creates := countCreates(reqs)
	updates := countMethod(reqs, "POST") - creates
	return fmt.Sprintf("%d list, %d create, %d update, %d delete (%d in all)",
		countLists(reqs), creates, updates, countMethod(reqs, "DELETE"), len(reqs))
}

func randomKey() (string, error) {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return "sk_test_demo_" + hex.EncodeToString(b), nil
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }
