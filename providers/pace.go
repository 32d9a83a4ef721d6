package providers

import (
	"context"
	"net/http"
)

// PacedTransport is next (http.DefaultTransport when nil) with pace called before every
// request (Config.Pace); a nil pace returns next unchanged.
func PacedTransport(pace func(context.Context) error, next http.RoundTripper) http.RoundTripper {
	if next == nil {
		next = http.DefaultTransport
	}
	if pace == nil {
		return next
	}
	return pacedTransport{pace: pace, next: next}
}

type pacedTransport struct {
	pace func(context.Context) error
	next http.RoundTripper
}

func (t pacedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := t.pace(req.Context()); err != nil {
		if req.Body != nil {
			_ = req.Body.Close() // RoundTrip must close the body, even on error
		}
		return nil, err
	}
	return t.next.RoundTrip(req)
}
