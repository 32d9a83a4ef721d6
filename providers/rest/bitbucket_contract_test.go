package rest_test

import (
	"net/http"
	"regexp"
	"slices"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/hookwarden/hookwarden/providers/providerstest"
	"github.com/hookwarden/hookwarden/providers/rest/fakes/bitbucket"
)

// Bitbucket's published OpenAPI description (swagger.v3.json, x-revision b5fdcc5422a3: the
// Webhooks paths and the webhook_subscription, paginated_webhook_subscriptions, object and
// error schemas), transcribed as the facts the contract test checks: which statuses each
// operation documents and what each answer's body must be. The document itself is not in this
// repository.

// bitbucketObject is components/schemas/object: every resource has a string type.
func bitbucketObject() *openapi3.Schema {
	return openapi3.NewObjectSchema().WithProperty("type", openapi3.NewStringSchema()).WithRequired([]string{"type"})
}

// bitbucketHook is components/schemas/webhook_subscription (allOf object and its own
// properties; additional properties allowed).
func bitbucketHook() *openapi3.Schema {
	events := make([]any, len(bitbucket.Events))
	for i, e := range bitbucket.Events {
		events[i] = e
	}
	own := openapi3.NewObjectSchema().
		WithProperty("uuid", openapi3.NewStringSchema()).
		WithProperty("url", openapi3.NewStringSchema().WithFormat("uri")).
		WithProperty("description", openapi3.NewStringSchema()).
		WithProperty("subject_type", openapi3.NewStringSchema().WithEnum("repository", "workspace")).
		WithProperty("subject", bitbucketObject()).
		WithProperty("active", openapi3.NewBoolSchema()).
		WithProperty("created_at", openapi3.NewDateTimeSchema()).
		WithProperty("events", openapi3.NewArraySchema().WithItems(openapi3.NewStringSchema().WithEnum(events...)).WithMinItems(1).WithUniqueItems(true)).
		WithProperty("secret_set", openapi3.NewBoolSchema()).
		WithProperty("secret", openapi3.NewStringSchema().WithMaxLength(128))
	return openapi3.NewAllOfSchema(bitbucketObject(), own)
}

// bitbucketPage is components/schemas/paginated_webhook_subscriptions: nothing but these
// properties.
func bitbucketPage() *openapi3.Schema {
	return openapi3.NewObjectSchema().
		WithProperty("size", openapi3.NewIntegerSchema().WithMin(0)).
		WithProperty("page", openapi3.NewIntegerSchema().WithMin(1)).
		WithProperty("pagelen", openapi3.NewIntegerSchema().WithMin(1)).
		WithProperty("next", openapi3.NewStringSchema().WithFormat("uri")).
		WithProperty("previous", openapi3.NewStringSchema().WithFormat("uri")).
		WithProperty("values", openapi3.NewArraySchema().WithItems(bitbucketHook()).WithUniqueItems(true)).
		WithoutAdditionalProperties()
}

// bitbucketError is components/schemas/error: error has a message, and only message, detail
// and data.
func bitbucketError() *openapi3.Schema {
	inner := openapi3.NewObjectSchema().
		WithProperty("message", openapi3.NewStringSchema()).
		WithProperty("detail", openapi3.NewStringSchema()).
		WithProperty("data", openapi3.NewObjectSchema()).
		WithRequired([]string{"message"}).
		WithoutAdditionalProperties()
	return openapi3.NewObjectSchema().WithProperty("type", openapi3.NewStringSchema()).WithProperty("error", inner).WithRequired([]string{"type"})
}

// bitbucketOperation is one documented operation: its statuses and the body each answers.
type bitbucketOperation struct {
	name     string
	method   string
	path     *regexp.Regexp
	statuses map[int]*openapi3.Schema // nil: no body (204)
}

// bitbucketUndocumented are statuses the description lists on no webhook operation that
// Bitbucket still sends on any (credentials missing, a rolling-hour rate limit: API request
// limits), and the 400 a body it refuses gets; each must be an error object.
var bitbucketUndocumented = []int{http.StatusBadRequest, http.StatusUnauthorized, http.StatusTooManyRequests}

func bitbucketOperations() []bitbucketOperation {
	const collection, item = `^/2\.0/(repositories/[^/]+/[^/]+|workspaces/[^/]+)/hooks$`, `^/2\.0/(repositories/[^/]+/[^/]+|workspaces/[^/]+)/hooks/[^/]+$`
	errs := func(codes ...int) map[int]*openapi3.Schema {
		m := map[int]*openapi3.Schema{}
		for _, c := range codes {
			m[c] = bitbucketError()
		}
		return m
	}
	with := func(m map[int]*openapi3.Schema, status int, s *openapi3.Schema) map[int]*openapi3.Schema {
		m[status] = s
		return m
	}
	return []bitbucketOperation{
		{"list", http.MethodGet, regexp.MustCompile(collection), with(errs(403, 404), 200, bitbucketPage())},
		{"create", http.MethodPost, regexp.MustCompile(collection), with(errs(403, 404), 201, bitbucketHook())},
		{"get", http.MethodGet, regexp.MustCompile(item), with(errs(404), 200, bitbucketHook())},
		{"update", http.MethodPut, regexp.MustCompile(item), with(errs(403, 404), 200, bitbucketHook())},
		{"delete", http.MethodDelete, regexp.MustCompile(item), with(errs(403, 404), 204, nil)},
	}
}

// newBitbucketContract checks every answer next gives against the description.
func newBitbucketContract(next http.Handler) *providerstest.Contract {
	ops := bitbucketOperations()
	return providerstest.NewContract(next, func(x providerstest.Exchange) (string, string) {
		r, rec := x.Request, x.Answer
		i := slices.IndexFunc(ops, func(op bitbucketOperation) bool { return op.method == r.Method && op.path.MatchString(r.URL.Path) })
		if i < 0 {
			return "", "no documented operation"
		}
		op := ops[i]
		schema, documented := op.statuses[rec.Code]
		if !documented && !slices.Contains(bitbucketUndocumented, rec.Code) {
			return op.name, "status not documented for " + op.name
		}
		if !documented {
			schema = bitbucketError()
		}
		if schema == nil {
			if rec.Body.Len() != 0 {
				return op.name, "a body where the description has none"
			}
			return op.name, ""
		}
		if rec.Code == http.StatusCreated && rec.Header().Get("Location") == "" {
			return op.name, "201 without Location"
		}
		v, err := providerstest.DecodeJSON(rec.Body.Bytes())
		if err != nil {
			return op.name, "the body is not JSON"
		}
		if err := schema.VisitJSON(v, openapi3.EnableFormatValidation()); err != nil {
			return op.name, err.Error()
		}
		return op.name, ""
	})
}
