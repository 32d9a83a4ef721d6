package fake

import (
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// A GitHub App's webhook, as GitHub's REST description gives it (apps/get-webhook-config-for-app,
// apps/update-webhook-config-for-app, apps/list-webhook-deliveries, apps/get-webhook-delivery,
// apps/redeliver-webhook-delivery, apps/get-authenticated) and its docs on App JWTs:
//
//   - every /app route wants "Authorization: Bearer <JWT>": RS256, signed with the App's
//     private key, iss the App's id (a number) or its client ID, iat in the past (GitHub allows
//     for a minute of skew), exp in the future and no more than 10 minutes ahead. Anything else
//     is 401 with GitHub's words for it; a token is 401 "A JSON web token could not be decoded".
//   - the App has exactly one webhook: GET /app/hook/config shows {content_type, insecure_ssl,
//     url, secret: "********" when set}; PATCH changes what it is sent (url, content_type,
//     secret, insecure_ssl); there is no create, list or delete.
//   - events are set in the App's settings only: GET /app shows them, nothing writes them.
//   - the delivery log, the delivery and the redelivery are those of repository hooks, under
//     /app/hook/deliveries; deliveries carry X-GitHub-Hook-Installation-Target-Type
//     "integration".

// KindApp is a GitHub App's target kind (its deliveries' installation target type).
const KindApp = "Integration"

// OpApp, OpAppConfig and OpAppConfigUpdate are the App routes of the request log.
const (
	OpApp             = "app"
	OpAppConfig       = "app-config"
	OpAppConfigUpdate = "app-config-update"
)

// appKey is the target key of App id.
func appKey(id int64) string { return "app/" + strconv.FormatInt(id, 10) }

// AppTarget names App id's webhook for Deliver, Emit, Edit and DeliveryLog.
func AppTarget(id int64) string { return appKey(id) }

// App is a GitHub App as the fake holds it.
type app struct {
	id       int64
	clientID string
	key      *rsa.PublicKey
	events   []string
}

// AddApp registers GitHub App id (and its client ID) with the public half of its key and the
// events its settings subscribe to. Its webhook starts without a URL, content_type json and
// insecure_ssl "0"; it returns the webhook's hook id (for Deliver and DeliveryLog).
func (s *Server) AddApp(id int64, clientID string, key *rsa.PublicKey, events ...string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.apps[strconv.FormatInt(id, 10)] = &app{id: id, clientID: clientID, key: key, events: events}
	if clientID != "" {
		s.apps[clientID] = s.apps[strconv.FormatInt(id, 10)]
	}
	s.nextHookID++
	tg := &target{kind: KindApp, owner: strconv.FormatInt(id, 10), id: id}
	tg.hooks = []*Hook{{ID: s.nextHookID, Active: true, Events: events, Config: Config{ContentType: "json", InsecureSSL: "0"},
		CreatedAt: s.now(), UpdatedAt: s.now(), LastResponse: LastResponse{Status: "unused"}}}
	s.targets[appKey(id)] = tg
	return s.nextHookID
}

// AppHook is App id's webhook as stored, secret included.
func (s *Server) AppHook(id int64) Hook {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.targets[appKey(id)].hooks[0].clone()
}

// SetAppEvents changes the events in the App's settings, as its owner would.
func (s *Server) SetAppEvents(id int64, events ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.apps[strconv.FormatInt(id, 10)].events = events
	s.targets[appKey(id)].hooks[0].Events = events
}

// parseAppRoute reads /app, /app/hook/config and /app/hook/deliveries[/{id}[/attempts]].
func parseAppRoute(method, p string, rt *route) bool {
	segs := strings.Split(strings.TrimPrefix(p, "/"), "/")
	switch {
	case len(segs) == 1 && segs[0] == "app" && method == http.MethodGet:
		rt.op = OpApp
	case len(segs) == 3 && segs[0] == "app" && segs[1] == "hook" && segs[2] == "config" && method == http.MethodGet:
		rt.op = OpAppConfig
	case len(segs) == 3 && segs[0] == "app" && segs[1] == "hook" && segs[2] == "config" && method == http.MethodPatch:
		rt.op = OpAppConfigUpdate
	case len(segs) >= 3 && segs[0] == "app" && segs[1] == "hook" && hookSubroute(rt, segs[2:]) && rt.deliveries:
		switch {
		case rt.deliveryID == 0 && method == http.MethodGet:
			rt.op = OpDeliveries
		case !rt.attempts && rt.deliveryID != 0 && method == http.MethodGet:
			rt.op = OpDelivery
		case rt.attempts && method == http.MethodPost:
			rt.op = OpRedeliver
		}
	default:
		return false
	}
	rt.kind = KindApp
	return rt.op != ""
}

// jwtClaims are the claims GitHub reads from an App's JWT.
type jwtClaims struct {
	IAT json.Number     `json:"iat"`
	EXP json.Number     `json:"exp"`
	ISS json.RawMessage `json:"iss"`
}

// appFromJWT finds the App that signed tok, or GitHub's 401 message.
func (s *Server) appFromJWT(tok string) (*app, string) {
	const undecodable = "A JSON web token could not be decoded"
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return nil, undecodable
	}
	hb, err1 := base64.RawURLEncoding.DecodeString(parts[0])
	cb, err2 := base64.RawURLEncoding.DecodeString(parts[1])
	sig, err3 := base64.RawURLEncoding.DecodeString(parts[2])
	var h struct {
		Alg string `json:"alg"`
	}
	var c jwtClaims
	if err1 != nil || err2 != nil || err3 != nil || json.Unmarshal(hb, &h) != nil || json.Unmarshal(cb, &c) != nil || h.Alg != "RS256" {
		return nil, undecodable
	}
	var iss string
	if json.Unmarshal(c.ISS, &iss) != nil {
		var n json.Number
		if json.Unmarshal(c.ISS, &n) != nil {
			return nil, "'Issuer' claim ('iss') must be an Integer or a client ID"
		}
		iss = n.String()
	}
	a := s.apps[iss]
	digest := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if a == nil || rsa.VerifyPKCS1v15(a.key, crypto.SHA256, digest[:], sig) != nil {
		return nil, undecodable
	}
	iat, err1 := c.IAT.Int64()
	exp, err2 := c.EXP.Int64()
	now := s.now()
	switch {
	case err1 != nil || time.Unix(iat, 0).After(now.Add(time.Minute)):
		return nil, "'Issued at' claim ('iat') must be an Integer representing a time in the past"
	case err2 != nil || !time.Unix(exp, 0).After(now):
		return nil, "'Expiration time' claim ('exp') must be a numeric value representing the future time at which the assertion expires"
	case time.Unix(exp, 0).After(now.Add(10 * time.Minute)):
		return nil, "'Expiration time' claim ('exp') is too far in the future"
	}
	return a, ""
}

// appTarget names, for the request log, the App a JWT says it is from (its iss, whether or not
// its signature holds): "app/<id>", or "app" when the token names none. Callers hold s.mu.
func (s *Server) appTarget(tok string) string {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return "app"
	}
	cb, err := base64.RawURLEncoding.DecodeString(parts[1])
	var c jwtClaims
	if err != nil || json.Unmarshal(cb, &c) != nil {
		return "app"
	}
	var iss string
	if json.Unmarshal(c.ISS, &iss) != nil {
		iss = strings.TrimSpace(string(c.ISS))
	}
	if a := s.apps[iss]; a != nil {
		return appKey(a.id)
	}
	return "app/" + iss
}

// wireAppConfig is webhook-config.
type wireAppConfig struct {
	URL         string `json:"url"`
	ContentType string `json:"content_type"`
	InsecureSSL string `json:"insecure_ssl"`
	Secret      string `json:"secret,omitempty"`
}

func appConfig(h *Hook) wireAppConfig {
	c := wireAppConfig{URL: h.Config.URL, ContentType: h.Config.ContentType, InsecureSSL: h.Config.InsecureSSL}
	if h.Config.Secret != "" {
		c.Secret = MaskedSecret
	}
	return c
}

// handleApp answers an /app route. Callers hold s.mu.
func (s *Server) handleApp(r *http.Request, cred string, hasAuth bool, rt route, body []byte) result {
	if !hasAuth {
		return basicError(http.StatusUnauthorized, "Requires authentication", docsRoot)
	}
	a, refusal := s.appFromJWT(cred)
	if a == nil {
		return basicError(http.StatusUnauthorized, refusal, docsRoot)
	}
	tg := s.targets[appKey(a.id)]
	h := tg.hooks[0]
	switch rt.op {
	case OpApp:
		return jsonResult(http.StatusOK, map[string]any{"id": a.id, "client_id": a.clientID, "slug": "app-" + tg.owner,
			"name": "App " + tg.owner, "events": a.events, "owner": map[string]any{"login": "acme", "type": "Organization"}})
	case OpAppConfig:
		return jsonResult(http.StatusOK, appConfig(h))
	case OpAppConfigUpdate:
		fields, errRes := decodeObject(body, rt)
		if errRes != nil {
			return *errRes
		}
		next := h.Config
		for k, raw := range fields {
			var v any
			_ = json.Unmarshal(raw, &v)
			switch k {
			case "url", "content_type", "secret":
				sv, ok := v.(string)
				if !ok {
					return validationFailed(rt, fieldError{Resource: "Hook", Code: "invalid", Field: k})
				}
				switch k {
				case "url":
					if u, err := url.Parse(sv); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
						return validationFailed(rt, fieldError{Resource: "Hook", Code: "custom", Field: "url", Message: "url is not supported because it isn't reachable over the public Internet"})
					}
					next.URL = sv
				case "content_type":
					if sv != "json" && sv != "form" {
						return validationFailed(rt, fieldError{Resource: "Hook", Code: "invalid", Field: "content_type"})
					}
					next.ContentType = sv
				default:
					next.Secret = sv
				}
			case "insecure_ssl":
				switch iv := v.(type) {
				case string:
					next.InsecureSSL = iv
				case float64:
					next.InsecureSSL = strconv.Itoa(int(iv))
				default:
					return validationFailed(rt, fieldError{Resource: "Hook", Code: "invalid", Field: "insecure_ssl"})
				}
			default:
				return validationFailed(rt, fieldError{Resource: "Hook", Code: "invalid", Field: k, Message: k + " is not a webhook config field"})
			}
		}
		h.Config, h.UpdatedAt = next, s.now()
		return jsonResult(http.StatusOK, appConfig(h))
	default: // the delivery log
		rt.hookID = h.ID
		return s.deliveryRoute(r, tg, *h, rt, baseURL(r, rt.prefix))
	}
}
