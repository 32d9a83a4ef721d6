package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/internal/childproc"
	"github.com/hookwarden/hookwarden/internal/testenv"
)

const (
	namespace = "default"
	// receiverNamespace is the receiver's own, as a chart release's: the manager keeps its route
	// Secrets there, the only Secrets the receiver reads.
	receiverNamespace = "hookwarden-system"
	clusterName       = "demo"
	resyncInterval    = "10s"
	pollInterval      = 2 * time.Second
	stopTimeout       = 15 * time.Second
)

// demo is the state of one run, shared by its steps. It lives in run; nothing is global.
type demo struct {
	opts options
	out  io.Writer

	tmp        string
	kubeconfig string
	managerLog string
	env        *testenv.Env
	k8s        client.Client
	providers  []provider // their fakes, credentials and registrations
	mgr        *proc
	mgrStarts  int
	manifest   []byte
	subs       []subRef

	sink            *sink         // the demo's event consumer (spec.delivery.sink)
	nats            *natsBroker   // the embedded nats-server, the fan-out's second sink
	natsStream      string        // the stream the fan-out subscription's JetStream sink fills
	fanOut          string        // what the fan-out check saw, for the summary
	rcv             *proc         // the receiver
	receiverLog     string        // its log file
	receiverStore   string        // its SQLite file
	receiverAddrs   [3]string     // its bind, metrics and probe addresses, kept across a restart
	receiverBase    string        // http://<its bind address>, also the manager's --receiver-base-url
	receiverMetrics fakeAPI       // GETs on its metrics address
	burstEvents     int           // distinct events the sink received, each exactly once
	burstSent       int           // deliveries sent to the receiver in the burst
	recovery        []recoveryRow // what the recovery step saw, per subscription
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
		d.opts.crds:                                    "pass -crds",
	}
	for _, p := range d.providers {
		need[filepath.Join(d.opts.binDir, p.fake().binary)] = "run make build"
	}
	for _, dir := range d.opts.samples {
		need[dir] = "pass -samples"
	}
	for _, path := range sortedKeys(need) {
		if _, err := os.Stat(path); err != nil {
			return fmt.Errorf("%s is missing (%s): %w", path, need[path], err)
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
	started := time.Now()
	env, err := testenv.StartWith(testenv.Options{Assets: d.opts.assets, CRDs: d.opts.crds, Dir: tmp, User: "demo"}) // not interruptible; takes seconds
	if err != nil {
		return fmt.Errorf("starting the control plane: %w", err)
	}
	d.env, d.k8s, d.kubeconfig = env, env.Client, env.Kubeconfig
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := d.k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: receiverNamespace}}); err != nil {
		return fmt.Errorf("creating the receiver's namespace: %w", err)
	}
	d.info("API server %s ready in %s; CRDs from %s installed", env.Config.Host, time.Since(started).Round(100*time.Millisecond), d.opts.crds)
	d.info("kubeconfig: %s", d.kubeconfig)
	d.info("while the demo runs: KUBECONFIG=%s %s get whsub", d.kubeconfig, filepath.Join(d.opts.assets, "kubectl"))
	return nil
}

// --- step 2: the fakes

func (d *demo) startFakes(ctx context.Context) error {
	for _, p := range d.providers {
		if err := d.startFake(ctx, p); err != nil {
			return err
		}
	}
	return nil
}

// --- step 3: manager

func (d *demo) startManagerStep(ctx context.Context) error {
	d.step("starting the manager (%s)", filepath.Join(d.opts.binDir, "manager"))
	d.managerLog = filepath.Join(d.tmp, "manager.log")
	return d.startManager(ctx)
}

func (d *demo) startManager(ctx context.Context) error {
	addr, err := childproc.FreeAddr()
	if err != nil {
		return err
	}
	d.mgrStarts++
	if err := childproc.AppendLine(d.managerLog, fmt.Sprintf("----- demo: manager start #%d at %s -----", d.mgrStarts, time.Now().Format(time.RFC3339))); err != nil {
		return err
	}
	env := append(os.Environ(), "KUBECONFIG="+d.kubeconfig)
	d.mgr, err = startProc("manager", d.managerLog, env, filepath.Join(d.opts.binDir, "manager"),
		"--leader-elect=false", "--metrics-bind-address=0", "--health-probe-bind-address="+addr, "--cluster-name="+clusterName,
		"--receiver-base-url="+d.receiverBase, "--receiver-namespace="+receiverNamespace)
	if err != nil {
		return err
	}
	started := time.Now()
	if err := d.mgr.waitReady(ctx, 60*time.Second, newFakeAPI("http://"+addr), "/readyz"); err != nil {
		return err
	}
	d.info("manager (pid %d, --receiver-base-url=%s) ready in %s; logs: %s", d.mgr.Pid(), d.receiverBase, time.Since(started).Round(100*time.Millisecond), d.managerLog)
	return nil
}

// --- step 4: credentials and samples

func (d *demo) applySamples(ctx context.Context) error {
	d.step("applying the samples from %s (provider.apiURL → its fake, delivery.sink.url → the demo's sink, an endpoint.url on the receiver's route → the receiver, resyncInterval → %s)",
		strings.Join(d.opts.samples, " and "), resyncInterval)
	rw := rewriting{apiURLs: map[hookv1.ProviderType]string{}, sinkBase: d.sink.base, receiverBase: d.receiverBase, resync: resyncInterval,
		natsURL: d.nats.srv.ClientURL()}
	for _, p := range d.providers {
		rw.apiURLs[p.fake().kind] = p.fake().api.base
	}
	m, subs, err := loadSamples(d.opts.samples, rw)
	if err != nil {
		return err
	}
	d.manifest, d.subs = m, subs
	for _, s := range subs {
		f := d.providerOf(s).fake()
		f.subs = append(f.subs, s)
		if s.endpoint != "" {
			d.info("%s: spec.endpoint.url %s → %s (allowInsecureHTTP: the local receiver speaks plain HTTP)", s.name, s.endpoint, d.receiverURL(s))
		}
		if s.sink != "" {
			d.info("%s: spec.delivery.sink.url %s → %s", s.name, s.sample, s.sink)
		}
		if s.natsSubject != "" {
			if d.natsStream, err = d.nats.createStream(ctx, s.natsSubject); err != nil {
				return err
			}
			d.info("%s: fan-out: spec.delivery.sinks = [default: http %s, jetstream: nats %s subject %s%s]; JetStream stream %s created for %s",
				s.name, s.sink, rw.natsURL, s.natsSubject, describeNATSFilter(s), d.natsStream, s.natsSubject)
		}
	}
	for _, p := range d.providers {
		f := p.fake()
		if len(f.subs) == 0 {
			return fmt.Errorf("no sample in %s is for %s", strings.Join(d.opts.samples, ", "), p.fake().title)
		}
		if f.credential, err = newCredential(p); err != nil {
			return err
		}
		said, err := p.grant(ctx)
		if err != nil {
			return err
		}
		if said != "" {
			d.info("%s", said)
		}
	}
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

// providerOf returns the provider of subscription s (loadSamples refuses any other).
func (d *demo) providerOf(s subRef) provider {
	for _, p := range d.providers {
		if p.fake().kind == s.provider {
			return p
		}
	}
	panic("demo: no provider for " + string(s.provider))
}

// createCredentials writes each provider's credential into every Secret its samples reference.
func (d *demo) createCredentials(ctx context.Context) error {
	type secretData struct {
		p  provider
		kv map[string]string
	}
	data := map[string]*secretData{}
	for _, s := range d.subs {
		p := d.providerOf(s)
		sd := data[s.credsName]
		if sd == nil {
			sd = &secretData{p: p, kv: map[string]string{}}
			data[s.credsName] = sd
		}
		if sd.p != p {
			return fmt.Errorf("secret %s holds credentials of both %s and %s samples", s.credsName, sd.p.fake().title, p.fake().title)
		}
		sd.kv[s.credsKey] = p.fake().credential
	}
	for _, name := range sortedKeys(data) {
		sd := data[name]
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, StringData: sd.kv}
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := d.k8s.Create(cctx, sec)
		cancel()
		if err != nil {
			return fmt.Errorf("creating the credentials Secret %s: %w", name, err)
		}
		d.info("secret/%s created with the %s %s %s… (keys: %s)", name, sd.p.fake().title, sd.p.fake().credentialName, sd.p.fake().credentialPrefix, strings.Join(sortedKeys(sd.kv), ", "))
	}
	return nil
}

// --- step 5: Ready

func (d *demo) waitAllReady(ctx context.Context) error {
	d.step("waiting until every sample is Ready (kubectl get whsub -o wide every %s, timeout %s)", pollInterval, d.opts.readyTimeout)
	started := time.Now()
	err := poll(ctx, d.opts.readyTimeout, pollInterval, func(ctx context.Context) (bool, error) {
		if err := d.mgr.Exited(); err != nil {
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

func (d *demo) showProviders(ctx context.Context) error {
	for _, p := range d.providers {
		if err := d.showProvider(ctx, p); err != nil {
			return err
		}
	}
	return nil
}

// checkSigningSecret compares the signing Secret with the registration's secret, never
// printing it.
func (d *demo) checkSigningSecret(ctx context.Context, s subRef, r registration) error {
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
	case r.secret == "":
		return fmt.Errorf("the fake reports no secret for registration %s", r.id)
	case string(got) != r.secret:
		return fmt.Errorf("signing Secret %s/%s does not hold registration %s's secret", s.signingSecret, hookv1.SecretKeyCurrent, r.id)
	}
	d.info("%s: secret/%s key %s = %s %s's signing secret at the fake %s — secret stored: yes", s.name, s.signingSecret, hookv1.SecretKeyCurrent, r.noun, r.id, d.providerOf(s).fake().title)
	return nil
}

// --- step 7: restart

func (d *demo) restartManager(ctx context.Context) error {
	d.step("restarting the manager (SIGTERM, then start again): it must not register anything twice")
	status, err := d.mgr.Stop(stopTimeout)
	if err != nil {
		return err
	}
	d.info("manager stopped (%s)", status)
	marks, err := d.logMarks(ctx) // the old manager is gone: later requests are the new one's
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
	after, err := d.waitResynced(ctx, marks, lastSync)
	if err != nil {
		return err
	}
	for _, p := range d.providers {
		f := p.fake()
		d.info("requests to the fake %s after the restart: %s", p.fake().title, describeCalls(after[p]))
		if n := countOp(after[p], opCreate); n != 0 {
			return fmt.Errorf("the fake %s received %d create requests after the manager restart, want 0", p.fake().title, n)
		}
		regs, err := d.checkOnePerSub(ctx, p)
		if err != nil {
			return fmt.Errorf("after the restart: %w", err)
		}
		for _, s := range f.subs {
			if regs[s.name].id != f.regs[s.name].id {
				return fmt.Errorf("%s's registration changed across the restart: %s → %s", s.name, f.regs[s.name].id, regs[s.name].id)
			}
		}
	}
	d.info("zero create requests after the restart; still exactly one registration per subscription, same ids")
	return d.printSubs(ctx, "")
}

// logMarks returns the length of each fake's request log, to count what comes after.
func (d *demo) logMarks(ctx context.Context) (map[provider]int, error) {
	marks := map[provider]int{}
	for _, p := range d.providers {
		n, err := p.fake().api.logLen(ctx)
		if err != nil {
			return nil, err
		}
		marks[p] = n
	}
	return marks, nil
}

// waitResynced waits until the new manager has listed every provider's registrations and
// every subscription has synced since (lastSyncTime moved) and is Ready. It returns each
// provider's calls since its mark.
func (d *demo) waitResynced(ctx context.Context, marks map[provider]int, lastSync map[string]time.Time) (map[provider][]call, error) {
	after := map[provider][]call{}
	err := poll(ctx, 60*time.Second, 500*time.Millisecond, func(ctx context.Context) (bool, error) {
		if err := d.mgr.Exited(); err != nil {
			return false, fatal(err)
		}
		for _, p := range d.providers {
			calls, err := p.calls(ctx, marks[p])
			if err != nil {
				return false, err
			}
			after[p] = calls
			if countOp(calls, opList) == 0 {
				return false, fmt.Errorf("no list call from the new manager to the fake %s yet", p.fake().title)
			}
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
	d.info("the new manager listed every provider's registrations and re-synced all %d subscriptions", len(d.subs))
	return after, nil
}

// lastSyncTimes returns each subscription's status.lastSyncTime.
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

// --- step 8: delete

func (d *demo) deleteSamples(ctx context.Context) error {
	d.step("deleting the samples (kubectl delete --wait): the registrations must go too")
	marks, err := d.logMarks(ctx)
	if err != nil {
		return err
	}
	out, err := d.kubectl(ctx, d.manifest, "delete", "--wait=true", "--timeout=60s", "-f", "-")
	if err != nil {
		return fmt.Errorf("kubectl delete of the samples failed: %w", err)
	}
	d.block(out)
	for _, p := range d.providers {
		f := p.fake()
		all, err := p.registrations(ctx)
		if err != nil {
			return err
		}
		for _, s := range f.subs {
			for _, r := range all {
				if r.url == f.regs[s.name].url && r.where == s.target {
					return fmt.Errorf("%s was deleted but the fake %s still holds registration %s for %s%s", s.name, p.fake().title, r.id, r.url, on(r.where))
				}
			}
		}
		after, err := p.calls(ctx, marks[p])
		if err != nil {
			return err
		}
		f.deletes = countOp(after, opDelete)
		d.info("requests to the fake %s during the deletion: %s", p.fake().title, describeCalls(after))
		d.info("the fake %s holds no registration for the samples any more (%d left for the demo's %s)", p.fake().title, len(all), p.fake().credentialName)
	}
	return nil
}

// --- step 9: no secret in the logs

// checkLogsForSecrets fails if a credential or a signing secret appears in the manager's, the
// receiver's or a fake's log.
func (d *demo) checkLogsForSecrets(context.Context) error {
	d.step("checking the logs for leaked secrets")
	secrets := map[string]string{}
	paths := []string{d.managerLog, d.receiverLog}
	for _, p := range d.providers {
		f := p.fake()
		secrets["the "+p.fake().title+" "+p.fake().credentialName] = f.credential
		for name, r := range f.regs {
			secrets[name+"'s signing secret"] = r.secret
		}
		paths = append(paths, f.log)
	}
	for _, path := range paths {
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for what, secret := range secrets {
			if secret != "" && bytes.Contains(b, []byte(secret)) {
				return fmt.Errorf("%s appears in %s", what, path)
			}
		}
		d.info("%s: %d lines, no credential or signing secret", filepath.Base(path), bytes.Count(b, []byte("\n")))
	}
	return nil
}

// --- cleanup and summary

func (d *demo) cleanup() error {
	var errs []error
	procs := []*proc{d.mgr, d.rcv}
	for _, p := range d.providers {
		procs = append(procs, p.fake().proc)
	}
	for _, p := range procs {
		if p == nil {
			continue
		}
		if status, err := p.Stop(stopTimeout); err != nil {
			errs = append(errs, err)
		} else {
			d.info("%s stopped (%s)", p.Name, status)
		}
	}
	if d.nats != nil {
		d.nats.stop()
		d.info("nats-server stopped")
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
		d.block(childproc.Tail(l.path, lines))
	}
}

func (d *demo) summary() string {
	var per []string
	creates, deletes := 0, 0
	for _, p := range d.providers {
		f := p.fake()
		per = append(per, fmt.Sprintf("%d %s", len(f.subs), p.fake().title))
		creates += f.creates
		deletes += f.deletes
	}
	return fmt.Sprintf("%d subscriptions (%s) registered exactly once (%d creates), %d events delivered to the sink exactly once out of %d signed deliveries, %s, 0 creates after a manager restart, %s, %d registrations deleted with the subscriptions",
		len(d.subs), strings.Join(per, ", "), creates, d.burstEvents, d.burstSent, d.fanOut, d.recoverySummary(), deletes)
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

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }
