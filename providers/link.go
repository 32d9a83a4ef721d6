package providers

import (
	"strings"
)

// ParseLinks reads RFC 8288 Link header values into rel → URL reference (the first link of a
// rel wins). It never fails: what it cannot read it skips, so a malformed header costs at most
// the links in it, and a paginated list then stops or refuses as the missing rel="next" implies.
func ParseLinks(values []string) map[string]string {
	out := map[string]string{}
	for _, v := range values {
		for {
			v = strings.TrimLeft(v, " \t,")
			if v == "" {
				break
			}
			if v[0] != '<' {
				// Not a link-value: skip to the next one.
				i := indexOutsideQuotes(v, ',')
				if i < 0 {
					break
				}
				v = v[i+1:]
				continue
			}
			end := strings.IndexByte(v, '>')
			if end < 0 {
				break
			}
			ref := strings.TrimSpace(v[1:end])
			v = v[end+1:]
			params := v
			if i := indexOutsideQuotes(v, ','); i >= 0 {
				params, v = v[:i], v[i+1:]
			} else {
				v = ""
			}
			parts := splitOutsideQuotes(params, ';')
			if strings.TrimSpace(parts[0]) != "" || strings.ContainsAny(ref, "<>") {
				continue // parameters start with ";", and a URI reference has no angle brackets
			}
			for _, p := range parts[1:] {
				name, val, ok := strings.Cut(p, "=")
				if !ok || !strings.EqualFold(strings.TrimSpace(name), "rel") {
					continue
				}
				val = strings.Trim(strings.TrimSpace(val), `"`)
				// rel may hold several space-separated relation types.
				for _, rel := range strings.Fields(val) {
					rel = strings.ToLower(rel)
					if _, seen := out[rel]; !seen && ref != "" {
						out[rel] = ref
					}
				}
			}
		}
	}
	return out
}

func indexOutsideQuotes(s string, sep byte) int {
	quoted := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"':
			quoted = !quoted
		case c == '\\' && quoted:
			i++
		case c == sep && !quoted:
			return i
		}
	}
	return -1
}

func splitOutsideQuotes(s string, sep byte) []string {
	var out []string
	for {
		i := indexOutsideQuotes(s, sep)
		if i < 0 {
			return append(out, s)
		}
		out = append(out, s[:i])
		s = s[i+1:]
	}
}
