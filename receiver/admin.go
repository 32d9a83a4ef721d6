package receiver

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/hookwarden/hookwarden/receiver/adminapi"
	"github.com/hookwarden/hookwarden/receiver/store"
)

// AdminPath is where the admin API is served (adminapi.DeadLettersPath, which documents its
// routes and their authorization).
const AdminPath = adminapi.DeadLettersPath

// Admin serves the dead-letter and ledger admin API over the store.
type Admin struct {
	Store store.Store
	// Routes, when set, lets a replay check its sink and say where the retention ends.
	Routes *Routes
	Now    func() time.Time
}

// DeadLetter is one dead-lettered delivery as the admin API returns it.
type DeadLetter = adminapi.DeadLetter

// Handlers are the admin API's routes, for metricsserver.Options.ExtraHandlers.
func (a *Admin) Handlers() map[string]http.Handler {
	events := http.HandlerFunc(a.serveEvents)
	return map[string]http.Handler{AdminPath: a, AdminPath + "/": a, adminapi.EventsPath: events, adminapi.EventsPath + "/": events}
}

// adminScan bounds the dead letters one list (or lookup by id) reads.
const adminScan = 10000

func (a *Admin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rest := strings.Trim(strings.TrimPrefix(r.URL.Path, AdminPath), "/")
	parts := strings.Split(rest, "/")
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	if rest == "" && r.Method == http.MethodGet {
		a.list(ctx, w, r)
		return
	}
	id, err := strconv.ParseInt(parts[0], 10, 64)
	if err != nil || len(parts) > 2 {
		adminError(w, http.StatusNotFound, "no such admin path")
		return
	}
	switch {
	case len(parts) == 1 && r.Method == http.MethodGet:
		j, ok, err := a.find(ctx, id)
		switch {
		case err != nil:
			adminError(w, http.StatusInternalServerError, err.Error())
		case !ok:
			adminError(w, http.StatusNotFound, "no dead letter "+parts[0])
		default:
			adminJSON(w, http.StatusOK, deadLetter(j, true))
		}
	case len(parts) == 2 && parts[1] == "replay" && r.Method == http.MethodPost:
		err := a.Store.Replay(ctx, id, a.now())
		a.answer(w, id, "replayed", err)
	case len(parts) == 2 && parts[1] == "purge" && r.Method == http.MethodPost:
		p, ok := a.Store.(store.Purger)
		if !ok {
			adminError(w, http.StatusNotImplemented, "this store cannot purge dead letters")
			return
		}
		a.answer(w, id, "purged", p.Purge(ctx, id, a.now()))
	default:
		adminError(w, http.StatusMethodNotAllowed, "unsupported method or path")
	}
}

// list answers GET /deadletters.
func (a *Admin) list(ctx context.Context, w http.ResponseWriter, r *http.Request) {
	limit := 100
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 || n > adminScan {
			adminError(w, http.StatusBadRequest, "limit must be 1.."+strconv.Itoa(adminScan))
			return
		}
		limit = n
	}
	jobs, err := a.Store.DeadLetters(ctx, limit)
	if err != nil {
		adminError(w, http.StatusInternalServerError, err.Error())
		return
	}
	out := make([]DeadLetter, 0, len(jobs))
	for _, j := range jobs {
		if sub := r.URL.Query().Get("subscription"); sub != "" && j.Event.Subscription != sub {
			continue
		}
		if sink := r.URL.Query().Get("sink"); sink != "" && j.Sink != sink {
			continue
		}
		out = append(out, deadLetter(j, false))
	}
	adminJSON(w, http.StatusOK, out)
}

func (a *Admin) answer(w http.ResponseWriter, id int64, done string, err error) {
	switch {
	case errors.Is(err, store.ErrNotDead):
		adminError(w, http.StatusNotFound, "no dead letter "+strconv.FormatInt(id, 10))
	case err != nil:
		adminError(w, http.StatusInternalServerError, err.Error())
	default:
		adminJSON(w, http.StatusOK, adminapi.Result{ID: id, Result: done})
	}
}

func (a *Admin) find(ctx context.Context, id int64) (store.Job, bool, error) {
	jobs, err := a.Store.DeadLetters(ctx, adminScan)
	if err != nil {
		return store.Job{}, false, err
	}
	for _, j := range jobs {
		if j.ID == id {
			return j, true, nil
		}
	}
	return store.Job{}, false, nil
}

func (a *Admin) now() time.Time {
	if a.Now == nil {
		return time.Now()
	}
	return a.Now()
}

func deadLetter(j store.Job, withPayload bool) DeadLetter {
	d := DeadLetter{ID: j.ID, Subscription: j.Event.Subscription, Sink: j.Sink, EventID: j.Event.EventID, EventType: j.Event.EventType, Attempts: j.Attempt,
		ReceivedAt: j.Event.ReceivedAt.UTC(), LastError: j.LastError, ContentType: j.Event.ContentType}
	if withPayload {
		d.Payload = jsonPayload(j.Event.Payload)
	}
	return d
}

func adminJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func adminError(w http.ResponseWriter, status int, msg string) {
	adminJSON(w, status, adminapi.Error{Error: msg})
}
