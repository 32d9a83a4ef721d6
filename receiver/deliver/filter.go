package deliver

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/cel-go/cel"

	"github.com/hookwarden/hookwarden/internal/eventfilter"
	"github.com/hookwarden/hookwarden/receiver/store"
)

// Filter is a compiled spec.delivery.sinks[].filter: a CEL expression over the event's type,
// source, subject, id, time and data (the payload decoded as JSON) that selects the events a
// sink gets. It is safe for concurrent use.
type Filter struct {
	expr string
	prg  cel.Program
}

// CompileFilter compiles expr (eventfilter.Compile: the manager checks spec filters with the
// same compiler). Its error is the CEL issue text, fit for a condition or a log line.
func CompileFilter(expr string) (*Filter, error) {
	prg, err := eventfilter.Compile(expr)
	if err != nil {
		return nil, err
	}
	return &Filter{expr: expr, prg: prg}, nil
}

// String is the filter's expression.
func (f *Filter) String() string { return f.expr }

// Match evaluates the filter on ev (source is the CloudEvent source the sinks see). A payload
// that is not JSON has data null. An error (a field the event does not have, a cost over the
// limit) is the event's and this filter's: the caller retries or dead-letters that job alone.
func (f *Filter) Match(ev store.Event, source string) (bool, error) {
	var data any
	if len(ev.Payload) > 0 {
		if err := json.Unmarshal(ev.Payload, &data); err != nil {
			data = nil
		}
	}
	vars := map[string]any{
		"type":    cloudEventType(ev),
		"source":  source,
		"subject": subjectOf(data),
		"id":      ev.EventID,
		"time":    ev.ReceivedAt.UTC().Truncate(time.Microsecond),
		"data":    data,
	}
	out, _, err := f.prg.Eval(vars)
	if err != nil {
		return false, fmt.Errorf("filter failed on this event: %w", err)
	}
	b, ok := out.Value().(bool)
	if !ok {
		return false, errors.New("filter failed on this event: its result is not a bool")
	}
	return b, nil
}

// subjectOf is the CloudEvent subject of an event's data: the id of the object it is about,
// where the provider says (Stripe: data.object.id), else empty.
func subjectOf(data any) string {
	m, _ := data.(map[string]any)
	d, _ := m["data"].(map[string]any)
	o, _ := d["object"].(map[string]any)
	id, _ := o["id"].(string)
	return id
}

// cloudEventType is ce-type: the provider's event type, or DefaultEventType without one.
func cloudEventType(ev store.Event) string {
	if ev.EventType == "" {
		return DefaultEventType
	}
	return ev.EventType
}
