package charts_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hookwarden/hookwarden/internal/testtier"
	"github.com/hookwarden/hookwarden/providers/stripe/fake"
)

// heapAlloc is the manager's live heap: Go's heap profile with gc=1 collects first, and its
// debug=1 form ends with runtime.MemStats.
var heapAlloc = regexp.MustCompile(`(?m)^# HeapAlloc = (\d+)$`)

func liveHeap(t *testing.T, pprofAddr string) int64 {
	t.Helper()
	least := int64(-1)
	// The least of three: a collection in between drops what a request left behind.
	for range 3 {
		code, body, err := httpGet("http://"+pprofAddr+"/debug/pprof/heap?gc=1&debug=1", "")
		if err != nil || code != http.StatusOK {
			t.Fatalf("heap profile: %d %v", code, err)
		}
		m := heapAlloc.FindStringSubmatch(body)
		if m == nil {
			t.Fatalf("no HeapAlloc in the heap profile")
		}
		n, _ := strconv.ParseInt(m[1], 10, 64)
		if least < 0 || n < least {
			least = n
		}
	}
	return least
}

const mib = 1 << 20

// The manager's memory does not grow with Secrets it has no business with. The issue saw 300
// unrelated 256 KiB Secrets take the manager from 37 to 144 MiB (it cached every Secret of the
// cluster); it now watches Secrets by their metadata only and reads the few it needs. The
// manager is the real binary, as the chart's ServiceAccount, reconciling a subscription; a
// rotated credential still re-triggers it (and, arriving on the same watch after the 300, shows
// they have all been seen).
func TestManagerHeapIgnoresUnrelatedSecrets(t *testing.T) {
	testtier.RequiresServers(t, "helm, the image binaries and a control plane (envtest)")
	install(t)
	ctx := context.Background()
	for _, ns := range []string{"heap", "bulk"} {
		ensureNamespace(t, ns)
	}
	stripe := fake.New()
	apiURL, stopStripe := stripe.Start()
	defer stopStripe()
	firstKey, rotatedKey := "sk_test_heap_"+randHex(), "sk_test_heap_rotated_"+randHex()
	credentials(t, "heap", firstKey)
	kubectl(t, subscriptionYAML("heap", "orders", apiURL), "apply", "-f", "-")

	kc, _ := saKubeconfig(t, "hw-system", "hw-hookwarden-manager")
	probe, pprof := freeAddr(t), freeAddr(t)
	mgr := start(t, "manager", nil, "--kubeconfig", kc, "--leader-elect=false", "--metrics-bind-address=0",
		"--health-probe-bind-address="+probe, "--pprof-bind-address="+pprof)
	eventually(t, 60*time.Second, "manager /readyz", wantStatus("http://"+probe+"/readyz", "", http.StatusOK))
	waitReady(t, "heap", "orders")
	before := liveHeap(t, pprof)

	const n, size = 300, 256 << 10
	bulk := kube.CoreV1().Secrets("bulk")
	t.Cleanup(func() {
		_ = bulk.DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{})
	})
	var wg sync.WaitGroup
	errs := make(chan error, n)
	sem := make(chan struct{}, 8)
	for i := range n {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			data := make([]byte, size)
			_, _ = rand.Read(data)
			_, err := bulk.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("unrelated-%03d", i)}, Data: map[string][]byte{"blob": data}}, metav1.CreateOptions{})
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("creating the unrelated Secrets: %v", err)
		}
	}

	// The credential rotated: the subscription registers at the new key's account.
	sec, err := kube.CoreV1().Secrets("heap").Get(ctx, "stripe-api", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sec.Data = map[string][]byte{"apiKey": []byte(rotatedKey)}
	if _, err := kube.CoreV1().Secrets("heap").Update(ctx, sec, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "the rotated credential re-triggers the subscription", func() error {
		if eps := stripe.Endpoints(rotatedKey); len(eps) != 1 {
			return fmt.Errorf("%d endpoints on the rotated key's account, want 1", len(eps))
		}
		return nil
	})
	after := liveHeap(t, pprof)
	growth := after - before
	t.Logf("REPORT manager heap (live, after GC): %.1f MiB before, %.1f MiB after %d unrelated Secrets of %d KiB (%.0f MiB) were added: %+.1f MiB",
		float64(before)/mib, float64(after)/mib, n, size>>10, float64(n*size)/mib, float64(growth)/mib)
	// Caching them would add at least their size; metadata of 300 objects is well under 1 MiB.
	if limit := int64(n*size) / 8; growth > limit {
		t.Errorf("the manager's heap grew by %.1f MiB with %.0f MiB of Secrets it does not use (limit %.1f MiB): it caches them", float64(growth)/mib, float64(n*size)/mib, float64(limit)/mib)
	}

	kubectl(t, nil, "-n", "heap", "delete", "whsub", "orders", "--wait=true", "--timeout=60s")
	mgr.stop()
}
