// Package accounttest holds what tests of a provider account share: an in-memory provider
// client that counts calls and fails on demand, a settable clock, the shipped REST profiles.
package accounttest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden/providers"
)

// FakeClient is a minimal in-memory provider account that counts calls and can fail the
// next call of one operation.
type FakeClient struct {
	Caps   providers.Capabilities
	Regs   []providers.Registration
	Calls  map[string]int
	FailOn map[string]error // operation -> error returned once
	NextID int
	// order is every call, "Op id" in the order made.
	Order []string
	// replays answer a create with this key with the registration (secret included), as a
	// provider that replays creates by idempotency key does.
	Replays map[string]providers.Registration
}

// NewFakeClient holds regs (copied) on a provider with markers.
func NewFakeClient(regs ...providers.Registration) *FakeClient {
	regs = append([]providers.Registration(nil), regs...) // never alias the caller's slice
	return &FakeClient{Caps: providers.Capabilities{Markers: true}, Regs: regs, Calls: map[string]int{}, FailOn: map[string]error{}}
}

var _ providers.Client = (*FakeClient)(nil)

// Capabilities are Caps.
func (f *FakeClient) Capabilities() providers.Capabilities { return f.Caps }

// Fail counts and logs one call of op, and returns the error FailOn holds for op (once).
func (f *FakeClient) Fail(op string, id ...string) error {
	f.Calls[op]++
	f.Order = append(f.Order, strings.TrimSpace(op+" "+strings.Join(id, "")))
	if err, ok := f.FailOn[op]; ok {
		delete(f.FailOn, op)
		return err
	}
	return nil
}

// List returns a copy of Regs.
func (f *FakeClient) List(context.Context) ([]providers.Registration, error) {
	if err := f.Fail("List"); err != nil {
		return nil, err
	}
	return append([]providers.Registration(nil), f.Regs...), nil
}

// Create adds a registration (or replays one by key).
func (f *FakeClient) Create(_ context.Context, d providers.Desired, key string) (providers.Registration, error) {
	if err := f.Fail("Create", key); err != nil {
		return providers.Registration{}, err
	}
	if r, ok := f.Replays[key]; ok {
		return r, nil
	}
	f.NextID++
	r := providers.Registration{
		ID: fmt.Sprintf("we_new%d", f.NextID), URL: d.URL, Events: d.Events, Description: d.Description,
		Disabled: d.Disabled, Owner: d.Owner, CreateKey: key,
	}
	f.Regs = append(f.Regs, r)
	r.Secret = "whsec_" + r.ID // only the create response carries the secret
	return r, nil
}

// Update changes a registration in place.
func (f *FakeClient) Update(_ context.Context, id string, d providers.Desired) (providers.Registration, error) {
	if err := f.Fail("Update", id); err != nil {
		return providers.Registration{}, err
	}
	for i := range f.Regs {
		if f.Regs[i].ID == id {
			r := &f.Regs[i]
			r.URL, r.Events, r.Description, r.Disabled, r.Owner = d.URL, d.Events, d.Description, d.Disabled, d.Owner
			return *r, nil
		}
	}
	return providers.Registration{}, &providers.Error{Kind: providers.NotFound, Message: "no such endpoint " + id}
}

// Delete removes a registration.
func (f *FakeClient) Delete(_ context.Context, id string) error {
	if err := f.Fail("Delete", id); err != nil {
		return err
	}
	for i := range f.Regs {
		if f.Regs[i].ID == id {
			f.Regs = append(f.Regs[:i:i], f.Regs[i+1:]...)
			break
		}
	}
	return nil
}

// Clock is a settable clock.
type Clock struct{ T time.Time }

// Now is the clock's time.
func (c *Clock) Now() time.Time { return c.T }

// Advance moves the clock on by d.
func (c *Clock) Advance(d time.Duration) { c.T = c.T.Add(d) }

// RestProfile is the shipped REST profile name (config/samples/rest), read from a test of a
// package one level below the module root.
func RestProfile(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "config", "samples", "rest", name+".profile.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}
