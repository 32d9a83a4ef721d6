package store

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden/receiver/store/storetest"
)

// BenchmarkSQLiteClaimBatch measures ClaimBatch on SQLite (WAL, synchronous=FULL) for batch
// sizes the Batcher forms, with 1 KiB payloads, without replay keys (Stripe) and with them
// (GitHub). ns/op is per batch; µs/event divides it.
func BenchmarkSQLiteClaimBatch(b *testing.B) {
	payload := []byte(`{"id":"evt","object":"event","data":` + strings.Repeat(`"x"`, 320) + `}`)
	for _, c := range []struct {
		size   int
		replay bool
	}{{1, false}, {4, false}, {16, false}, {64, false}, {1, true}, {16, true}, {64, true}} {
		size := c.size
		b.Run(fmt.Sprintf("batch=%d/replay-keys=%t", size, c.replay), func(b *testing.B) {
			s, err := OpenSQLite(storetest.SQLitePath(b))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			ctx := b.Context()
			batch := make([]Event, size)
			n := 0
			cpu0 := processCPU()
			for b.Loop() {
				for i := range batch {
					n++
					batch[i] = event("default/bench-hooks", fmt.Sprintf("evt_1OzHkLF2eZvKYlo2C%010d", n), t0)
					batch[i].Payload = payload
					if c.replay {
						batch[i].ReplayKey = fmt.Sprintf("%064x", n)
					}
				}
				if _, err := s.ClaimBatch(ctx, batch); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(n), "µs/event")
			b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(n), "cpu-µs/event")
		})
	}
}

// processCPU is the user + system CPU time of this process so far: fsync waits do not count.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
