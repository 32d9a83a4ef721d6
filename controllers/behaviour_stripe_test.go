package controllers

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden/providers"
	"github.com/hookwarden/hookwarden/providers/stripe"
	"github.com/hookwarden/hookwarden/providers/stripe/fake"
)

func TestBehaviourStripe(t *testing.T) {
	srv := fake.New(fake.WithPageSize(3), fake.WithMaxEndpoints(100))
	base, stop := srv.Start()
	t.Cleanup(stop)
	var n atomic.Int64
	runBehaviourSuite(t, behaviourProvider{
		name:   "stripe",
		events: []string{"invoice.paid", "checkout.session.completed", "charge.refunded"},
		newAccount: func(t *testing.T) behaviourAccount {
			key := fmt.Sprintf("sk_test_behaviour_%d_%d", n.Add(1), time.Now().UnixNano())
			c, err := stripe.New(providers.Config{APIURL: base, Credential: key, Timeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			return &stripeAccount{srv: srv, key: key, client: c}
		},
	})
}

type stripeAccount struct {
	srv    *fake.Server
	key    string
	client providers.Client
}

func (a *stripeAccount) Client() providers.Client { return a.client }
func (a *stripeAccount) PageSize() int            { return 3 }

func (a *stripeAccount) Seed(t *testing.T, url string, events []string) string {
	return a.srv.Seed(a.key, fake.Endpoint{URL: url, EnabledEvents: events}).ID
}

func (a *stripeAccount) IDs(t *testing.T) []string {
	var ids []string
	for _, e := range a.srv.Endpoints(a.key) {
		ids = append(ids, e.ID)
	}
	return ids
}

func (a *stripeAccount) RateLimitNext(t *testing.T, retryAfter time.Duration) {
	a.srv.Inject(fake.Fault{Status: 429, Code: "rate_limit", Message: "Too many requests hit the API too quickly.", RetryAfter: retryAfter, Times: 1})
}
