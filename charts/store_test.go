package charts_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/hookwarden/hookwarden/internal/testtier"
	"github.com/hookwarden/hookwarden/receiver/store/storetest"
)

// The receiver runs on Redis exactly as the chart wires it: the arguments it renders, the DSN
// in HOOKWARDEN_STORE (from the DSN Secret), the password in the file its Secret volume holds,
// against a real redis-server that requires that password. Only the listen addresses and the
// file's directory are the test's.
func TestReceiverOnRedisAsRendered(t *testing.T) {
	testtier.RequiresServers(t, "helm, the image binaries and a control plane (envtest)")
	install(t)
	const password = "chart-redis-pw"
	rd := storetest.StartRedis(t, append(storetest.DurableRedis(), "requirepass", password)...)

	r := render(t, "hw", "hw-system", "receiver.store.type=redis", "receiver.store.redis.dsnSecret.name=hw-redis",
		"receiver.store.redis.passwordSecret.name=hw-redis-pw", "receiver.replicas=2", "metrics.secure=false")
	d := r.find("Deployment", "hw-hookwarden-receiver")
	cs, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	mounts, _, _ := unstructured.NestedSlice(cs[0].(map[string]any), "volumeMounts")
	if len(mounts) != 1 {
		t.Fatalf("receiver volume mounts %v, want the password Secret's", mounts)
	}
	mountPath := mounts[0].(map[string]any)["mountPath"].(string)
	vols, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "volumes")
	items := vols[0].(map[string]any)["secret"].(map[string]any)["items"].([]any)
	file := items[0].(map[string]any)["path"].(string)

	// The Secret volume, as the kubelet would lay it out.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, file), []byte(password), 0o400); err != nil {
		t.Fatal(err)
	}
	var args []string
	for _, a := range containerArgs(t, d) {
		args = append(args, strings.Replace(a, mountPath, dir, 1))
	}
	if !strings.Contains(strings.Join(args, " "), "--store-password-file="+filepath.Join(dir, file)) {
		t.Fatalf("rendered args %v do not read the mounted password", args)
	}
	kc, _ := saKubeconfig(t, "hw-system", "hw-hookwarden-receiver")
	bind, metrics, probe := freeAddr(t), freeAddr(t), freeAddr(t)
	// The DSN as its Secret holds it: no password in it.
	start(t, "receiver", []string{"HOOKWARDEN_STORE=" + rd.URL() + "/0?prefix=chart" + randHex(), "KUBECONFIG=" + kc},
		append(args, "--bind-address="+bind, "--metrics-bind-address="+metrics, "--health-probe-bind-address="+probe)...)
	eventually(t, 60*time.Second, "receiver /readyz on Redis", wantStatus("http://"+probe+"/readyz", "", http.StatusOK))
	_, body, err := httpGet("http://"+metrics+"/metrics", "")
	if err != nil {
		t.Fatal(err)
	}
	want := `hookwarden_receiver_store_promise{promise="strict",store="redis"} 1`
	if !strings.Contains(body, want) {
		t.Errorf("the receiver's metrics lack %s", want)
	}
	t.Logf("REPORT chart redis store: receiver ready on a password-protected Redis with the rendered args %s", strings.Join(args, " "))
}
