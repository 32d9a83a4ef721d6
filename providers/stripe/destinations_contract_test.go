package stripe_test

import (
	"net/http"
	"regexp"
	"slices"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/hookwarden/hookwarden/providers/providerstest"
)

// Stripe's published description of v2 event destinations (docs.stripe.com/api/v2/core/
// event_destinations; stripe-go's v2core_eventdestination.go and _params.go, generated from
// Stripe's OpenAPI spec), transcribed as the facts the contract test checks: the fields a
// destination always carries and their types, the list page, the deleted object, the error
// object, and what a create must send. The description itself is not in this repository.

func v2Destination() *openapi3.Schema {
	str := openapi3.NewStringSchema
	we := openapi3.NewObjectSchema().WithProperty("url", str()).WithProperty("signing_secret", str())
	return openapi3.NewObjectSchema().
		WithProperty("id", str()).
		WithProperty("object", str().WithEnum("v2.core.event_destination")).
		WithProperty("type", str().WithEnum("webhook_endpoint", "amazon_eventbridge", "azure_event_grid")).
		WithProperty("event_payload", str().WithEnum("thin", "snapshot")).
		WithProperty("enabled_events", openapi3.NewArraySchema().WithItems(str())).
		WithProperty("events_from", openapi3.NewArraySchema().WithItems(str())).
		WithProperty("name", str()).
		WithProperty("description", str().WithNullable()).
		WithProperty("metadata", openapi3.NewObjectSchema().WithAdditionalProperties(str())).
		WithProperty("status", str().WithEnum("enabled", "disabled")).
		WithProperty("status_details", openapi3.NewObjectSchema().WithNullable().WithProperty("disabled",
			openapi3.NewObjectSchema().WithProperty("reason", str()).WithRequired([]string{"reason"}))).
		WithProperty("snapshot_api_version", str()).
		WithProperty("created", openapi3.NewDateTimeSchema()).
		WithProperty("updated", openapi3.NewDateTimeSchema()).
		WithProperty("livemode", openapi3.NewBoolSchema()).
		WithProperty("webhook_endpoint", we).
		WithProperty("amazon_eventbridge", openapi3.NewObjectSchema()).
		WithRequired([]string{"id", "object", "type", "event_payload", "enabled_events", "name", "description", "status", "created", "updated", "livemode"})
}

func v2Page() *openapi3.Schema {
	return openapi3.NewObjectSchema().
		WithProperty("data", openapi3.NewArraySchema().WithItems(v2Destination())).
		WithProperty("next_page_url", openapi3.NewStringSchema().WithNullable()).
		WithProperty("previous_page_url", openapi3.NewStringSchema().WithNullable()).
		WithRequired([]string{"data", "next_page_url", "previous_page_url"})
}

func v2Deleted() *openapi3.Schema {
	return openapi3.NewObjectSchema().WithProperty("id", openapi3.NewStringSchema()).
		WithProperty("object", openapi3.NewStringSchema()).WithRequired([]string{"id", "object"})
}

func v2ErrorSchema() *openapi3.Schema {
	inner := openapi3.NewObjectSchema().WithProperty("type", openapi3.NewStringSchema()).
		WithProperty("code", openapi3.NewStringSchema()).WithProperty("message", openapi3.NewStringSchema()).
		WithRequired([]string{"type", "message"})
	return openapi3.NewObjectSchema().WithProperty("error", inner).WithRequired([]string{"error"})
}

// v2CreateBody is what a create must send (V2CoreEventDestinationCreateParams: name, type,
// event_payload and enabled_events without omitempty).
func v2CreateBody() *openapi3.Schema {
	return openapi3.NewObjectSchema().
		WithProperty("name", openapi3.NewStringSchema()).
		WithProperty("type", openapi3.NewStringSchema().WithEnum("webhook_endpoint", "amazon_eventbridge", "azure_event_grid")).
		WithProperty("event_payload", openapi3.NewStringSchema().WithEnum("thin", "snapshot")).
		WithProperty("enabled_events", openapi3.NewArraySchema().WithItems(openapi3.NewStringSchema()).WithMinItems(1)).
		WithProperty("include", openapi3.NewArraySchema().WithItems(openapi3.NewStringSchema().WithEnum("webhook_endpoint.url", "webhook_endpoint.signing_secret"))).
		WithRequired([]string{"name", "type", "event_payload", "enabled_events"})
}

type v2Operation struct {
	name    string
	method  string
	path    *regexp.Regexp
	request *openapi3.Schema // nil: no body checked
	answer  *openapi3.Schema // of a 200
}

func v2Operations() []v2Operation {
	coll, item := regexp.MustCompile(`^/v2/core/event_destinations$`), regexp.MustCompile(`^/v2/core/event_destinations/[^/]+$`)
	action := func(a string) *regexp.Regexp {
		return regexp.MustCompile(`^/v2/core/event_destinations/[^/]+/` + a + `$`)
	}
	return []v2Operation{
		{"list", http.MethodGet, coll, nil, v2Page()},
		{"create", http.MethodPost, coll, v2CreateBody(), v2Destination()},
		{"retrieve", http.MethodGet, item, nil, v2Destination()},
		{"update", http.MethodPost, item, nil, v2Destination()},
		{"delete", http.MethodDelete, item, nil, v2Deleted()},
		{"enable", http.MethodPost, action("enable"), nil, v2Destination()},
		{"disable", http.MethodPost, action("disable"), nil, v2Destination()},
	}
}

// newV2Contract checks every v2 exchange next serves: the request's version header and body,
// and the answer's body by status.
func newV2Contract(next http.Handler) *providerstest.Contract {
	ops := v2Operations()
	return providerstest.NewContract(next, func(x providerstest.Exchange) (string, string) {
		r, rec := x.Request, x.Answer
		if !strings.HasPrefix(r.URL.Path, "/v2/") {
			return "", ""
		}
		i := slices.IndexFunc(ops, func(op v2Operation) bool { return op.method == r.Method && op.path.MatchString(r.URL.Path) })
		if i < 0 {
			return "", "no documented operation"
		}
		op := ops[i]
		if r.Header.Get("Stripe-Version") == "" {
			return op.name, "the request names no Stripe-Version"
		}
		if op.request != nil {
			if r.Header.Get("Content-Type") != "application/json" {
				return op.name, "a v2 body that is not application/json"
			}
			v, err := providerstest.DecodeJSON(x.Body)
			if err != nil {
				return op.name, "the request body is not JSON"
			}
			if err := op.request.VisitJSON(v); err != nil {
				return op.name, "request: " + err.Error()
			}
		}
		schema := op.answer
		if rec.Code != http.StatusOK {
			schema = v2ErrorSchema()
		}
		v, err := providerstest.DecodeJSON(rec.Body.Bytes())
		if err != nil {
			return op.name, "the answer is not JSON"
		}
		if err := schema.VisitJSON(v, openapi3.EnableFormatValidation()); err != nil {
			return op.name, "answer: " + err.Error()
		}
		return op.name, ""
	})
}
