package store

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/hookwarden/hookwarden/internal/testtier"
	"github.com/hookwarden/hookwarden/receiver/store/storetest"
)

// cluster is the package's Redis Cluster, started once (three nodes take seconds to join);
// each test gets its own key prefix on it. clusterErr says why there is none.
var (
	cluster    *storetest.RedisCluster
	clusterErr error
)

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "hookwarden-store-cluster-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	flag.Parse()
	if testtier.Short() {
		testtier.SkippingSetup("receiver/store", "the package's Redis Cluster")
		return m.Run()
	}
	cluster, clusterErr = storetest.NewRedisCluster(dir, storetest.DurableRedis()...)
	if cluster != nil {
		defer cluster.Stop()
	}
	return m.Run()
}

// clusterDSN is the package's cluster with a fresh key prefix.
func clusterDSN(t *testing.T) string {
	t.Helper()
	testtier.RequiresServers(t, "a Redis Cluster")
	if clusterErr != nil {
		if errors.Is(clusterErr, storetest.ErrNoRedis) && os.Getenv("CI") != "true" {
			t.Skip("SKIPPED, NOT PASSED: ", clusterErr)
		}
		t.Fatalf("the package's Redis Cluster: %v", clusterErr)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	return cluster.URL() + "&prefix=hwtest-" + hex.EncodeToString(b[:])
}
