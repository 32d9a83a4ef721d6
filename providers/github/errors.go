package github

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-resty/resty/v2"

	"github.com/hookwarden/hookwarden/providers"
)

// operation is what a classified response answered; a 404 means different things for each.
type operation int

const (
	opList operation = iota
	opCreate
	opUpdate
	opDelete
	opPing
	opDeliveries
	opRedeliver
)

// errorBody is GitHub's error envelope (basic-error and validation-error).
type errorBody struct {
	Message string `json:"message"`
	Errors  []struct {
		Resource string `json:"resource"`
		Field    string `json:"field"`
		Code     string `json:"code"`
		Message  string `json:"message"`
	} `json:"errors"`
	DocumentationURL string `json:"documentation_url"`
}

// classify turns a response that is not the expected success into a *providers.Error whose
// message never contains the token. It reads the status code itself: Go clients that only
// classify 403s (go-github) miss GitHub's 429s.
//
//nolint:funlen // one case per status GitHub answers with
func (c *Client) classify(resp *resty.Response, op operation) error {
	status := resp.StatusCode()
	h := resp.Header()
	out := &providers.Error{StatusCode: status, RequestID: h.Get("X-GitHub-Request-Id")}

	body := bytes.TrimSpace(resp.Body())
	var eb errorBody
	isJSON := len(body) > 0 && json.Unmarshal(body, &eb) == nil
	msg := eb.Message
	for _, e := range eb.Errors {
		switch {
		case e.Message != "":
			msg += "; " + e.Message
		case e.Field != "":
			msg += "; " + e.Field + " " + e.Code
		}
	}
	if msg == "" {
		msg = http.StatusText(status)
	}

	remaining := strings.TrimSpace(h.Get("X-RateLimit-Remaining"))
	retryAfter, hasRetryAfter := providers.ParseRetryAfter(h.Get("Retry-After"), c.now())
	limited := status == http.StatusForbidden || status == http.StatusTooManyRequests
	switch {
	case limited && remaining == "0":
		// Primary limit: nothing before x-ratelimit-reset (and retry-after, if also sent).
		out.Kind = providers.RateLimited
		out.RetryAfter = max(retryAfter, untilReset(h.Get("X-RateLimit-Reset"), c.now()))
		out.Message = c.redact("primary rate limit of the token exhausted: " + msg)
		return out
	case limited && (hasRetryAfter || status == http.StatusTooManyRequests ||
		strings.Contains(strings.ToLower(eb.Message), "secondary rate limit")):
		// Without retry-after, RetryAfter stays zero: the reconciler backs off by
		// secondaryBackoff, from a minute.
		out.Kind = providers.RateLimited
		out.RetryAfter = retryAfter
		out.Message = c.redact("secondary rate limit: " + msg)
		return out
	}

	if len(body) > 0 && !isJSON {
		out.Kind = providers.Transient
		what := "a body that is not JSON"
		if looksHTML(body) {
			what = "an HTML page (a proxy or an outage, not GitHub's API)"
		}
		out.Message = "GitHub answered HTTP " + strconv.Itoa(status) + " with " + what
		return out
	}

	switch {
	case status >= 300 && status < 400:
		out.Kind = providers.Permanent
		out.Message = c.redact("GitHub answered HTTP " + strconv.Itoa(status) + " (moved to " + h.Get("Location") +
			"): the repository or organization was renamed or transferred; update the subscription's github block")
	case status == http.StatusUnauthorized && c.app != nil:
		out.Kind = providers.Unauthorized
		out.Message = "GitHub refused the App's JSON web token (" + msg + "): the App ID and the private key must belong to one App, " +
			"and this machine's clock must be within a minute of GitHub's"
	case status == http.StatusUnauthorized:
		out.Kind = providers.Unauthorized
		out.Message = c.redact("GitHub refused the token (" + msg + "): it is wrong, expired or revoked")
	case status == http.StatusForbidden:
		out.Kind = providers.Unauthorized
		out.Message = c.redact("GitHub refused the request (" + msg + "): " + c.grantHint(h, true))
	case status == http.StatusNotFound && (op == opList || op == opCreate):
		out.Kind = providers.NotFound
		out.Message = c.redact(c.targetNotFound(h))
	case status == http.StatusNotFound && op == opRedeliver:
		out.Kind = providers.NotFound
		out.Message = c.redact("the delivery or its hook is not found on " + c.target + " (" + msg + "): GitHub no longer keeps it")
	case status == http.StatusNotFound:
		out.Kind = providers.NotFound
		out.Message = c.redact("hook not found on " + c.target + " (" + msg + ")")
	case status == http.StatusUnprocessableEntity && op == opRedeliver:
		// GitHub refuses to redeliver (past its window, or a delivery it cannot send again).
		out.Kind = providers.Permanent
		out.Message = c.redact("GitHub refused the redelivery: " + msg)
	case status == http.StatusUnprocessableEntity && strings.Contains(strings.ToLower(msg), "already exists"):
		out.Kind = providers.AlreadyExists
		out.Message = c.redact(msg)
	case status == http.StatusUnprocessableEntity && strings.Contains(strings.ToLower(msg), "cannot have more than"):
		out.Kind = providers.QuotaExceeded
		out.Message = c.redact(msg)
	case status >= 400 && status < 500:
		out.Kind = providers.Permanent
		out.Message = c.redact(msg)
	default:
		out.Kind = providers.Transient
		out.Message = c.redact(msg)
	}
	return out
}

// targetNotFound explains a 404 on the target's hook collection: GitHub answers 404, not 403,
// both for a target that does not exist and for one the token may not see or administer.
func (c *Client) targetNotFound(h http.Header) string {
	what := "repository " + strings.TrimPrefix(c.target, "repos/")
	if c.org {
		what = "organization " + strings.TrimPrefix(c.target, "orgs/")
	}
	return "GitHub answered 404 for the hooks of " + what + ": it does not exist, or the token cannot administer its hooks; " + c.grantHint(h, false)
}

// grantHint names what the token needs (documented per endpoint on docs.github.com), and what
// GitHub's headers said it has and accepts.
func (c *Client) grantHint(h http.Header, includeAccepted bool) string {
	var s string
	if c.org {
		s = `a classic token needs the admin:org_hook scope and its user must be an owner of the organization; ` +
			`a fine-grained token or GitHub App needs the organization permission "Webhooks" (read and write)`
	} else {
		s = `a classic token needs the admin:repo_hook (or repo) scope and its user admin rights on the repository; ` +
			`a fine-grained token or GitHub App needs the repository permission "Webhooks" (read and write)`
	}
	if scopes, ok := h["X-Oauth-Scopes"]; ok {
		s += "; the token's scopes: [" + strings.Join(scopes, ", ") + "]"
		if accepted := h.Get("X-Accepted-Oauth-Scopes"); accepted != "" {
			s += ", accepted here: [" + accepted + "]"
		}
	}
	if p := h.Get("X-Accepted-Github-Permissions"); p != "" && includeAccepted {
		s += "; GitHub asks for " + p
	}
	return s
}

// networkError classifies a request that got no response (network, timeout, cancelled).
func (c *Client) networkError(err error) error {
	var pe *providers.Error
	if errors.As(err, &pe) {
		return pe
	}
	return &providers.Error{Kind: providers.Transient, Message: c.redact("request failed: " + err.Error())}
}

func untilReset(v string, now time.Time) time.Duration {
	secs, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil {
		return 0
	}
	return max(time.Unix(secs, 0).Sub(now), 0)
}

func looksHTML(b []byte) bool {
	head := strings.ToLower(string(b[:min(len(b), 512)]))
	return strings.HasPrefix(head, "<!doctype html") || strings.HasPrefix(head, "<html") || strings.Contains(head, "<body")
}

// redact removes the token from s.
func (c *Client) redact(s string) string {
	if c.token == "" {
		return s
	}
	return strings.ReplaceAll(s, c.token, "[redacted]")
}

// invalid reports a problem with the caller's input, found before any request is sent.
func invalid(msg string) error {
	return &providers.Error{Kind: providers.Permanent, Message: msg}
}
