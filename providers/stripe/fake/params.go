package fake

import (
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Stripe's form encoding (what stripe-go's form package emits):
//   scalars   name=value
//   arrays    name[0]=a&name[1]=b   (curl users also send name[]=a)
//   hashes    name[key]=value
//   "unset"   name=   (an empty value; for a hash, clears it)

// topName is the parameter a form key belongs to: "metadata" for "metadata[k]".
func topName(key string) string {
	name, _, _ := strings.Cut(key, "[")
	return name
}

// allowOnly rejects the first (in sorted order, for stable messages) parameter not allowed.
func allowOnly(p url.Values, allowed ...string) *apiError {
	keys := make([]string, 0, len(p))
	for k := range p {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if name := topName(k); !slices.Contains(allowed, name) {
			return invalid(http.StatusBadRequest, "parameter_unknown", name, "Received unknown parameter: %s", name)
		}
	}
	return nil
}

// nested reports whether p has keys of the form name[...].
func nested(p url.Values, name string) bool {
	for k := range p {
		if strings.HasPrefix(k, name+"[") {
			return true
		}
	}
	return false
}

// scalar returns the last value of a plain parameter and whether it was sent.
func scalar(p url.Values, name string) (string, bool, *apiError) {
	if nested(p, name) {
		return "", false, invalid(http.StatusBadRequest, "", name, "Invalid %s: must be a string", name)
	}
	vs, ok := p[name]
	if !ok || len(vs) == 0 {
		return "", false, nil
	}
	return vs[len(vs)-1], true, nil
}

// cannotUnset is Stripe's answer to an empty value for a parameter that cannot be emptied.
func cannotUnset(name string) *apiError {
	return invalid(http.StatusBadRequest, "parameter_invalid_empty", name,
		"You passed an empty string for '%s'. We assume empty values are an attempt to unset a parameter; however '%s' cannot be unset. You should remove '%s' from your request or supply a non-empty value.",
		name, name, name)
}

func urlParam(p url.Values) (string, bool, *apiError) {
	v, ok, err := scalar(p, "url")
	if err != nil || !ok {
		return "", ok, err
	}
	if v == "" {
		return "", true, cannotUnset("url")
	}
	u, perr := url.Parse(v)
	if perr != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", true, invalid(http.StatusBadRequest, "url_invalid", "url", "Invalid URL: %s", v)
	}
	return v, true, nil
}

func boolParam(p url.Values, name string) (val, ok bool, err *apiError) {
	v, ok, err := scalar(p, name)
	if err != nil || !ok {
		return false, ok, err
	}
	switch v {
	case "true":
		return true, true, nil
	case "false":
		return false, true, nil
	}
	return false, true, invalid(http.StatusBadRequest, "", name, "Invalid boolean: %s", v)
}

// listParam decodes an array parameter. Indexed keys are ordered by their number, not as
// strings, so element 10 follows element 9.
func listParam(p url.Values, name string) ([]string, bool, *apiError) {
	type item struct {
		idx int
		val string
	}
	var items []item
	var plain []string
	present := false
	for k, vs := range p {
		if k == name || k == name+"[]" {
			present = true
			for _, v := range vs {
				if v != "" || k != name {
					plain = append(plain, v)
				}
			}
			continue
		}
		rest, ok := strings.CutPrefix(k, name+"[")
		if !ok {
			continue
		}
		present = true
		n, err := strconv.Atoi(strings.TrimSuffix(rest, "]"))
		if err != nil || !strings.HasSuffix(rest, "]") || n < 0 {
			return nil, true, invalid(http.StatusBadRequest, "", name, "Invalid array")
		}
		for _, v := range vs {
			items = append(items, item{n, v})
		}
	}
	if !present {
		return nil, false, nil
	}
	sort.SliceStable(items, func(i, j int) bool { return items[i].idx < items[j].idx })
	out := make([]string, 0, len(items)+len(plain))
	for _, it := range items {
		out = append(out, it.val)
	}
	out = append(out, plain...)
	if len(out) == 0 || slices.Contains(out, "") {
		return nil, true, cannotUnset(name)
	}
	return out, true, nil
}

// metadataParam decodes metadata[k]=v pairs (v == "" means unset k) and reports whether
// metadata= (empty) asked to clear all keys.
func metadataParam(p url.Values) (set map[string]string, clearAll bool, err *apiError) {
	if vs, ok := p["metadata"]; ok {
		for _, v := range vs {
			if v != "" {
				return nil, false, invalid(http.StatusBadRequest, "", "metadata", "Invalid hash")
			}
		}
		clearAll = true
	}
	for k, vs := range p {
		rest, ok := strings.CutPrefix(k, "metadata[")
		if !ok {
			continue
		}
		mk, ok := strings.CutSuffix(rest, "]")
		if !ok || mk == "" || strings.ContainsAny(mk, "[]") {
			return nil, false, invalid(http.StatusBadRequest, "", "metadata", "Invalid hash")
		}
		if set == nil {
			set = map[string]string{}
		}
		set[mk] = vs[len(vs)-1]
	}
	return set, clearAll, nil
}
