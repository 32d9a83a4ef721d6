package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/hookwarden/hookwarden/cli"
	"github.com/hookwarden/hookwarden/internal/testtier"
	"github.com/hookwarden/hookwarden/receiver"
)

// sink records each delivery's Idempotency-Key; it fails while failing is set.
type sink struct {
	mu      sync.Mutex
	failing bool
	keys    []string // every request
	ok      []string // the requests answered 200
}

func (s *sink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := r.Header.Get("Idempotency-Key")
	s.keys = append(s.keys, k)
	if s.failing {
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	s.ok = append(s.ok, k)
}

func (s *sink) set(failing bool) { s.mu.Lock(); s.failing = failing; s.mu.Unlock() }
func (s *sink) delivered() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.ok...)
}
func (s *sink) requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.keys...)
}

// TestDeadLetters: a real receiver (handler, ledger on SQLite or on Redis, delivery pool)
// dead-letters an event its sink refused; its admin API, on a metrics server that authenticates
// and authorizes as the receiver's does (TokenReview, SubjectAccessReview against envtest, the
// ClusterRoles of config/rbac), lists it to a viewer, refuses the viewer a replay, and replays it
// for an admin: the sink then gets it once, with the Idempotency-Key of the refused attempt. A
// purged one is never delivered, its redelivery by the provider is still a duplicate, and the
// ledger shows it purged.
func TestDeadLetters(t *testing.T) {
	testtier.RequiresServers(t, "a control plane (envtest) and the fakes")
	for _, kind := range []string{"sqlite", "redis"} {
		t.Run(kind, func(t *testing.T) { testDeadLetters(t, kind) })
	}
}

func testDeadLetters(t *testing.T, kind string) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tn := newTenant(t, g, "deadletters-"+kind)

	snk := &sink{failing: true}
	sinkSrv := httptest.NewServer(snk)
	defer sinkSrv.Close()
	st := openStore(ctx, t, g, kind)
	rig := newReceiverRig(ctx, t, g, st, receiver.Route{Namespace: tn.ns, Name: "orders", UID: "uid-orders", Provider: "stripe",
		Secrets: [][]byte{[]byte("whsec_deadletters")}, Sinks: receiver.OneHTTPSink(sinkSrv.URL), MaxAttempts: 1})
	viewer, adminTok := tokenFor(t, g, tn.ns, "dl-viewer", "deadletters-viewer"), tokenFor(t, g, tn.ns, "dl-admin", "deadletters-admin")
	dl := func(token string, args ...string) (int, string, string) {
		return rig.command(t, "deadletters", token, args...)
	}
	post := func(id string) int { return rig.post(g, id) }
	g.Expect(post("evt_dead_1")).To(BeNumerically("<", 300))
	g.Eventually(func(g Gomega) {
		jobs, err := st.DeadLetters(ctx, 10)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(jobs).To(HaveLen(1))
	}).Should(Succeed())
	refusedKeys := snk.requests()
	g.Expect(refusedKeys).To(HaveLen(1))

	g.Eventually(func() int { code, _, _ := dl(viewer, "list"); return code }).WithTimeout(30 * time.Second).Should(Equal(cli.ExitOK)) // the server is up
	code, stdout, stderr := dl(viewer, "list")
	g.Expect(code).To(Equal(cli.ExitOK), stderr)
	g.Expect(stdout).To(MatchRegexp(`(?m)^ID\s+SUBSCRIPTION\s+EVENT\s+TYPE\s+ATTEMPTS\s+RECEIVED\s+LAST-ERROR$`))
	g.Expect(stdout).To(ContainSubstring(tn.ns + "/orders  evt_dead_1  invoice.paid  1"))
	id := strings.Fields(strings.Split(stdout, "\n")[1])[0]
	code, stdout, _ = dl(viewer, "show", id)
	g.Expect(code).To(Equal(cli.ExitOK))
	g.Expect(stdout).To(ContainSubstring("eventID: evt_dead_1"))

	// A viewer may not replay; an unknown id is bad input; no token is refused.
	code, _, stderr = dl(viewer, "replay", id)
	g.Expect(code).To(Equal(cli.ExitError))
	g.Expect(stderr).To(ContainSubstring("403 Forbidden: the token's user may not post /deadletters/"))
	g.Expect(stderr).To(ContainSubstring("the ClusterRoles deadletters-viewer and deadletters-admin grant it"))
	code, _, stderr = dl(adminTok, "replay", "999999")
	g.Expect(code).To(Equal(cli.ExitUsage), stderr)
	g.Expect(snk.delivered()).To(BeEmpty())

	// Replayed for an admin: delivered once, with the key of the refused attempt.
	snk.set(false)
	code, stdout, stderr = dl(adminTok, "replay", id)
	g.Expect(code).To(Equal(cli.ExitOK), stderr)
	g.Expect(stdout).To(Equal("replayed " + id + "\n"))
	g.Eventually(snk.delivered).Should(Equal(refusedKeys))
	g.Eventually(func() (int, error) { return st.Depth(ctx) }).Should(BeZero())
	code, stdout, _ = dl(viewer, "list")
	g.Expect(code).To(Equal(cli.ExitOK))
	g.Expect(stdout).NotTo(ContainSubstring("evt_dead_1"))
	g.Expect(snk.delivered()).To(HaveLen(1))

	// Purged: never delivered, and the provider's redelivery is a duplicate.
	snk.set(true)
	g.Expect(post("evt_dead_2")).To(BeNumerically("<", 300))
	var purgeID string
	g.Eventually(func(g Gomega) {
		jobs, err := st.DeadLetters(ctx, 10)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(jobs).To(HaveLen(1))
		purgeID = strconv.FormatInt(jobs[0].ID, 10)
	}).Should(Succeed())
	code, stdout, stderr = dl(adminTok, "purge", purgeID)
	g.Expect(code).To(Equal(cli.ExitOK), stderr)
	g.Expect(stdout).To(Equal("purged " + purgeID + "\n"))
	jobs, err := st.DeadLetters(ctx, 10)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(jobs).To(BeEmpty())
	code, _, stderr = dl(adminTok, "purge", purgeID)
	g.Expect(code).To(Equal(cli.ExitUsage), stderr) // no longer a dead letter: 404
	snk.set(false)
	requestsBefore := len(snk.requests())
	g.Expect(post("evt_dead_2")).To(BeNumerically("<", 300))
	g.Expect(st.Depth(ctx)).To(BeZero())
	g.Expect(snk.requests()).To(HaveLen(requestsBefore))
	g.Expect(snk.delivered()).To(HaveLen(1))
	eventsViewer := tokenFor(t, g, tn.ns, "dl-events-viewer", "events-viewer")
	code, stdout, stderr = rig.command(t, "events", eventsViewer, "show", tn.ns+"/orders", "evt_dead_2")
	g.Expect(code).To(Equal(cli.ExitOK), stderr)
	g.Expect(stdout).To(ContainSubstring("state: purged"))
	g.Expect(stdout).NotTo(ContainSubstring("deliveredAt"))
	g.Expect(stdout).To(ContainSubstring("lastError: purged from the dead letters"))

	if kind == "sqlite" { // finding the receiver does not depend on its store
		reachThroughTheAPIServer(t, g, tn.ns, rig.addr, viewer)
	}
}

// reachThroughTheAPIServer: without --receiver, deadletters finds the receiver's Service by its
// label and port-forwards to a ready pod behind it. envtest has no kubelet, so the test's
// PortForward stands in for the tunnel (to the receiver at addr) and records what the command
// asked for: the discovery (Service, EndpointSlice, pod, port) and the request are the
// command's. A 401 says whether a token was sent, not which ClusterRole to bind.
func reachThroughTheAPIServer(t *testing.T, g *WithT, ns, addr, viewer string) {
	ctx := context.Background()
	var forwarded []string
	o := cli.Options{PortForward: func(_ context.Context, cfg *rest.Config, namespace, pod string, port int32) (string, func(), error) {
		forwarded = append(forwarded, fmt.Sprintf("%s/%s:%d", namespace, pod, port))
		return addr, func() {}, nil
	}}
	code, _, stderr := runFirst(t, o, "deadletters", "list", "--receiver-token-file", viewer)
	g.Expect(code).To(Equal(cli.ExitError))
	g.Expect(stderr).To(ContainSubstring("no receiver Service (label app.kubernetes.io/name=hookwarden-receiver) in the cluster: pass --receiver URL"))

	labels := map[string]string{"app.kubernetes.io/name": "hookwarden-receiver"}
	g.Expect(env.Client.Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hookwarden-receiver", Labels: labels},
		Spec: corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Name: "hooks", Port: 80}, {Name: "metrics", Port: 8443}}}})).To(Succeed())
	ready, notReady := true, false
	g.Expect(env.Client.Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: "hookwarden-receiver-x1", Labels: map[string]string{discoveryv1.LabelServiceName: "hookwarden-receiver"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{
			{Addresses: []string{"10.0.0.8"}, Conditions: discoveryv1.EndpointConditions{Ready: &notReady}, TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "receiver-a-starting"}},
			{Addresses: []string{"10.0.0.9"}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}, TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "receiver-b-ready"}},
		},
		Ports: []discoveryv1.EndpointPort{{Name: ptr.To("hooks"), Port: ptr.To[int32](8080)}, {Name: ptr.To("metrics"), Port: ptr.To[int32](8443)}},
	})).To(Succeed())

	code, stdout, stderr := runFirst(t, o, "deadletters", "list", "--receiver-token-file", viewer)
	g.Expect(code).To(Equal(cli.ExitOK), stderr)
	g.Expect(stdout).To(MatchRegexp(`(?m)^ID\s+SUBSCRIPTION`))
	g.Expect(stderr).To(ContainSubstring(fmt.Sprintf("reaching the receiver %s/hookwarden-receiver (port metrics) through a port-forward to pod receiver-b-ready", ns)))
	g.Expect(forwarded).To(Equal([]string{ns + "/receiver-b-ready:8443"}))

	// The kubeconfig authenticates with a client certificate: no token to send.
	code, _, stderr = runFirst(t, o, "deadletters", "list")
	g.Expect(code).To(Equal(cli.ExitError))
	g.Expect(stderr).To(ContainSubstring("401 Unauthorized: no bearer token was sent (the kubeconfig authenticates without one): pass --receiver-token-file"))
	g.Expect(stderr).NotTo(ContainSubstring("ClusterRole"))
	// A token of this cluster's shape that its TokenReview refuses (the viewer's, its signature
	// altered), as an expired or revoked one is.
	tok, err := os.ReadFile(viewer)
	g.Expect(err).NotTo(HaveOccurred())
	tampered := strings.TrimSpace(string(tok))
	tampered = tampered[:len(tampered)-4] + "AAAA"
	bogus := filepath.Join(t.TempDir(), "bogus.token")
	g.Expect(os.WriteFile(bogus, []byte(tampered), 0o600)).To(Succeed())
	code, _, stderr = runFirst(t, o, "deadletters", "list", "--receiver-token-file", bogus)
	g.Expect(code).To(Equal(cli.ExitError))
	g.Expect(stderr).To(ContainSubstring("it refused the token from --receiver-token-file (its TokenReview does not accept it"))
	g.Expect(stderr).NotTo(ContainSubstring("ClusterRole"))

	// The default tunnel asks the API server for a port-forward to that pod, with the
	// kubeconfig's credentials; envtest, without a kubelet (nor the pod), refuses it.
	log := &requestLog{}
	code, _, stderr = runFirst(t, cli.Options{WrapConfig: log.wrap}, "deadletters", "list", "--receiver-token-file", viewer)
	g.Expect(code).To(Equal(cli.ExitError))
	g.Expect(stderr).To(ContainSubstring(fmt.Sprintf("port-forward to the receiver's pod %s/receiver-b-ready", ns)))
	g.Expect(log.all()).To(ContainElement(fmt.Sprintf("POST /api/v1/namespaces/%s/pods/receiver-b-ready/portforward", ns)))

	// --receiver still overrides: no Service, no forward.
	before := len(forwarded)
	code, _, stderr = runFirst(t, o, "deadletters", "list", "--receiver", "https://"+addr, "--receiver-token-file", viewer, "--receiver-insecure-skip-tls-verify")
	g.Expect(code).To(Equal(cli.ExitOK), stderr)
	g.Expect(forwarded).To(HaveLen(before))
}

// tokenFor makes a ServiceAccount bound to the ClusterRole of config/rbac named role (prefixed
// as kustomize does not: the test creates it under its own name) and returns a file with its token.
func tokenFor(t *testing.T, g *WithT, ns, name, role string) string {
	t.Helper()
	ctx := context.Background()
	cr := clusterRoleFromConfig(t, g, role)
	cr.Name = ns + "-" + role
	_ = env.Client.Create(ctx, cr)
	g.Expect(env.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})).To(Succeed())
	g.Expect(env.Client.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + name},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: cr.Name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: name}}})).To(Succeed())
	cs, err := kubernetes.NewForConfig(env.Config)
	g.Expect(err).NotTo(HaveOccurred())
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	path := filepath.Join(t.TempDir(), name+".token")
	g.Expect(os.WriteFile(path, []byte(tr.Status.Token), 0o600)).To(Succeed())
	return path
}

func clusterRoleFromConfig(t *testing.T, g *WithT, name string) *rbacv1.ClusterRole {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "..", "config", "rbac", "metrics_auth_role.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	defer f.Close()
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	for {
		var cr rbacv1.ClusterRole
		if err := dec.Decode(&cr); err != nil {
			t.Fatalf("ClusterRole %s not in config/rbac/metrics_auth_role.yaml: %v", name, err)
		}
		if cr.Kind == "ClusterRole" && cr.Name == name {
			return &cr
		}
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
