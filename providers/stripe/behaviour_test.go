package stripe_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden/providers"
	"github.com/hookwarden/hookwarden/providers/providerstest"
	"github.com/hookwarden/hookwarden/providers/stripe"
	"github.com/hookwarden/hookwarden/providers/stripe/fake"
)

// TestMain prints the behaviour suite's matrix (case × provider) after the package's tests.
func TestMain(m *testing.M) { providerstest.BehaviourMain(m) }

// stripeAccount is one API key on the Stripe fake, with a v1 or a v2 client.
type stripeAccount struct {
	srv    *fake.Server
	key    string
	v2     bool
	client providers.Client
}

func (a *stripeAccount) Client() providers.Client { return a.client }
func (a *stripeAccount) PageSize() int            { return 3 }

// Seed makes a v1 endpoint in the dashboard, or a v2 destination in Workbench with the payload
// the client manages.
func (a *stripeAccount) Seed(t *testing.T, url string, events []string) string {
	if !a.v2 {
		return a.srv.Seed(a.key, fake.Endpoint{URL: url, EnabledEvents: events}).ID
	}
	payload := a.client.Capabilities().Variant[len("v2/"):]
	return a.srv.SeedDestination(a.key, fake.Destination{URL: url, EnabledEvents: events, EventPayload: payload}).ID
}

func (a *stripeAccount) IDs(t *testing.T) []string {
	var ids []string
	for _, e := range a.srv.Endpoints(a.key) {
		ids = append(ids, e.ID)
	}
	for _, d := range a.srv.Destinations(a.key) {
		ids = append(ids, d.ID)
	}
	return ids
}

func (a *stripeAccount) RateLimitNext(t *testing.T, retryAfter time.Duration) {
	a.srv.Inject(fake.Fault{Status: 429, Code: "rate_limit", Message: "Too many requests hit the API too quickly.", RetryAfter: retryAfter, APIKey: a.key, Times: 1})
}

// TestBehaviourStripe runs the behaviour suite against v1 endpoints and both kinds of v2
// destination, each account a fresh key on one fake (v2 behind the description's check).
func TestBehaviourStripe(t *testing.T) {
	for _, tc := range []struct {
		name, settings string
		events         []string
	}{
		{"v1", "", []string{"invoice.paid", "checkout.session.completed", "charge.refunded"}},
		{"v2 thin", thinSettings, []string{"v1.billing.meter.error_report_triggered", "v1.billing.meter.no_meter_found", "v2.core.event_destination.ping"}},
		{"v2 snapshot", snapshotSettings, []string{"invoice.paid", "checkout.session.completed", "charge.refunded"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newV2Env(t, fake.WithPageSize(3), fake.WithMaxEndpoints(100))
			var n atomic.Int64
			providerstest.RunBehaviour(t, providerstest.Provider{
				Name:   "stripe " + tc.name,
				Events: tc.events,
				NewAccount: func(t *testing.T) providerstest.Account {
					key := fmt.Sprintf("sk_test_behaviour_%d", n.Add(1))
					c, err := stripe.Factory().New(providers.Config{APIURL: e.base, Credential: key, Settings: []byte(tc.settings), Timeout: 5 * time.Second})
					if err != nil {
						t.Fatal(err)
					}
					return &stripeAccount{srv: e.srv, key: key, v2: tc.settings != "", client: c}
				},
			})
		})
	}
}
