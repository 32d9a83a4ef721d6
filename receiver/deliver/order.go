package deliver

import (
	"strings"

	"github.com/tidwall/gjson"

	"github.com/hookwarden/hookwarden/receiver/store"
)

// OrderKey is the value of path in ev, the key a sink with ordering PerKey orders it by: id,
// type, subject (Stripe: data.object.id), or data followed by dot-separated fields of the
// payload (data.object.customer is the field object.customer of the JSON body). A missing
// field is the empty key: such events are ordered together.
func OrderKey(path string, ev store.Event) string {
	switch path {
	case "id":
		return ev.EventID
	case "type":
		return cloudEventType(ev)
	case "subject":
		return gjson.GetBytes(ev.Payload, "data.object.id").String()
	}
	field, ok := strings.CutPrefix(path, "data.")
	if !ok {
		return ""
	}
	return gjson.GetBytes(ev.Payload, gjsonPath(field)).String()
}

// gjsonPath escapes the characters gjson reads as syntax in dot-separated field names.
func gjsonPath(fields string) string {
	var b strings.Builder
	for _, r := range fields {
		if strings.ContainsRune(`*?#|@\!=<>%"`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
