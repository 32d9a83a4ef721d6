package fake

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// The delivery log routes, as GitHub's description gives them (hook-delivery-item,
// hook-delivery): the list is newest first and cursor-paged through Link rel="next", with
// status=success (status_code 200-399) or status=failure (400-599); a delivery that got no
// answer (status_code 0) is in neither class. POST .../attempts answers 202 {} and redelivers in
// the background, as GitHub answers first.

// cursorPrefix marks the fake's cursors: "v1_<id>" continues below delivery id.
const cursorPrefix = "v1_"

// deliveryRoute answers the three delivery routes of hook h. Callers hold s.mu.
func (s *Server) deliveryRoute(r *http.Request, tg *target, h Hook, rt route, base string) result {
	switch rt.op {
	case OpDeliveries:
		return s.listDeliveries(r, tg, h, rt, base)
	case OpDelivery:
		d, ok := s.findDelivery(h.ID, rt.deliveryID)
		if !ok {
			return basicError(http.StatusNotFound, "Not Found", docURL(rt))
		}
		return jsonResult(http.StatusOK, wireFull(d))
	default: // OpRedeliver
		d, ok := s.findDelivery(h.ID, rt.deliveryID)
		if !ok {
			return basicError(http.StatusNotFound, "Not Found", docURL(rt))
		}
		// The window counts from the event's first delivery to this hook, so redelivering a
		// redelivery does not extend it.
		first := d.Time
		for _, o := range s.logs[h.ID] {
			if o.GUID == d.GUID && o.Time.Before(first) {
				first = o.Time
			}
		}
		if s.now().Sub(first) > s.window {
			// GitHub documents the window (3 days) but not its refusal; the description lists
			// 422 (validation-error) for this operation, and the message is the fake's.
			return basicError(http.StatusUnprocessableEntity,
				"This delivery is older than "+windowWords(s.window)+" and can no longer be redelivered", docURL(rt))
		}
		res := jsonResult(http.StatusAccepted, struct{}{})
		res.jobs = []job{redeliveryJob(tg, h, d)}
		return res
	}
}

func windowWords(d time.Duration) string {
	if d%(24*time.Hour) == 0 {
		return strconv.Itoa(int(d/(24*time.Hour))) + " days"
	}
	return d.String()
}

// findDelivery looks delivery id up in hook hookID's log. Callers hold s.mu.
func (s *Server) findDelivery(hookID, id int64) (Delivery, bool) {
	for _, d := range s.logs[hookID] {
		if d.ID == id {
			return d.clone(), true
		}
	}
	return Delivery{}, false
}

func (s *Server) listDeliveries(r *http.Request, tg *target, h Hook, rt route, base string) result {
	q := r.URL.Query()
	perPage := DefaultPerPage
	if n, err := strconv.Atoi(q.Get("per_page")); err == nil && n > 0 {
		perPage = min(n, MaxPerPage)
	}
	size := perPage
	if s.pageSize > 0 {
		size = min(size, s.pageSize)
	}
	var keep func(int) bool
	switch st := q.Get("status"); st {
	case "":
		keep = func(int) bool { return true }
	case "success":
		keep = func(code int) bool { return code >= 200 && code <= 399 }
	case "failure":
		keep = func(code int) bool { return code >= 400 && code <= 599 }
	default:
		return validationFailed(rt, fieldError{Resource: "Hook", Code: "invalid", Field: "status", Message: "status must be success or failure"})
	}
	below := int64(-1)
	if c := q.Get("cursor"); c != "" {
		n, err := strconv.ParseInt(strings.TrimPrefix(c, cursorPrefix), 10, 64)
		if !strings.HasPrefix(c, cursorPrefix) || err != nil || n <= 0 {
			return basicError(http.StatusBadRequest, "Invalid cursor", docURL(rt))
		}
		below = n
	}
	var items []any
	var last int64
	more := false
	for _, d := range s.logOf(h.ID) {
		if (below > 0 && d.ID >= below) || !keep(d.Code) {
			continue
		}
		if len(items) == size {
			more = true
			break
		}
		items = append(items, wireItem(d))
		last = d.ID
	}
	if items == nil {
		items = []any{}
	}
	res := jsonResult(http.StatusOK, items)
	if more {
		v := url.Values{}
		for k, vs := range q {
			v[k] = vs
		}
		v.Set("per_page", strconv.Itoa(perPage))
		v.Set("cursor", cursorPrefix+strconv.FormatInt(last, 10))
		res.set("Link", "<"+base+"/"+tg.hookPath(h.ID)+"/deliveries?"+v.Encode()+`>; rel="next"`)
	}
	return res
}

// wireDelivery is hook-delivery-item; wireDeliveryFull is hook-delivery.
type wireDelivery struct {
	ID             int64   `json:"id"`
	GUID           string  `json:"guid"`
	DeliveredAt    string  `json:"delivered_at"`
	Redelivery     bool    `json:"redelivery"`
	Duration       float64 `json:"duration"`
	Status         string  `json:"status"`
	StatusCode     int     `json:"status_code"`
	Event          string  `json:"event"`
	Action         *string `json:"action"`
	InstallationID *int64  `json:"installation_id"`
	RepositoryID   *int64  `json:"repository_id"`
	ThrottledAt    *string `json:"throttled_at"`
}

type wireDeliveryFull struct {
	wireDelivery
	URL     string `json:"url"`
	Request struct {
		Headers map[string]string `json:"headers"`
		Payload json.RawMessage   `json:"payload"`
	} `json:"request"`
	Response struct {
		Headers map[string]string `json:"headers"`
		Payload *string           `json:"payload"`
	} `json:"response"`
}

func wireItem(d Delivery) wireDelivery {
	w := wireDelivery{
		ID: d.ID, GUID: d.GUID, DeliveredAt: d.Time.UTC().Format(time.RFC3339), Redelivery: d.Redelivery,
		Duration: float64(d.Duration.Milliseconds()) / 1000, Status: d.Message, StatusCode: d.Code, Event: d.Event,
	}
	if d.Action != "" {
		a := d.Action
		w.Action = &a
	}
	if d.RepositoryID != 0 {
		id := d.RepositoryID
		w.RepositoryID = &id
	}
	return w
}

func wireFull(d Delivery) wireDeliveryFull {
	w := wireDeliveryFull{wireDelivery: wireItem(d), URL: d.URL}
	w.Request.Headers = d.Request.Headers
	// The description types the payload as an object (or null).
	var obj map[string]json.RawMessage
	if json.Unmarshal(d.Request.Payload, &obj) == nil && obj != nil {
		w.Request.Payload = d.Request.Payload
	} else {
		w.Request.Payload = json.RawMessage("null")
	}
	if d.Response.Headers != nil {
		w.Response.Headers = d.Response.Headers
		body := d.Response.Body
		w.Response.Payload = &body
	}
	return w
}
