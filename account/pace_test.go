package account

import (
	"context"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"golang.org/x/time/rate"

	"github.com/hookwarden/hookwarden/internal/telemetry"
)

// A provider request's span says how long it waited for its credential's pace, when it waited:
// a token at hand is no wait.
func TestPacedRecordsTheWaitOnTheRequestSpan(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	tr := telemetry.New(tp)
	bucket := rate.NewLimiter(rate.Every(50*time.Millisecond), 1)
	for range 2 {
		ctx, span := tr.Start(context.Background(), "GET", 0)
		if err := paced(ctx, bucket); err != nil {
			t.Fatal(err)
		}
		span.End()
	}
	spans := exp.GetSpans()
	if len(spans) != 2 {
		t.Fatalf("%d spans", len(spans))
	}
	wait := func(i int) (float64, bool) {
		for _, a := range spans[i].Attributes {
			if a.Key == telemetry.AttrRateLimitWait {
				return a.Value.AsFloat64(), true
			}
		}
		return 0, false
	}
	if w, ok := wait(0); ok {
		t.Errorf("the first request, its token at hand, reports a wait of %gs", w)
	}
	if w, ok := wait(1); !ok || w < 0.01 {
		t.Errorf("the second request waited for its token (~50 ms) and reports %gs (%v)", w, ok)
	}
}
