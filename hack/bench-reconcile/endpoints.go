package main

import (
	"errors"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
)

// endpoints are the subscribers' webhook URLs, served by the bench: a healthy fleet, whose
// endpoints answer the manager's check before a recovery run (GET) and take recovered events
// (POST, 202), as a receiver would. URLs nobody answers would make every recovery run fail
// early and hide what a run costs.
type endpoints struct {
	URL            string // base URL; subscription i's is URL + "/bench/" + subName(i)
	probes, events atomic.Int64
	srv            *http.Server
}

func startEndpoints() (*endpoints, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	e := &endpoints{URL: "http://" + ln.Addr().String()}
	e.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/bench/") {
			http.NotFound(w, r)
			return
		}
		switch r.Method {
		case http.MethodGet, http.MethodHead:
			e.probes.Add(1)
			w.WriteHeader(http.StatusOK)
		case http.MethodPost:
			e.events.Add(1)
			w.WriteHeader(http.StatusAccepted)
		default:
			w.WriteHeader(http.StatusMethodNotAllowed)
		}
	})}
	go func() {
		if err := e.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			panic(err)
		}
	}()
	return e, nil
}

func (e *endpoints) subURL(i int) string { return e.URL + "/bench/" + subName(i) }

func (e *endpoints) stop() { _ = e.srv.Close() }
