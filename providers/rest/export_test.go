package rest

import "net/http"

// SetTransport lets tests reach a TLS fake (an https base URL built from parameters) with a
// transport that trusts its certificate.
func SetTransport(c *Client, rt http.RoundTripper) { c.http.SetTransport(rt) }
