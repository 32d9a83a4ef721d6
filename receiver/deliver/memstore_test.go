package deliver

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/hookwarden/hookwarden/receiver/store"
)

// memStore is an in-memory store.Store for pool tests. It fences reports like the real stores:
// Complete, Retry and Dead apply only to the current attempt of a running job.
type memStore struct {
	mu        sync.Mutex
	nextID    int64
	jobs      map[int64]*store.Job
	seen      map[[2]string]int64 // (subscription, event id) -> job id
	leaseNows []time.Time         // the now of every Lease call, in order
	leased    []int               // how many jobs each Lease call took, in order
	released  int                 // Release calls that gave a job back
	// recordGate, when set, holds every Complete, Retry, Release and Dead until it is closed.
	recordGate chan struct{}
}

var _ store.Store = (*memStore)(nil)

func newMemStore() *memStore {
	return &memStore{jobs: map[int64]*store.Job{}, seen: map[[2]string]int64{}}
}

func (s *memStore) ClaimBatch(_ context.Context, events []store.Event) ([]bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	dup := make([]bool, len(events))
	for i, ev := range events {
		key := [2]string{ev.Subscription, ev.EventID}
		if _, ok := s.seen[key]; ok {
			dup[i] = true
			continue
		}
		ev.Payload = slices.Clone(ev.Payload)
		sinks := ev.Sinks
		if len(sinks) == 0 {
			sinks = []string{store.DefaultSink}
		}
		ev.Sinks = nil
		for _, sink := range sinks {
			s.nextID++
			s.jobs[s.nextID] = &store.Job{ID: s.nextID, Event: ev, Sink: sink, State: store.StatePending, RunAt: ev.ReceivedAt}
		}
		s.seen[key] = s.nextID
	}
	return dup, nil
}

func (s *memStore) Lease(_ context.Context, n int, now time.Time, lease time.Duration) ([]store.Job, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.leaseNows = append(s.leaseNows, now)
	var due []*store.Job
	for _, j := range s.jobs {
		switch j.State {
		case store.StatePending, store.StateRetryable:
			if !j.RunAt.After(now) {
				due = append(due, j)
			}
		case store.StateRunning:
			if j.LeaseUntil.Before(now) { // expired
				due = append(due, j)
			}
		}
	}
	slices.SortFunc(due, func(a, b *store.Job) int {
		if c := a.RunAt.Compare(b.RunAt); c != 0 {
			return c
		}
		return int(a.ID - b.ID)
	})
	var out []store.Job
	s.leased = append(s.leased, min(n, len(due)))
	for _, j := range due[:min(n, len(due))] {
		j.State = store.StateRunning
		j.LeaseUntil = now.Add(lease)
		j.Attempt++
		out = append(out, copyJob(j))
	}
	return out, nil
}

// current returns the stored job if j is its current lease, fenced like the SQL stores on
// state, attempt and lease end. The caller holds s.mu, taken after the record gate.
func (s *memStore) current(j store.Job) (*store.Job, error) {
	cur, ok := s.jobs[j.ID]
	if !ok || cur.State != store.StateRunning || cur.Attempt != j.Attempt || !cur.LeaseUntil.Equal(j.LeaseUntil) {
		return nil, store.ErrLeaseLost
	}
	return cur, nil
}

func (s *memStore) Complete(_ context.Context, j store.Job, _ time.Time) error {
	s.waitGate()
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, err := s.current(j)
	if err != nil {
		return err
	}
	cur.State = store.StateCompleted
	return nil
}

func (s *memStore) Retry(_ context.Context, j store.Job, at time.Time, lastErr string) error {
	s.waitGate()
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, err := s.current(j)
	if err != nil {
		return err
	}
	cur.State, cur.RunAt, cur.LastError = store.StateRetryable, at, lastErr
	return nil
}

func (s *memStore) Release(_ context.Context, j store.Job, at time.Time, reason string) error {
	s.waitGate()
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, err := s.current(j)
	if err != nil {
		return err
	}
	cur.State, cur.RunAt, cur.LastError = store.StateRetryable, at, reason
	cur.Attempt--
	s.released++
	return nil
}

func (s *memStore) Dead(_ context.Context, j store.Job, lastErr string) error {
	s.waitGate()
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, err := s.current(j)
	if err != nil {
		return err
	}
	cur.State, cur.LastError = store.StateDead, lastErr
	return nil
}

func (s *memStore) DeadLetters(_ context.Context, limit int) ([]store.Job, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []store.Job
	for _, j := range s.jobs {
		if j.State == store.StateDead {
			out = append(out, copyJob(j))
		}
	}
	slices.SortFunc(out, func(a, b store.Job) int { return int(a.ID - b.ID) })
	return out[:min(limit, len(out))], nil
}

func (s *memStore) Replay(_ context.Context, jobID int64, now time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	j, ok := s.jobs[jobID]
	if !ok || j.State != store.StateDead {
		return errors.New("no such dead job")
	}
	j.State, j.Attempt, j.RunAt = store.StatePending, 0, now
	return nil
}

func (s *memStore) Sweep(_ context.Context, cutoff time.Time) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for id, j := range s.jobs {
		if (j.State == store.StateCompleted || j.State == store.StateDead) && j.Event.ReceivedAt.Before(cutoff) {
			delete(s.jobs, id)
			delete(s.seen, [2]string{j.Event.Subscription, j.Event.EventID})
			n++
		}
	}
	return n, nil
}

func (s *memStore) Ping(context.Context) error { return nil }

func (s *memStore) Depth(context.Context) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, j := range s.jobs {
		if j.State != store.StateCompleted && j.State != store.StateDead {
			n++
		}
	}
	return n, nil
}

// SinkDepths is not modelled: the pool never calls it (the store contract tests cover it).
func (s *memStore) SinkDepths(context.Context) ([]store.SinkDepth, error) {
	return nil, errors.New("memStore: SinkDepths is not modelled")
}

func (s *memStore) Close() error { return nil }

// waitGate waits for recordGate, when set.
func (s *memStore) waitGate() {
	s.mu.Lock()
	gate := s.recordGate
	s.mu.Unlock()
	if gate != nil {
		<-gate
	}
}

// leases returns how many jobs each Lease call that found any took.
func (s *memStore) leases() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []int
	for _, n := range s.leased {
		if n > 0 {
			out = append(out, n)
		}
	}
	return out
}

// releases returns how many jobs were given back.
func (s *memStore) releases() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.released
}

// running tells whether the job of the test subscription's event id is leased.
func (s *memStore) running(eventID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	j, ok := s.jobs[s.seen[[2]string{testEvent().Subscription, eventID}]]
	return ok && j.State == store.StateRunning
}

// job returns a snapshot of one job.
func (s *memStore) job(id int64) store.Job {
	s.mu.Lock()
	defer s.mu.Unlock()
	if j, ok := s.jobs[id]; ok {
		return copyJob(j)
	}
	return store.Job{}
}

// leasedAtOrAfter tells whether some Lease call ran with now >= t.
func (s *memStore) leasedAtOrAfter(t time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.ContainsFunc(s.leaseNows, func(n time.Time) bool { return !n.Before(t) })
}

func copyJob(j *store.Job) store.Job {
	c := *j
	c.Event.Payload = slices.Clone(j.Event.Payload)
	return c
}
