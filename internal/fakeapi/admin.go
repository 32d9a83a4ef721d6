package fakeapi

import (
	"encoding/json"
	"io"
	"net/http"
	"time"
)

// Helpers for the admin routes (/_fake/...) the fake binaries serve to shells and the demo.

// DecodeJSON reads a small JSON request body into v, refusing unknown fields.
func DecodeJSON(r *http.Request, v any) error {
	dec := json.NewDecoder(io.LimitReader(r.Body, 1<<20))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// NonNil returns s, or an empty slice for nil, so a JSON answer is [] rather than null.
func NonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// ClockRoutes serves GET /_fake/clock ({"now": ...}) and POST /_fake/clock ({"advance":"96h"}:
// move the fake's clock forward, answered with the new time), so a script can say "four days
// later".
func ClockRoutes(mux *http.ServeMux, now func() time.Time, advance func(time.Duration)) {
	type answer struct {
		Now time.Time `json:"now"`
	}
	mux.HandleFunc("GET /_fake/clock", func(w http.ResponseWriter, r *http.Request) {
		WriteJSON(w, http.StatusOK, answer{Now: now().UTC()})
	})
	mux.HandleFunc("POST /_fake/clock", func(w http.ResponseWriter, r *http.Request) {
		var c struct {
			Advance string `json:"advance"`
		}
		err := DecodeJSON(r, &c)
		var d time.Duration
		if err == nil {
			d, err = time.ParseDuration(c.Advance)
		}
		if err != nil || d < 0 {
			WriteJSON(w, http.StatusBadRequest, map[string]string{"error": `want {"advance":"96h"} (a Go duration, not negative)`})
			return
		}
		advance(d)
		WriteJSON(w, http.StatusOK, answer{Now: now().UTC()})
	})
}
