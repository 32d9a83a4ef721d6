package rest

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// recover checks the recover section; every problem names its field path under recover.
func (ck *checker) recover(r *RecoverSpec) {
	if r.Window <= 0 || r.Window > MaxRecoverWindow {
		ck.add("recover.window", "%s is not between 0 (exclusive: how far back the API keeps deliveries is required) and %s", time.Duration(r.Window), time.Duration(MaxRecoverWindow))
	}
	switch r.Style {
	case RecoverRedeliver:
		if r.Range != nil {
			ck.add("recover.range", "only for style %s", RecoverRange)
		}
		if r.Redeliver == nil {
			ck.add("recover.redeliver", "required for style %s", RecoverRedeliver)
			return
		}
		ck.redeliver(r.Redeliver)
	case RecoverRange:
		if r.Redeliver != nil {
			ck.add("recover.redeliver", "only for style %s", RecoverRedeliver)
		}
		if r.Range == nil {
			ck.add("recover.range", "required for style %s", RecoverRange)
			return
		}
		ck.op("recover.range", &r.Range.Op, "ID")
		if r.Range.Method != "" && r.Range.Method != "POST" {
			ck.add("recover.range.method", "the range request is a POST with the time in its body, got %s", r.Range.Method)
		}
		ck.jsonPath("recover.range.since", r.Range.Since, true)
	default:
		ck.add("recover.style", "want %s or %s, got %q", RecoverRedeliver, RecoverRange, r.Style)
	}
}

func (ck *checker) redeliver(r *RedeliverSpec) {
	const p = "recover.redeliver"
	for _, l := range []struct {
		path string
		op   *ListOp
	}{{p + ".log", &r.Log}, {p + ".succeeded", r.Succeeded}} {
		if l.op == nil {
			continue
		}
		ck.op(l.path, &l.op.Op, "ID")
		if !strings.Contains(l.op.Path, ".ID") {
			ck.add(l.path+".path", "%q does not name the registration ({{.ID}}): the log is per registration", l.op.Path)
		}
		ck.jsonPath(l.path+".items", l.op.Items, false)
		ck.pagination(l.path+".pagination", l.op.Pagination)
	}
	e := r.Entry
	ck.jsonPath(p+".entry.handle", e.Handle, true)
	ck.jsonPath(p+".entry.id", e.ID, true)
	ck.jsonPath(p+".entry.at", e.At, true)
	ck.jsonPath(p+".entry.status", e.Status, true)
	ck.jsonPath(p+".entry.type", e.Type, false)
	if len(e.Types) > 0 && e.Type == "" {
		ck.add(p+".entry.types", "needs entry.type, the path of the value it maps")
	}
	for _, k := range sortedKeys(e.Types) {
		if e.Types[k] == "" || e.Types[k] == "*" {
			ck.add(p+".entry.types."+k, "%q is not an event name", e.Types[k])
		}
	}
	ck.op(p+".resend", &r.Resend.Op, "ID", "Handle")
	if !strings.Contains(r.Resend.Path, ".Handle") {
		ck.add(p+".resend.path", "%q does not name the log entry ({{.Handle}}): every resend would ask for the same thing", r.Resend.Path)
	}
	if m := r.Resend.Method; m != "" && m != "POST" && m != "PUT" {
		ck.add(p+".resend.method", "want POST (the default) or PUT, got %s", m)
	}
	ck.jsonPath(p+".resend.status", r.Resend.Status, false)
	ck.matches(p+".resend.retryLater", r.Resend.RetryLater)
	if rt := r.Rate; rt != nil {
		if rt.Requests <= 0 {
			ck.add(p+".rate.requests", "must be positive")
		}
		if rt.Period <= 0 || time.Duration(rt.Period) > time.Hour {
			ck.add(p+".rate.period", "%s is not between 0 (exclusive) and 1h", time.Duration(rt.Period))
		}
	}
}

// health checks the health section.
func (ck *checker) health(h *HealthSpec) {
	if len(h.Disabled)+len(h.Failing)+len(h.Healthy) == 0 && h.DisabledUntil == "" {
		ck.add("health", "names no field: set disabled, disabledUntil, failing or healthy")
	}
	for _, c := range []struct {
		path  string
		conds []Condition
	}{{"health.disabled", h.Disabled}, {"health.failing", h.Failing}, {"health.healthy", h.Healthy}} {
		for i, cond := range c.conds {
			at := fmt.Sprintf("%s[%d]", c.path, i)
			ck.jsonPath(at+".path", cond.Path, true)
			if len(cond.Values) == 0 {
				ck.add(at+".values", "required: the values under which the condition holds")
			}
			for j, v := range cond.Values {
				if !json.Valid(v) {
					ck.add(fmt.Sprintf("%s.values[%d]", at, j), "is not a JSON value")
				}
			}
		}
	}
	ck.jsonPath("health.disabledUntil", h.DisabledUntil, false)
	if h.Reenable != nil {
		ck.op("health.reenable", h.Reenable, "ID")
	}
}
