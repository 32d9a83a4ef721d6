package cli

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hookwarden/hookwarden/receiver/adminapi"
)

// Reaching the receiver's metrics listener (its /metrics and admin API): --receiver URL, or, by
// default, the receiver's Service found through the API server (the label the chart and the
// kustomize base give it) and a port-forward to a ready pod behind it, made with the
// kubeconfig's own credentials.
//
// Not the API server's service proxy: it authenticates the caller and then drops the
// Authorization header (k8s.io/apiserver's authentication filter), so a receiver running
// --metrics-secure would see every request without a token. A port-forward is a tunnel: the
// bearer token reaches the receiver, which checks it (TokenReview, SubjectAccessReview).

// receiverLabel selects the receiver's Service (config/receiver/service.yaml, the chart's).
const (
	receiverLabelKey, receiverLabelValue = "app.kubernetes.io/name", "hookwarden-receiver"
	receiverLabel                        = receiverLabelKey + "=" + receiverLabelValue
)

// receiverPort is the name of the Service's metrics port.
const receiverPort = "metrics"

// PortForwardFunc forwards a local port to port of pod (kubectl port-forward) and returns the
// local address (host:port); stop closes it.
type PortForwardFunc func(ctx context.Context, cfg *rest.Config, namespace, pod string, port int32) (addr string, stop func(), err error)

// receiverFlags reach the receiver's metrics listener (its /metrics and admin API).
type receiverFlags struct {
	url         string
	service     string
	tokenFile   string
	insecureTLS bool
}

// receiverConn is the receiver as one command reaches it.
type receiverConn struct {
	base   string
	client *http.Client
	token  string
	// tokenFrom says where the token came from ("" when none was sent).
	tokenFrom string
	stop      func()
}

// connectReceiver reaches the receiver: --receiver, else through the API server.
func (g *globals) connectReceiver(ctx context.Context, errOut io.Writer, f *receiverFlags) (*receiverConn, error) {
	conn := &receiverConn{client: &http.Client{}, stop: func() {}} // bounded by --timeout (ctx)
	if f.tokenFile != "" {
		tok, err := os.ReadFile(f.tokenFile)
		if err != nil {
			return nil, usageError("--receiver-token-file: %v", err)
		}
		conn.token, conn.tokenFrom = strings.TrimSpace(string(tok)), "--receiver-token-file"
	}
	insecure := f.insecureTLS
	if f.url != "" {
		if _, err := url.Parse(f.url); err != nil {
			return nil, usageError("--receiver: %v", err)
		}
		conn.base = strings.TrimRight(f.url, "/")
	} else {
		cfg, err := g.kube.ToRESTConfig()
		if err != nil {
			return nil, usageError("kubeconfig: %v", err)
		}
		c, err := g.cluster()
		if err != nil {
			return nil, err
		}
		t, err := findReceiver(ctx, c, f.service)
		if err != nil {
			return nil, err
		}
		forward := g.opts.PortForward
		if forward == nil {
			forward = spdyPortForward
		}
		g.progress(errOut, "reaching the receiver %s/%s (port %s) through a port-forward to pod %s", t.namespace, t.service, receiverPort, t.pod)
		addr, stop, err := forward(ctx, cfg, t.namespace, t.pod, t.podPort)
		if err != nil {
			return nil, fmt.Errorf("port-forward to the receiver's pod %s/%s: %w (or pass --receiver URL)", t.namespace, t.pod, err)
		}
		conn.base, conn.stop = t.scheme+"://"+addr, stop
		// The tunnel's far end is the pod the API server chose: its self-signed certificate
		// names no address a tunnel can check.
		insecure = true
		if conn.token == "" {
			conn.token, conn.tokenFrom = bearerToken(cfg), "the kubeconfig"
			if conn.token == "" {
				conn.tokenFrom = ""
			}
		}
	}
	if insecure {
		conn.client.Transport = &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec // asked for by flag, or a port-forward's far end
	}
	return conn, nil
}

// bearerToken is the kubeconfig's own bearer token ("" when it authenticates otherwise: a
// client certificate, an exec plugin).
func bearerToken(cfg *rest.Config) string {
	if cfg.BearerToken != "" {
		return cfg.BearerToken
	}
	if cfg.BearerTokenFile != "" {
		if b, err := os.ReadFile(cfg.BearerTokenFile); err == nil {
			return strings.TrimSpace(string(b))
		}
	}
	return ""
}

// receiverTarget is the receiver's Service and the pod a port-forward reaches it through.
type receiverTarget struct {
	namespace, service string
	scheme             string
	pod                string
	podPort            int32
}

// findReceiver finds the receiver's Service (service "NAMESPACE/NAME", else by its label in
// every namespace, or in the namespace when the caller may not list them all) and a ready pod
// behind its metrics port.
func findReceiver(ctx context.Context, c *cluster, service string) (receiverTarget, error) {
	svc, err := receiverService(ctx, c, service)
	if err != nil {
		return receiverTarget{}, err
	}
	t := receiverTarget{namespace: svc.Namespace, service: svc.Name, scheme: "http"}
	var port *corev1.ServicePort
	for i := range svc.Spec.Ports {
		if svc.Spec.Ports[i].Name == receiverPort {
			port = &svc.Spec.Ports[i]
		}
	}
	if port == nil {
		return t, fmt.Errorf("the receiver Service %s/%s has no port named %q (pass --receiver URL)", svc.Namespace, svc.Name, receiverPort)
	}
	if (port.AppProtocol != nil && *port.AppProtocol == "https") || port.Port == 443 || port.Port == 8443 {
		t.scheme = "https" // --metrics-secure: the chart's and the kustomize base's 8443
	}
	var slices discoveryv1.EndpointSliceList
	if err := c.client.List(ctx, &slices, client.InNamespace(svc.Namespace), client.MatchingLabels{discoveryv1.LabelServiceName: svc.Name}); err != nil {
		return t, kubeError("listing the EndpointSlices of the receiver Service "+svc.Namespace+"/"+svc.Name, err)
	}
	type candidate struct {
		pod  string
		port int32
	}
	var ready []candidate
	for _, s := range slices.Items {
		var p int32
		for _, sp := range s.Ports {
			if sp.Name != nil && *sp.Name == receiverPort && sp.Port != nil {
				p = *sp.Port
			}
		}
		for _, e := range s.Endpoints {
			if p == 0 || e.TargetRef == nil || e.TargetRef.Kind != "Pod" || (e.Conditions.Ready != nil && !*e.Conditions.Ready) {
				continue
			}
			ready = append(ready, candidate{pod: e.TargetRef.Name, port: p})
		}
	}
	if len(ready) == 0 {
		return t, fmt.Errorf("the receiver Service %s/%s has no ready pod (kubectl get pods -n %s -l %s)", svc.Namespace, svc.Name, svc.Namespace, receiverLabel)
	}
	sort.Slice(ready, func(i, j int) bool { return ready[i].pod < ready[j].pod })
	t.pod, t.podPort = ready[0].pod, ready[0].port
	return t, nil
}

func receiverService(ctx context.Context, c *cluster, service string) (*corev1.Service, error) {
	if service != "" {
		ns, name, ok := strings.Cut(service, "/")
		if !ok || ns == "" || name == "" {
			return nil, usageError("--receiver-service %q: want NAMESPACE/NAME", service)
		}
		var svc corev1.Service
		if err := c.client.Get(ctx, nsName(ns, name), &svc); err != nil {
			return nil, notFoundIsUsage(kubeError("reading the receiver Service "+service, err), err)
		}
		return &svc, nil
	}
	sel := client.MatchingLabels{receiverLabelKey: receiverLabelValue}
	var list corev1.ServiceList
	err := c.client.List(ctx, &list, sel)
	if apierrors.IsForbidden(err) {
		err = c.client.List(ctx, &list, client.InNamespace(c.namespace), sel)
	}
	if err != nil {
		return nil, kubeError("finding the receiver Service ("+receiverLabel+")", err)
	}
	switch len(list.Items) {
	case 0:
		return nil, fmt.Errorf("no receiver Service (label %s) in the cluster: pass --receiver URL", receiverLabel)
	case 1:
		return &list.Items[0], nil
	}
	names := make([]string, 0, len(list.Items))
	for _, s := range list.Items {
		names = append(names, s.Namespace+"/"+s.Name)
	}
	sort.Strings(names)
	return nil, usageError("%d receiver Services (%s): pass --receiver-service NAMESPACE/NAME", len(names), strings.Join(names, ", "))
}

// spdyPortForward is kubectl port-forward's: a tunnel through the API server with the
// kubeconfig's credentials (pods/portforward), on a free loopback port.
func spdyPortForward(ctx context.Context, cfg *rest.Config, namespace, pod string, port int32) (string, func(), error) {
	rt, upgrader, err := spdy.RoundTripperFor(cfg)
	if err != nil {
		return "", nil, err
	}
	u, err := url.Parse(strings.TrimRight(cfg.Host, "/") + cfg.APIPath)
	if err != nil {
		return "", nil, err
	}
	u = u.JoinPath("api", "v1", "namespaces", namespace, "pods", pod, "portforward")
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: rt}, http.MethodPost, u)
	stopCh, readyCh := make(chan struct{}), make(chan struct{})
	var errOut strings.Builder
	fw, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{"0:" + strconv.Itoa(int(port))}, stopCh, readyCh, io.Discard, &errOut)
	if err != nil {
		return "", nil, err
	}
	done := make(chan error, 1)
	go func() { done <- fw.ForwardPorts() }()
	select {
	case <-readyCh:
	case err := <-done:
		return "", nil, fmt.Errorf("%v %s", err, strings.TrimSpace(errOut.String()))
	case <-ctx.Done():
		close(stopCh)
		return "", nil, ctx.Err()
	}
	ports, err := fw.GetPorts()
	if err != nil || len(ports) == 0 {
		close(stopCh)
		return "", nil, fmt.Errorf("port-forward: no local port: %v", err)
	}
	stop := func() {
		close(stopCh)
		<-done //nolint:errcheck // the tunnel's own ending once the calls are made: nothing left to report it to
	}
	return "127.0.0.1:" + strconv.Itoa(int(ports[0].Local)), stop, nil
}

// call sends one admin request and decodes the JSON answer into out.
func (r *receiverConn) call(ctx context.Context, method, path string, out any) error {
	body, err := r.get(ctx, method, path)
	if err != nil {
		return err
	}
	return json.Unmarshal(body, out)
}

// get sends one request to the receiver's metrics listener and returns the body of a 200
// answer; any other answer is an error that says what to do about it.
func (r *receiverConn) get(ctx context.Context, method, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, r.base+path, nil)
	if err != nil {
		return nil, usageError("--receiver: %v", err)
	}
	if r.token != "" {
		req.Header.Set("Authorization", "Bearer "+r.token)
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("reaching the receiver: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("reading the receiver's answer: %w", err)
	}
	if resp.StatusCode == http.StatusOK {
		return body, nil
	}
	var e struct{ Error string }
	msg := strings.TrimSpace(string(body))
	if json.Unmarshal(body, &e) == nil && e.Error != "" {
		msg = e.Error
	}
	// controller-runtime's authentication filter (the receiver's --metrics-secure) answers 401
	// to a request without a token, and 500 "Authentication failed" to a token its
	// TokenReview refuses.
	refused := resp.StatusCode == http.StatusInternalServerError && msg == "Authentication failed"
	switch {
	case resp.StatusCode == http.StatusNotFound, resp.StatusCode == http.StatusBadRequest, resp.StatusCode == http.StatusGone:
		return nil, usageError("the receiver answered %s: %s", resp.Status, msg)
	case resp.StatusCode == http.StatusUnauthorized, refused:
		if r.tokenFrom == "" {
			return nil, fmt.Errorf("the receiver answered %s: no bearer token was sent (the kubeconfig authenticates without one): pass --receiver-token-file", resp.Status)
		}
		return nil, fmt.Errorf("the receiver answered %s: it refused the token from %s (its TokenReview does not accept it: expired, revoked or of another cluster)", resp.Status, r.tokenFrom)
	case resp.StatusCode == http.StatusForbidden:
		return nil, fmt.Errorf("the receiver answered %s: the token's user may not %s %s (%s)", resp.Status, strings.ToLower(method), req.URL.Path, grantedBy(req.URL.Path))
	}
	return nil, fmt.Errorf("the receiver answered %s: %s", resp.Status, msg)
}

// grantedBy names the ClusterRoles of config/rbac that grant a path of the metrics listener.
func grantedBy(path string) string {
	for _, admin := range []string{adminapi.DeadLettersPath, adminapi.EventsPath} {
		if strings.HasPrefix(path, admin) {
			stem := strings.TrimPrefix(admin, "/")
			return "the ClusterRoles " + stem + "-viewer and " + stem + "-admin grant it"
		}
	}
	return "the ClusterRole metrics-reader grants it"
}
